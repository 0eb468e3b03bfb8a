"""The ``Examples`` sections of the public docstrings run, and print what they say they print.

Each module's examples run with the standard library's doctest (``ELLIPSIS`` and
``NORMALIZE_WHITESPACE``) in a fresh namespace, so every example imports what it uses. A module
listed here must have examples, and every one must pass; the functions listed keep theirs. A
negative control checks that the runner reports a wrong expected output.
"""

from __future__ import annotations

import doctest
import importlib
import io
import types

import pytest

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

# module -> the public functions whose docstrings hold an ``Examples`` section
EXAMPLES = {
    "sgsim.sampling": ["sample", "replay"],
    "sgsim.targets": ["get"],
    "sgsim.targets.gaussian": ["linear_gaussian"],
    "sgsim.schedules": ["cyclical"],
    "sgsim.diagnostics": ["ess", "rhat", "mode_coverage"],
    "sgsim.results": ["to_inference_data"],
    "sgsim.io": ["write_result", "read_result"],
    "sgsim.theory.ou": ["sgd_cov"],
    "sgsim.theory.kl": ["optimal_lr"],
    "sgsim.theory.iasg": ["relative_error", "feasibility"],
    "sgsim.theory.momentum": ["momentum_autocorrelation_times"],
    "sgsim.theory.fokker_planck": ["stationarity_residual"],
    "sgsim.theory.exact_law": ["sgld_law", "stationary_covariance"],
    "sgsim.sweep": ["grid", "run_sweep"],
    "sgsim.gpu.kernels": ["supported"],
    "sgsim.gpu.runner": ["philox_key", "device_bytes"],
}


def run_doctests(obj, name: str | None = None) -> tuple[doctest.TestResults, str]:
    """Run the doctests of a module (or of one object) in a fresh namespace; the results and the report."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=FLAGS, verbose=False)
    report = io.StringIO()
    for test in finder.find(obj, name, globs={}):
        runner.run(test, out=report.write)
    return doctest.TestResults(runner.failures, runner.tries), report.getvalue()


@pytest.mark.parametrize("module", sorted(EXAMPLES))
def test_examples_pass(module):
    results, report = run_doctests(importlib.import_module(module))
    assert results.attempted > 0, f"{module} has no examples left"
    assert results.failed == 0, report


@pytest.mark.parametrize(
    ("module", "function"), [(module, function) for module, names in sorted(EXAMPLES.items()) for function in names]
)
def test_function_keeps_its_examples(module, function):
    obj = getattr(importlib.import_module(module), function)
    doc = obj.__doc__ or ""
    assert "\n    Examples\n    --------\n" in doc, f"{module}.{function} lost its Examples section"
    tests = doctest.DocTestFinder().find(obj, f"{module}.{function}", globs={})
    assert sum(len(t.examples) for t in tests) > 0, f"{module}.{function} has no doctest examples"


def test_runner_reports_a_wrong_output():
    # negative control: the helper that runs sgsim's modules counts a wrong expected output, and an
    # example that raises, as failures, and reports them
    fake = types.ModuleType("fake_examples")
    # the examples import nothing: the helper runs each docstring in a fresh namespace
    source = """
def add(a, b):
    \"\"\"Add.

    >>> 1 + 1
    3
    >>> print(1 + 2)
    3
    >>> undefined_name + 1
    \"\"\"
    return a + b
"""
    exec(compile(source, "fake_examples.py", "exec"), fake.__dict__)
    results, report = run_doctests(fake)
    assert results.attempted == 3
    assert results.failed == 2
    assert "Expected:\n    3\nGot:\n    2" in report
    assert "NameError" in report
