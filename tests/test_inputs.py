"""Inputs checked before any work: each defect found by trying sgsim, pinned by a test.

Every test here failed on main before the fix it pins; each asserts the parameter named by the
error (``exc.parameter``), so that a message naming the wrong argument fails too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import sgsim
from sgsim import targets
from sgsim.theory import exact_law


def named(exc_info, parameter):
    assert exc_info.value.parameter == parameter, f"{exc_info.value!r} names {exc_info.value.parameter!r}"


def test_complex_arrays_are_rejected_not_truncated():
    # np.array(1 + 1j, float) drops the imaginary part with a mere ComplexWarning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TypeError, match="complex") as info:
            sgsim.sample("mixture_25", "sgld", 10, step_size=0.01, init=np.array([1 + 1j, 0.0]))
        named(info, "init")
        with pytest.raises(TypeError, match="complex") as info:
            targets.gaussian_mixture([[1 + 0j, 0.0]], variance=0.1)
        named(info, "means")
        with pytest.raises(TypeError, match="complex") as info:
            targets.mixture_25().with_gradient_noise(np.eye(2) * (1 + 1j))
        named(info, "cov")
    # negative control: the same values without an imaginary part pass
    sgsim.sample("mixture_25", "sgld", 10, step_size=0.01, init=np.array([1.0, 0.0]))


@pytest.mark.parametrize(
    ("build", "parameter"),
    [
        (lambda: targets.gaussian_mixture([[1e200, 0.0]], variance=0.1), "means"),
        (lambda: targets.gaussian_mixture([[1.0, 0.0]], variance=1e-320), "variance"),
        (lambda: targets.exponential_mixture([], []), "rates"),
        (lambda: targets.logistic_regression(dataset="heart", prior_scale=1e200), "prior_scale"),
        (lambda: targets.logistic_regression(dataset="heart", prior_scale=1e-200), "prior_scale"),
    ],
)
def test_extreme_finite_target_inputs_are_named(build, parameter):
    # they gave NaN or infinite parameters, or raw OverflowError / ZeroDivisionError
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError) as info:
            build()
    named(info, parameter)


def test_moderate_target_inputs_still_build():
    # negative control of the test above: large but representable values are fine
    t = targets.gaussian_mixture([[1e10, 0.0]], variance=1e-10)
    assert np.all(np.isfinite(t.params[2]))
    assert np.all(targets.logistic_regression(dataset="heart", prior_scale=1e100).extras["prior_precision"] > 0)


def test_an_unstable_law_is_refused_once_it_leaves_the_floats():
    # 1 - 1.5 * 2 = -2 per step: the variance grows 4x per step and overflows near step 512
    law = exact_law.sgld_law([[2.0]], [0.0], np.full(100, 1.5))  # exact, if huge: returned
    assert np.isfinite(law.cov[-1, 0, 0]) and law.cov[-1, 0, 0] > 1e50
    with pytest.raises(ValueError, match="unstable") as info:
        exact_law.sgld_law([[2.0]], [0.0], np.full(2000, 1.5))
    named(info, "step_size")
    with pytest.raises(ValueError, match="unstable") as info:
        exact_law.preconditioned_sgd_law([[2.0]], [[1.0]], [[1.0]], np.full(2000, 1.5), 1.0)
    named(info, "lr")


def test_time_average_of_an_unstable_process_is_refused():
    # F = 2 has no stationary law: it returned 20.31
    with pytest.raises(ValueError, match="spectral radius") as info:
        exact_law.time_average_cov([[2.0]], [[0.5]], 10)
    named(info, "F")
    # negative control: a stable F, against the direct sum
    f, p, t = 0.5, 0.5, 10
    direct = (t * p + 2 * sum((t - k) * f**k * p for k in range(1, t))) / t**2
    assert exact_law.time_average_cov([[f]], [[p]], t)[0, 0] == pytest.approx(direct, rel=1e-14)


def test_numpy_scalars_are_accepted_for_integers_and_reals():
    r = sgsim.sample(
        "mixture_25", "sgld", np.int64(100), n_chains=np.int32(2), seed=np.int64(3), step_size=np.float32(0.01),
        thin=np.int64(10), burn_in=np.int16(5),
    )  # fmt: skip
    assert r.posterior["theta"].shape == (2, 10, 2)


def test_a_step_whose_noise_overflows_is_refused_before_sampling():
    # step 1e308: alpha^2 V overflows; it was refused half-way, blaming grad_noise_cov
    noisy = targets.mixture_25().with_gradient_noise(0.5)
    with pytest.raises(ValueError, match="overflows") as info:
        sgsim.sample(noisy, "sgld", 1, step_size=1e308, temperature=0.0)
    named(info, "step_size")
    with pytest.raises(ValueError, match="overflows") as info:
        sgsim.sample(noisy, "sgld", schedule=sgsim.schedules.Schedule([0.1, 1e308], [1.0, 1.0]))
    named(info, "step_size")
    # negative control: a step whose noise is finite runs (0.05, below SGLD's stability limit of
    # 2 / L = 0.06 on this mixture, whose components have variance 0.03; 0.1 is now refused for it)
    sgsim.sample(noisy, "sgld", 1, step_size=0.05, temperature=0.0)


def test_a_schedule_given_as_arrays_is_checked_at_every_step_before_sampling(monkeypatch):
    # the noise is checked in pieces of _CHECK_VALUES / d steps: a bad step past two whole pieces is
    # refused all the same, before any step runs (the run itself would find it, later)
    from sgsim import driver, sampling

    noisy = targets.mixture_25().with_gradient_noise(0.5)
    n = 2 * max(driver._BLOCK_STEPS, driver._CHECK_VALUES // noisy.dim) + 3
    steps = np.full(n, 0.01)
    steps[-1] = 1e308

    def no_run(*args, **kwargs):
        raise AssertionError("the run started")

    with monkeypatch.context() as m:
        m.setattr(sampling, "execute", no_run)
        with pytest.raises(ValueError, match="overflows") as info:
            sgsim.sample(noisy, "sgld", schedule=sgsim.schedules.Schedule(steps, np.ones(n)), storage="final")
    named(info, "step_size")
    # negative control: the same schedule with its last step finite runs
    steps[-1] = 0.01
    r = sgsim.sample(noisy, "sgld", schedule=sgsim.schedules.Schedule(steps, np.ones(n)), storage="final")
    assert np.all(np.isfinite(r.posterior["theta"].values))


def test_a_runs_blocks_take_the_noise_factors_its_check_computed():
    # a schedule given as arrays that fits one piece of the check keeps the factors it computed, and
    # each block of the run is a slice of them: the same values as computed afresh for the block
    import dataclasses

    from sgsim import driver

    n = 3000
    steps = 0.01 + 0.005 * np.sin(np.arange(n))
    temps = np.where(np.arange(n) % 7 == 0, 0.0, np.linspace(0.1, 1.0, n))  # some steps without noise
    noisy = targets.mixture_25().with_gradient_noise(0.5)
    run = driver._prepare(noisy, "sgld", None, schedule=sgsim.schedules.Schedule(steps, temps))
    assert run.checked_noise is not None
    fresh = dataclasses.replace(run, checked_noise=None)
    for k0, k1 in ((0, 1), (0, n), (1234, 2001), (n - 1, n)):
        kept, computed = run.noise(run.schedule.block(k0, k1)), fresh.noise(run.schedule.block(k0, k1))
        for i in (0, 3, 4):  # sd, noisy, temperatures
            assert np.array_equal(kept[i], computed[i])
    # negative control: another block's factors are not these
    assert not np.array_equal(run.noise(run.schedule.block(0, 10))[0], fresh.noise(run.schedule.block(10, 20))[0])
    # a formula schedule is checked on its first block only: nothing is kept
    assert driver._prepare(noisy, "sgld", 100, step_size=0.01).checked_noise is None


def test_booleans_are_not_strings():
    with pytest.raises(TypeError) as info:
        sgsim.sample("mixture_25", "sgld", 10, step_size=0.01, noise_correction="no")
    named(info, "noise_correction")


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "sgsim.cli", *args], capture_output=True, text=True, **kw)


def test_an_unwritable_out_fails_before_sampling(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    t = time.perf_counter()
    proc = _cli("run", "--target", "mixture_25", "--method", "sgld", "--n-steps", "10000000", "--step-size", "0.01",
                "--out", str(blocker / "sub"), "--quiet")  # fmt: skip
    assert proc.returncode == 2
    assert "--out" in proc.stderr and "Traceback" not in proc.stderr
    assert time.perf_counter() - t < 30  # 10^7 steps were never run


@pytest.mark.skipif(sys.platform != "linux", reason="sends SIGINT to a child process")
def test_ctrl_c_stops_within_a_block_and_writes_nothing(tmp_path):
    out = tmp_path / "run"
    # 64 chains x 10^8 steps: hours of work
    proc = subprocess.Popen(
        [sys.executable, "-m", "sgsim.cli", "run", "--target", "mixture_25", "--method", "sgld", "--n-steps",
         "100000000", "--n-chains", "64", "--step-size", "0.01", "--storage", "final", "--out", str(out), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # a process started in the background inherits SIGINT ignored: the child must not
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        time.sleep(8)  # import, compile, then sampling
        assert proc.poll() is None
        t = time.perf_counter()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        stopped = time.perf_counter() - t
    finally:
        if proc.poll() is None:  # failed: leave no process running behind the test
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert stopped < 10  # a block of 64 chains x 10^4 steps takes well under a second
    assert not (out / "result.nc").exists()
    assert [p.name for p in out.iterdir()] == [] if out.exists() else True
    assert os.path.isdir(tmp_path)


def test_draws_that_cannot_fit_in_memory_are_refused_before_sampling():
    # 64 chains x 10^8 draws x 2 dims = 95 GiB: a raw numpy MemoryError before
    with pytest.raises(ValueError, match="GiB") as info:
        sgsim.sample("mixture_25", "sgld", 100_000_000, n_chains=64, step_size=0.01)
    named(info, "thin")
    # negative control: the same run keeping only the final states is accepted (not run here)
    run, _ = sgsim.sampling.prepare("mixture_25", "sgld", 100_000_000, step_size=0.01, storage="final")
    assert run.n_draws == 1
