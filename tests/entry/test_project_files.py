"""The project's own files: the licence named in pyproject.toml is the LICENSE file's, CITATION.cff cites the
tool and the paper it follows, and the package is marked as typed."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

import itermask

ROOT = Path(__file__).resolve().parents[2]


def test_the_license_file_is_the_apache_2_text_pyproject_names():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) == 201  # the full text


def test_the_citation_file_names_the_tool_and_the_paper():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software" and cff["license"] == "Apache-2.0"
    assert cff["version"] == itermask.__version__
    paper = cff["preferred-citation"]
    assert [a["family-names"] for a in paper["authors"]] == ["Crothers", "Viktor", "Japkowicz"]
    assert paper["year"] == 2023 and paper["identifiers"][0]["value"] == "arXiv:2308.06795"


def test_the_package_is_typed():
    assert (ROOT / "src/itermask/py.typed").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["itermask"]
