"""The Python door: :func:`evaluate` builds an :class:`~itermask.plan.EvaluationPlan` from its keyword arguments
and runs the engine of ``evaluate.py train.enabled=false`` on it, minus the files, the cache and the tracker::

    import itermask
    result = itermask.evaluate("path/to/classifier", ["a good film", "a dull film"], saliency=["gradient"])
    result.to_pandas("aggregate")

Saliency methods and masking strategies named are the presets of ``conf/`` (:mod:`itermask.settings.presets`),
built by the config's builder; this module is imported on first use of ``itermask.evaluate`` (``import itermask``
imports no torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from itermask.notebook import EvaluationResult

if TYPE_CHECKING:
    import torch

    from itermask.core.evaluation_settings import EvaluationSettings
    from itermask.core.masking import MaskingStrategy
    from itermask.core.saliency import SaliencyMethod
    from itermask.plan import EvaluationPlan

__all__ = ["evaluate", "EvaluationResult"]


def _check_flag(name: str, value) -> None:
    """Raises ``ValueError`` for a flag that is not True or False (a string such as "no" would be truthy)."""
    if value not in (True, False):
        raise ValueError(f"{name} must be True or False, got {value!r}")


def _check_arguments(model, saliency, data, batch_size, max_length, device, evaluation, precision) -> list:
    """The facade's own arguments, before any model or data work; returns the saliency methods as a list.

    Raises:
        ValueError: ``model`` of no accepted kind, no or unknown kinds of methods, ``data=None``, ``batch_size``
            not a positive integer, ``max_length`` not an integer or under 3, ``device`` not a usable torch
            device, an option that would choose a subset of the data, a ``precision`` other than float32 or
            bf16-mixed."""
    import torch

    from itermask.core.precision import autocast_dtype
    from itermask.settings.presets import WHOLE_DATA_OPTIONS

    autocast_dtype(precision)

    if given_whole := [option for option in WHOLE_DATA_OPTIONS if option in evaluation]:
        raise ValueError(f"{given_whole[0]} is not an option of itermask.evaluate (the given data is evaluated whole)")

    pair = isinstance(model, tuple) and len(model) == 2 and isinstance(model[0], torch.nn.Module)
    if not (isinstance(model, str | Path | torch.nn.Module) or pair):
        raise ValueError(
            "model must be a torch.nn.Module classifier (with tokenizer=...), a (model, tokenizer) pair, a local "
            f"directory or a hub id; got {type(model).__name__} {model!r:.60}"
        )
    methods = [saliency] if isinstance(saliency, str) or not isinstance(saliency, Sequence) else list(saliency)
    if not methods:
        raise ValueError("saliency is empty: give one or more methods, e.g. saliency=['gradient']")
    if wrong := [m for m in methods if not isinstance(m, str) and not hasattr(m, "explain")]:
        raise ValueError(
            f"saliency={wrong!r}: each method is a name of conf/saliency (e.g. 'gradient') or a SaliencyMethod"
        )
    if data is None:
        raise ValueError(
            "data is None: give a list of texts, a dict of columns, a datasets.Dataset, a pandas.DataFrame or a "
            "CSV/TSV path"
        )
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer (examples per batch), got {batch_size!r}")
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, Integral)):
        raise ValueError(f"max_length must be an integer (tokens per example) or None, got {max_length!r:.60}")
    if max_length is not None and max_length < 3:
        raise ValueError(
            f"max_length must be at least 3 tokens (the special tokens and one token of text), got {max_length}"
        )
    if device is not None and str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r}, but this torch has no usable CUDA GPU (torch {torch.__version__}): "
            "leave device unset (the model's own device) or use device='cpu'"
        )
    try:
        torch.device(device) if device is not None else None
    except (RuntimeError, TypeError) as error:
        raise ValueError(
            f"device={device!r} is not a torch device: use 'cpu', 'cuda', 'cuda:1', 'mps'... or leave it unset "
            "(the model's own device)"
        ) from error
    return methods


def _given(model, tokenizer, device) -> tuple[tuple[Any, Any] | None, str, str]:
    """``(given, pretrained, accelerator)``: a module with its tokenizer (moved to ``device``) or ``None`` for a
    directory or hub id (``pretrained``: that name, ``""`` for a module), and the Lightning accelerator.

    Raises:
        ValueError: a module without its tokenizer."""
    if isinstance(model, tuple | list) and len(model) == 2:
        model, tokenizer = model
    if isinstance(model, str | Path):
        return None, str(model), "cpu" if device is None or str(device).startswith("cpu") else "auto"
    if tokenizer is None:
        raise ValueError("a model given as a torch module needs its tokenizer: evaluate(model, data, tokenizer=...)")
    module = cast("torch.nn.Module", model)
    module = module if device is None else module.to(device)
    on = next(module.parameters()).device
    return (module, tokenizer), "", "cpu" if on.type == "cpu" else "auto"


def _plan(examples, methods, strategy, evaluation, seed: int, pretrained: str, options: dict) -> EvaluationPlan:
    """The plan of a notebook evaluation: the given texts, no fine-tuning, no files, cache or tracker.

    Raises:
        ValueError: ``target="gold"`` without labels, or with an example whose label is missing (None, NaN)."""
    from itermask.core.precision import canonical_precision
    from itermask.data.given import GivenTexts, gold_label_problem

    if evaluation.target == "gold" and (problem := gold_label_problem(examples.labels)):
        raise ValueError(problem)
    from itermask.plan import DataPlan, EvaluationPlan, FineTuningPlan, JobPlan, ModelPlan, Spec

    trainer = {"devices": 1, "enable_checkpointing": False, "enable_progress_bar": False}
    trainer.update(
        enable_model_summary=False,
        accelerator=options["accelerator"],
        precision=canonical_precision(options["precision"]),
    )
    return EvaluationPlan(
        job=JobPlan(task="evaluate", seed=seed),
        model=ModelPlan(name=pretrained or "model", pretrained=pretrained, max_length=options["max_length"]),
        data=DataPlan("given", GivenTexts(examples.texts, examples.pairs, examples.labels), options["batch_size"]),
        train=FineTuningPlan(enabled=False),
        trainer=Spec("pytorch_lightning.Trainer", trainer),
        masking=strategy,
        evaluation=evaluation,
        saliency=methods,
        measure_accuracy=False,
        analyses=options["analyses"],
    )


def _result(plan: EvaluationPlan, evaluation, resources, result: dict, texts: list[str]) -> EvaluationResult:
    """The :class:`~itermask.notebook.EvaluationResult` of an evaluation (curves in the order evaluated: the
    methods, then random)."""
    from itermask.engine.masking import relative_to_random

    curves, data = evaluation.curves, resources.loaded_data
    scores = result["scores"]
    versus = {name: relative_to_random(scores, name) for name in curves if name != "random"}
    id2label = getattr(resources.model_config, "id2label", None)
    tested = data.splits["test"]
    return EvaluationResult(
        curves=dict(curves.items()),
        scores=scores,
        relative_to_random={k: v for k, v in versus.items() if v},
        evaluation=cast("EvaluationSettings", plan.evaluation),
        n_skipped=result["n_skipped_no_maskable"],
        texts=texts,
        class_names=[str(id2label[i]) for i in sorted(id2label)] if id2label else None,
        result=result,
        _model=resources.model,
        _tokenizer=resources.tokenizer,
        _methods={name: e.saliency for name, e in resources.evaluators.items()},
        _batch_of=lambda ids: data.collator([tested[i] for i in ids])["tokens"],
    )


def _run(plan: EvaluationPlan, given: tuple[Any, Any] | None, texts: list[str]) -> EvaluationResult:
    """Prepare, run and record ``plan`` (the engine of ``evaluate.py``), Lightning's console lines hidden."""
    from itermask.console import quiet_lightning
    from itermask.engine.prepare import prepare
    from itermask.engine.record import record
    from itermask.engine.run import run

    with quiet_lightning(), prepare(plan, given) as resources:
        done = run(plan, resources)
        assert done is not None  # one process
        result = record(plan, resources, done)
    return _result(plan, done, resources, result, texts)


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
    precision: str = "32-true",
    conf_dir: str | Path | None = None,
    measures: Sequence[Any] = (),
    **evaluation: Any,
) -> EvaluationResult:
    """Evaluate how faithful saliency explanations of a classifier are on given texts under iterative masking,
    beside a seeded random explanation (Crothers et al. 2023, arXiv 2308.06795): an
    :class:`~itermask.notebook.EvaluationResult` (``.to_pandas()``, ``.views()``, shown as HTML).

    Args:
        model: a ``torch.nn.Module`` classifier (with ``tokenizer=``), a ``(model, tokenizer)`` pair, a local
            directory of a Hugging Face sequence classifier or a hub id.
        data: texts (a list, tuple, 1-D NumPy array or ``pandas.Series``), a dict of columns (``{"text": [...],
            "label": [...]}``), a ``datasets.Dataset``, a ``pandas.DataFrame`` or a CSV/TSV path, evaluated whole.
        labels: gold labels (ids or names; list, array, tensor, Series), one per text; default ``label_column``'s.
        saliency, masking: preset names (``conf/saliency/``, ``conf/masking/``) or ``SaliencyMethod`` and
            ``MaskingStrategy`` instances; ``compare_random`` (bool): also the seeded random explanation, ``seed``.
        batch_size: examples per batch (sorted by length); ``max_length``: tokens per example (default: what
            the tokenizer and the model's position embeddings allow, at most 512); ``device``: default the
            model's own; ``conf_dir``: the presets' folder (default the package's, :mod:`itermask.conf`).
        precision: ``"32-true"`` or ``"bf16-mixed"`` (bfloat16 autocast), as ``evaluate.py``'s ``trainer.precision``.
        measures: analyses, by preset (``conf/<name>/on.yaml``: ``"naopc"``) or instance; ``result.result[name]``.
        evaluation: its ``evaluation`` settings (``fractions``, ``steps``, ``counts``, ``schedules``, ``target``,
            ``quantity``, ``aopc_bins``, ``segments``, ``token_budget``, ``features``, ``soft_draws``: evaluate.yaml).

    Raises:
        ValueError: a bad setting or name (saliency, masking, measure), data of no accepted kind, a missing column,
            labels that are a single value or no class, a module without its tokenizer, ``max_length`` past the
            position embeddings, no maskable token; FileNotFoundError: a data path or model absent.
    """
    from itermask.data.given import read_examples
    from itermask.settings.presets import CONF_DIR, components, evaluation_settings, measure_analyses

    methods = _check_arguments(model, saliency, data, batch_size, max_length, device, evaluation, precision)
    _check_flag("compare_random", compare_random)
    examples = read_examples(data, labels, text_column, text_pair_column, label_column)
    given, pretrained, accelerator = _given(model, tokenizer, device)
    conf = Path(conf_dir) if conf_dir is not None else CONF_DIR
    settings = evaluation_settings({**evaluation, "compare_random": bool(compare_random)}, seed, conf)
    values = {"seed": seed, "model": {"pretrained": pretrained or None}}
    built, analyses = components(methods, masking, values, conf), measure_analyses(measures, values, conf)
    options = {"accelerator": accelerator, "max_length": max_length, "batch_size": batch_size, "precision": precision}
    options["analyses"] = analyses
    return _run(_plan(examples, *built, settings, seed, pretrained, options), given, examples.texts)
