"""itermask's exact AOPC bounds against the limits the NAOPC authors published (an extract of their repository:
tests/core/data/naopc/README.md; the whole comparison, 2,430 examples of 12 files: bench/naopc_conformance.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from itermask.core import exact_aopc_bounds

DATA = Path(__file__).parent / "data" / "naopc"


def _tables():
    outputs = pd.read_parquet(DATA / "permutation_outputs.parquet")
    limits = pd.read_parquet(DATA / "aopc_limits_exact.parquet").set_index(["file", "id"])
    # their target: the positive class's probability, softmax over (positive, negative) in float64
    logits = torch.tensor(outputs[["positive_logit", "negative_logit"]].to_numpy(np.float64))
    outputs["prob"] = torch.softmax(logits, dim=1)[:, 0].numpy()
    for (file, example), group in outputs.groupby(["file", "id"]):
        n = int(group["mask"].max()).bit_length()
        table = np.full(1 << n, np.nan)
        table[group["mask"].to_numpy()] = group["prob"].to_numpy()
        yield file, example, table, limits.loc[(file, example)]


def test_the_extract_covers_every_published_file():
    files = {file for file, *_ in _tables()}
    assert len(files) == 12


def test_exact_bounds_reproduce_the_published_limits():
    agreed = explained = 0
    for file, example, table, theirs in _tables():
        bounds = exact_aopc_bounds(table)
        n = len(table).bit_length() - 1
        assert bounds.lower == pytest.approx(theirs["lower_limit"], abs=1e-6), (file, example)
        if abs(bounds.upper - theirs["upper_limit"]) <= 1e-6:
            agreed += 1
            continue
        # their enumeration keeps its running maximum from 0: when every ordering's sum of the drops at
        # k = 1..n-1 is negative, their upper limit is drop(all masked) / n, above the true maximum
        drop_all = table[0] - table[-1]
        assert bounds.upper * n - drop_all < 0, (file, example)
        assert theirs["upper_limit"] == pytest.approx(drop_all / n, abs=1e-6), (file, example)
        assert bounds.upper < theirs["upper_limit"]  # theirs is reached by no ordering
        explained += 1
    assert agreed >= 30 and explained >= 10  # the extract holds both kinds (bench/naopc_conformance.py --write-extract)
