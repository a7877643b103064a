"""``python -m itermask.views <job dir>``: a finished job's per-example views as one page, and the job's console
summary naming that command (where to look after a single run)."""

import json

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


def test_a_folder_without_a_job_gets_one_line_and_status_2(tmp_path, capsys):
    assert main([str(tmp_path / "nowhere")]) == 2
    assert "is not a folder: give a job folder" in capsys.readouterr().err
    assert main([str(tmp_path)]) == 2
    assert "no per-example table" in capsys.readouterr().err


def test_a_jobs_summary_ends_with_where_to_look_before_a_model_warning(tmp_path, tokenizer):
    job = write_tiny_sweep(tmp_path / "sweep", tokenizer, seeds=(0,)) / "0"
    result = json.loads((job / "results.json").read_text())
    lines = summary_lines(result, job)
    assert lines[-1] == f"per-example views (heatmaps, masking trajectories): python -m itermask.views {job}"
    assert not any("itermask.views" in line for line in summary_lines(result))  # no folder: nothing to name
    flagged = summary_lines({**result, "model_check": {"meaningful": False, "reasons": ["one class"]}}, job)
    assert "itermask.views" in flagged[-2]
