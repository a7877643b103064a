"""The three claims of a report's sweep computed into one :class:`~itermask.studies.robust_infidelity.claims.Claims`."""

from __future__ import annotations

from itermask.reporting.model import Report
from itermask.studies.robust_infidelity.claim1 import claim1
from itermask.studies.robust_infidelity.claim2 import claim2
from itermask.studies.robust_infidelity.claim3 import claim3
from itermask.studies.robust_infidelity.claims import Claims
from itermask.studies.robust_infidelity.runs import run_table, variant
from itermask.studies.robust_infidelity.settings import ADVERSARIAL, MASKED, ClaimSettings

__all__ = ["compute_claims"]


def compute_claims(report: Report, settings: ClaimSettings) -> Claims:
    """The three claims of the report's sweep (:mod:`itermask.studies.robust_infidelity`)."""
    runs = report.sweep.runs
    claims = Claims(settings, confidence=report.settings.get("confidence", 0.95))
    claims.table = run_table(runs, settings)
    claims.conditions = {
        "dataset": ", ".join(sorted({str(r.result["dataset"]) for r in runs})),
        "masking": ", ".join(sorted({str(r.result["masking"]) for r in runs})),
        "seeds": ", ".join(str(x) for x in sorted({r.seed for r in runs})),
        "n_examples": ", ".join(str(x) for x in sorted({r.result.get("n_evaluated") for r in runs}, key=str)),
    }
    base = settings.base_model or next(
        (str(r.result["model"]) for r in runs if variant(r.result) in (MASKED, ADVERSARIAL)), None
    )
    claims.conditions["base_model"] = base
    claim1(claims, runs, claims.table)
    claim2(claims, runs, claims.table, base)
    claim3(claims, runs, claims.table, base)
    return claims
