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
  caps every diagonal entry of ``H*`` at ``h_max``.

The KL itself comes from :func:`sgsim.theory.gaussian_kl`. Nothing here imports an integrator.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from .._validate import ParameterError, finite_array, positive_float
from .distances import gaussian_kl
from .exact_law import _spd
from .ou import preconditioned_sgd_cov

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
]


def _posterior(A, n_data) -> np.ndarray:
    a = _spd("A", A)
    return np.linalg.inv(positive_float("n_data", n_data) * a)


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


def optimal_lr(C, n_data, batch_size) -> float:
    """Theorem 1: ``epsilon* = 2 S D / (N Tr C)``, the constant rate whose OU law is KL-closest to the posterior.

    Only ``Tr C`` enters: ``C`` may be singular (softmax regression's per-example gradients sum
    to zero over the classes), though not zero.

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
    return (
        2.0 * positive_float("batch_size", batch_size) * c.shape[0] / (positive_float("n_data", n_data) * np.trace(c))
    )


def optimal_preconditioner(C, n_data, batch_size) -> np.ndarray:
    """Theorem 2: ``H* = (2 S / N) C^{-1}``; then ``Sigma = (N A)^{-1}`` exactly (``A`` need not be known)."""
    c = _spd("C", C)
    return 2.0 * positive_float("batch_size", batch_size) / positive_float("n_data", n_data) * np.linalg.inv(c)


def diagonal_preconditioner(C, n_data, batch_size) -> np.ndarray:
    """Corollary 3 (the paper's rule): ``H_kk = 2 S / (N C_kk)``, as a diagonal matrix.

    It minimises the paper's surrogate ``(N / (4 S)) Tr(C H) - (1/2) log det H``; the KL-optimal
    diagonal is :func:`kl_optimal_diagonal_preconditioner`, equal to this one when ``C`` is diagonal.
    """
    c = _spd("C", C)
    return np.diag(2.0 * positive_float("batch_size", batch_size) / (positive_float("n_data", n_data) * np.diag(c)))


def kl_optimal_diagonal_preconditioner(A, C, n_data, batch_size) -> np.ndarray:
    """The diagonal ``H`` that minimises the OU stationary law's ``KL(q || f)``, found numerically.

    Minimises over ``log h_k`` (BFGS from the paper's rule) the KL of
    :func:`sgsim.theory.ou.preconditioned_sgd_cov`'s covariance to the posterior. Preconditioners
    that make the OU process unstable do not occur: ``H A`` is similar to
    ``H^{1/2} A H^{1/2}``, positive definite for every positive diagonal ``H``.
    """
    a = _spd("A", A)
    c = _spd("C", C, a.shape[0])
    n, s = positive_float("n_data", n_data), positive_float("batch_size", batch_size)

    def objective(log_h):
        h = np.diag(np.exp(log_h))
        return kl_to_posterior(preconditioned_sgd_cov(a, c, h, s), a, n)

    start = np.log(np.diag(diagonal_preconditioner(c, n, s)))
    best = minimize(objective, start, method="BFGS", options={"gtol": 1e-10})
    return np.diag(np.exp(best.x))


def sqrt_preconditioner_lr(C, n_data, batch_size) -> float:
    """Theorem 7: with ``G = diag(C)^{1/2}``, ``epsilon* = 2 D S / (N sum_k sqrt(C_kk))``."""
    c = _spd("C", C)
    n, s = positive_float("n_data", n_data), positive_float("batch_size", batch_size)
    return 2.0 * c.shape[0] * s / (n * float(np.sum(np.sqrt(np.diag(c)))))


def reverse_kl_optimal_lr(C, n_data, batch_size) -> float:
    """Eq. 41: ``epsilon* = (2 S / (N D)) Tr(C^{-1})``, the minimiser of ``KL(f || q)`` when ``[A, C] = 0``."""
    c = _spd("C", C)
    n, s = positive_float("n_data", n_data), positive_float("batch_size", batch_size)
    return 2.0 * s / (n * c.shape[0]) * float(np.trace(np.linalg.inv(c)))


def sgfs_optimal_preconditioner(C, E, lr, n_data, kind: str = "full") -> np.ndarray:
    """SGFS's KL-optimal preconditioner (§5.2), for one example per step.

    ``"full"`` (Theorem 5): ``H* = (2 / (epsilon N)) (C + E E^T)^{-1}``, which makes the OU law the
    posterior exactly; ``"diagonal"`` (Corollary 6): ``H_kk = (2 / (epsilon N)) / (C_kk + (E E^T)_kk)``
    (a surrogate's minimiser, as in Corollary 3); ``"scalar"``:
    ``h = 2 D / (epsilon N sum_k (C_kk + (E E^T)_kk))``.
    """
    c = _spd("C", C)
    e = finite_array("E", E, c.shape)
    eps, n = positive_float("lr", lr), positive_float("n_data", n_data)
    total = c + e @ e.T
    if kind == "full":
        return 2.0 / (eps * n) * np.linalg.inv(total)
    if kind == "diagonal":
        return np.diag(2.0 / (eps * n) / np.diag(total))
    if kind == "scalar":
        return 2.0 * c.shape[0] / (eps * n * float(np.trace(total))) * np.eye(c.shape[0])
    raise ParameterError("kind", f"kind must be 'full', 'diagonal' or 'scalar', got {kind!r}")


def sgfs_stability_noise(C, lr, n_data, h_max) -> np.ndarray:
    """The injected diagonal noise ``(E E^T)_kk = 2 / (epsilon N h_max) - C_kk``: it caps SGFS's ``H*_kk`` at ``h_max``.

    Raises when some ``C_kk`` already exceeds ``2 / (epsilon N h_max)`` (no nonnegative noise does it).
    """
    c = _spd("C", C)
    eps, n, h = positive_float("lr", lr), positive_float("n_data", n_data), positive_float("h_max", h_max)
    need = 2.0 / (eps * n * h) - np.diag(c)
    if np.any(need < 0):
        raise ParameterError("h_max", f"h_max {h:.4g} is below 2 / (lr n_data C_kk) for some k: no noise caps H* there")
    return np.diag(need)
