"""The scientific core: a plain PyTorch library (tensors and small dataclasses in and out; no Hydra,
OmegaConf, W&B or Lightning, no file I/O) that a researcher calls from a notebook: token batches
(:mod:`~itermask.core.tokens`), saliency methods (:mod:`~itermask.core.saliency`), masking strategies and
schedules (:mod:`~itermask.core.masking`, :mod:`~itermask.core.schedules`), the iterative-masking evaluation
(:mod:`~itermask.core.evaluation`) and its result (:mod:`~itermask.core.curves`), length-bucketed forwards
(:mod:`~itermask.core.forwards`), faithfulness metrics (:mod:`~itermask.core.metrics`), representations
(:mod:`~itermask.core.representations`), attacks and registries by name. The OOD statistics
(:mod:`itermask.ood`) build on the core; nothing here imports anything above it."""
