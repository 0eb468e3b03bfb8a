"""A sampler of one's own, as a user writes it (for test_conformance): SGLD with a fixed diagonal
preconditioner ``p``, registered on import. Drift ``a p * grad U``, noise covariance
``2 a T diag(p)`` (it emulates no gradient noise: a target's ``V`` is not added).
"""

from typing import NamedTuple

import numpy as np

import sgsim
from sgsim.algorithms import INDEPENDENT, Algorithm, Method, Noise, Option, check_positive_array, register, stay


class Constants(NamedTuple):
    p: np.ndarray


@sgsim.jit(inline=True)
def update(x, theta, g, z, noisy, a, k, consts):
    for i in range(theta.shape[0]):
        theta[i] = theta[i] - a * consts.p[i] * g[i] + (z[i] if noisy else 0.0)


def oracle(x, grad_u, z, a, k, options):
    """The same step in plain NumPy, for the conformance kit."""
    theta = x[0] - a * options["p"] * grad_u(x[0])
    return (theta if z is None else theta + z)[None]


def check(options, target):
    p = options["p"]
    if p.size not in (1, target.dim):
        raise sgsim.algorithms.ParameterError("p", f"p must have 1 or {target.dim} values, got {p.size}")
    return {**options, "p": np.ascontiguousarray(np.broadcast_to(p, (target.dim,)))}


def noise(block, target, options):
    return Noise((2 * block.step_size * block.temperature,), (np.diag(options["p"]),))


PSGLD = Algorithm(
    name="psgld_diag",
    summary="SGLD with a fixed diagonal preconditioner",
    coupling=INDEPENDENT,
    state=("theta",),
    options={"p": Option(1.0, check_positive_array, "the preconditioner's diagonal (a number or a vector)")},
    units="drift step_size * p * grad U, noise covariance 2 * step_size * T * diag(p)",
    step=(stay, update),
    constants=lambda options: Constants(options["p"]),
    noise=noise,
    check=check,
    oracle=oracle,
    asymptotically_exact=True,
)
METHOD = register(
    Method("psgld_diag", PSGLD, sgsim.algorithms.constant_schedule, ("step_size", "temperature"), PSGLD.summary)
)
