"""Token saliency methods behind one interface, :meth:`SaliencyMethod.attribute`, by family:

* :mod:`.base`: the interface, :class:`RandomSaliency` and :func:`prepare_for_saliency`;
* :mod:`.gradient`: ``gradient``, ``gradient_signed``, ``input_x_gradient``;
* :mod:`.reference`: ``integrated_gradients``, ``deeplift`` (a baseline in word-embedding space);
* :mod:`.perturbation`: ``occlusion``, ``lime``, ``kernel_shap`` (forwards on perturbed token ids);
* :mod:`.attention`: ``attention``, ``attention_rollout``.

A new method is one subclass of :class:`SaliencyMethod` plus one ``conf/saliency/<name>.yaml`` whose
``_target_`` names it.
"""

from itermask.core.saliency.attention import AttentionRolloutSaliency, AttentionSaliency, attention_rollout
from itermask.core.saliency.base import (
    BASELINES,
    OUTPUTS,
    TOKEN_BASELINES,
    Attribution,
    RandomSaliency,
    SaliencyError,
    SaliencyMethod,
    ZeroSaliencyWarning,
    example_seed,
    prepare_for_saliency,
)
from itermask.core.saliency.gradient import GradientSaliency, InputXGradientSaliency
from itermask.core.saliency.perturbation import KernelShapSaliency, LimeSaliency, OcclusionSaliency
from itermask.core.saliency.reference import DeepLiftSaliency, IntegratedGradientsSaliency

__all__ = [
    "SaliencyMethod",
    "Attribution",
    "SaliencyError",
    "ZeroSaliencyWarning",
    "RandomSaliency",
    "GradientSaliency",
    "InputXGradientSaliency",
    "IntegratedGradientsSaliency",
    "DeepLiftSaliency",
    "OcclusionSaliency",
    "LimeSaliency",
    "KernelShapSaliency",
    "AttentionSaliency",
    "AttentionRolloutSaliency",
    "attention_rollout",
    "prepare_for_saliency",
    "example_seed",
    "OUTPUTS",
    "BASELINES",
    "TOKEN_BASELINES",
]
