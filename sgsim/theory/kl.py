r"""KL-optimal learning rates and preconditioners for constant SGD as approximate inference.

"Stochastic Gradient Descent as Approximate Bayesian Inference" (Mandt, Hoffman and Blei)
treats the stationary law ``q = N(0, Sigma)`` of constant SGD (its OU approximation,
:mod:`sgsim.theory.ou`) as a variational approximation of the posterior
``f = N(0, (N A)^{-1})`` of a quadratic averaged loss, and chooses the learning rate or the
preconditioner that minimises ``KL(q || f)`` (§4). Units are that paper's: rate ``epsilon`` on
the averaged loss, minibatch ``S``, ``N`` data points, ``C`` the per-example gradient
covariance, ``D`` the dimension.

Closed forms (each exact in the OU model):

- :func:`optimal_lr`: ``epsilon* = 2 S D / (N Tr C)`` (Theorem 1);
- :func:`optimal_preconditioner`: ``H* = (2 S / N) C^{-1}``, which makes ``Sigma = (N A)^{-1}``
  and ``KL = 0`` (Theorem 2, Corollary 4);
- :func:`diagonal_preconditioner`: ``H_kk = 2 S / (N C_kk)`` (Corollary 3), the minimiser of a
  surrogate that drops a term depending on ``H``: the true KL-optimal diagonal
  (:func:`kl_optimal_diagonal_preconditioner`, found numerically) differs unless ``C`` is
  diagonal;
- :func:`sqrt_preconditioner_lr`: with ``G = diag(C)^{1/2}`` and ``theta <- theta - epsilon
  G^{-1} g``, ``epsilon* = 2 D S / (N sum_k sqrt(C_kk))`` (Theorem 7);
- :func:`reverse_kl_optimal_lr`: the minimiser of ``KL(f || q)``,
  ``epsilon* = (2 S / (N D)) Tr(C^{-1})``, exact when ``A`` and ``C`` commute (eq. 41);
- SGFS (§5.2): :func:`sgfs_optimal_preconditioner` ``H* = (2 / (epsilon N)) (C + E E^T)^{-1}``
  (Theorem 5), its diagonal and scalar versions (Corollary 6), and
  :func:`sgfs_stability_noise`, the injected ``(E E^T)_kk = 2 / (epsilon N h_max) - C_kk`` that
  caps every diagonal entry of ``H*`` at ``h_max``;
- Theorem 5 over both the preconditioner and the injected noise: :func:`sgfs_kl` (the OU law's
  KL), :func:`sgfs_optimal_pair` (a joint minimiser in closed form: ``KL = 0`` for every ``H``
  with ``H <= (2 / (epsilon N)) C^{-1}``, and with a cap ``H <= h_max I`` the injected noise of
  least trace) and :func:`sgfs_optimal_noise` (the best noise for a given ``H``: closed form
  where ``KL = 0`` is reachable, otherwise a convex minimisation whose optimality conditions
  are verified);
- :func:`reverse_kl_minimiser`: the minimiser of ``KL(f || q)`` for any ``A`` and ``C``, which
  eq. 41 gives only when they commute.

**Stability.** Every rate above is the optimum of the OU law, which knows nothing of the
recursion's own stability limit: ``theta' = (I - epsilon H A) theta`` diverges once
``epsilon lambda_max(H A) >= 2``. Given ``A``, the rate and preconditioner functions check
their answer with :func:`check_stability`, which warns (:class:`StabilityWarning`) beyond the
limit.

The KL itself comes from :func:`sgsim.theory.gaussian_kl`. Nothing here imports an integrator.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize, minimize_scalar

from .._validate import ParameterError, boolean, count, finite_array, finite_values, positive_float, renamed
from .distances import gaussian_kl
from .exact_law import _spd
from .ou import lyapunov, preconditioned_sgd_cov, sgd_cov, sgfs_cov

__all__ = [
    "kl_to_posterior",
    "reverse_kl_to_posterior",
    "optimal_lr",
    "optimal_preconditioner",
    "diagonal_preconditioner",
    "kl_optimal_diagonal_preconditioner",
    "sqrt_preconditioner_lr",
    "reverse_kl_optimal_lr",
    "sgfs_optimal_preconditioner",
    "sgfs_stability_noise",
    "StabilityWarning",
    "stability_ratio",
    "check_stability",
    "reverse_kl_minimiser",
    "sgfs_kl",
    "sgfs_optimal_pair",
    "NoiseOptimum",
    "sgfs_optimal_noise",
]


def _posterior(A, n_data) -> np.ndarray:
    a = _spd("A", A)
    return np.linalg.inv(float(count("n_data", n_data)) * a)


class StabilityWarning(UserWarning):
    """A KL-optimal rate or preconditioner beyond the stability limit of the SGD recursion.

    The KL-optimal rates are optima of the OU law; the recursion
    ``theta' = (I - epsilon H A) theta - epsilon H noise`` has a stationary law only while
    ``epsilon lambda_max(H A) < 2``. Beyond it the iterates oscillate with a growing amplitude in
    the stiffest directions instead of sampling.
    """


def stability_ratio(lr, A, H=None) -> float:
    """``epsilon lambda_max(H A) / 2``: the rate as a fraction of the recursion's stability limit.

    The limit is that of the discrete recursion ``theta' = (I - epsilon H A) theta`` (constant SGD,
    preconditioned SGD and SGFS alike): stable iff the ratio is < 1, that is
    ``epsilon < 2 / lambda_max(H A)`` (``2 / lambda_max(A)`` without a preconditioner). The OU
    model has no such limit. ``H A`` is similar to ``H^{1/2} A H^{1/2}``, so its eigenvalues are
    real and positive.
    """
    a = _spd("A", A)
    eps = positive_float("lr", lr)
    if H is None:
        lam_max = np.linalg.eigvalsh(a)[-1]
    else:
        h = _spd("H", H, a.shape[0])
        root = np.linalg.cholesky(h)  # H = L L^T: H A is similar to L^T A L
        lam_max = np.linalg.eigvalsh(root.T @ a @ root)[-1]
    with np.errstate(over="ignore"):  # refused just below, by name
        ratio = np.float64(eps) * (lam_max / 2.0)
    finite_values("lr", ratio, what="the ratio lr lambda_max(H A) / 2", hint=f" (lr = {eps:g})")
    return float(ratio)


def check_stability(lr, A, H=None, what: str = "the rate") -> float:
    """:func:`stability_ratio`, with a :class:`StabilityWarning` when it is >= 1; returns the ratio."""
    ratio = stability_ratio(lr, A, H)
    if not ratio < 1:
        warnings.warn(
            f"{what} is {ratio:.3g} times the stability limit of the SGD recursion "
            f"(epsilon lambda_max(H A) = {2 * ratio:.4g} >= 2): it is the optimum of the OU model, "
            "but the discrete iterates diverge there instead of sampling",
            StabilityWarning,
            stacklevel=3,
        )
    return ratio


def _finite(name: str, value, what: str):
    """``value`` computed with overflow allowed, refused by ``name`` where it left the floats."""
    finite_values(name, value, what=what)
    return value


def _smaller(**values: float) -> str:
    """The name of the smallest of some positive values (the one a quotient overflows through)."""
    return min(values, key=lambda name: values[name])


def kl_to_posterior(Sigma, A, n_data) -> float:
    """``KL(N(0, Sigma) || N(0, (N A)^{-1}))`` (§4.1), in nats."""
    post = _posterior(A, n_data)
    sig = _spd("Sigma", Sigma, post.shape[0])
    d = post.shape[0]
    return float(gaussian_kl(np.zeros(d), sig, np.zeros(d), post))


def reverse_kl_to_posterior(Sigma, A, n_data) -> float:
    """``KL(N(0, (N A)^{-1}) || N(0, Sigma))`` (appendix C), in nats."""
    post = _posterior(A, n_data)
    sig = _spd("Sigma", Sigma, post.shape[0])
    d = post.shape[0]
    return float(gaussian_kl(np.zeros(d), post, np.zeros(d), sig))


def optimal_lr(C, n_data, batch_size, A=None) -> float:
    """Theorem 1: ``epsilon* = 2 S D / (N Tr C)``, the constant rate whose OU law is KL-closest to the posterior.

    Only ``Tr C`` enters: ``C`` may be singular (softmax regression's per-example gradients sum
    to zero over the classes), though not zero. Given the Hessian ``A``, the rate is checked
    against the recursion's stability limit ``2 / lambda_max(A)`` (:func:`check_stability`: a
    :class:`StabilityWarning` beyond it).

    Examples
    --------
    ``epsilon* = 2 * 10 * 2 / (1000 * 10) = 0.004``; half or twice that rate gives a larger KL
    between the OU stationary law (:func:`sgsim.theory.ou.sgd_cov`) and the posterior:

    >>> import numpy as np
    >>> from sgsim.theory import kl, ou
    >>> A, C = np.diag([1.0, 4.0]), np.diag([2.0, 8.0])
    >>> n_data, batch_size = 1000, 10
    >>> lr = kl.optimal_lr(C, n_data, batch_size)
    >>> print(round(lr, 6))
    0.004
    >>> kls = [kl.kl_to_posterior(ou.sgd_cov(A, C, f * lr, batch_size), A, n_data) for f in (0.5, 1.0, 2.0)]
    >>> print([round(x, 3) for x in kls])
    [0.416, 0.223, 0.53]
    """
    c = _spd("C", C, allow_singular=True)
    if not np.trace(c) > 0:
        raise ParameterError("C", "C must not be zero: Theorem 1's rate is 2 S D / (N Tr C)")
    a = None if A is None else _spd("A", A, c.shape[0])
    lr = 2.0 * float(count("batch_size", batch_size)) * c.shape[0] / (float(count("n_data", n_data)) * np.trace(c))
    if a is not None:
        check_stability(lr, a, what="Theorem 1's rate")
    return lr


def optimal_preconditioner(C, n_data, batch_size, A=None) -> np.ndarray:
    """Theorem 2: ``H* = (2 S / N) C^{-1}``; then ``Sigma = (N A)^{-1}`` exactly (``A`` need not be known).

    Given ``A``, ``theta' = (I - H* A) theta`` is checked against its stability limit
    ``lambda_max(H* A) < 2`` (:func:`check_stability`).
    """
    c = _spd("C", C)
    a = None if A is None else _spd("A", A, c.shape[0])
    h = 2.0 * float(count("batch_size", batch_size)) / float(count("n_data", n_data)) * np.linalg.inv(c)
    if a is not None:
        check_stability(1.0, a, h, what="Theorem 2's preconditioner")
    return h


def diagonal_preconditioner(C, n_data, batch_size) -> np.ndarray:
    """Corollary 3 (the paper's rule): ``H_kk = 2 S / (N C_kk)``, as a diagonal matrix.

    It minimises the paper's surrogate ``(N / (4 S)) Tr(C H) - (1/2) log det H``; the KL-optimal
    diagonal is :func:`kl_optimal_diagonal_preconditioner`, equal to this one when ``C`` is diagonal.
    """
    c = _spd("C", C)
    return np.diag(2.0 * float(count("batch_size", batch_size)) / (float(count("n_data", n_data)) * np.diag(c)))


def kl_optimal_diagonal_preconditioner(A, C, n_data, batch_size) -> np.ndarray:
    """The diagonal ``H`` that minimises the OU stationary law's ``KL(q || f)``, found numerically.

    Minimises over ``log h_k`` (BFGS from the paper's rule) the KL of
    :func:`sgsim.theory.ou.preconditioned_sgd_cov`'s covariance to the posterior. Preconditioners
    that make the OU process unstable do not occur: ``H A`` is similar to
    ``H^{1/2} A H^{1/2}``, positive definite for every positive diagonal ``H``.
    """
    a = _spd("A", A)
    c = _spd("C", C, a.shape[0])
    n, s = float(count("n_data", n_data)), float(count("batch_size", batch_size))

    def objective(log_h):
        h = np.diag(np.exp(log_h))
        return kl_to_posterior(preconditioned_sgd_cov(a, c, h, s), a, n)

    start = np.log(np.diag(diagonal_preconditioner(c, n, s)))
    best = minimize(objective, start, method="BFGS", options={"gtol": 1e-10})
    return np.diag(np.exp(best.x))


def sqrt_preconditioner_lr(C, n_data, batch_size, A=None) -> float:
    """Theorem 7: with ``G = diag(C)^{1/2}``, ``epsilon* = 2 D S / (N sum_k sqrt(C_kk))``.

    Given ``A``, checked against the stability limit ``epsilon lambda_max(G^{-1} A) < 2``.
    """
    c = _spd("C", C)
    a = None if A is None else _spd("A", A, c.shape[0])
    n, s = float(count("n_data", n_data)), float(count("batch_size", batch_size))
    lr = 2.0 * c.shape[0] * s / (n * float(np.sum(np.sqrt(np.diag(c)))))
    if a is not None:
        check_stability(lr, a, np.diag(1.0 / np.sqrt(np.diag(c))), what="Theorem 7's rate")
    return lr


def reverse_kl_optimal_lr(C, n_data, batch_size, A=None) -> float:
    """Eq. 41: ``epsilon* = (2 S / (N D)) Tr(C^{-1})``, the minimiser of ``KL(f || q)`` when ``[A, C] = 0``.

    For ``A`` and ``C`` that do not commute, :func:`reverse_kl_minimiser`. Given ``A``, the rate is
    checked against the stability limit ``2 / lambda_max(A)``.
    """
    c = _spd("C", C)
    a = None if A is None else _spd("A", A, c.shape[0])
    n, s = float(count("n_data", n_data)), float(count("batch_size", batch_size))
    lr = 2.0 * s / (n * c.shape[0]) * float(np.trace(np.linalg.inv(c)))
    if a is not None:
        check_stability(lr, a, what="eq. 41's rate")
    return lr


def reverse_kl_minimiser(A, C, n_data, batch_size, exact: bool = False) -> float:
    r"""The constant-SGD rate that minimises ``KL(f || q)`` for any ``A`` and ``C`` (App. C).

    OU law (``exact=False``): ``Sigma = (epsilon / S) Sigma_0`` with ``A Sigma_0 + Sigma_0 A = C``
    (eq. 13 at ``epsilon / S = 1``), so eq. 39 reads, up to constants,
    ``KL(f || q) = (S / (2 N epsilon)) Tr(A^{-1} Sigma_0^{-1}) + (D / 2) log epsilon``, strictly
    convex in ``1 / epsilon``, with the unique minimiser

    ``epsilon*_rev = S Tr(A^{-1} Sigma_0^{-1}) / (N D)``.

    When ``A`` and ``C`` commute, ``Sigma_0 = A^{-1} C / 2`` and this is eq. 41. Otherwise eq. 41
    is not the minimiser: the step from eq. 39 to eq. 40 needs ``Sigma^{-1}`` to commute with
    ``A``.

    Exact discrete law (``exact=True``): ``Sigma`` solves
    ``A Sigma + Sigma A - epsilon A Sigma A = (epsilon / S) C`` and is not linear in ``epsilon``;
    the reverse KL is minimised over ``log epsilon`` inside the stability limit
    ``(0, 2 / lambda_max(A))`` by bounded Brent iterations, and the minimum is verified: the
    reverse KL must be larger 0.1 % either side of it (else a ``RuntimeError``).
    """
    a = _spd("A", A)
    c = _spd("C", C, a.shape[0])
    n, s = float(count("n_data", n_data)), float(count("batch_size", batch_size))
    d = a.shape[0]
    sigma0 = lyapunov(a, c)
    lr_ou = s * float(np.trace(np.linalg.solve(a, np.linalg.inv(sigma0)))) / (n * d)
    if not boolean("exact", exact):
        return lr_ou
    limit = 2.0 / float(np.linalg.eigvalsh(a)[-1])

    def objective(log_lr):
        return reverse_kl_to_posterior(sgd_cov(a, c, np.exp(log_lr), s, exact=True), a, n)

    hi = np.log(limit) - 1e-9
    lo = min(np.log(lr_ou), hi) - 12.0
    best = minimize_scalar(objective, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10})
    lr, f0 = float(np.exp(best.x)), float(best.fun)
    side = [objective(best.x + delta) for delta in (-1e-3, 1e-3) if best.x + delta < hi]
    if not (best.success and all(f > f0 for f in side)):
        raise RuntimeError(f"the exact reverse-KL minimisation did not reach a verified minimum (lr {lr:.6g})")
    return lr


def sgfs_optimal_preconditioner(C, E, lr, n_data, kind: str = "full", A=None) -> np.ndarray:
    """SGFS's KL-optimal preconditioner (§5.2), for one example per step.

    ``"full"`` (Theorem 5): ``H* = (2 / (epsilon N)) (C + E E^T)^{-1}``, which makes the OU law the
    posterior exactly; ``"diagonal"`` (Corollary 6): ``H_kk = (2 / (epsilon N)) / (C_kk + (E E^T)_kk)``
    (a surrogate's minimiser, as in Corollary 3); ``"scalar"``:
    ``h = 2 D / (epsilon N sum_k (C_kk + (E E^T)_kk))``. Given ``A``, the update
    ``theta' = (I - epsilon H A) theta`` is checked against its stability limit
    ``epsilon lambda_max(H A) < 2`` (:func:`check_stability`).
    """
    c = _spd("C", C)
    e = finite_array("E", E, c.shape)
    eps, n = positive_float("lr", lr), float(count("n_data", n_data))
    a = None if A is None else _spd("A", A, c.shape[0])
    if kind not in ("full", "diagonal", "scalar"):
        raise ParameterError("kind", f"kind must be 'full', 'diagonal' or 'scalar', got {kind!r}")
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # refused below, by name
        total = _finite("E", c + e @ e.T, "C + E E^T")
        g = _finite("lr", np.float64(2.0) / eps / n, "2 / (lr n_data)")
        if kind == "full":
            h = g * np.linalg.inv(total)
        elif kind == "diagonal":
            h = np.diag(g / np.diag(total))
        else:
            h = c.shape[0] * g / float(np.trace(total)) * np.eye(c.shape[0])
    _finite("lr", h, "the preconditioner (it grows as 2 / (lr n_data))")
    if a is not None:
        check_stability(eps, a, h, what=f"SGFS's {kind} preconditioner")
    return h


def sgfs_stability_noise(C, lr, n_data, h_max) -> np.ndarray:
    """The injected diagonal noise ``(E E^T)_kk = 2 / (epsilon N h_max) - C_kk``: it caps SGFS's ``H*_kk`` at ``h_max``.

    Raises when some ``C_kk`` already exceeds ``2 / (epsilon N h_max)`` (no nonnegative noise does it).
    """
    c = _spd("C", C)
    eps, n, h = positive_float("lr", lr), float(count("n_data", n_data)), positive_float("h_max", h_max)
    with np.errstate(over="ignore", divide="ignore"):  # refused just below, by name
        need = np.float64(2.0) / eps / n / h - np.diag(c)
    _finite(_smaller(lr=eps, h_max=h), need, "2 / (lr n_data h_max)")
    if np.any(need < 0):
        raise ParameterError("h_max", f"h_max {h:.4g} is below 2 / (lr n_data C_kk) for some k: no noise caps H* there")
    return np.diag(need)


def sgfs_kl(A, C, H, injected_cov, lr, n_data) -> float:
    """``KL(q || f)`` of SGFS's OU law (:func:`sgsim.theory.ou.sgfs_cov`) with injected covariance ``E E^T``.

    The objective of Theorem 5, a function of both the preconditioner ``H`` and the injected
    noise; ``C`` is for one example per step (pass ``C / S`` for a minibatch).
    """
    a = _spd("A", A)
    m = _spd("injected_cov", injected_cov, a.shape[0], allow_singular=True)
    e = _psd_factor(m)
    sigma = sgfs_cov(a, C, H, e, lr)
    with renamed(Sigma="lr", S0="lr"):  # a tiny lr makes SGFS's covariance vanish to the floats
        return kl_to_posterior(sigma, a, n_data)


def _psd_factor(m: np.ndarray) -> np.ndarray:
    """A square ``E`` with ``E E^T = m`` for a symmetric positive semidefinite ``m``."""
    lam, u = np.linalg.eigh(0.5 * (m + m.T))
    return u * np.sqrt(np.clip(lam, 0.0, None))


def _positive_part(m: np.ndarray) -> np.ndarray:
    lam, u = np.linalg.eigh(0.5 * (m + m.T))
    out = (u * np.clip(lam, 0.0, None)) @ u.T
    return 0.5 * (out + out.T)


def sgfs_optimal_pair(C, lr, n_data, h_max=None) -> tuple[np.ndarray, np.ndarray]:
    """A pair ``(H, E E^T)`` minimising SGFS's ``KL(q || f)`` jointly over both (Theorem 5), in closed form.

    Theorem 5 makes the OU law the posterior (``KL = 0``) for *every* injected ``M = E E^T``, with
    ``H = (2 / (epsilon N)) (C + M)^{-1}``. Over both, the minimisers are therefore all pairs with
    ``C + M = (2 / (epsilon N)) H^{-1}``: every ``H`` with ``0 < H <= (2 / (epsilon N)) C^{-1}`` (Loewner
    order) and its ``M = (2 / (epsilon N)) H^{-1} - C``; ``A`` plays no part.

    Without a cap this returns ``M = 0``, ``H = (2 / (epsilon N)) C^{-1}`` (Theorem 2's
    preconditioner). With a cap ``H <= h_max I`` (§5.2's stability device, as a matrix bound) it
    returns the minimiser whose injected noise has the least trace:
    ``M = (tau I - C)_+`` with ``tau = 2 / (epsilon N h_max)`` (the positive part, in ``C``'s
    eigenbasis), so that ``H`` has ``C``'s eigenvectors and eigenvalues
    ``min(2 / (epsilon N c_k), h_max)``. Any ``M >= 0`` with ``C + M >= tau I`` satisfies
    ``Tr M >= Tr (tau I - C)_+`` (project onto the positive eigenspace of ``tau I - C``), so no
    cheaper noise meets the cap. The diagonal recipe :func:`sgfs_stability_noise` caps only the
    diagonal ``H`` of Corollary 6: unless ``C`` is diagonal, the full ``H*`` it leads to has
    eigenvalues above ``h_max``.

    Parameters
    ----------
    C : array_like, shape (D, D)
        Per-example gradient covariance (one example per step; ``C / S`` for a minibatch),
        symmetric positive definite (positive semidefinite with ``h_max``).
    lr : float
        ``epsilon > 0``.
    n_data : int
        ``N >= 1``.
    h_max : float, optional
        Cap on ``H``'s eigenvalues.

    Returns
    -------
    H, injected_cov : ndarray, shape (D, D)
    """
    eps, n = positive_float("lr", lr), float(count("n_data", n_data))
    with np.errstate(over="ignore", divide="ignore"):
        g = np.float64(2.0) / eps / n  # 2 / (epsilon N), inf when lr is below 2 / n_data / 1.8e308
    if h_max is None:
        c = _spd("C", C)
        with np.errstate(over="ignore", invalid="ignore"):  # refused just below, by name
            h = g * np.linalg.inv(c)
        return _finite("lr", h, "the preconditioner 2 / (lr n_data) C^-1"), np.zeros_like(c)
    c = _spd("C", C, allow_singular=True)
    cap = positive_float("h_max", h_max)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # refused just below, by name
        tau = g / cap
        # in C's eigenbasis: M = (tau - c_k)_+ and H = min(2 / (epsilon N c_k), h_max), the same as
        # (2 / (epsilon N)) (C + M)^-1 without forming 2 / (epsilon N) times a small inverse
        lam, u = np.linalg.eigh(c)
        lam = np.clip(lam, 0.0, None)
        h_eig = np.where(lam > 0, np.minimum(g / np.where(lam > 0, lam, 1.0), cap), cap)
        m = (u * np.maximum(tau - lam, 0.0)) @ u.T
    _finite(_smaller(lr=eps, h_max=cap), m, "the injected noise 2 / (lr n_data h_max) - C")
    h = (u * h_eig) @ u.T
    return 0.5 * (h + h.T), 0.5 * (m + m.T)


@dataclass(frozen=True)
class NoiseOptimum:
    """The injected noise that minimises SGFS's KL for a given preconditioner (:func:`sgfs_optimal_noise`).

    Attributes
    ----------
    injected_cov : ndarray, shape (D, D)
        ``M = E E^T`` at the optimum.
    kl : float
        ``KL(q || f)`` there (0 when ``closed_form``).
    closed_form : bool
        True when ``(2 / (epsilon N)) H^{-1} - C`` is positive semidefinite and is the answer.
    gradient : ndarray, shape (D, D)
        ``dKL / dM`` at the optimum (zero in closed form).
    kkt_residual : float
        ``max(-lambda_min(G) Tr(C) / D, |Tr(G M)|)`` for the gradient ``G``, in nats: the
        optimality conditions hold to this.
    """

    injected_cov: np.ndarray
    kl: float
    closed_form: bool
    gradient: np.ndarray
    kkt_residual: float


def _sgfs_noise_gradient(a, c, h, m, eps, n) -> tuple[float, np.ndarray]:
    """KL and ``dKL/dM`` of SGFS's OU law at injected covariance ``m`` (module docs of :func:`sgfs_optimal_noise`)."""
    ha = h @ a
    sigma = lyapunov(ha, eps * h @ (c + m) @ h)
    d = a.shape[0]
    kl = float(gaussian_kl(np.zeros(d), sigma, np.zeros(d), np.linalg.inv(n * a)))
    w = 0.5 * (n * a - np.linalg.inv(sigma))
    y = lyapunov(ha.T, w)  # A H Y + Y H A = W, the adjoint of M -> Sigma
    g = eps * h @ y @ h
    return kl, 0.5 * (g + g.T)


def sgfs_optimal_noise(A, C, H, lr, n_data, tol: float = 1e-8) -> NoiseOptimum:
    r"""The injected covariance ``M = E E^T >= 0`` that minimises SGFS's ``KL(q || f)`` for a given ``H``.

    Theorem 5 fixes ``E`` and optimises ``H``; here ``H`` is fixed (for instance capped for
    stability) and ``M`` is chosen. When ``M_0 = (2 / (epsilon N)) H^{-1} - C`` is positive
    semidefinite it is the answer, with ``KL = 0``. Otherwise no noise reaches the posterior and
    the minimiser is found numerically: the OU covariance ``Sigma(M)`` solves
    ``H A Sigma + Sigma A H = epsilon H (C + M) H`` and is affine in ``M``, and
    ``KL = (1/2)[N Tr(A Sigma) - log det Sigma] + const`` is convex in ``Sigma``, so the problem is
    convex over the cone ``M >= 0``. Its gradient is ``G = epsilon H Y H`` with
    ``A H Y + Y H A = (N A - Sigma^{-1}) / 2``, and ``M`` is optimal iff (KKT)
    ``G >= 0`` and ``Tr(G M) = 0``. BFGS over a triangular factor ``M = L L^T`` (started at
    ``(M_0)_+``) finds it; the conditions are then checked to ``tol`` nats
    (``-lambda_min(G) Tr(C) / D <= tol`` and ``|Tr(G M)| <= tol``) and a ``RuntimeError`` is
    raised if they fail.

    Parameters
    ----------
    A, C, H : array_like, shape (D, D)
        Hessian, per-example gradient covariance (one example per step; ``C / S`` for a
        minibatch) and preconditioner.
    lr : float
        ``epsilon > 0``.
    n_data : int
        ``N >= 1``.
    tol : float
        Tolerance of the optimality check.
    """
    a = _spd("A", A)
    d = a.shape[0]
    c = _spd("C", C, d, allow_singular=True)
    h = _spd("H", H, d)
    eps, n = positive_float("lr", lr), float(count("n_data", n_data))
    tol = positive_float("tol", tol)
    m0 = 2.0 / (eps * n) * np.linalg.inv(h) - c
    m0 = 0.5 * (m0 + m0.T)
    c_scale = float(np.trace(c)) / d
    if np.linalg.eigvalsh(m0)[0] >= 0:
        kl, g = _sgfs_noise_gradient(a, c, h, m0, eps, n)
        return NoiseOptimum(m0, kl, True, g, float(np.abs(g).max()) * c_scale)
    rows, cols = np.tril_indices(d)

    def unpack(x):
        lower = np.zeros((d, d))
        lower[rows, cols] = x
        return lower

    def objective(x):
        lower = unpack(x)
        kl, g = _sgfs_noise_gradient(a, c, h, lower @ lower.T, eps, n)
        return kl, (2.0 * g @ lower)[rows, cols]

    start = np.linalg.cholesky(_positive_part(m0) + 1e-6 * np.trace(c) / d * np.eye(d))[rows, cols]
    best = minimize(objective, start, jac=True, method="BFGS", options={"gtol": 1e-11, "maxiter": 10_000})
    lower = unpack(best.x)
    m = lower @ lower.T
    kl, g = _sgfs_noise_gradient(a, c, h, m, eps, n)
    residual = max(-float(np.linalg.eigvalsh(g)[0]) * c_scale, abs(float(np.trace(g @ m))))
    if not residual <= tol:
        raise RuntimeError(f"the injected-noise minimisation did not meet its optimality conditions ({residual:.3g})")
    return NoiseOptimum(0.5 * (m + m.T), kl, False, g, residual)
