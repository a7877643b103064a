"""Checks of the settings stage (:mod:`itermask.settings`) that need no data: a bad setting fails with a message
naming the option and its allowed values, before any tokenizer, data or model is loaded.

* **at composition**: :class:`EvaluationSchema`, the structured-config schema of the ``evaluation`` node
  (registered in Hydra's ConfigStore as ``evaluation_schema`` when this module is imported, and named in
  ``conf/evaluate.yaml``'s defaults: code composing it with Hydra's compose API imports :mod:`itermask.settings`
  first). Its enums and types refuse ``evaluation.quantity=logits`` or ``evaluation.token_budget=abc``, listing the
  choices; target policies (a class id *or* ``predicted``/``gold``) cannot be typed in OmegaConf 2.3 (no unions)
  and are checked by the settings stage.
* **numeric settings** (:func:`config_problems`) and ``model.max_length`` (:func:`check_max_length`).
* **components** check their own parameters in their constructors; the settings stage builds each inside
  :meth:`itermask.problems.Problems.collect`, so every problem of a config is reported in one :class:`SettingsError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeGuard, cast

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from itermask.core.evaluation_settings import FEATURE_KINDS, QUANTITIES
from itermask.core.precision import autocast_dtype
from itermask.core.schedules import SCHEDULES, STEP_KINDS
from itermask.formatting import program
from itermask.overrides import group_list_problems
from itermask.storage.cache import cache_path_problem

__all__ = [
    "SEED_RANGE",
    "EvaluationSchema",
    "SettingsError",
    "check_config",
    "config_problems",
    "check_seed_value",
    "check_max_length",
    "check_vocabulary",
    "check_added_keys",
    "OWN_SECTIONS",
    "position_limit",
    "longest_input",
    "OPTIONAL_PACKAGES",
    "missing_package",
    "ood_package_problems",
    "composed_problems",
    "check_composed",
]

#: Seeds NumPy (and so Lightning's ``seed_everything``) accepts: unsigned 32-bit integers.
SEED_RANGE = (0, 2**32 - 1)


# -- composition: the schema of the `evaluation` node ----------------------------------------------------


def _choices(name: str, values) -> type[Enum]:
    return cast("type[Enum]", Enum(name, {value: value for value in values}))


Quantity = _choices("Quantity", QUANTITIES)
StepKind = _choices("StepKind", STEP_KINDS)
FeatureKind = _choices("FeatureKind", FEATURE_KINDS)
#: Built from :data:`itermask.core.schedules.SCHEDULES` when this module is imported: a schedule defined in
#: a module imported later is accepted by the evaluator but not by the config.
Schedule = _choices("Schedule", SCHEDULES)


@dataclass
class EvaluationSchema:
    """Types of ``cfg.evaluation`` (values come from ``conf/evaluate.yaml``; see its comments)."""

    split: str = MISSING
    n_examples: int | None = MISSING
    subset_seed: int = MISSING
    steps: StepKind = MISSING  # pyright: ignore[reportInvalidTypeForm] (an Enum built from a registry at import, for OmegaConf)
    fractions: list[float] = MISSING
    aopc_bins: list[float] | None = MISSING
    counts: list[int] = MISSING
    segments: Any = MISSING  # null, a segment id or a list of them
    schedules: list[Schedule] = MISSING  # pyright: ignore[reportInvalidTypeForm] (an Enum built from a registry at import, for OmegaConf)
    target: Any = MISSING  # predicted, gold or a class id: checked by the settings stage
    quantity: Quantity = MISSING  # pyright: ignore[reportInvalidTypeForm] (an Enum built from a registry at import, for OmegaConf)
    compare_random: bool = MISSING
    token_budget: int = MISSING
    features: FeatureKind = MISSING  # pyright: ignore[reportInvalidTypeForm] (an Enum built at import, for OmegaConf)
    soft_draws: int = MISSING


ConfigStore.instance().store(name="evaluation_schema", node=EvaluationSchema)


# -- numeric settings ------------------------------------------------------------------------------------


class SettingsError(ValueError):
    """One or more settings are out of range; the message names each option, its allowed values and the value
    found, one per line."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        text = problems[0] if len(problems) == 1 else f"{len(problems)} invalid settings:\n  " + "\n  ".join(problems)
        super().__init__(text)


def _is_int(value) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


@dataclass(frozen=True)
class Range:
    """Allowed values of a numeric option: an integer or a finite number between ``low`` and ``high`` (each
    bound inclusive unless ``open`` says otherwise), or ``null`` when ``null`` gives its meaning."""

    integer: bool
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    null: str | None = None

    def allows(self, value) -> bool:
        if value is None:
            return self.null is not None
        if not (_is_int(value) if self.integer else _is_number(value)):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a number"
        if self.low is not None and self.high is not None:
            low, high = "(" if self.low_open else "[", ")" if self.high_open else "]"
            text = f"{kind} in {low}{_num(self.low)}, {_num(self.high)}{high}"
        elif self.low is not None:
            text = f"{kind} {'>' if self.low_open else '>='} {_num(self.low)}"
        else:
            text = kind
        return text + (f" or null ({self.null})" if self.null else "")


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


POSITIVE_INT = Range(integer=True, low=1)
NON_NEGATIVE_INT = Range(integer=True, low=0)
POSITIVE = Range(integer=False, low=0, low_open=True)
NON_NEGATIVE = Range(integer=False, low=0)
SEED = Range(integer=True, low=SEED_RANGE[0], high=SEED_RANGE[1])

#: Numeric options that the settings stage reads itself, and their ranges, by dotted key (absent ones are skipped);
#: components check their own (``saliency.internal_batch_size``: its constructor does not), seeds are checked by
#: :func:`_seed_problems`.
RULES: dict[str, Range] = {
    "model.max_length": POSITIVE_INT,
    "model.finetune.batch_size": POSITIVE_INT,
    "model.finetune.max_epochs": POSITIVE_INT,
    "model.finetune.optimizer.learning_rate": POSITIVE,
    "model.finetune.optimizer.weight_decay": NON_NEGATIVE,
    "model.finetune.optimizer.warmup_ratio": Range(integer=False, low=0, high=1, high_open=True),
    "model.pretrain.max_length": POSITIVE_INT,
    "model.pretrain.batch_size": POSITIVE_INT,
    "model.pretrain.head_steps": NON_NEGATIVE_INT,
    "model.pretrain.joint_steps": Range(integer=True, low=0, null="the rest of one pass over the corpus"),
    "model.pretrain.head_learning_rate": POSITIVE,
    "model.pretrain.learning_rate": POSITIVE,
    "model.pretrain.weight_decay": NON_NEGATIVE,
    "model.pretrain.warmup_ratio": Range(integer=False, low=0, high=1, high_open=True),
    "model.pretrain.heldout_examples": Range(integer=True, low=1, null="the whole validation split"),
    "trainer.max_epochs": POSITIVE_INT,
    "trainer.accumulate_grad_batches": POSITIVE_INT,
    "trainer.log_every_n_steps": POSITIVE_INT,
    "data.eval_batch_size": POSITIVE_INT,
    "data.num_workers": NON_NEGATIVE_INT,
    "train.max_train_examples": Range(integer=True, low=2, null="the whole training split"),  # 2 classes
    "train.checkpoint_every_n_steps": Range(integer=True, low=1, null="checkpoints at epoch ends only"),
    "evaluation.n_examples": Range(integer=True, low=1, null="the whole split"),
    "evaluation.token_budget": POSITIVE_INT,
    "evaluation.soft_draws": NON_NEGATIVE_INT,
    "saliency.internal_batch_size": Range(integer=True, low=1, null="all steps in one batch"),
    "logger.init_timeout": Range(integer=False, low=0, low_open=True, null="W&B's own default, 90 s"),
    "cache_lock_timeout": Range(integer=False, low=0, low_open=True, null="wait forever"),
    "threads": Range(integer=True, low=1, null="every CPU the process may use"),
}

#: List options whose items must be strictly ascending (each a grid read in order).
ASCENDING_LISTS = ("evaluation.fractions", "evaluation.counts", "evaluation.aopc_bins", "ood.plots.umap_fractions")
#: List options whose items must be distinct (a repeated item would be evaluated, or counted, twice).
DISTINCT_LISTS = ("evaluation.schedules", "evaluation.segments", "analyses", "job_devices")

_ABSENT = object()


def _get(config: dict, dotted: str):
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node


def check_seed_value(key: str, value) -> str | None:
    """The problem with seed ``value`` of option ``key`` (``None`` if it is a valid NumPy seed)."""
    return None if SEED.allows(value) else f"{key} must be {SEED.describe()} (NumPy's seed range), got {value!r}"


def _seed_problems(config: dict) -> list[str]:
    """Every ``seed`` or ``*_seed`` option of the (plain, resolved) config outside NumPy's range; the options
    holding the same bad value as the top-level ``seed`` (``${seed}`` by default) are named in its message."""
    bad = _bad_seeds(config)
    top = dict(bad).get("seed", _ABSENT)
    echoes = [key for key, value in bad if key != "seed" and top is not _ABSENT and value == top]
    also = f" (the value of {', '.join(echoes)} too)" if echoes else ""
    return [f"{check_seed_value(key, value)}{also if key == 'seed' else ''}" for key, value in bad if key not in echoes]


def _bad_seeds(node, prefix: str = "") -> list[tuple[str, Any]]:
    """``(dotted key, value)`` of every ``seed`` or ``*_seed`` option outside NumPy's range."""
    bad = []
    if isinstance(node, dict):
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            if str(key) == "seed" or str(key).endswith("_seed"):
                bad += [(dotted, value)] if check_seed_value(dotted, value) is not None else []
            else:
                bad += _bad_seeds(value, f"{dotted}.")
    return bad


def _list_problems(config: dict) -> list[str]:
    """The masking grids and the AOPC bins (``evaluation``): the grid of the configured kind of steps with two
    steps or more, the bins non-empty (the bins may be null: no AOPC), every value in range."""
    problems = []
    steps = _get(config, "evaluation.steps")
    checks = [
        ("evaluation.fractions", Range(integer=False, low=0, high=1), steps == "fraction", None),
        ("evaluation.counts", NON_NEGATIVE_INT, steps == "count", None),
        ("evaluation.aopc_bins", Range(integer=False, low=0, high=1, low_open=True), True, "no AOPC"),
    ]
    for key, item, needed, null in checks:
        value = _get(config, key)
        if value is _ABSENT or (value is None and null):
            continue
        if not isinstance(value, list) or (needed and not value):
            alternative = f" or null ({null})" if null else ""
            problems.append(f"{key} must be a non-empty list (each item {item.describe()}){alternative}, got {value!r}")
        elif bad := [v for v in value if not item.allows(v)]:
            problems.append(f"every item of {key} must be {item.describe()}, got {bad}")
        elif needed and key != "evaluation.aopc_bins" and len(value) < 2:
            problems.append(
                f"{key} needs at least two steps (the area under a masking curve and SRG integrate over the "
                f"steps; e.g. [{0 if key == 'evaluation.counts' else 0.0}, {value[0]!r}]), got {value!r}"
            )
    named = {m.split(" must ", 1)[0].removeprefix("every item of ") for m in problems}
    return problems + [m for m in _order_problems(config) if m.split(" ", 1)[0] not in named]  # once per list


def _repeated(values: list) -> list:
    """The items of ``values`` that occur more than once, each once, in order."""
    seen, repeated = set(), []
    for value in values:
        marker = repr(value)
        if marker in seen and value not in repeated:
            repeated.append(value)
        seen.add(marker)
    return repeated


def _order_problems(config: dict) -> list[str]:
    """Repeated items in the list options of :data:`ASCENDING_LISTS` and :data:`DISTINCT_LISTS`, and the
    grids of :data:`ASCENDING_LISTS` out of ascending order (a repeated fraction would be one step counted
    twice in AOPC; a repeated schedule or analysis would run twice under one name)."""
    problems = []
    for key in (*ASCENDING_LISTS, *DISTINCT_LISTS):
        value = _get(config, key)
        if not isinstance(value, list):
            continue
        if repeated := _repeated(value):
            problems.append(f"{key} lists {repeated} more than once: give each item once, got {value!r}")
        elif key in ASCENDING_LISTS and all(_is_number(v) for v in value) and value != sorted(value):
            problems.append(f"{key} must be in ascending order, got {value!r} (sorted: {sorted(value)!r})")
    return problems


def config_problems(config: dict) -> list[str]:
    """The problems of every numeric option of a resolved config (a plain dict) against :data:`RULES`, of
    every seed against NumPy's range and of the masking grid and AOPC bins, one message each."""
    problems = []
    for key, allowed in RULES.items():
        value = _get(config, key)
        if value is _ABSENT:
            continue
        if key == "trainer.max_epochs" and value == _get(config, "model.finetune.max_epochs"):
            continue  # the same value as model.finetune.max_epochs (interpolated): reported once, there
        if not allowed.allows(value):
            problems.append(f"{key} must be {allowed.describe()}, got {value!r}")
    precision = _get(config, "trainer.precision")
    if precision is not _ABSENT:
        try:
            autocast_dtype(precision)  # the accepted values and the message: itermask.core.precision
        except ValueError as error:
            problems.append(str(error))
    return problems + _seed_problems(config) + _list_problems(config)


def check_config(config: dict) -> None:
    """Check a resolved config's numeric options (:func:`config_problems`).

    Raises:
        SettingsError: naming each bad option, its allowed values and the value found (all at once).
    """
    if problems := config_problems(config):
        raise SettingsError(problems)


# -- model.max_length ------------------------------------------------------------------------------------

#: Model types whose position ids start after the padding id (fairseq's convention): ``max_position_embeddings``
#: minus ``pad_token_id + 1`` positions are usable (RoBERTa: 514 - 2 = 512).
PADDING_OFFSET_POSITIONS = (
    "roberta",
    "xlm-roberta",
    "camembert",
    "longformer",
    "data2vec-text",
    "roberta-prelayernorm",
    "xmod",
)


def position_limit(config) -> int | None:
    """The longest input (in tokens, special tokens included) that a model's absolute position embeddings
    allow, from its ``transformers`` config; ``None`` when the model has no absolute positions (DeBERTa with
    ``position_biased_input=False``) or the config names no limit."""
    positions = getattr(config, "max_position_embeddings", None)
    if not _is_int(positions) or positions <= 0 or getattr(config, "position_biased_input", True) is False:
        return None
    if getattr(config, "model_type", "") in PADDING_OFFSET_POSITIONS:
        positions -= int(getattr(config, "pad_token_id", 0) or 0) + 1
    return positions


def longest_input(tokenizer, model_config) -> int:
    """The longest input a classifier takes when no ``max_length`` is given: what the tokenizer and the model's
    position embeddings (:func:`position_limit`) allow, at most 512 tokens."""
    limits = [int(getattr(tokenizer, "model_max_length", 512) or 512), 512]
    if model_config is not None and (limit := position_limit(model_config)) is not None:
        limits.append(limit)
    return min(limits)


def check_max_length(
    max_length: int, tokenizer, model_config, pretrained: str, pairs: bool = False, option: str = "model.max_length"
) -> None:
    """``model.max_length`` (or ``option``, e.g. ``model.pretrain.max_length``) must leave room for text beside
    the special tokens (one token, or one per text of a sentence pair) and fit the model's position embeddings
    (:func:`position_limit`).

    Args:
        model_config: the ``transformers`` config of ``pretrained`` (``AutoConfig``).
        pairs: whether the data are sentence pairs.

    Raises:
        SettingsError: naming ``option`` and the allowed range.
    """
    specials = tokenizer.num_special_tokens_to_add(pair=pairs)
    low = specials + (2 if pairs else 1)
    high = position_limit(model_config)
    if low <= max_length and (high is None or max_length <= high):
        return
    text = "one token of each text" if pairs else "one token of text"
    why = f"{specials} special tokens + {text}"
    if high is None:
        allowed = f"at least {low} ({why})"
    else:
        allowed = (
            f"between {low} ({why}) and {high} (the position embeddings of {pretrained}: "
            f"max_position_embeddings={model_config.max_position_embeddings})"
        )
    raise SettingsError([f"{option} must be {allowed}, got {max_length}"])


def check_vocabulary(tokenizer, model_config, pretrained: str, module: object = None) -> None:
    """The tokenizer must cover the model's vocabulary: a tokenizer with fewer than half of the model's
    ``vocab_size`` ids is not the model's (typically a ``save_pretrained()`` folder without its tokenizer
    files, for which ``transformers`` builds a tokenizer of a few special tokens that maps every word to
    ``[UNK]``), and one with more ids than the embedding matrix would index past it.

    Args:
        pretrained: the model's name or folder (``model.pretrained``); ``module``: the module handed over to
            :func:`itermask.evaluate` instead, if any (the message names its class, not a setting it has none of).

    Raises:
        SettingsError: naming the model (``model.pretrained=...`` or the given module's class), both sizes and
            the likely cause; a given module's ``tokenizer`` that is no tokenizer (a string, a number).
    """
    if module is not None and not callable(getattr(tokenizer, "convert_tokens_to_ids", None)):  # tokenizer="<id>"
        raise SettingsError(
            [
                "tokenizer= must be the model's tokenizer object (e.g. AutoTokenizer.from_pretrained(<its folder "
                f"or hub id>)), got the {type(tokenizer).__name__} {tokenizer!r:.80}"
            ]
        )
    size, vocab = len(tokenizer), getattr(model_config, "vocab_size", None)
    if not vocab or vocab // 2 <= size <= vocab:
        return
    if size < vocab // 2 and module is not None:
        why = "is tokenizer= the one this model was trained with? Pass the model's own tokenizer"
    elif size < vocab // 2:
        why = (
            "is this a folder without its tokenizer files (tokenizer.json, vocab.txt or the like)? Save the "
            "tokenizer with the model (tokenizer.save_pretrained(folder))"
        )
    else:
        why = "token ids beyond the model's embedding matrix would fail; use the model's own tokenizer"
    name = f"model.pretrained={pretrained}" if module is None else f"the given {type(module).__name__} module"
    message = f"{name}: its tokenizer has {size} tokens but the model's vocabulary has {vocab}"
    raise SettingsError([f"{message}: {why}"])


#: Config sections whose options are all in itermask's own YAML files: a key that an override adds to them
#: with ``+`` (Hydra's hint for a mistyped key) is read by nothing. Sections passed on to a library
#: (``trainer``, ``logger``) may take added keys.
OWN_SECTIONS = ("train", "data", "evaluation", "ood", "model")


def _new_sections(added: list[str], config: dict) -> list[str]:
    """The dotted keys of ``added`` whose top-level section the additions alone made (``+pretrain.joint_steps=5``:
    the config had no ``pretrain``), other than itermask's own sections (refused already) and the analyses the
    config names (``analyses: [..., mine]`` reads a section made with ``+mine._target_=...``)."""
    named = set(config.get("analyses") or [])
    children: dict[str, set[str]] = {}
    for key in added:
        top, _, rest = key.partition(".")
        if rest and "@" not in key:
            children.setdefault(top, set()).add(rest.split(".")[0])
    return [
        key
        for key in added
        if (top := key.partition(".")[0]) in children
        and top not in OWN_SECTIONS
        and top not in named
        and isinstance(section := config.get(top), dict)
        and set(section) <= children[top]
    ]


def _elsewhere(key: str, config: dict) -> str:
    """``" (did you mean model.pretrain.joint_steps?)"`` where a section of ``config`` holds a node
    named as ``key``'s top level; ``""`` otherwise."""
    top, _, rest = key.partition(".")
    for name, node in config.items():
        if name != top and isinstance(node, dict) and isinstance(node.get(top), dict):
            return f" (did you mean {name}.{top}.{rest}?)"
    return ""


def check_added_keys(
    overrides: list[str], config: dict | None = None, *, command: str = "evaluate", forced: bool = False
) -> None:
    """Refuse command-line overrides that add (``+key=value``) a key that nothing reads: a key under one of
    :data:`OWN_SECTIONS` (``+model.max_lenght=32``), or, given the composed ``config``, a top-level value
    (``+seeds=3``; adding a config group, ``+experiment=paper``, gives a section and passes) or a section that the
    additions alone make (``+pretrain.joint_steps=5`` for ``model.pretrain.joint_steps``). Such a key would
    still enter the cache keys (a new fine-tuning under a new key, with the setting meant unchanged).
    ``++key=value`` still forces it (with a warning: :func:`itermask.callbacks._warn_overrides`), except under
    ``model.pretrain`` (with ``+`` or ``++``), which would switch continued pretraining on under the name of a
    model config without it.

    Args:
        overrides: the task's overrides as given (``HydraConfig.get().overrides.task``).
        config: the composed config (a plain dict); ``None`` checks the sections only.
        command: the entry point whose ``--help`` the messages name (``evaluate``, ``train``, ``pretrain``).
        forced: word the messages for keys that ``++`` added as asked (``overrides`` then holds their
            ``+key=value`` form), for the warning.

    Raises:
        SettingsError: naming each such key.
    """
    forced_keys = [o.lstrip("+").split("=", 1)[0] for o in overrides if o.startswith("+")]
    pretrain = sorted({key for key in forced_keys if key == "model.pretrain" or key.startswith("model.pretrain.")})
    node = ((config or {}).get("model") or {}).get("pretrain")
    # a pretrain node made of the forced keys alone was created by them: the model config has none
    if not (isinstance(node, dict) and set(node) <= {key.split(".", 2)[-1] for key in pretrain}):
        pretrain = []
    added = [o[1:].split("=", 1)[0] for o in overrides if o.startswith("+") and not o.startswith("++")]
    unread = [key for key in added if "." in key and key.split(".")[0] in OWN_SECTIONS and key not in pretrain]
    how, help_ = ("forced with ++", "++ added it as asked") if forced else ("added with +", "++ adds it anyway")
    spelling = f"check its spelling against `{program(command)} --help`"
    problems = [
        f"{key} (added with + or ++) would turn continued MLM pretraining on for a model config without it, "
        "under that model's name: choose a model that has it (model=minilm_mlm or model=minilm_cda, whose "
        "model.pretrain.* settings are set without +), or write a model config with a pretrain node"
        for key in pretrain
    ]
    problems += [
        f"{key} ({how}{key}=...) is not an option of the {key.split('.')[0]} settings: nothing reads it, but it "
        f"would change the cache keys; {spelling} or `--cfg job` ({help_})"
        for key in unread
    ]
    if config is not None:
        problems += [
            f"{key} ({how}{key}=...) is not a setting: nothing reads it, but it would change the cache keys; "
            f"{spelling} (e.g. seed, not seeds; {help_})"
            for key in added
            if "." not in key and "@" not in key and not isinstance(config.get(key), dict)
        ]
        problems += [
            f"{key} ({how}{key}=...) makes a section {key.split('.')[0]} that nothing reads"
            f"{_elsewhere(key, config)}; {spelling} or `--cfg job` ({help_})"
            for key in _new_sections(added, config)
        ]
    if problems:
        raise SettingsError(problems)


# -- optional packages -----------------------------------------------------------------------------------

#: Optional packages a config choice needs: ``(import name, pip extra, the choice, its alternatives)``.
OPTIONAL_PACKAGES = {
    "umap": (
        "umap-learn",
        "umap",
        "ood.level=full draws UMAP figures of the masked inputs",
        "or set ood.plots.enabled=false, or use ood=final",
    ),
}


def missing_package(module: str) -> str | None:
    """The problem with the optional package of :data:`OPTIONAL_PACKAGES` importable as ``module``: ``None`` if
    it is installed, else a message naming the package, the extra that installs it and the alternatives.
    Looks the module up without importing it (fast: no numba compilation for umap)."""
    import importlib.util

    if importlib.util.find_spec(module) is not None:
        return None
    package, extra, needed_by, alternatives = OPTIONAL_PACKAGES[module]
    return (
        f"{needed_by} with {package}, which is not installed: pip install 'itermask[{extra}]' "
        f"(or pip install {package}), {alternatives}"
    )


def ood_package_problems(level, plots_enabled) -> list[str]:
    """The optional packages the OOD analysis at ``level`` needs and lacks (umap-learn for the UMAP figures
    of ``ood.level=full`` with ``ood.plots.enabled``)."""
    if level == "full" and plots_enabled is not False and (problem := missing_package("umap")) is not None:
        return [problem]
    return []


def composed_problems(config: dict, overrides: list[str] | None = None, command: str = "evaluate") -> list[str]:
    """Every problem of a composed, resolved config that can be found without torch, transformers or
    Lightning: the numeric options (:func:`config_problems`), a config group given a list of options
    (:func:`itermask.overrides.group_list_problems`), keys added to itermask's own sections
    (:func:`check_added_keys`), a cache path that is a file, and the optional packages its choices need
    (:func:`ood_package_problems`). ``command``: the entry point the messages name (:func:`check_added_keys`)."""
    problems = config_problems(config) + group_list_problems(overrides or [])
    if isinstance(config.get("cache_dir"), str) and (problem := cache_path_problem(config["cache_dir"])) is not None:
        problems.append(problem)
    try:
        check_added_keys(overrides or [], config, command=command)
    except SettingsError as error:
        problems += error.problems
    ood = config.get("ood")
    if isinstance(ood, dict) and "ood" in (config.get("analyses") or []):
        plots = ood.get("plots")
        problems += ood_package_problems(ood.get("level"), plots.get("enabled") if isinstance(plots, dict) else None)
    return problems


def check_composed(cfg, context) -> None:
    """The entry points' first check of a composed Hydra config, before torch, transformers or Lightning are
    imported (about 1 s; a command line meets :class:`itermask.callbacks.SettingsCheckCallback` first, whose plan
    imports them: about 9 s of CPU); the settings stage runs it again with the components. ``cfg``: the job's
    ``DictConfig`` (resolved here); ``context``: the running job (:class:`itermask.context.JobContext`: overrides).

    Raises:
        SettingsError: listing every problem of :func:`composed_problems`.
    """
    from omegaconf import OmegaConf

    config = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    if problems := composed_problems(cast(dict, config), list(context.overrides), context.command):
        raise SettingsError(problems)
