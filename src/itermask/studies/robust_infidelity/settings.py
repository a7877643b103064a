"""What the Claims section compares: :class:`ClaimSettings` (``hydra.callbacks.report.claims``), and the
names of the fine-tuning variants it tells apart."""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["ClaimSettings", "claim_scores", "STANDARD", "MASKED", "ADVERSARIAL", "OOD_STATISTIC"]

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
        encoder_texts: the test texts (the first N) claim 1's encoders are compared on by linear CKA
            (:mod:`~itermask.studies.robust_infidelity.encoders`); 0: not compared.
    """

    score: str = "aopc_comprehensiveness_prob"
    schedule: str = "one_shot"
    accuracy_margin: float = 0.02
    models: list[str] | None = None
    base_model: str | None = None
    n_resamples: int = 2000
    encoder_texts: int = 256

    @classmethod
    def from_dict(cls, node: dict | None) -> ClaimSettings:
        """From a config node; unknown keys raise ``ValueError`` naming them and the known ones."""
        node = known_keys(cls, node, "hydra.callbacks.report.claims")
        if "models" in node and node["models"] is not None:
            node["models"] = [str(m) for m in node["models"]]
        settings = cls(**node)
        settings.check()
        return settings

    def check(self) -> None:
        """Check every setting (before any job runs: the report callback builds its sections first).

        Raises:
            ValueError: one line naming the first bad setting (``hydra.callbacks.report.claims.<key>``) and
                its allowed values."""
        from itermask.core.schedules import SCHEDULES

        name, scores = "hydra.callbacks.report.claims", claim_scores()
        problems = [
            (self.score not in scores, "score", self.score, f"a faithfulness score: {', '.join(scores)}"),
            (self.schedule not in SCHEDULES, "schedule", self.schedule, f"one of {', '.join(SCHEDULES)}"),
            (not 0 < self.accuracy_margin < 1, "accuracy_margin", self.accuracy_margin, "a fraction in (0, 1)"),
            (self.models == [], "models", self.models, "model names, or null for every model with standard runs"),
            (
                type(self.n_resamples) is not int or self.n_resamples < 1,
                "n_resamples",
                self.n_resamples,
                "an integer >= 1",
            ),
            (
                type(self.encoder_texts) is not int or not 0 <= self.encoder_texts,
                "encoder_texts",
                self.encoder_texts,
                "an integer >= 0",
            ),
        ]
        for bad, key, given, allowed in problems:
            if bad:
                raise ValueError(f"{name}.{key}={given!r} is not allowed: {allowed}")


def known_keys(cls, node: dict | None, where: str) -> dict:
    """``node`` as a dict, checked against the fields of the dataclass ``cls``.

    Raises:
        ValueError: naming the unknown keys, ``where`` they were given and the known ones."""
    node = dict(node or {})
    known = {f.name for f in fields(cls)}
    if unknown := sorted(set(node) - known):
        raise ValueError(f"{where} has unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return node


def claim_scores() -> list[str]:
    """The score keys a claim can be read on: every registered metric's one value per run with a faithful
    direction (its AOPCs on either quantity, e.g. ``aopc_comprehensiveness_prob``, and per-example scores
    such as ``never_flip_rate``)."""
    from itermask.core.evaluation_settings import QUANTITIES
    from itermask.core.metrics import AGGREGATES, METRICS, ScoreKey

    keys = []
    for metric in METRICS.values():
        for aggregate in (*AGGREGATES, None) if metric.aopc else (None,):
            for quantity in QUANTITIES if metric.per_quantity else (None,):
                info = ScoreKey(metric.name, aggregate, quantity).info()  # pyright: ignore[reportArgumentType]
                if not info.per_step and info.higher_is_more_faithful is not None:
                    keys.append(info.name)
    return keys
