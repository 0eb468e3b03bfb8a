"""The documentation: its site checker, the built site (when built), and the labels the code cites.

``.ci/run`` builds the site into ``docs/_build/html`` before the tests, so there the built-site
test runs; elsewhere it is skipped until ``python -m sphinx -W -b html docs docs/_build/html``
has been run (or ``SGSIM_DOCS_HTML`` names a built site).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _checker():
    spec = importlib.util.spec_from_file_location("check_site", DOCS / "_ext" / "check_site.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def _site(tmp_path: Path, pages: dict[str, str]) -> Path:
    for name, body in pages.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"<html><body>{body}</body></html>")
    return tmp_path


def test_checker_accepts_a_whole_site(tmp_path):
    site = _site(
        tmp_path,
        {
            "index.html": '<a href="guide/a.html#start">a</a> <a href="https://example.org/x">o</a> <a href="#">t</a>',
            "guide/a.html": '<h1 id="start">A</h1><img src="../img/f.png"><a href="../index.html">home</a>',
        },
    )
    (site / "img").mkdir()
    (site / "img" / "f.png").write_bytes(b"\x89PNG")
    report = _checker().check_site(site)
    assert report.ok, report.broken
    assert report.pages == 2 and report.links == 4  # the outside link is not followed


def test_checker_rejects_missing_pages_files_and_anchors(tmp_path):
    # negative control: each kind of breakage is reported, once
    site = _site(
        tmp_path,
        {
            "index.html": '<a href="missing.html">m</a> <a href="a.html#nowhere">n</a> <img src="gone.png">',
            "a.html": '<h1 id="here">A</h1>',
        },
    )
    report = _checker().check_site(site)
    assert not report.ok
    assert len(report.broken) == 3
    assert any("missing.html answered 404" in b for b in report.broken)
    assert any("no anchor #nowhere" in b for b in report.broken)
    assert any("gone.png answered 404" in b for b in report.broken)


def test_checker_refuses_an_unbuilt_site(tmp_path):
    with pytest.raises(FileNotFoundError, match="build the site first"):
        _checker().check_site(tmp_path)


def test_built_site_every_page_200_and_no_broken_internal_link():
    site = Path(os.environ.get("SGSIM_DOCS_HTML", DOCS / "_build" / "html"))
    if not (site / "index.html").exists():
        pytest.skip(f"no built site at {site}: python -m sphinx -W -b html docs docs/_build/html")
    report = _checker().check_site(site)
    assert report.ok, "\n".join(report.broken)
    # the site is the whole documentation, not a stub: the theory, guide, API, gallery and notebooks
    for page in ("theory/errata.html", "guide/user_targets.html", "api/sampling.html", "gallery/index.html"):
        assert (site / page).exists(), page
    assert len(list((site / "notebooks").glob("*.html"))) >= 3
    assert report.pages >= 40


# ----------------------------------------------------------------------------- labels cited by the code

LABEL_DEF = re.compile(r"^\(([\w-]+)\)=\s*$", re.M)
CITES = (
    re.compile(r":ref:`(?:[^`<]*<)?([\w-]+)>?`"),
    re.compile(r"\{ref\}`(?:[^`<]*<)?([\w-]+)>?`"),
    re.compile(r"docs: ((?:(?:theory|erratum|guide|paper|api)-[\w-]+(?:, )?)+)"),
)
CITING = ("sgsim", "paper_figures", "tests", "notebooks", "README.md")


def _defined_labels() -> set[str]:
    labels = set()
    for page in DOCS.rglob("*.md"):
        if not GENERATED.intersection(page.relative_to(ROOT).parts):
            labels.update(LABEL_DEF.findall(page.read_text()))
    return labels


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _cited_labels(paths) -> dict[str, set[str]]:
    cited: dict[str, set[str]] = {}
    for path in paths:
        text = path.read_text(errors="replace")
        for pattern in CITES:
            for match in pattern.findall(text):
                for label in re.split(r",\s*", match.strip().rstrip(",")):
                    if label:
                        cited.setdefault(label, set()).add(_name(path))
    return cited


def _citing_files():
    for name in CITING:
        path = ROOT / name
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.suffix in (".py", ".md")]
        yield from (f for f in files if f.name != Path(__file__).name)


def test_every_label_the_code_cites_exists_in_the_docs():
    # Sphinx checks the references of the pages it renders; this checks the ones it never sees
    # (private docstrings, comments, tests, the report's text) without building the site.
    defined = _defined_labels()
    assert {"theory-sgld", "erratum-step-sums", "theory-tolerances"} <= defined
    cited = _cited_labels(_citing_files())
    assert len(cited) >= 30  # the scan finds the citations at all
    missing = {label: sorted(files) for label, files in cited.items() if label not in defined}
    assert not missing, missing


def test_label_scan_rejects_an_unknown_label(tmp_path):
    # negative control: a citation of a label no page defines is found by the same scan
    cited_file = tmp_path / "mod.py"
    cited_file.write_text('"""See :ref:`theory-no-such-page`."""\n# docs: erratum-nowhere, theory-sgld\n')
    cited = _cited_labels([cited_file])
    assert set(cited) == {"theory-no-such-page", "erratum-nowhere", "theory-sgld"}
    assert set(cited) - _defined_labels() == {"theory-no-such-page", "erratum-nowhere"}


#: folders the docs build writes (copies of notebooks and of a reproduce run; git-ignored)
GENERATED = {"_build", "gallery", "generated"}
OUTSIDE = re.compile(r"THEORY|\.\./shared")


def _outside_references(files) -> list[str]:
    offenders = []
    for f in files:
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{_name(f)}:{n}: {line.strip()}")
    return offenders


def test_nothing_points_outside_the_repository():
    files = []
    for name in ("sgsim", "paper_figures", "README.md", "docs", "notebooks", "tests", "pyproject.toml"):
        path = ROOT / name
        candidates = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        for f in candidates:
            generated = GENERATED.intersection(f.relative_to(ROOT).parts[:3])
            if not generated and f.suffix in (".py", ".md", ".toml") and f.name != Path(__file__).name:
                files.append(f)
    assert len(files) > 100
    offenders = _outside_references(files)
    assert not offenders, "\n".join(offenders)


def test_outside_reference_scan_finds_one(tmp_path):
    # negative control for the scan above
    f = tmp_path / "x.py"
    f.write_text("ok = 1\n# see ../shared/papers\n# THEORY A1\n")
    assert len(_outside_references([f])) == 2
