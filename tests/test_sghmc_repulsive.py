"""Hamiltonian SGLD with repulsive forces (sghmc_repulsive): the compiled step against a NumPy
oracle, the Fokker-Planck residual of its SDE on the two-particle phase space, its stationary
moments on N(0, 1) at a small step, the exact law of its affine case (two particles, median
bandwidth), each with a negative control, and bad input."""

import warnings

import numpy as np
import pytest
import reference as R
import scipy.linalg
from threadpoolctl import threadpool_limits

import sgsim
from sgsim import theory
from sgsim.algorithms import CONSTANT_OPTIONS, Method, constant_schedule
from sgsim.integrators.sghmc_repulsive import algorithm
from sgsim.testing import gaussian_test, kit_target, sample_size
from sgsim.theory import fokker_planck as fp

GAUSS1 = sgsim.targets.standard_gaussian(1)
# the step without Gamma (the divergence of the curl matrix): not a sampler, the negative control
NO_GAMMA = Method(
    "sghmc_repulsive_no_gamma",
    algorithm("sghmc_repulsive_no_gamma", "NOT A SAMPLER: sghmc_repulsive without Gamma", gamma=0.0),
    constant_schedule,
    CONSTANT_OPTIONS,
    "not a sampler: sghmc_repulsive with Gamma dropped",
)


def oracle(grad, Z0, V0, alpha, temp, xi, bandwidth=None, friction=0.1, normalise=True, gamma=1.0, correlated=True):
    """All iterates ``(Z_k, V_k, h_k)`` of the step in NumPy (the module's update rule, line by line).

    ``Z += c K(Z) V``; then at the moved ``Z``: ``V += -eta c K V + alpha c (-K grad U + s Gamma)
    + sqrt(2 eta alpha T c) chol(K) xi`` with ``s = T`` (1 at ``T = 0``, no noise then); ``Gamma``
    (with the median part where SGLD+R's oracle adds it) from that oracle's drift at a zero
    gradient, eps = 1, no 1/L. ``gamma`` scales Gamma, ``correlated=False`` replaces chol(K) by I
    (two wrong steps, for the negative controls).
    """
    Z, V = np.array(Z0, float), np.array(V0, float)
    n = Z.shape[0]
    c = 1.0 / n if normalise else 1.0
    iu = np.triu_indices(n, 1)

    def kernel(Z):
        d2 = np.sum((Z[:, None] - Z[None]) ** 2, -1)
        h = np.median(d2[iu]) / np.log(n) if bandwidth is None else bandwidth
        return np.exp(-d2 / h), h

    zs, vs, hs = [], [], []
    for k in range(len(alpha)):
        Z = Z + c * (kernel(Z)[0] @ V)
        K, h = kernel(Z)
        zero = np.zeros((1,) + Z.shape)
        s_gamma = R.sgld_repulsive(lambda Y: np.zeros_like(Y), Z, [1.0], [temp[k]], zero, bandwidth, False)[0][0] - Z
        V = V - friction * c * (K @ V) + alpha[k] * c * (-K @ grad(Z) + gamma * s_gamma)
        if temp[k] > 0:
            with threadpool_limits(limits=1, user_api="blas"):
                chol = scipy.linalg.cholesky(K, lower=False).T if correlated else np.eye(n)
            V = V + np.sqrt(2.0 * friction * alpha[k] * temp[k] * c) * chol @ xi[k]
        zs.append(Z)
        vs.append(V)
        hs.append(h)
    return np.array(zs), np.array(vs), np.array(hs)


@pytest.mark.parametrize("bandwidth", ["median", 0.7])
@pytest.mark.parametrize("normalise", [True, False])
def test_compiled_step_matches_the_oracle(bandwidth, normalise):
    # the kit's correlated 2-D Gaussian (shared compilation), 6 particles, a cyclical schedule
    # (exploration at T = 0: SVGD with momentum, then sampling), a given initial velocity
    target, n, k, seed, eta = kit_target(), 6, 40, 3, 0.2
    prec, shift = target.params[0], target.params[1]
    sched = sgsim.schedules.cyclical(0.05, k, n_cycles=2, explore_fraction=0.3)
    rng = np.random.default_rng(0)
    z0, v0 = rng.uniform(-3, 3, (n, 2)), 0.1 * rng.standard_normal((n, 2))
    r = sgsim.sample(
        target, "csghmc_repulsive", schedule=sched, n_particles=n, init=z0, init_velocity=v0, bandwidth=bandwidth,
        normalise=normalise, friction=eta, seed=seed,
    )  # fmt: skip
    xi = R.particle_normals(seed, 0, n, k, 2, sched.temperature > 0)
    h = None if bandwidth == "median" else bandwidth

    def path(**kw):
        return oracle(
            lambda Z: Z @ prec - shift, z0, v0, sched.step_size, sched.temperature, xi, h, eta, normalise, **kw
        )

    zs, vs, hs = path()
    kept = np.flatnonzero(sched.collect)
    got = r.posterior["theta"].values[0]
    scale = max(1.0, np.abs(zs).max())
    np.testing.assert_allclose(got, zs[kept], rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(r.constant_data["final_velocity"].values[0], vs[-1], rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(r.sample_stats["bandwidth"].values[0], hs[kept], rtol=1e-13)
    # negative controls of the comparison: Gamma dropped, or the noise independent across particles
    assert np.abs(path(gamma=0.0)[0][kept] - got).max() > 1e-6
    assert np.abs(path(correlated=False)[0][kept] - got).max() > 1e-6


def test_fokker_planck_residual_of_the_phase_space_generator():
    # two particles on N(0, 1) with their momenta, h = 1, C = 1, with the 1/L: the residual of
    # exp(-H) on the 4-D grid [-1.5, 1.5]^4 falls like the spacing squared (measured 0.0263 and
    # 0.00699 at 13 and 25 nodes per side, a ratio 3.76 for spacings 0.25 and 0.125); with Gamma
    # dropped or the noise uncorrelated it stays of order one (0.30 / 0.32 and 0.364 / 0.367)
    res = {kind: [] for kind in fp.HAMILTONIAN_KINDS}
    for n in (13, 25):
        g = fp.grid([-1.5] * 4, [1.5] * 4, n)
        z1, z2, p1, p2 = np.meshgrid(*g.axes, indexing="ij")
        pi = np.exp(-(z1**2 + z2**2 + p1**2 + p2**2) / 2)
        for kind in res:
            drift, diffusion = fp.two_particle_hamiltonian_generator(g, lambda z: z, 1.0, 1.0, kind)
            res[kind].append(fp.stationarity_residual(g, drift, diffusion, pi))
    good = res["sghmc_repulsive"]
    assert good[0] / good[1] >= 3.5, good
    for kind in ("no_gamma", "independent_noise"):
        bad = res[kind]
        assert min(bad) > 0.2 and bad[0] / bad[1] < 1.5, (kind, bad)


def _final_moments(method, n_rep, n_steps, alpha, eta, bandwidth, seed=2):
    # two-particle ensembles on N(0, 1), d = 1, without the 1/L, started from exp(-H):
    # z ~ N(0, 1) and v = sqrt(alpha) p, p ~ N(0, 1); per replica z1^2, z2^2, z1 z2, p1^2, p2^2, p1 p2
    rng = np.random.default_rng(0)
    z0 = rng.standard_normal((n_rep, 2, 1))
    v0 = np.sqrt(alpha) * rng.standard_normal((n_rep, 2, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        r = sgsim.sample(
            GAUSS1, method, n_steps, n_chains=n_rep, n_particles=2, init=z0, init_velocity=v0, step_size=alpha,
            friction=eta, normalise=False, bandwidth=bandwidth, seed=seed, storage="final", on_divergence="mark",
        )  # fmt: skip
    ok = r.constant_data["diverged_at"].values == 0
    z = r.constant_data["final_theta"].values[ok, :, 0]
    p = r.constant_data["final_velocity"].values[ok, :, 0] / np.sqrt(alpha)
    m = np.array([z[:, 0] ** 2, z[:, 1] ** 2, z[:, 0] * z[:, 1], p[:, 0] ** 2, p[:, 1] ** 2, p[:, 0] * p[:, 1]])
    return m.mean(1), m.std(1, ddof=1) / np.sqrt(ok.sum())


def _frozen_kernel_bias(alpha, eta, lam):
    # a kernel frozen at K is SGHMC in each eigendirection of c K (eigenvalue lam) with step
    # alpha lam^2 and friction eta lam: on N(0, 1) Var z = 1 / (1 - alpha lam^2 / (4 - 2 eta lam))
    # and Var p = 2 Var z / (2 - eta lam) exactly; both increase with lam, so lam = c L bounds them
    var_z = 1.0 / (1.0 - alpha * lam**2 / (4.0 - 2.0 * eta * lam))
    return var_z - 1.0, 2.0 * var_z / (2.0 - eta * lam) - 1.0


def test_two_particles_keep_the_product_target_at_a_small_step():
    # 4000 ensembles, alpha = 1e-3 (epsilon = 0.032), eta = 0.01, h = 1, 500 steps (time 16),
    # final state: each moment within 4 SE (over replicas, independent) plus the bias of the
    # frozen kernel at its largest eigenvalue c L = 2 (1e-3 in z, 1.1e-2 in p: the O(epsilon)
    # friction term eta lam / 2). The kernel's change within a step adds an O(epsilon) term of
    # its own, not bounded in closed form: 40,000 ensembles at this step put every moment within
    # 2.4 SE (SE 0.005-0.007) of the truth, so that term is at most about 0.03, half of 4 SE here.
    # Measured with these seeds: |z| <= 1.7 SE; without Gamma E z1 z2 = 0.49 (45 SE)
    alpha, eta = 1e-3, 0.01
    b_z, b_p = _frozen_kernel_bias(alpha, eta, 2.0)
    bound = np.array([b_z, b_z, b_z, b_p, b_p, b_p])
    truth = np.array([1.0, 1.0, 0.0, 1.0, 1.0, 0.0])

    def rejected(method):
        est, se = _final_moments(method, 4000, 500, alpha, eta, 1.0)
        return bool(np.any(np.abs(est - truth) > 4 * se + bound)), est

    bad, est = rejected("sghmc_repulsive")
    assert not bad, est
    # negative control: without Gamma the kernel-smoothed forces pull the particles together
    bad, est = rejected(NO_GAMMA)
    assert bad and est[2] > 0.3, est


def _maps_of_one_step(alpha, eta, seed=5, n_probe=12):
    # F, c and R of x' = F x + c + R xi, x = (z1, z2, v1, v2), xi the particles' normals, by least
    # squares over probes (replicas from random states, each with its own stream's normals)
    rng = np.random.default_rng(seed)
    z = rng.uniform(-2, 2, (n_probe, 2, 1))
    v = 0.3 * rng.standard_normal((n_probe, 2, 1))
    r = sgsim.sample(
        GAUSS1, "sghmc_repulsive", 1, n_chains=n_probe, n_particles=2, init=z, init_velocity=v, step_size=alpha,
        friction=eta, normalise=False, seed=seed, storage="final",
    )  # fmt: skip
    after = np.concatenate(
        [r.constant_data["final_theta"].values[..., 0], r.constant_data["final_velocity"].values[..., 0]], 1
    )
    xi = np.stack([R.particle_normals(seed, q, 2, 1, 1, [True])[0, :, 0] for q in range(n_probe)])
    design = np.concatenate([z[..., 0], v[..., 0], np.ones((n_probe, 1)), xi], 1)
    coef, *_ = np.linalg.lstsq(design, after, rcond=None)
    misfit = np.abs(design @ coef - after).max()
    return coef[:4].T, coef[4], coef[5:].T, misfit


def test_two_particles_with_the_median_bandwidth_follow_their_exact_law():
    # with L = 2 the median kernel is the constant K0 = [[1, 1/2], [1/2, 1]] and Gamma vanishes:
    # the step is affine on N(0, 1), F = [[I, c K0], [-alpha c K0, I - eta c K0 - alpha c^2 K0^2]],
    # c = 1 (no 1/L), R = [[0], [sqrt(2 eta alpha c) chol(K0)]], shift 0 (derived in the theory page)
    alpha, eta, n_steps = 0.01, 0.1, 200
    k0 = np.array([[1.0, 0.5], [0.5, 1.0]])
    eye, zero = np.eye(2), np.zeros((2, 2))
    f = np.block([[eye, k0], [-alpha * k0, eye - eta * k0 - alpha * k0 @ k0]])
    noise = np.sqrt(2 * eta * alpha) * np.vstack([zero, np.linalg.cholesky(k0)])
    got_f, got_c, got_r, misfit = _maps_of_one_step(alpha, eta)
    assert misfit < 1e-12  # affine in the state and the noise
    np.testing.assert_allclose(got_f, f, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got_c, 0.0, atol=1e-12)
    np.testing.assert_allclose(got_r, noise, rtol=0, atol=1e-12)

    # the law after n_steps from exp(-H) (z ~ N(0, I), v ~ N(0, alpha I)), propagated exactly,
    # against as many ensembles as gaussian_test needs for 1e-6 false alarms and a 10% variance
    # error seen with probability 0.999 (sgsim.testing.sample_size of 4 means + 10 covariances)
    def law(r_factor):
        q = r_factor @ r_factor.T
        path = theory.affine_law(
            np.repeat(f[None], n_steps, 0), np.zeros((n_steps, 4)), np.repeat(q[None], n_steps, 0),
            np.zeros(4), np.diag([1.0, 1.0, alpha, alpha]),
        )  # fmt: skip
        return path.mean[-1], path.cov[-1]

    n_rep = sample_size(14)
    rng = np.random.default_rng(1)
    z0 = rng.standard_normal((n_rep, 2, 1))
    v0 = np.sqrt(alpha) * rng.standard_normal((n_rep, 2, 1))
    r = sgsim.sample(
        GAUSS1, "sghmc_repulsive", n_steps, n_chains=n_rep, n_particles=2, init=z0, init_velocity=v0,
        step_size=alpha, friction=eta, normalise=False, seed=8, storage="final",
    )  # fmt: skip
    final = np.concatenate(
        [r.constant_data["final_theta"].values[..., 0], r.constant_data["final_velocity"].values[..., 0]], 1
    )
    ok, what = gaussian_test(final, *law(noise))
    assert ok, what
    # negative control: the law of the same step with noise independent across particles
    independent = np.sqrt(2 * eta * alpha) * np.vstack([zero, eye])
    ok, what = gaussian_test(final, *law(independent))
    assert not ok, what


BAD = [
    ("one particle", dict(n_particles=1), ValueError, "n_particles"),
    ("friction zero", dict(friction=0.0), ValueError, "friction"),
    ("friction above one", dict(friction=1.5), ValueError, "friction"),
    ("bandwidth negative", dict(bandwidth=-1.0), ValueError, "bandwidth"),
    ("bandwidth a word", dict(bandwidth="mean"), ValueError, "bandwidth"),
    ("normalise not bool", dict(normalise="yes"), TypeError, "normalise"),
    ("median_correction not bool", dict(median_correction=2), TypeError, "median_correction"),
    ("noise correction", dict(noise_correction=True), ValueError, "noise_correction"),
    ("particles coincide", dict(init=np.ones((3, 1))), ValueError, "coincide"),
    ("velocity of the wrong shape", dict(init_velocity=np.zeros((2, 1))), ValueError, "init_velocity"),
    ("velocity not finite", dict(init_velocity=[[0.0], [np.nan], [0.0]]), ValueError, "init_velocity"),
]


@pytest.mark.parametrize("what, kwargs, exc, match", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_the_parameter(what, kwargs, exc, match):
    kwargs = {"n_particles": 3, **kwargs}
    with pytest.raises(exc, match=match) as info:
        sgsim.sample(GAUSS1, "sghmc_repulsive", 10, step_size=0.05, seed=0, **kwargs)
    assert getattr(info.value, "parameter", None) is not None


def _generator(n_dim=4, bandwidth=1.0, friction=1.0, kind="sghmc_repulsive"):
    g = fp.grid([0.0] * n_dim, [1.0] * n_dim, 3)
    return fp.two_particle_hamiltonian_generator(g, lambda z: z, bandwidth, friction, kind)


@pytest.mark.parametrize(
    "kwargs, match",
    [(dict(n_dim=2), "4-D"), (dict(friction=0.0), "friction"), (dict(bandwidth=-1.0), "bandwidth"),
     (dict(kind="svgd"), "kind")],
)  # fmt: skip
def test_generator_bad_input_is_named(kwargs, match):
    with pytest.raises(ValueError, match=match) as info:
        _generator(**kwargs)
    assert getattr(info.value, "parameter", None) is not None
