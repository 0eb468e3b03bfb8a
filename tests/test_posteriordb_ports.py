"""The JAX ports of the reference posteriors' Stan models (sgsim/targets/_posteriordb_models.py).

Layers (STYLE.md): deterministic identities first (each port's log density equals an
independent NumPy/SciPy transcription of the Stan model, Jacobian of Stan's transforms
included, up to one constant per posterior; its gradient equals finite differences; its
derived quantities reproduce the gold draws' transformed parameters exactly), then exact MALA
runs against the gold draws within 5 combined Monte Carlo standard errors, with a negative
control that the same comparison must reject.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats

import sgsim
from sgsim.experiments.reference_posteriors import mala
from sgsim.targets import posteriordb
from sgsim.targets.posteriordb import POSTERIORS, compare, gold_draws, load_data

jax = pytest.importorskip("jax")
ports = pytest.importorskip("sgsim.targets._posteriordb_models")

GARCH = "garch-garch11"

# --- the Stan models, transcribed line by line in NumPy/SciPy, on the constrained scale ------
# Each takes the data as load_data gives it and one draw of the Stan parameters (Stan's names;
# garch's beta1 itself), and returns the model block's log density (constants kept or not).


def _eight_schools(d, v):
    theta = v["theta_trans"] * v["tau"] + v["mu"]
    return (
        stats.norm.logpdf(v["theta_trans"], 0, 1).sum()
        + stats.norm.logpdf(d["y"], theta, d["sigma"]).sum()
        + stats.norm.logpdf(v["mu"], 0, 5)
        + stats.cauchy.logpdf(v["tau"], 0, 5)
    )


def _blr(d, v):
    return (
        stats.norm.logpdf(v["beta"], 0, 10).sum()
        + stats.norm.logpdf(v["sigma"], 0, 10)
        + stats.norm.logpdf(d["y"], d["X"] @ v["beta"], v["sigma"]).sum()
    )


def _kidiq(d, v):
    b = v["beta"]
    return (
        stats.cauchy.logpdf(v["sigma"], 0, 2.5)
        + stats.norm.logpdf(d["kid_score"], b[0] + b[1] * d["mom_iq"], v["sigma"]).sum()
    )


def _earnings(d, v):
    b = v["beta"]
    return stats.norm.logpdf(np.log(d["earn"]), b[0] + b[1] * d["height"], v["sigma"]).sum()


def _mesquite(d, v):
    b = v["beta"]
    volume = np.log(d["diam1"] * d["diam2"] * d["canopy_height"])
    return stats.norm.logpdf(np.log(d["weight"]), b[0] + b[1] * volume, v["sigma"]).sum()


def _ark(d, v):
    K, T, y = d["K"], d["T"], d["y"]
    out = stats.norm.logpdf(v["alpha"], 0, 10) + stats.norm.logpdf(v["beta"], 0, 10).sum()
    out += stats.cauchy.logpdf(v["sigma"], 0, 2.5)
    for t in range(K, T):  # Stan's t in (K + 1):T, 0-based
        mu = v["alpha"]
        for k in range(1, K + 1):
            mu = mu + v["beta"][k - 1] * y[t - k]
        out += stats.norm.logpdf(y[t], mu, v["sigma"])
    return out


def _garch(d, v):
    y = d["y"]
    sigma = np.empty(d["T"])
    sigma[0] = d["sigma1"]
    for t in range(1, d["T"]):
        sigma[t] = np.sqrt(v["alpha0"] + v["alpha1"] * (y[t - 1] - v["mu"]) ** 2 + v["beta1"] * sigma[t - 1] ** 2)
    return stats.norm.logpdf(y, v["mu"], sigma).sum()


def _gauss_mix(d, v):
    mu, sigma, theta = v["mu"], v["sigma"], v["theta"]
    out = stats.norm.logpdf(sigma, 0, 2).sum() + stats.norm.logpdf(mu, 0, 2).sum() + stats.beta.logpdf(theta, 5, 5)
    # target += log_mix(theta, ...) for each n, summed
    a = np.log(theta) + stats.norm.logpdf(d["y"], mu[0], sigma[0])
    b = np.log1p(-theta) + stats.norm.logpdf(d["y"], mu[1], sigma[1])
    return out + np.logaddexp(a, b).sum()


def _diamonds(d, v):
    X = d["X"]
    Xc = np.empty((d["N"], d["K"] - 1))
    for i in range(1, d["K"]):
        Xc[:, i - 1] = X[:, i] - np.mean(X[:, i])
    out = stats.norm.logpdf(v["b"], 0, 1).sum() + stats.t.logpdf(v["Intercept"], 3, 8, 10)
    out += stats.t.logpdf(v["sigma"], 3, 0, 10) - stats.t.logsf(0, 3, 0, 10)
    if not d["prior_only"]:
        out += stats.norm.logpdf(d["Y"], v["Intercept"] + Xc @ v["b"], v["sigma"]).sum()
    return out


def _gp_f(d, v):
    x = np.asarray(d["x"], dtype=float)
    cov = np.empty((d["N"], d["N"]))
    for i in range(d["N"]):
        for j in range(d["N"]):
            cov[i, j] = v["alpha"] ** 2 * np.exp(-((x[i] - x[j]) ** 2) / (2 * v["rho"] ** 2))
    cov += 1e-10 * np.eye(d["N"])
    return np.linalg.cholesky(cov) @ v["f_tilde"]


def _gp(d, v):
    return (
        stats.gamma.logpdf(v["rho"], 25, scale=1 / 4)
        + stats.norm.logpdf(v["alpha"], 0, 2)
        + stats.norm.logpdf(v["f_tilde"], 0, 1).sum()
        + stats.poisson.logpmf(d["k"], np.exp(_gp_f(d, v))).sum()
    )


def _nes(d, v):
    b, a = v["beta"], d["age_discrete"]
    mean = (
        b[0]
        + b[1] * d["real_ideo"]
        + b[2] * d["race_adj"]
        + b[3] * (a == 2)
        + b[4] * (a == 3)
        + b[5] * (a == 4)
        + b[6] * d["educ1"]
        + b[7] * d["gender"]
        + b[8] * d["income"]
    )
    return stats.norm.logpdf(d["partyid7"], mean, v["sigma"]).sum()


# Stan's parameters and transforms: "+" lower=0, "01" (0, 1), "ord" ordered, "garch" beta1's
STAN = {
    "eight_schools-eight_schools_noncentered": (_eight_schools, {"theta_trans": "", "mu": "", "tau": "+"}),
    "sblrc-blr": (_blr, {"beta": "", "sigma": "+"}),
    "kidiq-kidscore_momiq": (_kidiq, {"beta": "", "sigma": "+"}),
    "earnings-logearn_height": (_earnings, {"beta": "", "sigma": "+"}),
    "mesquite-logmesquite_logvolume": (_mesquite, {"beta": "", "sigma": "+"}),
    "arK-arK": (_ark, {"alpha": "", "beta": "", "sigma": "+"}),
    GARCH: (_garch, {"mu": "", "alpha0": "+", "alpha1": "01", "beta1": "garch"}),
    "low_dim_gauss_mix-low_dim_gauss_mix": (_gauss_mix, {"mu": "ord", "sigma": "+", "theta": "01"}),
    "diamonds-diamonds": (_diamonds, {"b": "", "Intercept": "", "sigma": "+"}),
    "gp_pois_regr-gp_pois_regr": (_gp, {"rho": "+", "alpha": "+", "f_tilde": ""}),
    "nes2000-nes": (_nes, {"beta": "", "sigma": "+"}),
}


def _stan_log_jacobian(v, transforms):
    # log |d x / d u| of Stan's unconstraining transforms, written in the constrained values
    out = 0.0
    for name, kind in transforms.items():
        x = np.asarray(v[name])
        if kind == "+":
            out += np.log(x).sum()
        elif kind == "01":
            out += (np.log(x) + np.log1p(-x)).sum()
        elif kind == "ord":
            out += np.log(np.diff(x)).sum()
        elif kind == "garch":
            # beta1 = (1 - alpha1) logit^-1(u): d beta1 / du = beta1 (1 - alpha1 - beta1) / (1 - alpha1)
            out += np.log(x) + np.log(1 - v["alpha1"] - x) - np.log1p(-v["alpha1"])
    return out


@pytest.fixture(scope="module")
def targets():
    return {}


def _target(cache, name):
    if name not in cache:
        cache[name] = ports.build(name)
    return cache[name]


def _gold_rows(name, t, n, seed=0):
    # n gold draws on the unconstrained scale, chosen at random over chains and draws
    flat = t.parameters.unconstrain(ports.gold_parameters(name)).reshape(-1, t.dim)
    return flat[np.random.default_rng(seed).choice(len(flat), n, replace=False)]


@pytest.mark.parametrize("name", POSTERIORS)
def test_each_port_is_the_stan_model_up_to_a_constant(targets, name):
    t = _target(targets, name)
    reference, transforms = STAN[name]
    assert t.name == name
    assert t.parameters.names == tuple(n if n != "beta1" else "beta1_unit" for n in transforms)
    data = load_data(name)
    gold = _gold_rows(name, t, 4)
    # also points a few posterior sds away, where a weak prior or a Jacobian term varies more
    sd = np.sqrt(np.diag(t.second_moment) - t.mean**2)
    far = gold[:3] + 1.5 * sd * np.random.default_rng(1).standard_normal((3, t.dim))
    points = np.concatenate([gold, far])
    values = t.named(points)
    ours = t.log_density(points)
    theirs = np.array(
        [
            reference(data, {k: values[k][i] for k in transforms})
            + _stan_log_jacobian({k: values[k][i] for k in values}, transforms)
            for i in range(len(points))
        ]
    )
    offset = ours - theirs
    assert np.ptp(ours) > 1.0  # the points are far enough apart for the check to mean something
    np.testing.assert_allclose(offset, offset[0], rtol=0, atol=1e-7 * max(1.0, np.max(np.abs(ours))))


@pytest.mark.parametrize("name", POSTERIORS)
def test_each_port_maps_the_gold_draws_back_to_themselves(targets, name):
    # the gold draws -> the port's parameters -> unconstrained -> named: every gold name, the
    # transformed parameters (theta, f) and garch's beta1 recomputed by the port's derived
    t = _target(targets, name)
    gold = gold_draws(name)
    u = t.parameters.unconstrain(ports.gold_parameters(name))
    named = t.named(u[:, ::50])
    for key, value in gold.items():
        np.testing.assert_allclose(named[key], value[:, ::50], rtol=1e-7, atol=1e-9, err_msg=key)
    # the divergence bound's scale is the gold draws' on the unconstrained scale
    flat = u.reshape(-1, t.dim)
    np.testing.assert_allclose(t.mean, flat.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(np.diag(t.second_moment) - t.mean**2, flat.var(axis=0, ddof=1), rtol=1e-6, atol=1e-12)


def test_gp_f_is_stan_cholesky_times_f_tilde(targets):
    name = "gp_pois_regr-gp_pois_regr"
    t = _target(targets, name)
    point = _gold_rows(name, t, 1)
    values = {k: v[0] for k, v in t.named(point).items()}
    np.testing.assert_allclose(values["f"], _gp_f(load_data(name), values), rtol=1e-10)


def test_diamonds_generates_the_uncentred_intercept(targets):
    name = "diamonds-diamonds"
    t = _target(targets, name)
    values = {k: v[0] for k, v in t.named(_gold_rows(name, t, 1)).items()}
    means = load_data(name)["X"][:, 1:].mean(axis=0)
    assert values["b_Intercept"] == pytest.approx(values["Intercept"] - means @ values["b"], rel=1e-12)


@pytest.mark.parametrize("name", POSTERIORS)
def test_each_port_gradient_matches_finite_differences(targets, name):
    t = _target(targets, name)
    x = _gold_rows(name, t, 1, seed=2)[0]
    h = 1e-5
    steps = h * np.eye(t.dim)
    lp = t.log_density(np.concatenate([x + steps, x - steps]))
    numeric = (lp[: t.dim] - lp[t.dim :]) / (2 * h)
    grad_u = t.gradient(x[None])[0]
    np.testing.assert_allclose(-grad_u, numeric, rtol=1e-5, atol=1e-5 * (1.0 + np.max(np.abs(numeric))))


# --- exact MALA runs against the gold draws --------------------------------------------------


def _mala_draws(t, name, n_chains=32, n_warmup=2000, n_draws=2000, seed=1):
    def logp_grad(X):
        return t.log_density(X), -t.gradient(X)

    start = _gold_rows(name, t, n_chains, seed=seed)
    result = mala(logp_grad, start, n_warmup, n_draws, seed)
    return t.named(result.draws)


def _garch_without_jacobian_term():
    # the planted error: garch's own log(1 - alpha1) term of beta1's Jacobian left out, the one
    # term of these ports that sgsim's transforms cannot supply
    right = ports.port(GARCH)

    def wrong(v, d):
        return right.log_density(v, d) - jax.numpy.log1p(-v["alpha1"])

    return ports._target(GARCH, dataclasses.replace(right, log_density=wrong))


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    ["eight_schools-eight_schools_noncentered", "kidiq-kidscore_momiq", "low_dim_gauss_mix-low_dim_gauss_mix", GARCH],
)
def test_mala_on_the_port_matches_the_gold_draws(targets, name):
    draws = _mala_draws(_target(targets, name), name)
    result = compare(draws, name, z=5.0)
    assert result.ok, result.table()


@pytest.mark.slow
def test_negative_control_a_port_without_a_jacobian_term_is_rejected():
    draws = _mala_draws(_garch_without_jacobian_term(), GARCH)
    result = compare(draws, GARCH, z=5.0)
    assert not result.ok
    label, stat, z = result.worst
    assert label == "alpha1" and abs(z) > 10, result.table()


@pytest.mark.parametrize("name", [n for n in POSTERIORS if posteriordb.exchangeable_examples(n)])
def test_the_minibatch_form_is_the_same_density(name):
    # the port as a prior plus a sum over examples: the same log density (up to one constant)
    # and the same exact gradient as the port's own log density
    full = posteriordb.reference_posterior(name)
    n_data = posteriordb.exchangeable_examples(name)
    mini = posteriordb.reference_posterior(name, batch_size=max(1, n_data // 10))
    u = full.parameters.unconstrain(posteriordb.gold_parameters(name))[0, :4]
    diff = full.log_density(u) - mini.log_density(u)
    assert np.ptp(diff) <= 1e-9 * (1.0 + np.max(np.abs(full.log_density(u))))
    np.testing.assert_allclose(mini.gradient(u), full.gradient(u), rtol=1e-9, atol=1e-9)
    assert mini.batched.batch_size == max(1, n_data // 10) and mini.batched.n_data == n_data


def test_a_time_series_takes_no_minibatches_and_says_why():
    with pytest.raises(sgsim._validate.ParameterError, match="exchangeable"):
        posteriordb.reference_posterior("arK-arK", batch_size=10)


def test_a_run_on_a_reference_posterior_replays_by_name(tmp_path):
    target = posteriordb.reference_posterior("kidiq-kidscore_momiq", batch_size=40)
    gold = target.parameters.unconstrain(posteriordb.gold_parameters("kidiq-kidscore_momiq"))[0, :3]
    result = sgsim.sample(target, "sgld", 200, step_size=1e-6, n_chains=3, seed=4, init=gold)
    path = sgsim.io.write_result(result, tmp_path / "kidiq.nc")
    again = sgsim.replay(path)
    assert np.array_equal(again.posterior["beta"].values, result.posterior["beta"].values)


def test_a_reference_posterior_is_built_by_name_as_the_shell_does():
    # sgsim run --target reference_posterior --target-arg name=...: a factory argument called name
    target = sgsim.targets.get("reference_posterior", name="kidiq-kidscore_momiq", batch_size=50)
    assert target.spec.factory == "reference_posterior" and target.spec.kwargs["name"] == "kidiq-kidscore_momiq"
