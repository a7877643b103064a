"""The scientific core: a plain PyTorch library (tensors and small dataclasses in and out; no Hydra,
OmegaConf, W&B or Lightning, no file I/O) that a researcher calls from a notebook.

- :mod:`~itermask.core.tokens`: token batches, maskable positions, the forward pass; the tokenizer-binding
  protocol of every component;
- :mod:`~itermask.core.saliency`: saliency methods by family;
- :mod:`~itermask.core.masking`: masking strategies; :mod:`~itermask.core.schedules`: masking schedules and
  step counts;
- :mod:`~itermask.core.evaluation`: the iterative-masking evaluation of a batch;
  :mod:`~itermask.core.curves`: its result, :class:`~itermask.core.curves.MaskingCurves`;
- :mod:`~itermask.core.forwards`: forwards of many rows, each distinct row once, length-bucketed by a
  token budget (:func:`~itermask.core.forwards.row_outputs`; the evaluation, OOD capture and attacks);
- :mod:`~itermask.core.metrics`: faithfulness scores and their registry;
- :mod:`~itermask.core.representations`: capturing representations during the forwards already run;
- :mod:`~itermask.core.registry`: registries by name.

The OOD statistics (:mod:`itermask.ood`) build on the core; nothing here imports anything above it.
"""
