"""The jobs of a union of Cartesian grids (:func:`grid_jobs`): what the ``grid_union`` sweeper
(:mod:`hydra_plugins.itermask_sweepers.grid_union`) launches and what the report expects of such a sweep."""

from __future__ import annotations

from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException

__all__ = ["grid_jobs"]


def _text(value: Any) -> str:
    """A config value as the text of a Hydra override (YAML booleans as ``true``/``false``)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _as_overrides(node: dict[str, Any] | None) -> list[str]:
    return [f"{key}={_text(value)}" for key, value in (node or {}).items()]


def grid_jobs(
    params: dict[str, Any] | None,
    grids: dict[str, dict[str, Any]] | None,
    arguments: list[str],
    parser: OverridesParser | None = None,
) -> list[list[str]]:
    """The jobs of a grid-union multirun, each as its list of ``key=value`` overrides, in launch order.

    Args:
        params: every job's settings (``{key: value or comma-separated sweep}``).
        grids: ``{name: {key: value or sweep}}``; ``None`` or empty: one grid, ``params`` itself.
        arguments: the command line's overrides (they replace a key's values in every grid).
        parser: Hydra's overrides parser (with the config loader, to expand ``glob`` sweeps of groups).

    Returns:
        The union of the grids' Cartesian products, in grid order, a job already launched by an earlier
        grid (the same set of overrides) left out. Keys in the order of ``params`` then the command line.

    Raises:
        HydraException: a grid sets a key that ``params`` does not (give it its default there), or a sweep
            that is not a list of values (ranges and intervals are for other sweepers).
    """
    parser = parser or OverridesParser.create()
    params = dict(params or {})
    base = _as_overrides(params)
    jobs: list[list[str]] = []
    seen: set[frozenset[str]] = set()
    for name, grid in (grids or {"params": {}}).items():
        grid = dict(grid or {})
        if extra := [key for key in grid if key not in params]:
            raise HydraException(
                f"hydra.sweeper.grids.{name} sets {', '.join(extra)}, which hydra.sweeper.params does not: add "
                "each with its default value to hydra.sweeper.params, so that every job sets the same keys"
            )
        overrides = parser.parse_overrides([*base, *_as_overrides(grid), *arguments])
        for override in overrides:
            if override.is_sweep_override() and not override.is_discrete_sweep():
                raise HydraException(
                    f"hydra.sweeper.grids.{name}: {override.input_line!r} is not a list of values "
                    "(the grid-union sweeper takes a,b,c, choice(a,b,c) or range(a,b) sweeps)"
                )
        (batch,) = BasicSweeper.split_arguments(overrides, None)
        for job in batch:
            if (key := frozenset(job)) not in seen:
                seen.add(key)
                jobs.append(job)
    return jobs
