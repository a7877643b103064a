"""The text of continued pretraining: the shipped gendered word pairs and the two-sided counterfactual
gender-swap augmentation of a corpus (counterfactual data augmentation, CDA)."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

__all__ = [
    "shipped_word_pairs",
    "load_word_pairs",
    "swap_gendered",
    "has_gendered",
    "augment_corpus",
    "SHIPPED_WORD_PAIRS",
]

#: the shipped gendered word-pair list (``model.pretrain.word_pairs: null``); its header documents its sources
SHIPPED_WORD_PAIRS = "cda/gendered_pairs.txt"

_WORD = re.compile(r"[A-Za-z]+")


def shipped_word_pairs() -> Path:
    """The path of the shipped list (:data:`SHIPPED_WORD_PAIRS`)."""
    return Path(str(resources.files("itermask") / "resources" / SHIPPED_WORD_PAIRS))


def load_word_pairs(path: str | Path, setting: str = "model.pretrain.word_pairs") -> dict[str, str]:
    """The swap table of a word-pair file (one pair of whitespace-separated words per line, ``#`` starts a
    comment): ``word -> partner`` (lower case) in both directions. A word in several pairs swaps to its partner
    in the first pair naming it (``his her`` then ``hers his``: ``her -> his``, ``his -> her``, ``hers -> his``).

    Raises:
        FileNotFoundError: if there is no file at ``path`` (naming ``setting``).
        ValueError: a line that is not two words of letters, or a file without any pair."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise FileNotFoundError(
            f"{setting}={path}: no word-pair file there; give a file of gendered word pairs (one pair per line, "
            f"e.g. 'he she'), or null for the shipped list itermask/resources/{SHIPPED_WORD_PAIRS}"
        )
    table: dict[str, str] = {}
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 2 or not all(_WORD.fullmatch(w) for w in words) or words[0].lower() == words[1].lower():
            raise ValueError(
                f"{setting}={path}, line {number}: {line.strip()!r} is not a pair of two different words of letters"
            )
        first, second = (w.lower() for w in words)
        table.setdefault(first, second)
        table.setdefault(second, first)
    if not table:
        raise ValueError(f"{setting}={path} holds no word pair (one pair per line, e.g. 'he she')")
    return table


def _cased(word: str, like: str) -> str:
    """``word`` in the case of ``like``: upper (``HE`` -> ``SHE``; a single capital counts as capitalised),
    capitalised (``He`` -> ``She``) or as it is."""
    if len(like) > 1 and like.isupper():
        return word.upper()
    if like[0].isupper():
        return word[0].upper() + word[1:]
    return word


def swap_gendered(text: str, pairs: dict[str, str]) -> str:
    """``text`` with every word (a maximal run of ASCII letters) in ``pairs`` replaced by its partner, in the
    word's case (:func:`_cased`); everything else, punctuation and spacing included, unchanged.

    >>> swap_gendered("He thanked his Mother's actor.", {"he": "she", "she": "he", "his": "her",
    ...     "her": "his", "mother": "father", "father": "mother", "actor": "actress", "actress": "actor"})
    "She thanked her Father's actress."
    """
    return _WORD.sub(lambda m: _cased(pairs[w], m.group()) if (w := m.group().lower()) in pairs else m.group(), text)


def has_gendered(text: str, pairs: dict[str, str]) -> bool:
    """Whether ``text`` holds a word of ``pairs``."""
    return any(m.group().lower() in pairs for m in _WORD.finditer(text))


def augment_corpus(texts: list[str], pairs: dict[str, str], where: str = "the corpus") -> list[str]:
    """Two-sided counterfactual augmentation (Webster et al. 2020, section 5): every text as written, then
    the swapped version (:func:`swap_gendered`) of every text with a gendered word, in corpus order.

    Raises:
        ValueError: if no text holds a word of ``pairs`` (the augmentation would change nothing)."""
    swapped = [swap_gendered(t, pairs) for t in texts if has_gendered(t, pairs)]
    if not swapped:
        raise ValueError(
            f"{where}: none of its {len(texts)} texts holds a word of the gendered word list, so counterfactual "
            "augmentation would change nothing; use a corpus with gendered words, a word list that matches it "
            "(model.pretrain.word_pairs), or model.pretrain.cda=false"
        )
    return list(texts) + swapped
