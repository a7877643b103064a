"""``python -m itermask.report <multirun dir>`` and the reporting API, kept at this name: the code lives in
:mod:`itermask.reporting`."""

import sys

from itermask.reporting import *  # noqa: F401,F403
from itermask.reporting import __all__  # noqa: F401
from itermask.reporting.cli import main

if __name__ == "__main__":
    sys.exit(main())
