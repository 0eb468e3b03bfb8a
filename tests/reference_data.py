"""Plain NumPy oracle for the data-backed targets (sgsim.targets.regression) and for the
samplers driven by their minibatch gradients.

Written independently of the compiled code: gradients through ``scipy.special.expit`` and
matrix products, minibatch indices drawn with a NumPy ``Generator`` by the documented
rule (with replacement: ``gen.integers(0, N)`` n times; without: a partial Fisher-Yates
shuffle of a permutation kept from step to step), and SGLD / SGHMC loops that take the
injected standard normals. Given the same generator seed and normals the compiled
kernels must agree with these to about 1e-12.
"""

from __future__ import annotations

import numpy as np
from scipy import special


def logistic_log_density(theta, X, y, prior_precision):
    """``sum_i [y_i z_i - log(1 + e^{z_i})] - (1/2) sum_j lambda_j theta_j^2``."""
    z = X @ theta
    return float(np.sum(y * z - np.logaddexp(0.0, z)) - 0.5 * np.sum(prior_precision * theta**2))


def example_gradients(theta, X, y):
    """Rows ``(y_i - sigmoid(x_i . theta)) x_i``."""
    return (y - special.expit(X @ theta))[:, None] * X


def logistic_grad_u(theta, X, y, prior_precision):
    """Exact ``grad U``."""
    return -example_gradients(theta, X, y).sum(axis=0) + prior_precision * theta


def minibatch_grad_u(theta, X, y, prior_precision, idx):
    """``-(N/n) sum_{i in idx} grad log p(y_i | x_i, theta) + lambda theta``."""
    n_data = X.shape[0]
    g = example_gradients(theta, X[idx], y[idx])
    return -(n_data / len(idx)) * g.sum(axis=0) + prior_precision * theta


class MinibatchDrawer:
    """Minibatch indices by the documented rule, from a NumPy generator."""

    def __init__(self, gen, n_data, batch_size, replace):
        self.gen, self.n_data, self.n, self.replace = gen, n_data, batch_size, replace
        self.perm = np.arange(n_data)

    def __call__(self):
        if self.replace:
            return np.array([self.gen.integers(0, self.n_data) for _ in range(self.n)])
        idx = np.empty(self.n, dtype=np.int64)
        for j in range(self.n):
            r = j + self.gen.integers(0, self.n_data - j)
            self.perm[[j, r]] = self.perm[[r, j]]
            idx[j] = self.perm[j]
        return idx


def _noise_sd(v, alpha, temp, factor):
    """Per-step matrices ``L_k`` (noise ``L_k xi_k``), emulated noise ``V`` plus injected noise."""
    v = np.asarray(v, float)
    lam, q = np.linalg.eigh(v) if np.any(v) else (np.zeros(v.shape[0]), np.eye(v.shape[0]))
    lam = np.clip(lam, 0.0, None)
    a = alpha**2 if lam.any() else np.zeros_like(alpha)
    sd = np.sqrt(a[:, None] * lam[None] + 2.0 * factor * (alpha * temp)[:, None])
    return q[None] * sd[:, None, :]


def sgld(grad, theta0, alpha, temp, xi, v=None):
    """SGLD iterates (K, d): ``theta - alpha_k grad() + L_k xi_k``; ``grad(theta)`` draws its minibatch."""
    d = len(theta0)
    lk = _noise_sd(np.zeros((d, d)) if v is None else v, alpha, temp, 1.0)
    theta = np.array(theta0, float)
    path = np.empty((len(alpha), d))
    for k in range(len(alpha)):
        theta = theta - alpha[k] * grad(theta) + lk[k] @ xi[k]
        path[k] = theta
    return path


def sghmc(grad, theta0, alpha, temp, xi, friction, v=None):
    """SGHMC iterates in [cSG] order: ``theta += v``, then the gradient at the new ``theta``."""
    d = len(theta0)
    lk = _noise_sd(np.zeros((d, d)) if v is None else v, alpha, temp, friction)
    theta = np.array(theta0, float)
    vel = np.zeros(d)
    path = np.empty((len(alpha), d))
    for k in range(len(alpha)):
        theta = theta + vel
        vel = (1.0 - friction) * vel - alpha[k] * grad(theta) + lk[k] @ xi[k]
        path[k] = theta
    return path, vel
