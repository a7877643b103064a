"""The jobs of a union of Cartesian grids (:func:`grid_jobs`): what the ``grid_union`` sweeper
(:mod:`hydra_plugins.itermask_sweepers.grid_union`) launches and what the report expects of such a sweep."""

from __future__ import annotations

import difflib
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import CompactHydraException

__all__ = ["grid_jobs"]


def _text(value: Any) -> str:
    """A config value as the text of a Hydra override (YAML booleans as ``true``/``false``)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _as_overrides(node: dict[str, Any] | None) -> list[str]:
    return [f"{key}={_text(value)}" for key, value in (node or {}).items()]


def _unknown_key(grid: str, key: str, params: list[str]) -> str:
    """The error of a grid key that ``params`` lacks, named by its full path: a misspelt key (close to one of
    ``params``, :func:`difflib.get_close_matches`) gets "did you mean", a new one the advice to give its default."""
    where = f"hydra.sweeper.grids.{grid}.{key}"
    if close := difflib.get_close_matches(key, params, n=1, cutoff=0.75):
        return f"{where} is not a key of hydra.sweeper.params: did you mean {close[0]}? (keys: {params})"
    return (
        f"{where} is not a key of hydra.sweeper.params {params}: a grid may only set keys that every job sets; "
        f"if {key} is the setting you mean, add it with its default value to hydra.sweeper.params"
    )


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
        CompactHydraException (Hydra prints it without a traceback): a grid sets a key that ``params`` does
            not (named, with the key it likely misspells or the advice to give its default there), or a sweep
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
            raise CompactHydraException(_unknown_key(name, extra[0], list(params)))
        overrides = parser.parse_overrides([*base, *_as_overrides(grid), *arguments])
        for override in overrides:
            if override.is_sweep_override() and not override.is_discrete_sweep():
                raise CompactHydraException(
                    f"hydra.sweeper.grids.{name}: {override.input_line!r} is not a list of values "
                    "(the grid-union sweeper takes a,b,c, choice(a,b,c) or range(a,b) sweeps)"
                )
        (batch,) = BasicSweeper.split_arguments(overrides, None)
        for job in batch:
            if (key := frozenset(job)) not in seen:
                seen.add(key)
                jobs.append(job)
    return jobs
