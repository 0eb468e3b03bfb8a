"""The stability limit's warning points at the caller's line, whatever sgsim calls lie between."""

import warnings

import pytest

import sgsim
from sgsim.algorithms import StepSizeWarning, affine_steps
from sgsim.driver import prepare


def _warned(call):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        call()
    return [w for w in seen if issubclass(w.category, StepSizeWarning)]


@pytest.mark.parametrize("entry", ["sample", "prepare", "affine_steps"])
def test_the_step_size_warning_names_the_callers_line(entry):
    # SGLD's limit on the standard Gaussian is 2 / L = 2: every one of the 20 steps at 2.5 is beyond
    # it, refused by default and a warning under step_check="warn" (no divergence bound: the run
    # grows by 1.5^20 ~ 3e3, finite)
    kw = dict(step_size=2.5, step_check="warn", divergence_bound=None)
    if entry == "sample":
        seen = _warned(lambda: sgsim.sample("standard_gaussian", "sgld", 20, n_chains=1, seed=0, **kw))
    elif entry == "prepare":
        seen = _warned(lambda: prepare("standard_gaussian", "sgld", 20, **kw))
    else:
        seen = _warned(lambda: affine_steps("sgld", "standard_gaussian", 3, step_size=2.5, step_check="warn"))
    assert len(seen) == 1
    # the line of this file that called sgsim (a fixed stacklevel, right for sample and prepare,
    # pointed into sgsim/algorithms.py from affine_steps, which reaches the check through more calls)
    assert seen[0].filename == __file__, seen[0].filename
    # the control: within the limit nothing warns
    assert not _warned(lambda: prepare("standard_gaussian", "sgld", 20, step_size=1.9, step_check="warn"))


def test_the_command_takes_step_check(tmp_path, capsys):
    from sgsim.cli import main

    argv = ["run", "--target", "standard_gaussian", "--method", "sgld", "--n-steps", "50", "--seed", "0",
            "--step-size", "2.5", "--out", str(tmp_path), "--quiet"]  # fmt: skip
    # beyond SGLD's limit 2 on a unit Gaussian: refused by default, naming the flag's parameter
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2 and "stability limit 2" in capsys.readouterr().err
    # run anyway: the divergence check stays on and stops the chain (status 1)
    assert main([*argv, "--step-check", "ignore"]) == 1
    assert "diverged" in capsys.readouterr().err


def test_the_constant_sgd_refusal_turned_warning_names_the_callers_line():
    # constant SGD's own limit, 2 / lambda_max(H A) = 1.75 on this quadratic (N = 100): 50 is beyond it
    # (a warning under step_check="warn", at this file's line), 0.5 is within it (the control)
    t = sgsim.targets.ou_quadratic([[1.0, 0.3], [0.3, 0.5]], [[1.5, -0.4], [-0.4, 0.8]], batch_size=4, n_data=100)
    kw = dict(step_size=50.0, step_check="warn")
    for call in (lambda: prepare(t, "sgd", 20, **kw), lambda: sgsim.sample(t, "sgd", 20, divergence_bound=None, **kw)):
        seen = _warned(call)
        assert len(seen) == 1 and "1.7536" in str(seen[0].message)
        assert seen[0].filename == __file__, seen[0].filename
    assert not _warned(lambda: prepare(t, "sgd", 20, step_size=0.5, step_check="warn"))
