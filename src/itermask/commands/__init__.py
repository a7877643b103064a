"""The command-line entry points: ``itermask-evaluate``, ``itermask-train`` and ``itermask-pretrain`` (installed
with the package) and the scripts ``evaluate.py``, ``train.py`` and ``pretrain.py`` of a source checkout run the
same Hydra ``main`` of :mod:`~itermask.commands.evaluate`, :mod:`~itermask.commands.train` and
:mod:`~itermask.commands.pretrain`, whose configs are the package's (``pkg://itermask.conf``). Each module is named
after its config (Hydra names a job after the module that holds ``main``: its log is ``<job dir>/evaluate.log``).

Only Hydra and torch-free itermask modules are imported here: ``--help`` and a bad setting answer before torch,
transformers and Lightning are imported (the pipeline is imported by :func:`itermask.jobs.run_job` after
:func:`itermask.validation.check_composed` passed)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["CONFIG_PATH", "command"]

#: where Hydra finds the configs: the package's ``conf`` folder (``conf/`` of a checkout links to it)
CONFIG_PATH = "pkg://itermask.conf"


def command(main: Callable[[], Any], config_name: str) -> None:
    """Run a command's Hydra ``main``: the overrides Hydra would only raise on are checked first
    (:func:`itermask.console.check_overrides`), then :func:`itermask.jobs.run_entry` runs it (a misspelt key of
    ``config_name`` gets a hint)."""
    from itermask.conf import CONF_DIR
    from itermask.console import check_overrides
    from itermask.jobs import run_entry

    check_overrides(sys.argv[1:], CONF_DIR, config_name)
    try:
        run_entry(main, config_name)
    except BrokenPipeError:  # the reader closed the output (`--help | head`): stop as shell tools do, no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush has nowhere to fail
        raise SystemExit(128 + 13) from None  # killed by SIGPIPE, as `yes | head` reports it
