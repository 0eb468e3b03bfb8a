# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Theorem 1 of "Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning", checked exactly
#
# The theorem ([cSG] eqs. 5-6, Appendix C; Theorem 2 of the ICLR version) bounds the
# 2-Wasserstein distance between the law of the K-th iterate and the target, for cSGLD
# (cosine cyclical step sizes) and for SGLD with `h_k = h_0 / k`. On a Gaussian target the
# law of every iterate is Gaussian and known exactly ({ref}`theory-exact-sgld`), so the distance can be
# computed in closed form (F8) **with no Monte Carlo**, and every constant of the bound can
# be computed ({ref}`theory-bound-remarks`). This notebook shows:
#
# 1. the exact W2 to the target over iterations, cSGLD against SGLD at equal K;
# 2. the bound of Theorem 1 with computable constants, above the exact W2 at every step,
#    and how loose it is (it grows with K at fixed `alpha_0`: {ref}`theory-bound-remarks`, {ref}`erratum-bound-grows`);
# 3. the diffusion-time argument of [cSG] Section 4 (`h_0` matching and the ratio
#    `pi^2 K / (9 H_K^2)`);
# 4. the weak-convergence rates of the ICLR version's Theorem 1 ({ref}`theory-weak-convergence`, reconstructed),
#    fitted on an exact computation of the bias and MSE of a sample average.
#
# Every key claim is an `assert`, so the notebook fails in CI if it stops holding.
#
# **Configuration ({ref}`theory-bound-remarks`)**, stated in full:
#
# | | |
# |---|---|
# | target | `N(0, diag(1, 4))`, i.e. `U(theta) = theta^T P theta / 2` with `P = diag(1, 1/4)`, temperature 1 |
# | initial law | `N((5, 5), 0.01 I)` |
# | gradients | `P theta + zeta`, `zeta ~ N(0, 0.1 I)` (and exact gradients for comparison) |
# | K | 2000 steps |
# | cSGLD | `alpha_0 = 0.2`, `M = 10` cycles (`L_c = 200`), no exploration stage (`beta = 0`) |
# | SGLD | `h_k = h_0 / k` with `h_0 = 0.2` and `h_0 = 1` |
# | convention | [cSG]: drift `alpha grad U`, injected noise variance `2 alpha` |

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from sgsim.schedules import cyclical
from sgsim.theory import gaussian_kl, gaussian_w2, langevin_law, sgld_law
from sgsim.theory.convergence import (
    csgld_bound,
    discretisation_ratio,
    harmonic_number,
    kappa0_gaussian,
    linear_gaussian_constants,
    matched_h0,
    sgld_bound,
    theorem1_terms,
    weak_error_terms,
)

START = time.perf_counter()
np.set_printoptions(precision=4, suppress=False)

PREC = np.diag([1.0, 0.25])
SHIFT = np.zeros(2)
TARGET_MEAN, TARGET_COV = np.zeros(2), np.linalg.inv(PREC)
M0, S0 = np.array([5.0, 5.0]), 0.01 * np.eye(2)
V = 0.1 * np.eye(2)
K, ALPHA0, M = 2000, 0.2, 10
steps = np.arange(1, K + 1)

SCHEDULES = {
    "cSGLD alpha0=0.2": cyclical(ALPHA0, K, n_cycles=M).step_size,
    "SGLD h0=0.2": 0.2 / steps,
    "SGLD h0=1": 1.0 / steps,
}

# %% [markdown]
# ## 1. Exact W2 to the target over iterations
#
# `sgld_law` propagates the mean and covariance of every iterate ({ref}`theory-exact-sgld`); `gaussian_w2`
# is the closed form of F8.

# %%
paths = {name: sgld_law(PREC, SHIFT, a, grad_noise_cov=V, init_mean=M0, init_cov=S0) for name, a in SCHEDULES.items()}
w2 = {name: gaussian_w2(p.mean, p.cov, TARGET_MEAN, TARGET_COV) for name, p in paths.items()}

fig, ax = plt.subplots(figsize=(7, 4))
for name, w in w2.items():
    ax.semilogy(steps, w, label=name)
ax.set_xlabel("iteration k")
ax.set_ylabel("exact W2(mu_k, target)")
ax.set_title("Exact W2 to N(0, diag(1, 4)), gradient noise 0.1 I")
ax.legend()
plt.show()

for name, w in w2.items():
    print(f"{name:18s} W2 at K = {K}: {w[-1]:.4g}")

# %% [markdown]
# At equal K the cyclical schedule ends far closer to the target than either decreasing
# schedule: an independent re-run made when this check was designed gave 0.0130, 3.48 and 0.61 for
# this configuration (an illustration, not a regression target). Within each cycle the distance
# falls as the step size shrinks; the restarts at large steps raise it again briefly.

# %%
final = {name: w[-1] for name, w in w2.items()}
assert final["cSGLD alpha0=0.2"] < final["SGLD h0=1"] < final["SGLD h0=0.2"]
assert final["cSGLD alpha0=0.2"] < 0.05 * final["SGLD h0=1"]

# %% [markdown]
# ## 2. The bound of Theorem 1 with computable constants
#
# For `U = theta^T P theta / 2 - c^T theta` ({ref}`theory-bound-remarks`): `L_U = lambda_max(P)`,
# `B = ||c||`, `kappa_0` from D1, dissipativity `m_U = lambda_min(P)` and a tiny `b_U > 0`
# (here `c = 0`), `C_3 = W2(mu_0, target)` and `C_4 = 1/lambda_min(P)` (strong convexity).
# With gradient noise `V`, Assumption 2 (iv) holds with `sigma = 1/2` once
# `B^2 >= tr V / (2 sigma)`. The bound uses the exact schedule sums ({ref}`erratum-step-sums`) and the
# appendix's prefactor `(12 + C_2 S)^(1/2)` ({ref}`erratum-bound-prefactor`).

# %%
consts = {
    "exact gradients": linear_gaussian_constants(PREC, SHIFT, M0, S0),
    "gradient noise 0.1 I": linear_gaussian_constants(PREC, SHIFT, M0, S0, V),
}
print(f"kappa0 = {kappa0_gaussian(M0, S0):.4f}")
for label, c in consts.items():
    print(f"{label:21s} C0 = {c.C0:.4g}, C1 = {c.C1:.4g}, C2 = {c.C2:.4g}, ", end="")
    print(f"C3 = {c.C3:.4g}, C4 = {c.C4:.4g}, sigma = {c.sigma}")


# %%
def bound_path(c, alpha, **options):
    """Theorem 1's terms after every step 1..K, from the partial sums of the schedule."""
    terms = [theorem1_terms(c, s, s2, **options) for s, s2 in zip(np.cumsum(alpha), np.cumsum(alpha**2), strict=True)]
    return {field: np.array([getattr(t, field) for t in terms]) for field in ("kl", "w2_discretisation", "total")}


c_noise = consts["gradient noise 0.1 I"]
bounds = {name: bound_path(c_noise, a) for name, a in SCHEDULES.items()}

fig, axes = plt.subplots(1, 3, figsize=(15, 4), sharey=True)
for ax, (name, w) in zip(axes, w2.items(), strict=True):
    ax.semilogy(steps, bounds[name]["total"], label="Theorem 1 bound")
    ax.semilogy(steps, w, label="exact W2")
    ax.set_title(name)
    ax.set_xlabel("iteration k")
axes[0].set_ylabel("W2(mu_k, target)")
axes[0].legend()
plt.show()

print(f"{'schedule':18s} {'exact W2':>10s} {'bound':>10s} {'bound / exact':>14s}")
for name, w in w2.items():
    b = bounds[name]["total"][-1]
    print(f"{name:18s} {w[-1]:10.4g} {b:10.4g} {b / w[-1]:14.3g}")

# %% [markdown]
# The bound holds at every step, for both constant sets and for the three prefactor
# variants of {ref}`erratum-bound-prefactor` (main text `c_p = 6`, appendix `c_p = 12`, Raginsky et al.'s factor
# 8 on the time term). So does each piece of the split, against its exact value with
# `nu_S` the exact Langevin law at the diffusion time `S = sum alpha_k` ({ref}`theory-langevin-law`):
# `KL(mu_k || nu_S)`, `W2(mu_k, nu_S)` and `W2(nu_S, nu_inf)`.

# %%
for label, c in consts.items():
    noise = V if label == "gradient noise 0.1 I" else None
    for name, alpha in SCHEDULES.items():
        p = sgld_law(PREC, SHIFT, alpha, grad_noise_cov=noise, init_mean=M0, init_cov=S0)
        exact = gaussian_w2(p.mean, p.cov, TARGET_MEAN, TARGET_COV)
        for options in ({}, {"c_p": 6.0}, {"time_factor": 8.0}):
            assert np.all(bound_path(c, alpha, **options)["total"] >= exact), (label, name, options)
        s = np.cumsum(alpha)
        nu_mean, nu_cov = langevin_law(PREC, SHIFT, s, M0, S0)
        pieces = bound_path(c, alpha)
        assert np.all(pieces["kl"] >= gaussian_kl(p.mean, p.cov, nu_mean, nu_cov))
        assert np.all(pieces["w2_discretisation"] >= gaussian_w2(p.mean, p.cov, nu_mean, nu_cov))
        assert np.all(c.C3 * np.exp(-s / c.C4) >= gaussian_w2(nu_mean, nu_cov, TARGET_MEAN, TARGET_COV))
print("bound >= exact W2 at every step: all schedules, both constant sets, three prefactors")

# %% [markdown]
# **Where the bound is loose.** For cSGLD at K = 2000 it is about 10^6 times the exact
# distance: the exponential term `C_3 e^{-S/C_4}` is negligible (`S = 201`), and the whole
# bound is the discretisation term, whose KL part is `C_1 sum alpha_k^2 + sigma C_0 sum alpha_k`
# with `C_1 = 6 L_U^2 (C_0 + d)` in the hundreds (it carries `kappa_0 = 51`, the exponential
# moment of a start at distance 7 from the mode). The exact `KL(mu_K || nu_S)` is 8e-5.
#
# **It grows with K at fixed `alpha_0`** ({ref}`theory-bound-remarks`, {ref}`erratum-bound-grows`): both KL terms are
# proportional to K, so the cSGLD bound grows like K, while the SGLD bound grows like
# `log K`. The exact W2 does not grow. The theorem compares the two schedules at equal K; it
# does not say that the bound tends to 0.
#
# The steps here (`alpha_0 = 0.2`, `h_0 = 1`) exceed the proof's step restriction
# `min(1, m_U / (4 L_U^2)) = 1/16` ({ref}`theory-derived-constants`) on purpose, to keep the
# configuration above, so the calls below pass `step_check="ignore"`: the values are the formula's,
# which section 2 showed still lies above the exact W2 on this target.

# %%
ks = np.array([2_000, 20_000, 200_000, 2_000_000])
# alpha_0 = 0.2 and h_0 = 1 exceed the step limit 1/16 on purpose (see above): no StepRestrictionWarning
cs_growth = np.array([csgld_bound(c_noise, ALPHA0, k // 200, k, step_check="ignore").total for k in ks])  # L_c = 200
sg_growth = np.array([sgld_bound(c_noise, 1.0, k, step_check="ignore").total for k in ks])
for k, a, b in zip(ks, cs_growth, sg_growth, strict=True):
    print(f"K = {k:>9,d}: cSGLD bound {a:10.4g}   SGLD (h0 = 1) bound {b:8.4g}")
assert np.all(np.diff(cs_growth) > 0) and np.all(np.diff(sg_growth) > 0)
assert cs_growth[-1] / cs_growth[0] > 500  # ~ K: a factor 1000 in K
assert sg_growth[-1] / sg_growth[0] < 2  # ~ log K
assert bounds["cSGLD alpha0=0.2"]["total"][-1] > 1e5 * final["cSGLD alpha0=0.2"]
p = paths["cSGLD alpha0=0.2"]
nu_mean, nu_cov = langevin_law(PREC, SHIFT, SCHEDULES["cSGLD alpha0=0.2"].sum(), M0, S0)
kl_exact = gaussian_kl(p.mean[-1], p.cov[-1], nu_mean, nu_cov)
print(f"cSGLD at K: exact KL(mu_K || nu_S) = {kl_exact:.3g}, its bound {bounds['cSGLD alpha0=0.2']['kl'][-1]:.4g}")

# the paper's printed sums (K alpha0 / 2, 3 alpha0^2 K / 8) are smaller than the exact ones
printed = csgld_bound(c_noise, ALPHA0, M, K, exact_sums=False, step_check="ignore").total
exact_sums = csgld_bound(c_noise, ALPHA0, M, K, step_check="ignore").total
print(f"cSGLD bound at K: printed sums {printed:.5g}, exact sums {exact_sums:.5g}")
assert printed < exact_sums

# %% [markdown]
# ## 3. The diffusion-time argument ([cSG] Section 4)
#
# The exponential term `C_3 exp(-S / C_4)` depends on the diffusion time `S = sum_k alpha_k`:
# `alpha_0 (K + M) / 2 = 201` for cSGLD against `h_0 H_K` (1.64 and 8.18) for SGLD. For SGLD
# with `h_0 = 0.2` the exact distance of the *diffusion* at time `S` to the target already
# accounts for nearly all of the sampler's exact W2: the decreasing schedule has simply not
# travelled far enough.

# %%
for name, alpha in SCHEDULES.items():
    s = alpha.sum()
    nu_mean, nu_cov = langevin_law(PREC, SHIFT, s, M0, S0)
    w2_nu = gaussian_w2(nu_mean, nu_cov, TARGET_MEAN, TARGET_COV)
    print(f"{name:18s} S = {s:8.4g}  exact W2(nu_S, target) = {w2_nu:9.3g}  exact W2(mu_K, target) = {final[name]:.4g}")
    if name == "SGLD h0=0.2":
        assert abs(w2_nu / final[name] - 1) < 0.05

# %% [markdown]
# To give SGLD cSGLD's diffusion time, `h_0 H_K = K alpha_0 / 2`, i.e.
# `h_0 = K alpha_0 / (2 H_K)`. The discretisation sums then compare as
# `(pi^2/6) h_0^2 / (3 alpha_0^2 K / 8) = pi^2 K / (9 H_K^2)` (the sigma terms are equal
# by construction): SGLD's KL bound is larger by this ratio.

# %%
for k, expected in ((1_000, 19.6), (50_000, 422.0), (1_000_000, 5294.0)):
    ratio = discretisation_ratio(k)
    print(f"K = {k:>9,d}: H_K = {harmonic_number(k):7.4f}, ratio pi^2 K / (9 H_K^2) = {ratio:8.1f}")
    assert abs(ratio - expected) < 0.5
h0_star = matched_h0(ALPHA0, K)
print(f"matched h0 at K = {K}, alpha0 = {ALPHA0}: {h0_star:.4g}; ratio {discretisation_ratio(K):.1f}")

# %% [markdown]
# The matched `h_0 = 24.5` is far outside the proof's `h_0 <= 1` (and the first steps are
# unstable: `|1 - h_1 lambda| > 1`). The exact law shows what this means: the distance
# first explodes, then collapses as `h_k` falls below `2 / lambda_max`; at K the matched SGLD
# is even closer to the target than cSGLD. The bound of Theorem 1, evaluated with the same
# formula, fails on the way (it was never proved for `h_0 > 1`). The argument of Section 4
# is a comparison of bounds, not of the samplers' actual errors.

# %%
h_star = h0_star / steps
p_star = sgld_law(PREC, SHIFT, h_star, grad_noise_cov=V, init_mean=M0, init_cov=S0)
w2_star = gaussian_w2(p_star.mean, p_star.cov, TARGET_MEAN, TARGET_COV)
bound_star = bound_path(c_noise, h_star)["total"]
print(f"matched SGLD: max exact W2 {w2_star.max():.3g} (step {w2_star.argmax() + 1}), W2 at K {w2_star[-1]:.4g}")
print(f"steps where the formula lies below the exact W2: {np.count_nonzero(bound_star < w2_star)}")
assert w2_star.max() > 1e3 and w2_star[-1] < final["cSGLD alpha0=0.2"]
assert np.any(bound_star < w2_star)

fig, ax = plt.subplots(figsize=(7, 4))
ax.loglog(steps, w2_star, label=f"exact W2, SGLD h0 = {h0_star:.1f} (matched)")
ax.loglog(steps, bound_star, label="Theorem 1 formula (h0 > 1: not a bound)")
ax.loglog(steps, w2["cSGLD alpha0=0.2"], label="exact W2, cSGLD")
ax.set_xlabel("iteration k")
ax.set_ylabel("W2")
ax.legend()
plt.show()

# %% [markdown]
# ## 4. Weak convergence (ICLR Theorem 1; {ref}`theory-weak-convergence`, reconstructed)
#
# The ICLR version bounds the bias and MSE of a sample average `phi_hat` of a test function
# by `Bias = O(1/(alpha_0 K) + alpha_0)` and `MSE = O(1/(alpha_0 K) + alpha_0^2)` (the
# extraction lost the formulas; {ref}`theory-weak-convergence` rebuilds them from Chen, Ding & Carin 2015).
#
# Exact check: target `N(0, 1)` (`U = x^2/2`), start at the point `x_0 = 3`, test function
# `phi(x) = x^2` (`phi_bar = 1`), `M = K / 100` cycles, no gradient noise, temperature 1,
# and the grid `alpha_0 in {0.05, 0.1, 0.2, 0.4}` x `K in {1000, 2000, 5000, 10000, 20000}`
# (20 pairs). The iterates `x_1..x_K` are jointly Gaussian, so `E phi_hat` and
# `Var phi_hat` are exact:
#
# - `m_k, v_k` from `sgld_law`;
# - `Cov(x_i, x_j) = (prod_{k=i+1}^j f_k) v_i` for `j > i`, `f_k = 1 - alpha_k` ({ref}`theory-time-averages`);
# - Isserlis: `Cov(x_i^2, x_j^2) = 2 c_ij^2 + 4 m_i m_j c_ij`.
#
# The double sum `sum_ij w_i w_j Cov(x_i^2, x_j^2)` is accumulated in O(K) with
# `A_j = sum_{i<j} w_i v_i^2 F_ij^2` and `B_j = sum_{i<j} w_i m_i v_i F_ij`, where
# `F_ij = prod_{k=i+1}^j f_k`. Both averages are computed: step-weighted
# (`w_k = alpha_k / sum alpha`, Chen et al.) and unweighted (`w_k = 1/K`, as the ICLR paper
# defines it).


# %%
def average_moments(alpha, m, v, w):
    """Exact E and Var of sum_k w_k x_k^2 for SGLD on N(0, 1); arrays (..., K)."""
    f = 1.0 - alpha
    mean = np.sum(w * (m**2 + v), axis=-1)
    var = np.sum(w**2 * (2 * v**2 + 4 * m**2 * v), axis=-1)
    a_acc = np.zeros(alpha.shape[:-1])
    b_acc = np.zeros(alpha.shape[:-1])
    for j in range(1, alpha.shape[-1]):
        a_acc = f[..., j] ** 2 * (a_acc + w[..., j - 1] * v[..., j - 1] ** 2)
        b_acc = f[..., j] * (b_acc + w[..., j - 1] * m[..., j - 1] * v[..., j - 1])
        var += 2 * w[..., j] * (2 * a_acc + 4 * m[..., j] * b_acc)
    return mean, var


def scalar_law(alpha):
    """Means and variances of x_1..x_K for SGLD on N(0, 1) from the point x_0 = 3."""
    path = sgld_law([[1.0]], [0.0], alpha, init_mean=[3.0])
    return path.mean[..., 0], path.cov[..., 0, 0]


# the O(K) recursion against the O(K^2) double sum on a short run
alpha = cyclical(0.3, 200, n_cycles=2).step_size
m, v = scalar_law(alpha)
cov_x = np.tril(np.exp(np.subtract.outer(np.cumsum(np.log1p(-alpha)), np.cumsum(np.log1p(-alpha))))) * v[None, :]
cov_x = np.tril(cov_x) + np.tril(cov_x, -1).T
cov_phi = 2 * cov_x**2 + 4 * np.outer(m, m) * cov_x
for w in (alpha / alpha.sum(), np.full(alpha.size, 1 / alpha.size)):
    mean, var = average_moments(alpha, m, v, w)
    assert np.isclose(mean, np.sum(w * (m**2 + v)), rtol=1e-12)
    assert np.isclose(var, w @ cov_phi @ w, rtol=1e-10)
print("O(K) recursion = O(K^2) double sum")

# %%
ALPHA0S = np.array([0.05, 0.1, 0.2, 0.4])
KS = [1_000, 2_000, 5_000, 10_000, 20_000]
rows = []  # (weighted, alpha0, K, bias, mse)
for k in KS:
    alpha = np.stack([cyclical(a0, k, n_cycles=k // 100).step_size for a0 in ALPHA0S])
    m, v = scalar_law(alpha)
    for weighted in (True, False):
        w = alpha / alpha.sum(axis=-1, keepdims=True) if weighted else np.full(alpha.shape, 1.0 / k)
        mean, var = average_moments(alpha, m, v, w)
        bias = mean - 1.0
        rows += [(weighted, a0, k, bias[i], bias[i] ** 2 + var[i]) for i, a0 in enumerate(ALPHA0S)]
rows = np.array(rows, dtype=float)


def fit(x_cols, y):
    """Least squares in relative error: y ~ X c, minimising sum ((X c - y) / y)^2."""
    x = np.stack(x_cols, axis=1)
    coef, *_ = np.linalg.lstsq(x / y[:, None], np.ones_like(y), rcond=None)
    return coef, np.max(np.abs(x @ coef / y - 1))


fits = {}
for weighted, label in ((1.0, "weighted"), (0.0, "unweighted")):
    r = rows[rows[:, 0] == weighted]
    a0, k, bias, mse = r[:, 1], r[:, 2], r[:, 3], r[:, 4]
    (c1, c2), res_b = fit([1 / (a0 * k), a0], bias)
    (d1, d2), res_m = fit([1 / (a0 * k), a0**2], mse)
    fits[label] = (c1, c2, res_b, d1, d2, res_m)
    print(f"{label:10s} bias = {c1:.3g}/(alpha0 K) + {c2:.3g} alpha0  (max rel. residual {res_b:.1%})")
    print(f"{'':10s} MSE  = {d1:.3g}/(alpha0 K) + {d2:.3g} alpha0^2 (max rel. residual {res_m:.1%})")

# %% [markdown]
# Both forms fit the exact values over the whole grid. For the step-weighted average the
# leading-order constants are predictable: the transient contributes
# `int_0^inf (E x_t^2 - 1) dt / S = 4 / (alpha_0 K / 2) = 8 / (alpha_0 K)` (the Langevin
# diffusion from `x_0 = 3` has `E x_t^2 - 1 = 8 e^{-2t}`), and SGLD's stationary variance
# `1 / (1 - alpha/2)` gives the bias `alpha/2` per step, `sum alpha^2 / (2 sum alpha) = 3 alpha_0 / 8`
# on average. An independent fit made when this check was designed gave `7.4/(alpha_0 K) + 0.43 alpha_0`
# (max residual 11 %) on a grid it did not record; the constants here depend on the grid at the 10 % level (the
# two other grids of 20 pairs below give 7.6 and 7.2, 0.38 and 0.42). The form and the order of the
# constants are reproduced; the exact digits are not a property of the sampler. The MSE
# fits the form `d_1/(alpha_0 K) + d_2 alpha_0^2` less tightly (max residual about 20 %).


# %%
def weighted_bias_fit(alpha0s, ks):
    """Fit c1/(alpha0 K) + c2 alpha0 to the exact bias of the step-weighted average on a grid."""
    out = []
    for k in ks:
        alpha = np.stack([cyclical(a0, k, n_cycles=k // 100).step_size for a0 in alpha0s])
        mean, _ = average_moments(alpha, *scalar_law(alpha), alpha / alpha.sum(axis=-1, keepdims=True))
        out += [(a0, k, mean[i] - 1.0) for i, a0 in enumerate(alpha0s)]
    a0, k, bias = np.array(out).T
    return fit([1 / (a0 * k), a0], bias)


for grid in (
    ([0.01, 0.02, 0.05, 0.1, 0.2], [1_000, 2_000, 5_000, 10_000]),
    ([0.02, 0.05, 0.1, 0.2, 0.5], [1_000, 3_000, 10_000, 30_000]),
):
    (g1, g2), g_res = weighted_bias_fit(*grid)
    print(f"alpha0 in {grid[0]}, K in {grid[1]}: {g1:.3g}/(alpha0 K) + {g2:.3g} alpha0 (max rel. residual {g_res:.1%})")
    assert 5.0 < g1 < 10.0 and 0.3 < g2 < 0.55

# %%
c1, c2, res_b, d1, d2, res_m = fits["weighted"]
assert 5.0 < c1 < 10.0 and 0.3 < c2 < 0.55 and res_b < 0.15
assert d1 > 0 and d2 > 0 and res_m < 0.25
u1, u2, ures_b, *_ = fits["unweighted"]
assert u1 > 0 and u2 > 0 and ures_b < 0.15

r = rows[rows[:, 0] == 1.0]
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for a0 in ALPHA0S:
    sel = r[:, 1] == a0
    axes[0].loglog(r[sel, 2], r[sel, 3], "o", label=f"alpha0 = {a0}")
    kk = np.geomspace(1e3, 2e4)
    axes[0].loglog(kk, c1 / (a0 * kk) + c2 * a0, "-", color=axes[0].lines[-1].get_color())
    axes[1].loglog(r[sel, 2], r[sel, 4], "o")
    axes[1].loglog(kk, d1 / (a0 * kk) + d2 * a0**2, "-", color=axes[1].lines[-1].get_color())
axes[0].set(xlabel="K", ylabel="exact bias of phi_hat", title="bias: exact (dots), fit (lines)")
axes[1].set(xlabel="K", ylabel="exact MSE of phi_hat", title="MSE: exact (dots), fit (lines)")
axes[0].legend()
plt.show()

# %% [markdown]
# The order terms of `sgsim.theory.convergence.weak_error_terms` (the reconstructed D5
# bound, without its unknown constants) track the exact bias of the weighted average within
# a bounded factor over the grid:

# %%
ratios = []
for _, a0, k, bias, _ in r:
    terms = weak_error_terms(cyclical(a0, int(k), n_cycles=int(k) // 100).step_size)
    ratios.append(bias / terms.bias)
ratios = np.array(ratios)
print(f"exact bias / order term: min {ratios.min():.3g}, max {ratios.max():.3g}")
assert 0.1 < ratios.min() and ratios.max() < 10

elapsed = time.perf_counter() - START
print(f"notebook ran in {elapsed:.1f} s")
