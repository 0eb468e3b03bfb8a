r"""The mathematics of one step of each sampler, in plain NumPy: drift and noise covariance.

This module is the one definition shared by the compiled integrators (which draw their noise
from :class:`Noise`), the exact laws of :mod:`sgsim.theory` (which propagate
:class:`LinearStep`), and any other backend. It imports nothing of sgsim's runtime, and the
tests check it against an independent computation of the noise (``tests/reference.py``).

Independent chains
------------------
On a quadratic potential ``U(theta) = theta^T P theta / 2 - b^T theta`` with the emulated
stochastic gradient ``P theta - b + zeta``, ``zeta ~ N(0, V)``, every sampler is a linear
recursion of its state ``x`` (``theta``, or ``(theta, v)``)

.. math::

    x_k = (F_0 + s_k F_1)\, x_{k-1} + s_k c + \xi_k, \qquad
    \operatorname{Cov} \xi_k = \textstyle\sum_j q_{jk} Q_j,

where ``s_k`` is the step size: a :class:`LinearStep`. The covariance of one step's noise is a
:class:`Noise`, a sum of fixed matrices with per-step coefficients. That form covers the
cyclical paper's SGLD (``alpha_k^2 V + 2 alpha_k T_k I``) and SGHMC, and the constant-SGD
family of "Stochastic Gradient Descent as Approximate Bayesian Inference" (preconditioned SGD's
``epsilon^2 H C H / S``, SGFS's ``epsilon^2 H (C/S + E E^T) H``).

Units: :func:`sgld_noise`, :func:`sghmc_noise`, :func:`sgld_linear` and :func:`sghmc_linear`
use the cyclical paper's (drift ``alpha grad U``, injected variance ``2 alpha T``);
:func:`momentum_sgd_linear`, :func:`preconditioned_sgd_linear` and :func:`sgfs_linear` use the
constant-SGD paper's averaged loss ``L = U / N`` with learning rate ``epsilon``.

Interacting particles
---------------------
SVGD and SGLD with repulsive forces move ``L`` particles ``Z`` (rows) together. With the RBF
kernel ``k(z, z') = exp(-|z - z'|^2 / h)`` and ``K_ij = k(z_i, z_j)`` the deterministic part of
a step of size ``epsilon`` is ``epsilon phi(Z)`` with (:func:`svgd_velocity`)

.. math::

    \phi(Z) = \frac{1}{L}\Big(K G + \frac{2}{h}\big(\operatorname{diag}(K\mathbf 1) Z - K Z\big)\Big),
    \qquad G = -\nabla U(Z) \text{ row-wise},

the kernel-weighted gradient plus the repulsion (the sign of the printed paper is wrong: the
kernel term must repel), and SGLD with repulsive forces adds Gaussian noise of covariance
``2 epsilon K / L`` between particles, independent across coordinates
(:func:`repulsive_noise_cov`). ``normalise=False`` drops the ``1/L`` of both, a rescaling of
time by ``L``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._validate import ParameterError

__all__ = [
    "Noise",
    "LinearStep",
    "sgld_noise",
    "sghmc_noise",
    "sgld_linear",
    "sghmc_linear",
    "momentum_sgd_linear",
    "preconditioned_sgd_linear",
    "sgfs_linear",
    "pairwise_sq_dists",
    "median_bandwidth",
    "rbf_kernel",
    "svgd_velocity",
    "repulsive_noise_cov",
]


@dataclass(frozen=True)
class Noise:
    """Covariance of one step's Gaussian increment: ``sum_j coef[j][..., k] * mats[j]``.

    Attributes
    ----------
    coef : tuple of ndarray
        Per-step coefficients, each of shape (..., K) (leading axes: a batch of schedules).
    mats : tuple of ndarray
        The fixed ``(n, n)`` symmetric positive semidefinite matrices.
    """

    coef: tuple[np.ndarray, ...]
    mats: tuple[np.ndarray, ...]

    def at(self, k: int) -> np.ndarray:
        """The covariance at step index ``k`` (0-based) of an unbatched schedule."""
        return sum((c[..., k] * m for c, m in zip(self.coef, self.mats, strict=True)), np.zeros_like(self.mats[0]))


@dataclass(frozen=True)
class LinearStep:
    """``x_k = (f0 + s_k f1) x_{k-1} + s_k shift + xi_k``, ``Cov xi_k = noise`` (see module docs).

    Attributes
    ----------
    f0, f1 : ndarray, shape (n, n)
        The two parts of the transition matrix.
    s : ndarray, shape (..., K)
        The per-step scale (the step size or learning rate).
    shift : ndarray, shape (n,), or None
        Constant part of the drift per unit of ``s``.
    noise : Noise
        Covariance of ``xi_k``.
    """

    f0: np.ndarray
    f1: np.ndarray
    s: np.ndarray
    shift: np.ndarray | None
    noise: Noise


# ----------------------------------------------------------------------------- the cyclical paper's samplers


def _broadcast(step_size, temperature) -> tuple[np.ndarray, np.ndarray]:
    alpha, temp = np.broadcast_arrays(np.asarray(step_size, float), np.asarray(temperature, float))
    return alpha, temp


@np.errstate(over="ignore", invalid="ignore")  # a variance that overflows: reported where the noise is drawn
def _coefficients(alpha, temp, v, factor, corrected, noise_correction, friction_name):
    """``(a_k, c_k)`` of ``a_k V + c_k I`` for SGLD and SGHMC; see :func:`sgld_noise`."""
    a = alpha**2
    c = 2.0 * factor * alpha * temp
    lam_max = float(np.linalg.eigvalsh(v)[-1]) if v.size else 0.0
    if noise_correction and lam_max > 0:
        hot = temp > 0
        limit = 2.0 * corrected * temp
        bad = hot & (alpha * lam_max > limit * (1 + 1e-12))
        if np.any(bad):
            k = tuple(int(i) for i in np.argwhere(bad)[0])
            who = f"2 * {friction_name} * temperature" if friction_name else "2 * temperature"
            where = f"step {k[0] + 1}" if len(k) == 1 else f"index {k}"
            raise ParameterError(
                "noise_correction",
                f"noise_correction needs step_size * max eig(grad_noise_cov) <= {who} at every sampling step "
                f"(else the injected covariance is not PSD); at {where} step_size = {alpha[k]:.4g}, "
                f"max eig = {lam_max:.4g}, temperature = {temp[k]:.4g}",
            )
        a = np.where(hot, 0.0, alpha**2)
        c = 2.0 * corrected * alpha * temp
    return a, c


def sgld_noise(step_size, temperature, grad_noise_cov, noise_correction: bool = False) -> Noise:
    r"""Noise of one SGLD step on ``theta``: ``alpha_k^2 V + 2 alpha_k T_k I`` (cyclical paper's units).

    The gradient noise ``alpha_k zeta_k`` (``zeta ~ N(0, V)``) and the injected
    ``sqrt(2 alpha_k T_k) xi_k`` are independent Gaussians, so one Gaussian of the summed
    covariance has the same law ("Cyclical Stochastic Gradient MCMC for Bayesian Deep
    Learning", §2). With ``noise_correction`` the injected part of each sampling step
    (``T_k > 0``) is reduced to ``2 alpha_k T_k I - alpha_k^2 V``, so that the total is exactly
    ``2 alpha_k T_k I``; this needs ``alpha_k V <= 2 T_k I``.

    Parameters
    ----------
    step_size, temperature : array_like
        ``alpha_k`` and ``T_k``, broadcast together (any shape, e.g. ``(K,)``).
    grad_noise_cov : ndarray, shape (d, d)
        ``V``, symmetric positive semidefinite.
    noise_correction : bool
        Apply the correction.

    Raises
    ------
    ParameterError
        If the correction would need a covariance that is not positive semidefinite.
    """
    v = np.asarray(grad_noise_cov, float)
    alpha, temp = _broadcast(step_size, temperature)
    a, c = _coefficients(alpha, temp, v, 1.0, 1.0, bool(noise_correction), None)
    return Noise((a, c), (v, np.eye(v.shape[0])))


def sghmc_noise(
    step_size, temperature, grad_noise_cov, friction: float, gamma_hat: float = 0.0, noise_correction: bool = False
) -> Noise:
    r"""Noise of one SGHMC step on the velocity: ``alpha_k^2 V + 2 (eta - gamma_hat) alpha_k T_k I``.

    Cyclical paper's parametrisation ("Cyclical Stochastic Gradient MCMC for Bayesian Deep
    Learning", §2; the update is ``v_k = (1 - eta) v_{k-1} - alpha_k grad U~(theta_k) +
    N(0, 2 (eta - gamma_hat) alpha_k T_k I)``). With ``noise_correction`` the total on sampling
    steps is ``2 eta alpha_k T_k I``, which needs ``alpha_k V <= 2 eta T_k I`` and ``gamma_hat = 0``.
    """
    v = np.asarray(grad_noise_cov, float)
    alpha, temp = _broadcast(step_size, temperature)
    a, c = _coefficients(alpha, temp, v, friction - gamma_hat, friction, bool(noise_correction), "friction")
    return Noise((a, c), (v, np.eye(v.shape[0])))


def sgld_linear(precision, shift, step_size, temperature, grad_noise_cov, noise_correction=False) -> LinearStep:
    """SGLD on ``U = theta^T P theta / 2 - b^T theta``: ``F_k = I - alpha_k P``, ``c_k = alpha_k b``."""
    p = np.asarray(precision, float)
    d = p.shape[0]
    noise = sgld_noise(step_size, temperature, grad_noise_cov, noise_correction)
    alpha = np.broadcast_to(np.asarray(step_size, float), noise.coef[0].shape)
    return LinearStep(np.eye(d), -p, alpha, np.asarray(shift, float), noise)


def sghmc_linear(
    precision, shift, step_size, temperature, grad_noise_cov, friction, gamma_hat=0.0, noise_correction=False
) -> LinearStep:
    """SGHMC in the cyclical paper's order on the state ``(theta, v)``.

    ``theta_k = theta_{k-1} + v_{k-1}``, then ``v_k = (1 - eta) v_{k-1} - alpha_k (P theta_k - b)
    + noise``: ``F_k = [[I, I], [-alpha_k P, (1 - eta) I - alpha_k P]]``, ``c_k = (0, alpha_k b)``,
    the noise (:func:`sghmc_noise`) on the velocity block.
    """
    p = np.asarray(precision, float)
    d = p.shape[0]
    eye, zero = np.eye(d), np.zeros((d, d))
    vel = sghmc_noise(step_size, temperature, grad_noise_cov, friction, gamma_hat, noise_correction)
    lift = tuple(np.block([[zero, zero], [zero, m]]) for m in vel.mats)
    f0 = np.block([[eye, eye], [zero, (1 - friction) * eye]])
    f1 = np.block([[zero, zero], [-p, -p]])
    alpha = np.broadcast_to(np.asarray(step_size, float), vel.coef[0].shape)
    shift2 = np.concatenate([np.zeros(d), np.asarray(shift, float)])
    return LinearStep(f0, f1, alpha, shift2, Noise(vel.coef, lift))


# ----------------------------------------------------------------------------- the constant-SGD paper's samplers


def momentum_sgd_linear(A, C, lr, momentum: float, batch_size: float) -> LinearStep:
    """SGD with momentum in the constant-SGD paper's order (§4.3, eq. 23), state ``(theta, v)``.

    ``v_t = (1 - mu) v_{t-1} - epsilon_t g_S(theta_{t-1})``, ``theta_t = theta_{t-1} + v_t``:
    ``F_t = [[I - epsilon_t A, (1 - mu) I], [-epsilon_t A, (1 - mu) I]]``,
    ``Q_t = (epsilon_t^2 / S) [[C, C], [C, C]]`` (the same noise enters both).
    """
    a, c = np.asarray(A, float), np.asarray(C, float)
    d = a.shape[0]
    eye, zero = np.eye(d), np.zeros((d, d))
    mu = float(momentum)
    f0 = np.block([[eye, (1 - mu) * eye], [zero, (1 - mu) * eye]])
    f1 = np.block([[-a, zero], [-a, zero]])
    eps = np.asarray(lr, float)
    return LinearStep(f0, f1, eps, None, Noise((eps**2,), (np.block([[c, c], [c, c]]) / batch_size,)))


def preconditioned_sgd_linear(A, C, H, lr, batch_size: float) -> LinearStep:
    """Preconditioned constant SGD (§4.1): ``F_t = I - epsilon_t H A``, ``Q_t = epsilon_t^2 H C H / S``."""
    a, c, h = (np.asarray(x, float) for x in (A, C, H))
    eps = np.asarray(lr, float)
    q = h @ c @ h / batch_size
    return LinearStep(np.eye(a.shape[0]), -h @ a, eps, None, Noise((eps**2,), (0.5 * (q + q.T),)))


def sgfs_linear(A, C, H, E, lr, batch_size: float) -> LinearStep:
    """SGFS (§5.2, eq. 26): ``F_t = I - epsilon_t H A``, ``Q_t = epsilon_t^2 H (C/S + E E^T) H``.

    The injected noise ``epsilon H E zeta`` is on the gradient's scale, the only reading
    consistent with the paper's Appendix E.
    """
    a, c, h, e = (np.asarray(x, float) for x in (A, C, H, E))
    eps = np.asarray(lr, float)
    q = h @ (c / batch_size + e @ e.T) @ h
    return LinearStep(np.eye(a.shape[0]), -h @ a, eps, None, Noise((eps**2,), (0.5 * (q + q.T),)))


# ----------------------------------------------------------------------------- interacting particles


def pairwise_sq_dists(Z) -> np.ndarray:
    """``|z_i - z_j|^2`` for the rows of ``Z`` (shape ``(L, d)``), as an ``(L, L)`` matrix."""
    Z = np.asarray(Z, float)
    diff = Z[:, None, :] - Z[None, :, :]
    return np.einsum("ijk,ijk->ij", diff, diff)


def median_bandwidth(Z) -> float:
    """The median heuristic ``h = median_{i<j} |z_i - z_j|^2 / log L`` (Liu and Wang, 2016).

    Raises
    ------
    ParameterError
        If ``L < 2`` or every pair of particles coincides (``h`` would be 0).
    """
    Z = np.asarray(Z, float)
    n = Z.shape[0]
    if n < 2:
        raise ParameterError("n_particles", f"the median heuristic needs at least 2 particles, got {n}")
    iu = np.triu_indices(n, 1)
    h = float(np.median(pairwise_sq_dists(Z)[iu])) / math.log(n)
    if not h > 0:
        raise ParameterError("bandwidth", "the median heuristic gives bandwidth 0: the particles coincide")
    return h


def rbf_kernel(Z, bandwidth: float) -> np.ndarray:
    """``K_ij = exp(-|z_i - z_j|^2 / h)``."""
    return np.exp(-pairwise_sq_dists(Z) / float(bandwidth))


def svgd_velocity(Z, grad_u, bandwidth: float, normalise: bool = True) -> np.ndarray:
    r"""``phi(Z)``: the kernel-weighted ``-grad U`` plus the repulsion (see the module docs).

    Row ``i`` is ``c sum_j [k_ij (-grad U(z_j)) + (2/h) (z_i - z_j) k_ij]`` with ``c = 1/L``
    (``normalise``) or 1. One SVGD step of size ``epsilon`` is ``Z + epsilon phi(Z)``
    ("Stochastic Gradient MCMC with Repulsive Forces", eqs. 4 and 6, with the kernel term's sign
    corrected to repulsion).

    Parameters
    ----------
    Z : ndarray, shape (L, d)
        Particles.
    grad_u : ndarray, shape (L, d)
        ``grad U`` at each particle (exact or stochastic).
    bandwidth : float
        ``h > 0``.
    normalise : bool
        Divide by ``L``.
    """
    Z = np.asarray(Z, float)
    k = rbf_kernel(Z, bandwidth)
    phi = -k @ np.asarray(grad_u, float) + (2.0 / bandwidth) * (k.sum(axis=1)[:, None] * Z - k @ Z)
    return phi / Z.shape[0] if normalise else phi


def repulsive_noise_cov(Z, bandwidth: float, step_size: float, normalise: bool = True) -> np.ndarray:
    """The ``(L, L)`` factor ``2 epsilon K / L`` of SGLD+R's noise covariance ``(2 epsilon K / L) (x) I_d``.

    ("Stochastic Gradient MCMC with Repulsive Forces", eqs. 5 and 7: diffusion ``D_K / L``.)
    """
    k = rbf_kernel(Z, bandwidth)
    scale = 2.0 * float(step_size) / (np.asarray(Z).shape[0] if normalise else 1.0)
    return scale * k
