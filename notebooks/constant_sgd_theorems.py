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
# # "Stochastic Gradient Descent as Approximate Bayesian Inference": its theorems, checked
#
# On the quadratic averaged loss `L = theta^T A theta / 2` with minibatch gradient noise
# `C / S` and `N` data points, constant SGD's stationary law is Gaussian, and the paper picks
# the learning rate or preconditioner that brings it closest (in KL) to the posterior
# `N(0, (N A)^{-1})`. This notebook checks, with `sgsim.theory.ou`, `sgsim.theory.kl` and
# simulations on `sgsim.targets.ou_quadratic`:
#
# 1. Theorem 1: `epsilon* = 2 S D / (N Tr C)` against a grid search of the exact OU KL;
# 2. Theorem 2 / Corollary 3: `H* = (2S/N) C^{-1}` gives KL = 0; the paper's diagonal rule is a
#    surrogate's minimiser, beaten by the true KL-optimal diagonal when `C` is not diagonal;
# 3. the momentum identity: eq. 25 drops a commutator term, exact only when
#    `[A, [A, Sigma]] = 0`; its error grows with `epsilon ||A|| / mu^2`;
# 4. iterate averaging: the covariance of window means of constant-SGD iterates (eq. 50, and
#    the exact discrete one) against simulation;
# 5. IASG (Algorithm 1, the `iasg` method) under `A = C`: its window means against the exact
#    time average, eq. 34 and the posterior.
#
# **Configuration**: `D = 4`, `A` and `C` random symmetric positive definite (condition 20,
# seeds 0 and 1), `N = 1000`, `S = 10`. Every key claim is an `assert`.

# %%
import matplotlib.pyplot as plt
import numpy as np

import sgsim
from sgsim.theory import kl, ou, time_average_cov


def spd(seed, d, kappa):
    """A random symmetric positive definite matrix with eigenvalues log-uniform in [1, kappa]."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return q @ np.diag(np.exp(rng.uniform(0, np.log(kappa), d))) @ q.T


A, C = spd(0, 4, 20.0), spd(1, 4, 20.0)
N, S = 1000, 10

# %% [markdown]
# ## 1. Theorem 1: the KL-optimal constant learning rate

# %%
eps_star = kl.optimal_lr(C, N, S)
grid = eps_star * np.exp(np.linspace(-1.5, 1.5, 301))
kls = np.array([kl.kl_to_posterior(ou.sgd_cov(A, C, e, S), A, N) for e in grid])
best = grid[np.argmin(kls)]
print(f"epsilon* = {eps_star:.5g}; grid argmin = {best:.5g} (ratio {best / eps_star:.4f}); KL there {kls.min():.4f}")
fig, ax = plt.subplots(figsize=(6, 3.6))
ax.semilogx(grid, kls)
ax.axvline(eps_star, color="k", ls="--", label="Theorem 1")
ax.set_xlabel("learning rate epsilon")
ax.set_ylabel("KL(q || posterior), OU law")
ax.legend()
plt.show()
assert abs(best / eps_star - 1) < 0.011  # the grid's resolution is 1% per point

# %% [markdown]
# ## 2. Preconditioners: Theorem 2 and the diagonal rule of Corollary 3

# %%
h_star = kl.optimal_preconditioner(C, N, S)
k_star = kl.kl_to_posterior(ou.preconditioned_sgd_cov(A, C, h_star, S), A, N)
rule = kl.diagonal_preconditioner(C, N, S)
best_diag = kl.kl_optimal_diagonal_preconditioner(A, C, N, S)
k_rule = kl.kl_to_posterior(ou.preconditioned_sgd_cov(A, C, rule, S), A, N)
k_best = kl.kl_to_posterior(ou.preconditioned_sgd_cov(A, C, best_diag, S), A, N)
print(f"KL with H*: {k_star:.2e}; diagonal rule {k_rule:.4f}; KL-optimal diagonal {k_best:.4f}")
assert k_star < 1e-10 and k_best < k_rule

# %% [markdown]
# ## 3. The momentum identity and its commutator term
#
# The relative difference between eq. 25 and the OU law's covariance, against
# `epsilon ||A|| / mu^2`, for this non-commuting pair and for a commuting one (`C = A^2 + I`).

# %%
mu = 0.5
lam_max = np.linalg.eigvalsh(A)[-1]
ratios = np.logspace(-2, 0.7, 12)
errors, commuting = [], []
for r in ratios:
    eps = r * mu**2 / lam_max
    full = ou.momentum_cov(A, C, eps, mu, S)
    errors.append(np.abs(ou.momentum_cov(A, C, eps, mu, S, exact_ou=False) - full).max() / np.abs(full).max())
    cc = A @ A + np.eye(4)
    full_c = ou.momentum_cov(A, cc, eps, mu, S)
    commuting.append(np.abs(ou.momentum_cov(A, cc, eps, mu, S, exact_ou=False) - full_c).max() / np.abs(full_c).max())
fig, ax = plt.subplots(figsize=(6, 3.6))
ax.loglog(ratios, errors, "o-", label="A, C not commuting")
ax.loglog(ratios, np.maximum(commuting, 1e-17), "s-", label="C = A^2 + I (commuting)")
ax.set_xlabel("epsilon ||A|| / mu^2")
ax.set_ylabel("relative error of eq. 25")
ax.legend()
plt.show()
print("eq. 25 error, not commuting:", " ".join(f"{e:.1e}" for e in errors))
assert max(commuting) < 1e-12 and errors[-1] > 1e-2 and errors[0] < 1e-2
assert np.all(np.diff(errors) > 0)  # grows with epsilon ||A|| / mu^2

# %% [markdown]
# ## 4. Iterate averaging: the covariance of window means
#
# Constant SGD at `epsilon = 0.05 / ||A||`, 2000 chains started from the exact stationary law,
# windows of `T = 200` steps: the covariance of one window's mean in simulation, against the
# exact discrete time average (`time_average_cov`) and the OU formula (eq. 50, which differs
# by `O(epsilon ||A||)`). Entry SE `sqrt((S_ij^2 + S_ii S_jj) / n)`, 5 SE. Negative control:
# `Sigma / T`, the covariance if the iterates were independent, is rejected.

# %%
eps = 0.05 / lam_max
T, R = 200, 2000
target = sgsim.targets.ou_quadratic(A, C, S, N)
stat = ou.sgd_cov(A, C, eps, S, exact=True)
x0 = np.random.default_rng(5).standard_normal((R, 4)) @ np.linalg.cholesky(stat).T
r = sgsim.sample(target, "sgld", T, n_chains=R, step_size=eps / N, temperature=0.0, init=x0, seed=6,
                 progress=False)  # fmt: skip
means = r.posterior["theta"].values.mean(axis=1)  # (R, 4): each chain's window mean
emp = np.cov(means, rowvar=False)
exact = time_average_cov(np.eye(4) - eps * A, stat, T)
eq50 = ou.window_mean_cov(A, ou.sgd_cov(A, C, eps, S), eps * T)
se = np.sqrt((exact**2 + np.outer(np.diag(exact), np.diag(exact))) / R)
print("max |simulated - exact| / SE:", f"{np.max(np.abs(emp - exact) / se):.2f}")
print("eq. 50 against exact, relative:", f"{np.abs(eq50 - exact).max() / np.abs(exact).max():.2e}")
assert np.all(np.abs(emp - exact) <= 5 * se)
assert np.abs(eq50 - exact).max() / np.abs(exact).max() < 0.1
# negative control: as if the T iterates were independent (Sigma / T), the same test rejects
iid = stat / T
se_iid = np.sqrt((iid**2 + np.outer(np.diag(iid), np.diag(iid))) / R)
print("Sigma / T (independent iterates) is off by up to", f"{np.max(np.abs(emp - iid) / se_iid):.0f} SE")
assert np.any(np.abs(emp - iid) > 5 * se_iid)

# %% [markdown]
# ## 5. IASG under A = C (eq. 34)
#
# When the model holds (Bernstein-von Mises, Fisher = Hessian: `A = C`), the stationary
# covariance of constant SGD is `(epsilon / (2S)) I` (eq. 32), and the window mean over
# `T = N / S` steps has covariance `D*` of eq. 34, which approaches the posterior `(N A)^{-1}`
# when `epsilon N lambda_min / S` is large. Here the `iasg` method itself (Algorithm 1: the
# running mean is its state, one draw per window) on the OU quadratic with `C = A`: its window
# means against the exact discrete time average, eq. 34 and the posterior. Entry SE as above,
# 5 SE. Negative control: the iterates' own stationary covariance is rejected.

# %%
A5 = A / np.linalg.eigvalsh(A)[0]  # lambda_min = 1, so that the error factor e(lambda) is small
N5, S5 = 2000, 20
T5 = N5 // S5
eps5 = 0.5 / np.linalg.eigvalsh(A5)[-1]
lam5, u5 = np.linalg.eigh(A5)
x5 = eps5 * N5 * lam5 / S5
d_star = u5 @ np.diag((1 + np.expm1(-x5) / x5) / (N5 * lam5)) @ u5.T  # eq. 34
target5 = sgsim.targets.ou_quadratic(A5, A5, S5, N5)
stat5 = ou.sgd_cov(A5, A5, eps5, S5, exact=True)
exact5 = time_average_cov(np.eye(4) - eps5 * A5, stat5, T5)
post5 = np.linalg.inv(N5 * A5)
R5 = 2000
x0 = np.random.default_rng(7).standard_normal((R5, 4)) @ np.linalg.cholesky(stat5).T
r = sgsim.sample(target5, "iasg", T5, n_chains=R5, step_size=eps5, window=T5, init=x0, seed=8, progress=False)
means5 = r.posterior["theta"].values[:, 0]  # one window per chain
emp5 = np.cov(means5, rowvar=False)
se5 = np.sqrt((exact5**2 + np.outer(np.diag(exact5), np.diag(exact5))) / R5)
rel = lambda m, ref: np.abs(m - ref).max() / np.abs(ref).max()  # noqa: E731
print("max |IASG - exact| / SE:", f"{np.max(np.abs(emp5 - exact5) / se5):.2f}")
print(f"eq. 34 vs exact: {rel(d_star, exact5):.2e}; eq. 34 vs posterior: {rel(d_star, post5):.2e}; "
      f"largest error factor e(lambda_min) = {np.expm1(-x5[0]) / x5[0]:.3f}")  # fmt: skip
assert np.all(np.abs(emp5 - exact5) <= 5 * se5)
assert rel(d_star, exact5) < 0.1
se_it = np.sqrt((stat5**2 + np.outer(np.diag(stat5), np.diag(stat5))) / R5)
assert np.any(np.abs(emp5 - stat5) > 5 * se_it)  # negative control: the iterates' covariance
