"""Registries by name: the index of a component kind's names (masking schedule, metric, analysis, attack
candidate source, ...), filled by defining the class (``__init_subclass__``), so no list elsewhere needs editing.

Components are *built* from config by their node's ``_target_`` (:func:`itermask.settings.build`), never by
looking a name up here. A registry is the name index used when *reading*: metric units and directions of
stored results, the schedule names the config schema offers, the analyses by results section, and the check
that a component node's ``name`` is the one its ``_target_`` class is registered under.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

__all__ = ["Registry", "Registered"]

T = TypeVar("T")


class Registry(dict, Generic[T]):
    """``{name: object}`` in registration order, with errors that list the known names (``kind``: what the
    entries are, ``"masking schedule"``, for error messages)."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def add(self, name: str, entry: T) -> T:
        """Register ``entry`` under ``name``; returns ``entry`` (usable as a decorator's body).

        Raises:
            ValueError: if ``name`` is empty or already taken by another entry.
        """
        if not name:
            raise ValueError(f"a {self.kind} needs a name")
        if name in self and self[name] is not entry:
            raise ValueError(f"a {self.kind} named {name!r} is already registered ({self[name]!r})")
        self[name] = entry
        return entry

    def get_entry(self, name: str) -> T:
        """The entry ``name``.

        Raises:
            ValueError: for an unknown name, listing the known ones.
        """
        if name not in self:
            raise ValueError(f"unknown {self.kind} {name!r}: choose from {sorted(self)}")
        return self[name]


class Registered:
    """Base of classes whose named subclasses register themselves in the class attribute :attr:`registry`:
    defining a subclass with a non-empty ``name`` adds :meth:`_registry_entry` (the class itself, or for
    some registries an instance) under that name."""

    registry: ClassVar[Registry]
    name: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            cls.registry.add(cls.name, cls._registry_entry())

    @classmethod
    def _registry_entry(cls) -> Any:
        return cls
