"""Report sections (itermask.reporting.sections): a section node with a ``_target_`` in the sweep's
multirun.yaml or the report callback's settings is built, writes its figures once and opens the report;
reporting imports no study."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf
from results_helpers import make_result, write_sweep

from itermask.reporting import ReportSection, build_report, write_report
from itermask.reporting.sections import build_section, report_sections

ROOT = Path(__file__).resolve().parents[2]
CALLS: list[str] = []


class Echo:
    """A section that writes one text file and says ``text`` under its own heading."""

    def __init__(self, text: str, title: str = "Echo") -> None:
        self.text, self.title = text, title

    def figures(self, report, files, written, images) -> None:
        CALLS.append("figures")
        files.mkdir(parents=True, exist_ok=True)
        (files / "echo.txt").write_text(self.text)
        written["echo.txt"] = files / "echo.txt"

    def markdown(self, report, images) -> list[str]:
        CALLS.append("markdown")
        return [f"## {self.title}", "", self.text, ""]


TARGET = f"{__name__}.Echo"


def _sweep(root: Path, report_node: dict | None) -> Path:
    write_sweep(root, [make_result(s, accuracy=0.8 + 0.01 * s, aopc=0.1 + 0.02 * s) for s in range(3)])
    if report_node is not None:
        (root / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {"callbacks": {"report": report_node}}}))
    return root


def test_a_section_node_of_multirun_yaml_opens_the_report(tmp_path):
    CALLS.clear()
    node = {
        "_target_": "itermask.callbacks.ReportCallback",
        "confidence": 0.95,
        "echo": {"_target_": TARGET, "text": "hi"},
    }
    root = _sweep(tmp_path / "sweep", node)
    written = write_report(build_report(root))
    text = written["report.md"].read_text()
    assert text.index("## Echo") < text.index("## What this run found") < text.index("## Headline")
    assert "<h2>Echo</h2>\n<p>hi</p>" in (root / "report.html").read_text()
    assert written["echo.txt"].read_text() == "hi"
    assert CALLS == ["figures", "markdown", "markdown"]  # figures once; the Markdown for report.md and .html


def test_sections_come_in_order_and_the_settings_win_over_multirun_yaml(tmp_path):
    root = _sweep(tmp_path / "sweep", {"echo": {"_target_": TARGET, "text": "from multirun.yaml"}})
    report = build_report(root)
    assert [s.text for s in report_sections(report)] == ["from multirun.yaml"]  # pyright: ignore[reportAttributeAccessIssue]
    report.settings["b"] = {"_target_": TARGET, "text": "b", "title": "B"}
    report.settings["a"] = Echo("a", "A")  # a section already built is used as it is
    assert [s.text for s in report_sections(report)] == ["b", "a"]  # pyright: ignore[reportAttributeAccessIssue]
    text = write_report(report)["report.md"].read_text()
    assert text.index("## B") < text.index("## A") < text.index("## Headline") and "from multirun.yaml" not in text


def test_the_report_callback_hands_its_section_nodes_to_the_report(tmp_path):
    from itermask.callbacks import ReportCallback

    root = _sweep(tmp_path / "sweep", None)
    config = OmegaConf.create({"task_name": "evaluate", "hydra": {"sweep": {"dir": str(root)}}, "logger": None})
    node = OmegaConf.create({"_target_": TARGET, "text": "from the callback"})
    ReportCallback(wandb=False, echo=node, none=None).on_multirun_end(config)
    assert "## Echo\n\nfrom the callback" in (root / "report.md").read_text()
    with pytest.raises(ValueError, match="hydra.callbacks.report.confidnce is not a report section node"):
        ReportCallback(confidnce=0.9)
    with pytest.raises(ValueError, match="hydra.callbacks.report.echo is not a report section node"):
        ReportCallback(echo={"text": "no target"})


def test_a_node_without_a_target_is_left_out_with_a_warning(tmp_path, caplog):
    root = _sweep(tmp_path / "sweep", {"claims": {"score": "x"}, "confidence": 0.95})
    with caplog.at_level(logging.WARNING):
        assert report_sections(build_report(root)) == []
    assert "hydra.callbacks.report.claims in" in caplog.text and "has no _target_" in caplog.text


def test_build_section_checks_the_node():
    assert isinstance(build_section("echo", {"_target_": TARGET, "text": "x"}), ReportSection)
    with pytest.raises(ValueError, match="hydra.callbacks.report.echo is not a report section"):
        build_section("echo", {"text": "x"})
    with pytest.raises(ValueError, match="_target_=pathlib.Path is not a report section class"):
        build_section("echo", {"_target_": "pathlib.Path"})


def test_the_claims_are_a_section_of_the_paper_preset():
    from itermask.studies.robust_infidelity import ClaimSettings, RobustInfidelity

    paper = yaml.safe_load((ROOT / "conf" / "experiment" / "paper.yaml").read_text())
    node = paper["hydra"]["callbacks"]["report"]["claims"]
    section = build_section("claims", node)
    assert isinstance(section, RobustInfidelity) and isinstance(section, ReportSection)
    assert section.settings == ClaimSettings.from_dict({k: v for k, v in node.items() if k != "_target_"})
    with pytest.raises(ValueError, match="unknown key.*margin"):
        build_section("claims", {**node, "margin": 0.1})


def test_reporting_imports_no_study():
    """The engine knows no study: no module under itermask/reporting imports itermask.studies."""
    for path in sorted((ROOT / "src" / "itermask" / "reporting").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n.startswith("itermask.studies") for n in names), f"{path} imports {names}"
