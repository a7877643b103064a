"""Out-of-distribution statistics of masked inputs: detectors fitted on in-distribution embeddings
(:mod:`~itermask.ood.detectors`), per-step statistics of masking curves (:mod:`~itermask.ood.statistics`),
both plain library code, and their figures (:mod:`~itermask.ood.plots`). The evaluate stage runs them
through :class:`itermask.analyses.OODAnalysis`."""
