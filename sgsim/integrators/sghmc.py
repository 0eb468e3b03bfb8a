r"""SGHMC and cyclical SGHMC, in the cyclical paper's parametrisation and update order.

.. math::

    \theta_k = \theta_{k-1} + v_{k-1}, \qquad
    v_k = (1-\eta) v_{k-1} - \alpha_k \nabla\tilde U(\theta_k)
          + \sqrt{2 (\eta - \hat\gamma) \alpha_k T_k}\, \xi_k

("Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning", §2). The position moves
first and the gradient is taken at the *new* position; ``v_0 = 0`` unless given. ``eta`` is
the friction (``1 - eta`` the momentum coefficient) and ``gamma_hat`` in ``[0, eta]`` the
estimate of the gradient noise. In Chen, Fox and Guestrin's (2014) unit-mass notation,
``alpha = epsilon^2`` and ``eta = epsilon C``; eliminating ``v`` gives heavy-ball momentum
SGD with ``mu = eta``.

``csghmc`` drives the same update with the cosine cyclical schedule; its exploration
steps run at ``T = 0``, i.e. SGD with momentum. The momentum is not reset at stage or
cycle boundaries, as in the reference code.

Gradient-noise correction (``noise_correction=True``): the injected covariance becomes
``2 eta alpha_k T_k I - alpha_k^2 V`` so that the total is exactly ``2 eta alpha_k T_k I``
(:func:`sgsim.dynamics.sghmc_noise`); for ``V = s^2 I`` this is
``gamma_hat_k = alpha_k s^2 / (2 T_k)`` (``alpha_k s^2 / 2`` at ``T = 1``),
and it needs ``alpha_k V <= 2 eta T_k I``. It cannot be combined with a non-zero ``gamma_hat``.

Stability: on ``U = L x^2 / 2`` one step maps ``(theta, v)`` by the companion matrix
``M = [[1, 1], [-alpha L, 1 - eta - alpha L]]`` (the position moves, then the velocity takes
the gradient there), with ``det M = 1 - eta`` and ``tr M = 2 - eta - alpha L``. By the Jury
criterion both eigenvalues lie inside the unit circle exactly while ``|det M| < 1`` and
``|tr M| < 1 + det M``, that is for ``eta`` in ``(0, 1]`` while
``0 < alpha L < 2 (2 - eta)`` (``sgsim.theory``'s stationary SGHMC law needs the same).
``gamma_hat`` changes the noise only. With ``L`` the target's
:meth:`~sgsim.targets.Target.curvature_bound`, a run whose every step is at or beyond
``2 (2 - eta) / L`` is refused before any work (an error naming ``step_size`` and the limit); a
schedule beyond it on at least half of its steps warns; a cyclical schedule beyond it only on the
first steps of each cycle runs, watched by the divergence check (``step_check`` of
:func:`sgsim.sample` overrides this).

The exact discrete-time law on linear-Gaussian targets is :func:`sgsim.theory.sghmc_law`; at
stationarity on ``U = a theta^2 / 2`` the velocity variance is ``alpha / (1 - eta/2)``, not
``alpha``.
"""

from __future__ import annotations

from typing import NamedTuple

from .. import dynamics
from .._jit import jit
from .._validate import ParameterError, real
from ._base import (
    CONSTANT_OPTIONS,
    CYCLICAL_OPTIONS,
    INDEPENDENT,
    Algorithm,
    Method,
    Option,
    check_unit_interval,
    constant_schedule,
    curvature_limit,
    cyclical_schedule,
)

__all__ = ["SGHMC", "METHOD", "CYCLICAL", "Constants", "move", "update", "step_limit"]


@jit(inline=True)
def move(x, theta, a, consts):
    """``theta += v`` (``v`` is ``x[1]``): the gradient is then taken at the new position."""
    for i in range(theta.shape[0]):
        theta[i] += x[1, i]


@jit(inline=True)
def update(x, theta, g, z, noisy, a, k, consts):
    """``v <- (1 - eta) v - a g + z``, ``g = grad U~(theta)`` at the moved ``theta``."""
    keep = consts.keep
    if noisy:
        for i in range(theta.shape[0]):
            x[1, i] = keep * x[1, i] - a * g[i] + z[i]
    else:
        for i in range(theta.shape[0]):
            x[1, i] = keep * x[1, i] - a * g[i]


class Constants(NamedTuple):
    """What the step reads: ``keep = 1 - eta``."""

    keep: float


def _check(options: dict, target) -> dict:
    eta = options["friction"]
    options["gamma_hat"] = real("gamma_hat", options["gamma_hat"], 0.0, eta)
    if options["noise_correction"] and options["gamma_hat"] > 0:
        raise ParameterError(
            "gamma_hat",
            f"gamma_hat must be 0 with noise_correction=True (the correction sets it), got {options['gamma_hat']}",
        )
    return options


def _noise(block, target, options):
    return dynamics.sghmc_noise(
        block.step_size,
        block.temperature,
        target.grad_noise_cov,
        options["friction"],
        options["gamma_hat"],
        options["noise_correction"],
    )


def step_limit(target, options):
    """``2 (2 - eta) / L``: the companion matrix of the step on ``U = L x^2 / 2`` (module docs)."""
    eta = options["friction"]
    return curvature_limit(target, 2.0 * (2.0 - eta), f"step_size * L < 2 (2 - eta), eta = {eta:g}")


SGHMC = Algorithm(
    name="sghmc",
    summary="stochastic gradient Hamiltonian Monte Carlo in the cyclical paper's parametrisation",
    coupling=INDEPENDENT,
    state=("theta", "velocity"),
    options={
        "friction": Option(0.1, check_unit_interval, "eta in (0, 1]: the velocity keeps 1 - eta per step"),
        "gamma_hat": Option(0.0, lambda name, value: real(name, value, 0.0), "gradient-noise estimate in [0, eta]"),
    },
    units="cyclical paper: alpha = epsilon^2, eta = epsilon C; injected variance 2 (eta - gamma_hat) alpha T",
    step=(move, update),
    constants=lambda options: Constants(1.0 - options["friction"]),
    noise=_noise,
    check=_check,
    step_limit=step_limit,
    asymptotically_exact=True,
    references="Chen, Fox and Guestrin (2014); [cSG] §2",
)

METHOD = Method(
    "sghmc",
    SGHMC,
    constant_schedule,
    CONSTANT_OPTIONS,
    "stochastic gradient HMC ([cSG] parametrisation), constant step size unless a schedule is given",
    "Chen, Fox and Guestrin (2014); [cSG] §2",
)

CYCLICAL = Method(
    "csghmc",
    SGHMC,
    cyclical_schedule,
    CYCLICAL_OPTIONS,
    "cyclical SGHMC: cosine step sizes, momentum SGD exploration at T=0, sampling at T=1",
    "[cSG] eq. 2 and Algorithm 1",
    example={"step_size": 0.05, "n_cycles": 2},
)
