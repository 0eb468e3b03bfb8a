r"""Iterate averaging as approximate MCMC ("Stochastic Gradient Descent as Approximate Bayesian
Inference", §6.2 and §7.2, Figures 3-5).

Synthetic data drawn from the model itself, so that the Bernstein-von Mises assumption of §6.2
holds (Fisher information = Hessian, ``A = C``): ``N = 10,000`` covariates from ``N(0, I_10)``,
true weights from the prior ``N(0, I)`` (precision ``lambda = 1``), responses
``y = x^T theta + noise`` with unit noise precision; Bayesian linear regression without
intercept or standardising (:func:`sgsim.targets.linear_regression`), whose posterior is
exact. Minibatches are drawn without replacement, afresh at every step. Units are the paper's
(learning rate ``epsilon`` on the averaged loss ``L = U / N``).

- **Figure 3** (:func:`covariances`): constant SGD with one example per step (``S = 1``) at
  the paper's ``epsilon = 0.005``; the covariance of its iterates, the posterior's, and that of
  the IASG window means over ``T = N / S`` steps (Algorithm 1, method ``iasg``), with the
  theory beside them (:class:`Covariances`).
- **Figures 4-5** (:func:`convergence`): with minibatches of ``S = 10``, IASG (``T = N / S``,
  one draw per pass through the data) at the paper's ``epsilon = 0.003`` and at
  ``epsilon N / S = 50`` (Figure 3's value), against SGLD (sgsim's ``sgld``, the cyclical
  paper's ``alpha = epsilon_WT / 2``) at the paper's decreasing rate
  ``epsilon_t = 10^-3 / sqrt(1000 + t)`` (our reading of the extracted text) and at a constant
  rate whose minibatch noise stays a tenth of the injected noise along its largest direction
  (``alpha lambda_max(V) = 0.2``); each from the posterior mean (MAP) and from a prior draw.
  Per run, the smallest and largest posterior marginal variance estimated from its draws after
  a burn-in, as a function of passes; the runs' covariance estimates at the end. NUTS, the
  paper's third sampler, is not run.

The theory is exact for this model. One SGD step on a minibatch ``B`` is the random linear
map ``z' = (I - epsilon H_B) z - epsilon g_B`` of ``z = theta - theta*``, with ``H_B`` the
minibatch Hessian of ``L`` (mean ``A``) and ``g_B`` the minibatch gradient at the optimum
(mean 0, covariance ``(f / S) C``, ``f = (N - S) / (N - 1)`` without replacement). Minibatches
are independent of the past, so ``E[z' | z] = (I - epsilon A) z`` and, at stationarity,

``P = F P F^T + epsilon^2 (f / S) (K(P) + C)``,  ``F = I - epsilon A``,
``K(P) = (1/N) sum_n (H_n - A) P (H_n - A)``

(the part of the minibatch noise that grows with ``z``, which the paper's constant-noise
assumption drops), solved as a linear system in ``P``; the lag covariances are ``F^k P``, so
the window means' covariance is :func:`sgsim.theory.time_average_cov` of ``(F, P, T)``. SGLD is
the same map with step ``alpha N`` and injected covariance ``2 alpha I``.

**§6.2's analysis beside the measurements** (:func:`iasg_rates`, ``Convergence.rates``): for
each IASG rate, the feasibility check of :func:`sgsim.theory.iasg.feasibility` (accuracy
``epsilon / S > c / (N lambda_min)`` for a 10% tolerance, stability ``epsilon < 2 / lambda_max``,
and ``N / S > (c / 2) lambda_max / lambda_min``), and two rates along each eigenvector of ``A``,
predicted (eq. 34's ``e(x)`` and the paper's ``1 / N``; the exact discrete values of this model)
and measured from the runs with standard errors over runs: the relative error of the window
means' variance against the posterior's, and the number of effectively independent posterior
draws per gradient evaluation that a run's overall average is worth.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import schedules, targets
from ..sampling import sample
from ..targets.regression import minibatch_gradient_covariance, noise_factor, per_example_gradients
from ..theory import iasg, ou, time_average_cov

__all__ = [
    "N_DATA",
    "DIM",
    "NOISE_PRECISION",
    "IASG_PAPER_LR",
    "SGLD_PAPER",
    "synthetic_regression",
    "Model",
    "model",
    "stationary_cov",
    "window_mean_cov",
    "eq34",
    "sampling_error",
    "Covariances",
    "covariances",
    "Rates",
    "iasg_rates",
    "Convergence",
    "convergence",
]

N_DATA = 10_000
DIM = 10
NOISE_PRECISION = 1.0
#: §7.2's rates for Figure 4: IASG's epsilon, and SGLD's epsilon_t = eps_0 / sqrt(b + t) as
#: (eps_0, b) in Welling-Teh units (our reading of the extracted text)
IASG_PAPER_LR = 0.003
SGLD_PAPER = (1e-3, 1000.0)


def synthetic_regression(
    seed: int, batch_size: int, *, n_data: int = N_DATA, dim: int = DIM, replace: bool = False
) -> tuple[targets.Target, np.ndarray, np.ndarray]:
    """The §7.2 data and its target: ``(target, X, y)``, ``X`` of shape ``(n_data, dim)``."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_data, dim))
    theta = rng.standard_normal(dim)  # from the prior, precision 1
    y = X @ theta + rng.standard_normal(n_data) / np.sqrt(NOISE_PRECISION)
    t = targets.linear_regression(
        X, y, noise_precision=NOISE_PRECISION, prior_scale=1.0, batch_size=batch_size, replace=replace,
        standardise=False, intercept=False,
    )  # fmt: skip
    return t, X, y


@dataclass(frozen=True)
class Model:
    """The pieces of SGD's linear recursion on a linear-regression target (module notes).

    Attributes
    ----------
    a : ndarray (d, d)
        ``A``, the Hessian of ``L = U / N``.
    c : ndarray (d, d)
        ``C``, the per-example gradient covariance at the optimum (``1/N`` normalised).
    k : ndarray (d*d, d*d)
        ``K`` as a matrix on row-major ``vec(P)``: ``(1/N) sum_n G_n (x) G_n``, ``G_n = H_n - A``.
    n_data, batch_size : int
    f : float
        Finite-population factor of the minibatch covariance (1 with replacement).
    """

    a: np.ndarray
    c: np.ndarray
    k: np.ndarray
    n_data: int
    batch_size: int
    f: float


def model(target: targets.Target, X: np.ndarray, noise_precision: float = NOISE_PRECISION) -> Model:
    """:class:`Model` of a :func:`synthetic_regression` target (its own batch size and sampling)."""
    n, d = X.shape
    g = per_example_gradients(target, target.mean)
    dev = g - g.mean(axis=0)
    # per-example Hessian of the likelihood part, tau x x^T, less its mean (the prior's part,
    # the same in every example, cancels)
    xx = noise_precision * np.einsum("ni,nj->nij", X, X)
    gn = (xx - xx.mean(axis=0)).reshape(n, d * d)
    k = (gn.T @ gn / n).reshape(d, d, d, d).transpose(0, 2, 1, 3).reshape(d * d, d * d)
    s = int(target.extras["batch_size"])
    return Model(
        target.extras["precision"] / n, dev.T @ dev / n, k, n, s, noise_factor(n, s, bool(target.extras["replace"]))
    )


def stationary_cov(m: Model, step: float, injected: float = 0.0, state_noise: bool = True) -> np.ndarray:
    """Exact stationary covariance of ``theta' = theta - step g_B(theta) + sqrt(injected) xi``.

    ``g_B`` is the minibatch gradient of ``L``: constant SGD is ``step = epsilon``; SGLD in the
    cyclical paper's units is ``step = alpha N``, ``injected = 2 alpha``. Solves
    ``P = F P F^T + injected I + step^2 (f / S) (K(P) + C)`` with ``F = I - step A``;
    ``state_noise=False`` drops ``K`` (the paper's constant noise, then the discrete Lyapunov
    equation of :func:`sgsim.theory.ou.sgd_cov` with ``exact=True``).
    """
    d = m.a.shape[0]
    F = np.eye(d) - step * m.a
    q = step**2 * m.f / m.batch_size
    lhs = np.eye(d * d) - np.kron(F, F) - (q * m.k if state_noise else 0.0)
    p = np.linalg.solve(lhs, (q * m.c + injected * np.eye(d)).ravel()).reshape(d, d)
    return (p + p.T) / 2


def window_mean_cov(m: Model, lr: float, window: int, state_noise: bool = True) -> np.ndarray:
    """Exact covariance of IASG's window means: the time average of stationary SGD (module notes)."""
    return time_average_cov(np.eye(m.a.shape[0]) - lr * m.a, stationary_cov(m, lr, state_noise=state_noise), window)


def eq34(a: np.ndarray, lr: float, n_data: int, batch_size: int) -> np.ndarray:
    """Eq. 34's ``D*``: the window means' covariance for ``T = N / S`` under ``A = C`` (OU model)."""
    lam, u = np.linalg.eigh(a)
    x = lr * n_data * lam / batch_size
    return u @ np.diag((1.0 + np.expm1(-x) / x) / (n_data * lam)) @ u.T


def _rel(m: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(m - ref) / np.linalg.norm(ref))


def sampling_error(cov: np.ndarray, n: int) -> float:
    """Expected relative Frobenius error of the sample covariance of ``n`` iid ``N(0, cov)`` draws.

    ``E|S - cov|_F^2 = sum_ij (cov_ij^2 + cov_ii cov_jj) / n`` (the entries' variances).
    """
    v = np.diag(cov)
    return float(np.sqrt(np.sum(cov**2 + np.outer(v, v)) / n) / np.linalg.norm(cov))


@dataclass
class Covariances:
    """Figure 3: the empirical covariances, the posterior, and the theory.

    ``sgd`` is the covariance of thinned SGD iterates (``n_iterates`` of them), ``iasg`` that of
    ``n_means`` window means; ``sgd_exact`` / ``iasg_exact`` their exact predictions,
    ``sgd_const`` / ``iasg_const`` those with the paper's constant noise (``A``, ``C`` of this
    model), ``sgd_ou`` eq. 13, ``iasg_eq34`` eq. 34 (``A = C`` assumed).
    """

    sgd: np.ndarray
    iasg: np.ndarray
    posterior: np.ndarray
    sgd_exact: np.ndarray
    sgd_const: np.ndarray
    sgd_ou: np.ndarray
    iasg_exact: np.ndarray
    iasg_const: np.ndarray
    iasg_eq34: np.ndarray
    a_vs_c: float
    lr: float
    window: int
    warmup: int
    n_means: int
    n_iterates: int
    thin: int


def covariances(
    seed: int, n_chains: int, windows_per_chain: int, iterates_per_chain: int, lr: float = 0.005, progress: bool = False
) -> Covariances:
    """Constant SGD (``S = 1``) and IASG (``T = N``), ``n_chains`` chains each, started at the MAP.

    IASG keeps ``windows_per_chain`` window means per chain after a warm-up of five relaxation
    times ``1 / (epsilon lambda_min(A))``; the iterates are SGD's after the same warm-up,
    thinned by that relaxation time times five (nearly independent).
    """
    target, X, _ = synthetic_regression(seed, 1)
    m = model(target, X)
    window = m.n_data  # T = N / S
    relax = int(np.ceil(1.0 / (lr * np.linalg.eigvalsh(m.a)[0])))
    warmup = thin = 5 * relax
    r = sample(
        target, "iasg", warmup + windows_per_chain * window, step_size=lr, window=window, warmup=warmup,
        n_chains=n_chains, seed=seed, init=target.mean, progress=progress,
    )  # fmt: skip
    means = r.posterior["theta"].values.reshape(-1, m.a.shape[0])
    r = sample(
        target, "sgd", warmup + iterates_per_chain * thin, step_size=lr, burn_in=warmup, thin=thin,
        n_chains=n_chains, seed=seed + 1, init=target.mean, progress=progress,
    )  # fmt: skip
    iterates = r.posterior["theta"].values.reshape(-1, m.a.shape[0])
    return Covariances(
        sgd=np.cov(iterates, rowvar=False),
        iasg=np.cov(means, rowvar=False),
        posterior=target.extras["covariance"],
        sgd_exact=stationary_cov(m, lr),
        sgd_const=stationary_cov(m, lr, state_noise=False),
        sgd_ou=ou.sgd_cov(m.a, m.f * m.c, lr, m.batch_size),
        iasg_exact=window_mean_cov(m, lr, window),
        iasg_const=window_mean_cov(m, lr, window, state_noise=False),
        iasg_eq34=eq34(m.a, lr, m.n_data, m.batch_size),
        a_vs_c=_rel(m.c, m.a),
        lr=lr,
        window=window,
        warmup=warmup,
        n_means=means.shape[0],
        n_iterates=iterates.shape[0],
        thin=thin,
    )


@dataclass
class Rates:
    """§6.2's predictions for one IASG rate beside what its runs measure (module notes).

    Arrays are along the eigenvectors of ``A`` (eigenvalues ``lam``, ascending).

    Attributes
    ----------
    feasibility : Feasibility
        :func:`sgsim.theory.iasg.feasibility` at this rate (10% tolerance).
    lam : ndarray
    err_eq34, err_exact, err_measured, err_se : ndarray
        Relative error of the window means' variance against the posterior's: eq. 34's
        ``e(epsilon N lambda / S)`` (OU, ``A = C``), the exact discrete value of this model, and
        the runs' (squared deviations from the known stationary mean ``theta*``), with its
        standard error over runs.
    rate_paper : float
        ``1 / N``: one independent posterior draw per ``N`` gradient evaluations (§6.2).
    rate_long_run, rate_exact, rate_measured, rate_se : ndarray
        Effectively independent posterior draws per gradient evaluation of a run's overall
        average: ``posterior variance / (Var(run average) x gradient evaluations)``, in the
        long-run OU limit of this model's ``A``, ``C``
        (:func:`sgsim.theory.iasg.posterior_samples_per_gradient`), exactly for the runs' length,
        and measured over runs (delta-method standard error).
    n_runs, n_windows : int
    """

    feasibility: iasg.Feasibility
    lam: np.ndarray
    err_eq34: np.ndarray
    err_exact: np.ndarray
    err_measured: np.ndarray
    err_se: np.ndarray
    rate_paper: float
    rate_long_run: np.ndarray
    rate_exact: np.ndarray
    rate_measured: np.ndarray
    rate_se: np.ndarray
    n_runs: int
    n_windows: int


def iasg_rates(m: Model, lr: float, window: int, means: np.ndarray, center: np.ndarray) -> Rates:
    """:class:`Rates` of IASG at rate ``lr`` from ``means``, shape ``(runs, windows, d)``: stationary
    consecutive window means of ``window`` steps, independent across runs; ``center`` is ``theta*``.
    """
    runs, n_win, d = means.shape
    lam, u = np.linalg.eigh(m.a)
    post = 1.0 / (m.n_data * lam)  # (N A)^{-1} along its eigenvectors
    proj = (means - center) @ u  # (runs, windows, d)
    per_run = np.mean(proj**2, axis=1) / post - 1.0
    w = np.mean(proj, axis=1) ** 2
    grads = n_win * window * m.batch_size
    v_meas = w.mean(axis=0)
    rate_meas = post / (v_meas * grads)
    F = np.eye(d) - lr * m.a
    p = stationary_cov(m, lr)
    d_exact = time_average_cov(F, p, window)
    v_exact = time_average_cov(F, p, n_win * window)
    return Rates(
        feasibility=iasg.feasibility(m.a, m.n_data, m.batch_size, lr, tolerance=0.1),
        lam=lam,
        err_eq34=iasg.window_errors(m.a, lr, m.n_data, m.batch_size)[1],
        err_exact=np.einsum("ik,ij,jk->k", u, d_exact, u) / post - 1.0,
        err_measured=per_run.mean(axis=0),
        err_se=per_run.std(axis=0, ddof=1) / np.sqrt(runs),
        rate_paper=1.0 / m.n_data,
        rate_long_run=iasg.posterior_samples_per_gradient(m.a, m.f * m.c, m.n_data)[1],
        rate_exact=post / (np.einsum("ik,ij,jk->k", u, v_exact, u) * grads),
        rate_measured=rate_meas,
        rate_se=rate_meas * w.std(axis=0, ddof=1) / np.sqrt(runs) / v_meas,
        n_runs=runs,
        n_windows=n_win,
    )


@dataclass
class Convergence:
    """Figures 4-5: running marginal-variance estimates per method and initialisation.

    ``min_var[(method, init)]`` and ``max_var[...]`` have shape ``(runs, passes)``: the smallest
    and largest marginal variance of each run's draws after ``burn_in`` passes, up to the end of
    each pass in ``passes`` (NaN before two draws); ``final_cov[...]`` shape ``(runs, d, d)``,
    each run's covariance estimate at the end; ``predicted[method]`` the exact stationary
    covariance of the draws where the rate is constant (None for the decreasing rate, whose
    entry in ``rate_note`` says what the last rate's stationary law is); ``truth`` the
    posterior covariance; ``rates[(method, init)]`` §6.2's predictions and their measured
    values for each IASG method (:class:`Rates`).
    """

    passes: np.ndarray
    methods: tuple[str, ...]
    settings: dict[str, str]
    min_var: dict = field(default_factory=dict)
    max_var: dict = field(default_factory=dict)
    final_cov: dict = field(default_factory=dict)
    predicted: dict = field(default_factory=dict)
    rate_note: dict = field(default_factory=dict)
    rates: dict = field(default_factory=dict)
    truth: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    batch_size: int = 10
    burn_in: int = 0
    n_runs: int = 0
    steps_per_pass: int = 0


def _running_var(draws: np.ndarray, per_pass: int, skip: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Smallest and largest marginal variance of ``draws[:, skip:k]`` at every pass boundary ``k``.

    ``draws`` has shape ``(runs, n, d)``, ``per_pass`` draws per pass; returns two arrays of
    shape ``(runs, n // per_pass)``, NaN where fewer than two draws are used.
    """
    runs, n, d = draws.shape
    ends = np.arange(per_pass, n + 1, per_pass)
    used = draws[:, skip:]
    used = used - used.mean(axis=1, keepdims=True)  # the variance is shift-invariant; no cancellation
    csum, csq = np.cumsum(used, axis=1), np.cumsum(used**2, axis=1)
    k = (ends - skip).astype(float)
    ok = k >= 2
    idx = np.maximum(ends - skip - 1, 0)
    kk = np.maximum(k, 2)[None, :, None]
    mean = csum[:, idx] / kk
    var = (csq[:, idx] - kk * mean**2) / (kk - 1)
    lo, hi = var.min(axis=2), var.max(axis=2)
    lo[:, ~ok] = np.nan
    hi[:, ~ok] = np.nan
    return lo, hi


def convergence(
    seed: int, n_runs: int, n_passes: int, burn_in: int = 10, batch_size: int = 10, draws_per_pass: int = 20,
    progress: bool = False,
) -> Convergence:  # fmt: skip
    """IASG and SGLD for ``n_passes`` passes, ``n_runs`` runs each, from the MAP and from prior draws.

    The draws of the first ``burn_in`` passes are discarded (the paper excludes "the first 10
    iterations"); SGLD keeps ``draws_per_pass`` evenly thinned draws per pass.
    """
    target, X, _ = synthetic_regression(seed, batch_size)
    m = model(target, X)
    d = m.a.shape[0]
    per_pass = m.n_data // batch_size
    n_steps = n_passes * per_pass
    thin = per_pass // draws_per_pass
    lr50 = 50.0 * batch_size / m.n_data  # epsilon N / S = 50, Figure 3's value
    # SGLD, constant: alpha lambda_max(V) = 0.2, V the covariance of the minibatch gradient of U
    lam_v = float(np.linalg.eigvalsh(minibatch_gradient_covariance(target, target.mean))[-1])
    alpha = 0.2 / lam_v
    eps0, b = SGLD_PAPER
    alpha_last = eps0 / 2 / np.sqrt(b + n_steps)
    methods: dict[str, tuple[str, float]] = {
        f"IASG, epsilon = {IASG_PAPER_LR:g} (paper)": ("iasg", IASG_PAPER_LR),
        f"IASG, epsilon = {lr50:g}": ("iasg", lr50),
        "SGLD, decreasing (paper)": ("sgld_decreasing", alpha_last),  # its schedule is built below
        "SGLD, constant": ("sgld", alpha),
    }
    out = Convergence(
        passes=np.arange(1, n_passes + 1),
        methods=tuple(methods),
        settings={
            f"IASG, epsilon = {IASG_PAPER_LR:g} (paper)": f"epsilon N / S = {IASG_PAPER_LR * m.n_data / batch_size:g}",
            f"IASG, epsilon = {lr50:g}": "epsilon N / S = 50",
            "SGLD, decreasing (paper)": f"epsilon_t = {eps0:g} / sqrt({b:g} + t) (alpha = epsilon / 2)",
            "SGLD, constant": f"alpha = {alpha:.3g} (alpha lambda_max(V) = 0.2)",
        },
        truth=target.extras["covariance"],
        batch_size=batch_size,
        burn_in=burn_in,
        n_runs=n_runs,
        steps_per_pass=per_pass,
    )
    for label, (kind, rate) in methods.items():
        if kind == "iasg":
            out.predicted[label] = window_mean_cov(m, rate, per_pass)
        elif kind == "sgld":
            out.predicted[label] = stationary_cov(m, rate * m.n_data, injected=2 * rate)
        else:
            out.predicted[label] = None
            p = stationary_cov(m, alpha_last * m.n_data, injected=2 * alpha_last)
            out.rate_note[label] = (
                f"the last rate's stationary variances {np.diag(p).min():.3g} / {np.diag(p).max():.3g}"
            )
    inits = {
        "MAP": np.broadcast_to(np.asarray(target.mean), (n_runs, d)).copy(),
        "random": np.random.default_rng(seed + 1).standard_normal((n_runs, d)),  # the prior N(0, I)
    }
    for i, (init_name, init) in enumerate(inits.items()):
        for label, (kind, rate) in methods.items():
            # independent runs per start (a shared seed would couple them: the same minibatches
            # and noise forget the start, and the MAP and prior-draw runs would coincide)
            common = dict(n_chains=n_runs, seed=seed + 2 + i, init=init, progress=progress)
            if kind == "iasg":
                r = sample(target, "iasg", n_steps, step_size=rate, window=per_pass, **common)
                per, skip = 1, burn_in
            elif kind == "sgld":
                r = sample(target, "sgld", n_steps, step_size=rate, thin=thin, **common)
                per, skip = draws_per_pass, burn_in * draws_per_pass
            else:
                sched = schedules.polynomial_decay(eps0 / 2, 0.5, n_steps, b=b)
                r = sample(target, "sgld", schedule=sched, thin=thin, **common)
                per, skip = draws_per_pass, burn_in * draws_per_pass
            draws = r.posterior["theta"].values
            if kind == "iasg" and draws.shape[1] - skip >= 2:
                out.rates[(label, init_name)] = iasg_rates(m, rate, per_pass, draws[:, skip:], np.asarray(target.mean))
            lo, hi = _running_var(draws, per, skip)
            out.min_var[(label, init_name)], out.max_var[(label, init_name)] = lo, hi
            kept = draws[:, skip:] - draws[:, skip:].mean(axis=1, keepdims=True)
            out.final_cov[(label, init_name)] = np.einsum("rni,rnj->rij", kept, kept) / (kept.shape[1] - 1)
    return out
