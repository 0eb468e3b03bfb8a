"""The layering rules of STYLE.md, checked on the imports of every module of sgsim/ and paper_figures/.

Each file is parsed with ``ast``; every import (at module level, inside functions, and
``importlib.import_module("...")`` / ``__import__("...")`` with a literal name) is resolved to the
dotted name it targets, relative imports included. ``paper_figures/`` is installed as
``sgsim._paper_figures``; both spellings resolve to ``paper_figures``. A name that a package
re-exports (``from sgsim import sample``) resolves to the module that defines it
(``sgsim.sampling.sample``), read from the package's ``__init__.py``.

:func:`check` takes a path and a source text, so that the negative controls below can feed it
synthetic violations: a rule that cannot fail is caught.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIGURES = "paper_figures"
FIGURES_INSTALLED = "sgsim._paper_figures"
RUNTIME = ("sgsim.integrators", "sgsim.sampling", "sgsim.results", "sgsim.experiments", "sgsim.cli", "sgsim.torch")


@dataclass(frozen=True)
class Import:
    """One import: the dotted name it targets (None: a relative import leaving its top package)."""

    target: str | None
    line: int
    text: str
    relative: bool
    run_time: bool  # inside a function, or importlib.import_module / __import__ at any level


@dataclass(frozen=True)
class Rule:
    """A layering rule: which modules it constrains and which of their imports break it."""

    name: str
    text: str
    applies: Callable[[str], bool]
    breaks: Callable[[str, Import], bool]


def within(name: str | None, *prefixes: str) -> bool:
    """``name`` is one of ``prefixes`` or inside one of them (dotted components, not characters)."""
    return name is not None and any(name == p or name.startswith(p + ".") for p in prefixes)


def _is_pure(name: str | None) -> bool:
    top = (name or "").partition(".")[0]
    return top in {"numpy", "scipy", "__future__"} or top in sys.stdlib_module_names or within(name, "sgsim._validate")


RULES = (
    Rule(
        "theory-imports-no-runtime",
        "theory/ imports nothing of the runtime (integrators, sampling, results, experiments, cli, torch)",
        lambda m: within(m, "sgsim.theory"),
        lambda m, imp: within(imp.target, *RUNTIME, "torch", FIGURES),
    ),
    Rule(
        "targets-and-datasets-import-no-sampler",
        "targets/ and datasets.py import no sampler (integrators, sampling)",
        lambda m: within(m, "sgsim.targets", "sgsim.datasets"),
        lambda m, imp: within(imp.target, "sgsim.integrators", "sgsim.sampling"),
    ),
    Rule(
        "integrators-import-no-experiments-cli-figures",
        "integrators/ import neither experiments, cli nor paper_figures",
        lambda m: within(m, "sgsim.integrators"),
        lambda m, imp: within(imp.target, "sgsim.experiments", "sgsim.cli", FIGURES),
    ),
    Rule(
        "diagnostics-imports-no-sampler",
        "diagnostics.py reads results only: it imports no integrator and not sampling",
        lambda m: m == "sgsim.diagnostics",
        lambda m, imp: within(imp.target, "sgsim.integrators", "sgsim.sampling"),
    ),
    Rule(
        "experiments-import-no-cli-figures",
        "experiments/ import no cli and no paper_figures",
        lambda m: within(m, "sgsim.experiments"),
        lambda m, imp: within(imp.target, "sgsim.cli", FIGURES),
    ),
    Rule(
        "only-the-cli-finds-the-figures-at-run-time",
        "sgsim/ never imports paper_figures, except sgsim/cli.py at run time (importlib, or inside a function)",
        lambda m: within(m, "sgsim"),
        lambda m, imp: within(imp.target, FIGURES) and not (m == "sgsim.cli" and imp.run_time),
    ),
    Rule(
        "torch-is-imported-by-nothing-else",
        "sgsim/torch/ (an optional extra) is imported by nothing else in sgsim/",
        lambda m: within(m, "sgsim") and not within(m, "sgsim.torch"),
        lambda m, imp: within(imp.target, "sgsim.torch"),
    ),
    Rule(
        "torch-backend-imports-no-experiment",
        "sgsim/torch/'s backend (all but sgsim/torch/experiments/) imports no experiment, of its own or of "
        "sgsim.experiments, and no private integrator module",
        lambda m: within(m, "sgsim.torch") and not within(m, "sgsim.torch.experiments"),
        lambda m, imp: (
            within(imp.target, "sgsim.torch.experiments", "sgsim.experiments")
            or imp.target.startswith("sgsim.integrators._")
        ),
    ),
    Rule(
        "dynamics-is-pure",
        "dynamics.py imports only numpy, scipy, the standard library and sgsim._validate",
        lambda m: m == "sgsim.dynamics",
        lambda m, imp: not _is_pure(imp.target),
    ),
    # not in STYLE.md's list, but what installing paper_figures/ as sgsim._paper_figures needs
    Rule(
        "figures-import-themselves-relatively",
        "paper_figures/ imports its own modules relatively, never leaving the package (it is installed "
        "as sgsim._paper_figures, not as a top-level package)",
        lambda m: within(m, FIGURES),
        lambda m, imp: imp.target is None or (within(imp.target, FIGURES) and not imp.relative),
    ),
)


def module_name(path: str) -> tuple[str, bool]:
    """``("sgsim.theory.x", False)`` for ``sgsim/theory/x.py``; ``("sgsim.theory", True)`` for its ``__init__``."""
    parts = list(Path(path).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def _normalise(name: str) -> str:
    if within(name, FIGURES_INSTALLED):
        return FIGURES + name[len(FIGURES_INSTALLED) :]
    return name


@functools.cache
def _reexports(package: str) -> dict[str, str]:
    """Names that ``package/__init__.py`` imports from elsewhere -> the dotted name they come from."""
    init = ROOT.joinpath(*package.split("."), "__init__.py")
    if not init.is_file():
        return {}
    out = {}
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom):
            base = _relative_base(package, True, node.level, node.module)
            for alias in node.names:
                if base is not None and alias.name != "*":
                    out[alias.asname or alias.name] = f"{base}.{alias.name}"
    return out


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _resolve(name: str) -> str:
    """Follow a package's re-export (``sgsim.sample`` -> ``sgsim.sampling.sample``), once."""
    name = _normalise(name)
    package, _, attr = name.rpartition(".")
    if package and within(package, "sgsim") and not _is_module(name):
        return _normalise(_reexports(package).get(attr, name))
    return name


def _relative_base(module: str, is_package: bool, level: int, target: str | None) -> str | None:
    """Base of ``from <level dots><target> import ...`` in ``module``; None if it leaves the top package."""
    if level == 0:
        return target
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 >= len(parts):
        return None
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{target}" if target else base


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, source: str):
        self.module, self.is_package, self.source = module, is_package, source
        self.depth = 0
        self.found: list[Import] = []

    def _add(self, node: ast.AST, target: str | None, relative: bool, run_time: bool = False) -> None:
        text = " ".join((ast.get_source_segment(self.source, node) or "").split())
        resolved = None if target is None else _resolve(target)
        self.found.append(Import(resolved, node.lineno, text, relative, run_time or self.depth > 0))

    def _function(self, node) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(node, alias.name, False)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = _relative_base(self.module, self.is_package, node.level, node.module)
        for alias in node.names:
            target = base if base is None or alias.name == "*" else f"{base}.{alias.name}"
            self._add(node, target, node.level > 0)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        first = node.args[0] if node.args else None
        if name in ("import_module", "__import__") and isinstance(first, ast.Constant) and isinstance(first.value, str):
            if not first.value.startswith("."):
                self._add(node, first.value, False, run_time=True)
        self.generic_visit(node)


def imports(path: str, source: str) -> list[Import]:
    """Every import in ``source``, the text of the module at ``path`` (relative to the repository root)."""
    module, is_package = module_name(path)
    visitor = _Imports(module, is_package, source)
    visitor.visit(ast.parse(source, filename=path))
    return visitor.found


def check(path: str, source: str) -> list[tuple[str, str]]:
    """``(rule name, message)`` for each import of ``source`` (the module at ``path``) that breaks a rule."""
    module, _ = module_name(path)
    out = []
    for imp in imports(path, source):
        for rule in RULES:
            if rule.applies(module) and rule.breaks(module, imp):
                where = "a module outside its top-level package" if imp.target is None else imp.target
                out.append((rule.name, f"{path}:{imp.line}: `{imp.text}` imports {where}; rule: {rule.text}"))
    return out


def _files() -> list[str]:
    files = sorted(ROOT.glob("sgsim/**/*.py")) + sorted(ROOT.glob(f"{FIGURES}/**/*.py"))
    return [p.relative_to(ROOT).as_posix() for p in files]


@functools.cache
def _violations() -> tuple[tuple[str, str], ...]:
    return tuple(v for path in _files() for v in check(path, (ROOT / path).read_text(encoding="utf-8")))


# --------------------------------------------------------------------------- the rules, on the code


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_layering_rule(rule):
    found = [message for name, message in _violations() if name == rule.name]
    assert not found, f"{len(found)} import(s) break the rule:\n" + "\n".join(found)


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_rule_applies_to_some_module(rule):
    # a renamed folder would make a rule vacuous
    assert any(rule.applies(module_name(path)[0]) for path in _files())


def test_imports_are_found_and_resolved():
    files = _files()
    assert "sgsim/cli.py" in files and f"{FIGURES}/__init__.py" in files and "sgsim/theory/exact_law.py" in files
    found = {(imp.target, imp.run_time) for imp in imports("sgsim/cli.py", (ROOT / "sgsim/cli.py").read_text())}
    assert ("sgsim.__version__", False) in found  # from . import __version__, at module level
    assert ("sgsim.sampling.sample", True) in found  # inside _cmd_run
    found = {
        imp.target for imp in imports("sgsim/theory/exact_law.py", (ROOT / "sgsim/theory/exact_law.py").read_text())
    }
    assert {"sgsim.dynamics", "sgsim.dynamics.LinearStep", "numpy"} <= found
    fig2 = imports(f"{FIGURES}/cyclical_fig2_parallel.py", (ROOT / FIGURES / "cyclical_fig2_parallel.py").read_text())
    assert f"{FIGURES}._density" in {imp.target for imp in fig2 if imp.relative}


# --------------------------------------------------------------------------- negative and positive controls


@pytest.mark.parametrize(
    ("path", "source", "rule"),
    [
        ("sgsim/theory/x.py", "from ..sampling import sample\n", "theory-imports-no-runtime"),
        ("sgsim/theory/x.py", "def f():\n    import sgsim.integrators.sgld\n", "theory-imports-no-runtime"),
        ("sgsim/theory/x.py", "from .. import sample\n", "theory-imports-no-runtime"),  # re-exported by sgsim
        ("sgsim/theory/__init__.py", "from ..results import build\n", "theory-imports-no-runtime"),
        ("sgsim/theory/x.py", "import torch\n", "theory-imports-no-runtime"),
        ("sgsim/targets/x.py", "from ..integrators import get_method\n", "targets-and-datasets-import-no-sampler"),
        ("sgsim/datasets.py", "import sgsim.sampling as s\n", "targets-and-datasets-import-no-sampler"),
        (
            "sgsim/integrators/x.py",
            "from ..experiments import cyclical_synthetic\n",
            "integrators-import-no-experiments-cli-figures",
        ),
        (
            "sgsim/integrators/x.py",
            "import importlib\nimportlib.import_module('sgsim._paper_figures')\n",
            "integrators-import-no-experiments-cli-figures",
        ),
        ("sgsim/diagnostics.py", "from .integrators._base import METHODS\n", "diagnostics-imports-no-sampler"),
        ("sgsim/diagnostics.py", "def f():\n    from . import sampling\n", "diagnostics-imports-no-sampler"),
        ("sgsim/experiments/x.py", "from .. import cli\n", "experiments-import-no-cli-figures"),
        (
            "sgsim/io.py",
            "def f():\n    from paper_figures import FIGURES\n",
            "only-the-cli-finds-the-figures-at-run-time",
        ),
        ("sgsim/cli.py", "from ._paper_figures import FIGURES\n", "only-the-cli-finds-the-figures-at-run-time"),
        ("sgsim/cli.py", "import paper_figures\n", "only-the-cli-finds-the-figures-at-run-time"),
        ("sgsim/sampling.py", "from .torch import SGLD\n", "torch-is-imported-by-nothing-else"),
        ("sgsim/dynamics.py", "from .schedules import Schedule\n", "dynamics-is-pure"),
        ("sgsim/dynamics.py", "import numba\n", "dynamics-is-pure"),
        (f"{FIGURES}/x.py", "from paper_figures import _common\n", "figures-import-themselves-relatively"),
        (f"{FIGURES}/x.py", "from .. import sampling\n", "figures-import-themselves-relatively"),
    ],
)
def test_a_violation_is_reported(path, source, rule):
    # the offending import is the last line of each source; the message names file, line and import
    lines = source.splitlines()
    found = [message for name, message in check(path, source) if name == rule]
    assert found, f"{rule} missed {source!r} in {path}"
    assert found[0].startswith(f"{path}:{len(lines)}: `{lines[-1].strip()}` imports "), found[0]


@pytest.mark.parametrize(
    ("path", "source"),
    [
        (
            "sgsim/theory/x.py",
            "from .. import dynamics, schedules\nfrom .._validate import real\nfrom .._jit import jit\n",
        ),
        ("sgsim/theory/x.py", "from .distances import gaussian_w2\nimport numpy as np\n"),
        ("sgsim/cli.py", "import importlib\nimportlib.import_module('sgsim._paper_figures')\n"),
        ("sgsim/cli.py", "def f():\n    from paper_figures import describe_mode\n"),
        (
            "sgsim/dynamics.py",
            "import math\nimport numpy as np\nfrom scipy import linalg\nfrom ._validate import real\n",
        ),
        ("sgsim/torch/__init__.py", "from .optim import SGLD\nfrom ..dynamics import sgld_noise\n"),
        ("sgsim/targets/x.py", "from ..schedules import Schedule\nfrom .._jit import jit\n"),
        (f"{FIGURES}/x.py", "from . import _density\nfrom ._common import Section\nfrom sgsim.experiments import x\n"),
    ],
)
def test_allowed_imports_are_not_reported(path, source):
    assert check(path, source) == []
