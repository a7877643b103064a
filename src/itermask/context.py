"""What the running Hydra job is (:class:`JobContext`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

__all__ = ["JobContext"]


@dataclass(frozen=True)
class JobContext:
    """What the running Hydra job is, read once from Hydra's global state at the entry (:func:`run_job`) and
    passed down: nothing below the entry points reads ``HydraConfig``.

    Attributes:
        multirun: whether the job is one of a multirun (``-m``).
        overrides: the job's command-line overrides (``hydra.overrides.task``).
        number: the job's number in the multirun (``None`` in a single run).
        sweep_dir: the multirun's sweep folder (``None`` in a single run).
        command: the entry point's config name (``evaluate``, ``train``, ``pretrain``), which messages name as
            ``python <command>.py``.
    """

    multirun: bool = False
    overrides: tuple[str, ...] = ()
    number: str | None = None
    sweep_dir: str | None = None
    command: str = "evaluate"

    @classmethod
    def from_hydra(cls) -> JobContext:
        """The running Hydra job's context (an empty one outside Hydra)."""
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode
        from omegaconf import DictConfig

        if not HydraConfig.initialized():
            return cls()
        hydra_cfg = HydraConfig.get()
        multirun = hydra_cfg.mode == RunMode.MULTIRUN
        num = cast(DictConfig, hydra_cfg.job).get("num")  # a DictConfig at runtime (typed as the JobConf dataclass)
        return cls(
            multirun=multirun,
            overrides=tuple(hydra_cfg.overrides.task),
            number=None if num is None else str(num),
            sweep_dir=str(hydra_cfg.sweep.dir) if multirun else None,
            command=str(hydra_cfg.job.config_name or "evaluate"),
        )
