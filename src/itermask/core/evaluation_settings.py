"""The settings of the iterative-masking evaluation (which examples, which steps, what is compared), checked once
where they are built (:meth:`EvaluationSettings.of`, from the ``evaluation`` config node or the keyword
arguments of :func:`itermask.evaluate`), and the two facts every layer reads from them: the target policy and
the quantity. This module imports no torch: the settings are checked before torch is imported."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal, get_args

__all__ = [
    "Quantity",
    "QUANTITIES",
    "TARGET_POLICIES",
    "DEFAULT_TOKEN_BUDGET",
    "FEATURE_KINDS",
    "EvaluationSettings",
    "check_target_policy",
    "check_soft_draws",
    "segment_list",
    "off_grid",
]

#: What the scores compare: the probability or the logit of the target class.
Quantity = Literal["probability", "logit"]
QUANTITIES: tuple[Quantity, ...] = get_args(Quantity)
#: The class to explain, besides a fixed class id: the prediction on the clean input, or the gold label.
TARGET_POLICIES = ("predicted", "gold")
#: The unit ranked, counted and masked: a word piece, or a whole word (:mod:`itermask.core.features`).
FEATURE_KINDS = ("token", "word")
#: Padded tokens (rows x padded length) per forward of the masked inputs (:mod:`itermask.core.forwards`).
DEFAULT_TOKEN_BUDGET = 8192


def check_target_policy(policy: str | int, num_classes: int | None = None) -> None:
    """Check a target policy (``"predicted"``, ``"gold"`` or a class id) before any work is done; ``num_classes``
    ``None`` checks only the kind of policy.

    Raises:
        ValueError: for an unknown policy or a class id outside ``[0, num_classes)``.
    """
    if policy in TARGET_POLICIES:
        return
    if not isinstance(policy, int) or isinstance(policy, bool):
        raise ValueError(f"unknown target policy {policy!r}: choose one of {TARGET_POLICIES} or a class id")
    if policy < 0 or (num_classes is not None and policy >= num_classes):
        known = f" (this data has {num_classes} classes: 0..{num_classes - 1})" if num_classes is not None else ""
        raise ValueError(f"target class {policy} out of range{known}")


#: the most draws of the soft measures (each adds two embedding rows per example; bench/soft_cost.py's spread)
MAX_SOFT_DRAWS = 1000


def check_soft_draws(draws) -> int:
    """``evaluation.soft_draws`` (draws of the soft comprehensiveness and sufficiency inputs; 0: off) as an int.

    Raises:
        ValueError: if it is not a whole number in ``0..MAX_SOFT_DRAWS``."""
    if isinstance(draws, bool) or not isinstance(draws, int) or not 0 <= draws <= MAX_SOFT_DRAWS:
        raise ValueError(
            f"evaluation.soft_draws must be a whole number from 0 (off) to {MAX_SOFT_DRAWS}, got {draws!r} (the sd "
            "of a mean over 10 draws is already about 0.06; each draw adds 2 forwards per example)"
        )
    return int(draws)


def segment_list(segments: int | Iterable[int] | None) -> list[int] | None:
    """Segment ids as a list: ``None`` (every segment), one id, or several (``0`` = first text of a
    sentence pair, ``1`` = second).

    Raises:
        ValueError: for an id other than 0 or 1.
    """
    if segments is None:
        return None
    values = [int(segments)] if isinstance(segments, int) else [int(s) for s in segments]
    if any(s not in (0, 1) for s in values):
        raise ValueError(f"evaluation.segments must hold 0 (first text) and/or 1 (second text), got {values}")
    return values


def off_grid(values: Sequence[float], grid: Sequence[float], tol: float = 1e-9) -> list[float]:
    """The ``values`` that are not on ``grid`` (within ``tol``)."""
    return [v for v in values if not any(abs(v - g) <= tol for g in grid)]


@dataclass(frozen=True)
class EvaluationSettings:
    """The masking evaluation (``evaluation``): which examples, which steps, what is compared.

    Attributes:
        split, n_examples, subset_seed: the evaluated examples: a fixed subset of ``n_examples`` of ``split``
            drawn with ``subset_seed`` (``None``: the whole split).
        steps: ``"fraction"`` (the grid is ``fractions``, shares of the maskable tokens) or ``"count"`` (the
            grid is ``counts``, numbers of tokens).
        aopc_bins: the masking fractions AOPC averages over (ERASER's bins), ``None`` to leave it out.
        segments: ``None`` (every segment) or the segment ids whose tokens are ranked and masked.
        schedules: masking schedule names (:data:`itermask.core.schedules.SCHEDULES`).
        target: the class to explain: ``"predicted"``, ``"gold"`` or a class id.
        quantity: ``"probability"`` or ``"logit"`` of the target class.
        compare_random: also evaluate a seeded random explanation.
        token_budget: padded tokens per forward (speed only, not the numbers beyond float rounding).
        features: the unit ranked, counted and masked: ``"token"`` (word pieces) or ``"word"`` (a word's pieces
            together, from a fast tokenizer's word ids; fractions and counts are then of words).
        soft_draws: draws per example of the soft comprehensiveness and sufficiency inputs (Zhao & Aletras
            2023, :mod:`itermask.core.soft_masking`), a whole number >= 0; 0 leaves those measures out.

    Raises:
        ValueError: for an unknown quantity, target policy or features, AOPC bins off a fraction grid, bad
            segments, or ``soft_draws`` not a whole number >= 0.
    """

    split: str
    n_examples: int | None
    subset_seed: int
    steps: str
    fractions: tuple[float, ...]
    counts: tuple[int, ...]
    aopc_bins: tuple[float, ...] | None
    segments: list[int] | None
    schedules: tuple[str, ...]
    target: str | int
    quantity: Quantity
    compare_random: bool
    token_budget: int = DEFAULT_TOKEN_BUDGET
    features: str = "token"
    soft_draws: int = 5

    def __post_init__(self) -> None:
        from itermask.core.schedules import check_schedules

        check_soft_draws(self.soft_draws)
        check_schedules(self.schedules)  # before any data or model work (the evaluator checks it again)
        if self.features not in FEATURE_KINDS:
            raise ValueError(f"unknown evaluation.features {self.features!r}: choose one of {FEATURE_KINDS}")
        if self.quantity not in QUANTITIES:
            raise ValueError(f"evaluation.quantity must be 'probability' or 'logit', got {self.quantity!r}")
        try:
            check_target_policy(self.target)
        except ValueError as error:
            raise ValueError(f"evaluation.target={self.target}: {error}") from None
        if self.steps == "fraction" and self.aopc_bins and (off := off_grid(self.aopc_bins, self.fractions)):
            raise ValueError(
                f"evaluation.aopc_bins {off} are not among evaluation.fractions {list(self.fractions)}: "
                "add them to the fractions or change evaluation.aopc_bins (null: no AOPC)"
            )

    @classmethod
    def of(cls, node: Mapping[str, Any]) -> EvaluationSettings:
        """The settings of an ``evaluation`` mapping (plain values: its numbers are checked by
        :func:`itermask.validation.config_problems`, its choices by the config schema).

        Raises:
            ValueError: see the class docstring; an unknown key, naming the known ones."""
        known = [f.name for f in fields(cls)]
        if unknown := sorted(set(node) - set(known)):
            raise ValueError(f"unknown evaluation setting(s) {unknown}: choose from {sorted(known)}")
        bins = node["aopc_bins"]
        return cls(
            split=str(node["split"]),
            n_examples=node["n_examples"],
            subset_seed=int(node["subset_seed"]),
            steps=str(node["steps"]),
            fractions=tuple(node["fractions"]),
            counts=tuple(node["counts"]),
            aopc_bins=None if bins is None else tuple(bins),
            segments=segment_list(node["segments"]),
            schedules=tuple(node["schedules"]),
            target=node["target"],
            quantity=node["quantity"],
            compare_random=bool(node["compare_random"]),
            token_budget=int(node.get("token_budget", DEFAULT_TOKEN_BUDGET)),
            features=str(node.get("features", "token")),
            soft_draws=node.get("soft_draws", 5),
        )
