"""``python -m itermask.reporting <multirun dir>``: write the report of a multirun folder on demand."""

import sys

from itermask.reporting.cli import main

if __name__ == "__main__":
    sys.exit(main())
