"""The docs build's first contact: what the docs extra installs, a stale gallery, quoted numbers.

``docs/_ext/sgsim_run.py`` is plain Python (no Sphinx), so these run in the test environment;
the Sphinx handler's test is skipped where Sphinx is not installed.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "docs" / "_ext"


def _module(name: str):
    if name in sys.modules:
        return sys.modules[name]
    if str(EXT) not in sys.path:
        sys.path.insert(0, str(EXT))
    spec = importlib.util.spec_from_file_location(name, EXT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


REPORT = """# sgsim: the papers' results, reproduced

| | |
|---|---|
| mode | quick (50,000 iterations per chain) |
| seed | 2020 |

## [Rep] Tables 2 and 3

*`repulsive_tables23_synthetic`, 15.4 s*

| quantity | paper value | ours | note |
|---|---|---|---|
| MoE SGLD: error of E[X] | 0.39 | 0.128 ± 0.015 | Table 3 |
| MoE SGLD: ESS/s (pooled) | 51.5 | 3.63e+04 | a \\| b |

| target | SGLD | SGLD+R with 1/L |
|---|---|---|
| MoE | 0.128 ± 0.015 | 0.223 ± 0.04 |

## [SGDVI] Figure 6

*`sgdvi_fig6_vem`, 57.9 s*

| quantity | paper value | ours | note |
|---|---|---|---|
| lambda selected by VEM, Theorem 1's rate | not run | diverged | NLL nan; rate 23 = 2.53 x the stability limit 9.09 |

## [Rep] Tables 4 and 5

*`repulsive_tables45_bnn`, 0.0 s*

**Skipped**: this experiment needs `torch`, an optional dependency, which is not installed.
"""


def test_lookup_reads_cells_columns_and_parts_of_notes():
    run = _module("sgsim_run")
    tables = run.parse_report(REPORT)
    assert run.lookup(tables, "repulsive_tables23_synthetic#MoE SGLD: error of E[X]") == "0.128 ± 0.015"
    assert run.lookup(tables, "repulsive_tables23_synthetic#MoE#SGLD+R with 1/L") == "0.223 ± 0.04"
    assert run.lookup(tables, r"repulsive_tables23_synthetic#MoE SGLD: error of E[X]##^(\S+)") == "0.128"
    assert run.lookup(tables, "repulsive_tables23_synthetic#MoE SGLD: ESS/s (pooled)#note") == "a | b"
    spec = r"sgdvi_fig6_vem#lambda selected by VEM, Theorem 1's rate#note#limit (\S+)"
    assert run.lookup(tables, spec) == "9.09"
    assert run.lookup(tables, "@#seed") == "2020"
    assert run.lookup(tables, "repulsive_tables23_synthetic#~ESS/s") == "3.63e+04"  # a row by a pattern
    assert run.lookup(tables, r"@#mode##^(\w+)") == "quick"


@pytest.mark.parametrize(
    "spec",
    [
        "repulsive_tables23_synthetic#MoG SGLD: error of E[X]",  # no such row
        "repulsive_tables23_synthetic#MoE#SGLD+R",  # no such column
        "repulsive_tables45_bnn#anything",  # the section was skipped: no table
        "cyclical_table4_coverage#SGLD",  # the section was not run
        r"sgdvi_fig6_vem#lambda selected by VEM, Theorem 1's rate##^(\d+)",  # "diverged" is no number
        "repulsive_tables23_synthetic",  # no row named
        "repulsive_tables23_synthetic#~MoE SGLD",  # a pattern that finds two rows of different values
    ],
)
def test_lookup_refuses_what_the_run_did_not_write(spec):
    # the negative controls of the test above: a page can never show a value the run lacks
    run = _module("sgsim_run")
    with pytest.raises(run.RunValueError):
        run.lookup(run.parse_report(REPORT), spec)


def test_a_row_given_twice_with_different_values_must_name_its_column():
    run = _module("sgsim_run")
    text = "*`s`, 1 s*\n\n| q | ours |\n|---|---|\n| a | 1 |\n\n| q | ours |\n|---|---|\n| a | 2 |\n"
    with pytest.raises(run.RunValueError, match="different values"):
        run.lookup(run.parse_report(text), "s#a")


def test_skipped_sections_are_found_with_the_module_they_need():
    run = _module("sgsim_run")
    assert run.skipped_sections(REPORT) == [("[Rep] Tables 4 and 5", "torch")]
    assert run.skipped_sections(REPORT.replace("**Skipped**", "Skipped")) == []


def test_the_stamp_of_a_reused_run_covers_the_optional_modules(tmp_path):
    # the gallery said torch "is not installed" after torch was installed: the build reused a run
    # made without it, under a stamp of the sources alone
    run = _module("sgsim_run")
    (tmp_path / "sgsim").mkdir()
    (tmp_path / "sgsim" / "a.py").write_text("x = 1\n")
    without = run.run_stamp(tmp_path, {"torch": None, "jax": "0.4"})
    assert run.run_stamp(tmp_path, {"torch": "2.13.0", "jax": "0.4"}) != without
    assert run.run_stamp(tmp_path, {"torch": None, "jax": "0.4"}) == without
    (tmp_path / "sgsim" / "a.py").write_text("x = 2\n")
    assert run.run_stamp(tmp_path, {"torch": None, "jax": "0.4"}) != without


def test_the_stamp_names_every_module_a_section_may_skip_for():
    run = _module("sgsim_run")
    needed = set()
    for path in (ROOT / "paper_figures").glob("*.py"):
        for call in re.findall(r"missing_extra\(([^)]*)\)", path.read_text()):
            if call.startswith("name:"):
                continue  # the definition
            module = re.search(r"module=\"(\w+)\"", call)
            needed.add(module.group(1) if module else "torch")
    assert needed and needed <= set(run.OPTIONAL_MODULES), needed


def _extra_closure(extras: dict[str, list[str]], name: str) -> set[str]:
    out: set[str] = set()
    for req in extras[name]:
        inner = re.fullmatch(r"sgsim\[([\w-]+)\]", req.strip())
        if inner:
            out |= _extra_closure(extras, inner.group(1))
        else:
            out.add(re.match(r"[A-Za-z0-9_.-]+", req).group(0).lower())
    return out


def _lacking(extras: dict[str, list[str]], imported: set[str]) -> set[str]:
    docs = _extra_closure(extras, "docs")
    optional = set().union(*(_extra_closure(extras, e) for e in extras)) - docs
    return {m for m in imported if m.lower() in optional}


def test_the_docs_extra_installs_every_optional_module_the_pages_execute():
    # the docs command failed after 28 minutes at guide/torch.md: the docs extra had no torch
    tomllib = pytest.importorskip("tomllib")
    run = _module("sgsim_run")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    imported = set()
    for page in run.executed_pages(ROOT / "docs"):
        imported |= run.page_imports(page.read_text(), markdown=page.suffix == ".md")
    assert {"torch", "jax", "numpy"} <= imported
    assert not _lacking(extras, imported), "the docs extra lacks modules that executed pages import"
    # control: the same comparison catches a docs extra without torch
    without = {**extras, "docs": [r for r in extras["docs"] if r != "sgsim[torch]"]}
    assert _lacking(without, imported) == {"torch"}


def test_page_imports_skip_markdown_and_modules_the_page_writes():
    run = _module("sgsim_run")
    page = (
        "---\nfile_format: mystnb\n---\n\nfrom the text, import nothing\n\n"
        "```{code-cell} ipython3\n%%writefile {workdir}/mybanana.py\nimport numpy as np\n```\n\n"
        "```{code-cell} ipython3\nimport mybanana\nfrom torch import nn\n```\n"
    )
    assert run.page_imports(page) == {"numpy", "torch"}


def test_a_failed_execution_fails_the_build_with_its_traceback():
    pytest.importorskip("sphinx")
    docs_ext = _module("sgsim_docs")
    from sphinx.errors import ExtensionError

    RED = "\x1b[31m"  # the kernel's tracebacks come coloured

    class Env:
        nb_metadata = {
            "guide/torch": {"exec_data": {"succeeded": False, "traceback": RED + "ModuleNotFoundError\x1b[0m: torch"}},
            "guide/storage": {"exec_data": {"succeeded": True, "traceback": None}},
        }

        def doc2path(self, docname):
            return f"docs/{docname}.md"

    with pytest.raises(ExtensionError, match=r"docs/guide/torch\.md:\nModuleNotFoundError: torch"):
        docs_ext.check_executions(None, Env())
    Env.nb_metadata.pop("guide/torch")
    docs_ext.check_executions(None, Env())  # control: all succeeded, no error


def _typed_results(page: str) -> list[str]:
    """Cells of the sgsim columns of a page's "Reproduced values" tables that hold a typed number."""
    body = page.split("## Reproduced values", 1)[-1].split("\n## ", 1)[0] if "## Reproduced values" in page else ""
    typed, header = [], None
    for line in body.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif not set(line) <= set("|-: "):
            for name, cell in zip(header, cells, strict=False):
                if "sgsim" in name and re.search(r"\d", re.sub(r"\{run\}`[^`]*`|\$[^$]*\$", "", cell)):
                    typed.append(cell)
    return typed


def test_the_paper_pages_quote_the_run_and_type_no_result():
    pages = sorted((ROOT / "docs" / "papers").glob("*.md"))
    assert len(pages) >= 3
    for page in pages:
        assert _typed_results(page.read_text()) == [], page.name
    # control: a typed number in an sgsim column is found
    typed = "## Reproduced values\n\n| quantity | paper | sgsim |\n|---|---|---|\n| error | 0.39 | 0.142 ± 0.023 |\n"
    assert _typed_results(typed) == ["0.142 ± 0.023"]
