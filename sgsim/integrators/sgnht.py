r"""The stochastic gradient Nosé-Hoover thermostat (SGNHT) and its cyclical preset.

Ding, Fang, Babbush, Chen, Skeel and Neven (2014), "Bayesian sampling using stochastic
gradient thermostats", Algorithm 1, with a time step ``h``:

.. math::

    p_{k+1} = p_k - h\,\xi_k p_k - h \nabla\tilde U(\theta_k) + \sqrt{2 A T h}\,\zeta_k, \qquad
    \theta_{k+1} = \theta_k + h\,p_{k+1}, \qquad
    \xi_{k+1} = \xi_k + h\Big(\frac{p_{k+1}^T p_{k+1}}{d} - T\Big),

``zeta_k ~ N(0, I_d)``. The thermostat ``xi`` is a friction that the chain adapts: it grows
while the kinetic temperature ``|p|^2 / d`` is above ``T`` and shrinks while it is below.
The continuous-time dynamics leave
``exp(-U(theta)/T - |p|^2/(2T) - d (xi - A)^2/(2T))`` invariant, and with gradient noise of
diffusion ``B`` (a minibatch gradient whose noise adds ``2 B h`` of variance to ``p`` per step)
the thermostat settles at ``A + B / T`` instead, absorbing the noise it was not told about: in
this discretisation ``B = h tr(V) / (2 d)`` for gradient noise of covariance ``V``, so
``E xi = A + h tr(V) / (2 d T)`` up to ``O(h)`` discretisation terms. The kinetic temperature is
held at ``T`` exactly: at stationarity ``E xi_{k+1} = E xi_k`` gives ``E |p|^2 / d = T`` for the
discrete chain itself.

Units (the cyclical paper's): ``step_size`` is ``alpha = h^2``; the state's ``velocity`` is the
momentum ``p`` (stationary law ``N(0, T I)``); ``diffusion`` is ``A`` per unit of time, which is
``eta / h`` for the cyclical paper's SGHMC friction ``eta``. The state's ``thermostat`` row holds
``xi`` in each of its ``d`` entries (one thermostat per chain, as in the paper); it starts at
``A`` and the momentum at ``init_velocity`` (0 by default).

The friction step. Algorithm 1 multiplies the momentum by ``1 - h xi``, which changes sign
once ``h xi > 1`` and amplifies it past ``h xi > 2``: a chain started where the gradient is
large heats the thermostat past that in a few steps and diverges (the divergence check reports
it). ``friction_step="exponential"`` multiplies by ``exp(-h xi)``, the exact flow of the
friction part over the step, the same to first order in ``h`` and a contraction for every
``xi >= 0``; ``"euler"``, as printed, is the default.

Stability. On ``U = L x^2 / 2`` with the thermostat held at ``xi``, the step maps
``(theta, v = h p)`` by ``[[1 - alpha L, f], [-alpha L, f]]`` with ``f = 1 - h xi`` (or
``exp(-h xi)``): ``det = f``, ``tr = 1 + f - alpha L``, stable by the Jury criterion exactly while
``|f| < 1`` and ``alpha L < 2 (1 + f)``. The thermostat moves ``f`` during the run, and no ``f``
allows ``alpha L >= 4``: that *necessary* limit, with ``L`` the target's
:meth:`~sgsim.targets.Target.curvature_bound`, refuses a run whose every step is beyond it before
any work (an error naming ``step_size``; ``step_check`` of :func:`sgsim.sample` overrides it). At
the thermostat's resting value ``h xi = h A`` the limit is the smaller ``2 (2 - h A) / L``.

Temperature. The thermostat's set point is the step's temperature ``T_k`` (the update reads it
as ``t``): at ``T = 0``, on the exploration steps of the cyclical schedule (``csgnht``), it drains
the kinetic energy, momentum descent with an adaptive friction. The ``noise_correction`` is
refused (the thermostat is the correction).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._jit import jit
from .._validate import ParameterError, choice, real
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
)
from ._loop import stay

__all__ = ["SGNHT", "METHOD", "CYCLICAL", "FRICTION_STEPS", "Constants", "update", "oracle", "init", "step_limit"]

#: How a step applies the thermostat's friction to the momentum.
FRICTION_STEPS = ("euler", "exponential")


class Constants(NamedTuple):
    """What the step reads: whether the friction's flow is exact (``A`` enters through the noise and ``xi_0``)."""

    exponential: bool = False


@jit(inline=True)
def update(x, theta, g, z, noisy, a, t, k, consts):
    """Momentum with the thermostat's friction, position, then the thermostat at the step's temperature ``t``."""
    h = math.sqrt(a)
    xi = x[2, 0]
    keep = math.exp(-h * xi) if consts.exponential else 1.0 - h * xi
    kinetic = 0.0
    if noisy:
        for i in range(theta.shape[0]):
            p = keep * x[1, i] - h * g[i] + z[i]
            theta[i] += h * p
            x[1, i] = p
            kinetic += p * p
    else:
        for i in range(theta.shape[0]):
            p = keep * x[1, i] - h * g[i]
            theta[i] += h * p
            x[1, i] = p
            kinetic += p * p
    xi = xi + h * (kinetic / theta.shape[0] - t)
    for i in range(theta.shape[0]):
        x[2, i] = xi


def oracle(x, grad_u, z, a, k, options, t):
    """One step of :func:`update` in NumPy, as printed in Ding et al.'s Algorithm 1 (the kit's oracle)."""
    x = np.array(x, float)
    h = math.sqrt(a)
    theta, p, xi = x[0], x[1], x[2, 0]
    keep = math.exp(-h * xi) if options["friction_step"] == "exponential" else 1.0 - h * xi
    p = keep * p - h * grad_u(theta) + (0.0 if z is None else z)
    theta = theta + h * p
    xi = xi + h * (p @ p / p.size - t)
    return np.stack([theta, p, np.full_like(p, xi)])


def init(theta0, given, options):
    """``p_0`` as given (0 by default) and ``xi_0 = A`` in every entry of the thermostat row."""
    p0 = given.get("velocity")
    p0 = np.zeros_like(theta0) if p0 is None else p0
    xi0 = given.get("thermostat")
    xi0 = np.full_like(theta0, options["diffusion"]) if xi0 is None else xi0
    return theta0, p0, xi0


def _noise(block, target, options):
    temp = block.temperature
    h = np.sqrt(block.step_size)
    eye = np.eye(target.dim)
    v = target.grad_noise_cov
    if v is None or not np.any(v):
        return Noise((2.0 * options["diffusion"] * h * temp,), (eye,))
    return Noise((2.0 * options["diffusion"] * h * temp, block.step_size), (eye, v))


def _check(options: dict, target) -> dict:
    if options["noise_correction"]:
        raise ParameterError(
            "noise_correction", "SGNHT's thermostat absorbs the gradient noise itself; give noise_correction=False"
        )
    return options


def step_limit(target, options):
    """``4 / L``: no thermostat value keeps the step stable beyond it (module docs); necessary."""
    return curvature_limit(target, 4.0, "step_size * L < 2 (1 + f) < 4 for every friction factor f in (-1, 1)")


SGNHT = Algorithm(
    name="sgnht",
    summary="stochastic gradient Nose-Hoover thermostat: an adaptive friction holds the kinetic temperature",
    coupling=INDEPENDENT,
    state=("theta", "velocity", "thermostat"),
    options={
        "diffusion": Option(
            1.0, lambda name, value: real(name, value, 0.0, low_open=True), "A > 0: injected diffusion per unit time"
        ),
        "friction_step": Option(
            "euler",
            lambda name, value: choice(name, value, FRICTION_STEPS),
            "'euler': p keeps 1 - h xi (as printed); 'exponential': exp(-h xi), stable for any xi",
        ),
    },
    units="step_size alpha = h^2; momentum p ~ N(0, T I); injected variance 2 A T h per step; xi += h (|p|^2/d - T)",
    step=(stay, update),
    constants=lambda options: Constants(options["friction_step"] == "exponential"),
    noise=_noise,
    check=_check,
    step_limit=step_limit,
    init=init,
    oracle=oracle,
    asymptotically_exact=True,
    references="Ding et al. (2014), Algorithm 1",
)

METHOD = Method("sgnht", SGNHT, constant_schedule, CONSTANT_OPTIONS, SGNHT.summary, SGNHT.references)

CYCLICAL = Method(
    "csgnht",
    SGNHT,
    cyclical_schedule,
    CYCLICAL_OPTIONS,
    "cyclical SGNHT: cosine step sizes, thermostatted descent at T=0, sampling at T=1",
    "Ding et al. (2014); [cSG] eq. 2",
    example={"step_size": 0.05, "n_cycles": 2},
)
