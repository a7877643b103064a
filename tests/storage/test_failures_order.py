"""The failed jobs of a sweep are listed in natural folder order (job 2 before job 10), as Hydra numbers them."""

from itermask.storage.failures import failed_jobs, write_failure


def test_failed_jobs_are_in_natural_order(tmp_path):
    for job in ("10", "2", "1", "0", "21"):
        write_failure(tmp_path / job, ValueError(f"bad {job}"), [f"seed={job}"], job)
    found = failed_jobs(tmp_path)
    assert [job for job, _ in found] == ["0", "1", "2", "10", "21"]
    assert found[3][1]["error"] == "ValueError: bad 10"
