"""Building components (saliency method, masking strategy, data source, analyses, attack candidate sources,
trainer, logger) from their config node's ``_target_`` (:func:`build`): the one plug-in scheme. A node's ``name``
labels results and is no constructor argument, unless the target takes one (a data source's dataset name); a
nested component's ``name`` must be the one its class is registered under (:func:`check_registered_name`)."""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Mapping
from typing import Any

import hydra
from hydra.errors import InstantiationException
from omegaconf import DictConfig, OmegaConf

from itermask.core.registry import Registry
from itermask.problems import name_option

__all__ = ["plain", "build", "check_registered_name", "Built"]


def plain(node: DictConfig) -> Any:
    """A config node as plain containers, interpolations resolved and enum values (the ``evaluation`` schema's
    choices) as their names: what keys hash and results record."""
    return OmegaConf.to_container(node, resolve=True, enum_to_str=True)


def check_registered_name(spec: Mapping, path: str) -> None:
    """A component node's ``name`` against the registry of the class its ``_target_`` names, for classes
    that register themselves by name (:class:`itermask.core.registry.Registered`).

    Raises:
        ValueError: for a name that no class is registered under (listing the known ones), or one that
            another class than the ``_target_``'s is registered under."""
    if "name" not in spec or "_target_" not in spec:
        return
    cls = hydra.utils.get_class(str(spec["_target_"]))
    registry = getattr(cls, "registry", None)
    if not isinstance(registry, Registry):
        return
    name = str(spec["name"])
    registry.get_entry(name)
    if getattr(cls, "name", None) != name:
        raise ValueError(
            f"{path}.name={name} is another {registry.kind} than {path}._target_={spec['_target_']} "
            f"(registered as {getattr(cls, 'name', None)!r}): set both, or choose a preset that sets them"
        )


def _takes_name(spec: Mapping) -> bool:
    """Whether the node's ``_target_`` takes a ``name`` argument (``shipped_source(name=)``, ``HubSource``'s
    dataset configuration): then ``name`` is an argument, not the node's label."""
    target = spec.get("_target_")
    if target is None:
        return False
    built = hydra.utils.get_object(str(target))
    if isinstance(built, type):
        return "name" in accepted_arguments(built)
    return "name" in inspect.signature(built).parameters


def _without_label(spec: Mapping) -> dict:
    """A component node without its ``name`` label, unless its target takes ``name`` as an argument."""
    return dict(spec) if _takes_name(spec) else {k: v for k, v in spec.items() if k != "name"}


def _argument(value: Any, path: str) -> Any:
    """A constructor argument: a nested component node without its ``name`` label (checked first)."""
    if isinstance(value, dict) and "_target_" in value:
        check_registered_name(value, path)
        return _without_label(value)
    return value


def build(node: DictConfig | Mapping, path: str = "", kind: type | None = None, **kwargs) -> Any:
    """Build a component from its config node (``_target_``; nested component nodes are built by theirs).

    Args:
        node: the node, a plain dict (or a ``DictConfig``, resolved here).
        path: the node's dotted path in the config, naming the option in errors (:func:`name_option`).
        kind: the class the component must be an instance of.
        kwargs: further constructor arguments.

    Raises:
        ValueError: the component's own error for a bad setting, naming the option; a nested node's name
            that disagrees with its class (:func:`check_registered_name`); a component that is not a ``kind``.
        OSError: the component's own error (a missing file).
    """
    spec = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)
    assert isinstance(spec, dict)
    spec = {k: _argument(v, f"{path}.{k}") for k, v in _without_label(spec).items()}
    try:
        built = hydra.utils.instantiate(spec, _convert_="all", **kwargs)
    except InstantiationException as error:
        cause = error.__cause__
        if isinstance(cause, ValueError):
            named = name_option(path, spec, str(cause))
            raise (cause if named == str(cause) else ValueError(named)) from None
        if isinstance(cause, OSError):
            raise cause from None
        if isinstance(cause, TypeError) and "_target_" in spec:
            if unknown := re.search(r"unexpected keyword argument '(\w+)'", str(cause)):
                raise ValueError(_unknown_setting(str(spec["_target_"]), path, unknown.group(1))) from None
        raise
    if kind is not None and not isinstance(built, kind):
        raise ValueError(f"{path}._target_ must name an {kind.__module__}.{kind.__name__}, got {type(built).__name__}")
    return built


def accepted_arguments(cls: type) -> list[str]:
    """The keyword arguments ``cls(...)`` accepts: its ``__init__``'s, and its bases' while an ``__init__``
    passes ``**kwargs`` on."""
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        parameters = inspect.signature(init).parameters.values()
        names |= {p.name for p in parameters if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
        if not any(p.kind == p.VAR_KEYWORD for p in parameters):
            break
    return sorted(names)


def _unknown_setting(target: str, path: str, key: str) -> str:
    """The message for a node key its ``_target_`` does not take (``+saliency.n_step=3``): the option, the
    close names and every accepted one."""
    accepted = accepted_arguments(hydra.utils.get_class(target))
    close = difflib.get_close_matches(key, accepted, n=1)
    hint = f"did you mean {path}.{close[0]}? " if close else ""
    return (
        f"{path}.{key} is not a setting of {target}: {hint}it takes "
        f"{', '.join(accepted) or 'no settings'} (besides name and _target_)"
    )


class Built:
    """Components built once per distinct config node: the evaluation's masking strategy and masked
    fine-tuning's are one object (so an MLM loads once)."""

    def __init__(self) -> None:
        self._by_node: dict[str, Any] = {}

    def get(self, node: Mapping, path: str, kind: type | None = None) -> Any:
        """The component of ``node`` (a plain dict), built on first request (see :func:`build`)."""
        from itermask.storage.cache import config_hash

        key = config_hash(node)
        if key not in self._by_node:
            self._by_node[key] = build(node, path, kind)
        return self._by_node[key]
