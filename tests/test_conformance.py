"""The public algorithm record and the conformance kit (sgsim.algorithms, sgsim.testing).

The kit runs over every registered method (the parameter list is the registry itself, so a new
registration is checked without editing this file); each statistical check has a negative
control, the same sampler with its noise scale off by 5%, which the same check must reject. The
exact laws read off the compiled steps must equal the hand-written ones of sgsim.theory to 1e-12.
"""

import inspect
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import user_samplers  # registers psgld_diag, a sampler of one's own

import sgsim
from sgsim import schedules, theory
from sgsim.algorithms import (
    INDEPENDENT,
    METHODS,
    Algorithm,
    Method,
    NotAffineError,
    Option,
    affine_steps,
    check_bool,
    constant_schedule,
    exact_law,
    register,
    stay,
    unregister,
)
from sgsim.gpu.kernels import STEPS
from sgsim.integrators import sgld
from sgsim.io import write_result
from sgsim.testing import CHECKS, check_registry, check_sampler, gaussian_test, noise_scaled, registered, sample_size

TESTS = Path(__file__).resolve().parent
REGISTERED = sorted(METHODS)  # sgsim's own and psgld_diag, registered by the import above


# methods with a gradient estimator of their own (Algorithm.gradient: SGLD-CV, SVRG-LD) run on
# minibatch data targets, where the law checks are skipped; tests/test_control_variates.py checks
# their moments against the exact recursion of sgsim.theory.minibatch_law instead
MINIBATCH_ONLY = {n for n in REGISTERED if METHODS[n].algorithm.gradient is not None}
# the independent-chain methods the kit runs on its exact-gradient targets
CHAINS = [n for n in REGISTERED if METHODS[n].algorithm.coupling == INDEPENDENT and n not in MINIBATCH_ONLY]


def _result(report, check):
    return next(r for r in report.results if r.name == check)


@pytest.mark.parametrize("name", REGISTERED)
def test_the_kit_passes_every_registered_method(name):
    report = check_sampler(name).raise_for_failure()
    assert [r.name for r in report.results] == list(CHECKS)
    alg = METHODS[name].algorithm
    if name in MINIBATCH_ONLY:
        assert report.status("monte_carlo") == "skipped" and report.status("replay") == "passed", str(report)
    elif alg.coupling == INDEPENDENT:
        law = _result(report, "exact_law")
        if law.status == "passed":
            # affine on a linear-Gaussian target: its law was checked, and its stationary law where it claims one
            assert report.status("monte_carlo") == "passed", str(report)
            if alg.asymptotically_exact:
                assert report.status("consistency") == "passed", str(report)
        else:
            # not affine (an adaptive friction or preconditioner: SGNHT, pSGLD): no Gaussian law, so the
            # record must carry a NumPy oracle, and the compiled step is checked against it
            assert "not affine" in law.detail and alg.oracle is not None, str(report)
            assert report.status("oracle") == "passed", str(report)
    assert report.status("gpu_host") == ("passed" if name in GPU_METHODS else "skipped"), str(report)


# the methods the GPU path has a kernel for, from its own table of step fragments (checked through
# its host build, where a C++ compiler is found)
GPU_METHODS = (
    {n for n in CHAINS if METHODS[n].algorithm.step in STEPS} if shutil.which("g++") or shutil.which("c++") else set()
)


@pytest.mark.skipif(not GPU_METHODS, reason="no C++ compiler for the GPU kernel's host build")
def test_the_gpu_methods_are_read_from_the_gpu_paths_own_table():
    assert {"sgld", "csgld", "sghmc", "csghmc", "sgd", "iasg"} <= GPU_METHODS
    assert not GPU_METHODS & {"psgld_diag", "svgd"}


def _scaled_oracle(oracle, scale):
    # the record's oracle with its noise scaled (a negative control), of the same signature
    if len(inspect.signature(oracle).parameters) == 7:
        return lambda x, grad_u, z, a, k, options, t: oracle(x, grad_u, None if z is None else scale * z, a, k,
                                                             options, t)  # fmt: skip
    return lambda x, grad_u, z, a, k, options: oracle(x, grad_u, None if z is None else scale * z, a, k, options)


@pytest.mark.parametrize("name", CHAINS)
def test_the_kit_rejects_each_sampler_with_its_noise_scale_off_by_5_percent(name):
    # negative control of the two statistical checks: the noise sd x 1.05 (variance x 1.1025) is
    # detected with probability >= 0.999 by design (sample_size), here at 8-10 SE against 5.2-5.4
    with registered(noise_scaled(name, 1.05)) as wrong:
        report = check_sampler(wrong, checks=("exact_law", "consistency", "monte_carlo", "gpu_host"), law_of=name)
    if report.status("exact_law") == "skipped":
        # no Gaussian law (not affine): the oracle check is the sampler's check, and it rejects an
        # oracle whose noise is 5% too large
        alg = METHODS[name].algorithm
        assert alg.oracle is not None, str(report)
        bad = check_sampler(name, checks=("oracle",), oracle=_scaled_oracle(alg.oracle, 1.05))
        assert bad.status("oracle") == "failed", str(bad)
        return
    assert report.status("monte_carlo") == "failed", str(report)
    # the GPU kernel's host build draws the same declared noise: where it runs, it is rejected too
    assert report.status("gpu_host") in ("failed", "skipped"), str(report)
    assert (report.status("gpu_host") == "failed") == (name in GPU_METHODS), str(report)
    if METHODS[name].algorithm.asymptotically_exact:
        assert report.status("consistency") == "failed", str(report)


def test_the_oracle_check_compares_the_compiled_step_with_numpy_and_rejects_a_wrong_one():
    report = check_sampler("psgld_diag", checks=("oracle",), p=[1.0, 2.0])
    assert report.status("oracle") == "passed", str(report)

    def wrong(x, grad_u, z, a, k, options):  # negative control: the noise 5% too large
        return user_samplers.oracle(x, grad_u, None if z is None else 1.05 * z, a, k, options)

    report = check_sampler("psgld_diag", checks=("oracle",), oracle=wrong, p=[1.0, 2.0])
    assert report.status("oracle") == "failed", str(report)
    assert check_sampler("sgld", checks=("oracle",)).status("oracle") == "skipped"


# ----------------------------------------------------------------------------- derived laws


P = np.array([[2.0, 0.3], [0.3, 0.5]])
B = np.array([0.2, -0.1])
V = np.array([[0.4, 0.1], [0.1, 0.2]])
GAUSS = sgsim.targets.linear_gaussian(P, B, grad_noise_cov=V)
A_SGD = np.array([[1.0, 0.3], [0.3, 0.5]])
C_SGD = np.array([[1.5, -0.4], [-0.4, 0.8]])
S, N = 4, 100
QUAD = sgsim.targets.ou_quadratic(A_SGD, C_SGD, S, N)
M0, S0 = np.array([1.0, -0.5]), np.array([[0.3, 0.05], [0.05, 0.2]])
K = 150


def close(derived, written):
    # relative to the largest entry of each: the derivation reads differences of computed steps
    for a, b in ((derived.mean, written.mean), (derived.cov, written.cov)):
        assert a.shape == b.shape
        assert np.abs(a - b).max() <= 1e-12 * np.abs(b).max()


def test_derived_law_of_sgld_and_sgd_equals_the_written_one():
    close(
        exact_law("sgld", GAUSS, K, step_size=0.05, temperature=0.7, init_mean=M0, init_cov=S0),
        theory.sgld_law(P, B, 0.05, 0.7, V, M0, S0, n_steps=K),
    )
    close(
        exact_law("sgld", GAUSS, K, step_size=0.05, temperature=0.0, init_mean=M0, init_cov=S0),
        theory.sgd_law(P, B, 0.05, V, M0, S0, n_steps=K),
    )
    # with the gradient-noise correction (the injected covariance reduced by alpha^2 V)
    close(
        exact_law("sgld", GAUSS, K, step_size=0.05, noise_correction=True, init_mean=M0, init_cov=S0),
        theory.sgld_law(P, B, 0.05, 1.0, V, M0, S0, noise_correction=True, n_steps=K),
    )


def test_the_law_comparison_rejects_a_law_one_part_in_a_thousand_off():
    # negative control of close(): the written law at a temperature 0.1% higher
    derived = exact_law("sgld", GAUSS, K, step_size=0.05, temperature=0.7, init_mean=M0, init_cov=S0)
    with pytest.raises(AssertionError):
        close(derived, theory.sgld_law(P, B, 0.05, 0.7 * 1.001, V, M0, S0, n_steps=K))


def test_derived_law_of_sghmc_equals_the_written_one():
    close(
        exact_law("sghmc", GAUSS, K, step_size=0.05, friction=0.3, gamma_hat=0.1, init_mean=M0, init_cov=S0),
        theory.sghmc_law(P, B, 0.05, 0.3, 1.0, V, M0, S0, gamma_hat=0.1, n_steps=K),
    )


@pytest.mark.parametrize("name", ["csgld", "csghmc"])
def test_derived_law_of_the_cyclical_methods_equals_the_written_one_on_their_schedule(name):
    sched = schedules.cyclical(0.05, K, n_cycles=3, explore_fraction=0.3)
    blk = sched.block(0, K)
    derived = exact_law(name, GAUSS, schedule=sched, init_mean=M0, init_cov=S0)
    if name == "csgld":
        written = theory.sgld_law(P, B, blk.step_size, blk.temperature, V, M0, S0)
    else:
        written = theory.sghmc_law(P, B, blk.step_size, 0.1, blk.temperature, V, M0, S0)
    close(derived, written)


def test_derived_laws_of_the_constant_sgd_family_equal_the_written_ones():
    h = np.array([[1.2, 0.3], [0.3, 0.8]])
    e = np.array([[0.3, 0.0], [0.1, 0.2]])
    lr = 0.5
    close(
        exact_law("sgd", QUAD, K, step_size=lr, preconditioner=h, init_mean=M0, init_cov=S0),
        theory.preconditioned_sgd_law(A_SGD, C_SGD, h, lr, S, M0, S0, n_steps=K),
    )
    close(
        exact_law("sgfs", QUAD, K, step_size=lr, preconditioner=h, injected_cov=e @ e.T, init_mean=M0, init_cov=S0),
        theory.sgfs_law(A_SGD, C_SGD, h, e, lr, S, M0, S0, n_steps=K),
    )
    close(
        exact_law("momentum_sgd", QUAD, K, step_size=0.3, damping=0.4, init_mean=M0, init_cov=S0),
        theory.momentum_sgd_law(A_SGD, C_SGD, 0.3, 0.4, S, M0, S0, n_steps=K),
    )
    # Welling and Teh's scale: drift (epsilon / 2) grad U, noise variance epsilon T = SGLD at alpha = epsilon / 2
    close(
        exact_law("sgld_wt", GAUSS, K, step_size=0.1, init_mean=M0, init_cov=S0),
        theory.sgld_law(P, B, 0.05, 1.0, V, M0, S0, n_steps=K),
    )


def test_derived_law_of_iasg_gives_the_written_covariance_of_a_window_mean():
    # from the stationary law of SGD, the mean of a window of T iterates has the covariance of a
    # stationary VAR(1)'s time average ([SGDVI] §6.2): the derived law's average row at the window's end
    lr, window = 0.5, 12
    step = sgsim.dynamics.preconditioned_sgd_linear(A_SGD, C_SGD, np.eye(2), np.array([lr]), S)
    f = step.f0 + lr * step.f1
    q = sum(c[..., 0] * m for c, m in zip(step.noise.coef, step.noise.mats, strict=True))
    p = theory.stationary_covariance(f, q)
    law = exact_law("iasg", QUAD, window, step_size=lr, window=window, init_cov=p)
    written = theory.time_average_cov(f, p, window)
    assert np.abs(law.cov[-1, 2:, 2:] - written).max() <= 1e-12 * np.abs(written).max()
    assert np.abs(law.mean[-1]).max() == 0.0


def test_the_derived_law_of_a_users_sampler_is_its_preconditioned_langevin_law():
    # psgld_diag with p = (1, 2): theta' = (I - a diag(p) P) theta + a p b + N(0, 2 a diag(p)), no gradient noise
    p = np.array([1.0, 2.0])
    a = 0.04
    maps = affine_steps("psgld_diag", GAUSS, 3, step_size=a, p=p)
    assert np.allclose(maps.transition[0], np.eye(2) - a * np.diag(p) @ P, rtol=0, atol=1e-15)
    assert np.allclose(maps.shift[0], a * p * B, rtol=0, atol=1e-15)
    assert np.allclose(maps.noise_cov[0], 2 * a * np.diag(p), rtol=0, atol=1e-15)


def test_a_step_that_is_not_affine_is_named():
    # on the 25-Gaussian mixture the gradient is not linear: no Gaussian law to derive
    with pytest.raises(NotAffineError, match="not affine"):
        affine_steps("sgld", "mixture_25", 2, step_size=0.05)
    with pytest.raises(ValueError, match="interacting") as info:
        affine_steps("svgd", GAUSS, 2, step_size=0.05)
    assert info.value.parameter == "method"


# ----------------------------------------------------------------------------- the statistical helpers


def test_sample_size_meets_both_error_rates():
    # false fails: exact Gaussian draws, 400 repetitions at false_fail = 0.05: the family-wise
    # rate is at most 0.05 (Bonferroni), so at most 20 +- 4.4 (binomial SD) rejections, bound 5 SD
    rng = np.random.default_rng(11)
    mean, cov = np.array([0.5, -1.0]), np.array([[1.0, 0.4], [0.4, 2.0]])
    chol = np.linalg.cholesky(cov)
    fails = sum(
        not gaussian_test(mean + rng.standard_normal((300, 2)) @ chol.T, mean, cov, false_fail=0.05)[0]
        for _ in range(400)
    )
    assert fails <= 20 + 5 * np.sqrt(400 * 0.05 * 0.95)
    # misses: a variance 20% too large, at the sample size for min_error = 0.2 and miss = 0.1, is
    # detected in at least 90% of 200 repetitions (less 5 binomial SD)
    n = sample_size(5, false_fail=0.05, min_error=0.2, miss=0.1)
    wrong = np.sqrt(1.2) * chol
    caught = sum(
        not gaussian_test(mean + rng.standard_normal((n, 2)) @ wrong.T, mean, cov, false_fail=0.05)[0]
        for _ in range(200)
    )
    assert caught >= 200 * 0.9 - 5 * np.sqrt(200 * 0.9 * 0.1)
    with pytest.raises(ValueError) as info:
        sample_size(5, false_fail=1.5)
    assert info.value.parameter == "false_fail"


# ----------------------------------------------------------------------------- registration


def test_a_throwaway_sampler_is_picked_up_by_the_registry_kit():
    # SGLD's own step under a new name, registered here: the registry-wide kit checks it with no
    # list of methods edited anywhere
    throwaway = Method("throwaway_sgld", sgld.SGLD, constant_schedule, ("step_size", "temperature"), "a copy")
    register(throwaway)
    try:
        reports = check_registry(checks=("exact_law", "consistency"))
        assert reports["throwaway_sgld"].ok
        assert reports["throwaway_sgld"].status("consistency") == "passed"
    finally:
        unregister("throwaway_sgld")
    assert "throwaway_sgld" not in METHODS
    with pytest.raises(ValueError, match="already registered"):
        register(sgsim.integrators.METHODS["sgld"])
    with pytest.raises(ValueError, match="own methods"):
        unregister("sgld")


def _record(**changes):
    fields = dict(
        name="mine",
        summary="a sampler",
        coupling=INDEPENDENT,
        state=("theta",),
        options={},
        units="drift step_size * grad U",
        step=(stay, sgld.update),
        constants=lambda options: sgsim.algorithms.NO_CONSTANTS,
        noise=lambda block, target, options: None,
    )
    fields.update(changes)
    return Algorithm(**fields)


def no_noise_update(x, theta, g, z, noisy, a, k, consts):
    for i in range(theta.shape[0]):
        theta[i] = theta[i] - a * g[i]


def three_params(x, theta, g):
    theta[0] = g[0]


def returns_value(x, theta, g, z, noisy, a, k, consts):
    return theta[0] + z[0]


@pytest.mark.parametrize(
    "changes, part",
    [
        ({"name": "My Sampler"}, "name"),
        ({"coupling": "both"}, "coupling"),
        ({"state": ("velocity", "theta")}, "state"),
        ({"options": {"eta": 0.1}}, "option 'eta'"),
        ({"options": {"step_size": Option(0.1, check_bool, "x")}}, "option 'step_size'"),
        ({"options": {"flag": Option(3, check_bool, "a flag")}}, "fails its own check"),
        ({"units": ""}, "units"),
        ({"step": sgld.update}, "step"),
        ({"step": (stay, three_params)}, "step (update)"),
        ({"step": (stay, no_noise_update)}, "never reads its noise"),
        ({"step": (stay, returns_value)}, "returns a value"),
        ({"outputs": ("average",)}, "outputs"),
    ],
)
def test_a_malformed_record_is_named_when_it_is_built(changes, part):
    with pytest.raises(TypeError, match=part.replace("(", r"\(").replace(")", r"\)")):
        _record(**changes)


def test_an_option_without_validation_is_refused():
    with pytest.raises(TypeError, match="every option needs its validation"):
        Option(0.1, None, "friction")


def test_a_step_whose_source_cannot_be_read_says_where_to_define_it():
    namespace: dict = {}
    exec("def update(x, theta, g, z, noisy, a, k, consts):\n    theta[0] = z[0]\n", namespace)
    with pytest.raises(TypeError, match="define the step in a file or a notebook cell"):
        _record(step=(stay, namespace["update"]))


def test_constants_must_be_named():
    alg = _record(constants=lambda options: (1.0,))
    register(Method("unnamed_consts", alg, constant_schedule, ("step_size",), "x"))
    try:
        with pytest.raises(TypeError, match="NamedTuple"):
            sgsim.sample(GAUSS, "unnamed_consts", 5, step_size=0.1)
    finally:
        unregister("unnamed_consts")


# ----------------------------------------------------------------------------- replay of a sampler of one's own


def test_replay_of_a_users_sampler_in_a_fresh_process(tmp_path):
    r = sgsim.sample(GAUSS, "psgld_diag", 300, n_chains=3, seed=4, step_size=0.05, p=[1.0, 2.0])
    assert r.attrs["sgsim_config"].count('"method_module": "user_samplers"') == 1
    path = write_result(r, tmp_path / "mine.nc")
    script = textwrap.dedent(
        f"""
        import sys, warnings
        warnings.simplefilter("ignore")
        import numpy as np, sgsim
        from sgsim.io import read_result
        try:
            sgsim.replay({str(path)!r})
        except ValueError as exc:
            print("REFUSED", exc.parameter, exc)
        again = sgsim.replay({str(path)!r}, allow=["user_samplers"])
        first = read_result({str(path)!r})
        print("SAME", np.array_equal(again.posterior["theta"].values, first.posterior["theta"].values))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "REFUSED method" in out.stdout and "import user_samplers" in out.stdout
    assert "SAME True" in out.stdout


def test_replay_names_what_it_cannot_rebuild(tmp_path):
    r = sgsim.sample(GAUSS, "psgld_diag", 20, n_chains=2, seed=4, step_size=0.05)
    path = write_result(r, tmp_path / "mine.nc")
    config = r.attrs["sgsim_config"]
    # a module that cannot be imported, even when allowed
    r.attrs["sgsim_config"] = config.replace('"method": "psgld_diag"', '"method": "gone"').replace(
        '"method_module": "user_samplers"', '"method_module": "no_such_samplers"'
    )
    with pytest.raises(ValueError, match="no_such_samplers") as info:
        sgsim.replay(r, allow=["no_such_samplers"])
    assert info.value.parameter == "method"
    # a method registered here by another module than the one that made the result
    r.attrs["sgsim_config"] = config.replace('"method_module": "user_samplers"', '"method_module": "elsewhere"')
    with pytest.raises(ValueError, match="not the same sampler"):
        sgsim.replay(r)
    with pytest.raises(ValueError) as info:
        sgsim.replay(path, allow=["not a module"])
    assert info.value.parameter == "allow"


def test_the_readme_sampler_runs_as_printed(tmp_path, monkeypatch, capsys):
    # the step's source must be readable, so the README says to save the code as a module
    text = (TESTS.parent / "README.md").read_text()
    section = text[text.index("### A sampler of your own") :]
    start = section.index("```python") + len("```python")
    code = section[start : section.index("```", start)]
    (tmp_path / "readme_sampler.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        __import__("readme_sampler")
        out = capsys.readouterr().out
        assert "conformance of 'sgld_fixed_p'" in out and "failed" not in out, out
        assert out.count("passed") >= 6
    finally:
        unregister("sgld_fixed_p")
        sys.modules.pop("readme_sampler", None)


def test_a_step_edited_after_registration_runs_as_registered(tmp_path, monkeypatch):
    # a session that edits its sampler's file after building the record (or saves it half
    # written) and then runs: the loop splices the source read when the record was built; before,
    # it read the file again and spliced whatever lines now stood where the function had been
    import importlib

    from sampler_modules import scaled_sgld

    source = scaled_sgld("edited_sgld")
    edited = "# edited: two lines more, and a drift twice as large\n\n" + source.replace(
        "a * consts.scale * g[i]", "2.0 * a * consts.scale * g[i]"
    )
    (tmp_path / "edited_samplers.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    kw = dict(n_chains=2, seed=3, step_size=0.05)
    try:
        importlib.import_module("edited_samplers")
        (tmp_path / "edited_samplers.py").write_text(edited)
        run = sgsim.sample("standard_gaussian", "edited_sgld", 50, **kw).posterior["theta"].values
        plain = sgsim.sample("standard_gaussian", "sgld", 50, **kw).posterior["theta"].values
        assert run.tobytes() == plain.tobytes()  # scale 1: SGLD's bits, as registered
        # the control: a record built from the edited file takes the edited step
        (tmp_path / "edited_samplers2.py").write_text(edited.replace("'edited_sgld'", "'edited_sgld2'"))
        importlib.import_module("edited_samplers2")
        doubled = sgsim.sample("standard_gaussian", "edited_sgld2", 50, **kw).posterior["theta"].values
        assert doubled.tobytes() != plain.tobytes()
    finally:
        for name in ("edited_sgld", "edited_sgld2"):
            if name in METHODS:
                unregister(name)
        sys.modules.pop("edited_samplers", None)
        sys.modules.pop("edited_samplers2", None)
