"""The attack candidate source ``wordnet``, which reads NLTK's WordNet corpus when bound (the candidate logic is
:class:`itermask.core.candidates.SynonymCandidates`); the settings stage binds it before any fine-tuning, so a
missing corpus stops a run at start-up. Importing this module registers it
(:data:`itermask.core.candidates.CANDIDATE_SOURCES`).
"""

from __future__ import annotations

from itermask.core.candidates import SynonymCandidates

__all__ = ["WordNetCandidates", "wordnet_lexicon"]

#: what to run to get the corpus
WORDNET_INSTALL = "pip install nltk && python -m nltk.downloader wordnet"
#: who needs it (the evaluation's attack or adversarial fine-tuning)
WORDNET_USERS = (
    "the candidate source 'wordnet' (attack=wordnet or train.adversarial_augmentation.candidates.name=wordnet)"
)


def wordnet_lexicon():
    """``word -> [synonyms]`` from NLTK's WordNet: the lemma names of every synset of the word (all parts of
    speech, English), in NLTK's synset order, without the word itself (TextAttack's ``WordSwapWordNet``).

    Raises:
        ValueError: if NLTK or its WordNet corpus is not installed, saying how to install them."""
    try:
        from nltk.corpus import wordnet  # pyright: ignore[reportMissingImports]  # optional dependency
    except ImportError as error:
        raise ValueError(f"{WORDNET_USERS} needs NLTK: {WORDNET_INSTALL}") from error
    try:
        wordnet.ensure_loaded()
    except LookupError as error:
        raise ValueError(
            f"{WORDNET_USERS} needs NLTK's WordNet corpus (NLTK data 'corpora/wordnet'), which is not installed: "
            f"run `{WORDNET_INSTALL}` (it downloads the corpus; on a machine without internet, copy an nltk_data "
            "folder with corpora/wordnet into one of NLTK's search paths, or set NLTK_DATA), or choose "
            "attack=embedding_neighbors or attack=mask"
        ) from error

    def synonyms(word: str) -> list[str]:
        lemmas = (lemma for synset in wordnet.synsets(word) for lemma in synset.lemma_names() if lemma != word)
        return list(dict.fromkeys(lemmas))  # each once, in order

    return synonyms


class WordNetCandidates(SynonymCandidates):
    """``attack.candidates.name=wordnet``: the ``k`` first single-token WordNet synonyms of the original word
    (:class:`~itermask.core.candidates.SynonymCandidates`), NLTK's corpus read at :meth:`bind` unless a
    ``lexicon`` (a ``word -> synonyms`` mapping or function) is given.

    Raises:
        ValueError: ``k < 1``; at :meth:`bind`, NLTK or the WordNet corpus missing (see :func:`wordnet_lexicon`)."""

    name = "wordnet"

    def _bind(self, tokenizer) -> None:
        if self.lexicon is None:
            self.lexicon = wordnet_lexicon()
        super()._bind(tokenizer)
