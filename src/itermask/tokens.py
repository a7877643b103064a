"""Kept at this name for notebooks and scripts: token batches live in :mod:`itermask.core.tokens`."""

from itermask.core.tokens import *  # noqa: F401,F403
from itermask.core.tokens import __all__  # noqa: F401
