"""No unstable run returned as healthy: curvature bounds, stability limits checked before work, and
the divergence rule on the target's own scale (issue 24, item 1)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import sgsim
from sgsim import targets
from sgsim.algorithms import StepSizeWarning
from sgsim.integrators import METHODS
from sgsim.sampling import prepare
from sgsim.targets.control_variates import hessian
from sgsim.testing import _case


def _rho(m: np.ndarray) -> float:
    return float(np.max(np.abs(np.linalg.eigvals(m))))


# ----------------------------------------------------------------------------- the derived limits


def test_each_limit_is_where_the_companion_matrix_leaves_the_unit_circle():
    # the recursions on U = L x^2 / 2 (deterministic part), 0.1% below and above each limit
    lam, eta, c = 3.0, 0.3, 1.0 / 8
    cases = {
        "sgld": (2.0 / lam, lambda a: np.array([[1.0 - a * lam]])),
        "sghmc": (2.0 * (2.0 - eta) / lam, lambda a: np.array([[1.0, 1.0], [-a * lam, 1.0 - eta - a * lam]])),
        # SGNHT at friction factor f = 1 - h xi -> 1 (xi -> 0): the limit 4 / L of every f
        "sgnht": (4.0 / lam, lambda a: np.array([[1.0 - a * lam, 1.0 - 1e-9], [-a * lam, 1.0 - 1e-9]])),
        # SGHMC+R with K = I: position step c v, friction eta c
        "sghmc_repulsive": (
            2.0 * (2.0 - eta * c) / (c * c * lam),
            lambda a: np.array([[1.0, c], [-a * c * lam, 1.0 - eta * c - a * c * c * lam]]),
        ),
        # SVGD and SGLD+R with K = I: z <- (1 - a c L) z
        "svgd": (2.0 / (c * lam), lambda a: np.array([[1.0 - a * c * lam]])),
    }
    for name, (limit, step) in cases.items():
        assert _rho(step(0.999 * limit)) < 1.0, name
        assert _rho(step(1.001 * limit)) > 1.0, name  # the negative control: just beyond, it expands
    # the records give the same limits on a target of curvature bound lam
    t = targets.linear_gaussian([[lam, 0.0], [0.0, 1.0]])
    opts = {"friction": eta, "n_particles": 8, "normalise": True}
    for name, (limit, _) in cases.items():
        got, rule = METHODS[name].algorithm.step_limit(t, opts)
        assert got == pytest.approx(limit, rel=1e-12), name
        assert "L = 3" in rule
    # SGNHT at friction factor f: stable exactly while a L < 2 (1 + f), so no f in (-1, 1) passes 4
    for f in (-0.5, 0.0, 0.5, 0.99):
        limit = 2.0 * (1.0 + f) / lam
        assert _rho(np.array([[1 - 0.999 * limit * lam, f], [-0.999 * limit * lam, f]])) < 1.0
        assert _rho(np.array([[1 - 1.001 * limit * lam, f], [-1.001 * limit * lam, f]])) > 1.0


@pytest.mark.parametrize("method", ["sgld", "sghmc"])
def test_the_compiled_step_contracts_below_its_limit_and_expands_beyond(method):
    # noise-free (T = 0) runs on U = x^2 / 2 from x = 1: the compiled step itself, on both sides
    t = targets.standard_gaussian(1)
    kw = dict(temperature=0.0, init=[1.0], seed=0, divergence_bound=None, step_check="ignore")
    kw.update({"friction": 0.3} if method == "sghmc" else {})
    limit = METHODS[method].algorithm.step_limit(t, {"friction": 0.3})[0]
    below = sgsim.sample(t, method, 2000, step_size=0.99 * limit, **kw).posterior["theta"].values
    assert np.max(np.abs(below[:, -10:])) < 1e-3
    beyond = sgsim.sample(t, method, 2000, step_size=1.01 * limit, **kw).posterior["theta"].values
    assert np.max(np.abs(beyond[:, -10:])) > 1e3


def test_constant_sgd_and_the_splittings_read_their_limits_from_the_one_hook():
    # every record states its limit through step_limit: exact on a Gaussian of known precision,
    # from the curvature bound elsewhere (a logistic regression, whose Hessian at 0 is the bound)
    gauss = targets.linear_gaussian([[3.0, 0.5], [0.5, 1.0]])
    lam = float(np.linalg.eigvalsh(gauss.extras["precision"])[-1])
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 2))
    logistic = targets.logistic_regression(x, (x[:, 0] > 0).astype(float), batch_size=20, intercept=False)
    bound = logistic.curvature_bound()
    for target, l_max, n in ((gauss, lam, 1.0), (logistic, bound, 200.0)):
        cases = {
            "sgd": 2.0 * n / l_max,
            "iasg": 2.0 * n / l_max,
            "momentum_sgd": 2.0 * (2.0 - 0.1) * n / l_max,
            "sgld_wt": 4.0 / l_max,
            "baoab": 4.0 / l_max,
            "obabo": 4.0 / l_max,
        }
        for name, limit in cases.items():
            opts = {"preconditioner": None, "n_data": n, "damping": 0.1, "friction": 1.0}
            got, rule = METHODS[name].algorithm.step_limit(target, opts)
            assert got == pytest.approx(limit, rel=1e-12), name
    # a preconditioner scales the bound by lambda_max(H) where only a bound is known; on a
    # Gaussian the limit is 2 N / lambda_max(H A), exactly
    h = np.diag([2.0, 0.5])
    got, _ = METHODS["sgd"].algorithm.step_limit(logistic, {"preconditioner": h, "n_data": 200.0})
    assert got == pytest.approx(2.0 * 200.0 / (2.0 * bound), rel=1e-12)
    got, _ = METHODS["sgd"].algorithm.step_limit(gauss, {"preconditioner": h, "n_data": 1.0})
    assert got == pytest.approx(2.0 / np.max(np.linalg.eigvals(h @ gauss.extras["precision"]).real), rel=1e-12)
    # and the driver refuses a constant rate beyond it before any work, accepts one just inside
    limit = 2.0 * 200.0 / bound
    with pytest.raises(ValueError, match="sgd's stability limit") as info:
        prepare(logistic, "sgd", 50, step_size=1.001 * limit)
    assert info.value.parameter == "step_size"
    prepare(logistic, "sgd", 50, step_size=0.999 * limit)


# ----------------------------------------------------------------------------- curvature bounds


def test_curvature_bounds_are_exact_for_gaussians_and_bound_the_hessian_elsewhere():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 3))
    prec = a @ a.T + np.eye(3)
    assert targets.linear_gaussian(prec).curvature_bound() == pytest.approx(np.linalg.eigvalsh(prec)[-1], 1e-12)
    # a mixture: the Hessian E_r[P_k] - Cov_r[P_k (theta - mu_k)] never exceeds max_k 1 / s_k^2, and
    # reaches it at the stiff mode's centre; the variance-weighted mean 1 / s^2 would not bound it
    mix = targets.gaussian_mixture([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]], [0.05, 0.5, 1.0], [0.2, 0.5, 0.3])
    bound = mix.curvature_bound()
    assert bound == pytest.approx(20.0, 1e-12)
    worst = max(np.linalg.eigvalsh(hessian(mix, x))[-1] for x in rng.uniform(-3.0, 6.0, (300, 2)))
    assert worst <= bound * (1 + 1e-6)
    # (the other modes' responsibilities at the centre, ~1e-5, and the differences' 1e-8 set the tolerance)
    assert np.linalg.eigvalsh(hessian(mix, [0.0, 0.0]))[-1] == pytest.approx(bound, rel=1e-4)
    assert worst > float(np.sum(mix.extras["weights"] / mix.extras["variance"]))  # the control
    # logistic regression: the Hessian at 0 is the bound, elsewhere below it
    X = rng.standard_normal((60, 3))
    y = (X[:, 0] + 0.5 * rng.standard_normal(60) > 0).astype(float)
    lr = targets.logistic_regression(X, y)
    assert np.linalg.eigvalsh(hessian(lr, np.zeros(lr.dim)))[-1] == pytest.approx(lr.curvature_bound(), rel=1e-7)
    for x in rng.normal(0.0, 2.0, (30, lr.dim)):
        assert np.linalg.eigvalsh(hessian(lr, x))[-1] <= lr.curvature_bound() * (1 + 1e-7)
    # softmax regression: Böhning's bound holds at every point, attained for two classes
    for k in (2, 4):
        sm = targets.softmax_regression(X, rng.integers(0, k, 60), n_classes=k)
        top = max(np.linalg.eigvalsh(hessian(sm, x))[-1] for x in rng.normal(0.0, 3.0, (20, sm.dim)))
        assert top <= sm.curvature_bound() * (1 + 1e-7)
    # nothing known, and a declared bound
    assert targets.get("exponential_mixture").curvature_bound() is None
    declared = targets.linear_gaussian(np.eye(2))
    assert type(declared).curvature_bound(_with_extras(declared, curvature_bound=7.0)) == 7.0
    with pytest.raises(ValueError) as info:
        _with_extras(declared, curvature_bound=-1.0).curvature_bound()
    assert info.value.parameter == "curvature_bound"


def _with_extras(target, **extra):
    from dataclasses import replace

    return replace(target, extras={**target.extras, **extra})


# ----------------------------------------------------------------------------- the issue's three runs


def test_the_issues_unstable_runs_are_refused_or_marked():
    # 1. SGLD on the standard Gaussian at 2.02 > 2: refused before work, naming step_size and the limit
    with pytest.raises(ValueError, match=r"stability limit 2 .* on 60 of 60 steps") as info:
        sgsim.sample("standard_gaussian", "sgld", 60, n_chains=4, seed=0, step_size=2.02)
    assert info.value.parameter == "step_size"
    # the rule alone (the check bypassed) stops it too; the old bound, 100, let it through
    with pytest.raises(sgsim.DivergenceError) as err:
        sgsim.sample("standard_gaussian", "sgld", 60, n_chains=4, seed=0, step_size=2.02, step_check="ignore")
    assert "of the method's stability limit" in str(err.value) and "reduce the step size" in str(err.value)
    old = sgsim.sample("standard_gaussian", "sgld", 60, n_chains=4, seed=0, step_size=2.02, step_check="ignore",
                       divergence_bound=100.0)  # fmt: skip
    assert np.max(np.abs(old.posterior["theta"].values)) > 18.0  # what it returned as healthy
    # 2. logistic regression at step 10
    lr = targets.logistic_regression(dataset="heart")
    with pytest.raises(ValueError, match="stability limit") as info:
        sgsim.sample(lr, "sgld", 200, n_chains=2, seed=0, step_size=10.0)
    assert info.value.parameter == "step_size"
    with pytest.raises(sgsim.DivergenceError):
        sgsim.sample(lr, "sgld", 200, n_chains=2, seed=0, step_size=10.0, step_check="ignore")
    # 3. cSGHMC on the 25-Gaussian mixture at 0.1: below the limit 0.114, its excursions (to |theta|
    # 66, mode sd 0.17) are marked
    kw = dict(step_size=0.1, n_cycles=1, explore_fraction=0.25, friction=0.1, seed=0)
    with pytest.warns(RuntimeWarning, match="diverged"):
        r = sgsim.sample("mixture_25", "csghmc", 2000, n_chains=4, on_divergence="mark", **kw)
    assert r.constant_data["diverged_at"].values.any()
    free = sgsim.sample("mixture_25", "csghmc", 2000, n_chains=4, divergence_bound=283.4, **kw)  # the old bound
    assert np.max(np.abs(free.posterior["theta"].values)) > 60.0


def test_a_schedule_that_crosses_the_limit_briefly_runs_and_often_warns():
    # cSGLD at the paper's 0.09 on the 25-Gaussian mixture: beyond 2 / 33.3 = 0.06 on the first 39%
    # of each cycle, by design; it runs without a word
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sgsim.sample("mixture_25", "csgld", 200, n_chains=1, step_size=0.09, n_cycles=2, seed=0)
    # a schedule beyond the limit on most of its steps warns, with the count; on all of them, refuses
    steps = np.where(np.arange(200) < 150, 0.09, 0.01)
    with pytest.warns(StepSizeWarning, match="150 of 200 steps"):
        sgsim.sample("mixture_25", "sgld", schedule=sgsim.schedules.Schedule(steps, 1.0), seed=0, on_divergence="mark")
    with pytest.raises(ValueError, match="200 of 200 steps"):
        sgsim.sample("mixture_25", "sgld", schedule=sgsim.schedules.Schedule(np.full(200, 0.09), 1.0), seed=0)
    # a decay over a long schedule is counted on sampled blocks, and says so
    long = sgsim.schedules.polynomial_decay(0.14, 0.05, 30_000_000)  # below 0.06 from step 2.2e7
    with pytest.warns(StepSizeWarning, match="about .* of 30000000 steps"):
        sgsim.driver.prepare("mixture_25", "sgld", schedule=long, storage="final")


# ----------------------------------------------------------------------------- healthy runs


@pytest.mark.parametrize("method", sorted(METHODS))
def test_healthy_runs_of_every_method_are_neither_refused_nor_stopped(method):
    # each method at its own example (its kit target and step; ensembles of 16 particles), two
    # seeds: no refusal, no warning, no divergence, and the draws well inside the bound
    target, opts = _case(METHODS[method], None, {})
    if method == "psgld_gamma":
        opts["step_size"] = 0.02  # at 0.05 a chain of this kit example leaves the target at step ~1800
    members = dict(n_chains=2) if METHODS[method].algorithm.coupling == "independent" else dict(n_particles=16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for seed in (0, 1):
            r = sgsim.sample(target, method, 1000, seed=seed, **members, **opts)
            # the run's bound: the target's, five times it for constant SGD (its law is not the target's)
            assert np.max(np.abs(r.posterior["theta"].values)) < 0.5 * float(r.attrs["divergence_bound"])


def test_a_hot_replica_ladder_widens_the_bound():
    # reSGLD's replica at tau = 400 spreads with sd 20 on the standard Gaussian: the bound is the
    # target's at the hottest rung (20 sqrt(400) = 400), and the run is not stopped; the control,
    # the bound at T = 1 (20), stops the same run
    t = targets.standard_gaussian(2)
    kw = dict(seed=0, n_particles=4, step_size=0.002, ladder=[1.0, 5.0, 50.0, 400.0])
    r = sgsim.sample(t, "resgld", 20000, **kw)
    assert float(r.attrs["divergence_bound"]) == pytest.approx(400.0)
    assert np.max(np.abs(r.posterior["theta"].values[..., 3, :])) > 40.0  # the hot rung goes far
    with pytest.raises(sgsim.DivergenceError):
        sgsim.sample(t, "resgld", 20000, divergence_bound=t.divergence_bound(1.0), **kw)


# ----------------------------------------------------------------------------- user targets


@sgsim.jit
def _shifted_grad(theta, params, out):
    out[0] = theta[0] - params[0]


@sgsim.jit
def _shifted_log_density(theta, params):
    return -0.5 * (theta[0] - params[0]) ** 2


@sgsim.jit
def _student_grad(theta, params, out):
    nu = params[0]
    out[0] = (nu + 1.0) * theta[0] / (nu + theta[0] * theta[0])


@sgsim.jit
def _student_log_density(theta, params):
    nu = params[0]
    return -0.5 * (nu + 1.0) * np.log(1.0 + theta[0] * theta[0] / nu)


def test_a_user_target_with_mass_30_sd_from_its_box_is_not_stopped():
    far = targets.Target("far", 1, _shifted_grad, _shifted_log_density, (30.0,))  # box [-1, 1], no scale
    assert far.divergence_bound() == 1e4  # the fallback
    r = sgsim.sample(far, "sgld", 2000, n_chains=2, step_size=0.5, seed=0)
    assert abs(float(r.posterior["theta"].values[:, 1000:].mean()) - 30.0) < 0.5
    # the control: the old rule, ten times the box, stopped it
    with pytest.raises(sgsim.DivergenceError, match="divergence_bound 10"):
        sgsim.sample(far, "sgld", 2000, n_chains=2, step_size=0.5, seed=0, divergence_bound=10.0)
    # declared, the scale gives the tight rule, which still lets the chain reach its mass
    declared = targets.Target("far", 1, _shifted_grad, _shifted_log_density, (30.0,), extras={"scale": (30.0, 1.0)})
    assert declared.divergence_bound() == 154.0  # 30 + 4 (1 + 30): the box is 31 from the mass
    sgsim.sample(declared, "sgld", 2000, n_chains=2, step_size=0.5, seed=0)
    with pytest.raises(ValueError) as info:
        targets.Target(
            "far", 1, _shifted_grad, _shifted_log_density, (30.0,), extras={"scale": (30.0, 0.0)}
        ).divergence_bound()
    assert info.value.parameter == "scale"


def test_a_heavy_tailed_user_target_never_trips_the_rule():
    # Student-t with 3 degrees of freedom: P(|t| > 10) = 1.4e-3, so the old rule (10x the box) tripped
    t3 = targets.Target("student_t3", 1, _student_grad, _student_log_density, (3.0,))
    for seed in (0, 1):
        r = sgsim.sample(t3, "sgld", 20_000, n_chains=4, seed=seed, step_size=0.2)
        assert np.max(np.abs(r.posterior["theta"].values)) > 10.0  # the tail is visited
    with pytest.raises(sgsim.DivergenceError):
        sgsim.sample(t3, "sgld", 20_000, n_chains=4, seed=0, step_size=0.2, divergence_bound=10.0)
