r"""The Stan models of the reference posteriors, ported to JAX log densities (:func:`build`).

Each of the eleven posteriors of :mod:`sgsim.targets.posteriordb` becomes a
:func:`sgsim.targets.model` target on Stan's unconstrained scale: the parameters of the Stan
``parameters`` block, by the same names, in the same order and of the same shapes, with the
same transforms (``<lower=0>`` is ``"positive"``, ``<lower=0, upper=1>`` is
``interval(0, 1)``, ``ordered[2]`` is ``"ordered"``), so that the flat vector the samplers
move is the one Stan's samplers move. The log density is the Stan model's up to a constant
(``~`` statements drop their constants, ``target +=`` keeps them; a constant never matters);
sgsim adds the log-Jacobian of the declared transforms. Transformed data is computed once, in
NumPy, as Stan's ``transformed data`` block does; transformed parameters and generated
quantities are ``derived`` quantities, so that a run's result holds every name that the gold
draws hold.

One bound of one model depends on another parameter: garch's ``beta1`` has
``upper = 1 - alpha1``. Stan maps it as ``beta1 = (1 - alpha1) logit^{-1}(u)``; the port
declares ``beta1_unit = logit^{-1}(u)`` in ``(0, 1)``, derives ``beta1``, and adds the part
of the log-Jacobian that sgsim cannot know, ``log(1 - alpha1)``, itself.

Each target's ``mean`` and ``sd`` are those of the gold draws mapped to the unconstrained scale
(:func:`gold_parameters`), so that the divergence bound knows the posterior's scale.

The ports are checked against independent NumPy/SciPy evaluations of the Stan models and
against the gold draws by exact MALA runs in ``tests/test_posteriordb_ports.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validate import ParameterError, ParameterTypeError
from ._base import Target
from .parameters import Parameters, interval
from .posteriordb import POSTERIORS, gold_draws, load_data

__all__ = ["build", "gold_parameters", "exchangeable_examples", "PORTS"]


@dataclass(frozen=True)
class _Port:
    """A Stan model as :func:`sgsim.targets.model` takes it, before it is built."""

    log_density: Callable  # (values, data) -> scalar, JAX, on the constrained scale
    parameters: dict[str, Any]
    transforms: dict[str, Any]
    data: dict[str, np.ndarray]
    derived: Callable | None = None
    # gold draws (constrained, Stan's names) -> the port's parameters, where they differ
    from_gold: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None
    # the same density as a prior and a sum over exchangeable examples, for minibatches:
    # log_prior(values) and log_lik(values, row) over the rows of ``rows``
    log_prior: Callable | None = None
    log_lik: Callable | None = None
    rows: dict[str, np.ndarray] | None = None


def _floats(**arrays) -> dict[str, np.ndarray]:
    # Stan data vectors whose values are whole numbers come back from the JSON as int64
    return {k: np.asarray(v, dtype=np.float64) for k, v in arrays.items()}


# ----------------------------------------------------------------------------- the models


def _eight_schools_noncentered(data) -> _Port:
    from jax.scipy.stats import cauchy, norm

    def log_density(v, d):
        theta = v["theta_trans"] * v["tau"] + v["mu"]
        return (
            norm.logpdf(v["theta_trans"]).sum()
            + norm.logpdf(d["y"], theta, d["sigma"]).sum()
            + norm.logpdf(v["mu"], 0.0, 5.0)
            + cauchy.logpdf(v["tau"], 0.0, 5.0)
        )

    return _Port(
        log_density,
        parameters={"theta_trans": int(data["J"]), "mu": (), "tau": ()},
        transforms={"tau": "positive"},
        data=_floats(y=data["y"], sigma=data["sigma"]),
        # transformed parameters: theta = theta_trans * tau + mu
        derived=lambda v: {"theta": v["theta_trans"] * v["tau"] + v["mu"]},
        from_gold=lambda g: {
            "theta_trans": (g["theta"] - g["mu"][..., None]) / g["tau"][..., None],
            "mu": g["mu"],
            "tau": g["tau"],
        },
    )


def _blr(data) -> _Port:
    from jax.scipy.stats import norm

    def log_density(v, d):
        return (
            norm.logpdf(v["beta"], 0.0, 10.0).sum()
            + norm.logpdf(v["sigma"], 0.0, 10.0)
            + norm.logpdf(d["y"], d["X"] @ v["beta"], v["sigma"]).sum()
        )

    def log_prior(v):
        return norm.logpdf(v["beta"], 0.0, 10.0).sum() + norm.logpdf(v["sigma"], 0.0, 10.0)

    def log_lik(v, row):
        return norm.logpdf(row["y"], row["x"] @ v["beta"], v["sigma"])

    data_ = _floats(X=data["X"], y=data["y"])
    return _Port(
        log_density,
        parameters={"beta": int(data["D"]), "sigma": ()},
        transforms={"sigma": "positive"},
        data=data_,
        log_prior=log_prior,
        log_lik=log_lik,
        rows={"x": data_["X"], "y": data_["y"]},
    )


def _linear(y: np.ndarray, x: np.ndarray, sigma_prior: bool) -> _Port:
    # y ~ normal(beta[1] + beta[2] * x, sigma); beta flat; sigma ~ cauchy(0, 2.5) or flat
    from jax.scipy.stats import cauchy, norm

    def log_density(v, d):
        beta, sigma = v["beta"], v["sigma"]
        out = norm.logpdf(d["y"], beta[0] + beta[1] * d["x"], sigma).sum()
        return (out + cauchy.logpdf(sigma, 0.0, 2.5)) if sigma_prior else out

    def log_prior(v):
        return cauchy.logpdf(v["sigma"], 0.0, 2.5) if sigma_prior else 0.0 * v["sigma"]

    def log_lik(v, row):
        return norm.logpdf(row["y"], v["beta"][0] + v["beta"][1] * row["x"], v["sigma"])

    data = _floats(y=y, x=x)
    return _Port(
        log_density,
        parameters={"beta": 2, "sigma": ()},
        transforms={"sigma": "positive"},
        data=data,
        log_prior=log_prior,
        log_lik=log_lik,
        rows=data,
    )


def _kidscore_momiq(data) -> _Port:
    return _linear(data["kid_score"], data["mom_iq"], sigma_prior=True)


def _logearn_height(data) -> _Port:
    # transformed data: log_earn = log(earn)
    return _linear(np.log(np.asarray(data["earn"], dtype=np.float64)), data["height"], sigma_prior=False)


def _logmesquite_logvolume(data) -> _Port:
    # transformed data: log_weight, log_canopy_volume = log(diam1 .* diam2 .* canopy_height)
    f = _floats(**{k: data[k] for k in ("weight", "diam1", "diam2", "canopy_height")})
    return _linear(
        np.log(f["weight"]),
        np.log(f["diam1"] * f["diam2"] * f["canopy_height"]),
        sigma_prior=False,
    )


def _ark(data) -> _Port:
    from jax.scipy.stats import cauchy, norm

    K, T = int(data["K"]), int(data["T"])
    y = np.asarray(data["y"], dtype=np.float64)
    # the loop's mu for t = K+1..T is alpha + sum_k beta[k] y[t-k]: lags[t', k-1] = y[t-k]
    lags = np.stack([y[K - k : T - k] for k in range(1, K + 1)], axis=1)

    def log_density(v, d):
        mu = v["alpha"] + d["lags"] @ v["beta"]
        return (
            norm.logpdf(v["alpha"], 0.0, 10.0)
            + norm.logpdf(v["beta"], 0.0, 10.0).sum()
            + cauchy.logpdf(v["sigma"], 0.0, 2.5)
            + norm.logpdf(d["y_tail"], mu, v["sigma"]).sum()
        )

    return _Port(
        log_density,
        parameters={"alpha": (), "beta": K, "sigma": ()},
        transforms={"sigma": "positive"},
        data={"lags": lags, "y_tail": y[K:]},
    )


def _garch11(data) -> _Port:
    import jax
    import jax.numpy as jnp
    from jax.scipy.stats import norm

    y = np.asarray(data["y"], dtype=np.float64)

    def log_density(v, d):
        mu, alpha0, alpha1 = v["mu"], v["alpha0"], v["alpha1"]
        beta1 = (1.0 - alpha1) * v["beta1_unit"]

        def step(var, y_prev):
            var = alpha0 + alpha1 * (y_prev - mu) ** 2 + beta1 * var
            return var, var

        # sigma[1] = sigma1; sigma[t]^2 = alpha0 + alpha1 (y[t-1] - mu)^2 + beta1 sigma[t-1]^2
        sigma1 = jnp.reshape(d["sigma1"], (1,))  # the scalar datum as a vector of one
        _, var = jax.lax.scan(step, sigma1[0] ** 2, d["y"][:-1])
        sigma = jnp.concatenate([sigma1, jnp.sqrt(var)])
        # Stan's beta1 = (1 - alpha1) logit^{-1}(u) has log-Jacobian
        # log(1 - alpha1) + log s(u) + log(1 - s(u)); sgsim adds the last two (beta1_unit's
        # interval(0, 1)), the first is this model's own. The priors are flat (uniform on
        # the constrained scale), so nothing else is added.
        return norm.logpdf(d["y"], mu, sigma).sum() + jnp.log1p(-alpha1)

    return _Port(
        log_density,
        parameters={"mu": (), "alpha0": (), "alpha1": (), "beta1_unit": ()},
        transforms={"alpha0": "positive", "alpha1": interval(0.0, 1.0), "beta1_unit": interval(0.0, 1.0)},
        data={"y": y, "sigma1": np.asarray(float(data["sigma1"]))},
        derived=lambda v: {"beta1": (1.0 - v["alpha1"]) * v["beta1_unit"]},
        from_gold=lambda g: {
            "mu": g["mu"],
            "alpha0": g["alpha0"],
            "alpha1": g["alpha1"],
            "beta1_unit": g["beta1"] / (1.0 - g["alpha1"]),
        },
    )


def _low_dim_gauss_mix(data) -> _Port:
    import jax.numpy as jnp
    from jax.scipy.stats import beta as beta_dist
    from jax.scipy.stats import norm

    def log_density(v, d):
        mu, sigma, theta = v["mu"], v["sigma"], v["theta"]
        # log_mix(theta, lp1, lp2) = log(theta exp(lp1) + (1 - theta) exp(lp2))
        mix = jnp.logaddexp(
            jnp.log(theta) + norm.logpdf(d["y"], mu[0], sigma[0]),
            jnp.log1p(-theta) + norm.logpdf(d["y"], mu[1], sigma[1]),
        )
        return (
            norm.logpdf(sigma, 0.0, 2.0).sum()
            + norm.logpdf(mu, 0.0, 2.0).sum()
            + beta_dist.logpdf(theta, 5.0, 5.0)
            + mix.sum()
        )

    def log_prior(v):
        return (
            norm.logpdf(v["sigma"], 0.0, 2.0).sum()
            + norm.logpdf(v["mu"], 0.0, 2.0).sum()
            + beta_dist.logpdf(v["theta"], 5.0, 5.0)
        )

    def log_lik(v, row):
        mu, sigma, theta = v["mu"], v["sigma"], v["theta"]
        return jnp.logaddexp(
            jnp.log(theta) + norm.logpdf(row["y"], mu[0], sigma[0]),
            jnp.log1p(-theta) + norm.logpdf(row["y"], mu[1], sigma[1]),
        )

    return _Port(
        log_density,
        parameters={"mu": 2, "sigma": 2, "theta": ()},
        transforms={"mu": "ordered", "sigma": "positive", "theta": interval(0.0, 1.0)},
        data=_floats(y=data["y"]),
        log_prior=log_prior,
        log_lik=log_lik,
        rows=_floats(y=data["y"]),
    )


def _diamonds(data) -> _Port:
    import jax.numpy as jnp
    from jax.scipy.stats import norm
    from jax.scipy.stats import t as student_t

    X = np.asarray(data["X"], dtype=np.float64)
    # transformed data: the design without its intercept column, centred
    means_X = X[:, 1:].mean(axis=0)
    Xc = X[:, 1:] - means_X
    prior_only = bool(int(data["prior_only"]))

    def log_density(v, d):
        b, intercept, sigma = v["b"], v["Intercept"], v["sigma"]
        # student_t_lccdf(0 | 3, 0, 10) = log(1/2) is a constant: left out
        out = (
            norm.logpdf(b, 0.0, 1.0).sum()
            + student_t.logpdf(intercept, 3.0, 8.0, 10.0)
            + student_t.logpdf(sigma, 3.0, 0.0, 10.0)
        )
        if prior_only:
            return out
        # normal_id_glm_lpdf(Y | Xc, Intercept, b, sigma)
        return out + norm.logpdf(d["Y"], intercept + d["Xc"] @ b, sigma).sum()

    def log_prior(v):
        return (
            norm.logpdf(v["b"], 0.0, 1.0).sum()
            + student_t.logpdf(v["Intercept"], 3.0, 8.0, 10.0)
            + student_t.logpdf(v["sigma"], 3.0, 0.0, 10.0)
        )

    def log_lik(v, row):
        return norm.logpdf(row["Y"], v["Intercept"] + row["xc"] @ v["b"], v["sigma"])

    mx = means_X.copy()
    y_ = np.asarray(data["Y"], dtype=np.float64)
    return _Port(
        log_density,
        parameters={"b": int(data["K"]) - 1, "Intercept": (), "sigma": ()},
        transforms={"sigma": "positive"},
        data={"Y": y_, "Xc": Xc},
        # generated quantities: the intercept of the uncentred design
        derived=lambda v: {"b_Intercept": v["Intercept"] - jnp.dot(jnp.asarray(mx), v["b"])},
        log_prior=None if prior_only else log_prior,
        log_lik=None if prior_only else log_lik,
        rows=None if prior_only else {"Y": y_, "xc": Xc},
    )


def _gp_cholesky(x, rho, alpha, xp):
    # gp_exp_quad_cov(x, alpha, rho) + 1e-10 I, as Stan's model adds, then its Cholesky factor
    sq = (x[:, None] - x[None, :]) ** 2
    cov = alpha[..., None, None] ** 2 * xp.exp(-0.5 * sq / rho[..., None, None] ** 2) + 1e-10 * xp.eye(len(x))
    return xp.linalg.cholesky(cov)


def _gp_pois_regr(data) -> _Port:
    import jax.numpy as jnp
    from jax.scipy.stats import gamma, norm

    x = np.asarray(data["x"], dtype=np.float64)

    def f_of(v):
        return _gp_cholesky(jnp.asarray(x), v["rho"], v["alpha"], jnp) @ v["f_tilde"]

    def log_density(v, d):
        f = f_of(v)
        return (
            gamma.logpdf(v["rho"], 25.0, scale=1.0 / 4.0)  # Stan's gamma(shape, rate)
            + norm.logpdf(v["alpha"], 0.0, 2.0)
            + norm.logpdf(v["f_tilde"]).sum()
            + jnp.sum(d["k"] * f - jnp.exp(f))  # poisson_log(k | f) without -log k!
        )

    def from_gold(g):
        L = _gp_cholesky(x, np.asarray(g["rho"]), np.asarray(g["alpha"]), np)
        return {
            "rho": g["rho"],
            "alpha": g["alpha"],
            "f_tilde": np.linalg.solve(L, np.asarray(g["f"])[..., None])[..., 0],
        }

    return _Port(
        log_density,
        parameters={"rho": (), "alpha": (), "f_tilde": int(data["N"])},
        transforms={"rho": "positive", "alpha": "positive"},
        data=_floats(k=data["k"]),
        derived=lambda v: {"f": f_of(v)},
        from_gold=from_gold,
    )


def _nes(data) -> _Port:
    from jax.scipy.stats import norm

    age = np.asarray(data["age_discrete"])
    # transformed data: age as a factor, 1 (under 30) the baseline
    columns = [
        data["real_ideo"],
        data["race_adj"],
        age == 2,
        age == 3,
        age == 4,
        data["educ1"],
        data["gender"],
        data["income"],
    ]
    design = np.column_stack([np.asarray(c, dtype=np.float64) for c in columns])

    def log_density(v, d):
        beta = v["beta"]
        return norm.logpdf(d["partyid7"], beta[0] + d["design"] @ beta[1:], v["sigma"]).sum()

    def log_lik(v, row):
        beta = v["beta"]
        return norm.logpdf(row["partyid7"], beta[0] + row["design"] @ beta[1:], v["sigma"])

    party = np.asarray(data["partyid7"], dtype=np.float64)
    return _Port(
        log_density,
        parameters={"beta": 9, "sigma": ()},
        transforms={"sigma": "positive"},
        data={"partyid7": party, "design": design},
        log_prior=lambda v: 0.0 * v["sigma"],  # flat priors
        log_lik=log_lik,
        rows={"partyid7": party, "design": design},
    )


#: Each posterior's port, by its posterior-database name.
PORTS: dict[str, Callable[[dict], _Port]] = {
    "eight_schools-eight_schools_noncentered": _eight_schools_noncentered,
    "sblrc-blr": _blr,
    "kidiq-kidscore_momiq": _kidscore_momiq,
    "earnings-logearn_height": _logearn_height,
    "mesquite-logmesquite_logvolume": _logmesquite_logvolume,
    "arK-arK": _ark,
    "garch-garch11": _garch11,
    "low_dim_gauss_mix-low_dim_gauss_mix": _low_dim_gauss_mix,
    "diamonds-diamonds": _diamonds,
    "gp_pois_regr-gp_pois_regr": _gp_pois_regr,
    "nes2000-nes": _nes,
}
assert tuple(PORTS) == POSTERIORS


def _check(name) -> str:
    if not isinstance(name, str):
        raise ParameterTypeError("name", f"name must be a str, got {type(name).__name__}")
    if name not in PORTS:
        raise ParameterError("name", f"unknown posterior {name!r}; known posteriors: {', '.join(PORTS)}")
    return name


def port(name: str) -> _Port:
    """The port of posterior ``name`` before it is built (its log density, layout and data)."""
    return PORTS[_check(name)](load_data(name))


def gold_parameters(name: str) -> dict[str, np.ndarray]:
    """The gold draws as the port's parameters, on the constrained scale.

    Parameters
    ----------
    name : str
        One of :data:`~sgsim.targets.posteriordb.POSTERIORS`.

    Returns
    -------
    dict of str to ndarray
        Each parameter of the port, ``(chain, draw, *shape)``: the gold draws' own where the
        port's parameter is Stan's, else computed from them (eight schools' ``theta_trans``
        from ``theta``; garch's ``beta1_unit = beta1 / (1 - alpha1)``; the Poisson GP's
        ``f_tilde`` solving ``L f_tilde = f``). Map them to the unconstrained scale with
        ``target.parameters.unconstrain``.
    """
    p = port(name)
    gold = gold_draws(name)
    values = gold if p.from_gold is None else p.from_gold(gold)
    return {k: np.asarray(values[k], dtype=np.float64) for k in p.parameters}


def _target(name: str, p: _Port, gold: dict[str, np.ndarray] | None = None, batch_size: int | None = None) -> Target:
    from .autodiff import model

    layout = Parameters(p.parameters, p.transforms)
    if gold is None:
        gold = gold_draws(name)
        gold = gold if p.from_gold is None else p.from_gold(gold)
    flat = layout.unconstrain({k: gold[k] for k in p.parameters}).reshape(-1, layout.dim)
    spread = {"name": name, "mean": flat.mean(axis=0), "sd": flat.std(axis=0, ddof=1)}
    if batch_size is None:
        return model(
            p.log_density, parameters=p.parameters, transforms=p.transforms, data=p.data, derived=p.derived, **spread
        )
    if p.log_lik is None:
        raise ParameterError(
            "batch_size",
            f"posterior {name!r} has no likelihood over exchangeable examples (a time series, a latent field, "
            "or a handful of groups): it takes no minibatches",
        )
    return model(
        log_lik=p.log_lik,
        log_prior=p.log_prior,
        parameters=p.parameters,
        transforms=p.transforms,
        data=p.rows,
        batch_size=batch_size,
        derived=p.derived,
        **spread,
    )


def exchangeable_examples(name: str) -> int:
    """``N``, the examples of posterior ``name``'s likelihood that minibatches draw from (0: none)."""
    p = port(name)
    return 0 if p.rows is None else int(next(iter(p.rows.values())).shape[0])


def build(name: str, batch_size: int | None = None) -> Target:
    """The target of reference posterior ``name``: its Stan model as a JAX log density.

    Parameters
    ----------
    name : str
        One of :data:`~sgsim.targets.posteriordb.POSTERIORS`.
    batch_size : int, optional
        For a posterior whose likelihood is a sum over exchangeable examples (the
        regressions and the Gaussian mixture): the minibatch of each step's gradient, ``n``
        examples without replacement scaled by ``N / n``. None: the exact gradient.

    Returns
    -------
    Target
        A :func:`sgsim.targets.model` target on Stan's unconstrained scale, named ``name``;
        ``target.named`` holds every name of :func:`~sgsim.targets.posteriordb.gold_draws`
        (and the port's own parameters), with ``mean`` and ``sd`` those of the gold draws on
        the unconstrained scale.
    """
    return _target(name, port(name), batch_size=batch_size)
