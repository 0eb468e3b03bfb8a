"""The run the site is built with: its numbers, for the pages that quote them, and its stamp.

Plain Python (no Sphinx), so that the tests import it without the ``docs`` extra.

- :func:`parse_report` reads the tables of a ``sgsim reproduce`` report (``report.md``): per
  section (the registry name printed under each title), every Markdown table with its header.
  The rows before the first section (mode, seed, total time, ...) form the section ``@``.
- :func:`lookup` answers one quoted value, ``SECTION#ROW[#COLUMN[#REGEX]]``: the cell of the row
  whose first cell is ``ROW`` (``~PATTERN``: the row whose first cell the regular expression
  finds), in ``COLUMN`` (by default ``ours``, or the second column of a table without one);
  ``REGEX`` keeps a part of the cell (its first group, else the whole match). A
  value that is missing, ambiguous or unmatched raises :class:`RunValueError`: a page never
  shows a number the run did not write.
- :func:`extras_present` and :func:`run_stamp`: the optional modules that decide which sections
  a run skips (the ``missing_extra`` checks of ``paper_figures``) enter the stamp under which the
  build reuses an earlier run, so that installing an extra reruns the sections it enables.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import re
from pathlib import Path

#: The optional modules whose presence changes what ``sgsim reproduce`` runs: torch (the
#: network experiments) and jax (the reference posteriors). tests/test_docs_run.py checks that
#: this covers every ``missing_extra`` call of ``paper_figures/``.
OPTIONAL_MODULES = ("torch", "jax")

META = "@"
_SECTION = re.compile(r"^\*`(\w+)`[,*]")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")

Table = tuple[list[str], list[list[str]]]


class RunValueError(LookupError):
    """A quoted value the run's report does not give (or gives twice)."""


def _cells(line: str) -> list[str]:
    parts = _CELL_SPLIT.split(line.strip())
    if parts and parts[0] == "":
        parts = parts[1:]
    if parts and parts[-1] == "":
        parts = parts[:-1]
    return [" ".join(p.replace("\\|", "|").split()) for p in parts]


def parse_report(text: str) -> dict[str, list[Table]]:
    """The tables of a report, per section name (``@`` for the run's own header)."""
    sections: dict[str, list[Table]] = {META: []}
    current = META
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        match = _SECTION.match(line.strip())
        if match:
            current = match.group(1)
            sections.setdefault(current, [])
        elif line.lstrip().startswith("|") and i + 1 < len(lines) and re.match(r"^\s*\|[\s:|-]+\|\s*$", lines[i + 1]):
            header = _cells(line)
            rows = []
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            sections[current].append((header, rows))
            continue
        i += 1
    return sections


def _row_matches(row: str, first_cell: str) -> bool:
    # "~REGEX" finds a row by a search in its first cell: for labels that hold a "|" (which a
    # Markdown table cell of the page cannot) or that are too long to repeat
    return bool(re.search(row[1:], first_cell)) if row.startswith("~") else first_cell == row


def lookup(sections: dict[str, list[Table]], spec: str) -> str:
    """The value ``SECTION#ROW[#COLUMN[#REGEX]]`` of a parsed report (see the module's docstring)."""
    parts = spec.split("#", 3)
    if len(parts) < 2:
        raise RunValueError(f"{spec!r}: expected SECTION#ROW[#COLUMN[#REGEX]]")
    section, row = parts[0].strip(), " ".join(parts[1].split())
    column = parts[2].strip() if len(parts) > 2 else ""
    pattern = parts[3] if len(parts) > 3 else ""
    if section not in sections:
        raise RunValueError(f"{spec!r}: the run has no section {section!r} (skipped, or not run)")
    found = []
    for header, rows in sections[section]:
        names = [h.lower() for h in header]
        if column:
            if column.lower() not in names:
                continue
            j = names.index(column.lower())
        else:
            j = names.index("ours") if "ours" in names else 1
        for cells in rows:
            if cells and _row_matches(row, cells[0]) and j < len(cells):
                found.append(cells[j])
    if not found:
        where = f" in column {column!r}" if column else ""
        raise RunValueError(f"{spec!r}: section {section!r} has no row {row!r}{where}")
    if len(set(found)) > 1:
        raise RunValueError(f"{spec!r}: row {row!r} appears with different values {found}: name the column")
    value = found[0]
    if pattern:
        match = re.search(pattern, value)
        if match is None:
            raise RunValueError(f"{spec!r}: {pattern!r} does not match {value!r}")
        value = match.group(1) if match.groups() else match.group(0)
    if not value.strip():
        raise RunValueError(f"{spec!r}: the cell is empty")
    return value.strip()


def extras_present() -> dict[str, str | None]:
    """Each optional module of :data:`OPTIONAL_MODULES` with its installed version, or None if absent."""
    out: dict[str, str | None] = {}
    for name in OPTIONAL_MODULES:
        if importlib.util.find_spec(name) is None:
            out[name] = None
            continue
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "present"
    return out


def run_stamp(root: Path, extras: dict[str, str | None] | None = None) -> str:
    """A digest of what decides a quick run's output: sgsim's and paper_figures' sources, and the extras."""
    h = hashlib.sha256()
    for folder in ("sgsim", "paper_figures"):
        for path in sorted((root / folder).rglob("*.py")):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    for name, version in sorted((extras_present() if extras is None else extras).items()):
        h.update(f"\0{name}={version}".encode())
    return h.hexdigest()[:16]


def skipped_sections(report: str) -> list[tuple[str, str]]:
    """``(title, module)`` of each section the run skipped for want of an optional module."""
    out = []
    for chunk in report.split("\n## ")[1:]:
        match = re.search(r"\*\*Skipped\*\*: this experiment needs `(\w+)`", chunk)
        if match:
            out.append((chunk.splitlines()[0].strip(), match.group(1)))
    return out


def describe_extras(extras: dict[str, str | None]) -> str:
    """``torch 2.13.0, jax absent``: one line for the gallery."""
    return ", ".join(f"{name} {version}" if version else f"{name} not installed" for name, version in extras.items())


# --------------------------------------------------------------------------- what the pages execute

_IMPORT = re.compile(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)", re.M)
_WRITEFILE = re.compile(r"%%writefile\s+\S*?(\w+)\.py")
_CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.M | re.S)


def executed_pages(docs: Path) -> list[Path]:
    """The pages the build executes: MyST-NB Markdown pages and the notebooks it copies."""
    pages = [p for p in sorted(docs.rglob("*.md")) if "_build" not in p.parts and _is_notebook(p)]
    return pages + sorted((docs.parent / "notebooks").glob("*.py"))


def _is_notebook(path: Path) -> bool:
    head = path.read_text(encoding="utf-8")[:400]
    return head.startswith("---") and "file_format: mystnb" in head


def page_imports(text: str, markdown: bool = True) -> set[str]:
    """Top-level modules that a page's code imports, less those the page writes itself (``%%writefile``)."""
    code = "\n".join(_CODE_CELL.findall(text)) if markdown else text
    return set(_IMPORT.findall(code)) - set(_WRITEFILE.findall(text))


def missing_imports(docs: Path) -> list[tuple[str, str]]:
    """``(page, module)`` for each module an executed page imports that this environment lacks."""
    out = []
    for page in executed_pages(docs):
        text = page.read_text(encoding="utf-8")
        for module in sorted(page_imports(text, markdown=page.suffix == ".md")):
            if importlib.util.find_spec(module) is None:
                out.append((str(page.relative_to(docs.parent)), module))
    return out
