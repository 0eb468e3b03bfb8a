r"""The stationary laws of constant SGD and its relatives on real regressions, against the posterior.

"Stochastic Gradient Descent as Approximate Bayesian Inference" (Mandt, Hoffman and Blei,
2017), §7.1, Figures 1 and 2 and Table 1: run constant-rate samplers from the optimum of a
Bayesian linear or logistic regression, fit a Gaussian to their iterates and compare it with
the posterior (exact for the conjugate linear model, the Laplace approximation at the MAP for
the logistic one, as in the paper) and with the stationary covariance that the paper's
Ornstein-Uhlenbeck (OU) model predicts.

The quadratic model (:class:`Problem`)
---------------------------------------
In the paper's units (see :mod:`sgsim.integrators.constant_sgd`): ``A`` is the Hessian of
the *averaged* loss ``L = U / N`` at the optimum ``theta*``, i.e. the Hessian of ``U``
divided by ``N``, and ``C`` the per-example covariance of ``grad log p(y_n | x_n, theta)`` at
``theta*`` (``1 / N`` normalisation). The posterior is ``N(theta*, (N A)^{-1})`` (eq. 14).
The targets draw minibatches without replacement, so the minibatch gradient of ``L`` has
covariance ``f C / S``, ``f = (N - S) / (N - 1)``: the *predictions* use ``C_noise = f C``;
the tuning rules below are the paper's formulas with its ``C``.

The six samplers (:func:`tunings`)
----------------------------------
``sgd``
    Constant SGD at Theorem 1's rate ``epsilon* = 2 S D / (N Tr C)`` (eq. 15).
``sgd_d``
    Preconditioned SGD ``theta <- theta - H g`` with Corollary 3's diagonal
    ``H_kk = 2 S / (N C_kk)``.
``sgd_f``
    The same with Theorem 2's full ``H* = (2 S / N) C^{-1}`` (KL 0 in the OU model).
``sgld``
    Welling and Teh's SGLD at a constant rate (§5.1), ``theta <- theta - (epsilon / 2) N g +
    sqrt(epsilon) xi``. The paper took "the largest rate that yielded stable results" from
    powers of ten. The rule here (:func:`sgld_rate`), fixed before any run: the largest power
    of ten strictly below the linear stability limit ``4 / lambda_max(N A)`` at which the
    chain is *mean-square* stable with each minibatch's own Hessian
    (:func:`mean_square_radius` < 1). Data with a few examples of large norm (diamonds) need
    the second condition: their minibatch Hessians reach far beyond ``N A``.
``sgfs_d``, ``sgfs_f``
    Stochastic gradient Fisher scoring (§5.2, eq. 26), ``theta <- theta - epsilon H g +
    epsilon H E zeta``, at the rate ``epsilon*`` of eq. 15 (as in §7.1), with the injected
    noise of the paper's own recipe (§5.2): ``(E E^T)_kk = 2 / (epsilon N h_max) - C_kk / S``,
    which makes Corollary 6's diagonal ``H_kk`` equal to ``h_max`` for every ``k``. The largest
    cap for which that noise is non-negative, ``h_max = min_k 2 S / (epsilon N C_kk)``, is the
    one used (the noise vanishes in the coordinate of largest gradient variance). ``sgfs_d``
    takes Corollary 6's diagonal ``H`` (then ``h_max I``), ``sgfs_f`` Theorem 5's full
    ``H* = (2 / (epsilon N)) (C / S + E E^T)^{-1}`` (KL 0 in the OU model). With ``E = 0`` they
    would be ``sgd_d`` and ``sgd_f``.

Predictions (:func:`predicted_cov`)
-----------------------------------
Near the optimum each sampler is ``e <- (I - M_B) e + xi`` for ``e = theta - theta*``, where
``M_B = G K_B`` is the step's gain ``G`` (``epsilon H``, or ``(epsilon / 2) N I`` for SGLD)
times ``K_B``, the minibatch mean of the per-example Hessians of ``L``; its mean is
``M = G A``, and ``xi`` (minibatch gradient at ``theta*`` plus injected noise) has covariance
``Q``. Three stationary covariances:

``"ou"``
    The paper's OU model, from :mod:`sgsim.theory.ou` (``sgd_cov`` for eq. 13,
    ``preconditioned_sgd_cov`` for eq. 18, ``sgld_cov`` for §5.1, ``sgfs_cov`` for §5.2).
``"discrete"``
    The recursion with ``M_B`` replaced by ``M`` (gradient noise independent of ``theta``):
    ``Sigma = (I - M) Sigma (I - M)^T + Q``.
``"exact"``
    The recursion with the minibatch's own Hessian: ``e`` is independent of the step's
    minibatch and has mean 0 at stationarity, so ``Sigma = E[(I - M_B) Sigma (I - M_B)^T] +
    Q`` with ``E[M_B Sigma M_B^T] = M Sigma M^T + (f / S) G Psi(Sigma) G^T``,
    ``Psi(P) = (1/N) sum_n (h_n - h_bar) P (h_n - h_bar)`` over the per-example Hessians
    ``h_n`` (the finite-population covariance again). For linear regression the gradient is
    exactly affine in ``theta``, so this is the exact stationary covariance of the sampler;
    for logistic regression that of its linearisation at the MAP.

Runs (:func:`run_method`, :func:`run_dataset`)
----------------------------------------------
``n_chains`` chains start at ``theta*``, burn in for five slowest relaxation times
``tau = 1 / min Re eig(M)`` and keep their running mean and covariance (or thinned draws);
the fitted Gaussian pools the chains. A run keeps ``n_relax`` relaxation times after burn-in,
summed over chains: about the effective number of draws of the slowest variance.
``KL(fitted || posterior)`` is the paper's measure (means included); its standard error is the
jackknife over chains. A Gaussian fitted to ``n`` effective draws has a positive Monte Carlo
bias of about ``D (D + 3) / (4 n)`` nats (covariance ``D (D + 1) / 4``, mean ``D / 2``), which
dominates the near-zero KLs at small budgets.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field

import numpy as np

from .. import datasets, targets
from ..sampling import sample
from ..sweep import Cell, compute
from ..targets.regression import noise_factor, per_example_gradients
from ..theory import ou
from ..theory.distances import gaussian_kl
from ..theory.exact_law import stationary_covariance
from ..theory.kl import (
    diagonal_preconditioner,
    kl_to_posterior,
    optimal_lr,
    optimal_preconditioner,
    sgfs_optimal_preconditioner,
)

__all__ = [
    "METHODS",
    "LABELS",
    "PAPER_TABLE1",
    "SETTINGS",
    "PRIOR_SCALE",
    "Setting",
    "Problem",
    "Tuning",
    "MethodRun",
    "Budget",
    "QUICK",
    "FULL",
    "problem_from_target",
    "make_problem",
    "tunings",
    "sgld_rate",
    "linearisation",
    "relaxation_steps",
    "mean_square_radius",
    "predicted_cov",
    "pooled_moments",
    "run_method",
    "run_dataset",
    "steps_for",
    "run_seed",
    "posterior_draws",
]

#: The six samplers of Table 1, in its order.
METHODS = ("sgd", "sgd_d", "sgd_f", "sgld", "sgfs_d", "sgfs_f")
LABELS = {
    "sgd": "constant SGD",
    "sgd_d": "constant SGD-d",
    "sgd_f": "constant SGD-f",
    "sgld": "SGLD",
    "sgfs_d": "SGFS-d",
    "sgfs_f": "SGFS-f",
}

#: Table 1 of the paper (KL divergences), read column by column from the extracted text, the
#: rows in the order of its method list; BBVI is not run here.
PAPER_TABLE1 = {
    "Wine": {"sgd": 18.7, "sgd_d": 14.0, "sgd_f": 0.7, "sgld": 2.9, "sgfs_d": 12.8, "sgfs_f": 0.8, "bbvi": 44.7},
    "Skin": {"sgd": 0.471, "sgd_d": 0.921, "sgd_f": 0.005, "sgld": 0.905, "sgfs_d": 0.864, "sgfs_f": 0.005,
             "bbvi": 5.74},
    "Protein": {"sgd": 1000.9, "sgd_d": 678.4, "sgd_f": 1.8, "sgld": 4.5, "sgfs_d": 597.4, "sgfs_f": 1.3,
                "bbvi": 478.1},
}  # fmt: skip

#: Prior standard deviation: the paper's "quadratic regularizer was 1" (§7.1).
PRIOR_SCALE = 1.0
#: Seed of the quick-mode subsample (fixed and independent of the run seed, so the data are too).
SUBSAMPLE_SEED = 0


@dataclass(frozen=True)
class Setting:
    """One data set of the experiment.

    Attributes
    ----------
    dataset : str
        Key of :data:`sgsim.datasets.DATASETS`.
    model : str
        ``"linear"`` or ``"logistic"``.
    batch_size : int
        Minibatch size ``S`` (the paper's: 100, 100 and 10,000).
    paper : str
        The paper's data set this one stands in for.
    quick_n, quick_batch : int or None
        Quick mode's random subsample and its minibatch (None: all the data and ``batch_size``).
    """

    dataset: str
    model: str
    batch_size: int
    paper: str
    quick_n: int | None = None
    quick_batch: int | None = None


#: The substitutes of the paper's data sets (unavailable offline), of similar size and task.
#: Quick mode takes a tenth of fertility, with S a tenth too so that S / N stays the paper's.
SETTINGS = {
    "fair": Setting("fair", "linear", 100, "Wine"),
    "diamonds": Setting("diamonds", "linear", 100, "Protein"),
    "fertility": Setting("fertility", "logistic", 10_000, "Skin", quick_n=25_465, quick_batch=1_000),
}


@dataclass(frozen=True)
class Problem:
    """A data target and its quadratic model at the optimum (paper's units).

    Attributes
    ----------
    name : str
    target : Target
        The minibatch target (``batch_size`` set).
    theta_star : ndarray, shape (D,)
        Posterior mean (linear) or MAP (logistic).
    hessian : ndarray, shape (D, D)
        Hessian of ``U`` at ``theta_star`` (the posterior precision).
    C : ndarray, shape (D, D)
        Per-example gradient covariance at ``theta_star`` (the paper's ``C = B B^T``).
    n_data, batch_size : int
    noise_factor : float
        ``f``: the minibatch gradient of ``L`` has covariance ``f C / S``.
    exact_posterior : bool
        True for the conjugate linear model; False: the posterior is the Laplace approximation.
    source : tuple or None
        ``(dataset, full)`` when :func:`make_problem` built it (a sweep cell can build it again
        in another process), None otherwise.
    hessian_spread : ndarray, shape (D^2, D^2)
        ``Psi`` of the module docs, acting on row-major ``vec(P)``.
    """

    name: str
    target: object
    theta_star: np.ndarray
    hessian: np.ndarray
    C: np.ndarray
    n_data: int
    batch_size: int
    noise_factor: float
    exact_posterior: bool
    hessian_spread: np.ndarray = field(repr=False)
    source: tuple | None = None

    @property
    def A(self) -> np.ndarray:
        """Hessian of the averaged loss: ``hessian / N``."""
        return self.hessian / self.n_data

    @property
    def C_noise(self) -> np.ndarray:
        """``f C``: ``S`` times the covariance of the minibatch gradient of ``L``."""
        return self.noise_factor * self.C

    @property
    def posterior_cov(self) -> np.ndarray:
        """``(N A)^{-1}``."""
        return np.linalg.inv(self.hessian)

    @property
    def dim(self) -> int:
        """``D``."""
        return int(self.theta_star.shape[0])


def _logistic_hessian(X: np.ndarray, theta: np.ndarray, prec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hessian of a logistic ``U`` and the per-example weights ``p (1 - p)``."""
    p = 1.0 / (1.0 + np.exp(-(X @ theta)))
    w = p * (1.0 - p)
    hess = (X * w[:, None]).T @ X + np.diag(prec)
    return 0.5 * (hess + hess.T), w


def _logistic_map(target, max_iter: int = 100) -> np.ndarray:
    """MAP of a logistic target: Newton's method on ``U`` with its exact gradient."""
    X, prec = target.extras["X"], target.extras["prior_precision"]
    theta = np.zeros(target.dim)
    grad = np.empty(target.dim)
    for _ in range(max_iter):
        target.grad_u(theta, target.params, grad)
        step = np.linalg.solve(_logistic_hessian(X, theta, prec)[0], grad)
        theta = theta - step
        if np.max(np.abs(step)) <= 1e-12 * max(1.0, float(np.max(np.abs(theta)))):
            return theta
    raise RuntimeError("Newton's method did not reach the MAP")  # pragma: no cover - U is strictly convex


def _hessian_spread(X: np.ndarray, w: np.ndarray, chunk: int = 16_384) -> np.ndarray:
    """``Psi: P -> (1/N) sum_n (h_n - h_bar) P (h_n - h_bar)`` for ``h_n = w_n x_n x_n^T``, on row-major ``vec(P)``.

    The per-example Hessians have rank one, so ``(1/N) sum_n w_n^2 x_a x_b x_c x_d`` is
    symmetric in its four indices: one Gram matrix of the rows ``w_n x_n (x) x_n``.
    """
    n, d = X.shape
    fourth = np.zeros((d * d, d * d))
    for start in range(0, n, chunk):
        x, ww = X[start : start + chunk], w[start : start + chunk]
        z = (ww[:, None, None] * x[:, :, None] * x[:, None, :]).reshape(len(x), d * d)
        fourth += z.T @ z
    h_bar = (X * w[:, None]).T @ X / n
    # t[a, c, e, b] = E[h_ac h_eb] - h_bar_ac h_bar_eb and Psi(P)_ab = sum_ce t[a, c, e, b] P_ce
    t = fourth.reshape(d, d, d, d) / n - np.einsum("ac,eb->aceb", h_bar, h_bar)
    return t.transpose(0, 3, 1, 2).reshape(d * d, d * d)


def problem_from_target(target, name: str | None = None) -> Problem:
    """The quadratic model of a linear or logistic data target with a minibatch size."""
    kind = target.extras.get("likelihood")
    if kind not in ("linear", "logistic") or target.stochastic_grad_u is None:
        raise ValueError(f"a linear or logistic regression target with a batch_size is needed, got {target.name!r}")
    X = np.asarray(target.extras["X"], float)
    if kind == "linear":
        theta, hess = np.asarray(target.mean, float), np.asarray(target.extras["precision"], float)
        w = np.full(X.shape[0], float(target.extras["noise_precision"]))
    else:
        theta = _logistic_map(target)
        hess, w = _logistic_hessian(X, theta, target.extras["prior_precision"])
    g = per_example_gradients(target, theta)
    dev = g - g.mean(axis=0)
    n, s = int(target.extras["n_data"]), int(target.extras["batch_size"])
    return Problem(
        name or target.name, target, theta, hess, dev.T @ dev / n, n, s,
        noise_factor(n, s, bool(target.extras["replace"])), kind == "linear", _hessian_spread(X, w),
    )  # fmt: skip


def make_problem(dataset: str, full: bool = True) -> Problem:
    """The problem of :data:`SETTINGS` ``[dataset]``; quick mode (``full=False``) may subsample."""
    st = SETTINGS[dataset]
    factory = targets.linear_regression if st.model == "linear" else targets.logistic_regression
    if full or st.quick_n is None:
        target = factory(dataset=dataset, batch_size=st.batch_size, prior_scale=PRIOR_SCALE)
    else:
        X, y = datasets.load(dataset, standardise=False)
        keep = np.sort(np.random.default_rng(SUBSAMPLE_SEED).choice(X.shape[0], st.quick_n, replace=False))
        target = factory(X[keep], y[keep], batch_size=st.quick_batch, prior_scale=PRIOR_SCALE)
    return dataclasses.replace(problem_from_target(target, dataset), source=(dataset, bool(full)))


@functools.lru_cache(maxsize=4)
def _cached_problem(dataset: str, full: bool) -> Problem:
    # a worker process builds each problem once for all its cells
    return make_problem(dataset, full)


# ----------------------------------------------------------------------------- the samplers


@dataclass(frozen=True)
class Tuning:
    """One sampler as run: the sgsim method, its options and its linearisation's pieces.

    Attributes
    ----------
    label : str
        Key of :data:`METHODS`.
    method : str
        The ``sgsim.sample`` method.
    options : dict
        Its options (``step_size``, ``preconditioner``, ``injected_cov``).
    lr : float
        The paper's rate ``epsilon`` (1 for preconditioned SGD, whose ``H`` absorbs it).
    H : ndarray, shape (D, D)
        The preconditioner (the identity for SGD and SGLD).
    injected : ndarray, shape (D, D)
        ``E E^T`` (SGFS; zero otherwise).
    rule : str
        How the rate or the preconditioner was chosen.
    """

    label: str
    method: str
    options: dict
    lr: float
    H: np.ndarray
    injected: np.ndarray
    rule: str


def _sgld(problem: Problem, lr: float) -> Tuning:
    d = problem.dim
    rule = f"largest mean-square-stable power of ten below 4 / lambda_max(N A): epsilon = {lr:.0e}"
    return Tuning("sgld", "sgld_wt", {"step_size": lr}, lr, np.eye(d), np.zeros((d, d)), rule)


def sgld_rate(problem: Problem) -> float:
    """SGLD's rate: the largest power of ten below ``4 / lambda_max(N A)`` that is mean-square stable."""
    limit = 4.0 / float(np.linalg.eigvalsh(problem.hessian)[-1])
    lr = 10.0 ** (math.ceil(math.log10(limit)) - 1)
    while not mean_square_radius(problem, _sgld(problem, lr)) < 1:
        lr /= 10
    return lr


def _sgfs_noise(problem: Problem, lr: float) -> tuple[np.ndarray, float]:
    """§5.2's injected ``E E^T`` and its cap ``h_max`` (module docs)."""
    c_batch = np.diag(problem.C) / problem.batch_size
    h_max = float(np.min(2.0 / (lr * problem.n_data * c_batch)))
    return np.diag(np.maximum(2.0 / (lr * problem.n_data * h_max) - c_batch, 0.0)), h_max


def tunings(problem: Problem) -> dict[str, Tuning]:
    """The six samplers of :data:`METHODS`, tuned by the paper's rules (module docs)."""
    c, n, s, d = problem.C, problem.n_data, problem.batch_size, problem.dim
    eye, zero = np.eye(d), np.zeros((d, d))
    eps = optimal_lr(c, n, s)
    h_diag = np.diag(diagonal_preconditioner(c, n, s))
    h_full = optimal_preconditioner(c, n, s)
    ee, h_max = _sgfs_noise(problem, eps)
    hd_sgfs = np.diag(sgfs_optimal_preconditioner(c / s, np.sqrt(ee), eps, n, kind="diagonal"))
    hf_sgfs = sgfs_optimal_preconditioner(c / s, np.sqrt(ee), eps, n, kind="full")
    sgfs_rule = f"at epsilon*, injected noise capping H_kk at h_max = {h_max:.3g}"
    return {
        "sgd": Tuning("sgd", "sgd", {"step_size": eps}, eps, eye, zero, f"Theorem 1: epsilon* = {eps:.3g}"),
        "sgd_d": Tuning(
            "sgd_d", "sgd", {"step_size": 1.0, "preconditioner": h_diag}, 1.0, np.diag(h_diag), zero,
            "Corollary 3: H_kk = 2 S / (N C_kk)",
        ),
        "sgd_f": Tuning(
            "sgd_f", "sgd", {"step_size": 1.0, "preconditioner": h_full}, 1.0, h_full, zero,
            "Theorem 2: H* = (2 S / N) C^-1",
        ),
        "sgld": _sgld(problem, sgld_rate(problem)),
        "sgfs_d": Tuning(
            "sgfs_d", "sgfs", {"step_size": eps, "preconditioner": hd_sgfs, "injected_cov": ee}, eps,
            np.diag(hd_sgfs), ee, f"Corollary 6 {sgfs_rule}",
        ),
        "sgfs_f": Tuning(
            "sgfs_f", "sgfs", {"step_size": eps, "preconditioner": hf_sgfs, "injected_cov": ee}, eps, hf_sgfs, ee,
            f"Theorem 5 {sgfs_rule}",
        ),
    }  # fmt: skip


# ----------------------------------------------------------------------------- predictions


def _gain(problem: Problem, tuning: Tuning) -> np.ndarray:
    """``G``: the step moves by ``-G`` times the minibatch gradient of ``L``."""
    if tuning.method == "sgld_wt":
        return 0.5 * tuning.lr * problem.n_data * np.eye(problem.dim)
    return tuning.lr * tuning.H


def linearisation(problem: Problem, tuning: Tuning) -> tuple[np.ndarray, np.ndarray]:
    """Mean drift ``M = G A`` and noise covariance ``Q`` per step of ``e <- (I - M_B) e + xi``."""
    g = _gain(problem, tuning)
    q = g @ (problem.C_noise / problem.batch_size + tuning.injected) @ g.T
    if tuning.method == "sgld_wt":
        q = q + tuning.lr * np.eye(problem.dim)
    return g @ problem.A, 0.5 * (q + q.T)


def relaxation_steps(problem: Problem, tuning: Tuning) -> float:
    """``1 / min Re eig(M)``: the slowest relaxation time of the mean, in steps."""
    m, _ = linearisation(problem, tuning)
    return 1.0 / float(np.min(np.linalg.eigvals(m).real))


def _second_moments(problem: Problem, tuning: Tuning) -> tuple[np.ndarray, np.ndarray]:
    """``T`` and ``vec Q`` with ``vec Sigma' = T vec Sigma + vec Q`` (minibatch Hessians; row-major vec)."""
    m, q = linearisation(problem, tuning)
    f, g = np.eye(problem.dim) - m, _gain(problem, tuning)
    spread = problem.noise_factor / problem.batch_size * problem.hessian_spread
    return np.kron(f, f) + np.kron(g, g) @ spread, q.reshape(-1)


def mean_square_radius(problem: Problem, tuning: Tuning) -> float:
    """Spectral radius of the second-moment recursion with minibatch Hessians (< 1: mean-square stable)."""
    return float(np.max(np.abs(np.linalg.eigvals(_second_moments(problem, tuning)[0]))))


def predicted_cov(problem: Problem, tuning: Tuning, kind: str = "ou") -> np.ndarray:
    """Stationary covariance of ``tuning``'s sampler: ``"ou"``, ``"discrete"`` or ``"exact"`` (module docs)."""
    a, c, s = problem.A, problem.C_noise, problem.batch_size
    if kind == "ou":
        if tuning.label == "sgd":
            return ou.sgd_cov(a, c, tuning.lr, s)
        if tuning.method == "sgd":
            return ou.preconditioned_sgd_cov(a, c, tuning.H, s)
        if tuning.method == "sgld_wt":
            return ou.sgld_cov(a, c, tuning.lr, problem.n_data, s)
        return ou.sgfs_cov(a, c / s, tuning.H, np.sqrt(tuning.injected), tuning.lr)
    if kind == "discrete":
        m, q = linearisation(problem, tuning)
        return stationary_covariance(np.eye(problem.dim) - m, q)
    if kind == "exact":
        op, q = _second_moments(problem, tuning)
        rho = float(np.max(np.abs(np.linalg.eigvals(op))))
        if not rho < 1:
            raise ValueError(f"{tuning.label} is not mean-square stable (radius {rho:.4g}): no stationary covariance")
        d = problem.dim
        sig = np.linalg.solve(np.eye(d * d) - op, q).reshape(d, d)
        return 0.5 * (sig + sig.T)
    raise ValueError(f"kind must be 'ou', 'discrete' or 'exact', got {kind!r}")


# ----------------------------------------------------------------------------- runs


def pooled_moments(means, covs, n_draws) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance (ddof 1) of the pooled draws of chains, from their means and covariances (ddof 1)."""
    means, covs, n = np.asarray(means, float), np.asarray(covs, float), np.asarray(n_draws, float)
    total = n.sum()
    mean = (n[:, None] * means).sum(axis=0) / total
    dev = means - mean
    scatter = np.einsum("c,cij->ij", n - 1, covs) + np.einsum("c,ci,cj->ij", n, dev, dev)
    return mean, scatter / (total - 1)


@dataclass
class MethodRun:
    """One sampler on one problem: the fitted Gaussian, the predictions and the KLs.

    Attributes
    ----------
    label : str
    tuning : Tuning
    mean, cov : ndarray
        The Gaussian fitted to the pooled iterates.
    chain_means, chain_covs : ndarray
        Per chain (for standard errors).
    n_steps, burn_in, n_chains : int
    relaxation : float
        Slowest relaxation time, in steps.
    cov_ou, cov_discrete, cov_exact : ndarray
        The predicted stationary covariances (module docs).
    kl, kl_se : float
        ``KL(fitted || posterior)`` and its jackknife standard error over chains.
    kl_ou, kl_exact : float
        The KL of the predicted laws (centred at ``theta*``).
    seed : int
    draws : ndarray or None
        Kept draws ``(chains, draws, D)`` when asked for.
    """

    label: str
    tuning: Tuning
    mean: np.ndarray
    cov: np.ndarray
    chain_means: np.ndarray
    chain_covs: np.ndarray
    n_steps: int
    burn_in: int
    n_chains: int
    relaxation: float
    cov_ou: np.ndarray
    cov_discrete: np.ndarray
    cov_exact: np.ndarray
    kl: float
    kl_se: float
    kl_ou: float
    kl_exact: float
    seed: int
    draws: np.ndarray | None = field(default=None, repr=False)

    @property
    def n_relax(self) -> float:
        """Relaxation times kept after burn-in, summed over chains."""
        return self.n_chains * (self.n_steps - self.burn_in) / self.relaxation

    def rel_frobenius(self, other: np.ndarray) -> float:
        """``||cov - other||_F / ||other||_F``."""
        return float(np.linalg.norm(self.cov - other) / np.linalg.norm(other))

    def rel_frobenius_noise(self) -> float:
        """Monte Carlo level of :meth:`rel_frobenius`: ``sqrt(sum_ij SE_ij^2) / ||cov||_F``, SEs from the chains."""
        se2 = self.chain_covs.var(axis=0, ddof=1) / self.n_chains
        return float(np.sqrt(se2.sum()) / np.linalg.norm(self.cov))


def _kl_fitted(problem: Problem, mean, cov) -> float:
    return float(gaussian_kl(mean, cov, problem.theta_star, problem.posterior_cov))


def _chain_moments(problem: Problem, tuning: Tuning, n_steps: int, n_chains: int, seed: int, thin: int) -> dict:
    """Each chain's mean and covariance of its kept draws (and the draws when ``thin`` > 0)."""
    tau = relaxation_steps(problem, tuning)
    burn = int(min(5 * tau, n_steps // 5))
    common = {
        "n_chains": n_chains, "init": np.tile(problem.theta_star, (n_chains, 1)), "burn_in": burn, "seed": seed,
        "progress": False,
    }  # fmt: skip
    if thin <= 0:
        mom = sample(problem.target, tuning.method, n_steps, storage="moments", **common, **tuning.options)["moments"]
        return {
            "means": mom["theta_mean"].values,
            "covs": mom["theta_cov"].values,
            "counts": mom["n_draws"].values,
            "burn_in": burn,
        }
    r = sample(problem.target, tuning.method, n_steps, thin=thin, **common, **tuning.options)
    draws = r.posterior["theta"].values
    return {
        "means": draws.mean(axis=1),
        "covs": np.stack([np.cov(x.T) for x in draws]),
        "counts": np.full(n_chains, draws.shape[1]),
        "burn_in": burn,
        "draws": draws,
    }


def method_cell(dataset: str, full: bool, label: str, n_steps: int, n_chains: int, thin: int, seed: int) -> dict:
    """One sampler on one data set (a sweep cell): :func:`_chain_moments` of ``make_problem(dataset, full)``."""
    problem = _cached_problem(dataset, full)
    return _chain_moments(problem, tunings(problem)[label], n_steps, n_chains, seed, thin)


def run_method(
    problem: Problem,
    label: str,
    n_steps: int,
    n_chains: int,
    seed: int,
    thin: int | None = None,
    tuning: Tuning | None = None,
) -> MethodRun:
    """Run ``label``'s sampler from ``theta*``; ``thin`` keeps every ``thin``-th draw (for plots).

    Burn-in: five slowest relaxation times, at most a fifth of ``n_steps``. ``tuning``
    replaces ``tunings(problem)[label]``. A diverging chain raises
    :class:`sgsim.sampling.DivergenceError`. A problem of :func:`make_problem` with its own
    tuning runs as a sweep cell (:func:`method_cell`, where :func:`sgsim.sweep.executing`
    says); any other runs here.
    """
    own = tuning is None
    tuning = tunings(problem)[label] if tuning is None else tuning
    if problem.source is not None and own:
        dataset, full = problem.source
        params = dict(dataset=dataset, full=full, label=label, n_steps=int(n_steps), n_chains=int(n_chains),
                      thin=int(thin or 0))  # fmt: skip
        (res,) = compute([Cell(method_cell, params, int(seed))])
    else:
        res = _chain_moments(problem, tuning, n_steps, n_chains, seed, int(thin or 0))
    return _assemble(problem, label, tuning, n_steps, n_chains, seed, res)


def _assemble(problem: Problem, label: str, tuning: Tuning, n_steps: int, n_chains: int, seed: int, res) -> MethodRun:
    """A :class:`MethodRun` from the chains' moments of :func:`_chain_moments`."""
    tau = relaxation_steps(problem, tuning)
    means, covs, counts = res["means"], res["covs"], res["counts"]
    burn, draws = int(res["burn_in"]), res.get("draws")
    mean, cov = pooled_moments(means, covs, counts)
    # jackknife over chains: the pooled fit without chain c, for each c
    loo = np.array([
        _kl_fitted(problem, *pooled_moments(np.delete(means, c, 0), np.delete(covs, c, 0), np.delete(counts, c)))
        for c in range(n_chains)
    ])  # fmt: skip
    kl_se = float(np.sqrt((n_chains - 1) / n_chains * np.sum((loo - loo.mean()) ** 2)))
    cov_ou, cov_exact = predicted_cov(problem, tuning, "ou"), predicted_cov(problem, tuning, "exact")
    a, n = problem.A, problem.n_data
    return MethodRun(
        label, tuning, mean, cov, means, covs, n_steps, burn, n_chains, tau, cov_ou,
        predicted_cov(problem, tuning, "discrete"), cov_exact, _kl_fitted(problem, mean, cov), kl_se,
        kl_to_posterior(cov_ou, a, n), kl_to_posterior(cov_exact, a, n), seed, draws,
    )  # fmt: skip


@dataclass(frozen=True)
class Budget:
    """Relaxation times kept per run (summed over chains), chains per run, and the fewest steps per chain."""

    n_relax: int
    n_chains: int
    min_steps: int = 2_000


#: Quick mode: about 150 effective draws of the slowest variance per run.
QUICK = Budget(n_relax=150, n_chains=4, min_steps=5_000)
#: Full mode: about 2,000.
FULL = Budget(n_relax=2_000, n_chains=8, min_steps=20_000)


def steps_for(problem: Problem, tuning: Tuning, budget: Budget) -> int:
    """Steps per chain: five relaxation times of burn-in plus ``n_relax / n_chains`` kept."""
    tau = relaxation_steps(problem, tuning)
    return max(budget.min_steps, math.ceil(tau * (5 + budget.n_relax / budget.n_chains)))


def run_seed(seed: int, *key: int) -> int:
    """The seed of one run, derived from the experiment ``seed`` and the run's ``key``."""
    return int(np.random.SeedSequence([seed, *key]).generate_state(1)[0])


def run_dataset(
    problem: Problem, budget: Budget, seed: int, methods=METHODS, draws_per_tau: float | None = None
) -> dict[str, MethodRun]:
    """Each sampler of ``methods`` on ``problem`` for ``budget``; run ``j`` has seed ``run_seed(seed, j)``.

    ``draws_per_tau`` keeps about that many draws per relaxation time (thinned) instead of
    running moments only. For a problem of :func:`make_problem` the samplers are the cells of
    one sweep (:func:`method_cell`), run where :func:`sgsim.sweep.executing` says.
    """
    tuned = tunings(problem)
    plan = []
    for j, label in enumerate(methods):
        tuning = tuned[label]
        n_steps = steps_for(problem, tuning, budget)
        thin = 0
        if draws_per_tau is not None:
            thin = max(1, int(relaxation_steps(problem, tuning) / draws_per_tau))
        plan.append((label, tuning, n_steps, thin, run_seed(seed, j)))
    if problem.source is None:
        return {
            label: run_method(problem, label, n_steps, budget.n_chains, s, thin or None, tuning)
            for label, tuning, n_steps, thin, s in plan
        }
    dataset, full = problem.source
    cells = [
        Cell(method_cell, dict(dataset=dataset, full=full, label=label, n_steps=n_steps, n_chains=budget.n_chains,
                               thin=thin), s)
        for label, _, n_steps, thin, s in plan
    ]  # fmt: skip
    results = compute(cells)
    return {
        label: _assemble(problem, label, tuning, n_steps, budget.n_chains, s, res)
        for (label, tuning, n_steps, _, s), res in zip(plan, results, strict=True)
    }


def posterior_draws(problem: Problem, n: int, seed: int) -> np.ndarray:
    """``n`` draws of ``N(theta*, (N A)^{-1})``: the exact posterior (linear) or its Laplace approximation."""
    chol = np.linalg.cholesky(problem.posterior_cov)
    return problem.theta_star + np.random.default_rng(seed).standard_normal((n, problem.dim)) @ chol.T
