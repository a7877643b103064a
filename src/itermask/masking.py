"""Kept at this name for notebooks and scripts: masking strategies live in :mod:`itermask.core.masking`,
masking schedules and step counts in :mod:`itermask.core.schedules`."""

from itermask.core.masking import *  # noqa: F401,F403
from itermask.core.masking import __all__ as _strategies
from itermask.core.schedules import *  # noqa: F401,F403
from itermask.core.schedules import __all__ as _schedules

__all__ = [*_strategies, *_schedules]
