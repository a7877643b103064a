"""Several processes (Lightning DDP): which process this is, how many the trainer config starts, and the
gathering of per-example results without the examples a distributed sampler repeats; and, for multiruns, one
job per device (:class:`DevicePool`) with a fixed thread count (:func:`apply_threads`).

Under DDP (``trainer=ddp``) Lightning's subprocess launcher starts ranks ``1..N-1`` at the job's first
``fit``/``test``, each running the same command line again (log ``<job folder>/train_ddp_process_<rank>.log``).
Only rank 0 owns the checkpoint cache and the result files, gathers the ranks' shares of the evaluated examples
(:func:`gather_to_all`, :func:`first_of_each`) and runs the analyses and the record stage.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

__all__ = [
    "UNSUPPORTED_STRATEGIES",
    "process_rank",
    "trainer_processes",
    "distributed_problem",
    "gather_to_all",
    "first_of_each",
    "available_cpus",
    "apply_threads",
    "DevicePool",
    "assign_device",
]

#: Lightning strategies that start processes by forking or spawning a function instead of running the
#: command line again: the job's stages before ``fit`` would not run in them.
UNSUPPORTED_STRATEGIES = ("ddp_spawn", "ddp_fork", "ddp_notebook", "spawn", "fork")


def process_rank() -> int:
    """The global rank of this process: 0 in a single-process job and in the process the user started; ``r`` in
    the processes Lightning launched (read as Lightning's ``rank_zero_only`` does, before any trainer exists)."""
    module = sys.modules.get("lightning_fabric.utilities.rank_zero")
    if module is not None:  # Lightning's own record, updated when its strategy sets the process group up
        return int(getattr(module.rank_zero_only, "rank", 0) or 0)
    for name in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK"):  # Lightning's order, no torch
        if name in os.environ:
            return int(os.environ[name])
    return 0


def _devices_per_node(devices: Any, gpu: bool) -> int:
    """The number of devices of ``trainer.devices`` on one node (``"auto"``/``-1``: every GPU; 1 CPU process)."""
    if isinstance(devices, (list, tuple)):
        return len(devices)
    if isinstance(devices, str):
        text = devices.strip()
        if text in ("auto", "-1"):
            devices = -1
        elif "," in text:
            return len([part for part in text.split(",") if part.strip()])
        else:
            devices = int(text)
    if devices is None or devices == -1:
        if not gpu:
            return 1
        import torch

        return max(torch.cuda.device_count(), 1)
    return int(devices)


def trainer_processes(trainer: dict) -> int:
    """How many processes the trainer config ``trainer`` (a plain dict of ``conf/trainer``) runs: its devices
    per node times ``num_nodes``, or 1 for a single-device strategy.

    Raises:
        ValueError: for a ``devices`` value that is not a count, a list or ``"auto"``."""
    accelerator = str(trainer.get("accelerator", "auto"))
    gpu = accelerator in ("gpu", "cuda")
    if accelerator == "auto":
        import torch

        gpu = torch.cuda.is_available()
    try:
        per_node = _devices_per_node(trainer.get("devices", "auto"), gpu)
    except (TypeError, ValueError):
        raise ValueError(
            f"trainer.devices={trainer.get('devices')!r} is not a number of devices, a list of device ids or 'auto'"
        ) from None
    strategy = str(trainer.get("strategy", "auto"))
    if strategy.startswith("single") or strategy == "auto" and per_node <= 1:
        return 1
    return per_node * int(trainer.get("num_nodes", 1) or 1)


def distributed_problem(trainer: dict, multirun: bool) -> str | None:
    """Why the trainer config cannot run here, or ``None``: a strategy of :data:`UNSUPPORTED_STRATEGIES`, several
    processes per job in a Hydra multirun, a GPU accelerator where torch sees no GPU, or a ``limit_test_batches``
    that is neither a count of batches >= 1 nor a fraction in (0, 1]."""
    limit = trainer.get("limit_test_batches")
    if limit is not None:
        number = isinstance(limit, (int, float)) and not isinstance(limit, bool)
        if not (number and limit > 0 and (isinstance(limit, int) or limit <= 1)):
            return (
                f"trainer.limit_test_batches={limit!r} must be a whole number of batches >= 1 or a fraction in "
                "(0, 1]: it limits the test accuracy's and the masking evaluation's batches (0 would score nothing)"
            )
    accelerator = str(trainer.get("accelerator", "auto"))
    if accelerator in ("gpu", "cuda"):
        import torch

        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
            if str(trainer.get("strategy")) == "ddp":  # trainer=ddp sets the GPU itself: the user may not have
                return (
                    f"trainer=ddp runs one process per GPU (its trainer.accelerator={accelerator}), but torch "
                    f"{torch.__version__} ({build}) sees no GPU: for DDP over CPU processes add "
                    "trainer.accelerator=cpu trainer.devices=2, or install the torch build for your GPU"
                )
            return (
                f"trainer.accelerator={accelerator}, but torch {torch.__version__} ({build}) sees no GPU: use "
                "trainer.accelerator=auto (a GPU when there is one) or cpu, or install the torch build for your GPU"
            )
    strategy = str(trainer.get("strategy", "auto"))
    if any(strategy.startswith(name) for name in UNSUPPORTED_STRATEGIES):
        return (
            f"trainer.strategy={strategy} is not supported: itermask's processes each run the job's command line "
            "(Lightning's subprocess launcher); use trainer=ddp (trainer.strategy=ddp)"
        )
    processes = trainer_processes(trainer)
    if multirun and processes > 1:
        return (
            f"trainer.devices={trainer.get('devices')!r} starts {processes} processes per job (DDP), which a "
            "multirun (-m) cannot do: Lightning re-runs the command line, -m included, in every process. Run one "
            "job per GPU instead (hydra/launcher=joblib with itermask's per-job device mapping, docs/reliability.md), "
            "or run the DDP job without -m"
        )
    return None


def gather_to_all(trainer, value: Any) -> list[Any]:
    """``[value of rank 0, value of rank 1, ...]`` on every rank (``torch.distributed.all_gather_object``);
    ``[value]`` in a single process. Every rank must call it (a collective)."""
    if trainer.world_size <= 1:
        return [value]
    import torch.distributed as dist

    gathered: list[Any] = [None] * trainer.world_size
    dist.all_gather_object(gathered, value)
    return gathered


def first_of_each(example_ids):
    """Indices of the first occurrence of each example id in ``example_ids`` (``[N]`` integers), in ascending id
    order: the examples a ``DistributedSampler`` repeated (to give every rank as many) dropped."""
    import torch

    order = torch.argsort(example_ids, stable=True)
    ids = example_ids[order]
    first = torch.ones_like(ids, dtype=torch.bool)
    first[1:] = ids[1:] != ids[:-1]
    return order[first]


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), the same in every launcher's worker."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def apply_threads(threads: int | None) -> int:
    """Give torch and NumPy's BLAS ``threads`` intra-op threads (``None``: :func:`available_cpus`) and return the
    number, so every launcher computes the same numbers (joblib's loky workers start with one thread). Before
    torch is imported the count goes into ``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS``."""
    count = int(threads) if threads is not None else available_cpus()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(count)
    else:
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(count)
    try:  # NumPy's BLAS (the OOD statistics' covariances): loky workers start it with one thread too
        import numpy  # noqa: F401  (loads its BLAS library, which the limit only reaches once loaded)
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=count, user_api="blas")
    except ImportError:  # threadpoolctl comes with scikit-learn; without it NumPy keeps its own count
        pass
    return count


class DevicePool:
    """The GPUs that the jobs of a multirun take turns on, one job per device at a time (``job_devices``), under
    any launcher: a job claims the first free device of ``devices`` (CUDA indices) by an exclusive file lock
    ``<folder>/<host>-device<id>.lock`` (held until :meth:`release` or the process's death), trying the busy
    devices again every ``poll`` seconds."""

    def __init__(self, devices, folder, poll: float = 2.0) -> None:
        self.devices = [int(d) for d in devices]
        if not self.devices:
            raise ValueError("job_devices must list at least one device id, or be null")
        self.folder = Path(folder)
        self.poll = poll
        self._held = None

    def _path(self, device: int):
        host = socket.gethostname().replace(".", "_") or "host"
        return self.folder / f"{host}-device{device}.lock"

    def claim(self, timeout: float | None = None) -> int:
        """Claim a free device and return its id (waiting up to ``timeout`` seconds; ``None``: forever).

        Raises:
            TimeoutError: if every device stayed busy for ``timeout`` seconds."""
        self.folder.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        while True:
            for device in self.devices:
                lock = FileLock(str(self._path(device)), timeout=0)
                try:
                    lock.acquire()
                except Timeout:
                    continue
                self._held = lock
                return device
            if timeout is not None and time.monotonic() - start >= timeout:
                raise TimeoutError(f"every device of job_devices={self.devices} stayed busy for {timeout:g} s")
            time.sleep(self.poll)

    def release(self) -> None:
        """Free the claimed device (no-op without one)."""
        if self._held is not None:
            self._held.release()
            self._held = None


def assign_device(trainer, device: int) -> bool:
    """Point the trainer config (a ``DictConfig`` node, changed in place) at ``device`` for a job of
    ``job_devices``: ``devices: [device]``; returns whether it did. A CPU trainer (``accelerator: cpu``, or
    ``auto`` without CUDA) is left as it is (the claim still spaces the jobs out)."""
    import torch
    from omegaconf import open_dict

    accelerator = str(trainer.get("accelerator", "auto"))
    if accelerator == "cpu" or accelerator == "auto" and not torch.cuda.is_available():
        return False
    with open_dict(trainer):
        trainer.devices = [device]
    return True
