"""The three claims of a report's sweep as one value: their tables and verdicts (:class:`Claims`, filled in by
:func:`~itermask.studies.robust_infidelity.compute.compute_claims`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from itermask.studies.robust_infidelity.settings import ClaimSettings

__all__ = ["Claims"]


@dataclass
class Claims:
    """The claims' tables (pandas) and verdicts; see :mod:`itermask.studies.robust_infidelity`."""

    settings: ClaimSettings
    conditions: dict = field(default_factory=dict)
    table: pd.DataFrame = field(default_factory=pd.DataFrame)
    model_differences: pd.DataFrame = field(default_factory=pd.DataFrame)
    components: pd.DataFrame = field(default_factory=pd.DataFrame)
    concordance: dict = field(default_factory=dict)
    accuracy: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: claim 1's encoders: per pair CKA per layer and parameter distance; per model MLM accuracy; why not
    encoder_pairs: pd.DataFrame = field(default_factory=pd.DataFrame)
    mlm_accuracy: pd.DataFrame = field(default_factory=pd.DataFrame)
    encoder_notes: list[str] = field(default_factory=list)
    ood_steps: pd.DataFrame = field(default_factory=pd.DataFrame)
    ood_summary: dict = field(default_factory=dict)
    attack_link: pd.DataFrame = field(default_factory=pd.DataFrame)
    adversarial: pd.DataFrame = field(default_factory=pd.DataFrame)
    verdicts: dict[int, str] = field(default_factory=dict)
    confidence: float = 0.95
