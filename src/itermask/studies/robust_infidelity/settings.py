"""What the Claims section compares: :class:`ClaimSettings` (``hydra.callbacks.report.claims``), and the
names of the fine-tuning variants it tells apart."""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["ClaimSettings", "STANDARD", "MASKED", "ADVERSARIAL", "OOD_STATISTIC"]

#: a run's fine-tuning variant (:func:`itermask.studies.robust_infidelity.runs.variant`)
STANDARD, MASKED, ADVERSARIAL = "standard", "masked", "adversarial"
#: the OOD statistic of claim 2 (a key of a result's ``ood.statistics[method][schedule].values``)
OOD_STATISTIC = "final/auroc_mahalanobis"


@dataclass
class ClaimSettings:
    """What the Claims section compares (``hydra.callbacks.report.claims``).

    Args:
        score: the faithfulness score (a key of ``scores[method][schedule]``), e.g. AOPC comprehensiveness.
        schedule: the masking schedule whose score is read.
        accuracy_margin: equivalence margin of test accuracies (fraction: 0.02 = 2 accuracy points).
        models: the models of claim 1 in report order (``None``: every model with standard runs, sorted).
        base_model: the model of claims 2 and 3 (``None``: the model with masked or adversarial runs).
        n_resamples: bootstrap resamples of the variance components and of Spearman's rho.
    """

    score: str = "aopc_comprehensiveness_prob"
    schedule: str = "one_shot"
    accuracy_margin: float = 0.02
    models: list[str] | None = None
    base_model: str | None = None
    n_resamples: int = 2000

    @classmethod
    def from_dict(cls, node: dict | None) -> ClaimSettings:
        """From a config node; unknown keys raise ``ValueError`` naming them and the known ones."""
        node = dict(node or {})
        known = {f.name for f in fields(cls)}
        if unknown := sorted(set(node) - known):
            raise ValueError(
                f"hydra.callbacks.report.claims has unknown key(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(known))}"
            )
        if "models" in node and node["models"] is not None:
            node["models"] = [str(m) for m in node["models"]]
        return cls(**node)
