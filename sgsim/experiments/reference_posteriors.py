r"""An exact reference sampler for the reference posteriors: preconditioned MALA over many chains.

State, initialisation and update
--------------------------------
The state of a chain is its position ``x`` in ``R^d`` (the unconstrained scale), its log
density ``log p(x)`` and gradient ``g(x)``. All ``C`` chains start from the rows of ``x0`` and
move together: one call of ``logp_grad`` per step evaluates every chain's proposal. With a
step size ``h > 0`` and a preconditioner ``M = L L^T`` (the metric), the
Metropolis-adjusted Langevin algorithm proposes

.. math::

    y = x + \tfrac{h}{2} M g(x) + \sqrt{h}\, L \xi, \qquad \xi \sim N(0, I_d),

the Euler step of the Langevin diffusion ``dX = (1/2) M grad log p(X) dt + L dW`` over time
``h``, and accepts it with probability

.. math::

    \alpha(x, y) = \min\Bigl(1, \frac{p(y)\, q(x \mid y)}{p(x)\, q(y \mid x)}\Bigr), \qquad
    q(y \mid x) = N\bigl(y;\ x + \tfrac{h}{2} M g(x),\ h M\bigr),

(Roberts and Tweedie, "Exponential convergence of Langevin distributions and their discrete
approximations", Bernoulli 1996, eq. 2.3 and §1.4.2; preconditioned as in Girolami and
Calderhead, "Riemann manifold Langevin and Hamiltonian Monte Carlo methods", JRSS B 2011,
eq. 10 with a constant metric). A proposal whose log density or gradient is not finite is
rejected, as outside the support. Written with ``s = g(x) + g(y)``, the log ratio of the
proposal densities is

.. math::

    \log q(x \mid y) - \log q(y \mid x)
        = -\tfrac12 \bigl\| \xi + \tfrac{\sqrt h}{2} L^\top s \bigr\|^2 + \tfrac12 \|\xi\|^2,

which needs neither ``M^{-1}`` nor a determinant.

Why it is exact
---------------
For fixed ``h`` and ``M`` each step is a Metropolis-Hastings step with the proposal ``q``,
so it leaves the target invariant (detailed balance, whatever ``h``); the proposal has a
positive density everywhere, so the chain is irreducible and aperiodic and its draws have
the target as their law in the limit, without the ``O(h)`` bias of the unadjusted Langevin
algorithm. Adapting ``h`` and ``M`` from the chains' past breaks the Markov property, so
they are adapted during warm-up only and frozen after it: the kept draws are an exact
Metropolis-Hastings chain started from the warm-up's last state.

Warm-up (as Stan adapts its metric)
-----------------------------------
* The step size, shared by the chains, follows Nesterov's dual averaging on ``log h``
  (Hoffman and Gelman, "The No-U-Turn Sampler", JMLR 2014, §3.2.1, Algorithm 5, with their
  ``gamma = 0.05``, ``t0 = 10``, ``kappa = 0.75``), driven by the chains' mean acceptance
  probability towards ``target_accept`` (0.574, the optimal rate of MALA in high dimension:
  Roberts and Rosenthal, "Optimal scaling of discrete approximations to Langevin
  diffusions", JRSS B 1998). It restarts from ``10 h`` after each change of the metric and
  ends at its averaged iterate.
* The metric is estimated three times, at 25%, 50% and 75% of the warm-up, from the draws of
  the window that ends there (12.5%-25%, 25%-50%, 50%-75%: the first 12.5% only let the
  chains leave their starting points): the covariance of all chains' draws about their
  common mean, dense when ``d <= 50`` and diagonal above (a dense estimate needs many more
  draws than ``d``), shrunk a little towards its diagonal (weight ``5 / (n + 5)`` for ``n``
  draws, as Stan's regularisation). The last 25% adapt the step size to the final metric.
  Chains stuck in different modes of a multimodal target inflate the metric; the draws stay
  exact, only slower.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .._validate import ParameterError, ParameterTypeError, boolean, finite_array, integer, positive_float, real

__all__ = ["MalaResult", "mala", "DENSE_METRIC_MAX_DIM"]

#: Largest dimension with a dense metric; above it the metric is diagonal.
DENSE_METRIC_MAX_DIM = 50

# dual averaging constants of Hoffman and Gelman (2014), Algorithm 5
_GAMMA, _T0, _KAPPA = 0.05, 10.0, 0.75
_MAX_LOG_H = 300.0
# metric windows as fractions of the warm-up: (start, end); the metric changes at each end
_WINDOWS = ((0.125, 0.25), (0.25, 0.5), (0.5, 0.75))
# fewer warm-up steps than this adapt the step size only (a window would hold too few draws)
_MIN_WARMUP_FOR_METRIC = 100


@dataclass(frozen=True)
class MalaResult:
    """What :func:`mala` returns.

    Attributes
    ----------
    draws : ndarray
        ``(n_chains, n_draws, d)``, the kept states after warm-up (every ``thin``-th).
    log_density : ndarray
        ``(n_chains, n_draws)``, ``log p`` at the kept states, as ``logp_grad`` returned it.
    acceptance_rate : float
        Fraction of accepted proposals after warm-up, over all chains and steps (kept or not).
    chain_acceptance : ndarray
        ``(n_chains,)``, the same per chain: a chain far below the others is stuck.
    step_size : float
        ``h`` after warm-up (fixed while drawing).
    metric : ndarray
        ``M`` after warm-up: ``(d, d)`` when dense, ``(d,)`` (its diagonal) when diagonal.
    n_nonfinite : int
        Proposals after warm-up rejected because ``log p`` or its gradient was not finite.
    seed, n_warmup, thin : int
        The run's arguments, recorded with its output.
    """

    draws: np.ndarray
    log_density: np.ndarray
    acceptance_rate: float
    chain_acceptance: np.ndarray
    step_size: float
    metric: np.ndarray
    n_nonfinite: int
    seed: int
    n_warmup: int
    thin: int


class _DualAveraging:
    """Nesterov's dual averaging of ``log h`` (Hoffman and Gelman 2014, Algorithm 5)."""

    def __init__(self, step_size: float, target: float):
        self.target = target
        self.restart(step_size)

    def restart(self, step_size: float) -> None:
        # a larger step than the last good one: the averaged iterate then comes down to it
        self.mu = math.log(10.0 * step_size)
        self.t = 0
        self.h_bar = 0.0
        self.log_h = math.log(step_size)
        self.log_h_bar = 0.0

    def update(self, accept_prob: float) -> float:
        self.t += 1
        w = 1.0 / (self.t + _T0)
        self.h_bar = (1.0 - w) * self.h_bar + w * (self.target - accept_prob)
        # bounded: a target that accepts every step (flat far out) must not overflow exp
        self.log_h = min(max(self.mu - math.sqrt(self.t) / _GAMMA * self.h_bar, -_MAX_LOG_H), _MAX_LOG_H)
        eta = self.t**-_KAPPA
        self.log_h_bar = eta * self.log_h + (1.0 - eta) * self.log_h_bar
        return math.exp(self.log_h)

    def final(self) -> float:
        return math.exp(self.log_h_bar) if self.t else math.exp(self.log_h)


def _estimate_metric(window: np.ndarray, dense: bool) -> np.ndarray | None:
    # window: (T, C, d). The covariance of all chains' draws about their common mean: a
    # coordinate that mixes slowly moves little within one chain over a window, while the
    # chains, started apart, still span its spread (the total variance of R-hat's
    # decomposition); too wide a metric only costs a smaller step, too narrow a slow chain
    n_steps, n_chains, _ = window.shape
    if n_steps < 3:
        return None
    n = n_chains * n_steps - 1
    weight = n / (n + 5.0)
    # chains that drifted off to huge values (an improper target) give a non-finite estimate: kept out below
    with np.errstate(all="ignore"):
        centred = window - window.mean(axis=(0, 1))
        if dense:
            flat = centred.reshape(-1, centred.shape[2])
            cov = flat.T @ flat / n
            var = np.diag(cov)
            metric = weight * cov + (1.0 - weight) * np.diag(var)
        else:
            var = np.einsum("tcd,tcd->d", centred, centred) / n
            metric = var
    # a coordinate that did not move (every proposal rejected) says nothing about its scale
    if not (np.all(np.isfinite(metric)) and np.all(var > 0)):
        return None
    if dense:
        try:
            np.linalg.cholesky(metric)
        except np.linalg.LinAlgError:
            return np.asarray(var)
    return np.asarray(metric)


def _factor(metric: np.ndarray) -> np.ndarray:
    # L with M = L L^T: the Cholesky factor of a dense metric, the square roots of a diagonal one
    return np.linalg.cholesky(metric) if metric.ndim == 2 else np.sqrt(metric)


def mala(
    logp_grad: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    x0,
    n_warmup: int,
    n_draws: int,
    seed: int,
    *,
    thin: int = 1,
    target_accept: float = 0.574,
    step_size: float | None = None,
    metric=None,
    adjust: bool = True,
) -> MalaResult:
    r"""Sample a density with preconditioned MALA, ``C`` chains at once (see the module docstring).

    Parameters
    ----------
    logp_grad : callable
        ``logp_grad(X) -> (logp, grad)``: for ``X`` float64 of shape ``(C, d)`` (one row per
        chain, the unconstrained scale), ``logp`` of shape ``(C,)``, the log density up to a
        constant, and ``grad`` of shape ``(C, d)``, its gradient. Called once per step with all
        chains' proposals. At a proposal outside the support it may return a non-finite
        ``logp``: the proposal is rejected (NumPy's floating-point warnings are silenced
        around the call for that reason).
    x0 : array_like
        ``(C, d)``, the chains' starting points; ``logp`` and ``grad`` must be finite there.
        Disperse them (draws from a wide approximation) so that the chains can reveal a
        failure to mix.
    n_warmup : int
        Steps of adaptation, ``>= 0``, discarded. From 100 steps on, the metric is adapted
        too (unless ``metric`` is given).
    n_draws : int
        Draws kept per chain after warm-up, ``>= 1``; ``n_draws * thin`` steps are run.
    seed : int
        Seed of ``numpy.random.default_rng``, the only source of randomness: the same
        arguments give the same bits.
    thin : int, default 1
        Keep every ``thin``-th state after warm-up.
    target_accept : float, default 0.574
        Mean acceptance probability aimed at by the step-size adaptation, in (0, 1).
    step_size : float, optional
        A fixed ``h``: no step-size adaptation. Default: adapted, starting from 0.1.
    metric : array_like, optional
        A fixed ``M``, ``(d, d)`` symmetric positive definite or ``(d,)`` positive (diagonal):
        no metric adaptation. Default: adapted in warm-up, starting from the identity.
    adjust : bool, default True
        ``False`` accepts every proposal with a finite ``logp``: the unadjusted Langevin
        algorithm, biased by ``O(h)``; for comparisons and for negative controls only.

    Returns
    -------
    MalaResult
        The draws ``(C, n_draws, d)``, their log densities, the acceptance rates after
        warm-up, and the frozen ``h`` and ``M``.

    Examples
    --------
    >>> import numpy as np
    >>> from sgsim.experiments.reference_posteriors import mala
    >>> def logp_grad(x):  # N(1, 4) in each of 2 coordinates
    ...     return -0.125 * ((x - 1.0) ** 2).sum(axis=1), -0.25 * (x - 1.0)
    >>> result = mala(logp_grad, np.zeros((4, 2)), n_warmup=500, n_draws=2000, seed=1)
    >>> result.draws.shape
    (4, 2000, 2)
    >>> print(np.round(result.draws.mean(axis=(0, 1)), 1), np.round(result.draws.var(axis=(0, 1)), 0))
    [1. 1.] [4. 4.]
    >>> print(round(result.acceptance_rate, 1))
    0.6
    """
    if not callable(logp_grad):
        raise ParameterTypeError("logp_grad", "logp_grad must be callable")
    x = finite_array("x0", x0)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise ParameterError("x0", f"x0 must have shape (n_chains, d) with both >= 1, got {x.shape}")
    n_chains, dim = x.shape
    n_warmup = integer("n_warmup", n_warmup, 0)
    n_draws = integer("n_draws", n_draws, 1)
    seed = integer("seed", seed, 0)
    thin = integer("thin", thin, 1)
    target_accept = real("target_accept", target_accept, 0.0, 1.0, low_open=True, high_open=True)
    adjust = boolean("adjust", adjust)
    adapt_step = step_size is None
    h = 0.1 if step_size is None else positive_float("step_size", step_size)
    adapt_metric = metric is None and n_warmup >= _MIN_WARMUP_FOR_METRIC
    dense = dim <= DENSE_METRIC_MAX_DIM
    if metric is None:
        m = np.eye(dim) if dense else np.ones(dim)
    else:
        m = finite_array("metric", metric)
        if m.shape == (dim,):
            if not np.all(m > 0):
                raise ParameterError("metric", "a diagonal metric must be > 0")
        elif m.shape == (dim, dim):
            if not np.allclose(m, m.T, rtol=1e-12, atol=0.0):
                raise ParameterError("metric", "metric must be symmetric")
            try:
                np.linalg.cholesky(m)
            except np.linalg.LinAlgError:
                raise ParameterError("metric", "metric must be positive definite") from None
        else:
            raise ParameterError("metric", f"metric must have shape ({dim},) or ({dim}, {dim}), got {m.shape}")
    factor = _factor(m)

    def evaluate(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # a proposal may land where the density under- or overflows: that is a rejection, not an error
        with np.errstate(all="ignore"):
            lp, grad = logp_grad(points)
        lp = np.asarray(lp, dtype=np.float64)
        grad = np.asarray(grad, dtype=np.float64)
        if lp.shape != (n_chains,) or grad.shape != (n_chains, dim):
            raise ParameterError(
                "logp_grad",
                f"logp_grad must return shapes ({n_chains},) and ({n_chains}, {dim}), got {lp.shape} and {grad.shape}",
            )
        return lp, grad

    lp, grad = evaluate(x.copy())
    if not (np.all(np.isfinite(lp)) and np.all(np.isfinite(grad))):
        raise ParameterError("x0", "logp_grad must be finite (log density and gradient) at every row of x0")

    rng = np.random.default_rng(seed)
    averaging = _DualAveraging(h, target_accept)
    windows = [(int(a * n_warmup), int(b * n_warmup)) for a, b in _WINDOWS] if adapt_metric else []
    window_buffer: np.ndarray | None = None

    n_steps = n_warmup + n_draws * thin
    draws = np.empty((n_chains, n_draws, dim))
    log_density = np.empty((n_chains, n_draws))
    accepted = np.zeros(n_chains, dtype=np.int64)
    n_nonfinite = 0
    root_h = math.sqrt(h)
    for step in range(n_steps):
        xi = rng.standard_normal((n_chains, dim))
        log_u = np.log(rng.random(n_chains))
        drift = grad @ m if m.ndim == 2 else grad * m
        noise = xi @ factor.T if factor.ndim == 2 else xi * factor
        y = x + 0.5 * h * drift + root_h * noise
        lp_y, grad_y = evaluate(y)
        finite = np.isfinite(lp_y) & np.all(np.isfinite(grad_y), axis=1)
        with np.errstate(all="ignore"):
            s = grad + grad_y
            lt_s = s @ factor if factor.ndim == 2 else s * factor
            back = xi + 0.5 * root_h * lt_s
            log_alpha = lp_y - lp + 0.5 * (np.einsum("cd,cd->c", xi, xi) - np.einsum("cd,cd->c", back, back))
        log_alpha = np.where(finite & ~np.isnan(log_alpha), log_alpha, -np.inf)
        accept = finite if not adjust else log_u < log_alpha
        x = np.where(accept[:, None], y, x)
        lp = np.where(accept, lp_y, lp)
        grad = np.where(accept[:, None], grad_y, grad)

        if step < n_warmup:
            if adapt_step:
                h = averaging.update(float(np.mean(np.exp(np.minimum(log_alpha, 0.0)))))
            for start, end in windows:
                if not start <= step < end:
                    continue
                if step == start:
                    window_buffer = np.empty((end - start, n_chains, dim))
                assert window_buffer is not None
                window_buffer[step - start] = x
                if step == end - 1:
                    estimate = _estimate_metric(window_buffer, dense)
                    window_buffer = None
                    if estimate is not None:
                        m, factor = estimate, _factor(estimate)
                        if adapt_step:
                            h = averaging.final()
                            averaging.restart(h)
            if step == n_warmup - 1 and adapt_step:
                h = averaging.final()
            root_h = math.sqrt(h)
        else:
            kept = step - n_warmup
            accepted += accept
            n_nonfinite += int(np.count_nonzero(~finite))
            if (kept + 1) % thin == 0:
                draws[:, kept // thin] = x
                log_density[:, kept // thin] = lp

    n_after = n_draws * thin
    return MalaResult(
        draws=draws,
        log_density=log_density,
        acceptance_rate=float(accepted.sum() / (n_after * n_chains)),
        chain_acceptance=accepted / n_after,
        step_size=float(h),
        metric=np.array(m),
        n_nonfinite=n_nonfinite,
        seed=seed,
        n_warmup=n_warmup,
        thin=thin,
    )
