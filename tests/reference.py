"""Plain NumPy reference implementations: the oracle for every compiled kernel.

Written independently of ``sgsim``'s kernels (vectorised over chains, gradients through
``scipy.special``), following the papers' formulas. Given the same standard normals ``xi``
(and, for data targets, the same minibatch indices) the compiled kernels must agree with
these to about 1e-12.

Data targets: minibatch indices are drawn with a NumPy ``Generator`` by the documented rule
(with replacement: ``gen.integers(0, N)`` n times; without: a partial Fisher-Yates shuffle of
a permutation kept from step to step), and the integrators take a gradient function that
draws its own minibatch.

Noise convention shared with the kernels (see ``sgsim.integrators._loop``): the
emulated gradient noise ``zeta ~ N(0, V)`` and the injected noise are drawn as one
Gaussian. With ``V = Q diag(lam) Q^T`` (``Q = I`` when ``V`` is diagonal) the step-``k``
noise is ``Q diag(sqrt(a_k lam + c_k)) xi_k``, where for SGLD ``a_k = alpha_k^2``,
``c_k = 2 alpha_k T_k`` and for SGHMC ``c_k = 2 (eta - gamma_hat) alpha_k T_k``; the
gradient-noise correction sets ``a_k = 0`` and ``c_k = 2 eta_eff alpha_k T_k`` on steps
with ``T_k > 0`` (``eta_eff`` = 1 for SGLD, ``eta`` for SGHMC).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
from scipy import special
from threadpoolctl import threadpool_limits

# ----------------------------------------------------------------------------- targets


def mixture_exponents(x, means, var, weights):
    """``log w_i + log N(x | mu_i, var_i I)`` for each row of ``x``: shape (n, K)."""
    x = np.atleast_2d(x)
    d = x.shape[1]
    var = np.broadcast_to(np.asarray(var, float), (means.shape[0],))
    d2 = ((x[:, None, :] - means[None]) ** 2).sum(-1)
    return np.log(weights)[None] - 0.5 * d * np.log(2 * np.pi * var)[None] - d2 / (2 * var[None])


def mixture_log_density(x, means, var, weights):
    return special.logsumexp(mixture_exponents(x, means, var, weights), axis=1)


def mixture_grad_u(x, means, var, weights):
    """``sum_i r_i (x - mu_i) / var_i`` with ``r = softmax`` of the exponents."""
    x = np.atleast_2d(x)
    var = np.broadcast_to(np.asarray(var, float), (means.shape[0],))
    r = special.softmax(mixture_exponents(x, means, var, weights), axis=1)
    return np.einsum("nk,nkd->nd", r / var[None], x[:, None, :] - means[None])


def exp_mixture_log_density(y, rates, weights):
    y = np.asarray(y, float).reshape(-1)
    e = np.log(weights)[None] + np.log(rates)[None] - rates[None] * np.exp(y)[:, None]
    return y + special.logsumexp(e, axis=1)


def exp_mixture_grad_u(y, rates, weights):
    y = np.asarray(y, float).reshape(-1)
    e = np.log(weights)[None] + np.log(rates)[None] - rates[None] * np.exp(y)[:, None]
    r = special.softmax(e, axis=1)
    return (np.exp(y) * (r @ rates) - 1.0)[:, None]


def linear_gaussian_grad_u(x, precision, shift):
    return np.atleast_2d(x) @ precision.T - shift[None]


# ----------------------------------------------------------------------------- data targets


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


# ----------------------------------------------------------------------------- noise


def noise_transform(v, alpha, temp, factor=1.0, corrected=1.0, correction=False):
    """Per-step matrices ``L_k`` with ``noise_k = L_k xi_k``: shape (K, d, d)."""
    v = np.asarray(v, float)
    d = v.shape[0]
    if np.count_nonzero(v - np.diag(np.diag(v))) == 0:
        lam, q = np.diag(v).copy(), np.eye(d)
    else:
        lam, q = np.linalg.eigh(v)
        lam = np.clip(lam, 0, None)
    alpha = np.asarray(alpha, float)
    temp = np.asarray(temp, float)
    a = alpha**2 if lam.any() else np.zeros_like(alpha)
    c = 2 * factor * alpha * temp
    if correction and lam.any():
        a = np.where(temp > 0, 0.0, alpha**2)
        c = 2 * corrected * alpha * temp
    sd = np.sqrt(a[:, None] * lam[None] + c[:, None])
    return q[None] * sd[:, None, :]


# ----------------------------------------------------------------------------- integrators


def sgld(grad, theta0, alpha, temp, v, xi, correction=False):
    """All iterates of SGLD, shape (K, C, d), given standard normals ``xi`` (K, C, d)."""
    lk = noise_transform(v, alpha, temp, 1.0, 1.0, correction)
    theta = np.array(theta0, float)
    path = np.empty((len(alpha),) + theta.shape)
    for k in range(len(alpha)):
        theta = theta - alpha[k] * grad(theta) + xi[k] @ lk[k].T
        path[k] = theta
    return path


def sghmc(grad, theta0, v0, alpha, temp, v, xi, friction, gamma_hat=0.0, correction=False):
    """All iterates of SGHMC in [cSG] order, (theta path, velocity path), each (K, C, d)."""
    lk = noise_transform(v, alpha, temp, friction - gamma_hat, friction, correction)
    theta = np.array(theta0, float)
    vel = np.array(v0, float)
    path = np.empty((len(alpha),) + theta.shape)
    vpath = np.empty_like(path)
    for k in range(len(alpha)):
        theta = theta + vel
        vel = (1 - friction) * vel - alpha[k] * grad(theta) + xi[k] @ lk[k].T
        path[k] = theta
        vpath[k] = vel
    return path, vpath


# ----------------------------------------------------------------------------- the constant-SGD family


def sym_transform(q, coef):
    """Per-step ``L_k`` with ``L_k L_k^T = coef_k q``, in ``q``'s eigenbasis: shape (K, d, d)."""
    q = np.asarray(q, float)
    lam, u = np.linalg.eigh(0.5 * (q + q.T))
    return u[None] * np.sqrt(np.asarray(coef, float)[:, None] * np.clip(lam, 0, None)[None, :])[:, None, :]


def preconditioned_sgd(grad, theta0, eps, c, H, Q, xi):
    """All iterates of ``theta <- theta - eps c H grad U + L_k xi_k`` with ``L_k L_k^T = eps_k^2 Q``."""
    lk = sym_transform(Q, np.asarray(eps) ** 2)
    theta = np.array(theta0, float)
    path = np.empty((len(eps),) + theta.shape)
    for k in range(len(eps)):
        theta = theta - eps[k] * c * grad(theta) @ np.asarray(H).T + xi[k] @ lk[k].T
        path[k] = theta
    return path


def momentum_sgd(grad, theta0, v0, eps, c, mu, V, xi):
    """All iterates of SGD with momentum in [SGDVI] order: (theta path, velocity path)."""
    lk = sym_transform(V, (c * np.asarray(eps)) ** 2)
    theta, vel = np.array(theta0, float), np.array(v0, float)
    path, vpath = np.empty((len(eps),) + theta.shape), np.empty((len(eps),) + theta.shape)
    for k in range(len(eps)):
        vel = (1 - mu) * vel - eps[k] * c * grad(theta) + xi[k] @ lk[k].T
        theta = theta + vel
        path[k], vpath[k] = theta, vel
    return path, vpath


def iasg(grad, theta0, eps, c, window, warmup, V, xi):
    """SGD iterates and the running window means of IASG (Algorithm 1): (theta path, mean path)."""
    path = preconditioned_sgd(grad, theta0, eps, c, np.eye(np.shape(theta0)[-1]), c**2 * np.asarray(V), xi)
    means = np.zeros_like(path)
    for k in range(warmup, len(eps)):
        start = k - (k - warmup) % window
        means[k] = path[start : k + 1].mean(0)
    return path, means


# ----------------------------------------------------------------------------- interacting particles


def svgd(grad, Z0, eps, bandwidth=None, normalise=True):
    """All iterates of SVGD, shape (K, L, d), and the bandwidth of each step, (K,).

    ``Z <- Z + eps_k phi(Z)``, ``phi_i = c sum_j [k_ij (-grad U(z_j)) + (2/h)(z_i - z_j) k_ij]``,
    ``k_ij = exp(-|z_i - z_j|^2 / h)``, ``c = 1/L`` or 1; ``h`` fixed, or the median of the
    pairwise squared distances over ``log L`` at every step. ``grad`` maps (L, d) -> (L, d).
    """
    Z = np.array(Z0, float)
    n = Z.shape[0]
    path = np.empty((len(eps),) + Z.shape)
    hs = np.empty(len(eps))
    for k in range(len(eps)):
        diff = Z[:, None, :] - Z[None, :, :]  # z_i - z_j
        d2 = np.sum(diff**2, axis=-1)
        h = np.median(d2[np.triu_indices(n, 1)]) / np.log(n) if bandwidth is None else bandwidth
        kern = np.exp(-d2 / h)
        phi = kern @ (-grad(Z)) + (2.0 / h) * np.einsum("ij,ijk->ik", kern, diff)
        if normalise:
            phi /= n
        Z = Z + eps[k] * phi
        path[k] = Z
        hs[k] = h
    return path, hs


def sgld_repulsive(grad, Z0, eps, temp, xi, bandwidth=None, normalise=True, sign=1.0, median_correction=True):
    """All iterates of SGLD with repulsive forces, shape (K, L, d), with the bandwidths, (K,).

    ``Z <- Z + c eps_k (-K grad U(Z) + s_k Gamma) + sqrt(2 eps_k T_k c) chol(K) xi_k`` with
    ``Gamma_i = sum_j d k_ij / d z_j``, ``c = 1/L`` or 1, ``s_k = sign * T_k`` when ``T_k > 0``
    and ``sign`` at ``T_k = 0`` (no noise then, and ``Gamma`` without the median part, as in
    SVGD). With the median bandwidth ``h(Z)``, ``Gamma`` has the part
    ``sum_j k_ij |z_i - z_j|^2 / h^2 * d h / d z_j`` (found here by sorting the pairs).
    ``xi`` has shape (K, L, d): the standard normals of every step (those of noise-free steps
    are not used).
    """
    Z = np.array(Z0, float)
    n = Z.shape[0]
    c = 1.0 / n if normalise else 1.0
    path = np.empty((len(eps),) + Z.shape)
    hs = np.empty(len(eps))
    iu = np.triu_indices(n, 1)
    for k in range(len(eps)):
        diff = Z[:, None, :] - Z[None, :, :]
        d2 = np.sum(diff**2, axis=-1)
        vals = d2[iu]
        h = np.median(vals) / np.log(n) if bandwidth is None else bandwidth
        kern = np.exp(-d2 / h)
        gamma = (2.0 / h) * np.einsum("ij,ijk->ik", kern, diff)
        if bandwidth is None and median_correction and temp[k] > 0:
            order = np.argsort(vals, kind="stable")
            dh = np.zeros_like(Z)
            for idx in (order[(len(vals) - 1) // 2], order[len(vals) // 2]):
                p, q = iu[0][idx], iu[1][idx]
                dh[p] += (Z[p] - Z[q]) / np.log(n)
                dh[q] -= (Z[p] - Z[q]) / np.log(n)
            gamma = gamma + (kern * d2 / h**2) @ dh
        s = sign * (temp[k] if temp[k] > 0 else 1.0)
        Z = Z + c * eps[k] * (kern @ (-grad(Z)) + s * gamma)
        if temp[k] > 0:
            # the factorisation numba runs (scipy's LAPACK on one thread, upper factor of the
            # transposed array): K's condition number reaches 1e10 for 150 particles, and two
            # orders of the factorisation differ by that many ulps
            with threadpool_limits(limits=1, user_api="blas"):
                chol = scipy.linalg.cholesky(kern, lower=False).T
            Z = Z + np.sqrt(2.0 * eps[k] * temp[k] * c) * chol @ xi[k]
        path[k] = Z
        hs[k] = h
    return path, hs


def particle_normals(seed, replica, n_particles, n_steps, d, noisy):
    """The standard normals an ensemble's particles draw at each noisy step, shape (K, L, d).

    Particle ``p`` of replica ``r`` draws from ``SeedSequence(seed, spawn_key=(r, 0, p))``
    (PCG64), ``d`` normals per noisy step, nothing at the others (exact gradients only).
    """
    gens = [np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(replica, 0, p))))
            for p in range(n_particles)]  # fmt: skip
    xi = np.zeros((n_steps, n_particles, d))
    for k in range(n_steps):
        if noisy[k]:
            for p in range(n_particles):
                xi[k, p] = gens[p].standard_normal(d)
    return xi


def sgld_repulsive_rb(grad, Z0, eps, temp, seed, bandwidth, batch_size, normalise=True, replica=0):
    """All iterates of SGLD+R in random batches, shape (K, L, d).

    Each step: the gradients; a Fisher-Yates shuffle of ``0..L-1`` (``r = m +
    integers(0, L - m)`` from particle 0's stream); batches of ``batch_size`` consecutive
    shuffled particles, the remainder joining the last; in each batch the SGLD+R step of that
    batch alone (``c = 1 / size`` with ``normalise``), the normals of each particle from its
    own stream (``SeedSequence(seed, spawn_key=(replica, 0, particle))``).
    """
    Z = np.array(Z0, float)
    n, d = Z.shape
    gens = [np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(replica, 0, p))))
            for p in range(n)]  # fmt: skip
    path = np.empty((len(eps),) + Z.shape)
    h = float(bandwidth)
    for k in range(len(eps)):
        G = grad(Z)
        perm = np.arange(n)
        for m in range(n - 1):
            r = m + gens[0].integers(0, n - m)
            perm[[m, r]] = perm[[r, m]]
        new = Z.copy()
        n_batches = n // batch_size
        for b in range(n_batches):
            idx = perm[b * batch_size : (b + 1) * batch_size] if b < n_batches - 1 else perm[b * batch_size :]
            Zb, Gb = Z[idx], G[idx]
            diff = Zb[:, None, :] - Zb[None, :, :]
            kern = np.exp(-np.sum(diff**2, -1) / h)
            c = 1.0 / len(idx) if normalise else 1.0
            s = temp[k] if temp[k] > 0 else 1.0
            step = Zb + c * eps[k] * (kern @ (-Gb) + s * (2.0 / h) * np.einsum("ij,ijk->ik", kern, diff))
            if temp[k] > 0:
                xi = np.array([gens[p].standard_normal(d) for p in idx])
                step = step + np.sqrt(2.0 * eps[k] * temp[k] * c) * np.linalg.cholesky(kern) @ xi
            new[idx] = step
        Z = new
        path[k] = Z
    return path


# ----------------------------------------------------------------------------- the GPU path's normals


def philox4x32_10(counter, key, rounds=10):
    """Philox4x32 ("Parallel random numbers: as easy as 1, 2, 3", Salmon et al., 2011) in plain Python.

    ``counter``: 4 words, ``key``: 2 words (integers below 2^32); returns the 4 output words.
    """
    m0, m1, w0, w1, mask = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85, 0xFFFFFFFF
    c0, c1, c2, c3 = (int(v) & mask for v in counter)
    k0, k1 = (int(v) & mask for v in key)
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + w0) & mask, (k1 + w1) & mask
        p0, p1 = m0 * c0, m1 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & mask, p1 & mask, ((p0 >> 32) ^ c3 ^ k1) & mask, p0 & mask
    return [c0, c1, c2, c3]


def box_muller(words, precision):
    """The normals of one Philox block as sgsim.gpu.kernels makes them (4 in float32, 2 in float64).

    Box-Muller: ``sqrt(-2 log u) (cos phi, sin phi)``, ``phi = 2 pi (v - 1/2)``, from uniforms
    ``u`` in (0, 1) (23-bit midpoints in float32, 53-bit in float64) and ``v`` in [0, 1) (24 and
    53 bits).
    """
    if precision == "float32":
        out = []
        for h in range(2):
            u = ((words[2 * h] >> 9) + 0.5) * 2.0**-23
            v = (words[2 * h + 1] >> 8) * 2.0**-24
            r, phi = np.sqrt(-2.0 * np.log(u)), 2 * np.pi * (v - 0.5)
            out += [r * np.cos(phi), r * np.sin(phi)]
        return np.array(out)
    hu = ((words[0] << 32) | words[1]) >> 11
    hv = ((words[2] << 32) | words[3]) >> 11
    u, v = (hu + 0.5) * 2.0**-53, hv * 2.0**-53
    r, phi = np.sqrt(-2.0 * np.log(u)), 2 * np.pi * (v - 0.5)
    return np.array([r * np.cos(phi), r * np.sin(phi)])
