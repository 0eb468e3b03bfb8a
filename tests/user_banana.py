"""A target of one's own, as a user writes it, and the mistakes users make (for test_user_targets).

The banana: ``x ~ N(0, 1)``, ``y | x ~ N(b x^2, 1)``, so ``U = x^2 / 2 + (y - b x^2)^2 / 2``,
``E[(x, y)] = (0, b)``, ``E[x^2] = 1``, ``E[y^2] = 1 + 3 b^2``, ``E[x y] = b E[x^3] = 0``.
"""

from __future__ import annotations

import numpy as np

import sgsim


@sgsim.jit
def grad_u(theta, params, out):
    b = params[0]
    r = theta[1] - b * theta[0] ** 2
    out[0] = theta[0] - 2.0 * b * theta[0] * r
    out[1] = r


@sgsim.jit
def log_density(theta, params):
    r = theta[1] - params[0] * theta[0] ** 2
    return -0.5 * theta[0] ** 2 - 0.5 * r * r


def banana(b=0.5, grad=None, dim=2, **fields):
    """The banana target, built by hand (``grad`` and ``dim`` let the tests break it)."""
    known = {
        "init_low": [-2.0, -1.0], "init_high": [2.0, 3.0],
        "mean": [0.0, b], "second_moment": [[1.0, 0.0], [0.0, 1.0 + 3.0 * b * b]],
    }  # fmt: skip
    return sgsim.targets.Target("banana", dim, grad_u if grad is None else grad, log_density, (float(b),),
                                **{**known, **fields})  # fmt: skip


@sgsim.jit
def returning_grad(theta, params, out):
    # the classic slip: returns the gradient instead of writing it into out
    b = params[0]
    r = theta[1] - b * theta[0] ** 2
    return np.array([theta[0] - 2.0 * b * theta[0] * r, r])


@sgsim.jit
def sign_error_grad(theta, params, out):
    # the gradient of log p, not of U = -log p
    b = params[0]
    r = theta[1] - b * theta[0] ** 2
    out[0] = -(theta[0] - 2.0 * b * theta[0] * r)
    out[1] = -r


@sgsim.jit
def factor_error_grad(theta, params, out):
    # d/dx (y - b x^2)^2 / 2 taken as -b x (y - b x^2): a factor 2 lost
    b = params[0]
    r = theta[1] - b * theta[0] ** 2
    out[0] = theta[0] - b * theta[0] * r
    out[1] = r


@sgsim.jit
def one_argument_grad(theta):
    return theta
