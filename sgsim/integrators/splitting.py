r"""BAOAB and OBABO: the Leimkuhler-Matthews splittings of underdamped Langevin dynamics.

Underdamped Langevin dynamics at temperature ``T`` with unit mass and friction ``gamma``,

.. math::

    d\theta = p\,dt, \qquad dp = -\nabla U(\theta)\,dt - \gamma p\,dt + \sqrt{2\gamma T}\,dW,

leaves ``exp(-U(theta)/T - |p|^2/(2T))`` invariant. Over one time step ``h`` it is split into
three exactly solvable parts: ``B`` (kick, ``p -= (h/2) grad U``), ``A`` (drift,
``theta += (h/2) p``) and ``O`` (the exact Ornstein-Uhlenbeck solution
``p <- c p + sqrt((1 - c^2) T) xi`` with ``c = exp(-gamma h)``), composed as ``B A O A B``
(BAOAB) or ``O B A B O`` (OBABO) (Leimkuhler and Matthews 2013, "Rational construction of
stochastic numerical methods for molecular sampling"). BAOAB's configurational marginal is exact for a Gaussian
target with an exact gradient at every stable ``h`` and its error on smooth targets is
``O(h^2)``, against ``O(h)`` for SGLD's Euler-Maruyama step of overdamped Langevin dynamics
in its own time step; OBABO is the velocity-Verlet step with a half ``O`` on each side
(configurational error ``O(h^2)``, not exact on Gaussians).

Units (the cyclical paper's): ``step_size`` is ``alpha = h^2``, the unit of its SGHMC ("Cyclical
Stochastic Gradient MCMC for Bayesian Deep Learning", §2), whose velocity ``v = h p`` and
friction ``eta = gamma h`` map onto these; ``friction`` here is ``gamma``, per unit of time, so
that ``c = exp(-gamma sqrt(alpha))``. The state's ``velocity`` is the momentum ``p`` itself
(stationary law ``N(0, T I)``, not SGHMC's ``N(0, alpha T I)``-like ``v``).

One gradient per step. Both schemes take the gradient where the position ends a step, and use
it for the closing kick of that step and the opening kick of the next. sgsim's chain step
evaluates the gradient first and then draws its noise (:mod:`sgsim.algorithms`), so the step
here runs from one gradient to the next:

- BAOAB: ``p -= h g`` (the two half kicks at ``theta_k``; a half kick ``h/2`` at step 0), then
  ``A O A``. The stored position is BAOAB's ``theta_{k+1}`` exactly; the stored ``velocity``
  is the momentum before the closing half kick, ``p_{k+1} + (h/2) grad U~(theta_{k+1})``.
- OBABO: ``B O O B A`` (the closing ``B O`` of the last step and the opening ``O B A`` of this
  one, the two ``O`` s merged into one with ``c^2`` and noise variance ``(1 - c^4) T``;
  ``O B A`` alone at step 0). The stored position is OBABO's ``theta_{k+1}``; the stored
  ``velocity`` is the momentum between the step's kicks.

Both are exact rewritings of the schemes at a constant step size, starting from ``(theta_0,
p_0)`` with ``p_0`` the given ``init_velocity`` (0 by default). Under a schedule the parts on
both sides of the gradient at ``theta_k`` use that step's ``h_k``. At ``T = 0`` (the cyclical
schedule's exploration stage) the ``O`` part only damps: momentum SGD with a splitting.

Gradient noise. A minibatch gradient replaces ``grad U`` in the kicks, as in the papers' use of
these schemes with stochastic gradients; its noise enters the kicks, not the ``O`` part, so a
target's *emulated* gradient noise (one Gaussian per step in sgsim) cannot be placed and is
refused. On a Gaussian target the schemes are stable for ``alpha lambda_max(P) < 4``
(``h omega < 2``): a larger step is refused before any work.
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
    curvature_limit,
    cyclical_schedule,
    exact_kit_target,
    refuse_emulated_noise,
)
from ._loop import stay

__all__ = [
    "BAOAB",
    "OBABO",
    "METHODS",
    "Constants",
    "baoab_update",
    "obabo_update",
    "baoab_oracle",
    "obabo_oracle",
]


class Constants(NamedTuple):
    """What the steps read: the friction ``gamma`` per unit time."""

    friction: float


@jit(inline=True)
def baoab_update(x, theta, g, z, noisy, a, k, consts):
    """``p -= h g`` (``h / 2`` at step 0), then ``A O A``; ``g = grad U~(theta)``, ``h = sqrt(a)``."""
    h = math.sqrt(a)
    half = 0.5 * h
    c = math.exp(-consts.friction * h)
    kick = half if k == 0 else h
    if noisy:
        for i in range(theta.shape[0]):
            p = x[1, i] - kick * g[i]
            q = theta[i] + half * p
            p = c * p + z[i]
            theta[i] = q + half * p
            x[1, i] = p
    else:
        for i in range(theta.shape[0]):
            p = x[1, i] - kick * g[i]
            q = theta[i] + half * p
            p = c * p
            theta[i] = q + half * p
            x[1, i] = p


@jit(inline=True)
def obabo_update(x, theta, g, z, noisy, a, k, consts):
    """``B O O B A`` (``O B A`` at step 0); the merged ``O O`` keeps ``c^2`` of the momentum."""
    h = math.sqrt(a)
    half = 0.5 * h
    c = math.exp(-consts.friction * h)
    if k == 0:
        for i in range(theta.shape[0]):
            p = c * x[1, i] + (z[i] if noisy else 0.0)
            p = p - half * g[i]
            theta[i] = theta[i] + h * p
            x[1, i] = p
    else:
        c2 = c * c
        for i in range(theta.shape[0]):
            p = x[1, i] - half * g[i]
            p = c2 * p + (z[i] if noisy else 0.0)
            p = p - half * g[i]
            theta[i] = theta[i] + h * p
            x[1, i] = p


def _keep(block, options) -> np.ndarray:
    """``c_k = exp(-gamma h_k)`` over a block."""
    return np.exp(-options["friction"] * np.sqrt(block.step_size))


def _baoab_noise(block, target, options):
    c = _keep(block, options)
    return Noise(((1.0 - c * c) * block.temperature,), (np.eye(target.dim),))


def _obabo_noise(block, target, options):
    c = _keep(block, options)
    first = block.k0 + np.arange(block.step_size.shape[0]) == 0
    return Noise((np.where(first, 1.0 - c**2, 1.0 - c**4) * block.temperature,), (np.eye(target.dim),))


def _check(options: dict, target) -> dict:
    if options["noise_correction"]:
        raise ParameterError(
            "noise_correction",
            "the splitting schemes take no gradient-noise correction (the gradient's noise enters the kicks, the "
            "injected noise the O part); give noise_correction=False",
        )
    refuse_emulated_noise("a splitting scheme", target, "its noise would enter the kicks, not the O part")
    return options


def _step_limit(target, options):
    """``4 / L``: on ``U = L x^2 / 2`` both splittings are stable exactly while ``h omega < 2`` (``alpha L < 4``)."""
    return curvature_limit(target, 4.0, "step_size * L < 4 (h omega < 2)")


def _parts(x, a, options):
    h = math.sqrt(a)
    return np.array(x, float), h, math.exp(-options["friction"] * h)


def baoab_oracle(x, grad_u, z, a, k, options):
    """One step of :func:`baoab_update` in NumPy, part by part (the conformance kit's oracle)."""
    x, h, c = _parts(x, a, options)
    theta, p = x[0], x[1]
    g = grad_u(theta)
    if k > 0:
        p = p - 0.5 * h * g  # closing B of the last step
    p = p - 0.5 * h * g  # B
    theta = theta + 0.5 * h * p  # A
    p = c * p + (0.0 if z is None else z)  # O
    theta = theta + 0.5 * h * p  # A
    return np.stack([theta, p])


def obabo_oracle(x, grad_u, z, a, k, options):
    """One step of :func:`obabo_update` in NumPy, part by part (the conformance kit's oracle)."""
    x, h, c = _parts(x, a, options)
    theta, p = x[0], x[1]
    g = grad_u(theta)
    if k > 0:
        p = c * (p - 0.5 * h * g)  # closing B O of the last step (its noise merged into the next O's)
    p = c * p + (0.0 if z is None else z)  # O
    p = p - 0.5 * h * g  # B
    theta = theta + h * p  # A
    return np.stack([theta, p])


def _check_friction(name, value):
    return real(name, value, 0.0, low_open=True)


_OPTIONS = {
    "friction": Option(1.0, _check_friction, "gamma > 0 per unit time: O keeps c = exp(-gamma sqrt(step_size))")
}
_UNITS = (
    "step_size alpha = h^2 (the cyclical paper's SGHMC unit); momentum p ~ N(0, T I); O keeps c = exp(-gamma h) "
    "and adds variance (1 - c^2) T"
)
_REFS = "Leimkuhler and Matthews (2013)"

BAOAB = Algorithm(
    name="baoab",
    summary="BAOAB splitting of underdamped Langevin dynamics, one gradient per step",
    coupling=INDEPENDENT,
    state=("theta", "velocity"),
    options=_OPTIONS,
    units=_UNITS,
    step=(stay, baoab_update),
    constants=lambda options: Constants(options["friction"]),
    noise=_baoab_noise,
    check=_check,
    step_limit=_step_limit,
    oracle=baoab_oracle,
    asymptotically_exact=True,
    references=_REFS,
)

OBABO = Algorithm(
    name="obabo",
    summary="OBABO splitting of underdamped Langevin dynamics (velocity Verlet between half O steps)",
    coupling=INDEPENDENT,
    state=("theta", "velocity"),
    options=_OPTIONS,
    units=_UNITS,
    step=(stay, obabo_update),
    constants=lambda options: Constants(options["friction"]),
    noise=_obabo_noise,
    check=_check,
    step_limit=_step_limit,
    oracle=obabo_oracle,
    asymptotically_exact=True,
    references=_REFS,
)

METHODS = (
    Method("baoab", BAOAB, constant_schedule, CONSTANT_OPTIONS, BAOAB.summary, _REFS, {"target": exact_kit_target}),
    Method(
        "cbaoab",
        BAOAB,
        cyclical_schedule,
        CYCLICAL_OPTIONS,
        "cyclical BAOAB: cosine step sizes, damped exploration at T=0, sampling at T=1",
        f"{_REFS}; [cSG] eq. 2",
        example={"step_size": 0.05, "n_cycles": 2, "target": exact_kit_target},
    ),
    Method("obabo", OBABO, constant_schedule, CONSTANT_OPTIONS, OBABO.summary, _REFS, {"target": exact_kit_target}),
    Method(
        "cobabo",
        OBABO,
        cyclical_schedule,
        CYCLICAL_OPTIONS,
        "cyclical OBABO: cosine step sizes, damped exploration at T=0, sampling at T=1",
        f"{_REFS}; [cSG] eq. 2",
        example={"step_size": 0.05, "n_cycles": 2, "target": exact_kit_target},
    ),
)
