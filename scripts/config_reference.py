"""The configuration reference of the docs site, generated from ``conf/`` and the structured schema so it
cannot drift from them.

Every YAML file under ``conf/`` is listed: the primary configs (``evaluate.yaml``, ``train.yaml``) and then
each config group (every sub-folder, ``hydra/help`` included) with its options, the option chosen by
default, each file's comment header, and every key with its default value and the comment written above
it. The types and choices of ``cfg.evaluation`` come from :class:`itermask.validation.EvaluationSchema`.

Used two ways:

* as a mkdocs hook (``hooks:`` in ``mkdocs.yml``): :func:`on_page_markdown` replaces the marker
  ``<!-- config-reference -->`` of ``docs/configuration.md`` with :func:`render` at every build;
* it also publishes ``docs-assets/`` (at the repository root, where the README's images live) under the
  site's ``docs-assets/``, and MathJax 3 (the ``django-static-mathjax`` package of the docs extra: MathJax's own
  files, no Django) under the site's ``mathjax/``, so that the formulas render with no network
  (:func:`on_files`);
* on the command line: ``python scripts/config_reference.py`` prints the same markdown.

It reads the YAML files as text and with PyYAML only (no Hydra composition), so it needs no torch.
"""

from __future__ import annotations

import dataclasses
import enum
import html
import re
import sys
import types
import typing
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
MARKER = "<!-- config-reference -->"
ASSETS = "docs-assets"
#: listed first among the primary configs (the YAML files directly under conf/, one per entry point)
FIRST = ("evaluate.yaml", "train.yaml")
_KEY = re.compile(r"^(\s*)([A-Za-z0-9_@./${}:-]+?):(\s|$)")


def yaml_files(conf: Path = CONF) -> list[Path]:
    """Every YAML file under ``conf``, sorted (what :func:`render` must cover)."""
    return sorted(p for p in conf.rglob("*") if p.suffix in (".yaml", ".yml"))


def primary_configs(conf: Path = CONF) -> list[str]:
    """The names of the YAML files directly under ``conf`` (``evaluate.yaml``, ``train.yaml``, ...): the
    configs an entry point composes, ``evaluate.yaml`` and ``train.yaml`` first."""
    names = sorted(p.name for p in yaml_files(conf) if p.parent == conf)
    return [n for n in FIRST if n in names] + [n for n in names if n not in FIRST]


def groups(conf: Path = CONF) -> dict[str, list[Path]]:
    """``{group: option files}`` for every folder under ``conf`` holding YAML files (``hydra/help`` too)."""
    out: dict[str, list[Path]] = {}
    for path in yaml_files(conf):
        if path.parent != conf:
            out.setdefault(path.parent.relative_to(conf).as_posix(), []).append(path)
    return dict(sorted(out.items()))


def default_choices(conf: Path = CONF) -> dict[str, dict[str, str | None]]:
    """``{group: {primary config: option}}``: the option each group gets by default in each primary
    config, read from their ``defaults`` lists (``None`` where the default is no option, e.g.
    ``experiment: null``). A primary config that includes another (``evaluate.yaml``'s ``- train``) gets
    that one's choices where it makes none of its own."""
    primaries = primary_configs(conf)
    own: dict[str, dict[str, str | None]] = {}
    includes: dict[str, list[str]] = {}
    for name in primaries:
        for entry in (yaml.safe_load((conf / name).read_text()) or {}).get("defaults", []):
            if isinstance(entry, str) and f"{entry}.yaml" in primaries:
                includes.setdefault(name, []).append(f"{entry}.yaml")
            elif isinstance(entry, dict):
                for key, value in entry.items():
                    group = key.removeprefix("override ").strip("/").split("@")[0]
                    own.setdefault(group, {})[name] = value
    for by_config in own.values():
        for name in primaries:
            for included in includes.get(name, []):
                if included in by_config and name not in by_config:
                    by_config[name] = by_config[included]
    return {group: {n: by_config[n] for n in primaries if n in by_config} for group, by_config in own.items()}


def _default_label(by_config: dict[str, str | None]) -> str:
    values = set(by_config.values())
    if not by_config or values == {None}:
        return "(none)"
    if len(values) == 1:
        return f"`{next(iter(values))}`"
    return ", ".join(f"`{v}` ({k.removesuffix('.yaml')}.py)" for k, v in by_config.items())


@dataclasses.dataclass
class Entry:
    """One key of a YAML file: its dotted path, default value and the comment lines above it."""

    key: str
    value: object
    comment: str


def parse(path: Path) -> tuple[str, list[str], list[Entry]]:
    """The file's comment header (the comment lines before its first key, Hydra's ``# @package`` directive
    left out), its directives, and every key (nested ones dotted) with its value and comment.

    Keys of list items (the ``defaults`` list) are not descended into: the list is the value of its key.
    """
    text = path.read_text()
    data = yaml.safe_load(text) or {}
    header: list[str] = []
    directives: list[str] = []
    comments: list[str] = []
    seen_key = False
    stack: list[tuple[int, str]] = []
    entries: list[Entry] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            body = stripped[1:].removeprefix(" ").rstrip()
            if body.strip().startswith("@package"):
                directives.append(body.strip())
            elif not seen_key:
                header.append(body)
            else:
                comments.append(body.strip())
            continue
        if not stripped:
            if seen_key:
                comments = []
            continue
        match = _KEY.match(line)
        if match is None or stripped.startswith("- "):
            continue  # a list item or a continuation line of a block string
        indent, key = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if stack and stack[-1][1] is None:
            continue  # inside a block string
        parent = [k for _, k in stack]
        node = _lookup(data, parent + [key])
        if node is _MISSING:
            continue  # a line inside a block string that looks like a key
        seen_key = True
        dotted = ".".join(parent + [key])
        if not isinstance(node, dict) or not node:
            entries.append(Entry(dotted, node, " ".join(comments)))
            stack.append((indent, None if isinstance(node, str) and "\n" in node else key))  # type: ignore[arg-type]
        else:
            if comments:
                entries.append(Entry(dotted, _SECTION, " ".join(comments)))
            stack.append((indent, key))
        comments = []
    return "\n".join(header).strip("\n"), directives, entries


_MISSING = object()
_COMMANDS = ("python ", "wandb ", "pip ", "PYTHONPATH=")
_SECTION = object()


def _lookup(data, keys: list[str]):
    node = data
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return _MISSING
        node = node[key]
    return node


def _escape(text: str) -> str:
    """Comment text for a markdown table cell: no raw HTML, no emphasis, no column breaks."""
    escaped = html.escape(text, quote=False)
    for char in "*[]|":
        escaped = escaped.replace(char, "\\" + char)
    return escaped


def _header(header: str) -> str:
    """A comment header as one paragraph; its indented lines each on a line of their own (commands as code)."""
    parts = []
    for line in header.splitlines():
        if line.startswith("  ") and line.strip().startswith(_COMMANDS):
            parts.append("<br>`" + line.strip().replace("`", "'") + "`")
        elif line.startswith("  ") and line.strip():
            parts.append("<br>" + _escape(line.strip()))
        else:
            parts.append(_escape(line.strip()))
    return " ".join(parts).replace(" <br>", "<br>")


def _value(value) -> str:
    if value is _SECTION:
        return "(section)"
    if isinstance(value, str) and "\n" in value:
        return f"(text, {value.count(chr(10))} lines)"
    # a scalar is dumped as a document with its end marker ("...") on a line of its own
    shown = yaml.safe_dump(value, default_flow_style=True, width=10_000).removesuffix("\n...\n").strip()
    return "<code>" + html.escape(shown, quote=False).replace("|", "&#124;") + "</code>"


def _table(entries: list[Entry]) -> list[str]:
    if not entries:
        return ["(no keys)", ""]
    lines = ["| key | default | what it is |", "| --- | --- | --- |"]
    lines += [f"| `{e.key}` | {_value(e.value)} | {_escape(e.comment)} |" for e in entries]
    return lines + [""]


def _file_section(path: Path, conf: Path, heading: str, default: bool) -> list[str]:
    header, directives, entries = parse(path)
    title = f"{heading} `{path.relative_to(conf).as_posix()}`" + (" (default)" if default else "")
    lines = [title, ""]
    if header:
        lines += [_header(header), ""]
    if directives:
        lines += [f"Hydra directive: `{d}`." for d in directives] + [""]
    return lines + _table(entries)


def _type_name(annotation) -> str:
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(f"`{m.name}`" for m in annotation)
    origin = typing.get_origin(annotation)
    if origin is not None:
        names = [_type_name(a) for a in typing.get_args(annotation)]
        if origin in (typing.Union, types.UnionType):
            return " or ".join(names)
        return f"{getattr(origin, '__name__', origin)}[{', '.join(names)}]"
    if annotation is type(None):
        return "null"
    if annotation is typing.Any:
        return "any (checked by the settings stage)"
    return getattr(annotation, "__name__", str(annotation))


def schema_section(conf: Path = CONF) -> list[str]:
    """The fields of :class:`itermask.validation.EvaluationSchema`: type, choices and the default value set
    in ``conf/evaluate.yaml``; empty when itermask cannot be imported."""
    if str(ROOT / "src") not in sys.path:
        sys.path.insert(0, str(ROOT / "src"))
    try:
        from itermask.validation import EvaluationSchema
    except ImportError as error:  # pragma: no cover - the docs build installs itermask
        return [f"(the schema could not be imported: {error})", ""]
    hints = typing.get_type_hints(EvaluationSchema)
    defaults = (yaml.safe_load((conf / "evaluate.yaml").read_text()) or {}).get("evaluation", {})
    _, _, entries = parse(conf / "evaluate.yaml")
    comments = {e.key.removeprefix("evaluation."): e.comment for e in entries if e.key.startswith("evaluation.")}
    lines = [
        "## The `evaluation` schema",
        "",
        "`conf/evaluate.yaml` composes the structured schema `itermask.validation.EvaluationSchema` under "
        "`evaluation` (`evaluation_schema@evaluation` in its defaults list), so Hydra checks the type and the "
        "choices of every `evaluation.*` setting when the config is composed, before any work.",
        "",
        "| key | type | default | what it is |",
        "| --- | --- | --- | --- |",
    ]
    for field in dataclasses.fields(EvaluationSchema):
        value = defaults.get(field.name, _MISSING)
        shown = "(no default)" if value is _MISSING else _value(value)
        hint = _escape(_type_name(hints[field.name])).replace("\\*", "*")
        lines.append(f"| `evaluation.{field.name}` | {hint} | {shown} | {_escape(comments.get(field.name, ''))} |")
    return lines + [""]


def render(conf: Path = CONF) -> str:
    """The whole reference as markdown: primary configs, the evaluation schema, then every group."""
    choices = default_choices(conf)
    lines = ["## Primary configs", ""]
    for name in primary_configs(conf):
        lines += _file_section(conf / name, conf, "###", False)
    lines += schema_section(conf)
    lines += ["## Config groups", "", "| group | options | default |", "| --- | --- | --- |"]
    found = groups(conf)
    for group, files in found.items():
        options = ", ".join(f"[`{p.stem}`](#{_anchor(group, p.stem)})" for p in files)
        lines.append(f"| `{group}` | {options} | {_default_label(choices.get(group, {}))} |")
    lines.append("")
    for group, files in found.items():
        lines += [f"### `{group}`", ""]
        for path in files:
            lines += [f'<a id="{_anchor(group, path.stem)}"></a>', ""]
            lines += _file_section(path, conf, "####", path.stem in choices.get(group, {}).values())
    return "\n".join(lines)


def _anchor(group: str, option: str) -> str:
    return "conf-" + re.sub(r"[^a-z0-9]+", "-", f"{group}-{option}".lower()).strip("-")


def on_files(files, config):
    """mkdocs hook: publish ``docs-assets/`` (the README's images, at the repository root so that GitHub shows
    them) as the site's ``docs-assets/``; pages link them as GitHub resolves them, ``../docs-assets/<name>``
    from ``docs/`` (see :func:`on_page_markdown`). The scripts that draw them are left out."""
    from mkdocs.structure.files import File

    for path in sorted((ROOT / ASSETS).glob("*")):
        if path.is_file() and path.suffix != ".py":
            files.append(File(f"{ASSETS}/{path.name}", str(ROOT), config["site_dir"], config["use_directory_urls"]))
    static = mathjax_static()
    # MathJax's SVG output (its glyphs inside the script: no font files) and the TeX extensions it loads on demand
    for path in [static / MATHJAX_SCRIPT, *sorted((static / "mathjax/es5/input/tex/extensions").rglob("*.js"))]:
        uri = path.relative_to(static).as_posix()
        files.append(File(uri, str(static), config["site_dir"], config["use_directory_urls"]))
    return files


#: the MathJax component the site loads (``extra_javascript`` in ``mkdocs.yml``), relative to the package's static/
MATHJAX_SCRIPT = "mathjax/es5/tex-svg.js"


def mathjax_static() -> Path:
    """The ``static/`` folder of the installed ``django-static-mathjax`` package (import name ``mathjax``).

    Raises:
        SystemExit: the package is not installed, naming the extra that brings it."""
    import importlib.util

    spec = importlib.util.find_spec("mathjax")
    folder = Path(next(iter(spec.submodule_search_locations or []), "")) / "static" if spec else None
    if folder is None or not (folder / MATHJAX_SCRIPT).is_file():
        raise SystemExit("the docs site bundles MathJax from django-static-mathjax: pip install -e '.[docs]'")
    return folder


def on_page_markdown(markdown: str, page, config, files) -> str:
    """mkdocs hook: fill the marker of ``configuration.md`` with the generated reference, and point the pages'
    links to ``docs-assets/`` (written as on GitHub: ``../docs-assets/`` from ``docs/``) at the site's copy."""
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, render(CONF))
    depth = page.file.src_uri.count("/")
    return markdown.replace("../" * (depth + 1) + f"{ASSETS}/", "../" * depth + f"{ASSETS}/")


if __name__ == "__main__":
    print(render(CONF))
