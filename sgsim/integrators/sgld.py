r"""SGLD and cyclical SGLD, in the cyclical paper's convention.

.. math::

    \theta_k = \theta_{k-1} - \alpha_k \nabla\tilde U(\theta_{k-1}) + \sqrt{2 \alpha_k T_k}\, \xi_k,
    \qquad \xi_k \sim N(0, I_d)

("Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning", §2; the paper prints
:math:`\nabla\tilde U(\theta_k)`, an index typo). Drift ``alpha * grad U`` and noise
variance ``2 alpha``: Welling and Teh's ``epsilon`` is ``2 alpha``.

``csgld`` is the same update driven by the cosine cyclical schedule (eq. 2): steps with
``r(k) < beta`` run at ``T = 0``, which is exactly plain SGD, and are not collected
(Algorithm 1).

Gradient-noise correction (``noise_correction=True``, off by default): with emulated
gradient noise of covariance ``V`` the injected covariance is reduced to
``2 alpha T I - alpha^2 V``, so the total per-step noise is exactly ``2 alpha T I``, as in the
paper's reference 25-Gaussian code (:func:`sgsim.dynamics.sgld_noise`). It requires
``alpha_k V <= 2 T_k I`` at every sampling step.

Stability: on ``U = L x^2 / 2`` the step is ``x <- (1 - alpha L) x + noise``, whose mean and
variance stay bounded exactly while ``alpha L < 2`` (its stationary variance
``2 alpha T / (1 - (1 - alpha L)^2)`` grows without bound as ``alpha L -> 2``). With ``L`` the
target's :meth:`~sgsim.targets.Target.curvature_bound`, a run whose every step has
``alpha_k >= 2 / L`` is refused before any work (an error naming ``step_size`` and the limit); a
schedule beyond it on at least half of its steps warns; a cyclical schedule beyond it only on
the first steps of each cycle (the exploration at large steps is the method's design) runs,
watched by the divergence check. ``step_check`` of :func:`sgsim.sample` overrides this.

Correctness: for ``alpha_k -> 0`` with ``sum alpha_k = inf`` SGLD's iterates converge weakly to
``exp(-U/T)`` (Teh, Thiery and Vollmer 2016); [cSG] Theorem 1 bounds the Wasserstein distance
for the cyclical schedule. On linear-Gaussian targets the exact law of every iterate is
Gaussian (:func:`sgsim.theory.sgld_law`), which the tests check.
"""

from __future__ import annotations

from .. import dynamics
from .._jit import jit
from ._base import (
    CONSTANT_OPTIONS,
    CYCLICAL_OPTIONS,
    INDEPENDENT,
    NO_CONSTANTS,
    Algorithm,
    Method,
    constant_schedule,
    curvature_limit,
    cyclical_schedule,
)
from ._loop import stay

__all__ = ["SGLD", "METHOD", "CYCLICAL", "update", "step_limit"]


@jit(inline=True)
def update(x, theta, g, z, noisy, a, k, consts):
    """``theta <- theta - a g + z``: ``g = grad U~(theta)``, ``z`` the step's noise."""
    if noisy:
        for i in range(theta.shape[0]):
            theta[i] = theta[i] - a * g[i] + z[i]
    else:
        for i in range(theta.shape[0]):
            theta[i] = theta[i] - a * g[i]


def _noise(block, target, options):
    return dynamics.sgld_noise(block.step_size, block.temperature, target.grad_noise_cov, options["noise_correction"])


def step_limit(target, options):
    """``2 / L``: SGLD on ``U = L x^2 / 2`` contracts exactly while ``step_size * L < 2`` (module docs)."""
    return curvature_limit(target, 2.0, "step_size * L < 2")


SGLD = Algorithm(
    name="sgld",
    summary="stochastic gradient Langevin dynamics",
    coupling=INDEPENDENT,
    state=("theta",),
    options={},
    units="cyclical paper: drift step_size * grad U, injected noise variance 2 * step_size * T",
    step=(stay, update),
    constants=lambda options: NO_CONSTANTS,
    noise=_noise,
    step_limit=step_limit,
    asymptotically_exact=True,
    references="Welling and Teh (2011); [cSG] §2",
)

METHOD = Method(
    "sgld",
    SGLD,
    constant_schedule,
    CONSTANT_OPTIONS,
    "stochastic gradient Langevin dynamics, constant step size unless a schedule is given",
    "Welling and Teh (2011); [cSG] §2",
)

CYCLICAL = Method(
    "csgld",
    SGLD,
    cyclical_schedule,
    CYCLICAL_OPTIONS,
    "cyclical SGLD: cosine step sizes, SGD exploration at T=0, sampling at T=1",
    "[cSG] eq. 2 and Algorithm 1",
    example={"step_size": 0.05, "n_cycles": 2},
)
