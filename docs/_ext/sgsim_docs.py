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

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from docutils import nodes
from sgsim_run import (
    RunValueError,
    describe_extras,
    extras_present,
    lookup,
    missing_imports,
    parse_report,
    run_stamp,
    skipped_sections,
)
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.util.docutils import SphinxRole

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


def _run_reproduce() -> Path:
    out = DOCS / "_build" / "reproduce"
    stamp = out / "sources.sha"
    # the sources and the optional modules present: a run made without torch is not reused
    # once torch is installed (its network sections were skipped)
    digest = run_stamp(ROOT)
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


def _extras_note(report: str) -> list[str]:
    """What the run had of the optional extras: the modules of this build, and the sections skipped."""
    lines = [f"Optional modules where this site was built: {describe_extras(extras_present())}."]
    skipped = skipped_sections(report)
    if skipped:
        lines[0] += " The run skipped, for want of them:"
        lines += [""] + [f"- {title} (needs `{module}`)" for title, module in skipped]
        lines += [
            "",
            "Install the extras (the {ref}`installation page <guide-installation>`) and build again to include them.",
        ]
    else:
        lines[0] += " The run skipped no section."
    return lines


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
    report = (src / "report.md").read_text()
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
        *_extras_note(report),
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


# --------------------------------------------------------------------------- execution: fail early, say why


def check_page_imports() -> None:
    """Refuse to start a build whose executed pages import a module this environment lacks.

    Without this the build ran for half an hour (the gallery's run, the other pages) before
    the first such page failed, with its cause in a temporary log.
    """
    if os.environ.get("SGSIM_DOCS_EXECUTE", "").lower() == "off":
        return
    missing = missing_imports(DOCS)
    if missing:
        listed = "; ".join(f"{page} imports {module}" for page, module in missing)
        raise ExtensionError(
            f"the executed pages need modules this environment lacks ({listed}). Install the docs extra, "
            'CPU build of torch first: pip install torch==2.13.0 && pip install -e ".[docs]" '
            "(or set SGSIM_DOCS_EXECUTE=off for a draft without outputs)"
        )


_CELL_ERROR = "An error occurred while executing the following cell"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def check_executions(app: Sphinx, env) -> None:
    """Fail the build, with each failing cell's traceback, if a page's execution failed.

    MyST-NB's own ``nb_execution_raise_on_error`` raises an ``ExecutionError`` that names only the
    page, its cause left in a temporary log; conf.py lets MyST-NB warn with the traceback instead
    (``nb_execution_show_tb``), and this handler makes the failure fatal, with or without ``-W``.
    """
    failed = []
    for docname, data in sorted(getattr(env, "nb_metadata", {}).items()):
        exec_data = data.get("exec_data") if isinstance(data, dict) else None
        if exec_data and not exec_data.get("succeeded", True):
            tb = _ANSI.sub("", exec_data.get("traceback") or exec_data.get("error") or "")
            # the cell and its error, without the frames of the executor that ran it
            tb = tb[tb.find(_CELL_ERROR) :] if _CELL_ERROR in tb else tb
            failed.append(f"--- {env.doc2path(docname)}:\n{tb.strip()}")
    if failed:
        raise ExtensionError(f"{len(failed)} executed page(s) failed:\n" + "\n".join(failed))


def _builder_inited(app: Sphinx) -> None:
    check_page_imports()
    copy_notebooks()
    build_gallery()
    build_methods_table()
    build_assumption1_table()


# --------------------------------------------------------------------------- quoted values

_REPORT = DOCS / "gallery" / "report.md"
_parsed: dict[float, dict] = {}


def _report_tables() -> dict:
    mtime = _REPORT.stat().st_mtime
    if mtime not in _parsed:
        _parsed.clear()
        _parsed[mtime] = parse_report(_REPORT.read_text())
    return _parsed[mtime]


class RunValue(SphinxRole):
    """``{run}`SECTION#ROW[#COLUMN[#REGEX]]```: a value of the run this site is built with.

    The value is read from that run's report (``docs/gallery/report.md``, written by
    :func:`build_gallery`), so a page quotes what the run gave, never a number typed by hand; a
    value the report lacks is a warning (an error under ``-W``). See ``sgsim_run.lookup``.
    """

    def run(self):
        """The value, as inline text (the page re-read whenever the report changes)."""
        self.env.note_dependency(str(_REPORT))
        try:
            value = lookup(_report_tables(), self.text)
        except (RunValueError, OSError) as exc:
            logger.warning(f"[sgsim] {exc}", location=self.get_location(), type="sgsim", subtype="run-value")
            value = "(missing)"
        return [nodes.inline(self.rawtext, value, classes=["sgsim-run-value"])], []


def setup(app: Sphinx) -> dict:
    """Register the page generators."""
    app.connect("builder-inited", _builder_inited)
    app.connect("env-updated", check_executions)
    app.add_role("run", RunValue())
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
