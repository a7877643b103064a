"""The OOD AUROC of the soft comprehensiveness and sufficiency inputs (itermask.analyses.ood.soft_input_aurocs):
constructed final-layer features and a stand-in detector whose score is the first feature, so every AUROC is
known by hand; a missing detector and degenerate scores give reasons, never 0.5."""

from __future__ import annotations

import pytest
import torch

from itermask.analyses.base import EvaluatedCurves
from itermask.analyses.ood import OODAnalysis, soft_input_aurocs
from itermask.core.curves import MaskingCurves
from itermask.ood.detectors import OODDetectors


class FirstFeature:
    """A stand-in Mahalanobis scorer: the score of a row is its first feature."""

    def score(self, features: torch.Tensor):
        return features[:, 0].double().numpy()


def _curves(clean0, comp0, keep0, schedule="one_shot") -> MaskingCurves:
    """Curves of B examples whose final-layer features are ``[x, 1]`` with ``x`` the given first features
    (clean ``[B]``, soft ``[B, R]``)."""
    clean0, comp0, keep0 = (torch.tensor(v, dtype=torch.float32) for v in (clean0, comp0, keep0))
    size = len(clean0)
    with_one = lambda x: torch.stack([x, torch.ones_like(x)], dim=-1)  # noqa: E731
    soft = schedule == "one_shot"
    return MaskingCurves(
        schedule=schedule,
        steps="fraction",
        grid=torch.tensor([0.0, 1.0], dtype=torch.float64),
        example_ids=torch.arange(size),
        n_maskable=torch.full((size,), 4),
        k=torch.tensor([[0, 4]] * size),
        target=torch.zeros(size, dtype=torch.long),
        labels=torch.zeros(size, dtype=torch.long),
        clean_logits=torch.zeros(size, 2),
        logits=torch.zeros(size, 2, 2),
        clean_features=with_one(clean0),
        features=with_one(clean0)[:, None].repeat(1, 2, 1),
        soft_features=with_one(comp0) if soft else None,
        soft_keep_features=with_one(keep0) if soft else None,
    )


def test_aurocs_of_soft_inputs_by_hand():
    # clean scores 0, 1, 2, 3; comprehensiveness inputs all score above every clean input: AUROC 1; the
    # sufficiency inputs are the clean scores again (2 draws): every comparison is a tie or symmetric, AUROC 0.5
    clean = [0.0, 1.0, 2.0, 3.0]
    curves = {
        "gradient": {
            "one_shot": _curves(clean, [[10, 11]] * 4, [[x, x] for x in clean]),
            "recursive": _curves(clean, [], [], "recursive"),
        },
        "random": {"one_shot": _curves(clean, [[1.5, -1.0]] * 4, [[x, x] for x in clean])},
    }
    found = soft_input_aurocs(EvaluatedCurves.of(curves), OODDetectors(mahalanobis={"final": FirstFeature()}))  # pyright: ignore[reportArgumentType]
    assert found["gradient"] == {"n_examples": 4, "n_draws": 2, "soft_comprehensiveness": 1.0, "soft_sufficiency": 0.5}
    # random: masked scores 1.5 (x4) beat clean 0 and 1 (2 of 4), -1 (x4) beat none: (4 * 2 + 4 * 0) / (8 * 4)
    assert found["random"]["soft_comprehensiveness"] == pytest.approx(8 / 32)
    rows = OODAnalysis.report_measures({"ood": {"soft_inputs": found}})
    assert rows[("gradient", "one_shot", "ood final/auroc_mahalanobis, soft comprehensiveness inputs")] == 1.0
    assert rows[("random", "one_shot", "ood final/auroc_mahalanobis, soft sufficiency inputs")] == 0.5


def test_a_missing_detector_or_degenerate_scores_give_a_reason():
    curves = EvaluatedCurves.of({"gradient": {"one_shot": _curves([1.0, 1.0], [[1.0], [1.0]], [[1.0], [1.0]])}})
    none = soft_input_aurocs(curves, OODDetectors(missing={"final/mahalanobis": "too few training examples"}))
    assert none["gradient"]["missing"] == {
        "soft_comprehensiveness": "too few training examples",
        "soft_sufficiency": "too few training examples",
    }
    assert "soft_comprehensiveness" not in none["gradient"]
    tied = soft_input_aurocs(curves, OODDetectors(mahalanobis={"final": FirstFeature()}))  # pyright: ignore[reportArgumentType]
    assert tied["gradient"]["missing"]["soft_comprehensiveness"].startswith("the scores separate no inputs")
    assert not OODAnalysis.report_measures({"ood": {"soft_inputs": tied}})


def test_no_soft_inputs_no_entry():
    curves = EvaluatedCurves.of({"gradient": {"recursive": _curves([0.0, 1.0], [], [], "recursive")}})
    assert soft_input_aurocs(curves, OODDetectors(mahalanobis={"final": FirstFeature()})) == {}  # pyright: ignore[reportArgumentType]
