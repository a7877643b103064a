"""The Claims section as a report section (:class:`itermask.reporting.sections.ReportSection`), built from
``hydra.callbacks.report.claims``; it computes the claims of the report once."""

from __future__ import annotations

from pathlib import Path

from itermask.reporting.model import Report
from itermask.studies.robust_infidelity.claims import Claims
from itermask.studies.robust_infidelity.compute import compute_claims
from itermask.studies.robust_infidelity.figures import write_claim_files
from itermask.studies.robust_infidelity.markdown import claims_markdown
from itermask.studies.robust_infidelity.settings import ClaimSettings

__all__ = ["RobustInfidelity"]


class RobustInfidelity:
    """The report's "Claims" section (``experiment=paper``).

    Args:
        settings: the keys of :class:`ClaimSettings`; an unknown key raises ``ValueError`` naming it.
    """

    def __init__(self, **settings) -> None:
        self.settings = ClaimSettings.from_dict(settings)
        self._computed: tuple[Report, Claims] | None = None

    def check_sweep(self, models: list[str]) -> None:
        """Check ``claims.models`` and ``claims.base_model`` against the ``models`` the multirun's jobs run.

        Raises:
            ValueError: one line naming the setting, the models no job runs and the multirun's models."""
        for key, named in (("models", self.settings.models or []), ("base_model", [self.settings.base_model])):
            if lacking := [m for m in named if m is not None and m not in models]:
                raise ValueError(
                    f"hydra.callbacks.report.claims.{key} names {', '.join(lacking)}, which no job of this "
                    f"multirun runs: choose from {', '.join(models)}"
                )

    def claims(self, report: Report) -> Claims:
        """The claims of ``report`` (computed on the first call for it)."""
        if self._computed is None or self._computed[0] is not report:
            self._computed = (report, compute_claims(report, self.settings))
        return self._computed[1]

    def figures(self, report: Report, files: Path, written: dict[str, Path], images: dict[str, str]) -> None:
        """Write the claims' figures and tables under ``files`` (:func:`write_claim_files`)."""
        write_claim_files(self.claims(report), files, written, images)

    def markdown(self, report: Report, images: dict[str, str]) -> list[str]:
        """The Claims section's Markdown lines (:func:`claims_markdown`)."""
        return claims_markdown(self.claims(report), images)
