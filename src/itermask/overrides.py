"""Problems of the command line's overrides as written (``hydra.overrides.task``), found before any value is
read: a config group given a list of options (:func:`group_list_problems`, a refusal) and a key given twice
(:func:`repeated_key_warnings`, a warning). Plain functions of the override strings. The settings check refuses
the first on every run (:func:`itermask.validation.composed_problems`); a multirun's jobs arrive with overrides
that Hydra's sweepers have already de-duplicated (the last value kept), so
:class:`itermask.callbacks.SettingsCheckCallback` warns of the repeats from the command line itself."""

from __future__ import annotations

from itermask.formatting import program

__all__ = ["group_list_problems", "repeated_key_warnings"]


def group_list_problems(overrides: list[str]) -> list[str]:
    """A config group given a list of options (``saliency=[gradient,occlusion]``, as Hydra's message on
    ``saliency=gradient,occlusion`` without ``-m`` advises): Hydra merges them into one node, whose settings then
    mix (the last option's class with the others' keys). Every group of ``conf/`` takes one option."""
    from itermask.conf import CONF_DIR

    groups = {p.name for p in CONF_DIR.iterdir() if p.is_dir() and p.name not in ("hydra", "__pycache__")}
    problems = []
    for override in overrides:
        key, _, value = override.partition("=")
        if key.lstrip("+~") in groups and value.strip().startswith("["):
            group, options = key.lstrip("+~"), value.strip()[1:-1]
            problems.append(
                f"{group}={value.strip()} picks several {group} options at once (Hydra would merge them into one); "
                f"{group} takes one option: compare them in a multirun, {program('evaluate')} -m {group}={options}"
            )
    return problems


def repeated_key_warnings(overrides: list[str]) -> list[str]:
    """A key given more than once with different values (``seed=0 seed=1``, ``model=a ... model=b``): Hydra
    keeps the last one without a word (so do its sweepers in a multirun). A warning, not a refusal: scripts that
    append an override to a base command line rely on the last one winning. Keys are compared without their
    ``+``, ``++`` or ``~``; the same override twice passes. One line per key, its overrides in command-line order."""
    given: dict[str, list[str]] = {}
    for override in overrides:
        values = given.setdefault(override.partition("=")[0].lstrip("+~"), [])
        if override not in values:
            values.append(override)
    return [
        f"{key} is given more than once on the command line ({', '.join(values)}): Hydra keeps the last one, "
        f"{values[-1]}{_sweep_hint(key, values)}"
        for key, values in given.items()
        if len(values) > 1
    ]


def _sweep_hint(key: str, overrides: list[str]) -> str:
    """``" (to run each: -m seed=0,1)"`` when every one of ``overrides`` sets a value of ``key``."""
    values = [o.partition("=")[2] for o in overrides]
    if any("=" not in o or o.startswith("~") or not v or v.startswith("[") for o, v in zip(overrides, values)):
        return ""
    return f" (to run each: -m {key}={','.join(values)})"
