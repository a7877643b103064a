"""Report sections: parts of the report that a study adds, found in the settings instead of called by name.

A *report section* is any object with the two methods of :class:`ReportSection`, built from a config node with a
``_target_`` (:func:`build_section`, :func:`section_nodes`). So a study is a package of its own plus one config node,
e.g. ``hydra.callbacks.report.claims`` of ``experiment=paper`` (``conf/experiment/paper.yaml``). The report writer
(:func:`itermask.reporting.render.write.write_report`) calls each section's :meth:`ReportSection.figures` once and
puts its :meth:`ReportSection.markdown` first in the report, in the order found. Nothing here knows any study."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from itermask.reporting.model import Report

log = logging.getLogger(__name__)

__all__ = ["ReportSection", "report_sections", "build_section", "section_nodes"]

#: where the report callback's config sits in a sweep's ``multirun.yaml``
CALLBACK_NODE = "hydra.callbacks.report"


@runtime_checkable
class ReportSection(Protocol):
    """A part of the report that a study adds (module docstring). A section may compute what it shows
    once and keep it for the report it was computed for."""

    def figures(self, report: Report, files: Path, written: dict[str, Path], images: dict[str, str]) -> None:
        """Write the section's figures and tables into the report's ``files`` folder (``report_files/``),
        each written path added to ``written`` by file name and each figure to ``images`` (an image key
        to its path relative to the report). Called once, before :meth:`markdown`."""
        ...

    def markdown(self, report: Report, images: dict[str, str]) -> list[str]:
        """The section's Markdown lines (a ``## `` heading first; none to leave it out); ``images`` maps
        the image keys of :meth:`figures` to paths relative to the report or to data URIs."""
        ...


def build_section(name: str, node: Any) -> ReportSection:
    """A section from its node: a section as it is, or a mapping whose ``_target_`` names the section class,
    called with the node's other keys.

    Raises:
        ValueError: a node that is neither (naming it as ``hydra.callbacks.report.<name>``), or a class whose
            instances are not sections; the class's own error for bad settings.
    """
    if isinstance(node, ReportSection):
        return node
    if not isinstance(node, Mapping) or "_target_" not in node:
        raise ValueError(
            f"{CALLBACK_NODE}.{name} is not a report section: it needs a _target_ naming a class with "
            "figures() and markdown() (itermask.reporting.sections.ReportSection)"
        )
    from hydra.utils import get_class

    section = get_class(str(node["_target_"]))(**{k: v for k, v in node.items() if k != "_target_"})
    if not isinstance(section, ReportSection):
        raise ValueError(f"{CALLBACK_NODE}.{name}._target_={node['_target_']} is not a report section class")
    return section


def _is_section_node(value: Any) -> bool:
    return isinstance(value, ReportSection) or (isinstance(value, Mapping) and "_target_" in value)


def _multirun_nodes(root: Path) -> dict[str, Any]:
    """The section nodes under ``hydra.callbacks.report`` of ``root/multirun.yaml`` (none without it); a
    mapping there without a ``_target_`` is skipped with a warning."""
    path = root / "multirun.yaml"
    if not path.is_file():
        return {}
    from omegaconf import OmegaConf

    found = OmegaConf.select(OmegaConf.load(path), CALLBACK_NODE, default=None)
    node = OmegaConf.to_container(found, resolve=False) if found is not None else None
    if not isinstance(node, dict):
        return {}
    for name, value in node.items():
        if isinstance(value, Mapping) and "_target_" not in value:
            log.warning("%s.%s in %s has no _target_: not a report section, left out", CALLBACK_NODE, name, path)
    return {str(name): value for name, value in node.items() if _is_section_node(value)}


def section_nodes(report: Report) -> dict[str, Any]:
    """The report's section nodes by name: those in ``report.settings`` (set by
    :class:`itermask.callbacks.ReportCallback` from its extra config nodes), else those under
    ``hydra.callbacks.report`` of the sweep's ``multirun.yaml`` (a report rebuilt with ``python -m
    itermask.reporting``)."""
    nodes = {name: value for name, value in report.settings.items() if _is_section_node(value)}
    return nodes or _multirun_nodes(Path(report.sweep.root))


def report_sections(report: Report) -> list[ReportSection]:
    """The report's sections (:func:`section_nodes`, each built by :func:`build_section`), in order."""
    return [build_section(name, node) for name, node in section_nodes(report).items()]
