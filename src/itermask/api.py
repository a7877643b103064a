"""The notebook facade: :func:`evaluate` runs the iterative-masking evaluation of ``evaluate.py`` on a given
classifier and data from Python, and returns an :class:`EvaluationResult`.

::

    import itermask
    result = itermask.evaluate("path/to/classifier", ["a good film", "a dull film"], saliency=["gradient"])
    result.to_pandas("aggregate")

It runs the same code as ``evaluate.py`` with ``train.enabled=false`` (no fine-tuning), minus the files,
the cache and the tracker:

- the saliency methods and the masking strategy are built from the same presets (``conf/saliency/<name>.yaml``,
  ``conf/masking/<name>.yaml``, composed by Hydra with ``conf/evaluate.yaml``'s ``evaluation`` defaults) by
  the settings stage's own builders (:func:`itermask.settings.build`,
  :meth:`itermask.settings.EvaluationSettings.from_config`); a :class:`~itermask.core.saliency.SaliencyMethod`
  or :class:`~itermask.core.masking.MaskingStrategy` instance may be given instead of a name;
- one :class:`~itermask.core.evaluation.IterativeMaskingEvaluator` per explanation, with the seeded random
  explanation beside each method (``compare_random``), as the settings stage builds them;
- the examples run through the same Lightning test loop
  (:class:`~itermask.engine.lightning.MaskingEvaluationModule`: examples without a maskable
  token skipped, curves gathered), padded by the same collator
  (:class:`~itermask.data.datamodule.TokenCollator`), sorted by length;
- the scores are :func:`itermask.core.metrics.summarize` and
  :func:`itermask.engine.masking.relative_to_random`; the per-example tables are those of the
  ``per_example`` analysis (:func:`~itermask.analyses.per_example.score_frame`,
  :func:`~itermask.analyses.per_example.step_frame`); the notebook view is :mod:`itermask.views`.

The model is a ``torch.nn.Module`` with its tokenizer (``tokenizer=`` or a ``(model, tokenizer)`` pair), a
local directory of a Hugging Face sequence classifier, or a hub id (downloaded by ``transformers``). The data
is a list of texts (``labels=`` optional), a ``datasets.Dataset``, a ``pandas.DataFrame`` or a CSV/TSV path
(``text_column``, ``label_column``, ``text_pair_column``).

This module is imported on first use of ``itermask.evaluate`` (``import itermask`` imports no torch).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import pandas as pd
    import torch

    from itermask.core.evaluation import IterativeMaskingEvaluator, MaskingCurves
    from itermask.core.masking import MaskingStrategy
    from itermask.core.saliency import SaliencyMethod
    from itermask.settings import EvaluationSettings
    from itermask.views import ExampleViews

__all__ = ["evaluate", "EvaluationResult", "CONF_DIR"]

#: evaluate.py's evaluation settings that choose a subset of a split; the facade evaluates the data it is given
WHOLE_DATA_OPTIONS = ("split", "n_examples", "subset_seed")

#: the Hydra config folder of a source checkout (``conf/``, beside ``src/``), where the presets live
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"

#: examples shown by the notebook view of a result (:meth:`EvaluationResult._repr_html_`)
SHOWN_EXAMPLES = 3


@dataclass
class _Examples:
    """The data to evaluate, read from whatever form it was given in."""

    texts: list[str]
    pairs: list[str] | None
    labels: list[Any] | None


@dataclass
class EvaluationResult:
    """What :func:`evaluate` measured.

    Attributes:
        curves: ``{explanation: {schedule: MaskingCurves}}`` (the methods, then ``random``), each over the
            evaluated examples (those with a maskable token), ordered by example id; example ids are the
            positions of the examples in the given data.
        scores: ``{explanation: {schedule: summary}}`` (:func:`itermask.core.metrics.summarize`: means over the
            examples; ``<q>`` in the keys is ``prob`` or ``logit`` after ``quantity``).
        relative_to_random: ``{method: {schedule: {score: method minus random}}}``
            (:func:`itermask.engine.masking.relative_to_random`); empty without ``compare_random``.
        evaluation: the masking evaluation's settings (grid, schedules, target, quantity, AOPC bins).
        n_skipped: examples skipped because they have no maskable token.
        texts: the given texts, by example id.
        class_names: the classifier's class names by id (``None`` if it has none).
    """

    curves: dict[str, dict[str, MaskingCurves]]
    scores: dict[str, dict[str, dict]]
    relative_to_random: dict[str, dict[str, dict]]
    evaluation: EvaluationSettings
    n_skipped: int
    texts: list[str]
    class_names: list[str] | None
    _model: Any = field(repr=False, default=None)
    _tokenizer: Any = field(repr=False, default=None)
    _methods: dict[str, SaliencyMethod] = field(repr=False, default_factory=dict)
    _batch_of: Any = field(repr=False, default=None)

    @property
    def methods(self) -> list[str]:
        """The explanations evaluated (the methods, then ``random`` when compared)."""
        return list(self.curves)

    def to_pandas(self, kind: str = "examples") -> pd.DataFrame:
        """The result as a table.

        Args:
            kind: ``"examples"``: one row per example, explanation and schedule, with every per-example score
                (AUC, first flip, AOPC per example, ...; :func:`~itermask.analyses.per_example.score_frame`), the
                gold label (``-1``: unknown), the prediction on the clean input and the text; ``"steps"``: one
                row per example, explanation, schedule and masking step
                (:func:`~itermask.analyses.per_example.step_frame`); ``"aggregate"``: one row per explanation
                and schedule with the mean scores (:attr:`scores`, the scalar ones) and, for a method,
                ``<score>_minus_random`` per score compared with random and ``racu_without_retraining_*``
                (:func:`itermask.core.metrics.relative_to_random`).

        Raises:
            ValueError: for another ``kind``.
        """
        import pandas as pd

        from itermask.analyses.per_example import score_frame, step_frame

        e = self.evaluation
        if kind in ("examples", "steps"):
            make = score_frame if kind == "examples" else step_frame
            frame = pd.concat(
                [
                    make(name, curves, e.quantity, e.aopc_bins)
                    for name, by_schedule in self.curves.items()
                    for curves in by_schedule.values()
                ],
                ignore_index=True,
            )
            if kind == "examples":
                first = next(iter(next(iter(self.curves.values())).values()))
                ids = first.example_ids.tolist()
                label = dict(zip(ids, first.labels.tolist()))
                predicted = dict(zip(ids, first.clean_logits.argmax(dim=-1).tolist()))
                frame["label"] = [label[int(i)] for i in frame["example_id"]]  # -1: unknown
                frame["prediction"] = [predicted[int(i)] for i in frame["example_id"]]  # on the clean input
                frame["text"] = [self.texts[int(i)] for i in frame["example_id"]]
            return frame
        if kind == "aggregate":
            rows = []
            for name, by_schedule in self.scores.items():
                for schedule, summary in by_schedule.items():
                    row: dict[str, Any] = {"saliency": name, "schedule": schedule}
                    row.update({k: v for k, v in summary.items() if isinstance(v, int | float | str)})
                    versus = (self.relative_to_random.get(name) or {}).get(schedule) or {}
                    row.update(
                        {
                            k if k.startswith("racu_") else f"{k}_minus_random": v
                            for k, v in versus.items()
                            if isinstance(v, int | float)
                        }
                    )
                    rows.append(row)
            return pd.DataFrame(rows)
        raise ValueError(f"kind must be 'examples', 'steps' or 'aggregate', got {kind!r}")

    def views(self, example_ids: Sequence[int] | None = None, max_tokens: int | None = None) -> ExampleViews:
        """The per-example views (:class:`itermask.views.ExampleViews`: a heatmap of each explanation's scores
        and, per schedule, the masking trajectory beside the target probability curve), shown as HTML in a
        notebook, ``.save(path)`` writes a page.

        Args:
            example_ids: which examples (ids: positions in the given data; default the first
                :data:`SHOWN_EXAMPLES` evaluated).
            max_tokens: tokens shown per example (default :data:`itermask.views.MAX_TOKENS`).

        Raises:
            ValueError: for an id that was not evaluated (no maskable token, or out of range).
        """
        import torch

        from itermask.core.evaluation import saliency_scores
        from itermask.views import MAX_TOKENS, views_from_curves

        first = next(iter(next(iter(self.curves.values())).values()))
        evaluated = first.example_ids.tolist()
        wanted = evaluated[:SHOWN_EXAMPLES] if example_ids is None else [int(i) for i in example_ids]
        unknown = [i for i in wanted if i not in evaluated]
        if unknown:
            raise ValueError(f"example ids {unknown} were not evaluated (evaluated: {evaluated[:20]}...)")
        rows = torch.tensor([evaluated.index(i) for i in wanted], dtype=torch.long)
        batch = self._batch_of(wanted)
        curves = {name: {s: c.select(rows) for s, c in by.items()} for name, by in self.curves.items()}
        device = next(self._model.parameters()).device
        scores = {}
        for name, by_schedule in curves.items():
            c = next(iter(by_schedule.values()))
            scores[name] = saliency_scores(
                self._methods[name], self._model, batch.to(device), c.target.to(device), c.example_ids.to(device)
            ).cpu()
        return views_from_curves(
            curves,
            batch,
            self._tokenizer,
            scores,
            segments=self.evaluation.segments,
            class_names=self.class_names,
            max_tokens=max_tokens or MAX_TOKENS,
        )

    def _repr_html_(self) -> str:
        """The notebook view: the aggregate scores, then the views of the first examples."""
        columns = ["saliency", "schedule", "n_examples"]
        frame = self.to_pandas("aggregate")
        q = "prob" if self.evaluation.quantity == "probability" else "logit"
        prefix = "aopc_" if self.evaluation.steps == "fraction" and self.evaluation.aopc_bins else "aopc_full_"
        wanted = [f"{prefix}comprehensiveness_{q}", f"{prefix}sufficiency_{q}", f"auc_{q}", "never_flip_rate"]
        wanted += [f"{k}_minus_random" for k in wanted[:2]]
        table = frame[[c for c in columns + wanted if c in frame.columns]].to_html(index=False, float_format="%.3f")
        return f"<div><h4>itermask: masking scores</h4>{table}</div>{self.views().html()}"


def _compose(overrides: list[str], conf_dir: Path):
    """``conf/evaluate.yaml`` composed with ``overrides`` (Hydra's compose API; Hydra's global state restored,
    also when the caller has a Hydra session of its own)."""
    from hydra import compose, initialize_config_dir

    import itermask.validation  # noqa: F401  (registers the evaluation schema that evaluate.yaml names)

    if not (conf_dir / "evaluate.yaml").is_file():
        raise FileNotFoundError(
            f"no Hydra config folder at {conf_dir} (conf/ of a source checkout, where the saliency and masking "
            "presets live): give conf_dir=, or SaliencyMethod and MaskingStrategy instances instead of names"
        )
    from hydra.core.global_hydra import GlobalHydra

    state = GlobalHydra.instance()
    outer = state.hydra if state.is_initialized() else None  # a notebook's own Hydra session, kept
    state.clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            return compose(config_name="evaluate", overrides=["output_dir=unused", *overrides])
    finally:
        if outer is not None:
            GlobalHydra.instance().clear()
            GlobalHydra.instance().initialize(outer)


def _value(value) -> str:
    """A Python value as a Hydra override value (lists and strings as YAML)."""
    import yaml

    return yaml.safe_dump(value, default_flow_style=True, width=1 << 20).strip().removesuffix("...").strip()


def _settings(
    saliency: Sequence[str | SaliencyMethod],
    masking: str | MaskingStrategy,
    evaluation: Mapping[str, Any],
    seed: int,
    pretrained: str | None,
    conf_dir: Path,
) -> tuple[list[SaliencyMethod], MaskingStrategy, EvaluationSettings]:
    """The methods, the masking strategy and the evaluation settings, built from the presets by the settings
    stage's builders; errors of every part are raised together (:class:`itermask.settings.problems.Problems`).
    """
    from itermask.core.masking import MaskingStrategy
    from itermask.core.saliency import SaliencyMethod
    from itermask.settings import EvaluationSettings, build
    from itermask.settings.problems import Problems
    from itermask.validation import SettingsError, config_problems

    known = {f.name for f in fields(EvaluationSettings)}
    unknown = sorted(set(evaluation) - known)
    if unknown:
        choices = sorted(known - set(WHOLE_DATA_OPTIONS))  # the data given is evaluated whole
        raise SettingsError([f"unknown evaluation setting(s) {unknown}: choose from {choices}"])
    base = [f"seed={seed}", *(f"evaluation.{k}={_value(v)}" for k, v in evaluation.items())]
    if pretrained is not None:
        base.append(f"model.pretrained={_value(pretrained)}")
    problems, methods = Problems(), []
    names = [m for m in saliency if isinstance(m, str)]
    first = _compose([*base, *([f"saliency={names[0]}"] if names else [])], conf_dir)
    problems.add(config_problems({"evaluation": _plain(first.evaluation), "seed": seed}))
    settings = None
    with problems.collect():
        settings = EvaluationSettings.from_config(first.evaluation)
    for method in saliency:
        if isinstance(method, SaliencyMethod):
            methods.append(method)
            continue
        with problems.collect():
            node = (first if method == names[0] else _compose([*base, f"saliency={method}"], conf_dir)).saliency
            methods.append(build(node, "saliency", SaliencyMethod))
    strategy = masking
    if isinstance(masking, str):
        with problems.collect():
            strategy = build(_compose([*base, f"masking={masking}"], conf_dir).masking, "masking", MaskingStrategy)
    problems.raise_if_any()
    assert settings is not None and isinstance(strategy, MaskingStrategy)
    return methods, strategy, settings


def _plain(node) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(node, resolve=True, enum_to_str=True)  # type: ignore[return-value]


def _first_undecodable(path: Path) -> str:
    """Where ``path``'s first byte that is not UTF-8 lies (pandas reports offsets within its read blocks)."""
    raw = path.read_bytes()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        return f"byte {error.start}, line {line}, cannot be decoded"
    return "a byte cannot be decoded"


def _read_examples(data, labels, text_column: str, text_pair_column: str | None, label_column: str | None) -> _Examples:
    """Texts, text pairs and labels from a list of texts, a ``datasets.Dataset``, a DataFrame or a CSV/TSV path.

    Raises:
        ValueError: no texts, a missing column, labels of another length, a text that is not a string; a file
            that is empty, not UTF-8 or not parseable.
        FileNotFoundError: a path that does not exist.
    """
    import pandas as pd

    if isinstance(data, str | Path) and not (isinstance(data, str) and not Path(data).suffix):
        path = Path(data)
        if not path.is_file():
            raise FileNotFoundError(f"data={str(data)!r}: no such file (give a CSV/TSV path or a list of texts)")
        try:
            data = pd.read_csv(path, sep="\t" if path.suffix == ".tsv" else ",", keep_default_na=False)
        except pd.errors.EmptyDataError:
            raise ValueError(f"data={str(data)!r} is empty: it has no header and no rows") from None
        except UnicodeDecodeError:
            raise ValueError(
                f"data={str(data)!r} is not UTF-8 text ({_first_undecodable(path)}): save it as UTF-8, or "
                "read it yourself (pandas.read_csv(..., encoding=...)) and pass the DataFrame"
            ) from None
        except pd.errors.ParserError as error:
            raise ValueError(f"data={str(data)!r} cannot be read as {path.suffix or 'CSV'}: {error}") from None
    elif isinstance(data, str):
        raise ValueError("data is a single string: give a list of texts (data=[text, ...]) or a CSV/TSV path")
    pairs = None
    if isinstance(data, pd.DataFrame) or hasattr(data, "column_names"):
        columns = list(data.columns) if isinstance(data, pd.DataFrame) else list(data.column_names)
        from itermask.data.splits import delimiter_hint

        # label_column: its default "label" is optional (unlabelled data); a column named otherwise must exist
        named = [("text_column", text_column), ("text_pair_column", text_pair_column)]
        named += [("label_column", label_column)] if label_column not in (None, "label") and labels is None else []
        for option, column in named:
            if column is not None and column not in columns:
                hint = delimiter_hint([str(c) for c in columns])
                raise ValueError(
                    f"{option}={column!r} is not a column of the data: it has {columns}" + (f". {hint}" if hint else "")
                )
        texts = list(data[text_column])
        pairs = None if text_pair_column is None else [str(t) for t in data[text_pair_column]]
        if labels is None and label_column is not None and label_column in columns:
            labels = list(data[label_column])
    else:
        texts = list(data)
    if not texts:
        raise ValueError("no texts to evaluate")
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str) or not t.strip()]
    if bad:
        raise ValueError(f"texts {bad[:10]} are empty or not strings (each example needs a non-empty text)")
    if labels is not None:
        labels = list(labels)
        if len(labels) != len(texts):
            raise ValueError(f"{len(labels)} labels for {len(texts)} texts: give one label per text, or none")
    return _Examples(texts, pairs, labels)


def _label_ids(labels: list | None, class_names: list[str] | None, num_classes: int) -> list[int]:
    """Class ids of the labels (ids, or names matched to the classifier's case-insensitively; ``-1``: unknown).

    Raises:
        ValueError: a label that is no class of the classifier.
    """
    if labels is None:
        return []
    by_name = {name.lower(): i for i, name in enumerate(class_names or [])}
    ids, bad = [], []
    for label in labels:
        if label is None or (isinstance(label, float) and math.isnan(label)):
            ids.append(-1)
        elif isinstance(label, str) and label.lower() in by_name:
            ids.append(by_name[label.lower()])
        elif isinstance(label, int | float) and float(label).is_integer() and 0 <= int(label) < num_classes:
            ids.append(int(label))
        elif isinstance(label, str) and label.strip().lstrip("-").isdigit() and 0 <= int(label) < num_classes:
            ids.append(int(label))
        else:
            bad.append(label)
    if bad:
        raise ValueError(
            f"labels {sorted(set(map(str, bad)))[:10]} are not classes of the classifier: give class ids "
            f"0..{num_classes - 1} or its class names {class_names}"
        )
    return ids


def _load(model, tokenizer, needs_attentions: bool) -> tuple[torch.nn.Module, Any, str | None]:
    """``(model, tokenizer, pretrained)`` from a module with its tokenizer, a ``(model, tokenizer)`` pair, a
    local directory or a hub id (``pretrained``: that name, ``None`` for a module).

    Raises:
        ValueError: a module without its tokenizer; a classifier without a trained classification head.
        FileNotFoundError: a local folder without a model's config or a tokenizer.
    """
    if isinstance(model, tuple | list) and len(model) == 2:
        model, tokenizer = model
    if isinstance(model, str | Path):
        from transformers.utils import logging as hf_logging

        from itermask.models.loading import _num_labels, load_classifier, load_model_config, load_tokenizer

        pretrained = str(model)
        num_labels = _num_labels(load_model_config(pretrained))
        bar = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # no weight-loading bar in the notebook (as in a quiet job)
        try:
            loaded = load_classifier(
                pretrained,
                num_labels,
                attn_implementation="eager" if needs_attentions else None,
                class_order=list(range(num_labels)),  # refuses a model whose classification head would be random
            )
        finally:
            if bar:
                hf_logging.enable_progress_bar()
        return loaded, tokenizer if tokenizer is not None else load_tokenizer(pretrained), pretrained
    if tokenizer is None:
        raise ValueError("a model given as a torch module needs its tokenizer: evaluate(model, data, tokenizer=...)")
    return cast("torch.nn.Module", model), tokenizer, None


def _num_classes(model, tokenizer, device) -> int:
    """The number of classes, from the config or one forward of a short text."""
    import torch

    from itermask.core.tokens import TokenBatch, class_logits

    num_labels = getattr(getattr(model, "config", None), "num_labels", None)
    if num_labels:
        return int(num_labels)
    enc = tokenizer(["a"], return_tensors="pt")

    with torch.inference_mode():
        batch = TokenBatch(enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids")).to(device)
        return int(class_logits(model, batch).shape[-1])


def _class_names(model) -> list[str] | None:
    id2label = getattr(getattr(model, "config", None), "id2label", None)
    if not id2label:
        return None
    return [str(id2label[i]) for i in sorted(id2label)]


def _features(examples: _Examples, tokenizer, max_length: int, label_ids: list[int]) -> list[dict]:
    """One feature dict per example, as :class:`~itermask.data.datamodule.TokenCollator` pads them."""
    from itermask.data.datamodule import segment_ids

    args = (examples.texts,) if examples.pairs is None else (examples.texts, examples.pairs)
    encoding = tokenizer(*args, truncation=True, max_length=max_length)
    segments = segment_ids(encoding, len(examples.texts))
    names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in encoding]
    return [
        {
            **{k: encoding[k][i] for k in names},
            **({} if segments is None else {"segment_ids": segments[i]}),
            "label": label_ids[i] if label_ids else -1,
            "example_id": i,
        }
        for i in range(len(examples.texts))
    ]


def _check_arguments(model, batch_size, device) -> None:
    """The facade's own arguments, before any model or data work (a new-user review met torch's and CUDA's
    raw errors for these).

    Raises:
        ValueError: ``model`` of no accepted kind, ``batch_size`` not a positive integer, ``device`` not a
            torch device or a CUDA device without a usable GPU.
    """
    import torch

    pair = isinstance(model, tuple) and len(model) == 2 and isinstance(model[0], torch.nn.Module)
    if not (isinstance(model, str | Path | torch.nn.Module) or pair):
        raise ValueError(
            "model must be a torch.nn.Module classifier (with tokenizer=...), a (model, tokenizer) pair, a local "
            f"directory or a hub id; got {type(model).__name__} {model!r:.60}"
        )
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer (examples per batch), got {batch_size!r}")
    if device is not None and str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r}, but this torch has no usable CUDA GPU (torch {torch.__version__}): "
            "leave device unset (the model's own device) or use device='cpu'"
        )
    if device is not None:
        try:
            torch.device(device)
        except (RuntimeError, TypeError) as error:
            raise ValueError(
                f"device={device!r} is not a torch device: use 'cpu', 'cuda', 'cuda:1', 'mps'... or leave it unset "
                "(the model's own device)"
            ) from error


def _max_length(model, tokenizer, max_length: int | None) -> int:
    """``max_length``, or the longest input the tokenizer and the model's position embeddings allow."""
    from itermask.validation import position_limit

    if max_length is not None:
        if int(max_length) < 3:
            raise ValueError(
                f"max_length must be at least 3 tokens (the special tokens and one token of text), got {max_length}"
            )
        return int(max_length)
    limits = [int(getattr(tokenizer, "model_max_length", 512) or 512), 512]
    config = getattr(model, "config", None)
    if config is not None and (limit := position_limit(config)) is not None:
        limits.append(limit)
    return min(limits)


@contextmanager
def _quiet_lightning() -> Iterator[None]:
    """Lightning's hardware lines, tips and library warnings hidden inside (a notebook shows only what itermask
    says), the loggers' levels restored after; the loggers are those :mod:`itermask.console` quiets in a job."""
    import logging
    import warnings

    from itermask.console import LIGHTNING_INFO_LOGGERS

    loggers = [logging.getLogger(name) for name in LIGHTNING_INFO_LOGGERS]
    levels = [logger.level for logger in loggers]
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module=r"(?!itermask)")
            for logger in loggers:
                logger.setLevel(logging.WARNING)
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _run(
    model, evaluators: dict[str, IterativeMaskingEvaluator], features: list[dict], tokenizer, batch_size: int, device
) -> tuple[dict[str, dict[str, MaskingCurves]], int]:
    """The masking curves of every explanation through the evaluate stage's Lightning test loop (see the module
    docstring): examples sorted by length, padded by the collator, run on ``device``."""
    import pytorch_lightning as pl
    from torch.utils.data import DataLoader

    from itermask.analyses.base import eval_mode
    from itermask.data.datamodule import TokenCollator
    from itermask.engine.lightning import MaskingEvaluationModule

    ordered = sorted(features, key=lambda f: len(f["input_ids"]))
    loader = DataLoader(ordered, batch_size=batch_size, shuffle=False, collate_fn=TokenCollator(tokenizer))  # type: ignore[arg-type]
    module = MaskingEvaluationModule(model, dict(evaluators), progress_bar=False)
    accelerator = "cpu" if str(device).startswith("cpu") else "auto"
    with eval_mode(model), _quiet_lightning():
        trainer = pl.Trainer(
            accelerator=accelerator,
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            inference_mode=False,
        )
        trainer.test(module, dataloaders=loader, verbose=False)
    return module.curves, module.n_skipped


def evaluate(
    model,
    data,
    *,
    tokenizer=None,
    labels: Sequence[Any] | None = None,
    saliency: str | SaliencyMethod | Sequence[str | SaliencyMethod] = ("gradient",),
    masking: str | MaskingStrategy = "mask_token",
    compare_random: bool = True,
    seed: int = 0,
    text_column: str = "text",
    text_pair_column: str | None = None,
    label_column: str | None = "label",
    batch_size: int = 16,
    max_length: int | None = None,
    device: str | None = None,
    conf_dir: str | Path | None = None,
    **evaluation: Any,
) -> EvaluationResult:
    """Evaluate how faithful saliency explanations of a given classifier are on given texts, under iterative
    masking, beside a seeded random explanation (Crothers, Viktor, Japkowicz 2023, arXiv 2308.06795, Sec. 3;
    the same code as ``evaluate.py train.enabled=false``, see the module docstring).

    Args:
        model: a ``torch.nn.Module`` classifier (with ``tokenizer=``), a ``(model, tokenizer)`` pair, a local
            directory of a Hugging Face sequence classifier or a hub id.
        data: a list of texts, a ``datasets.Dataset``, a ``pandas.DataFrame`` or a CSV/TSV path.
        tokenizer: the Hugging Face tokenizer of a module (default: the directory's or hub id's own).
        labels: gold labels (class ids or the classifier's class names), one per text; default the
            ``label_column`` of tabular data, if any (needed for ``target="gold"`` and the accuracy columns).
        saliency: preset names (``conf/saliency/``: ``gradient``, ``integrated_gradients``, ``occlusion``,
            ...) or :class:`~itermask.core.saliency.SaliencyMethod` instances.
        masking: a preset name (``conf/masking/``: ``mask_token``, ``delete``, ``unk``, ...) or a
            :class:`~itermask.core.masking.MaskingStrategy`.
        compare_random: also evaluate the seeded random explanation (``random``).
        seed: the random explanation's seed (and the presets' ``${seed}``).
        text_column, text_pair_column, label_column: columns of tabular data.
        batch_size: examples per batch (sorted by length); the forwards inside a batch are chunked by
            ``token_budget`` (an evaluation setting).
        max_length: tokens per example after truncation (default: what the tokenizer and the model's position
            embeddings allow, at most 512).
        device: ``"cpu"``, ``"cuda"``...; default the model's own device.
        conf_dir: the Hydra config folder with the presets (default ``conf/`` of the source checkout).
        evaluation: settings of ``conf/evaluate.yaml``'s ``evaluation`` node (``fractions``, ``steps``,
            ``counts``, ``schedules``, ``target``, ``quantity``, ``aopc_bins``, ``segments``, ``token_budget``).

    Returns:
        An :class:`EvaluationResult` (``.to_pandas()``, ``.views()``, shown as HTML in a notebook).

    Raises:
        ValueError: naming a bad setting, a missing column, labels that are no class, a module without its
            tokenizer, or data in which no example has a maskable token.
        FileNotFoundError: a data path or model folder that does not exist.
    """
    from itermask.core import metrics
    from itermask.core.evaluation import check_target_policy
    from itermask.core.saliency import prepare_for_saliency
    from itermask.core.tokens import TokenBatch
    from itermask.data.datamodule import TokenCollator
    from itermask.engine.masking import relative_to_random
    from itermask.settings.evaluate import build_evaluators

    for option in WHOLE_DATA_OPTIONS:
        if option in evaluation:
            raise ValueError(f"{option} is not an option of itermask.evaluate (the given data is evaluated whole)")
    _check_arguments(model, batch_size, device)
    methods_given = [saliency] if isinstance(saliency, str) or not isinstance(saliency, Sequence) else list(saliency)
    if not methods_given:
        raise ValueError("saliency is empty: give one or more methods, e.g. saliency=['gradient']")
    wrong = [m for m in methods_given if not isinstance(m, str) and not hasattr(m, "explain")]
    if wrong:
        raise ValueError(
            f"saliency={wrong!r}: each method is a name of conf/saliency (e.g. 'gradient') or a SaliencyMethod"
        )
    if data is None:
        raise ValueError("data is None: give a list of texts, a datasets.Dataset, a pandas.DataFrame or a CSV/TSV path")
    examples = _read_examples(data, labels, text_column, text_pair_column, label_column)
    pretrained = str(model) if isinstance(model, str | Path) else None
    conf = Path(conf_dir) if conf_dir is not None else CONF_DIR
    evaluation = {**evaluation, "compare_random": bool(compare_random)}
    methods, strategy, settings = _settings(methods_given, masking, evaluation, seed, pretrained, conf)
    model, tokenizer, _ = _load(model, tokenizer, any(m.needs_attentions for m in methods))
    if device is not None:
        model = model.to(device)
    on = next(model.parameters()).device
    for component in (*methods, strategy):
        component.bind(tokenizer)
    prepare_for_saliency(model, methods)
    class_names = _class_names(model)
    num_classes = _num_classes(model, tokenizer, on)
    label_ids = _label_ids(examples.labels, class_names, num_classes)
    check_target_policy(settings.target, num_classes)
    evaluators: dict[str, IterativeMaskingEvaluator] = {}
    for method in methods:
        evaluators.update(build_evaluators(method, strategy, settings, tokenizer.all_special_ids, seed, []))
    random_method = evaluators["random"].saliency if "random" in evaluators else None
    by_name = {m.name: m for m in methods} | ({"random": random_method} if random_method is not None else {})
    features = _features(examples, tokenizer, _max_length(model, tokenizer, max_length), label_ids)
    curves, skipped = _run(model, evaluators, features, tokenizer, batch_size, on)
    if not curves:
        raise ValueError(f"no example could be evaluated: all {skipped} have no maskable token")
    names = [m.name for m in methods] + [name for name in evaluators if name not in {m.name for m in methods}]
    ordered = {name: curves[name] for name in names}  # the methods, then random
    scores = {
        name: {s: metrics.summarize(c, quantity=settings.quantity, bins=settings.aopc_bins) for s, c in by.items()}
        for name, by in ordered.items()
    }
    versus = {name: relative_to_random(scores, name) for name in ordered if name != "random"}
    collate = TokenCollator(tokenizer)

    def batch_of(example_ids: list[int]) -> TokenBatch:
        return collate([features[i] for i in example_ids])["tokens"]

    return EvaluationResult(
        curves=ordered,
        scores=scores,
        relative_to_random={k: v for k, v in versus.items() if v},
        evaluation=settings,
        n_skipped=skipped,
        texts=examples.texts,
        class_names=class_names,
        _model=model,
        _tokenizer=tokenizer,
        _methods=by_name,
        _batch_of=batch_of,
    )
