"""Where a salience-guided attack may substitute, and with what: word-initial positions and candidate sources.

*Word-initial* tokens (:func:`word_start_vocabulary`, :func:`word_initial_positions`): an attack substitutes
words, not the pieces inside a word, so it skips sub-word continuations, told apart per tokenizer family:

* WordPiece (BERT, MiniLM, DistilBERT, ELECTRA): a continuation carries the prefix ``##``;
* byte-level BPE (RoBERTa, GPT-2) and SentencePiece (DeBERTa-v2, XLM-R, T5): a word-initial piece carries
  the word-start marker ``Ġ`` / ``▁``; pieces without it continue a word. The first piece of a text has no
  marker when the tokenizer adds no prefix space (RoBERTa), so a piece that directly follows a special
  token (the start of a segment) also counts as word-initial.

*Candidate sources* (:data:`CANDIDATE_SOURCES`, each a :class:`CandidateSource` subclass registered by its
``name``, built from settings and bound to the tokenizer with ``.bind(tokenizer)`` like every component):

* ``mask`` (:class:`MaskCandidates`): the configured masking strategy's replacement is the only candidate,
  so the attack *is* iterative masking with a greedy acceptance rule (see :mod:`itermask.core.attack`);
* ``embedding_neighbors`` (:class:`EmbeddingNeighbours`): the ``k`` word-initial, non-special tokens
  nearest to the original token by cosine similarity of the classifier's own input (word) embeddings,
  those with similarity at least ``min_similarity``. TextFooler (Jin et al. 2020, AAAI, Sec. 3, "synonym
  extraction": ``N`` nearest words with cosine similarity above a threshold) draws its candidates the
  same way but from counter-fitted word vectors (Mrkšić et al. 2016), which push antonyms apart; the
  classifier's own embedding space does not, so its neighbours include antonyms (``good`` -> ``bad``) and
  an "adversarial" example here need not keep the meaning. That space is offline for every model.

A candidate is a token id, or :data:`MASKED` (apply the masking strategy at the position), and
:data:`NO_CANDIDATE` pads rows with fewer candidates. Issue 14 adds ``wordnet`` and ``mlm`` sources as
further subclasses.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import ClassVar

import torch
from torch import Tensor

from itermask.core.registry import Registered, Registry
from itermask.core.tokens import TokenBatch, TokenizerBound

__all__ = [
    "MASKED",
    "NO_CANDIDATE",
    "CANDIDATE_SOURCES",
    "CandidateSource",
    "MaskCandidates",
    "EmbeddingNeighbours",
    "build_candidate_source",
    "word_start_vocabulary",
    "word_initial_positions",
    "input_embedding_matrix",
]

#: candidate value: apply the masking strategy at the position (the ``mask`` source)
MASKED = -2
#: candidate value: no candidate (pads rows with fewer than :attr:`CandidateSource.size` candidates)
NO_CANDIDATE = -1

#: word-start markers of byte-level BPE (``Ġ``) and SentencePiece (``▁``)
WORD_START_MARKERS = ("\u0120", "\u2581")
#: reserved vocabulary slots (``[unused12]``, ``<unused3>``, ``madeupword0001``): never candidates
_RESERVED = re.compile(r"^(\[unused\d+\]|<unused\d+>|madeupword\d+)$")


def word_start_vocabulary(tokenizer) -> Tensor:
    """``[V]`` bool over the tokenizer's ids (``V = len(tokenizer)``): whether the token starts a word.

    The family is read from the fast tokenizer's model (``WordPiece``: its ``continuing_subword_prefix``,
    ``##``), else from the vocabulary: a vocabulary with ``##`` pieces is WordPiece, otherwise the marker
    ``Ġ`` or ``▁`` that starts more entries marks word-initial pieces.

    Raises:
        ValueError: if the vocabulary shows neither continuation prefixes nor word-start markers (set
            ``attack.word_initial_only=false`` to attack every maskable position).
    """
    tokens = [str(t) for t in tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))]
    model = getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None)
    prefix = getattr(model, "continuing_subword_prefix", None) if type(model).__name__ == "WordPiece" else None
    if prefix is None and any(t.startswith("##") for t in tokens):
        prefix = "##"
    if prefix:
        return torch.tensor([not t.startswith(prefix) for t in tokens])
    counts = {marker: sum(t.startswith(marker) for t in tokens) for marker in WORD_START_MARKERS}
    marker = max(counts, key=counts.get)
    if not counts[marker]:
        raise ValueError(
            f"cannot tell word-initial tokens of {type(tokenizer).__name__}: its vocabulary has neither '##' "
            "continuation pieces (WordPiece) nor 'Ġ'/'▁' word-start markers (BPE, SentencePiece); "
            "set attack.word_initial_only=false to attack every maskable position"
        )
    return torch.tensor([t.startswith(marker) for t in tokens])


def word_initial_positions(batch: TokenBatch, word_start: Tensor, candidates: Tensor) -> Tensor:
    """``[B, L]`` bool: the positions of ``candidates`` (``[B, L]`` bool, e.g. the maskable ones) whose token
    starts a word: its id is word-initial in ``word_start`` (``[V]`` bool, :func:`word_start_vocabulary`), or
    it is the first candidate after a non-candidate position (a segment's first piece)."""
    ids = batch.input_ids.clamp(0, len(word_start) - 1)
    starts = word_start.to(batch.device)[ids]
    after_other = torch.ones_like(candidates)
    after_other[:, 1:] = ~candidates[:, :-1]
    return candidates & (starts | after_other)


def input_embedding_matrix(model: torch.nn.Module, needed_by: str) -> Tensor:
    """The classifier's ``[V, D]`` input (word) embedding matrix, ``model.get_input_embeddings().weight``.

    Raises:
        ValueError: if the model exposes no such matrix.
    """
    get = getattr(model, "get_input_embeddings", None)
    layer = get() if callable(get) else None
    weight = getattr(layer, "weight", None)
    if not isinstance(weight, Tensor) or weight.dim() != 2:
        raise ValueError(
            f"{type(model).__name__} has no input-embedding matrix (get_input_embeddings().weight, [vocab, dim]); "
            f"{needed_by} needs one: choose attack=mask"
        )
    return weight


#: every candidate source by name (subclasses of :class:`CandidateSource` add themselves)
CANDIDATE_SOURCES: Registry[type["CandidateSource"]] = Registry("attack candidate source")


class CandidateSource(Registered, TokenizerBound, ABC):
    """Substitution candidates for one position of each of ``R`` inputs. Subclasses set :attr:`name`
    (registering them in :data:`CANDIDATE_SOURCES`), :attr:`size` and implement :meth:`candidates`.

    Class attributes:
        needs_embeddings: the source reads the classifier's input-embedding matrix (checked by
            :meth:`check` before any fine-tuning, on the architecture).
    """

    registry = CANDIDATE_SOURCES
    needs_embeddings: ClassVar[bool] = False

    @property
    @abstractmethod
    def size(self) -> int:
        """``C``, the most candidates a position gets."""

    def check(self, model: torch.nn.Module) -> None:
        """Fail before any work if the source cannot serve ``model`` (e.g. no input-embedding matrix).

        Raises:
            ValueError: naming the problem.
        """
        if self.needs_embeddings:
            input_embedding_matrix(model, f"attack candidates {self.name!r}")

    def prepare(self, model: torch.nn.Module) -> None:
        """Read what the source needs from the fine-tuned ``model`` (nothing by default)."""
        self.check(model)

    @abstractmethod
    def candidates(self, batch: TokenBatch, positions: Tensor) -> Tensor:
        """``[R, C]`` long candidates for position ``positions[r]`` (``[R]`` long) of row ``r`` of ``batch``
        (the current, already perturbed ids, ``[R, L]``): token ids, :data:`MASKED` or :data:`NO_CANDIDATE`.
        Sources that read the tokenizer or the model need :meth:`bind` and :meth:`prepare` first.

        Raises:
            ValueError: from a source that was not bound or prepared.
        """

    def describe(self) -> dict:
        """The settings that define the source, for result files."""
        return {"name": self.name}


class MaskCandidates(CandidateSource):
    """The masking strategy's replacement as the only candidate (:data:`MASKED`): iterative masking seen as
    an attack."""

    name = "mask"

    @property
    def size(self) -> int:
        return 1

    def candidates(self, batch, positions):
        return torch.full((len(positions), 1), MASKED, dtype=torch.long, device=positions.device)


class EmbeddingNeighbours(CandidateSource):
    """The ``k`` nearest word-initial, non-special tokens to the original token in the classifier's input
    embedding space (cosine similarity), those at least ``min_similarity`` similar (see the module
    docstring; TextFooler's synonym extraction in another embedding space).

    Neighbours are found with one matrix product per batch of new original ids against the unit-normalised
    embedding matrix (``[U, D] x [D, V]``), and kept per id until the embedding weights change (:meth:`prepare`
    on a model whose matrix is another, or was updated in place, starts afresh). The original token itself, special ids
    (``tokenizer.all_special_ids``), sub-word continuations (:func:`word_start_vocabulary`) and reserved
    slots (``[unusedN]``) are never candidates.

    Args:
        k: the most candidates per position (>= 1).
        min_similarity: the least cosine similarity of a candidate, in [-1, 1].

    Raises:
        ValueError: ``k < 1`` or ``min_similarity`` outside [-1, 1]; at :meth:`prepare`, a model without an
            input-embedding matrix or with another vocabulary size than the tokenizer's.
    """

    name = "embedding_neighbors"
    needs_embeddings = True

    def __init__(self, k: int = 20, min_similarity: float = 0.4) -> None:
        if isinstance(k, bool) or int(k) != k or int(k) < 1:
            raise ValueError(f"attack.candidates.k must be an integer >= 1, got {k}")
        if not -1.0 <= float(min_similarity) <= 1.0:
            raise ValueError(f"attack.candidates.min_similarity must lie in [-1, 1] (a cosine), got {min_similarity}")
        self.k, self.min_similarity = int(k), float(min_similarity)
        self.unit: Tensor | None = None
        self._neighbours: dict[int, list[int]] = {}
        self._prepared_for: tuple | None = None

    @property
    def size(self) -> int:
        return self.k

    def describe(self) -> dict:
        return {"name": self.name, "k": self.k, "min_similarity": self.min_similarity}

    def _bind(self, tokenizer) -> None:
        tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        allowed = word_start_vocabulary(tokenizer) & torch.tensor([not _RESERVED.match(str(t)) for t in tokens])
        allowed[[i for i in tokenizer.all_special_ids if 0 <= i < len(allowed)]] = False
        self.allowed = allowed

    def prepare(self, model) -> None:
        self.require_bound()
        weight = input_embedding_matrix(model, f"attack candidates {self.name!r}").detach()
        version = (weight.data_ptr(), weight._version, tuple(weight.shape))  # unchanged weights: keep the neighbours
        if version == self._prepared_for:
            return
        if weight.shape[0] < len(self.allowed):
            raise ValueError(f"the classifier's input embeddings have {weight.shape[0]} rows, the tokenizer "
                             f"{len(self.allowed)} ids: they do not belong together")
        self.unit = torch.nn.functional.normalize(weight[: len(self.allowed)].float().cpu(), dim=1)
        self._neighbours, self._prepared_for = {}, version

    def neighbours(self, token_ids: list[int]) -> dict[int, list[int]]:
        """``{id: [neighbour ids, nearest first]}`` for ``token_ids`` (at most ``k`` each, possibly none).

        Raises:
            ValueError: before :meth:`prepare`.
        """
        if self.unit is None:
            raise ValueError("EmbeddingNeighbours needs the tokenizer and the classifier's embeddings: call "
                             "bind(tokenizer), then prepare(model)")
        new = sorted({int(i) for i in token_ids} - set(self._neighbours))
        if new:
            with torch.inference_mode():
                similarity = self.unit[new] @ self.unit.T  # [U, V] cosine similarities
                similarity[:, ~self.allowed] = float("-inf")
                similarity[torch.arange(len(new)), torch.tensor(new)] = float("-inf")  # never the token itself
                values, indices = similarity.topk(min(self.k, int(self.allowed.sum())), dim=1)
            for row, token in enumerate(new):
                keep = values[row] >= self.min_similarity
                self._neighbours[token] = indices[row][keep].tolist()
        return {int(i): self._neighbours[int(i)] for i in token_ids}

    def candidates(self, batch, positions):
        originals = batch.input_ids[torch.arange(len(positions), device=positions.device), positions].tolist()
        found = self.neighbours(originals)
        out = torch.full((len(positions), self.k), NO_CANDIDATE, dtype=torch.long)
        for row, token in enumerate(originals):
            ids = found[token]
            out[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        return out.to(positions.device)


def build_candidate_source(spec: dict) -> CandidateSource:
    """The source named ``spec["name"]`` built with the other entries of ``spec`` as its settings (unbound).

    Raises:
        ValueError: for a missing or unknown name (listing the known ones), or a bad setting.
    """
    spec = dict(spec or {})
    name = spec.pop("name", None)
    if name is None:
        raise ValueError(f"attack.candidates needs a name: choose from {sorted(CANDIDATE_SOURCES)}")
    source = CANDIDATE_SOURCES.get_entry(str(name))
    try:
        return source(**spec)
    except TypeError as error:
        raise ValueError(f"bad settings for attack candidates {name!r}: {error}") from None
