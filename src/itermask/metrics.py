"""Kept at this name for notebooks and scripts: faithfulness metrics live in :mod:`itermask.core.metrics`."""

from itermask.core.metrics import *  # noqa: F401,F403
from itermask.core.metrics import __all__  # noqa: F401
