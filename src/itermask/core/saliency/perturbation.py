"""Perturbation saliency methods (``occlusion``, ``lime``, ``kernel_shap``): they replace token ids by the
pad or mask id and only run forwards, one example at a time on its own length."""

from __future__ import annotations

from abc import abstractmethod
from contextlib import contextmanager

import torch
from captum._utils.models.linear_model import SkLearnRidge
from captum.attr import FeatureAblation, KernelShap, Lime
from torch import Tensor

from itermask.core.saliency.base import example_seed
from itermask.core.saliency.reference import _BaselineSaliency

__all__ = ["OcclusionSaliency", "LimeSaliency", "KernelShapSaliency"]


class _PerturbationSaliency(_BaselineSaliency):
    """A method that only runs forwards on inputs whose non-special tokens are replaced by the baseline
    token (pad or mask id; the attention mask is kept, so the replacement is attended to).

    Each example is explained on its own, trimmed to its own length: its features are its non-special
    tokens (special tokens are never features, never perturbed, and score 0), and a Captum perturbation
    method runs on the ``[1, n]`` ids of those tokens through a forward that writes them back into the
    example, ``perturbations_per_eval`` perturbed copies per forward pass.

    Args:
        perturbations_per_eval: perturbed copies of the example per forward pass (Captum's batching).

    Raises:
        ValueError: for ``perturbations_per_eval < 1``.
    """

    needs_gradients = False
    needs_embeddings = False

    def __init__(self, perturbations_per_eval: int = 64, **kwargs) -> None:
        super().__init__(**kwargs)
        if perturbations_per_eval < 1:
            raise ValueError(f"perturbations_per_eval must be >= 1, got {perturbations_per_eval}")
        self.perturbations_per_eval = int(perturbations_per_eval)

    def describe(self) -> dict:
        return {**super().describe(), "perturbations_per_eval": self.perturbations_per_eval}

    def explain(self, model, batch, target, example_ids=None, sanity=True):
        with torch.inference_mode():
            return super().explain(model, batch, target, example_ids, sanity)

    def _scores(self, model, batch, target, example_ids):
        maskable = ~self.kept(batch)
        baseline = self.baseline_ids(batch)
        forward = self._forward_fn(model)
        scores = torch.zeros(batch.input_ids.shape, device=batch.device)
        for row in range(len(batch)):
            positions = torch.nonzero(maskable[row]).flatten()
            if not len(positions):
                continue
            example = batch.index(slice(row, row + 1)).trim()  # its own length, not the batch's

            def row_forward(features: Tensor, example=example, positions=positions) -> Tensor:
                """``[P, n]`` ids of the non-special tokens -> ``[P, C]`` outputs."""
                tiled = example.tile(features.shape[0])
                ids = tiled.input_ids.clone()
                ids[:, positions] = features
                return forward(ids, tiled.attention_mask, tiled.token_type_ids)

            with self._sampling(int(example_ids[row])):
                attributions = self._attribute_row(
                    row_forward, batch.input_ids[row, positions][None], baseline[row, positions][None], int(target[row])
                )
            scores[row, positions] = attributions[0].to(scores.dtype)
        return scores

    @contextmanager
    def _sampling(self, example_id: int):
        """Context of one example's attribution (seeding, for sampling methods)."""
        yield

    @abstractmethod
    def _attribute_row(self, forward, features: Tensor, baselines: Tensor, target: int) -> Tensor:
        """``[1, n]`` scores of one example's ``[1, n]`` token ids ``features`` (baseline ids ``baselines``)."""


class OcclusionSaliency(_PerturbationSaliency):
    """Occlusion / leave-one-out: ``f(x) - f(x with token i replaced by the baseline token)`` for each
    non-special token ``i`` (Li et al. 2016, arXiv 1612.08220, "erasure"; Zeiler & Fergus 2014), with Captum
    ``FeatureAblation``, each token its own feature: ``n + 1`` forwards of one example (in
    ``ceil(n / perturbations_per_eval) + 1`` passes). Special tokens get 0 and are never replaced.

    Args:
        baseline: ``"pad"`` (default) or ``"mask"``.
        perturbations_per_eval: see :class:`_PerturbationSaliency`.
    """

    name = "occlusion"

    def _attribute_row(self, forward, features, baselines, target):
        return FeatureAblation(forward).attribute(
            features, baselines=baselines, target=target, perturbations_per_eval=self.perturbations_per_eval
        )


class _SurrogateSaliency(_PerturbationSaliency):
    """Shared by LIME and Kernel SHAP: per example, the interpretable features are its non-special tokens
    (present = 1, replaced by the baseline token = 0); ``n_samples`` perturbed copies are run through the
    model and a weighted linear surrogate is fitted, whose coefficients are the scores.

    Sampling uses torch's CPU generator, seeded per example by :func:`example_seed` (``seed``,
    ``example_id``) inside ``torch.random.fork_rng``, so scores are reproducible, independent of batching,
    and leave the global random state untouched.

    Args:
        n_samples: perturbed samples per example (forwards per example).
        seed: base seed.

    Raises:
        ValueError: for ``n_samples < 1``.
    """

    def __init__(self, n_samples: int = 100, seed: int = 0, perturbations_per_eval: int = 100, **kwargs) -> None:
        super().__init__(perturbations_per_eval=perturbations_per_eval, **kwargs)
        if n_samples < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}")
        self.n_samples = int(n_samples)
        self.seed = int(seed)

    def describe(self) -> dict:
        return {**super().describe(), "n_samples": self.n_samples, "seed": self.seed}

    @contextmanager
    def _sampling(self, example_id: int):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(example_seed(self.seed, example_id))
            yield

    @abstractmethod
    def _explainer(self, forward):
        """The Captum explainer for one example's forward ``f(token ids [P, n]) -> [P, C]``."""

    def _attribute_row(self, forward, features, baselines, target):
        return self._explainer(forward).attribute(
            features,
            baselines=baselines,
            target=target,
            n_samples=self.n_samples,
            perturbations_per_eval=self.perturbations_per_eval,
        )


class LimeSaliency(_SurrogateSaliency):
    """LIME (Ribeiro et al. 2016, arXiv 1602.04938, Eq. 1-3) over token features with Captum ``Lime``.

    As the reference implementation's text explainer (``lime.lime_text``): samples draw each token present
    with probability 1/2 (Captum's default), are weighted by ``sqrt(exp(-d^2 / kernel_width^2))`` with
    ``d = 100 x`` the cosine distance between the sample's binary vector and the all-ones vector, and the
    surrogate is a ridge regression (``alpha``) with intercept.

    Args:
        kernel_width: width of the similarity kernel (lime_text's default 25).
        alpha: ridge penalty (lime_text's default 1.0).
        n_samples, seed, perturbations_per_eval, baseline: see :class:`_SurrogateSaliency`.
    """

    name = "lime"

    def __init__(self, kernel_width: float = 25.0, alpha: float = 1.0, **kwargs) -> None:
        super().__init__(**kwargs)
        if kernel_width <= 0 or alpha < 0:
            raise ValueError(f"lime needs kernel_width > 0 and alpha >= 0, got {kernel_width}, {alpha}")
        self.kernel_width = float(kernel_width)
        self.alpha = float(alpha)

    def describe(self) -> dict:
        return {**super().describe(), "kernel_width": self.kernel_width, "alpha": self.alpha}

    def similarity(self, original, perturbed, interpretable: Tensor, **kwargs) -> Tensor:
        """Kernel weight of one sample from its ``[1, n]`` binary interpretable vector ``z``: the cosine
        distance to all ones is ``1 - sqrt(|z| / n)``."""
        z = interpretable.double()
        distance = 100.0 * (1.0 - torch.sqrt(z.sum() / z.numel()))
        return torch.sqrt(torch.exp(-(distance**2) / self.kernel_width**2))

    def _explainer(self, forward):
        return Lime(forward, interpretable_model=SkLearnRidge(alpha=self.alpha), similarity_func=self.similarity)


class KernelShapSaliency(_SurrogateSaliency):
    """Kernel SHAP (Lundberg & Lee 2017, arXiv 1705.07874, Theorem 2) over token features with Captum
    ``KernelShap``: coalitions sampled from the Shapley kernel (all-present and all-absent first), fitted
    by linear regression. With a single token the Shapley value is ``f(x) - f(baseline)``, computed
    directly (the kernel is undefined for one feature).
    """

    name = "kernel_shap"

    def _explainer(self, forward):
        return _SingleFeatureSafeKernelShap(forward)


class _SingleFeatureSafeKernelShap(KernelShap):
    def attribute(self, inputs, baselines=None, target=None, **kwargs):  # noqa: D102 (Captum's)
        if inputs.shape[-1] > 1:
            return super().attribute(inputs, baselines=baselines, target=target, **kwargs)
        outputs = self.forward_func(torch.cat([inputs, baselines]))[:, target]
        return (outputs[0] - outputs[1]).reshape(1, 1)
