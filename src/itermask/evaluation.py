"""Kept at this name for notebooks and scripts: the masking evaluation live in :mod:`itermask.core.evaluation`."""

from itermask.core.evaluation import *  # noqa: F401,F403
from itermask.core.evaluation import __all__  # noqa: F401
