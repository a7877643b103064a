"""What a job prints: quiet by default, the libraries' own messages back with ``verbose=true``.

:func:`configure`, called at the start of every job (:func:`itermask.jobs.run_job`), sets each library's own
switch: transformers' verbosity ``error`` and no weight-loading bars (no "LOAD REPORT ... MISSING" blocks: a
fine-tuning's new classification head is missing by design, and a classifier evaluated without fine-tuning has its
head checked by :func:`itermask.models.loading.load_classifier`); datasets' verbosity ``error`` and no map bars;
Lightning's ``rank_zero`` ``info`` messages (hardware lines, "💡 Tip: ... litlogger", "Seed set to") and its
``PossibleUserWarning`` hidden, its warnings and training progress bar kept; W&B's ``WANDB_QUIET`` (no version
banner, no history/summary panel; an online run's URL is still printed, an offline run's three-line banner becomes
one itermask line with its folder, :func:`itermask.tracking.start`) unless the environment sets it; and the
libraries' (not itermask's) ``DeprecationWarning``/``FutureWarning`` hidden.

itermask's own log lines (the stages, the score summary of :func:`summary_lines`, the report path) and the masking
evaluation's progress bar are printed either way.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import cast

import yaml
from omegaconf import Container, OmegaConf

from itermask.formatting import closest, did_you_mean, program
from itermask.formatting import number as format_number
from itermask.storage.files import folder_problem

__all__ = ["configure", "summary_lines", "number", "as_yaml", "LIGHTNING_INFO_LOGGERS", "quiet_lightning"]


def as_yaml(value) -> str:
    """A config value written as on the command line (``true``, ``null``, ``[one_shot, recursive]``); the
    resolver ``${as_yaml:...}`` of the ``--help`` templates (``conf/hydra/help/``). The choices of the
    ``evaluation`` schema (:class:`itermask.validation.EvaluationSchema`, enums) are written by name."""
    if isinstance(value, Container):
        value = OmegaConf.to_container(value, resolve=True, enum_to_str=True)
    elif isinstance(value, Enum):
        value = value.name
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 20).strip()
    return text.removesuffix("...").strip()


if not OmegaConf.has_resolver("as_yaml"):  # registered on import: the entry points import this module
    OmegaConf.register_new_resolver("as_yaml", as_yaml)
if not OmegaConf.has_resolver("program"):  # ${program:evaluate} in --help: itermask-evaluate or python evaluate.py
    OmegaConf.register_new_resolver("program", program)

#: Lightning's loggers whose ``info`` messages are hidden unless verbose
LIGHTNING_INFO_LOGGERS = (
    "pytorch_lightning.utilities.rank_zero",
    "lightning_fabric.utilities.rank_zero",
    "lightning.pytorch.utilities.rank_zero",
    "lightning.fabric.utilities.rank_zero",
    "lightning_fabric.utilities.seed",
    "lightning.fabric.utilities.seed",
)

_QUIET_ENV = "WANDB_QUIET"
_state = {"set_wandb_quiet": False}


def configure(verbose: bool = False) -> None:
    """Set every library's console output for a job: quiet (``verbose=False``) or as the libraries print
    by default (``verbose=True``). Idempotent; a later call (the next job of a multirun) overrides."""
    import datasets
    from lightning_fabric.utilities.warnings import PossibleUserWarning  # where Lightning defines it
    from transformers.utils import logging as hf_logging

    if verbose:
        hf_logging.set_verbosity_warning()
        hf_logging.enable_progress_bar()
        datasets.enable_progress_bars()
        datasets.logging.set_verbosity_warning()
        level = logging.NOTSET
    else:
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        datasets.disable_progress_bars()
        datasets.logging.set_verbosity_error()
        level = logging.WARNING
    for name in LIGHTNING_INFO_LOGGERS:
        logging.getLogger(name).setLevel(level)
    _wandb_quiet(not verbose)
    _library_warnings(not verbose, PossibleUserWarning)


def _wandb_quiet(quiet: bool) -> None:
    """``WANDB_QUIET=true`` while quiet, unless the user set ``WANDB_QUIET`` themselves."""
    if quiet and _QUIET_ENV not in os.environ:
        os.environ[_QUIET_ENV] = "true"
        _state["set_wandb_quiet"] = True
    elif not quiet and _state["set_wandb_quiet"]:
        os.environ.pop(_QUIET_ENV, None)
        _state["set_wandb_quiet"] = False


_FILTERS: list[tuple] = []


def _library_warnings(quiet: bool, possible_user_warning: type[Warning]) -> None:
    """Hide (``quiet``) or show again Lightning's ``PossibleUserWarning`` and the libraries'
    deprecation and future warnings (those whose source module is not itermask's)."""
    for entry in _FILTERS:
        if entry in warnings.filters:
            cast(list, warnings.filters).remove(entry)  # a list at runtime (typeshed: a Sequence)
    _FILTERS.clear()
    if not quiet:
        return
    for category, module in (
        (possible_user_warning, ""),
        (DeprecationWarning, r"(?!itermask)"),
        (FutureWarning, r"(?!itermask)"),
    ):
        warnings.filterwarnings("ignore", category=category, module=module)
        _FILTERS.append(warnings.filters[0])


# -- the score summary a job prints -----------------------------------------------------------------------


def number(value, signed: bool = False) -> str:
    """``value`` with 3 decimals (``signed``: with its sign; an integer too, ``1.000``), ``"n/a"`` for
    ``None`` or NaN (:func:`itermask.formatting.number`)."""
    return format_number(None if value is None else float(value), 3, signed=signed)


def _accuracy_line(result: dict) -> str:
    acc = result.get("accuracy") or {}
    validation = acc.get("validation")
    validation = (
        "n/a (no fine-tuning)" if validation is None and result.get("fine_tuned") is False else number(validation)
    )
    scored = acc.get("n_scored", result.get("n_test", "n/a"))  # fewer than n_test under trainer.limit_test_batches
    return (
        f"accuracy (fraction correct): test {number(acc.get('test'))} on {scored} examples (majority class "
        f"{number(acc.get('majority_class_test'))}), validation {validation}"
    )


def _aopc_line(result: dict, method: str | None) -> str:
    from itermask.core.metrics import ScoreKey

    quantity = result.get("quantity", "probability")
    aggregate = "aopc" if result.get("steps", "fraction") == "fraction" else "aopc_full"
    scores = (result.get("scores") or {}).get(method) or {}
    relative = result.get("relative_to_random") or {}
    parts = []
    for schedule, summary in scores.items():
        values = []
        for score in ("comprehensiveness", "sufficiency"):
            key = str(ScoreKey.of(score, quantity, aggregate))
            if key in summary:
                versus = (relative.get(schedule) or {}).get(key)
                difference = f" ({number(versus, signed=True)})" if versus is not None else ""
                values.append(f"{score} {number(summary[key])}{difference}")
        parts.append(f"{schedule} " + ", ".join(values))
    versus = " (minus random in brackets)" if relative else ""
    n = f" over {result['n_evaluated']} explained examples" if result.get("n_evaluated") is not None else ""
    return f"{method} {aggregate.upper().replace('_', ' ')} ({quantity}){n}{versus}: " + "; ".join(parts)


def summary_lines(result: dict, job_dir: Path | None = None) -> list[str]:
    """The lines for the console at the end of an evaluation job: test (and validation) accuracy; the
    saliency method's AOPC comprehensiveness and sufficiency per schedule (ERASER bins; over every step with
    count steps) with the difference to the random explanation; then each analysis's own lines
    (:meth:`itermask.analyses.Analysis.summary_lines` of :func:`itermask.analyses.analysis_classes`, e.g.
    the final layer's Mahalanobis OOD AUROC of masked vs clean inputs at 50 % masking); with ``job_dir``, where
    to look: the command that writes the job's per-example views; last, the warning of a classifier that learnt
    nothing (:func:`~itermask.analyses.model_check.model_check_line`)."""
    from itermask.analyses.base import analysis_classes
    from itermask.analyses.model_check import model_check_line

    saliency = result.get("saliency")
    method = saliency.get("name") if isinstance(saliency, dict) else str(saliency)
    lines = [_accuracy_line(result), _aopc_line(result, method)]
    for analysis in analysis_classes(result):
        lines += analysis.summary_lines(result)
    if job_dir is not None and (Path(job_dir) / "per_example").is_dir():
        lines.append(f"per-example views (heatmaps, masking trajectories): python -m itermask.views {job_dir}")
    if (warning := model_check_line(result)) is not None:  # last, where a reader's eye lands
        lines.append(warning)
    return lines


def check_overrides(arguments: list[str], conf_dir: Path | None = None, config_name: str | None = None) -> None:
    """Explain the command-line overrides Hydra's grammar cannot read because of characters outside ASCII
    written without quotes (``dataset.source.path=/data/données.csv``: Hydra reports only
    ``LexerNoViableAltException``), an output folder (``hydra.run.dir``, ``hydra.sweep.dir``) that is a file
    (Hydra's raw ``FileExistsError``) and a config group given a boolean or a number (``sanity=true``: Hydra's
    traceback ends in "Config group override must be a string"), and exit with status 2. Other arguments are
    left to Hydra.

    Also ``-m`` with ``--cfg``, ``--info`` or ``--shell-completion`` (Hydra raises a ValueError with a traceback:
    "Only one of --run, --multirun, --cfg, --info and --shell_completion can be specified").

    Args:
        arguments: the command line after the script (``sys.argv[1:]``).
        conf_dir: the script's Hydra config folder, whose sub-folders are the config groups (none: not checked).
        config_name: the command's primary config: a group it does not choose is left to
            :func:`foreign_group_hints` (``train.py debug=smok`` would suggest ``smoke``, which train.py refuses).
    """
    modes = [a.split("=", 1)[0] for a in arguments if a.split("=", 1)[0] in _MODE_FLAGS]
    if len(set(modes) & {"-m", "--multirun"}) and len(modes) > 1:
        other = next(m for m in modes if m not in ("-m", "--multirun"))
        print(
            f"error: {other} cannot be combined with -m (Hydra takes one of them): to see one job's config, drop -m "
            f"and give one value per swept setting (e.g. seed=0 for seed=0,1,2)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    _check_output_folders(arguments)
    _check_group_values(arguments, conf_dir, config_name)
    if not set(modes) & {"-m", "--multirun"}:
        _check_sweeps(arguments, conf_dir, config_name)
    if conf_dir is not None and config_name and (deleted := _deleted_settings(arguments, conf_dir, config_name)):
        print(
            f"error: {deleted}: deletes a top-level setting that every job of {program(config_name)} reads (it "
            "would fail with a KeyError after the job started): set it instead "
            f"({deleted[1:]}=<value>; `--cfg job` shows it)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    suspects = [a for a in arguments if "=" in a and not a.startswith("-") and not a.isascii()]
    if not suspects:
        return
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    for argument in suspects:
        try:
            parser.parse_overrides([argument])
        except OverrideParseException:
            key, _, value = argument.partition("=")
            print(
                f"error: cannot read the override {argument!r}: Hydra's override grammar allows characters outside "
                f"ASCII (here {sorted({c for c in value if not c.isascii()})}) only inside quotes. Quote the value, "
                f"and the whole argument for the shell: '{key}=\"{value}\"'",
                file=sys.stderr,
            )
            raise SystemExit(2) from None


def _check_group_values(arguments: list[str], conf_dir: Path | None, config_name: str | None = None) -> None:
    """Exit with status 2 for a config group override whose value is a boolean or a number (``sanity=true``:
    a group takes the name of one of its YAML files) or names no file of the group (``saliency=gradiant``), naming
    the closest choice and all of them. Options from another config folder (``--config-dir``,
    ``hydra.searchpath``) are left to Hydra, and so is a group that ``config_name`` does not choose (without ``+``)."""
    groups = {p.name: p for p in conf_dir.iterdir() if p.is_dir()} if conf_dir is not None else {}
    own = _config_groups(conf_dir, config_name) if conf_dir is not None and config_name else set()
    elsewhere = any(a.startswith(("--config-dir", "-cd", "hydra.searchpath")) for a in arguments)
    for argument in arguments:
        key, found, value = argument.partition("=")
        group = key.lstrip("+~")
        if not found or group not in groups or key.startswith("~") or (own and key == group and group not in own):
            continue
        choices = sorted(p.stem for p in groups[group].glob("*.yaml"))
        values = _group_values(value)
        if values is None:
            problem = f"{group} is a config group"
        elif None in values:  # Hydra: "Config group override must be a string or a list. Got NoneType", a traceback
            off = f" ({group}=none turns it off)" if "none" in choices else ""
            problem = f"null is not an option of {group}{off}"
        elif unknown := [v for v in values if isinstance(v, str) and v not in choices and not elsewhere]:
            problem = f"no {group} option {unknown[0]!r}{did_you_mean(unknown[0], choices)}"
        else:
            continue
        print(f"error: {argument}: {problem}; choose one of {choices}", file=sys.stderr)
        raise SystemExit(2)


def _check_output_folders(arguments: list[str]) -> None:
    """Exit with status 2 for an output folder given on the command line that cannot be made (a file above it,
    ``/proc``, no permission): Hydra makes the job's folder before any itermask code, with a raw traceback."""
    for argument in arguments:
        key, _, value = argument.partition("=")
        folder = Path(value.strip("'\"")).expanduser()
        if key in ("hydra.run.dir", "hydra.sweep.dir") and "${" not in value and (problem := folder_problem(folder)):
            print(f"error: {key}={value} cannot be the output folder: {problem}", file=sys.stderr)
            raise SystemExit(2)


def _check_sweeps(arguments: list[str], conf_dir: Path | None, config_name: str | None) -> None:
    """Exit with status 2 at the first override that sweeps (``seed=0,1``, ``saliency=gradient,occlusion``,
    ``range(3)``) on a command line without ``-m``: Hydra refuses it in five lines whose first advice (a list,
    ``key=[value1,value2]``) does not fit a config group."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    groups = {p.name for p in conf_dir.iterdir() if p.is_dir()} if conf_dir is not None else set()
    for argument in arguments:
        if "=" not in argument or argument.startswith(("-", "hydra.")):
            continue
        try:
            sweeps = OverridesParser.create().parse_overrides([argument])[0].is_sweep_override()
        except Exception:  # noqa: BLE001 (Hydra reports what it cannot parse)
            sweeps = False
        if sweeps:
            key, value = argument.lstrip("+").split("=", 1)
            as_list = "" if key in groups else f"; if {key} is a list setting, write {key}=[{value}]"
            command = program(config_name or "evaluate")
            print(
                f"error: {argument} is a sweep, one job per value: add -m to run them ({command} -m {argument})"
                f"{as_list}",
                file=sys.stderr,
            )
            raise SystemExit(2)


def _deleted_settings(arguments: list[str], conf_dir: Path, config_name: str) -> str | None:
    """The first ``~key`` of the command line that deletes a top-level setting of ``config_name``'s primary config
    or of one it extends (``~seed``, ``~evaluation``; not a config group such as ``~logger``, nor a nested key), or
    ``None``."""
    keys: set[str] = set()
    names = [config_name]
    while names:
        path = conf_dir / f"{names.pop()}.yaml"
        body = (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}
        keys |= {k for k in body if k not in ("defaults", "hydra") and not (conf_dir / k).is_dir()}
        names += [e for e in body.get("defaults") or [] if isinstance(e, str) and (conf_dir / f"{e}.yaml").is_file()]
    for argument in arguments:
        key = argument.split("=", 1)[0]
        if key.startswith("~") and key[1:] in keys:
            return key
    return None


def _group_values(value: str) -> list[str | None] | None:
    """The option names a group override's ``value`` chooses (several for a sweep ``a,b``; ``None`` among them for
    ``null``; none for an interpolation or a grammar Hydra reports itself), or ``None`` for a boolean or a number."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    try:
        parsed = OverridesParser.create().parse_overrides([f"key={value}"])[0].value()
    except OverrideParseException:
        return []
    if isinstance(parsed, (bool, int, float)):
        return None
    listed = getattr(parsed, "list", None)  # a choice sweep a,b
    names = listed if isinstance(listed, list) else [parsed]
    return [n for n in names if n is None or (isinstance(n, str) and "${" not in n)]


#: Hydra's run modes, of which a command line may give one
_MODE_FLAGS = ("-m", "--multirun", "--cfg", "-c", "--info", "-i", "--shell-completion", "-sc")

#: the command-line choices of Hydra plugins that only the ``sweeps`` extra installs, and the plugin module each needs
#: the entry scripts' primary configs (conf/<name>.yaml)
ENTRY_CONFIGS = ("evaluate", "train", "pretrain")

PLUGIN_CHOICES = {
    "hparams_search=optuna": "hydra_optuna_sweeper",
    "hydra/sweeper=optuna": "hydra_optuna_sweeper",
    "hydra/launcher=joblib": "hydra_joblib_launcher",
    "hydra/launcher=submitit_local": "hydra_submitit_launcher",
    "hydra/launcher=submitit_slurm": "hydra_submitit_launcher",
}


def missing_plugin_hints(arguments: list[str]) -> list[str]:
    """For each choice on the command line of a Hydra plugin that is not installed (:data:`PLUGIN_CHOICES`), a
    line saying how to install it: Hydra's own message ("Could not find 'hydra/sweeper/optuna'") does not."""
    import importlib.util

    hints = []
    for argument in arguments:
        module = PLUGIN_CHOICES.get(argument.removeprefix("override ").strip())
        if module is not None and importlib.util.find_spec(f"hydra_plugins.{module}") is None:
            package = module.replace("_", "-")
            hints.append(
                f"hint: {argument} needs the Hydra plugin {package}, which is not installed: "
                "pip install -e '.[sweeps]' (or pip install 'itermask[sweeps]'; docs/sweeps.md)"
            )
    return hints


def _config_groups(conf_dir: Path, config_name: str) -> set[str]:
    """The config groups that ``config_name``'s defaults list chooses, those of a primary config it extends
    (``evaluate`` extends ``train``) included; empty if there is no such config."""
    path = conf_dir / f"{config_name}.yaml"
    groups: set[str] = set()
    for entry in ((yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}).get("defaults") or []:
        if isinstance(entry, str) and entry != "_self_" and entry != config_name:
            groups |= _config_groups(conf_dir, entry)
        elif isinstance(entry, dict):
            groups |= {str(key).removeprefix("override ").strip() for key in entry}
    return groups


def foreign_group_hints(arguments: list[str], conf_dir: Path, config_name: str) -> list[str]:
    """For each choice of a config group that this command's config does not choose but another command's does
    (``train.py debug=smoke``; Hydra advises ``+debug=smoke``, which adds evaluate.py's settings where nothing
    reads them), a line naming the command that has it."""
    own, hints = _config_groups(conf_dir, config_name), []
    for argument in arguments if own else []:
        key, equals, _ = argument.partition("=")
        if not equals or key.startswith(("+", "~", "-")) or key in own or not (conf_dir / key).is_dir():
            continue
        others = [
            program(name) for name in ENTRY_CONFIGS if name != config_name and key in _config_groups(conf_dir, name)
        ]
        if others:
            hints.append(
                f"hint: {argument}: {program(config_name)} has no {key} group; {' and '.join(others)} "
                f"{'has' if len(others) == 1 else 'have'} it ({others[0]} {argument})"
            )
    return hints


def unknown_key_hints(arguments: list[str], conf_dir: Path, config_name: str) -> list[str]:
    """For the overrides of existing keys (``a.b=value``, no ``+``) that name no key of the config composed with
    the same config groups, a line naming the closest key of the same section: Hydra's own message
    ("Could not override 'evaluation.n_exampels'. To append to your config use +evaluation.n_exampels=8")
    suggests adding the typo. Composes the config once (about 0.5 s): called after Hydra failed.

    Args:
        arguments: the command line after the script; ``conf_dir`` / ``config_name``: the script's config."""
    pairs = [a.split("=", 1) for a in arguments if "=" in a and not a.startswith(("-", "+", "~"))]
    primary = conf_dir / f"{config_name}.yaml"
    if not primary.is_file():
        return []
    top_keys = set((yaml.safe_load(primary.read_text()) or {}).keys())
    # a dotted key, or a top-level one that is neither a config group nor a key of the primary config (saliancy=)
    dotted = [
        (key, value)
        for key, value in pairs
        if not key.startswith("hydra.")
        and "/" not in key
        and ("." in key or not ((conf_dir / key).is_dir() or key in top_keys))
    ]
    if not dotted:
        return []
    from hydra import compose, initialize_config_dir

    groups = [f"{key}={value}" for key, value in pairs if "." not in key and (conf_dir / key).is_dir()]
    try:
        with initialize_config_dir(config_dir=str(conf_dir.resolve()), version_base="1.3"):
            config = OmegaConf.to_container(compose(config_name=config_name, overrides=groups), resolve=False)
    except Exception:  # noqa: BLE001 (a hint only: Hydra has said what failed)
        return []
    hints = []
    for key, _ in dotted:
        *parents, leaf = key.split(".")
        node = config
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        top = parents[0] if parents else ""
        off = isinstance(config, dict) and top in config and config[top] is None
        if isinstance(config, dict) and (top or key) not in config:
            groups = [p.name for p in conf_dir.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))]
            near = closest(top or key, sorted({*map(str, config), *groups}))
            better = f"did you mean {near}?" if near else "`--help` lists the groups, `--cfg job` the settings"
            hints.append(f"hint: {top or key} is neither a config group nor a setting ({better})")
        elif node is None and off and (conf_dir / top / "on.yaml").is_file():
            hints.append(f"hint: {key} is a setting of {top}, which is off: add {top}=on (conf/{top}/on.yaml)")
        elif isinstance(node, dict) and leaf not in node:
            section, near = ".".join(parents), closest(leaf, sorted(map(str, node)))
            better = f"did you mean {section}.{near}?" if near else f"its settings: {sorted(map(str, node))}"
            hints.append(f"hint: {key} is not a setting of {section} ({better})")
        elif node is None and not off and isinstance(config, dict) and isinstance(config.get(top), dict):
            hints.append(_missing_section_hint(key, config, conf_dir))
    return hints


def value_problems(arguments: list[str], conf_dir: Path, config_name: str) -> list[str]:
    """The setting whose value the config's typed schema refuses (``evaluation.n_examples=abc``,
    ``evaluation.fractions=0.1``, ``evaluation.schedules=[oneshot]``), in one line with what to write, or none:
    Hydra's own message takes four lines and a stack-trace note. Composes the config once with the command line's
    groups and single-valued settings (about 0.5 s; a sweep's values are checked per job by
    :class:`itermask.callbacks.SettingsCheckCallback`). Any other composition failure is left to Hydra.

    Args:
        arguments: the command line after the script; ``conf_dir`` / ``config_name``: the script's config."""
    from hydra import compose, initialize_config_dir
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if not (conf_dir / f"{config_name}.yaml").is_file():
        return []
    try:
        parsed = OverridesParser.create().parse_overrides([a for a in arguments if "=" in a and a[:1] != "-"])
    except Exception:  # noqa: BLE001 (Hydra says what it cannot parse)
        return []
    kept = [o for o in parsed if not o.is_sweep_override() and not o.key_or_group.startswith("hydra")]
    if not any("." in o.key_or_group for o in kept):
        return []
    try:
        with initialize_config_dir(config_dir=str(conf_dir.resolve()), version_base="1.3"):
            compose(config_name=config_name, overrides=[str(o.input_line) for o in kept])
    except Exception as error:  # noqa: BLE001 (only the schema's refusal of a value is ours to word)
        return [line] if (line := schema_refusal(error)) is not None else []
    return []


def schema_refusal(error: BaseException) -> str | None:
    """One line for Hydra's error on an override whose value a typed schema refuses ("Error merging override
    evaluation.fractions=0.1" caused by OmegaConf's ``ValidationError``): ``<override>: <why>``, with what to write
    for a list given a scalar; ``None`` for any other error. The single run (:func:`value_problems`) and a
    multirun's jobs (:class:`itermask.callbacks.SettingsCheckCallback`) word such a refusal with it."""
    from omegaconf.errors import ValidationError

    line = str(error).strip().splitlines()[0].removeprefix("Error merging override ") if str(error).strip() else ""
    if not isinstance(error.__cause__, ValidationError) or "=" not in line:
        return None
    key, value = line.split("=", 1)
    why = str(error.__cause__).splitlines()[0]
    if "is not a ListConfig" in why:
        why = (
            f"a list: write {key}=[{value}] (with -m, a sweep of lists: '{key}=[a],[b]')"
            if value
            else f"no value: {key} is a list, given in brackets ({key}=[a,b])"
        )
    return f"{line}: {why}"


def _missing_section_hint(key: str, config: dict, conf_dir: Path) -> str:
    """The hint for a key under a section that the chosen option of its group lacks (``model.pretrain.head_steps``
    with ``model=minilm``, whose config has no ``pretrain``; Hydra says "Key 'pretrain' is not in struct"): the
    section named, with the group's options whose own YAML has it."""
    parts, node, depth = key.split("."), config, 0
    while isinstance(node, dict) and parts[depth] in node:
        node, depth = node[parts[depth]], depth + 1
    section, top = ".".join(parts[: depth + 1]), parts[0]
    having = []
    for path in sorted((conf_dir / top).glob("*.yaml")) if (conf_dir / top).is_dir() else []:
        option = yaml.safe_load(path.read_text()) or {}
        for part in parts[1 : depth + 1]:
            option = option.get(part) if isinstance(option, dict) else None
        if option is not None:
            having.append(path.stem)
    where = f"; the {top} options that have it: {', '.join(having)}" if having else ""
    return f"hint: {key}: the {top} chosen has no {section} section{where}"


@contextmanager
def quiet_lightning() -> Iterator[None]:
    """Lightning's hardware lines, tips and library warnings hidden inside (a notebook shows only what itermask
    says), and the ``datasets`` library's progress bars ("tokenizing test", "Map"); the loggers' levels and the
    bars' setting restored after; the loggers are those :func:`configure` quiets in a job."""
    from datasets.utils import logging as datasets_logging

    loggers = [logging.getLogger(name) for name in LIGHTNING_INFO_LOGGERS]
    levels = [logger.level for logger in loggers]
    bars = datasets_logging.is_progress_bar_enabled()
    datasets_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module=r"(?!itermask)")
            for logger in loggers:
                logger.setLevel(logging.WARNING)
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
        if bars:
            datasets_logging.enable_progress_bar()
