"""Perturbation saliency methods (``occlusion``, ``lime``, ``kernel_shap``): they replace token ids by the
pad or mask id and only run forwards, the perturbed copies of every example of a batch in one length-bucketed
pass (:func:`itermask.core.forwards.row_outputs`)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from contextlib import contextmanager

import torch
from captum._utils.models.linear_model import SkLearnRidge
from captum.attr import FeatureAblation, KernelShap, Lime
from torch import Tensor
from torch.utils.data import DataLoader, TensorDataset

from itermask.core.evaluation_settings import DEFAULT_TOKEN_BUDGET
from itermask.core.forwards import ForwardStats, RowForwards, positive_token_budget
from itermask.core.saliency.base import example_seed
from itermask.core.saliency.reference import _BaselineSaliency
from itermask.core.tokens import TokenBatch

__all__ = ["OcclusionSaliency", "LimeSaliency", "KernelShapSaliency"]


class _PerturbationSaliency(_BaselineSaliency):
    """A method that only runs forwards on inputs whose non-special tokens are replaced by the baseline
    token (pad or mask id; the attention mask is kept, so the replacement is attended to).

    Each example's features are its non-special tokens (special tokens are never perturbed and score 0).
    Per example the method plans its perturbed copies (:meth:`_plan`); the copies of every example run
    through the model in one :class:`itermask.core.forwards.RowForwards` call (``token_budget`` padded tokens
    per forward); then each example's scores are computed from its outputs. A row's output does not depend on
    the rows it is batched with, so the scores equal those of the Captum method run on each example alone
    (:meth:`captum_attribution`, the reference, ``perturbations_per_eval`` copies per forward) up to float
    rounding.

    Raises:
        ValueError: for ``perturbations_per_eval < 1`` or a non-positive ``token_budget``.
    """

    needs_gradients = False
    needs_embeddings = False
    batches_own_calls = True

    def __init__(self, perturbations_per_eval: int = 64, token_budget: int = DEFAULT_TOKEN_BUDGET, **kwargs) -> None:
        super().__init__(**kwargs)
        if perturbations_per_eval < 1:
            raise ValueError(f"perturbations_per_eval must be >= 1, got {perturbations_per_eval}")
        self.perturbations_per_eval = int(perturbations_per_eval)
        self.token_budget = positive_token_budget(token_budget)
        #: what the forwards of the last batch ran (rows asked for, distinct rows computed, padding)
        self.forward_stats = ForwardStats()

    def describe(self) -> dict:
        return {**super().describe(), "perturbations_per_eval": self.perturbations_per_eval}

    def explain(self, model, batch, target, example_ids=None, sanity=True):
        with torch.inference_mode():
            return super().explain(model, batch, target, example_ids, sanity)

    def _examples(self, batch: TokenBatch):
        """``(row, positions [n], features [1, n], baselines [1, n])`` of each example with a feature."""
        maskable = ~self.kept(batch)
        baseline = self.baseline_ids(batch)
        for row in range(len(batch)):
            positions = torch.nonzero(maskable[row]).flatten()
            if len(positions):
                yield row, positions, batch.input_ids[row, positions][None], baseline[row, positions][None]

    def _scores(self, model, batch, target, example_ids):
        scores = torch.zeros(batch.input_ids.shape, device=batch.device)
        plans, rows, copies = [], [], []
        for row, positions, features, baselines in self._examples(batch):
            with self._sampling(int(example_ids[row])):
                samples, finish = self._plan(features, baselines, int(target[row]))
            ids = batch.input_ids[row].expand(len(samples), -1).clone()
            ids[:, positions] = samples.to(ids.device)
            plans.append((row, positions, finish))
            rows.append(torch.full((len(samples),), row, dtype=torch.long, device=batch.device))
            copies.append(ids)
        if not plans:
            return scores
        rows = torch.cat(rows)
        forwards = RowForwards(model, self.token_budget)
        logits = forwards(batch.index(rows).with_ids(torch.cat(copies))).logits
        self.forward_stats = forwards.stats
        chosen = self._output(logits).gather(1, target[rows][:, None]).flatten()
        start = 0
        for (row, positions, finish), ids in zip(plans, copies):
            scores[row, positions] = finish(chosen[start : start + len(ids)]).to(scores.device, scores.dtype)
            start += len(ids)
        return scores

    @contextmanager
    def _sampling(self, example_id: int):
        """Context of one example's plan (seeding, for sampling methods)."""
        yield

    @abstractmethod
    def _plan(self, features: Tensor, baselines: Tensor, target: int) -> tuple[Tensor, Callable[[Tensor], Tensor]]:
        """One example's perturbed copies and how to score them, from its features' ``[1, n]`` token ids and
        ``[1, n]`` ``baselines``: ``(samples, finish)``, the ``[P, n]`` ids of the features in each perturbed copy
        and ``finish(outputs)`` mapping the copies' ``[P]`` explained outputs (for ``target``) to ``[n]`` scores."""

    def captum_attribution(self, model, batch: TokenBatch, target: Tensor, example_ids: Tensor | None = None) -> Tensor:
        """The reference: the Captum method run on each example alone, trimmed to its own length
        (``perturbations_per_eval`` copies per forward): ``[B, L]`` raw scores, 0 at special tokens and padding."""
        if example_ids is None:
            example_ids = torch.arange(len(batch), device=batch.device)
        forward = self._forward_fn(model)
        scores = torch.zeros(batch.input_ids.shape, device=batch.device)
        with torch.inference_mode():
            for row, positions, features, baselines in self._examples(batch):
                example = batch.index(slice(row, row + 1)).trim()

                def row_forward(ids: Tensor, example=example, positions=positions) -> Tensor:
                    tiled = example.tile(ids.shape[0])
                    full = tiled.input_ids.clone()
                    full[:, positions] = ids
                    return forward(full, tiled.attention_mask, tiled.token_type_ids)

                with self._sampling(int(example_ids[row])):
                    attributions = self._captum_row(row_forward, features, baselines, int(target[row]))
                scores[row, positions] = attributions[0].to(scores.dtype)
        return scores

    @abstractmethod
    def _captum_row(self, forward, features: Tensor, baselines: Tensor, target: int) -> Tensor:
        """``[1, n]`` scores of one example's ``[1, n]`` token ids by the Captum method (the reference)."""


class OcclusionSaliency(_PerturbationSaliency):
    """Occlusion / leave-one-out: ``f(x) - f(x with token i replaced by the baseline token)`` (``"pad"``, default,
    or ``"mask"``) for each non-special token ``i`` (Li et al. 2016, arXiv 1612.08220, "erasure"; Zeiler &
    Fergus 2014): ``n + 1`` rows per example, the reference being Captum ``FeatureAblation`` with each token its
    own feature. Special tokens get 0 and are never replaced."""

    name = "occlusion"

    def _plan(self, features, baselines, target):
        n = features.shape[1]
        left_out = features.expand(n, n).clone()
        left_out.diagonal().copy_(baselines[0])
        return torch.cat([features, left_out]), lambda outputs: outputs[0] - outputs[1:]

    def _captum_row(self, forward, features, baselines, target):
        return FeatureAblation(forward).attribute(
            features, baselines=baselines, target=target, perturbations_per_eval=self.perturbations_per_eval
        )


class _SurrogateSaliency(_PerturbationSaliency):
    """Shared by LIME and Kernel SHAP: per example, the interpretable features are its non-special tokens
    (present = 1, replaced by the baseline token = 0); ``n_samples`` perturbed copies are run through the
    model and a weighted linear surrogate is fitted, whose coefficients are the scores. Sampling uses torch's
    CPU generator, seeded per example by :func:`example_seed` (``seed``, ``example_id``) inside
    ``torch.random.fork_rng``: scores are reproducible, independent of batching, and leave the global random
    state untouched.

    Raises:
        ValueError: for ``n_samples`` below :attr:`min_samples` (the fewest samples whose surrogate can rank
            tokens at all).
    """

    #: LIME: a surrogate fitted on one sample has no slope (every score 0). Kernel SHAP: its first two
    #: coalitions are all-present and all-absent, which give every token the same score; a third is needed.
    min_samples = 2

    def __init__(self, n_samples: int = 100, seed: int = 0, perturbations_per_eval: int = 100, **kwargs) -> None:
        super().__init__(perturbations_per_eval=perturbations_per_eval, **kwargs)
        if n_samples < self.min_samples:
            raise ValueError(
                f"n_samples must be >= {self.min_samples} for {self.name}, got {n_samples}: with fewer samples its "
                "linear surrogate cannot rank the tokens (every score would be equal, and the zero-score check "
                "would blame the model). Its fit is determined only with more samples than the text has tokens; "
                "the default is 100 (lime_text's own default is 5000)"
            )
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
    def _explainer(self, forward) -> Lime:
        """The Captum explainer for one example's forward ``f(token ids [P, n]) -> [P, C]``."""

    def _captum_row(self, forward, features, baselines, target):
        return self._run(self._explainer(forward), features, baselines, target)

    def _run(self, explainer, features: Tensor, baselines: Tensor, target: int) -> Tensor:
        """``explainer``'s ``[1, n]`` attributions of one example (``n_samples`` samples)."""
        return explainer.attribute(
            features,
            baselines=baselines,
            target=target,
            n_samples=self.n_samples,
            perturbations_per_eval=self.perturbations_per_eval,
        )

    def _plan(self, features, baselines, target):
        """Captum's own sampling, run with a forward that records the samples (and answers zeros) and a
        surrogate that records its training data instead of fitting; ``finish`` fits the real surrogate on
        that data with the real outputs, as Captum would have."""
        samples = []

        def recording_forward(ids: Tensor) -> Tensor:
            samples.append(ids.clone())
            return torch.zeros(ids.shape[0], target + 1, device=ids.device)

        explainer = self._explainer(recording_forward)
        surrogate, recorder = explainer.interpretable_model, _RecordedFit(features.shape[1])
        # a duck-typed stand-in for Captum's Model (fit, representation), swapped back below
        explainer.interpretable_model = recorder  # pyright: ignore[reportAttributeAccessIssue]
        self._run(explainer, features, baselines, target)
        explainer.interpretable_model = surrogate
        if recorder.data is None:  # a single feature: the direct difference (see _SingleFeatureSafeKernelShap)
            return torch.cat(samples), lambda outputs: outputs[:1] - outputs[1:2]
        data = recorder.data

        def finish(outputs: Tensor) -> Tensor:
            interpretable, _, similarities = data
            dataset = TensorDataset(interpretable, outputs.float(), similarities)
            surrogate.fit(DataLoader(dataset, batch_size=len(interpretable)))
            return surrogate.representation().flatten()[: features.shape[1]]

        return torch.cat(samples), finish


class _RecordedFit:
    """A stand-in for Captum's interpretable model that keeps the tensors it is asked to fit on
    (``data``: interpretable inputs ``[P, n]``, outputs ``[P]``, similarities ``[P]``) and represents zeros."""

    def __init__(self, n_features: int) -> None:
        self.n_features = n_features
        self.data: tuple[Tensor, Tensor, Tensor] | None = None

    def fit(self, loader: DataLoader) -> None:
        self.data = tuple(t.clone() for t in next(iter(loader)))

    def representation(self) -> Tensor:
        return torch.zeros(1, self.n_features)


class LimeSaliency(_SurrogateSaliency):
    """LIME (Ribeiro et al. 2016, arXiv 1602.04938, Eq. 1-3) over token features with Captum ``Lime``.

    As the reference implementation's text explainer (``lime.lime_text``): samples draw each token present
    with probability 1/2 (Captum's default), are weighted by ``sqrt(exp(-d^2 / kernel_width^2))`` with
    ``d = 100 x`` the cosine distance between the sample's binary vector and the all-ones vector, and the
    surrogate is a ridge regression (``alpha``) with intercept; lime_text's defaults are ``kernel_width=25`` and
    ``alpha=1.0``.
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
    min_samples = 3

    def _explainer(self, forward):
        return _SingleFeatureSafeKernelShap(forward)


class _SingleFeatureSafeKernelShap(KernelShap):
    def attribute(self, inputs, baselines=None, target=None, **kwargs):  # pyright: ignore[reportIncompatibleMethodOverride]  (Captum's, one feature handled)
        if inputs.shape[-1] > 1:
            return super().attribute(inputs, baselines=baselines, target=target, **kwargs)
        assert baselines is not None  # _SurrogateSaliency always passes them
        outputs = self.forward_func(torch.cat([inputs, baselines]))[:, target]
        return (outputs[0] - outputs[1]).reshape(1, 1)
