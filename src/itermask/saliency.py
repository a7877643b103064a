"""Kept at this name for notebooks and scripts: saliency methods live in :mod:`itermask.core.saliency`."""

from itermask.core.saliency import *  # noqa: F401,F403
from itermask.core.saliency import __all__  # noqa: F401
