"""Per-example results: Parquet tables (pyarrow) in a job's ``per_example/`` folder, written atomically, joined
by ``example_id`` (and ``saliency``, ``schedule``), and loaded with :func:`load_per_example` (``pandas``):

- ``steps.parquet``: one row per (saliency method, schedule, example, masking step) with ``example_id``,
  ``label``, ``target``, ``n_maskable``, ``step`` (index), ``x`` (the grid value: masking fraction or token
  count), ``k`` (tokens masked), ``target_prob`` and ``target_logit`` (the target class after masking) and
  the per-example value of every per-step metric (:data:`itermask.core.metrics.METRICS`), e.g.
  ``comprehensiveness_prob``, ``log_odds_drop``, ``sufficiency_prob`` (NaN where undefined), ``flip_rate``
  (1.0 where the prediction differs from the clean one) and ``accuracy`` (1.0 where correct);
- ``scores.parquet``: one row per (saliency method, schedule, example) with ``prediction`` (the predicted
  class on the clean input), ``clean_prob`` (the target class's probability on it), every scalar score per
  example (``aopc_*``, ``aopc_full_*``, ``auc_*``, ``first_flip_fraction`` and ``first_flip_count``, NaN
  when the prediction never flips, ``never_flip_rate``) and the clean input's saliency diagnostics:
  ``saliency_zero`` (its scores are identically zero) and, for ``integrated_gradients`` and ``deeplift``,
  ``completeness_gap`` (sum of attributions minus ``output_difference`` = ``f(x) - f(baseline)``); with a
  ``naopc`` analysis also its NAOPC columns (:mod:`itermask.analyses.naopc`);
- ``examples.parquet``: one row per evaluated example: ``example_id``, ``split``, ``text`` (and
  ``text_pair``), ``label``, ``label_name``; with a ``naopc`` analysis also the example's AOPC bounds;
- ``tokens.parquet``: one row per (example, token of the clean input, padding dropped), in token order,
  with ``example_id``, ``token_id``, ``token`` (the tokenizer's string, pieces as written), for sentence
  pairs ``segment`` (``0``/``1``: first/second text, ``-1``: special tokens), and per explanation, under
  its role (``explained`` for the method under study, ``random`` for the baseline): ``<role>_score``
  (float32 saliency of the clean input), ``<role>_rank`` (masking rank on the clean input, 1 = masked
  first: the one-shot schedule masks ranks ``1..k`` at a step with ``k`` tokens masked; ``-1``: not
  maskable) and, for other schedules, ``<role>_masked_step_<schedule>`` (index of the step that first
  masks the token, ``-1``: never). With ``steps.parquet`` it is what a per-example view needs. Under
  ``evaluation.features=word`` a row is a word: ``token`` its pieces joined, ``token_id`` its first piece's,
  a ``word_id`` column, the word's summed score, rank and masked step;
- ``attack.parquet`` (with an ``attack`` analysis): one row per (saliency method, example) with the
  attack's outcome (``success``, ``n_perturbed``, ``perturbed_fraction``, ``queries``, the substitutions
  and positions, original and adversarial text; see :mod:`itermask.analyses.attack`);
- ``ood.parquet`` (with an ``ood`` analysis): one row per (saliency method, schedule, example, masking
  step) with ``step``, ``x``, ``k`` as in ``steps.parquet``, ``mahalanobis`` (float32 squared Mahalanobis
  distance of the masked input's final-layer representation to the closest class mean, the score behind
  the reported ``final/auroc_mahalanobis``; rows with ``k = 0`` hold the clean input's score) and
  ``clean_mahalanobis`` (the clean input's; see :func:`itermask.analyses.ood.example_score_frame`).

- ``removal_reference.parquet`` (with a ``removal_reference`` analysis): one row per (saliency method, masking
  strategy, example, compared step of the one-shot order, ``0 < k < n``) with ``step``, ``x``, ``k``, ``cosine``
  (cosine similarity of the strategy's class probabilities to the token-removal reference's) and
  ``mahalanobis`` (the masked input's final-layer Mahalanobis score; see
  :mod:`itermask.analyses.removal_reference`).
- ``sanity.parquet`` (with a ``sanity`` analysis): one row per (saliency method, degradation level, example)
  with ``saliency``, ``level``, ``example_id`` and one column per measure scored on the degraded explanation
  (see :mod:`itermask.analyses.sanity`).

``tokens`` and ``ood`` are absent from results written before they existed.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from itermask.storage.files import remove_stale_temporaries, write_bytes_atomic

__all__ = ["FOLDER", "TABLES", "OPTIONAL_TABLES", "PerExample", "write_per_example", "load_per_example"]

FOLDER = "per_example"
#: zstd level of the per-example files (19: the files are small, so the slow levels cost milliseconds)
COMPRESSION_LEVEL = 19
TABLES = ("steps", "scores", "examples")
#: tables written by configured analyses (absent when the analysis did not run)
OPTIONAL_TABLES = ("tokens", "attack", "ood", "removal_reference", "sanity")


@dataclass
class PerExample:
    """The per-example tables of one job (see the module docstring); ``tokens`` is ``None`` in results
    written before it existed, ``attack`` without an attack, ``ood`` without an ``ood`` analysis."""

    steps: pd.DataFrame
    scores: pd.DataFrame
    examples: pd.DataFrame
    tokens: pd.DataFrame | None = None
    attack: pd.DataFrame | None = None
    ood: pd.DataFrame | None = None
    removal_reference: pd.DataFrame | None = None
    sanity: pd.DataFrame | None = None


def write_per_example(job_dir: str | Path, tables: dict[str, pd.DataFrame]) -> dict[str, Path]:
    """Write ``tables`` (``{name: DataFrame}``, names of :data:`TABLES` or :data:`OPTIONAL_TABLES`) atomically as
    ``<job_dir>/per_example/<name>.parquet``; returns ``{relative path: path}``.

    Raises:
        ValueError: for an unknown table name."""
    unknown = sorted(set(tables) - set(TABLES) - set(OPTIONAL_TABLES))
    if unknown:
        raise ValueError(f"unknown per-example table(s) {unknown}: expected {list(TABLES + OPTIONAL_TABLES)}")
    for name in TABLES + OPTIONAL_TABLES:
        remove_stale_temporaries(Path(job_dir) / FOLDER / f"{name}.parquet")
    written = {}
    for name, frame in tables.items():
        buffer = io.BytesIO()
        table = pa.Table.from_pandas(frame, preserve_index=False)
        floats = [f.name for f in table.schema if pa.types.is_floating(f.type)]
        # lossless and about a quarter smaller than plain zstd on these tables: floats split into byte
        # streams (they compress, dictionaries of them do not), zstd at a high level (the files are small)
        pq.write_table(
            table,
            buffer,
            compression="zstd",
            compression_level=COMPRESSION_LEVEL,
            # pyarrow takes a bool or a list of column names for both; its stubs say bool only
            use_byte_stream_split=floats or False,  # pyright: ignore[reportArgumentType]
            use_dictionary=[f.name for f in table.schema if f.name not in floats],  # pyright: ignore[reportArgumentType]
        )
        relative = f"{FOLDER}/{name}.parquet"
        written[relative] = write_bytes_atomic(Path(job_dir) / relative, buffer.getvalue())
    return written


def load_per_example(job_dir: str | Path) -> PerExample:
    """The per-example tables of the job folder ``job_dir`` (the folder holding ``results.json``).

    Raises:
        FileNotFoundError: naming the missing file (results written before per-example files existed, or a
            job that did not finish)."""
    folder = Path(job_dir) / FOLDER
    frames = {}
    for name in TABLES + OPTIONAL_TABLES:
        path = folder / f"{name}.parquet"
        if path.is_file():
            frames[name] = pq.read_table(path).to_pandas()
        elif name in TABLES:
            raise FileNotFoundError(f"no per-example table {path} (the job has no per-example results)")
    return PerExample(**frames)
