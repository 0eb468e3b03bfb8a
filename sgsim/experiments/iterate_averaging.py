r"""Iterate averaging as approximate MCMC ("Stochastic Gradient Descent as Approximate Bayesian
Inference", §6.2 and §7.2, Figures 3-5).

Synthetic data drawn from the model itself, so that the Bernstein-von Mises assumption of §6.2
holds (Fisher information = Hessian, ``A = C``): ``N = 10,000`` covariates from ``N(0, I_10)``,
true weights from the prior ``N(0, I)`` (precision ``lambda = 1``), responses
``y = x^T theta + noise`` with unit noise precision; Bayesian linear regression without
intercept or standardising (:func:`sgsim.targets.linear_regression`), whose posterior is
exact. Units are the paper's (learning rate ``epsilon`` on the averaged loss ``U / N``).

- **Figure 3** (:func:`covariances`): constant SGD with one example per step (``S = 1``) at
  ``epsilon = 0.005``; the covariance of its iterates, the posterior's, and that of the IASG
  window means over ``T = N / S`` steps (Algorithm 1, method ``iasg``), with the theory beside
  them: eq. 34's ``D*`` and the exact discrete time-average covariance of the SGD recursion.
- **Figures 4-5** (:func:`convergence`): with minibatches of ``S = 10``, IASG (``T = N / S``,
  one draw per pass through the data, ``epsilon N / S = 50`` as in Figure 3) against SGLD
  (sgsim's ``sgld``) at a constant step with the minibatch noise a tenth of the injected noise
  (``alpha lambda_max(V) = 0.2``; a decreasing schedule from a quarter of the stability bound,
  tried first, left SGLD's variance twenty times the posterior's after 30 passes, all of it
  minibatch noise), each from the posterior mean (MAP) and from a prior draw; the smallest and
  largest posterior marginal variance estimated from each run's draws so far, as a function of
  passes; the last estimates of one run as covariance matrices. NUTS, the paper's third
  sampler, is not run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import targets
from ..sampling import sample
from ..targets.regression import minibatch_gradient_covariance, per_example_gradients
from ..theory import time_average_cov

__all__ = ["N_DATA", "DIM", "synthetic_regression", "Covariances", "covariances", "Convergence", "convergence"]

N_DATA = 10_000
DIM = 10


def synthetic_regression(seed: int, batch_size: int):
    """The §7.2 data and its target (minibatches without replacement): ``(target, X, y)``."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N_DATA, DIM))
    theta = rng.standard_normal(DIM)
    y = X @ theta + rng.standard_normal(N_DATA)
    t = targets.linear_regression(
        X, y, noise_precision=1.0, prior_scale=1.0, batch_size=batch_size, standardise=False, intercept=False
    )
    return t, X, y


def _a_and_c(target) -> tuple[np.ndarray, np.ndarray]:
    """``A`` (Hessian of U / N) and ``C`` (per-example gradient covariance at the optimum)."""
    g = per_example_gradients(target, target.mean)
    dev = g - g.mean(axis=0)
    return target.extras["precision"] / N_DATA, dev.T @ dev / N_DATA


@dataclass
class Covariances:
    """Figure 3: the three covariance matrices and the theory beside them."""

    sgd: np.ndarray
    posterior: np.ndarray
    iasg: np.ndarray
    eq34: np.ndarray
    exact: np.ndarray
    a_vs_c: float
    lr: float
    window: int
    n_means: int


def covariances(seed: int, n_chains: int, windows_per_chain: int, lr: float = 0.005) -> Covariances:
    """Constant SGD (S = 1) and IASG (T = N) from the posterior mean; see the module notes."""
    target, _, _ = synthetic_regression(seed, 1)
    a, c = _a_and_c(target)
    window = N_DATA  # T = N / S
    warmup = 5 * int(np.ceil(1.0 / (lr * np.linalg.eigvalsh(a)[0])))
    n_steps = warmup + windows_per_chain * window
    r = sample(
        target, "iasg", n_steps, step_size=lr, window=window, warmup=warmup, n_chains=n_chains, seed=seed,
        init=target.mean, progress=False,
    )  # fmt: skip
    means = r.posterior["theta"].values.reshape(-1, DIM)
    iterates = r.constant_data["final_theta"].values  # one SGD iterate per chain, at stationarity
    f = (N_DATA - 1) / (N_DATA - 1)  # S = 1: with and without replacement coincide
    lam, u = np.linalg.eigh(a)
    x = lr * N_DATA * lam  # eq. 34 with S = 1
    eq34 = u @ np.diag((1.0 + np.expm1(-x) / x) / (N_DATA * lam)) @ u.T
    from ..theory import ou

    stat = ou.sgd_cov(a, f * c, lr, 1, exact=True)
    exact = time_average_cov(np.eye(DIM) - lr * a, stat, window)
    return Covariances(
        np.cov(iterates, rowvar=False),
        target.extras["covariance"],
        np.cov(means, rowvar=False),
        eq34,
        exact,
        float(np.linalg.norm(a - c) / np.linalg.norm(a)),
        lr,
        window,
        means.shape[0],
    )


@dataclass
class Convergence:
    """Figures 4-5: running marginal-variance estimates per method and initialisation.

    ``min_var[(method, init)]`` and ``max_var[...]`` have shape ``(runs, passes)``: the smallest
    and largest marginal variance of the draws of each run up to each pass; ``final_cov``
    the covariance estimate of run 0 at the end; ``truth`` the posterior covariance.
    """

    passes: np.ndarray
    min_var: dict
    max_var: dict
    final_cov: dict
    truth: np.ndarray
    batch_size: int
    sgld_schedule: str
    iasg_lr: float = 0.0


def _running_var(draws: np.ndarray, per_pass: int) -> tuple[np.ndarray, np.ndarray]:
    # draws (runs, n, d): variance of the first k draws at every pass boundary
    runs, n, d = draws.shape
    csum, csq = np.cumsum(draws, axis=1), np.cumsum(draws**2, axis=1)
    ends = np.arange(per_pass, n + 1, per_pass)
    k = ends[None, :, None].astype(float)
    mean = csum[:, ends - 1] / k
    var = (csq[:, ends - 1] - k * mean**2) / np.maximum(k - 1, 1)
    var[:, ends < 2] = np.nan  # one draw has no variance
    return var.min(axis=2), var.max(axis=2)


def convergence(seed: int, n_runs: int, n_passes: int, batch_size: int = 10) -> Convergence:
    """IASG against SGLD over ``n_passes`` passes, ``n_runs`` runs each, from the MAP and from prior draws."""
    target, _, _ = synthetic_regression(seed, batch_size)
    a, _ = _a_and_c(target)
    per_pass = N_DATA // batch_size
    n_steps = n_passes * per_pass
    # IASG: epsilon N / S = 50, Figure 3's value (the error factor e(lambda) of eq. 34 is then
    # about -1/50 at lambda = 1); T = N / S
    lr = 50.0 * batch_size / N_DATA
    # SGLD: a constant step at which the minibatch noise stays a tenth of the injected noise
    # along its largest direction, alpha lambda_max(V) = 0.2 (V the covariance of the minibatch
    # gradient of U at the optimum)
    lam_v = float(np.linalg.eigvalsh(minibatch_gradient_covariance(target, target.mean))[-1])
    alpha = 0.2 / lam_v
    inits = {
        "MAP": np.broadcast_to(target.mean, (n_runs, DIM)).copy(),
        "random": np.random.default_rng(seed + 1).standard_normal((n_runs, DIM)),
    }
    out = Convergence(np.arange(1, n_passes + 1), {}, {}, {}, target.extras["covariance"], batch_size, "")
    out.sgld_schedule = f"constant alpha = {alpha:.3g} (alpha lambda_max(V) = 0.2)"
    out.iasg_lr = lr
    for init_name, init in inits.items():
        r = sample(target, "iasg", n_steps, step_size=lr, window=per_pass, n_chains=n_runs, seed=seed, init=init,
                   progress=False)  # fmt: skip
        draws = r.posterior["theta"].values  # one window mean per pass
        lo, hi = _running_var(draws, 1)
        out.min_var[("IASG", init_name)], out.max_var[("IASG", init_name)] = lo, hi
        out.final_cov[("IASG", init_name)] = np.cov(draws[0], rowvar=False)
        thin = max(1, per_pass // 100)
        r = sample(target, "sgld", n_steps, step_size=alpha, n_chains=n_runs, seed=seed, init=init, thin=thin,
                   progress=False)  # fmt: skip
        draws = r.posterior["theta"].values
        lo, hi = _running_var(draws, per_pass // thin)
        out.min_var[("SGLD", init_name)], out.max_var[("SGLD", init_name)] = lo, hi
        out.final_cov[("SGLD", init_name)] = np.cov(draws[0], rowvar=False)
    return out
