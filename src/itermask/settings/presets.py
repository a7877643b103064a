"""The presets of ``conf/`` read without composing a config: a saliency method's or masking strategy's node
(``conf/saliency/<name>.yaml``, ``conf/masking/<name>.yaml``) and the ``evaluation`` defaults of
``conf/evaluate.yaml``, for :func:`itermask.evaluate`. Their interpolations (``${seed}``, ``${model.pretrained}``)
are resolved against the values given; Hydra's global state is not touched."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from itermask.conf import CONF_DIR  # the presets' folder, inside the package
from itermask.core.evaluation_settings import EvaluationSettings
from itermask.core.masking import MaskingStrategy
from itermask.core.saliency import SaliencyMethod
from itermask.formatting import did_you_mean
from itermask.problems import Problems
from itermask.settings.components import build, plain
from itermask.validation import SettingsError, config_problems

__all__ = ["CONF_DIR", "preset", "evaluation_settings", "components", "measure_analyses"]

#: evaluate.py's evaluation settings that choose a subset of a split; the facade evaluates the data it is given
WHOLE_DATA_OPTIONS = ("split", "n_examples", "subset_seed")


def _conf(conf_dir: Path) -> Path:
    """``conf_dir``, checked to hold the presets.

    Raises:
        FileNotFoundError: a folder without ``evaluate.yaml``."""
    if not (conf_dir / "evaluate.yaml").is_file():
        raise FileNotFoundError(
            f"no Hydra config folder at {conf_dir} (a folder like the package's itermask/conf, where the saliency "
            "and masking presets live): give conf_dir=, or SaliencyMethod and MaskingStrategy instances instead of "
            "names"
        )
    return conf_dir


def preset(group: str, name: str, conf_dir: Path, values: Mapping[str, Any]) -> dict:
    """The node of preset ``name`` of ``group`` (``saliency`` or ``masking``), its interpolations resolved
    against ``values`` (e.g. ``{"seed": 0, "model": {"pretrained": ...}}``), as plain values.

    Raises:
        ValueError: no such preset (naming the ones there are: a bad name, as for any other argument);
        FileNotFoundError: no config folder."""
    folder = _conf(conf_dir) / group
    path = folder / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in folder.glob("*.yaml"))
        raise ValueError(
            f"{group}={name!r}: no such preset in {folder}{did_you_mean(name, known)}; choose from {known}"
        )
    root = OmegaConf.create({**values, group: OmegaConf.load(path)})
    return plain(root[group])


def _evaluation_defaults(conf_dir: Path) -> dict:
    """``conf/evaluate.yaml``'s ``evaluation`` node as plain values."""
    return plain(OmegaConf.create({"node": OmegaConf.load(_conf(conf_dir) / "evaluate.yaml")}).node.evaluation)


def evaluation_settings(options: Mapping[str, Any], seed: int, conf_dir: Path):
    """The evaluation settings of :func:`itermask.evaluate`: ``conf/evaluate.yaml``'s defaults with ``options``
    over them, the whole data (``split``, ``n_examples`` and ``subset_seed`` are not options).

    Raises:
        SettingsError: unknown or out-of-range settings, naming them; FileNotFoundError: no config folder."""
    defaults = _evaluation_defaults(conf_dir)
    if unknown := sorted(set(options) - set(defaults)):
        choices = sorted(set(defaults) - set(WHOLE_DATA_OPTIONS))  # the data given is evaluated whole
        hint = did_you_mean(unknown[0], choices)
        raise SettingsError([f"unknown evaluation setting(s) {unknown}{hint}: choose from {choices}"])
    # a list setting of names given one name (schedules="one_shot"), as saliency= and measures= take one
    options = {k: [v] if isinstance(v, str) and isinstance(defaults.get(k), list) else v for k, v in options.items()}
    node = {**defaults, **options, "split": "test", "n_examples": None}
    if problems := config_problems({"evaluation": node, "seed": seed}):
        raise SettingsError(problems)
    return EvaluationSettings.of(node)


def components(saliency: list, masking, values: dict, conf_dir: Path) -> tuple[tuple, Any]:
    """The saliency methods and the masking strategy of :func:`itermask.evaluate`: instances as given, names built
    from their presets (``values`` resolve their interpolations); every error raised together.

    Raises:
        ValueError, OSError: every problem together (an unknown preset names the known ones); first, a ``masking``
            that is neither a name nor a :class:`~itermask.core.masking.MaskingStrategy` (a list of names)."""
    if not isinstance(masking, str | MaskingStrategy):  # a list of names too: one strategy masks every step
        raise ValueError(
            f"masking={masking!r:.60}: give one strategy, a name of conf/masking (e.g. 'mask_token') or a "
            "MaskingStrategy; to compare strategies, evaluate once per strategy"
        )
    names = [m for m in saliency if isinstance(m, str)]
    if repeated := sorted({n for n in names if names.count(n) > 1}):  # as a measure given twice is refused
        raise ValueError(f"saliency: {repeated} given more than once; each method is evaluated once")
    problems, methods, strategy = Problems(), [], masking
    for method in saliency:
        with problems.collect():
            given = not isinstance(method, str)
            node = None if given else preset("saliency", method, conf_dir, values)
            methods.append(method if node is None else build(node, "saliency", SaliencyMethod))
    if isinstance(masking, str):
        with problems.collect():
            strategy = build(preset("masking", masking, conf_dir, values), "masking", MaskingStrategy)
    problems.raise_if_any()
    assert all(isinstance(m, SaliencyMethod) for m in methods) and isinstance(strategy, MaskingStrategy)
    return tuple(methods), strategy


def measure_analyses(measures, values: dict, conf_dir: Path) -> tuple:
    """The analyses of :func:`itermask.evaluate`'s ``measures``: :class:`~itermask.analyses.base.Analysis`
    instances as given, names (``"naopc"``, ``"sanity"``...) built from their ``conf/<name>/on.yaml`` preset, in
    the order given; every error raised together. A preset's interpolations read ``values`` and, beside them,
    ``conf/evaluate.yaml``'s ``evaluation`` defaults (``${evaluation.subset_seed}``).

    Raises:
        ValueError: a name with no ``on`` preset (naming those there are), a measure given twice (by name or
            instance: one result section each), a bad setting of one, or a dict (settings are given by building
            the Analysis). ``None`` is no measure."""
    from collections.abc import Mapping

    from itermask.analyses.base import Analysis

    folder = _conf(conf_dir)
    known = sorted(p.parent.name for p in folder.glob("*/on.yaml"))
    if isinstance(measures, Mapping):  # its settings would be dropped without a word
        raise ValueError(
            f"measures: a dict is not read (its settings would be ignored); give names such as {known[:2]} for the "
            "presets' settings, or Analysis instances built with yours (itermask.analyses.SanityAnalysis(levels=...))"
        )
    given = [] if measures is None else [measures] if isinstance(measures, str) else list(measures)
    names = [m if isinstance(m, str) else getattr(m, "name", None) for m in given]
    if repeated := sorted({n for n in names if n is not None and names.count(n) > 1}):
        raise ValueError(f"measures: {repeated} given more than once; each measure writes one result section")
    values = {"evaluation": _evaluation_defaults(folder), **values}
    problems, built = Problems(), []
    for measure in given:
        with problems.collect():
            if isinstance(measure, Analysis):
                built.append(measure)
            elif not isinstance(measure, str):
                raise ValueError(
                    f"measures: {measure!r:.60} is neither a measure's name nor an Analysis; names: {known}"
                )
            elif measure not in known:
                hint = did_you_mean(measure.lower(), known)
                raise ValueError(
                    f"measures: unknown measure {measure!r}{hint}; choose from {known} (or Analysis instances)"
                )
            else:
                built.append(build(preset(measure, "on", folder, values), measure, Analysis))
    problems.raise_if_any()
    return tuple(built)
