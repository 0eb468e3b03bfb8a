"""Pages the sgsim docs build makes from the repository: notebooks, the gallery, the methods table.

- ``notebooks/*.py`` (jupytext percent scripts) are copied to ``docs/notebooks/`` where MyST-NB
  reads, executes and renders them; their outputs never enter git.
- ``docs/gallery/`` holds every figure of ``sgsim reproduce`` (quick mode) with its caption,
  and the run's report as a page of its own. The figures come from ``SGSIM_DOCS_FIGURES`` when
  it names the output folder of an earlier run; otherwise the build runs ``sgsim reproduce``
  into ``docs/_build/reproduce`` (kept: a later build reuses a complete run of the same sgsim
  sources).
- ``docs/api/generated/methods.md`` tabulates every registered sampling method and its options
  from :data:`sgsim.METHODS`, so that the table cannot drift from the code.
- ``docs/theory/generated/assumption1.txt`` is the table of the constant-SGD paper's Assumption 1
  per data set, from :mod:`sgsim.experiments.sgdvi_assumptions`; the theory page includes it.

Generated files are rewritten only when their content changes, so that Sphinx's incremental
build does not redo every page.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

DOCS = Path(__file__).resolve().parents[1]
ROOT = DOCS.parent


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if not dst.exists() or dst.read_bytes() != src.read_bytes():
        shutil.copyfile(src, dst)


# --------------------------------------------------------------------------- notebooks


def copy_notebooks() -> list[str]:
    """Copy the percent-format notebooks into the source tree; return their names."""
    names = []
    for src in sorted((ROOT / "notebooks").glob("*.py")):
        _copy(src, DOCS / "notebooks" / src.name)
        names.append(src.stem)
    for stale in (DOCS / "notebooks").glob("*.py"):
        if stale.stem not in names:
            stale.unlink()
    lines = [
        "(notebooks)=",
        "# Notebooks",
        "",
        "Each notebook checks theorems of the papers numerically, top to bottom. They are executed",
        "afresh every time this site is built (the outputs below are from that run); in the",
        "repository they are percent-format scripts under `notebooks/`, run by the tests as well.",
        "",
        "```{toctree}",
        ":maxdepth: 1",
        "",
        *names,
        "```",
        "",
    ]
    _write(DOCS / "notebooks" / "index.md", "\n".join(lines))
    return names


# --------------------------------------------------------------------------- gallery


def _sources_hash() -> str:
    h = hashlib.sha256()
    for folder in ("sgsim", "paper_figures"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            h.update(str(path.relative_to(ROOT)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _run_reproduce() -> Path:
    out = DOCS / "_build" / "reproduce"
    stamp = out / "sources.sha"
    digest = _sources_hash()
    manifest = out / "figures.json"
    if manifest.exists() and stamp.exists() and stamp.read_text() == digest:
        if json.loads(manifest.read_text()).get("status") == "complete":
            logger.info("[sgsim] gallery: reusing %s", out)
            return out
    if out.exists():
        shutil.rmtree(out)
    logger.info("[sgsim] gallery: running sgsim reproduce (quick) into %s", out)
    cmd = [sys.executable, "-m", "sgsim", "reproduce", "--quiet", "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "MPLBACKEND": "Agg"})
    if done.returncode != 0:
        raise ExtensionError(f"sgsim reproduce failed (exit {done.returncode}); see its output above")
    stamp.write_text(digest)
    return out


def _myst_text(text: str) -> str:
    return " ".join(text.split())


def build_gallery() -> None:
    """Write ``docs/gallery/``: the figures, a gallery page and the report page."""
    given = os.environ.get("SGSIM_DOCS_FIGURES")
    src = Path(given).resolve() if given else _run_reproduce()
    manifest_path = src / "figures.json"
    if not manifest_path.exists():
        raise ExtensionError(
            f"{manifest_path} not found: SGSIM_DOCS_FIGURES must name a `sgsim reproduce --out` folder"
        )
    manifest = json.loads(manifest_path.read_text())
    dst = DOCS / "gallery"
    lines = [
        "(gallery)=",
        "# Gallery",
        "",
        "Every figure that `sgsim reproduce` draws, from the run made when this site was built",
        f"(seed {manifest['seed']}, {manifest['mode'].split()[0]} mode). The numbers behind them, beside the",
        "papers' own, are in {doc}`the run's report <report>`; {ref}`the paper pages <papers>` say",
        "how to regenerate each one at the papers' budgets.",
        "",
        "```{toctree}",
        ":hidden:",
        "",
        "report",
        "```",
        "",
    ]
    missing = []
    current = None
    for fig in manifest["figures"]:
        if fig["title"] != current:
            current = fig["title"]
            lines += [f"## {current}", "", f"Made by `sgsim reproduce --only {fig['section']}`.", ""]
        _copy(src / fig["file"], dst / fig["file"])
        if not fig.get("caption"):
            missing.append(fig["file"])
        lines += [
            ":::{figure} " + fig["file"],
            ":class: sgsim-gallery",
            f":alt: {fig['title']}",
            "",
            _myst_text(fig.get("caption", "")),
            ":::",
            "",
        ]
    if missing:
        raise ExtensionError(f"figures without a caption (Section.captions): {', '.join(missing)}")
    _write(dst / "index.md", "\n".join(lines))
    report = (src / "report.md").read_text()
    _write(dst / "report.md", "(report)=\n" + report)


# --------------------------------------------------------------------------- methods table


def build_methods_table() -> None:
    """Write the table of sampling methods and their options."""
    from sgsim.integrators import METHODS, get_method

    lines = [
        "(api-methods)=",
        "# Sampling methods",
        "",
        "The `method` argument of {func}`sgsim.sample` and `sgsim run --method`. Each method's options",
        "are keyword arguments of `sample`; schedule options (`step_size`, `n_cycles`, ...) are described",
        "in {ref}`guide-schedules`. This page is generated from the registry.",
        "",
    ]
    for name in METHODS:
        method = get_method(name)
        algorithm = method.algorithm
        lines += [
            f"## `{name}`",
            "",
            f"{_myst_text(method.summary)}. Source: {_myst_text(method.references)}.",
            "",
            f"- dynamics: `{algorithm.name}` ({algorithm.coupling} replicas); step-size units: {algorithm.units}",
            "- schedule options: " + ", ".join(f"`{o}`" for o in method.schedule_options),
            "",
        ]
        if algorithm.options:
            lines += ["| option | default | meaning |", "|---|---|---|"]
            for key, opt in algorithm.options.items():
                text = _myst_text(opt.doc).replace("|", "\\|")
                lines.append(f"| `{key}` | `{opt.default!r}` | {text} |")
            lines.append("")
    _write(DOCS / "api" / "generated" / "methods.md", "\n".join(lines))


# --------------------------------------------------------------------------- Assumption 1 table


def build_assumption1_table() -> None:
    """Write the table of [SGDVI] Assumption 1 and Theorem 1's stability per data set (the theory page includes it)."""
    from sgsim.experiments import sgdvi_assumptions

    text = sgdvi_assumptions.markdown(sgdvi_assumptions.table())
    _write(DOCS / "theory" / "generated" / "assumption1.txt", text + "\n")


def _builder_inited(app: Sphinx) -> None:
    copy_notebooks()
    build_gallery()
    build_methods_table()
    build_assumption1_table()


def setup(app: Sphinx) -> dict:
    """Register the page generators."""
    app.connect("builder-inited", _builder_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
