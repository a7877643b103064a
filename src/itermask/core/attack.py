"""A salience-guided greedy substitution attack on token ids, and how it relates to iterative masking.

:class:`GreedyAttack` follows the word-importance-then-greedy-substitution scheme of TextFooler (Jin et al.
2020, "Is BERT Really Robust?", AAAI, Algorithm 1) and PWWS (Ren et al. 2019, ACL, Sec. 3), with the
ranking taken from a saliency method (``occlusion`` is their leave-one-out word importance; TextFooler ranks
by deletion, PWWS by unknown-token replacement) and every step done on token ids, never on decoded and
re-tokenized text. For each example:

1. skip it (``attacked = False``) when its clean prediction differs from the target class;
2. rank its *attackable* positions (:mod:`itermask.core.candidates`) by saliency for the target class: on
   the clean input once (``ranking="one_shot"``), or again after each substitution (``"recursive"``);
3. visit the highest-ranked unvisited position (ties: earlier position first, as masking): every candidate
   for it, of every example still under attack, is scored in one batched forward; keep the candidate with
   the lowest target probability if it is lower than the current one (TextFooler's and PWWS's choice when no
   candidate flips the decision), else leave the position unchanged;
4. stop at the first decision flip (success), when the positions run out, when ``k_max = floor(budget * n +
   0.5)`` tokens are perturbed (``n`` maskable tokens, the rounding of
   :func:`itermask.core.schedules.masked_counts`), or when the next position's candidates would exceed
   ``max_queries`` scored inputs (the saliency method's own forwards are not counted).

**Word features** (``features="word"``, :mod:`itermask.core.features`): the unit ranked, visited, counted and
perturbed is a maskable word, scored by the same grouping as the masking evaluation (the sum of its pieces'
saliency; the random explanation's first piece), ``n`` and ``k_max`` count words, and perturbing a word
applies the masking strategy to every piece of it, as iterative masking over words does. Only sources whose
every candidate is :data:`~itermask.core.candidates.MASKED` (``mask``) serve words: one token id per word
cannot stand for a word of several pieces without re-tokenising, so the token-id sources are refused
(:func:`check_features`). ``word_start`` is moot with words (every maskable word is attackable).

**Masking as an attack.** With the ``mask`` source the only candidate is the masking strategy's
replacement. Under the one-shot ranking with every maskable position attackable (``word_start=None``), the
attack's perturbed count at success equals iterative masking's ``first_flip_count`` on the count grid
0, 1, ..., n (one-shot schedule, same saliency) exactly when masking one more token along the ranking
lowers the target probability at every step before the first flip and the budget reaches that flip: then
every visited position is accepted and both stop at the same j. Where a masking step does not lower the
probability, the attack skips that token and the two differ.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from itermask.core.candidates import MASKED, NO_CANDIDATE, CandidateSource, attackable_positions
from itermask.core.evaluation import resolve_target, saliency_scores
from itermask.core.evaluation_settings import DEFAULT_TOKEN_BUDGET, FEATURE_KINDS, segment_list
from itermask.core.features import Features, group_features
from itermask.core.forwards import row_outputs
from itermask.core.masking import MaskingStrategy, to_source_positions
from itermask.core.measures import target_output
from itermask.core.saliency import SaliencyMethod
from itermask.core.schedules import masked_counts, top_k_mask
from itermask.core.tokens import TokenBatch

__all__ = [
    "RANKINGS",
    "AttackResult",
    "GreedyAttack",
    "attack_logits",
    "budget_counts",
    "check_budget",
    "check_features",
]

#: how the attack ranks positions: once on the clean input, or again after each substitution
RANKINGS = ("one_shot", "recursive")


def check_budget(budget: float, max_queries: int | None = None, setting: str = "attack") -> None:
    """Raises ``ValueError`` for a perturbation budget outside (0, 1] or a query budget below 1 (``setting``:
    the config node named in the message)."""
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 < float(budget) <= 1:
        raise ValueError(f"{setting}.budget must lie in (0, 1] (a share of the maskable tokens), got {budget}")
    if max_queries is not None and (
        isinstance(max_queries, bool) or int(max_queries) != max_queries or max_queries < 1
    ):
        raise ValueError(f"attack.max_queries must be a positive integer or null (no limit), got {max_queries}")


def check_features(candidates: CandidateSource, features: str) -> None:
    """Raises ``ValueError`` for an unknown ``features`` kind, or word features with a source that proposes
    token ids (a word of several pieces would need re-tokenising; only ``mask`` serves words)."""
    if features not in FEATURE_KINDS:
        raise ValueError(f"unknown evaluation.features {features!r}: choose one of {FEATURE_KINDS}")
    if features == "word" and not candidates.masks_words:
        raise ValueError(
            f"attack candidates {candidates.name!r} propose one token id per position, which cannot replace a "
            "word of several pieces without re-tokenising: with evaluation.features=word use attack=mask (every "
            "piece of the word masked), or evaluation.features=token"
        )


def budget_counts(n_maskable: Tensor, budget: float) -> Tensor:
    """``[B]`` long: the most features (tokens or words) the attack may perturb, ``k_max = floor(budget * n +
    0.5)`` of ``n_maskable`` (``[B]``) maskable features."""
    return masked_counts(n_maskable, [float(budget)])[0]


def attack_logits(model: torch.nn.Module, batch: TokenBatch, token_budget: int = DEFAULT_TOKEN_BUDGET) -> Tensor:
    """Logits ``[N, C]`` (float32) of every row of ``batch``, in its order, by the evaluation's forwards
    (:func:`itermask.core.forwards.row_outputs`). The attack's only forward pass."""
    if not len(batch):
        return torch.empty(0, 0)
    return row_outputs(model, batch, token_budget).logits


@dataclass
class AttackResult:
    """The attack on ``B`` examples.

    Attributes:
        example_ids, target: ``[B]`` long.
        attacked: ``[B]`` bool, the clean prediction equals the target (else the example is skipped).
        success: ``[B]`` bool, the decision flipped within the budget.
        n_perturbed, n_maskable, k_max: ``[B]`` long features (tokens, or words with word features)
            perturbed, maskable features, the budget in features.
        queries: ``[B]`` long candidate inputs scored.
        clean_prob, final_prob: ``[B]`` float target probability on the clean and the final input.
        perturbed: ``[B, L]`` bool clean token positions substituted (every piece of a perturbed word).
        clean, adversarial: the clean batch ``[B, L]`` and the final model input ``[B, L']`` (substitutions made,
            the masking strategy applied).
        substituted_ids: ``[B, L]`` long the final ids over clean positions (before the masking strategy).
    """

    example_ids: Tensor
    target: Tensor
    attacked: Tensor
    success: Tensor
    n_perturbed: Tensor
    n_maskable: Tensor
    k_max: Tensor
    queries: Tensor
    clean_prob: Tensor
    final_prob: Tensor
    perturbed: Tensor
    clean: TokenBatch
    adversarial: TokenBatch
    substituted_ids: Tensor

    def __len__(self) -> int:
        return len(self.example_ids)

    @property
    def perturbed_fraction(self) -> Tensor:
        """``[B]`` float64 share of the maskable features perturbed, ``n_perturbed / n``."""
        return self.n_perturbed.double() / self.n_maskable.double().clamp(min=1)


class _State:
    """The search state over clean positions: the features (``groups``), ids (substitutions made), token
    positions the masking strategy applies to, features visited, and per example the current target
    probability, counts and flags."""

    def __init__(self, batch: TokenBatch, groups: Features, prob: Tensor, active: Tensor) -> None:
        size = len(batch)
        self.groups = groups
        self.ids = batch.input_ids.clone()
        self.masked = torch.zeros_like(batch.input_ids, dtype=torch.bool)
        self.visited = torch.zeros_like(groups.maskable)
        self.perturbed = torch.zeros_like(self.masked)
        self.prob = prob.clone()
        self.active = active.clone()
        self.success = torch.zeros(size, dtype=torch.bool, device=batch.device)
        self.n_perturbed = torch.zeros(size, dtype=torch.long, device=batch.device)
        self.queries = torch.zeros(size, dtype=torch.long, device=batch.device)


class GreedyAttack:
    """The salience-guided greedy substitution attack (see the module docstring).

    Args:
        saliency: ranks the positions (for the target class).
        strategy: the masking strategy (bound): what :data:`~itermask.core.candidates.MASKED` candidates
            become, applied to the clean ids as iterative masking applies it.
        candidates: the candidate source (bound; :meth:`CandidateSource.prepare` is called on the model).
        special_ids, word_start, segments: the attackable positions
            (:func:`~itermask.core.candidates.attackable_positions`; ``word_start`` ``None``: every maskable one).
        ranking, budget, max_queries: see the module docstring (:data:`RANKINGS`; a share of the maskable
            features in (0, 1]; candidate inputs scored per example, or ``None``).
        features: ``"token"`` or ``"word"`` (:data:`~itermask.core.features.FEATURE_KINDS`; module docstring).
        target: target policy (:func:`itermask.core.evaluation.resolve_target`).
        token_budget: padded tokens per forward (see :func:`attack_logits`).

    Raises:
        ValueError: for an unknown ranking, a bad budget or query budget, an unknown ``features`` or word
            features with a token-id source (:func:`check_features`).
    """

    def __init__(
        self,
        saliency: SaliencyMethod,
        strategy: MaskingStrategy,
        candidates: CandidateSource,
        special_ids: Iterable[int],
        word_start: Tensor | None = None,
        ranking: str = "one_shot",
        budget: float = 0.2,
        max_queries: int | None = None,
        target: str | int = "predicted",
        segments: int | Sequence[int] | None = None,
        token_budget: int = DEFAULT_TOKEN_BUDGET,
        features: str = "token",
    ) -> None:
        if ranking not in RANKINGS:
            raise ValueError(f"unknown attack ranking {ranking!r}: choose one of {RANKINGS}")
        check_budget(budget, max_queries)
        check_features(candidates, features)
        self.features = features
        self.saliency, self.strategy, self.candidates = saliency, strategy, candidates
        self.special_ids = sorted(set(int(i) for i in special_ids))
        self.word_start, self.ranking, self.budget = word_start, ranking, float(budget)
        self.max_queries = None if max_queries is None else int(max_queries)
        self.target, self.segments, self.token_budget = target, segment_list(segments), int(token_budget)

    def attackable(self, batch: TokenBatch) -> tuple[Tensor, Tensor]:
        """``([B, L] maskable, [B, L] attackable)`` token positions of the clean ``batch``
        (:func:`~itermask.core.candidates.attackable_positions`; ``word_start`` unused with word features)."""
        word_start = None if self.features == "word" else self.word_start
        return attackable_positions(batch, self.special_ids, word_start, self.segments)

    def features_of(self, batch: TokenBatch) -> tuple[Features, Tensor]:
        """The :class:`~itermask.core.features.Features` of the clean ``batch`` and its ``[B, W]`` bool
        attackable features (the attackable tokens; every maskable word with word features).

        Raises:
            ValueError: for word features of a batch without ``word_ids``."""
        maskable, attackable = self.attackable(batch)
        groups = group_features(batch, maskable, self.features)
        return groups, groups.maskable if self.features == "word" else attackable

    def _inputs(self, batch: TokenBatch, ids: Tensor, masked: Tensor):
        """The model input (:class:`~itermask.core.masking.MaskedBatch`) of ``batch`` with ``ids`` and the
        masking strategy applied at ``masked``."""
        return self.strategy.apply(batch.with_ids(ids), masked)

    def _saliency(
        self, model, batch: TokenBatch, state: _State, rows: Tensor, target: Tensor, example_ids: Tensor
    ) -> Tensor:
        """``[R, W]`` saliency of the features of ``rows``, from the token saliency of their current inputs
        over clean positions (grouped as the masking evaluation groups it)."""
        sub = batch.index(rows)
        masked = self._inputs(sub, state.ids[rows], state.masked[rows])
        # no zero-score check: a perturbed input may legitimately lose every gradient (sanity=False)
        scores = saliency_scores(self.saliency, model, masked.batch, target[rows], example_ids[rows], sanity=False)
        tokens = to_source_positions(scores, masked, batch.input_ids.shape[1])
        return state.groups.select(rows).scores(tokens, self.saliency.word_score)

    def _score(
        self,
        model,
        batch: TokenBatch,
        state: _State,
        rows: Tensor,
        pieces: Tensor,
        candidates: Tensor,
        target: Tensor,
    ) -> tuple[Tensor, Tensor]:
        """Every valid candidate of ``rows`` at their ``[R, L]`` bool ``pieces`` (the visited feature's token
        positions) in one forward: ``([R, C] target probability, +inf where no candidate; [R, C] predicted
        class)``."""
        row, column = torch.nonzero(candidates != NO_CANDIDATE, as_tuple=True)
        probs = torch.full(candidates.shape, float("inf"), device=batch.device)
        predicted = torch.full(candidates.shape, -1, dtype=torch.long, device=batch.device)
        if not len(row):  # no position of these rows has a candidate
            return probs, predicted
        source = rows[row]
        ids, masked = _substituted(state.ids[source], state.masked[source], pieces[row], candidates[row, column])
        logits = attack_logits(model, self._inputs(batch.index(source), ids, masked).batch, self.token_budget)
        probs[row, column] = target_output(logits, target[source].to(logits.device)).to(batch.device)
        predicted[row, column] = logits.argmax(dim=-1).to(batch.device)
        return probs, predicted

    def attack(
        self, model: torch.nn.Module, batch: TokenBatch, labels: Tensor | None = None, example_ids: Tensor | None = None
    ) -> AttackResult:
        """Attack every example of ``batch`` (``[B, L]``, clean; ``labels`` ``[B]`` for ``target="gold"``;
        ``example_ids`` ``[B]``, default the row index, seed the random saliency). ``model`` in eval mode."""
        size, device = len(batch), batch.device
        example_ids = torch.arange(size, device=device) if example_ids is None else example_ids
        self.candidates.prepare(model)
        groups, attackable = self.features_of(batch)
        n_maskable = groups.maskable.sum(dim=1)
        clean_logits = attack_logits(model, batch, self.token_budget).to(device)
        target = resolve_target(self.target, clean_logits, labels)
        attacked = clean_logits.argmax(dim=-1) == target
        k_max = budget_counts(n_maskable, self.budget)
        clean_prob = target_output(clean_logits, target.to(clean_logits.device))
        state = _State(batch, groups, clean_prob, attacked & (k_max > 0) & attackable.any(dim=1))
        scores = torch.full(groups.maskable.shape, float("-inf"), device=device)
        rows = torch.nonzero(state.active).flatten()
        if len(rows):
            scores[rows] = self._saliency(model, batch, state, rows, target, example_ids).to(scores.dtype)
        while state.active.any():
            self._step(model, batch, state, scores, attackable, k_max, target, example_ids)
        final = self._inputs(batch, state.ids, state.masked)
        return AttackResult(
            example_ids=example_ids,
            target=target,
            attacked=attacked,
            success=state.success,
            n_perturbed=state.n_perturbed,
            n_maskable=n_maskable,
            k_max=k_max,
            queries=state.queries,
            clean_prob=clean_prob,
            final_prob=state.prob,
            perturbed=state.perturbed,
            clean=batch,
            adversarial=final.batch,
            substituted_ids=state.ids,
        )

    def _step(
        self,
        model,
        batch: TokenBatch,
        state: _State,
        scores: Tensor,
        attackable: Tensor,
        k_max: Tensor,
        target: Tensor,
        example_ids: Tensor,
    ) -> None:
        """Visit the next ranked feature of every active example (updates ``state`` and ``scores``)."""
        rows = torch.nonzero(state.active).flatten()
        left = attackable[rows] & ~state.visited[rows]
        pick = top_k_mask(scores[rows], left, torch.ones(len(rows), dtype=torch.long, device=rows.device))
        has = pick.any(dim=1)
        state.active[rows[~has]] = False  # positions ran out
        rows, features = rows[has], pick[has].float().argmax(dim=1)
        if not len(rows):
            return
        pieces = state.groups.select(rows).to_tokens(pick[has])  # [R, L]: the feature's token positions
        current = batch.index(rows).with_ids(state.ids[rows])  # a source sees the first piece's position
        candidates = self.candidates.candidates(current, pieces.float().argmax(dim=1)).to(rows.device)
        if self.max_queries is not None:  # stop before a position whose candidates exceed the query budget
            fits = state.queries[rows] + (candidates != NO_CANDIDATE).sum(dim=1) <= self.max_queries
            state.active[rows[~fits]] = False
            rows, features, pieces, candidates = rows[fits], features[fits], pieces[fits], candidates[fits]
            if not len(rows):
                return
        probs, predicted = self._score(model, batch, state, rows, pieces, candidates, target)
        state.queries[rows] += (candidates != NO_CANDIDATE).sum(dim=1)
        state.visited[rows, features] = True
        best_prob, best = probs.min(dim=1)
        accept = best_prob < state.prob[rows]
        take, at, value = rows[accept], pieces[accept], candidates[accept, best[accept]]
        state.ids[take], state.masked[take] = _substituted(state.ids[take], state.masked[take], at, value)
        state.perturbed[take] |= at
        state.prob[take] = best_prob[accept]
        state.n_perturbed[take] += 1
        flipped = accept.clone()
        flipped[accept] = predicted[accept, best[accept]] != target[take]
        state.success[rows[flipped]] = True
        done = flipped | (state.n_perturbed[rows] >= k_max[rows])
        state.active[rows[done]] = False
        if self.ranking == "recursive":
            again = rows[accept & ~done]
            if len(again):
                scores[again] = self._saliency(model, batch, state, again, target, example_ids).to(scores.dtype)


def _substituted(ids: Tensor, masked: Tensor, at: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
    """``([N, L] ids, [N, L] masked)`` with candidate ``value`` (``[N]``: a token id, or :data:`MASKED`)
    applied at the ``[N, L]`` bool positions ``at``: the id written there, or the positions marked masked."""
    ids = torch.where(at & (value >= 0)[:, None], value[:, None], ids)
    return ids, masked | (at & (value == MASKED)[:, None])
