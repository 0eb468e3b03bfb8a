r"""Preconditioned SGLD with the RMSprop preconditioner (pSGLD), with or without its Gamma term.

Li, Chen, Carlson and Carin (2016), "Preconditioned stochastic gradient Langevin dynamics for
deep neural networks", Algorithm 1, in the cyclical paper's units:

.. math::

    V_k = \beta V_{k-1} + (1 - \beta)\, g_k \odot g_k, \qquad
    G_k = \operatorname{diag}\big(1 / (\lambda + \sqrt{V_k})\big),

    \theta_k = \theta_{k-1} - \alpha_k G_k g_k + \alpha_k T_k \Gamma_k
               + \sqrt{2 \alpha_k T_k}\; G_k^{1/2} \xi_k,

``g_k = grad U~(theta_{k-1})``, ``xi_k ~ N(0, I_d)``, ``V_0 = 0`` unless given (the state's
``second_moment`` row). The paper accumulates the mean per-example gradient of the
log-likelihood, ``N`` times smaller than ``grad U`` (and without the prior); with a
learning rate ``epsilon`` on its scale, its chain is this one with ``alpha = epsilon N / 2`` and
``lambda = N lambda_paper``. At ``T = 0`` (the cyclical schedule's exploration) the step is
RMSprop.

The Gamma term. A position-dependent preconditioner ``G(theta)`` needs the drift ``T div G``
for ``exp(-U/T)`` to stay invariant (the generator ``div(G (T grad + grad U))``); for a
diagonal ``G`` that is ``Gamma_i = d G_ii / d theta_i``. The paper leaves it out (``psgld``,
its recommended form) and bounds the bias this causes; ``psgld_gamma`` includes it. Here the
preconditioner depends on ``theta`` through ``V``, which tracks ``g(theta)^2`` when the chain
moves slowly on the scale of the average's memory ``1 / (1 - beta)`` steps; so ``Gamma`` is the
derivative of ``1 / (lambda + |g_i(theta)|)``,

.. math::

    \Gamma_i = -\frac{g_i\, \partial_i g_i}{\sqrt{V_i}\,(\lambda + \sqrt{V_i})^2}

[derived here]. Differentiating only the newest term of the moving average, as a literal
reading of the paper's ``d G(theta_t) / d theta_t`` does, gives ``(1 - beta)`` times this, which
leaves most of the bias in place unless ``beta`` is small. The curvature ``partial_i g_i`` is
estimated, one coordinate at a time, by the secant of the gradient along the chain's last
move, ``(g_{k,i} - g_{k-1,i}) / (theta_{k-1,i} - theta_{k-2,i})`` (kept in the state's rows
``last_theta`` and ``last_gradient``; zero on the first step and where a coordinate did not
move): exact on separable targets as the step goes to 0, noisy with minibatch gradients. The
Gamma term scales with the step's temperature, which the update reads as ``t``.

Stability: no limit is checked. On ``U = L x^2 / 2`` the step contracts while
``alpha G L < 2``, and ``G <= 1 / lambda`` makes ``alpha L < 2 lambda`` sufficient; but ``G``
adapts to the gradients (it shrinks as ``|g|`` grows), so no step size is unstable for every
state of the preconditioner, and a refusal would have no necessary limit to rest on. A run
that blows up is caught by the divergence check.

Neither form is affine on a Gaussian target (``G`` depends on the gradients), so they have no
exact Gaussian law; the conformance kit checks their compiled steps against NumPy oracles, and
the tests check the stationary moments on a non-Gaussian target. A target's emulated gradient
noise would have to enter ``V`` before the step and is refused; minibatch targets are fine.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._jit import jit
from .._validate import ParameterError, real
from ..dynamics import Noise
from ._base import (
    CONSTANT_OPTIONS,
    CYCLICAL_OPTIONS,
    INDEPENDENT,
    Algorithm,
    Method,
    Option,
    constant_schedule,
    cyclical_schedule,
    exact_kit_target,
    refuse_emulated_noise,
)
from ._loop import stay

__all__ = ["PSGLD", "PSGLD_GAMMA", "METHODS", "Constants", "update", "update_gamma", "oracle", "oracle_gamma"]


class Constants(NamedTuple):
    """What the steps read: the average's decay ``beta`` and the floor ``lambda``."""

    decay: float
    floor: float


@jit(inline=True)
def update(x, theta, g, z, noisy, a, k, consts):
    """``V <- beta V + (1 - beta) g^2``, then ``theta <- theta - a G g + G^(1/2) z``."""
    beta = consts.decay
    for i in range(theta.shape[0]):
        v = beta * x[1, i] + (1.0 - beta) * g[i] * g[i]
        x[1, i] = v
        gi = 1.0 / (consts.floor + math.sqrt(v))
        step = theta[i] - a * gi * g[i]
        theta[i] = step + math.sqrt(gi) * z[i] if noisy else step


@jit(inline=True)
def update_gamma(x, theta, g, z, noisy, a, t, k, consts):
    """:func:`update` with the drift ``a t Gamma`` (``t`` the step's temperature); rows 2, 3 keep the last move."""
    beta = consts.decay
    for i in range(theta.shape[0]):
        v = beta * x[1, i] + (1.0 - beta) * g[i] * g[i]
        x[1, i] = v
        root = math.sqrt(v)
        gi = 1.0 / (consts.floor + root)
        moved = theta[i] - x[2, i]
        drift = -a * gi * g[i]
        if t > 0.0 and k > 0 and moved != 0.0 and root > 0.0:
            curvature = (g[i] - x[3, i]) / moved
            drift -= a * t * g[i] * curvature * gi * gi / root
        x[2, i] = theta[i]
        x[3, i] = g[i]
        theta[i] = theta[i] + drift + math.sqrt(gi) * z[i] if noisy else theta[i] + drift


def _preconditioner(x, g, options):
    v = options["rms_decay"] * x[1] + (1.0 - options["rms_decay"]) * g * g
    return v, 1.0 / (options["floor"] + np.sqrt(v))


def oracle(x, grad_u, z, a, k, options):
    """One step of :func:`update` in NumPy (the conformance kit's oracle)."""
    x = np.array(x, float)
    g = grad_u(x[0])
    v, gi = _preconditioner(x, g, options)
    theta = x[0] - a * gi * g + (0.0 if z is None else np.sqrt(gi) * z)
    return np.stack([theta, v])


def oracle_gamma(x, grad_u, z, a, k, options, t):
    """One step of :func:`update_gamma` in NumPy (the conformance kit's oracle)."""
    x = np.array(x, float)
    theta, g = x[0], grad_u(x[0])
    v, gi = _preconditioner(x, g, options)
    gamma = np.zeros_like(theta)
    moved = theta - x[2]
    use = (moved != 0.0) & (v > 0.0)
    if t > 0 and k > 0:
        curvature = (g[use] - x[3][use]) / moved[use]
        gamma[use] = -g[use] * curvature / (np.sqrt(v[use]) * (options["floor"] + np.sqrt(v[use])) ** 2)
    new = theta - a * gi * g + a * t * gamma + (0.0 if z is None else np.sqrt(gi) * z)
    return np.stack([new, v, theta, g])


def _noise(block, target, options):
    return Noise((2.0 * block.step_size * block.temperature,), (np.eye(target.dim),))


def _check(options: dict, target) -> dict:
    if options["noise_correction"]:
        raise ParameterError(
            "noise_correction",
            "pSGLD takes no gradient-noise correction (its preconditioner rescales the noise at every step); "
            "give noise_correction=False",
        )
    refuse_emulated_noise("pSGLD", target, "the gradient's noise would have to enter the preconditioner")
    return options


def _check_decay(name, value):
    return real(name, value, 0.0, 1.0, low_open=True, high_open=True)


def _check_floor(name, value):
    return real(name, value, 0.0, low_open=True)


_OPTIONS = {
    "rms_decay": Option(0.99, _check_decay, "beta in (0, 1): the moving average of g^2 keeps beta per step"),
    "floor": Option(1e-5, _check_floor, "lambda > 0: G = 1 / (lambda + sqrt(V))"),
}
_UNITS = "drift step_size * G grad U, noise covariance 2 * step_size * T * G, G = 1 / (lambda + sqrt(V))"
_REFS = "Li, Chen, Carlson and Carin (2016), Algorithm 1"

PSGLD = Algorithm(
    name="psgld",
    summary="SGLD preconditioned by RMSprop's running average of squared gradients",
    coupling=INDEPENDENT,
    state=("theta", "second_moment"),
    options=_OPTIONS,
    units=_UNITS,
    step=(stay, update),
    constants=lambda options: Constants(options["rms_decay"], options["floor"]),
    noise=_noise,
    check=_check,
    oracle=oracle,
    references=_REFS,
)

PSGLD_GAMMA = Algorithm(
    name="psgld_gamma",
    summary="pSGLD with the Gamma term of its position-dependent preconditioner",
    coupling=INDEPENDENT,
    state=("theta", "second_moment", "last_theta", "last_gradient"),
    options=_OPTIONS,
    units=_UNITS + "; plus step_size * T * Gamma",
    step=(stay, update_gamma),
    constants=lambda options: Constants(options["rms_decay"], options["floor"]),
    noise=_noise,
    check=_check,
    oracle=oracle_gamma,
    references=_REFS,
)

_EXAMPLE = {"target": exact_kit_target, "rms_decay": 0.9, "floor": 0.1}
METHODS = (
    Method("psgld", PSGLD, constant_schedule, CONSTANT_OPTIONS, PSGLD.summary, _REFS, _EXAMPLE),
    Method(
        "cpsgld",
        PSGLD,
        cyclical_schedule,
        CYCLICAL_OPTIONS,
        "cyclical pSGLD: cosine step sizes, RMSprop exploration at T=0, sampling at T=1",
        f"{_REFS}; [cSG] eq. 2",
        example={**_EXAMPLE, "step_size": 0.05, "n_cycles": 2},
    ),
    # the Gamma term's secant derivative amplifies a large preconditioned step: at floor 0.1 (steps up to
    # 10 times step_size) a chain of five in the kit's runs leaves the kit target's reach within 50 steps
    Method(
        "psgld_gamma",
        PSGLD_GAMMA,
        constant_schedule,
        CONSTANT_OPTIONS,
        PSGLD_GAMMA.summary,
        _REFS,
        {**_EXAMPLE, "floor": 0.3},
    ),
)
