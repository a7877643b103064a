"""Several processes (Lightning DDP): which process this is, how many the trainer config starts, and the
gathering of per-example results without the examples a distributed sampler repeats.

How a DDP job runs (``trainer=ddp``, or ``trainer.devices=N`` with ``trainer.strategy=ddp``): Lightning's
subprocess launcher starts the processes of ranks ``1..N-1`` at the job's first ``fit``/``test`` call, each
running the same command line again from the start (its Hydra job named ``train_ddp_process_<rank>``, its log
``<job folder>/train_ddp_process_<rank>.log``). Every process therefore goes through the settings, the data
and the model stage itself; only rank 0 owns the checkpoint cache (its lock, the fine-tuning's export, the
result files); the other ranks read the cache after a barrier. Each rank runs the test accuracy and the masking
evaluation on its share of the examples; rank 0 gathers the shares (:func:`gather_to_all`), keeps each example
once (:func:`first_of_each`: Lightning's ``DistributedSampler`` repeats examples to give every rank as many),
and runs the analyses and the record stage alone.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "UNSUPPORTED_STRATEGIES",
    "process_rank",
    "trainer_processes",
    "distributed_problem",
    "gather_to_all",
    "first_of_each",
]

#: Lightning strategies that start processes by forking or spawning a function instead of running the
#: command line again: the job's stages before ``fit`` would not run in them.
UNSUPPORTED_STRATEGIES = ("ddp_spawn", "ddp_fork", "ddp_notebook", "spawn", "fork")


def process_rank() -> int:
    """The global rank of this process: 0 in a single-process job and in the process the user started;
    ``r`` in the processes Lightning launched (read from ``RANK``/``LOCAL_RANK``, as Lightning's own
    ``rank_zero_only`` does, so it is known before any trainer exists)."""
    from lightning_fabric.utilities.rank_zero import rank_zero_only

    return int(getattr(rank_zero_only, "rank", 0) or 0)


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
        ValueError: for a ``devices`` value that is not a count, a list or ``"auto"``.
    """
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
    """Why the trainer config cannot run here, or ``None``: a strategy that does not run the command line in
    each process (:data:`UNSUPPORTED_STRATEGIES`), or several processes per job in a Hydra multirun (Lightning
    would start each process's copy of the whole sweep)."""
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
    """Indices of the first occurrence of each example id in ``example_ids`` (a 1-d integer tensor), in
    ascending id order: what is left of results gathered from the ranks once the examples a
    ``DistributedSampler`` repeated (to give every rank as many) are dropped."""
    import torch

    order = torch.argsort(example_ids, stable=True)
    ids = example_ids[order]
    first = torch.ones_like(ids, dtype=torch.bool)
    first[1:] = ids[1:] != ids[:-1]
    return order[first]
