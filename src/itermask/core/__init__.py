"""The scientific core: a plain PyTorch library (tensors and small dataclasses in and out; no Hydra,
OmegaConf, W&B or Lightning, no file I/O) that a researcher calls from a notebook: token batches
(:mod:`~itermask.core.tokens`), saliency methods (:mod:`~itermask.core.saliency`), masking strategies and
schedules (:mod:`~itermask.core.masking`, :mod:`~itermask.core.schedules`), the iterative-masking evaluation
(:mod:`~itermask.core.evaluation`) and its result (:mod:`~itermask.core.curves`), length-bucketed forwards
(:mod:`~itermask.core.forwards`), faithfulness metrics (:mod:`~itermask.core.metrics`), representations
(:mod:`~itermask.core.representations`), attacks and registries by name. The OOD statistics
(:mod:`itermask.ood`) build on the core; nothing here imports anything above it."""

__all__ = ["exact_aopc_bounds"]


def __getattr__(name: str):
    # ``from itermask.core import exact_aopc_bounds`` (the public check of NAOPC's exact bounds), imported on
    # first use: the settings check imports core modules and should not pay for numpy
    if name == "exact_aopc_bounds":
        from itermask.core.aopc_bounds import exact_aopc_bounds

        return exact_aopc_bounds
    raise AttributeError(f"module 'itermask.core' has no attribute {name!r}")
