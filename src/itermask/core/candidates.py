"""Where a salience-guided attack may substitute, and with what: word-initial positions and candidate sources.

*Word-initial* tokens (:func:`word_start_vocabulary`, :func:`word_initial_positions`): an attack substitutes
words, not the pieces inside a word, so it skips sub-word continuations, told apart per tokenizer family:

* WordPiece (BERT, MiniLM, DistilBERT, ELECTRA): a continuation carries the prefix ``##``;
* byte-level BPE (RoBERTa, GPT-2) and SentencePiece (DeBERTa-v2, XLM-R, T5): a word-initial piece carries
  the word-start marker ``Ġ`` / ``▁``; pieces without it continue a word. The first piece of a text has no
  marker when the tokenizer adds no prefix space (RoBERTa), so a piece that directly follows a special
  token (the start of a segment) also counts as word-initial.

*Candidate sources* (:data:`CANDIDATE_SOURCES`: :class:`MaskCandidates`, :class:`EmbeddingNeighbours`, a
lexicon's :class:`SynonymCandidates`, :class:`MlmCandidates`) propose substitutes per position: a token id, or
:data:`MASKED` (apply the masking strategy at the position); :data:`NO_CANDIDATE` pads rows with fewer. Sources
whose candidates are token ids (:attr:`CandidateSource.gives_token_ids`) also serve adversarial fine-tuning
(:mod:`itermask.core.adversarial`); they propose only word-initial, non-special, non-reserved tokens other
than the original (:func:`candidate_vocabulary`).
"""

from __future__ import annotations

import inspect
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from typing import ClassVar

import torch
from torch import Tensor

from itermask.core.registry import Registered, Registry
from itermask.core.tokens import TokenBatch, TokenizerBound, maskable_positions

__all__ = [
    "MASKED",
    "NO_CANDIDATE",
    "CANDIDATE_SOURCES",
    "CandidateSource",
    "MaskCandidates",
    "EmbeddingNeighbours",
    "SynonymCandidates",
    "MlmCandidates",
    "word_start_vocabulary",
    "word_initial_positions",
    "attackable_positions",
    "candidate_vocabulary",
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


def _word_pieces(tokenizer) -> tuple[list[str], str | None, str | None]:
    """``(tokens by id, continuation prefix, None)`` for WordPiece, ``(tokens, None, word-start marker)`` for BPE
    and SentencePiece (see :func:`word_start_vocabulary`).

    Raises:
        ValueError: if the vocabulary shows neither.
    """
    tokens = [str(t) for t in tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))]
    model = getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None)
    prefix = getattr(model, "continuing_subword_prefix", None) if type(model).__name__ == "WordPiece" else None
    if prefix is None and any(t.startswith("##") for t in tokens):
        prefix = "##"
    if prefix:
        return tokens, prefix, None
    counts = {marker: sum(t.startswith(marker) for t in tokens) for marker in WORD_START_MARKERS}
    marker = max(counts, key=lambda m: counts[m])
    if not counts[marker]:
        raise ValueError(
            f"cannot tell word-initial tokens of {type(tokenizer).__name__}: its vocabulary has neither '##' "
            "continuation pieces (WordPiece) nor 'Ġ'/'▁' word-start markers (BPE, SentencePiece); "
            "set attack.word_initial_only=false to attack every maskable position"
        )
    return tokens, None, marker


def word_start_vocabulary(tokenizer) -> Tensor:
    """``[V]`` bool over the tokenizer's ids (``V = len(tokenizer)``): whether the token starts a word. The family
    is read from the fast tokenizer's model (``WordPiece``: its ``continuing_subword_prefix``), else from the
    vocabulary: one with ``##`` pieces is WordPiece, otherwise the marker ``Ġ`` or ``▁`` that starts more
    entries marks word-initial pieces.

    Raises:
        ValueError: if the vocabulary shows neither (set ``attack.word_initial_only=false`` to attack every
            maskable position).
    """
    tokens, prefix, marker = _word_pieces(tokenizer)
    if prefix:
        return torch.tensor([not t.startswith(prefix) for t in tokens])
    assert marker is not None  # _word_pieces gives a word-start marker where it gives no prefix
    return torch.tensor([t.startswith(marker) for t in tokens])


def candidate_vocabulary(tokenizer) -> Tensor:
    """``[V]`` bool: the ids a token-id candidate source may propose: word-initial
    (:func:`word_start_vocabulary`), not special (``tokenizer.all_special_ids``), not a reserved slot
    (``[unusedN]``, ``<unusedN>``, ``madeupwordN``)."""
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    allowed = word_start_vocabulary(tokenizer) & torch.tensor([not _RESERVED.match(str(t)) for t in tokens])
    allowed[[i for i in tokenizer.all_special_ids if 0 <= i < len(allowed)]] = False
    return allowed


def word_initial_positions(batch: TokenBatch, word_start: Tensor, candidates: Tensor) -> Tensor:
    """``[B, L]`` bool: the positions of ``candidates`` (``[B, L]`` bool, e.g. the maskable ones) whose token
    starts a word: its id is word-initial in ``word_start`` (``[V]`` bool, :func:`word_start_vocabulary`), or
    it is the first candidate after a non-candidate position (a segment's first piece)."""
    ids = batch.input_ids.clamp(0, len(word_start) - 1)
    starts = word_start.to(batch.device)[ids]
    after_other = torch.ones_like(candidates)
    after_other[:, 1:] = ~candidates[:, :-1]
    return candidates & (starts | after_other)


def attackable_positions(
    batch: TokenBatch, special_ids: Iterable[int], word_start: Tensor | None = None, segments: list[int] | None = None
) -> tuple[Tensor, Tensor]:
    """``([B, L] maskable, [B, L] attackable)`` bool positions of the clean ``batch``: maskable
    (:func:`itermask.core.tokens.maskable_positions` in ``segments``), and of those the word-initial ones
    (:func:`word_initial_positions`; every maskable one when ``word_start`` is ``None``)."""
    maskable = maskable_positions(batch, special_ids, segments)
    if word_start is None:
        return maskable, maskable
    return maskable, word_initial_positions(batch, word_start, maskable)


def input_embedding_matrix(model: torch.nn.Module, needed_by: str) -> Tensor:
    """The classifier's ``[V, D]`` input (word) embedding matrix, ``model.get_input_embeddings().weight``
    (``needed_by`` names the caller in the error).

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
CANDIDATE_SOURCES: Registry[type[CandidateSource]] = Registry("attack candidate source")


class CandidateSource(Registered, TokenizerBound, ABC):
    """Substitution candidates for one position of each of ``R`` inputs. Subclasses set :attr:`name`
    (registering them in :data:`CANDIDATE_SOURCES`), :attr:`size` and implement :meth:`candidates`.
    :attr:`needs_embeddings`: the source reads the classifier's input-embedding matrix (:meth:`check`);
    :attr:`gives_token_ids`: every candidate is a token id (never :data:`MASKED`), as adversarial fine-tuning
    needs; :attr:`masks_words`: every candidate is :data:`MASKED`, so the attack can perturb a whole word
    (``evaluation.features=word``) by masking all its pieces, with no re-tokenisation."""

    registry = CANDIDATE_SOURCES
    needs_embeddings: ClassVar[bool] = False
    gives_token_ids: ClassVar[bool] = True
    masks_words: ClassVar[bool] = False

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
    gives_token_ids = False
    masks_words = True

    @property
    def size(self) -> int:
        return 1

    def candidates(self, batch, positions):
        return torch.full((len(positions), 1), MASKED, dtype=torch.long, device=positions.device)


class _TopK(CandidateSource):
    """A source of at most ``k`` candidates per position (``k`` checked, :attr:`size` is ``k``)."""

    def __init__(self, k: int) -> None:
        if isinstance(k, bool) or int(k) != k or int(k) < 1:
            raise ValueError(f"candidates.k must be an integer >= 1, got {k}")
        self.k = int(k)

    @property
    def size(self) -> int:
        return self.k


class EmbeddingNeighbours(_TopK):
    """The ``k`` (>= 1) nearest allowed tokens (:func:`candidate_vocabulary`) to the original token in the
    classifier's input embedding space, those with cosine similarity at least ``min_similarity``.

    TextFooler (Jin et al. 2020, AAAI, Sec. 3, "synonym extraction": ``N`` nearest words with cosine similarity
    above a threshold) draws its candidates the same way but from counter-fitted word vectors (Mrkšić et al.
    2016), which push antonyms apart; the classifier's own embedding space does not, so its neighbours include
    antonyms (``good`` -> ``bad``) and an "adversarial" example here need not keep the meaning. That space is
    offline for every model. Neighbours come from one matrix product per batch of new original ids
    (``[U, D] x [D, V]``), kept per id until the embedding weights change (:meth:`prepare` starts afresh).

    Raises:
        ValueError: ``k < 1`` or ``min_similarity`` outside [-1, 1]; at :meth:`prepare`, a model without an
            input-embedding matrix or with another vocabulary size than the tokenizer's.
    """

    name = "embedding_neighbors"
    needs_embeddings = True

    def __init__(self, k: int = 20, min_similarity: float = 0.4) -> None:
        super().__init__(k)
        if not -1.0 <= float(min_similarity) <= 1.0:
            raise ValueError(f"candidates.min_similarity must lie in [-1, 1] (a cosine), got {min_similarity}")
        self.min_similarity = float(min_similarity)
        self.unit: Tensor | None = None
        self._neighbours: dict[int, list[int]] = {}
        self._prepared_for: tuple | None = None

    def describe(self) -> dict:
        return {"name": self.name, "k": self.k, "min_similarity": self.min_similarity}

    def _bind(self, tokenizer) -> None:
        self.allowed = candidate_vocabulary(tokenizer)

    def prepare(self, model) -> None:
        self.require_bound()
        weight = input_embedding_matrix(model, f"attack candidates {self.name!r}").detach()
        version = (weight.data_ptr(), weight._version, tuple(weight.shape))  # unchanged weights: keep the neighbours
        if version == self._prepared_for:
            return
        if weight.shape[0] < len(self.allowed):
            raise ValueError(
                f"the classifier's input embeddings have {weight.shape[0]} rows, the tokenizer "
                f"{len(self.allowed)} ids: they do not belong together"
            )
        self.unit = torch.nn.functional.normalize(weight[: len(self.allowed)].float().cpu(), dim=1)
        self._neighbours, self._prepared_for = {}, version

    def neighbours(self, token_ids: list[int]) -> dict[int, list[int]]:
        """``{id: [neighbour ids, nearest first]}`` for ``token_ids`` (at most ``k`` each, possibly none).

        Raises:
            ValueError: before :meth:`prepare`.
        """
        if self.unit is None:
            raise ValueError(
                "EmbeddingNeighbours needs the tokenizer and the classifier's embeddings: call "
                "bind(tokenizer), then prepare(model)"
            )
        if new := sorted({int(i) for i in token_ids} - set(self._neighbours)):
            # float32 under a bf16 autocast too (itermask.core.precision): the neighbours do not depend on it
            with torch.inference_mode(), torch.autocast("cpu", enabled=False):
                similarity = self.unit[new] @ self.unit.T  # [U, V] cosine similarities
                similarity[:, ~self.allowed] = float("-inf")
                similarity[torch.arange(len(new)), torch.tensor(new)] = float("-inf")  # never the token itself
                values, indices = similarity.topk(min(self.k, int(self.allowed.sum())), dim=1)
            for row, token in enumerate(new):
                keep = values[row] >= self.min_similarity
                self._neighbours[token] = indices[row][keep].tolist()
        return {int(i): self._neighbours[int(i)] for i in token_ids}

    def candidates(self, batch, positions):
        originals = _originals(batch, positions).tolist()
        found = self.neighbours(originals)
        return _padded([found[token] for token in originals], self.k, positions.device)


def _originals(batch: TokenBatch, positions: Tensor) -> Tensor:
    """``[R]`` the id at ``positions[r]`` of row ``r``."""
    return batch.input_ids[torch.arange(len(positions), device=batch.device), positions.to(batch.device)]


def _padded(rows: list[list[int]], k: int, device) -> Tensor:
    """``[R, k]`` long: each row's first ``k`` ids, padded with :data:`NO_CANDIDATE`."""
    out = torch.full((len(rows), k), NO_CANDIDATE, dtype=torch.long)
    for row, ids in enumerate(rows):
        ids = ids[:k]
        out[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out.to(device)


class _WholeWordSource(_TopK):
    """A token-id source that replaces whole words only: a position whose word continues in the next token
    (a WordPiece ``##`` piece; a BPE/SentencePiece piece without the word-start marker that begins with a
    letter or digit) gets no candidate, so that a substitution never glues a new word to the rest of an old
    one. Binding reads the allowed ids (:func:`candidate_vocabulary`) and the continuation pieces."""

    def _bind(self, tokenizer) -> None:
        tokens, prefix, marker = _word_pieces(tokenizer)
        self.allowed = candidate_vocabulary(tokenizer)
        self.marker = marker or ""
        special = set(int(i) for i in tokenizer.all_special_ids)

        def continues(t: str) -> bool:
            return t.startswith(prefix) if prefix else not t.startswith(self.marker) and t[:1].isalnum()

        self.continuation = torch.tensor([continues(t) and i not in special for i, t in enumerate(tokens)])

    def word_continues(self, batch: TokenBatch, positions: Tensor) -> Tensor:
        """``[R]`` bool: the token after ``positions[r]`` of row ``r`` continues its word (attended and a
        continuation piece)."""
        self.require_bound()
        rows, nexts = torch.arange(len(positions), device=batch.device), positions.to(batch.device) + 1
        after = nexts.clamp(max=batch.input_ids.shape[1] - 1)
        ids = batch.input_ids[rows, after].clamp(0, len(self.continuation) - 1)
        attended = batch.attention_mask[rows, after].bool() & (nexts < batch.input_ids.shape[1])
        return attended & self.continuation.to(batch.device)[ids]


#: a lexicon: ``word -> synonyms``, as a mapping or a function
Lexicon = Mapping[str, Iterable[str]] | Callable[[str], Iterable[str]]


class SynonymCandidates(_WholeWordSource):
    """The single-token synonyms of the original word that ``lexicon`` (a mapping ``word -> synonyms`` or a
    function of the word, given before :meth:`bind`) gives, at most ``k``, in the lexicon's order (PWWS's WordNet
    swap, Ren et al. 2019, Sec. 3.1; TextAttack's ``WordSwapWordNet``).

    The word is the original token without its word-start marker (``Ġ``/``▁``); the lexicon is asked for it
    as written, then lower-cased if it gives nothing. A synonym is a candidate when it is *one* allowed
    token (:func:`candidate_vocabulary`, with the vocabulary's word-start marker), tried as given,
    lower-cased and, for a capitalised word, capitalised; never the original. Multi-word entries (WordNet
    writes spaces as ``_``) and words the tokenizer would split into pieces are dropped: nothing is decoded
    and re-tokenized. Positions whose word continues in the next token get none. Looked up once per
    original id. The ``wordnet`` source (:class:`itermask.data.wordnet.WordNetCandidates`) reads NLTK's WordNet.

    Raises:
        ValueError: ``k < 1``; at :meth:`bind`, no lexicon.
    """

    def __init__(self, k: int = 20, lexicon: Lexicon | None = None) -> None:
        super().__init__(k)
        self.lexicon = lexicon
        self._found: dict[int, list[int]] = {}

    def describe(self) -> dict:
        return {"name": self.name, "k": self.k}

    def _bind(self, tokenizer) -> None:
        if self.lexicon is None:
            raise ValueError(f"{type(self).__name__} needs a lexicon (word -> synonyms) before it is bound")
        super()._bind(tokenizer)
        self.vocabulary = tokenizer.get_vocab()
        self.tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        self._found = {}

    def _lookup(self, word: str) -> list[str]:
        assert self.lexicon is not None  # checked when bound
        get = self.lexicon.get if isinstance(self.lexicon, Mapping) else self.lexicon
        found = list(get(word) or [])
        if not found and word.lower() != word:
            found = list(get(word.lower()) or [])
        return [str(w) for w in found]

    def synonyms(self, token_id: int) -> list[int]:
        """The candidate ids for the original ``token_id`` (see the class docstring)."""
        self.require_bound()
        if token_id not in self._found:
            token = str(self.tokens[token_id]) if 0 <= token_id < len(self.tokens) else ""
            word = token[len(self.marker) :] if self.marker and token.startswith(self.marker) else token
            ids: list[int] = []
            for synonym in self._lookup(word) if word and self.allowed[token_id] else []:
                forms = [synonym, synonym.lower()] + ([synonym.capitalize()] if word[:1].isupper() else [])
                for form in forms:
                    i = self.vocabulary.get(self.marker + form)
                    if i is not None and i < len(self.allowed) and self.allowed[i] and i != token_id and i not in ids:
                        ids.append(i)
                        break
            self._found[token_id] = ids[: self.k]
        return self._found[token_id]

    def candidates(self, batch, positions):
        originals = _originals(batch, positions).tolist()
        continues = self.word_continues(batch, positions).tolist()
        rows = [[] if cont else self.synonyms(int(token)) for token, cont in zip(originals, continues)]
        return _padded(rows, self.k, positions.device)


class MlmCandidates(_WholeWordSource):
    """The ``k`` top predictions of a masked-language model at the position, given the current input with
    that position set to the mask token: BAE-R's candidates (Garg & Ramakrishnan 2020, "BAE: BERT-based
    Adversarial Examples", EMNLP, Sec. 2), without BAE's sentence-encoder similarity filter. Only allowed ids
    (:func:`candidate_vocabulary`), never the original; positions whose word continues in the next token get
    none. The ``mlm`` source (:class:`itermask.models.mlm.PretrainedMlmCandidates`) loads ``mlm_pretrained``.

    Args:
        mlm: a masked-language model with the tokenizer's vocabulary (``mlm(input_ids=..., attention_mask=...)
            .logits`` is ``[R, L, V']``, ``V' >= V``), or ``None`` to set before :meth:`bind`.
        chunk_size: rows per MLM forward (bounds the ``[rows, L, V']`` logits).
        source: where the model came from, for result files.

    Raises:
        ValueError: ``k < 1`` or ``chunk_size < 1``; at :meth:`bind`, no model or no mask token.
    """

    def __init__(
        self, mlm: torch.nn.Module | None = None, k: int = 20, chunk_size: int = 16, source: str | None = None
    ) -> None:
        super().__init__(k)
        if isinstance(chunk_size, bool) or int(chunk_size) < 1:
            raise ValueError(f"attack.candidates.chunk_size must be a positive integer, got {chunk_size}")
        self.mlm = None if mlm is None else mlm.eval().requires_grad_(False)
        self.chunk_size, self.mlm_pretrained = int(chunk_size), source

    def describe(self) -> dict:
        return {"name": self.name, "k": self.k, "mlm_pretrained": self.mlm_pretrained}

    def _bind(self, tokenizer) -> None:
        if self.mlm is None:
            raise ValueError(f"{type(self).__name__} needs a masked-language model (mlm=...) before it is bound")
        if getattr(tokenizer, "mask_token_id", None) is None:
            raise ValueError(f"{type(tokenizer).__name__} has no mask token: the mlm candidates need one")
        super()._bind(tokenizer)
        self.mask_token_id = int(tokenizer.mask_token_id)
        self.takes_token_types = "token_type_ids" in inspect.signature(self.mlm.forward).parameters

    def predictions(self, batch: TokenBatch, positions: Tensor) -> Tensor:
        """``[R, V]`` float the MLM's logits at ``positions[r]`` of row ``r``, that position masked."""
        self.require_bound()
        assert self.mlm is not None  # checked when bound
        rows = torch.arange(len(positions), device=batch.device)
        positions = positions.to(batch.device)
        ids = batch.input_ids.clone()
        ids[rows, positions] = self.mask_token_id
        query = batch.with_ids(ids)
        if next(self.mlm.parameters()).device != batch.device:
            self.mlm.to(batch.device)
        parts = []
        with torch.inference_mode():
            for start in range(0, len(rows), self.chunk_size):
                chunk = slice(start, start + self.chunk_size)
                inputs = query.index(chunk).model_inputs()
                if not self.takes_token_types:
                    inputs.pop("token_type_ids", None)
                logits = self.mlm(**inputs).logits
                parts.append(logits[torch.arange(logits.shape[0], device=logits.device), positions[chunk]].float())
        return torch.cat(parts)[:, : len(self.allowed)] if parts else torch.empty(0, len(self.allowed))

    def candidates(self, batch, positions):
        if not len(positions):
            return torch.empty(0, self.k, dtype=torch.long, device=positions.device)
        scores = self.predictions(batch, positions).clone()
        scores[:, ~self.allowed.to(scores.device)] = float("-inf")
        rows = torch.arange(len(positions), device=scores.device)
        scores[rows, _originals(batch, positions).to(scores.device)] = float("-inf")
        scores[self.word_continues(batch, positions).to(scores.device)] = float("-inf")
        values, ids = scores.topk(min(self.k, scores.shape[1]), dim=1)
        ids = torch.where(values > float("-inf"), ids, NO_CANDIDATE)
        return torch.nn.functional.pad(ids, (0, self.k - ids.shape[1]), value=NO_CANDIDATE).to(positions.device)
