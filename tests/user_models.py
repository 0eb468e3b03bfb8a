"""Models as a user writes them: log densities in JAX and PyTorch (for test_model.py).

Neal's funnel: ``y ~ N(0, 3^2)``, ``x_i | y ~ N(0, e^y)``. The banana: ``x ~ N(0, 1)``,
``y | x ~ N(b x^2, 1)``. Eight schools, non-centred, as in the posterior database.
"""

from __future__ import annotations

import numpy as np

import sgsim

EIGHT_Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
EIGHT_SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def funnel_jax(dim=1, wrong=False):
    """Neal's funnel in JAX (``wrong``: the ``-(n/2) y`` of x's normaliser dropped)."""
    import jax.numpy as jnp

    def log_p(v):
        y, x = v["y"], v["x"]
        return -(y**2) / 18.0 - 0.5 * jnp.sum(x**2) * jnp.exp(-y) - (0.0 if wrong else 0.5 * dim * y)

    return sgsim.model(log_p, parameters={"y": (), "x": dim}, name="funnel")


def banana_jax(b=0.5):
    """The banana in JAX."""

    def log_p(v):
        return -0.5 * v["x"] ** 2 - 0.5 * (v["y"] - b * v["x"] ** 2) ** 2

    return sgsim.model(log_p, parameters={"x": (), "y": ()}, name="banana")


def funnel_torch(dim=1):
    """Neal's funnel in PyTorch."""
    import torch

    def log_p(v):
        y, x = v["y"], v["x"]
        return -(y**2) / 18.0 - 0.5 * torch.sum(x**2) * torch.exp(-y) - 0.5 * dim * y

    return sgsim.model(log_p, parameters={"y": (), "x": dim}, backend="torch", name="funnel")


def eight_schools():
    """Eight schools, non-centred, in JAX (a factory that ``sgsim.replay`` can rebuild)."""
    from jax.scipy.stats import cauchy, norm

    def log_p(v, data):
        theta = v["mu"] + v["tau"] * v["theta_trans"]
        return (
            norm.logpdf(v["theta_trans"]).sum()
            + norm.logpdf(data["y"], theta, data["sigma"]).sum()
            + norm.logpdf(v["mu"], 0.0, 5.0)
            + cauchy.logpdf(v["tau"], 0.0, 5.0)
        )

    return sgsim.model(
        log_p,
        parameters={"theta_trans": 8, "mu": (), "tau": ()},
        transforms={"tau": "positive"},
        data={"y": EIGHT_Y, "sigma": EIGHT_SIGMA},
        derived=lambda v: {"theta": v["mu"] + v["tau"] * v["theta_trans"]},
        name="eight_schools_noncentered",
    )
