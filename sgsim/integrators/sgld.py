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
    cyclical_schedule,
)
from ._loop import stay

__all__ = ["SGLD", "METHOD", "CYCLICAL", "update"]


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
