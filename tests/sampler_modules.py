"""A sampler of one's own as module source, for the tests that need it in a file of its own.

``scaled_sgld(name)`` is SGLD with its drift and noise variance scaled by the option ``scale``
(default 1), registered under ``name`` when the module is imported (test_cli, test_kernel_cache).
"""

SOURCE = """
from typing import NamedTuple

import numpy as np

import sgsim
from sgsim.algorithms import INDEPENDENT, Algorithm, Method, Noise, Option, check_positive, register, stay


class Constants(NamedTuple):
    scale: float


@sgsim.jit(inline=True)
def update(x, theta, g, z, noisy, a, k, consts):
    for i in range(theta.shape[0]):
        theta[i] = theta[i] - a * consts.scale * g[i] + (z[i] if noisy else 0.0)


ALG = Algorithm(
    name="NAME", summary="SGLD with its drift and noise scaled", coupling=INDEPENDENT, state=("theta",),
    options={"scale": Option(1.0, check_positive, "the drift's and the noise variance's factor")},
    units="drift step_size * scale * grad U, noise covariance 2 * step_size * scale * T",
    step=(stay, update), constants=lambda options: Constants(options["scale"]),
    noise=lambda block, target, options: Noise((2 * options["scale"] * block.step_size,), (np.eye(target.dim),)),
)
register(Method("NAME", ALG, sgsim.algorithms.constant_schedule, ("step_size",), ALG.summary))
"""


def scaled_sgld(name: str) -> str:
    """The module's source, registering the sampler as ``name``."""
    return SOURCE.replace('"NAME"', repr(name))
