"""Bad settings: collected in one pass and raised together, each naming its option by its dotted config path
(:class:`Problems`), and marked as config errors (:func:`config_errors`), which a job reports as one message
without a traceback (:func:`itermask.jobs.run_job`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from hydra.errors import CompactHydraException

from itermask.validation import SettingsError

__all__ = ["name_option", "Problems", "ConfigError", "config_errors", "is_config_error"]


def name_option(path: str, keys, message: str) -> str:
    """``message``, an error of the component built from the config node at ``path`` (its keys ``keys``), with
    the option named by its full dotted path: unchanged when it starts with ``path``; ``path.`` prepended when
    it starts with one of the node's keys (``n_steps must be ...`` -> ``saliency.n_steps must be ...``) or with
    the node's own name (``candidates.k ...`` of ``attack.candidates`` -> ``attack.candidates.k ...``);
    else ``path: `` prepended."""
    if message.startswith(path):
        return message
    first = message.split(" ", 1)[0].split(".", 1)[0]
    parent, _, leaf = path.rpartition(".")
    if first in keys:
        return f"{path}.{message}"
    if first == leaf:
        return f"{parent}.{message}" if parent else message
    return f"{path}: {message}"


class Problems:
    """The errors of the settings stage, collected in one pass: each check runs inside :meth:`collect`, and
    :meth:`raise_if_any` raises them together."""

    def __init__(self) -> None:
        self.errors: list[Exception] = []

    @contextmanager
    def collect(self) -> Iterator[None]:
        """Record a ``ValueError`` or ``OSError`` (a missing file) raised inside, instead of raising it."""
        try:
            yield
        except (ValueError, OSError) as error:
            self.errors.append(error)

    def add(self, messages: list[str]) -> None:
        """Record problems given as messages (:func:`config_problems`)."""
        if messages:
            self.errors.append(SettingsError(messages))

    def names(self, prefix: str) -> bool:
        """Whether a problem recorded so far names a key beginning with ``prefix`` (e.g. ``"sanity."``: a setting
        of that node was refused, so its component is not built to refuse it again)."""
        pattern = re.compile(rf"(^|[\s(,]){re.escape(prefix)}")
        messages = (m for e in self.errors for m in (e.problems if isinstance(e, SettingsError) else [str(e)]))
        return any(pattern.search(m) for m in messages)

    def raise_if_any(self) -> None:
        """Raise what was collected: a single error as it is (its type kept, e.g. ``FileNotFoundError``),
        several as one :class:`SettingsError` listing each problem.

        Raises:
            ValueError, OSError: as described."""
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            messages = [m for e in self.errors for m in (e.problems if isinstance(e, SettingsError) else [str(e)])]
            raise SettingsError(messages)


class ConfigError(CompactHydraException, ValueError):
    """A bad setting of a single run, re-raised by :func:`run_job` so that Hydra prints only its message (a
    ``CompactHydraException``: no traceback; the traceback is in the job's :data:`FAILURE_FILE`)."""


#: attribute :func:`config_errors` sets on an error raised by the settings stage
_CONFIG_ERROR = "itermask_config_error"


@contextmanager
def config_errors() -> Iterator[None]:
    """Mark a ``ValueError`` or ``OSError`` raised inside (the settings stage: a bad setting, a missing file)
    as a config error, re-raised unchanged: :func:`run_job` then prints one message instead of tracebacks."""
    try:
        yield
    except (ValueError, OSError) as error:
        setattr(error, _CONFIG_ERROR, True)
        raise


def is_config_error(error: BaseException) -> bool:
    """Whether ``error`` is a bad setting (a :class:`~itermask.validation.SettingsError`, or raised inside
    :func:`config_errors`) rather than a failure of the work itself."""
    return isinstance(error, SettingsError | ConfigError) or getattr(error, _CONFIG_ERROR, False) is True
