"""A target of one's own: built by hand with sgsim.jit, checked at construction, sampled, replayed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import arviz as az
import numpy as np
import pytest
import user_banana as ub

import sgsim
from sgsim import cli, targets
from sgsim.io import write_result

TESTS = Path(__file__).resolve().parent


def moment_z_scores(result, exact_mean, exact_second, alpha):
    """|estimate - exact| / allowed for E x_i and E x_i^2, pooled over chains.

    allowed = 4 standard errors (the function's sd over sqrt of its ESS, by ArviZ) plus SGLD's
    stationary bias, first order in the step: alpha (1 + |exact|) bounds it here (for a
    standard Gaussian it is alpha / 2 on the variance; measured here at alpha = 0.02, 0.01 and
    0.005 it stays below that and halves with alpha). A ratio above 1 rejects.
    """
    theta = result.posterior["theta"].values
    ratios = []
    for i in range(theta.shape[-1]):
        for f, exact in ((theta[..., i], exact_mean[i]), (theta[..., i] ** 2, exact_second[i][i])):
            ess = float(az.ess(f))
            se = float(np.std(f)) / np.sqrt(ess)
            ratios.append(abs(float(np.mean(f)) - exact) / (4.0 * se + alpha * (1.0 + abs(exact))))
    return np.array(ratios)


def test_a_banana_built_by_hand_samples_its_exact_moments():
    t = ub.banana(0.5)
    alpha = 0.01
    r = sgsim.sample(t, "sgld", 400_000, n_chains=8, seed=1, step_size=alpha, thin=10, burn_in=2000)
    assert np.all(moment_z_scores(r, t.mean, t.second_moment, alpha) <= 1.0)
    # negative control: the moments of another banana (b = 0.6) are rejected by the same test
    other = ub.banana(0.6)
    assert np.any(moment_z_scores(r, other.mean, other.second_moment, alpha) > 1.0)


@pytest.mark.parametrize(
    ("kwargs", "error", "parameter", "match"),
    [
        ({"grad": ub.returning_grad}, ValueError, "grad_u", "returned a value"),
        ({"grad": ub.sign_error_grad}, ValueError, "grad_u", "finite differences"),
        ({"grad": ub.factor_error_grad}, ValueError, "grad_u", "finite differences"),
        ({"grad": ub.one_argument_grad}, TypeError, "grad_u", r"must accept \(theta, params, out\)"),
        ({"dim": 3}, ValueError, "init_low", r"shape"),
        ({"mean": [0.0, 0.5, 0.0]}, ValueError, "mean", r"shape \(2,\)"),
        ({"grad_noise_cov": np.eye(3)}, ValueError, "grad_noise_cov", "shape"),
        ({"init_high": [-3.0, 3.0]}, ValueError, "init_high", "exceed"),
    ],
)
def test_a_broken_user_target_is_rejected_at_construction(kwargs, error, parameter, match):
    with pytest.raises(error, match=match) as info:
        ub.banana(0.5, **kwargs)
    assert info.value.parameter == parameter
    assert len(str(info.value)) < 600  # no page of numba typing trace


def test_the_check_passes_every_shipped_target_built_by_hand():
    # negative control of the test above: the shipped families' own functions, rebuilt as a
    # user would (no factory), pass the construction checks
    from dataclasses import replace

    for name in ("mixture_25", "mixture_3x3", "exponential_mixture", "standard_gaussian"):
        t = targets.get(name)
        replace(t, spec=None)
    lr = targets.logistic_regression(dataset="heart", batch_size=32)
    targets.check_functions(lr)
    targets.check_functions(targets.linear_gaussian([[2.0, 0.5], [0.5, 1.0]], [0.3, -0.2]))


def test_defaults_for_noise_and_box():
    t = targets.Target("banana", 2, ub.grad_u, ub.log_density, (0.5,))
    assert np.array_equal(t.grad_noise_cov, np.zeros((2, 2)))
    assert np.array_equal(t.init_low, -np.ones(2)) and np.array_equal(t.init_high, np.ones(2))


def test_a_user_target_by_reference_runs_and_replays(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(TESTS))
    t = targets.get("user_banana:banana", b=0.5)
    assert t.spec.factory == "user_banana:banana"
    r = sgsim.sample(t, "csgld", 2000, n_chains=2, seed=5, step_size=0.05, n_cycles=2)
    path = write_result(r, tmp_path / "r.nc")
    # the file names code outside sgsim: replay imports and calls it only when allowed
    with pytest.raises(ValueError, match="user_banana:banana") as refused:
        sgsim.replay(path)
    assert refused.value.parameter == "allow"
    again = sgsim.replay(path, allow=["user_banana"])
    assert np.array_equal(r.posterior["theta"].values, again.posterior["theta"].values)
    with pytest.raises(ValueError, match="cannot import") as info:
        targets.get("no_such_module_here:banana")
    assert info.value.parameter == "target"


def test_sgsim_run_takes_a_user_target_and_factory_arguments(tmp_path, capsys):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "sgsim.cli", "run", "--target", "user_banana:banana", "--target-arg", "b=0.5",
         "--method", "sgld", "--n-steps", "3000", "--step-size", "0.02", "--n-chains", "2", "--seed", "1",
         "--out", str(tmp_path / "banana"), "--quiet"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "sgld on banana" in proc.stdout and (tmp_path / "banana" / "result.nc").exists()
    rc = cli.main(["run", "--target", "gaussian_mixture", "--target-arg", "means=[[-1, 0], [1, 0]]",
                   "--target-arg", "variance=0.1", "--method", "sgld", "--n-steps", "500", "--step-size", "0.01",
                   "--seed", "2", "--out", str(tmp_path / "mix"), "--quiet"])  # fmt: skip
    assert rc == 0 and "of 2 modes" in capsys.readouterr().out
    rc = cli.main(["run", "--target", "logistic_regression", "--target-arg", "dataset=heart", "--method", "sgld",
                   "--n-steps", "200", "--step-size", "0.001", "--seed", "3", "--out", str(tmp_path / "lr"),
                   "--quiet"])  # fmt: skip
    assert rc == 0 and "logistic" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["run", "--target", "gaussian_mixture", "--target-arg", "oops", "--method", "sgld", "--n-steps",
                  "10", "--step-size", "0.01", "--out", str(tmp_path / "bad")])  # fmt: skip
    assert "KEY=VALUE" in capsys.readouterr().err


def test_the_sgsim_script_finds_a_user_module_in_the_working_directory(tmp_path):
    # README: `sgsim run --target mybanana:banana` from the folder that holds mybanana.py
    script = Path(sys.executable).with_name("sgsim")
    if not script.exists():
        pytest.skip("the sgsim script is not installed beside this Python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    args = [str(script), "run", "--target", "user_banana:banana", "--method", "sgld", "--n-steps", "200",
            "--step-size", "0.02", "--seed", "1", "--out", str(tmp_path / "b"), "--quiet"]  # fmt: skip
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=TESTS)
    assert proc.returncode == 0, proc.stderr
    # negative control: from another folder the module is not found, and the error says so
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode != 0 and "cannot import 'user_banana'" in proc.stderr


def test_the_readme_banana_runs_as_printed():
    text = (TESTS.parent / "README.md").read_text()
    section = text[text.index("### A compiled target of your own") :]
    start = section.index("```python") + len("```python")
    code = section[start : section.index("```", start)]
    assert len([line for line in code.splitlines() if line.strip()]) < 20  # lines of code
    scope: dict = {}
    exec(compile(code, "<README>", "exec"), scope)  # noqa: S102  (the README's own example)
    theta = scope["idata"].posterior["theta"].values
    assert theta.shape == (4, 20_000, 2)
    assert abs(theta[..., 1].mean() - 0.5) < 0.2  # E y = b = 0.5; a loose check that it sampled the banana
