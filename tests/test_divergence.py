"""Divergence beyond non-finite states: the default bound, what trips it, and what never does."""

from __future__ import annotations

import importlib.util
import re
import warnings

import numpy as np
import pytest

import sgsim
from sgsim import targets
from sgsim.io import read_result, write_result

THREE_MODES = targets.gaussian_mixture([[-1.0, 0.0], [1.0, 0.0], [0.0, 1.7]], variance=0.03)


def test_blown_up_chains_stop_with_the_chain_and_step_named():
    # cSGHMC with step 0.12 on the 25-Gaussian mixture: without the bound this run returned
    # draws up to 3e24 with every chain "healthy" (its cyclical small steps pull a chain back
    # before it overflows)
    kw = dict(step_size=0.12, friction=0.1, n_cycles=30, explore_fraction=0.25, seed=3)
    with pytest.raises(sgsim.DivergenceError) as info:
        sgsim.sample("mixture_25", "csghmc", 50_000, n_chains=4, **kw)
    err = info.value
    assert sorted(err.chains) == [0, 1, 2, 3]
    assert all(1 <= k <= 50_000 for k in err.chains.values())
    assert "chain 2 at step" in str(err) and "divergence_bound" in err.reasons[2]
    # negative control: with the bound off, the same run passes the non-finite check alone
    free = sgsim.sample("mixture_25", "csghmc", 50_000, n_chains=4, divergence_bound=None, thin=10, **kw)
    theta = free.posterior["theta"].values
    assert np.all(np.isfinite(theta))
    assert np.max(np.abs(theta)) > 1e6 * targets.mixture_25().divergence_bound()


def test_readme_style_csgld_on_three_modes_stops():
    # it reached 1e136 with "coverage 3/3" and R-hat 1.004 before the bound existed
    kw = dict(step_size=0.09, n_cycles=30, explore_fraction=0.25, seed=1)
    with pytest.raises(sgsim.DivergenceError) as info:
        sgsim.sample(THREE_MODES, "csgld", 50_000, n_chains=4, **kw)
    assert len(info.value.chains) == 4
    free = sgsim.sample(THREE_MODES, "csgld", 50_000, n_chains=4, divergence_bound=None, thin=100, **kw)
    assert np.nanmax(np.abs(free.posterior["theta"].values)) > 1e100  # what the bound now catches


def test_mark_keeps_the_healthy_chains():
    kw = dict(step_size=0.12, friction=0.1, n_cycles=3, explore_fraction=0.25, seed=3, on_divergence="mark")
    with pytest.warns(RuntimeWarning, match="diverged"):
        r = sgsim.sample("mixture_25", "csghmc", 2000, n_chains=8, **kw)
    at = r.constant_data["diverged_at"].values
    bad = at > 0
    assert 0 < bad.sum() < 8  # some chains, not all
    theta = r.posterior["theta"].values
    assert np.all(np.isfinite(theta[~bad]))
    assert not r.sample_stats["diverged"].values[~bad].any()
    for c in np.flatnonzero(bad):
        steps = r.sample_stats["step"].values[c]
        assert np.all(np.isnan(theta[c, steps >= at[c]]))
        assert np.all(np.isfinite(theta[c, steps < at[c]]))
    assert r.attrs["divergence_bound"] == pytest.approx(targets.mixture_25().divergence_bound())


def test_a_divergence_after_the_last_kept_draw_is_recorded():
    # chain 1 of this run diverges at step 708, after the one draw kept here (near step 170)
    kw = dict(step_size=0.12, friction=0.1, n_cycles=3, explore_fraction=0.25, seed=5, on_divergence="mark")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        r = sgsim.sample("mixture_25", "csghmc", 2000, n_chains=8, thin=10_000, **kw)  # one draw, near step 170
    steps = r.sample_stats["step"].values[0]
    at = r.constant_data["diverged_at"].values
    late = [c for c in np.flatnonzero(at) if at[c] > steps[-1]]
    assert late, "the run must have a chain that diverged after its last kept draw"
    for c in late:
        assert r.sample_stats["diverged"].values[c, -1]
        assert np.all(np.isfinite(r.posterior["theta"].values[c]))  # its draws stand
    healthy = at == 0
    assert not r.sample_stats["diverged"].values[healthy].any()


# Healthy settings of every shipped target: the papers' schedules where they give one, and
# steps well inside each target's stability range elsewhere. Each runs 3 seeds x 4 chains.
_LR = {ds: targets.logistic_regression(dataset=ds, batch_size=32) for ds in ("australian", "german", "heart")}
_JAX = importlib.util.find_spec("jax") is not None

HEALTHY = {
    "mixture_25": ("mixture_25", {"step_size": 0.09, "n_cycles": 30, "explore_fraction": 0.25},
                   {"step_size": 0.01, "n_cycles": 30, "explore_fraction": 0.25, "friction": 0.1}),
    "mixture_25 noisy": (targets.mixture_25().with_gradient_noise(1.0),
                         {"step_size": 0.09, "n_cycles": 30, "explore_fraction": 0.25, "noise_correction": True},
                         {"step_size": 0.01, "n_cycles": 30, "explore_fraction": 0.25, "friction": 0.1}),
    "mixture_3x3": ("mixture_3x3", {"step_size": 0.09, "n_cycles": 30, "explore_fraction": 0.25},
                    {"step_size": 0.02, "n_cycles": 30, "friction": 0.1}),
    "exponential_mixture": ("exponential_mixture", {"step_size": 0.3, "n_cycles": 30},
                            {"step_size": 0.05, "n_cycles": 30, "friction": 0.1}),
    "standard_gaussian": (targets.standard_gaussian(3), {"step_size": 0.5, "n_cycles": 30},
                          {"step_size": 0.1, "n_cycles": 30, "friction": 0.1}),
    "linear_gaussian": (targets.linear_gaussian([[2.0, 0.5], [0.5, 1.0]], [0.3, -0.2]),
                        {"step_size": 0.4, "n_cycles": 30}, {"step_size": 0.1, "n_cycles": 30, "friction": 0.1}),
    "ou_quadratic": (targets.ou_quadratic([[1.0, 0.3], [0.3, 2.0]], [[1.5, -0.4], [-0.4, 0.8]], 4, 10),
                     {"step_size": 0.05, "n_cycles": 30}, {"step_size": 0.01, "n_cycles": 30, "friction": 0.1}),
    "three modes": (THREE_MODES, {"step_size": 0.03, "n_cycles": 30, "explore_fraction": 0.25},
                    {"step_size": 0.01, "n_cycles": 30, "friction": 0.1}),
    **{
        f"logistic {ds}": (t, {"step_size": 2e-3, "n_cycles": 4}, {"step_size": 5e-4, "n_cycles": 4, "friction": 0.1})
        for ds, t in _LR.items()
    },
    # largest Hessian eigenvalues about 1.7e4 (fair, tau = 1) and 4e3 (optdigits at 0): steps
    # far inside 2 / lambda_max
    "linear fair": (targets.linear_regression(dataset="fair", batch_size=32),
                    {"step_size": 2e-5, "n_cycles": 4}, {"step_size": 5e-6, "n_cycles": 4, "friction": 0.1}),
    "softmax optdigits": (targets.softmax_regression(dataset="optdigits", batch_size=8),
                          {"step_size": 5e-5, "n_cycles": 4}, {"step_size": 1e-5, "n_cycles": 4, "friction": 0.1}),
    # a log density through JAX: mesquite's posterior, lambda_max about 7e2 on the unconstrained scale
    **({"reference mesquite": (
        targets.posteriordb.reference_posterior("mesquite-logmesquite_logvolume", batch_size=10),
        {"step_size": 1e-4, "n_cycles": 4}, {"step_size": 2e-5, "n_cycles": 4, "friction": 0.1},
    )} if _JAX else {}),
}  # fmt: skip
_DATA_TARGETS = ("logistic", "linear fair", "softmax", "reference")


def test_every_shipped_family_is_covered():
    built = [targets.get(t) if isinstance(t, str) else t for t, _, _ in HEALTHY.values()]
    needs_jax = set() if _JAX else {"reference_posterior"}
    assert {t.spec.factory for t in built} == set(targets.FACTORIES) - needs_jax


@pytest.mark.parametrize("method", ["csgld", "csghmc"])
@pytest.mark.parametrize("name", list(HEALTHY))
def test_healthy_long_runs_never_trip_the_default_bound(name, method):
    target, sgld_kw, sghmc_kw = HEALTHY[name]
    target = targets.get(target) if isinstance(target, str) else target
    kw = sgld_kw if method == "csgld" else sghmc_kw
    # the data targets' gradients cost up to 1e3 times a synthetic one's (softmax on optdigits
    # has 650 parameters): four cycles of 1,250 steps and two seeds there, 50,000 steps and three
    # seeds elsewhere
    data = name.startswith(_DATA_TARGETS)
    n_steps = 5_000 if data else 50_000
    bound = target.divergence_bound()
    reach = 0.0
    for seed in range(2 if data else 3):
        r = sgsim.sample(target, method, n_steps, n_chains=4, seed=seed, thin=10, **kw)  # raises if it trips
        reach = max(reach, float(np.max(np.abs(sgsim.results.flat_draws(r)))))
    # and not narrowly: the healthy chains stay within half of the bound (20 of the target's
    # standard deviations; they reach at most 9 of them here, the mixture of exponentials' left
    # tail in log z), so the test fails if the rule tightens towards real draws
    assert reach < 0.5 * bound
    # negative control: a bound inside the region the chains visit trips (the chains start at
    # the origin rather than in the initial box, which may reach beyond that region)
    origin = dict(n_chains=4, seed=0, init=np.zeros(target.dim), thin=10, **kw)
    visited = np.max(
        np.abs(sgsim.results.flat_draws(sgsim.sample(target, method, n_steps, divergence_bound=None, **origin)))
    )
    with pytest.raises(sgsim.DivergenceError):
        sgsim.sample(target, method, n_steps, divergence_bound=0.5 * float(visited), **origin)


def test_the_bound_is_validated_recorded_and_replayed(tmp_path):
    for bad in (0.0, -1.0, np.inf, "tight", True):
        with pytest.raises((ValueError, TypeError)) as info:
            sgsim.sample("mixture_25", "sgld", 10, step_size=0.01, divergence_bound=bad)
        assert info.value.parameter == "divergence_bound"
    with pytest.raises(ValueError, match="beyond divergence_bound") as info:
        sgsim.sample("mixture_25", "sgld", 10, step_size=0.01, init=[300.0, 0.0])
    assert info.value.parameter == "init"
    r = sgsim.sample("mixture_25", "sgld", 200, step_size=0.01, seed=4, divergence_bound=50.0)
    assert r.attrs["divergence_bound"] == 50.0
    back = sgsim.replay(write_result(r, tmp_path / "r.nc"))
    assert back.attrs["divergence_bound"] == 50.0
    off = sgsim.sample("mixture_25", "sgld", 200, step_size=0.01, seed=4, divergence_bound=None)
    assert off.attrs["divergence_bound"] == "none"
    assert read_result(write_result(off, tmp_path / "o.nc")).attrs["divergence_bound"] == "none"
    assert sgsim.replay(tmp_path / "o.nc").attrs["divergence_bound"] == "none"
    # healthy draws do not depend on the bound
    assert np.array_equal(r.posterior["theta"].values, off.posterior["theta"].values)


def test_ensembles_are_bounded_too():
    with pytest.raises(sgsim.DivergenceError, match="divergence_bound"):
        # the particles start within [1.7, 2.1]^2 and spread over the mode at (2, 2) (sd 0.32),
        # up to 2.43 without a bound
        init = np.random.default_rng(0).uniform(1.7, 2.1, (8, 2))
        sgsim.sample("mixture_3x3", "svgd", 200, n_particles=8, step_size=0.05, seed=0, init=init, divergence_bound=2.2)


def test_diagnostics_leave_diverged_chains_out_and_say_so():
    from sgsim import diagnostics

    kw = dict(step_size=0.12, friction=0.1, n_cycles=3, explore_fraction=0.25, seed=3, on_divergence="mark")
    with pytest.warns(RuntimeWarning):
        r = sgsim.sample("mixture_25", "csghmc", 2000, n_chains=8, **kw)
    bad = r.constant_data["diverged_at"].values > 0
    healthy = r.posterior["theta"].values[~bad]
    t = targets.mixture_25()
    chains = str(np.flatnonzero(bad).tolist())
    with pytest.warns(RuntimeWarning, match=re.escape(chains)):
        cov = diagnostics.mode_coverage(r, t.mode_centres)
    assert cov == diagnostics.mode_coverage(healthy, t.mode_centres)
    for fn in (diagnostics.ess, diagnostics.rhat):
        with pytest.warns(RuntimeWarning, match="left out"):
            got = fn(r)
        np.testing.assert_array_equal(got, fn(healthy))
        assert np.all(np.isfinite(got))
    with pytest.warns(RuntimeWarning, match="moment errors"):
        err = diagnostics.moment_errors(r, t)
    assert err["mean_error"] == diagnostics.moment_errors(healthy, t)["mean_error"]
    # negative control: a healthy result warns of nothing
    clean = sgsim.sample("mixture_25", "csghmc", 2000, n_chains=8, **{**kw, "step_size": 0.01})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        diagnostics.mode_coverage(clean, t.mode_centres)
        diagnostics.ess(clean)
    # running moments: the diverged chains' partial moments are left out too
    with pytest.warns(RuntimeWarning):
        mom = sgsim.sample("mixture_25", "csghmc", 2000, n_chains=8, storage="moments", **kw)
    with pytest.warns(RuntimeWarning, match=re.escape(chains)):
        diagnostics.moment_errors(mom, t)
    # every chain diverged: nothing to describe
    with pytest.warns(RuntimeWarning):
        gone = sgsim.sample(THREE_MODES, "csgld", 2000, n_chains=2, step_size=0.09, n_cycles=2, seed=1,
                            on_divergence="mark")  # fmt: skip
    with pytest.raises(ValueError, match="every chain diverged"):
        diagnostics.ess(gone)


def test_a_figure_of_a_diverged_run_says_so_in_its_title():
    from sgsim.cli import density_figure

    kw = dict(step_size=0.12, friction=0.1, n_cycles=3, explore_fraction=0.25, seed=3, on_divergence="mark")
    with pytest.warns(RuntimeWarning, match="diverged"):
        r = sgsim.sample("mixture_25", "csghmc", 2000, n_chains=8, **kw)
    bad = np.flatnonzero(r.constant_data["diverged_at"].values).tolist()
    title = density_figure(r, targets.mixture_25())._suptitle.get_text()
    assert title.startswith(f"DIVERGED: chains {bad} left out")
    # negative control: a healthy run of the same target has a plain title
    ok = sgsim.sample("mixture_25", "csghmc", 2000, n_chains=2, **{**kw, "step_size": 0.02})
    assert "DIVERGED" not in density_figure(ok, targets.mixture_25())._suptitle.get_text()
