"""itermask: faithfulness of token-saliency explanations under iterative masking.

The scientific core (:mod:`itermask.tokens`, :mod:`itermask.saliency`, :mod:`itermask.masking`,
:mod:`itermask.evaluation`, :mod:`itermask.metrics`) is a plain PyTorch library: tensors and small
dataclasses in and out, no Hydra, no W&B, no file I/O, so it can be called from a notebook. The
Lightning modules, tracking and the ``train.py``/``evaluate.py`` entry points wire it together.

Reference: Crothers, Viktor, Japkowicz, "Robust Infidelity: When Faithfulness Measures on Masked
Language Models Are Misleading", arXiv 2308.06795.
"""

__version__ = "0.1.0"
