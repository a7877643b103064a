"""What the running job has finished, for the message of an interrupted job (:func:`itermask.jobs.run_job`):
the stages record their finished steps here (:func:`note_progress`), below the job runner that reports them."""

from __future__ import annotations

from pathlib import Path

__all__ = ["note_progress", "finished", "resumable", "clear"]

#: What the running job has finished, in order.
_finished: list[str] = []
#: The multirun folder, noted in the launching process (:class:`itermask.callbacks.InterruptCallback`).
sweep_dir: Path | None = None
#: The Lightning ``last.ckpt`` of a fine-tuning under way, from which a re-run resumes.
_resumable: list[Path] = []


def note_progress(line: str | None = None, resumable: Path | None = None) -> None:
    """Record a finished step of the running job (e.g. ``"the fine-tuned checkpoint <entry>"``), or the
    ``last.ckpt`` that a fine-tuning under way writes (``resumable``); a Ctrl-C reports both."""
    if line is not None:
        _finished.append(line)
    if resumable is not None:
        _resumable.append(Path(resumable))


def finished() -> list[str]:
    """The finished steps recorded since :func:`clear`, in order."""
    return list(_finished)


def resumable() -> list[Path]:
    """The ``last.ckpt`` files recorded since :func:`clear`."""
    return list(_resumable)


def clear() -> None:
    """Forget what was recorded (a new job starts)."""
    _finished.clear()
    _resumable.clear()
