"""Kept at this name for notebooks and scripts: model loading and fine-tuning live in :mod:`itermask.training.models`."""

from itermask.training.models import *  # noqa: F401,F403
from itermask.training.models import __all__  # noqa: F401
