"""A union of Cartesian grids in one multirun (``hydra/sweeper=grid_union``), e.g. ``experiment=paper``: an
experiment that answers several questions (models x methods for one claim, masked vs standard fine-tuning of one
model for the next) needs several products. :class:`GridUnionSweeper` is Hydra's basic sweeper (same launcher
calls and ``max_batch_size`` batching, so any launcher works) whose job list is the union of named grids:

- ``params``: every job's settings (single values or sweeps such as ``seed: 0,1,2``); every key a grid sets must
  appear here with its default, so that every job sets the same keys (the report tells swept settings apart by
  the jobs' overrides);
- ``grids``: ``{name: {key: value or sweep}}``; each grid's jobs are the product of ``params`` with the grid's
  values replacing theirs, and the command line's overrides replacing both (``seed=0,1`` applies to every grid);
- a job set by two grids with the same overrides is launched once (first grid's position).

Without ``grids`` it launches exactly what the basic sweeper does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser

from itermask.grids import grid_jobs

__all__ = ["GridUnionSweeper", "GridUnionSweeperConf"]


@dataclass
class GridUnionSweeperConf:
    _target_: str = "hydra_plugins.itermask_sweepers.grid_union.GridUnionSweeper"
    max_batch_size: int | None = None
    params: dict[str, Any] | None = None
    grids: dict[str, dict[str, Any]] | None = None


ConfigStore.instance().store(group="hydra/sweeper", name="grid_union", node=GridUnionSweeperConf, provider="itermask")


class GridUnionSweeper(BasicSweeper):
    """Hydra's basic sweeper over the union of named grids (module docstring).

    Args:
        max_batch_size: jobs per launcher call (``None``: all at once), as for the basic sweeper.
        params: every job's settings; each grid's keys must be among them.
        grids: ``{name: {key: value or sweep}}``.
    """

    def __init__(
        self,
        max_batch_size: int | None = None,
        params: dict[str, Any] | None = None,
        grids: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(max_batch_size, params)
        self.grids = grids or {}
        self._arguments: list[str] = []

    def sweep(self, arguments: list[str]) -> Any:
        self._arguments = list(arguments)
        return super().sweep(arguments)

    def split_arguments(self, overrides: Any, max_batch_size: int | None) -> list[list[list[str]]]:  # pyright: ignore[reportIncompatibleMethodOverride] (the base's static method, called on the instance)
        """The job batches: :func:`grid_jobs` of this sweeper's params, grids and the command line (the
        basic sweeper's parsed ``overrides`` of params plus command line are not used), cut into chunks of
        ``max_batch_size``."""
        assert self.hydra_context is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        jobs = grid_jobs(self.params, self.grids, self._arguments, parser)
        return list(BasicSweeper.split_overrides_to_chunks(jobs, max_batch_size))
