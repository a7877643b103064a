"""``python -m itermask.views <job dir>``: a finished job's per-example views as one page, and the job's console
summary naming that command (where to look after a single run)."""

import json

import pytest
from tiny_sweep import write_tiny_sweep

from itermask.console import summary_lines
from itermask.views.__main__ import main


def test_the_command_writes_the_jobs_views_beside_its_results(tmp_path, tokenizer, capsys):
    job = write_tiny_sweep(tmp_path / "sweep", tokenizer, seeds=(0,)) / "0"
    assert main([str(job)]) == 0
    page = job / "example_views.html"
    assert capsys.readouterr().out.strip() == str(page)
    html = page.read_text()
    n_examples = json.loads((job / "results.json").read_text())["n_evaluated"]
    assert html.count('<section class="imx"') == n_examples and "<details" in html
    assert main([str(job), "--examples", "1", "--out", str(tmp_path / "one.html")]) == 0
    assert (tmp_path / "one.html").read_text().count('<section class="imx"') == 1


def test_what_is_not_a_finished_job_gets_one_line_and_status_2(tmp_path, tokenizer, capsys):
    assert main([str(tmp_path / "nowhere")]) == 2
    assert "is not a folder: give a job folder" in capsys.readouterr().err
    assert main([str(tmp_path)]) == 2
    assert "holds no results.json: give a finished job's folder" in capsys.readouterr().err
    sweep = write_tiny_sweep(tmp_path / "sweep", tokenizer, seeds=(0, 1))
    assert main([str(sweep)]) == 2  # a multirun folder: its jobs named
    assert f"is a multirun folder: give one of its jobs (0, 1), e.g. python -m itermask.views {sweep / '0'}" in (
        capsys.readouterr().err
    )
    (tmp_path / "failed").mkdir()
    (tmp_path / "failed" / "failed.json").write_text("{}")
    assert main([str(tmp_path / "failed")]) == 2 and "failed: see" in capsys.readouterr().err
    (sweep / "1" / "results.json").write_text("{broken")
    assert main([str(sweep / "1")]) == 2 and "results.json is not valid JSON" in capsys.readouterr().err
    assert main([str(sweep / "0"), "--out", str(tmp_path)]) == 2  # a folder: cannot be written as a page
    assert "cannot write the page to" in capsys.readouterr().err
    for bad in ("0", "abc"):
        with pytest.raises(SystemExit):
            main([str(sweep / "0"), "--examples", bad])
        assert "must be an integer >= 1" in capsys.readouterr().err


def test_a_jobs_summary_ends_with_where_to_look_before_a_model_warning(tmp_path, tokenizer):
    job = write_tiny_sweep(tmp_path / "sweep", tokenizer, seeds=(0,)) / "0"
    result = json.loads((job / "results.json").read_text())
    lines = summary_lines(result, job)
    assert lines[-1] == f"per-example views (heatmaps, masking trajectories): python -m itermask.views {job}"
    assert not any("itermask.views" in line for line in summary_lines(result))  # no folder: nothing to name
    flagged = summary_lines({**result, "model_check": {"meaningful": False, "reasons": ["one class"]}}, job)
    assert "itermask.views" in flagged[-2]
