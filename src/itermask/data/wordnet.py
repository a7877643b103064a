"""The attack candidate sources that load something when bound: ``wordnet`` (NLTK's WordNet corpus) and
``mlm`` (a masked-language-model checkpoint). The search and the candidate logic are in the plain core
(:class:`itermask.core.candidates.SynonymCandidates`, :class:`~itermask.core.candidates.MlmCandidates`);
these subclasses only read files, in :meth:`bind`, which the settings stage calls before any fine-tuning,
so a missing corpus or an unusable checkpoint stops a run at start-up. Importing this module registers both
names (:data:`itermask.core.candidates.CANDIDATE_SOURCES`); :mod:`itermask.analyses.attack` and
:mod:`itermask.settings` import it.
"""

from __future__ import annotations

from itermask.core.candidates import Lexicon, SynonymCandidates

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
        ValueError: if NLTK or its WordNet corpus is not installed, saying how to install them.
    """
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
        found = []
        for synset in wordnet.synsets(word):
            for lemma in synset.lemma_names():
                if lemma != word and lemma not in found:
                    found.append(lemma)
        return found

    return synonyms


class WordNetCandidates(SynonymCandidates):
    """``attack.candidates.name=wordnet``: single-token WordNet synonyms of the original word
    (:class:`~itermask.core.candidates.SynonymCandidates`), NLTK's corpus read at :meth:`bind` unless a
    ``lexicon`` is given (tests, notebooks).

    Args:
        k: the most candidates per position.
        lexicon: a ``word -> synonyms`` mapping or function to use instead of WordNet.

    Raises:
        ValueError: ``k < 1``; at :meth:`bind`, NLTK or the WordNet corpus missing (see :func:`wordnet_lexicon`).
    """

    name = "wordnet"

    def __init__(self, k: int = 20, lexicon: Lexicon | None = None) -> None:
        super().__init__(k, lexicon)

    def _bind(self, tokenizer) -> None:
        if self.lexicon is None:
            self.lexicon = wordnet_lexicon()
        super()._bind(tokenizer)
