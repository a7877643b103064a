"""The degraded-explainer sanity benchmark through the real entry point (evaluate.py sanity=on), on the smoke
settings with word features: its result section, console line and per-example table."""

import json

import pandas as pd
import pytest
from test_end_to_end import _run, env  # noqa: F401  (the fixture)


@pytest.mark.slow
def test_smoke_run_with_the_sanity_benchmark(tmp_path, env):  # noqa: F811
    args = ["debug=smoke", "evaluation.features=word", "sanity=on", "sanity.n_boot=100", "logger=csv"]
    out = _run("evaluate.py", [*args, f"hydra.run.dir={tmp_path}/run"], env)
    result = json.loads((tmp_path / "run/results.json").read_text())
    section = result["sanity"]
    assert section["settings"]["levels"] == [0.0, 0.25, 0.5, 0.75, 1.0] and "rule" in section["settings"]
    measures = section["methods"]["gradient"]  # the random explanation is not degraded
    assert list(section["methods"]) == ["gradient"]
    assert {"aopc_comprehensiveness_prob", "aopc_sufficiency_prob", "decision_flip_fraction"} <= set(measures)
    for entry in measures.values():
        assert entry["expected_sign"] in (-1, 1) and (entry["rho"] is None or -1 <= entry["rho"] <= 1)
        assert entry["ranks_known_order"] == (entry["reason"] is None)
    named = set(section["cannot_rank"].get("gradient", []))
    assert named == {m for m, e in measures.items() if not e["ranks_known_order"]}
    table = pd.read_parquet(tmp_path / "run/per_example/sanity.parquet")
    n = result["n_evaluated"]
    assert len(table) == 5 * n and sorted(table["level"].unique()) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert set(measures) <= set(table.columns) and set(table["saliency"]) == {"gradient"}
    # level 0 is the job's own one-shot curves: its AOPC rows equal scores.parquet's
    scores = pd.read_parquet(tmp_path / "run/per_example/scores.parquet")
    own = scores[(scores["saliency"] == "gradient") & (scores["schedule"] == "one_shot")].set_index("example_id")
    zero = table[table["level"] == 0].set_index("example_id")
    key = "aopc_comprehensiveness_prob"
    assert zero[key].sort_index().tolist() == own.loc[zero.index, key].sort_index().tolist()
    assert section["cost"]["rows"] > 0 and "Sanity benchmark (gradient" in out.stdout + out.stderr
