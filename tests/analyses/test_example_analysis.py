"""Adding an analysis is one module plus one YAML: an example analysis written here, outside the package,
reaches the result file, the report's rows and headline, and the console summary without editing any
other file. It counts the evaluated examples whose decision flips at the first masking step."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from transformers import BertConfig, BertForSequenceClassification

from itermask import console, pipeline
from itermask.analyses import ANALYSES
from itermask.reporting import build_report, write_report

ROOT = Path(__file__).resolve().parents[2]

# the whole analysis: one module ...
MODULE = '''
from itermask.analyses import Analysis, AnalysisOutput
from itermask.core.measures import decision_flips


class FirstStepFlips(Analysis):
    """The examples whose decision flips at the first masking step, per schedule of the method."""

    name = "first_step_flips"

    def run(self, inputs, context, curves):
        flips = {s: int(decision_flips(c)[:, 1].sum()) for s, c in curves[curves.method].items()}
        return AnalysisOutput({self.name: {"method": curves.method, "flips": flips}})

    @classmethod
    def report_measures(cls, result):
        section = result[cls.name]
        return {(section["method"], s, "first_step_flips"): float(n) for s, n in section["flips"].items()}

    @classmethod
    def headline_lines(cls, summary):
        rows = summary[summary.score == "first_step_flips"]
        return [f"First-step flips ({r.schedule}): {r.mean:g}" for r in rows.itertuples()]

    @classmethod
    def summary_lines(cls, result):
        flips = (result.get(cls.name) or {}).get("flips")
        return [f"first-step flips: {flips}"] if flips is not None else []
'''
# ... and one YAML, a config group option of the top-level node
YAML = "_target_: first_step_flips.FirstStepFlips\n"


def test_an_analysis_is_one_module_and_one_yaml(tmp_path, monkeypatch, tokenizer):
    (tmp_path / "first_step_flips.py").write_text(MODULE)
    (tmp_path / "conf" / "first_step_flips").mkdir(parents=True)
    (tmp_path / "conf" / "first_step_flips" / "on.yaml").write_text(YAML)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("ITERMASK_CACHE", str(tmp_path / "cache"))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
    )
    BertForSequenceClassification(config).save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    job = tmp_path / "sweep" / "0"
    overrides = [
        f"hydra.searchpath=[file://{tmp_path}/conf]",
        "+first_step_flips=on",
        "analyses=[ood,attack,first_step_flips]",
        f"model.pretrained={tmp_path}/tiny",
        "train.enabled=false",
        "ood=none",
        "logger=csv",
        "evaluation.n_examples=6",
        "evaluation.fractions=[0.0,0.5,1.0]",
        "evaluation.aopc_bins=[0.5]",
        "+trainer.limit_test_batches=1",
        "+trainer.enable_progress_bar=false",
        "model.max_length=32",
        f"output_dir={job}",
    ]
    try:
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            result = pipeline.run_evaluate(compose(config_name="evaluate", overrides=overrides))
        flips = json.loads((job / "results.json").read_text())["first_step_flips"]["flips"]
        assert set(flips) == {"one_shot", "recursive"} and all(0 <= n <= 6 for n in flips.values())
        lines = console.summary_lines(result)  # the analysis's line ends the summary, before a model warning
        assert [line for line in lines if not line.startswith("WARNING:")][-1] == f"first-step flips: {flips}"

        (job / ".hydra").mkdir()
        (job / ".hydra" / "overrides.yaml").write_text("[seed=0]\n")
        report = build_report(tmp_path / "sweep")
        rows = report.summary[report.summary.score == "first_step_flips"]
        assert dict(zip(rows.schedule, rows["mean"])) == {s: float(n) for s, n in flips.items()}
        markdown = write_report(report)["report.md"].read_text()
        assert f"First-step flips (one_shot): {flips['one_shot']:g}" in markdown.split("## Scores over seeds")[0]
    finally:  # the example stays out of the other tests
        ANALYSES.pop("first_step_flips", None)
        sys.modules.pop("first_step_flips", None)
