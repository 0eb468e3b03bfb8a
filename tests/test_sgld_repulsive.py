"""SGLD with repulsive forces: the compiled step against the NumPy oracle, its noise covariance,
its stationary law on Gaussians (with SVGD and the printed -Gamma as negative controls), the
median bandwidth's part of Gamma, jitter, bits across threads, and bad input."""

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import reference as R

import sgsim
from sgsim import targets
from sgsim.integrators.sgld_repulsive import QUIET_JITTER, SGLD_REPULSIVE, cholesky_with_jitter

MIX = targets.mixture_3x3()
GAUSS1 = targets.standard_gaussian(1)
GAUSS2 = targets.standard_gaussian(2)


def mix_grad(Z):
    return R.mixture_grad_u(Z, MIX.mode_centres, MIX.extras["variance"], MIX.extras["weights"])


def init(n, seed=0, low=-3.0, high=3.0, d=2):
    return np.random.default_rng(seed).uniform(low, high, (n, d))


def _cyclical_run(n_particles, bandwidth, normalise, n_threads, k=40, seed=3):
    # a cyclical schedule: exploration steps (T = 0, SVGD's step, no draws) and sampling steps
    sched = sgsim.schedules.cyclical(0.02 if normalise else 0.02 / n_particles, k, n_cycles=2, explore_fraction=0.3)
    z0 = init(n_particles)
    result = sgsim.sample(
        MIX, "csgld_repulsive", schedule=sched, n_particles=n_particles, init=z0, bandwidth=bandwidth,
        normalise=normalise, seed=seed, n_threads=n_threads,
    )  # fmt: skip
    # the particles' own streams (keys (seed, replica 0, 0, particle)), drawn at sampling steps only
    xi = R.particle_normals(seed, 0, n_particles, k, 2, sched.temperature > 0)
    return sched, z0, result, xi


# Entrywise agreement needs a well-conditioned K: its Cholesky factor is determined only to
# about cond(K) ulps (C C^T = K is backward stable, C itself is not), and with the median
# bandwidth 150 particles give cond(K) ~ 1e11. So the parallel step is compared at 1e-12 with a
# fixed bandwidth (cond ~ 1e3), and with the median below, step by step; the threads test shows
# the parallel and serial steps give the same bits.
@pytest.mark.parametrize(
    "n_particles, n_threads, bandwidth",
    [(30, 1, "median"), (30, 1, 0.7), (150, 2, 0.7)],  # 150 >= PARALLEL_PARTICLES: numba threads
)
@pytest.mark.parametrize("normalise", [True, False])
def test_compiled_step_matches_the_reference(bandwidth, normalise, n_particles, n_threads):
    sched, z0, result, xi = _cyclical_run(n_particles, bandwidth, normalise, n_threads)
    path, hs = R.sgld_repulsive(
        mix_grad, z0, sched.step_size, sched.temperature, xi, None if bandwidth == "median" else bandwidth, normalise
    )
    got = result.posterior["theta"].values[0]
    kept = np.flatnonzero(sched.collect)
    np.testing.assert_allclose(got, path[kept], rtol=0, atol=1e-12 * max(1.0, np.abs(path).max()))
    np.testing.assert_allclose(result.constant_data["final_theta"].values[0], path[-1], rtol=0, atol=1e-11)
    np.testing.assert_allclose(result.sample_stats["bandwidth"].values[0], hs[kept], rtol=1e-13)


def test_parallel_median_step_matches_the_reference_step_by_step():
    # each step from the compiled state before it; tolerance 1e-12 plus the Cholesky factor's
    # own uncertainty, 10 cond(K) ulps of the noise's scale sqrt(2 eps T / L) max|xi|
    sched, _, result, xi = _cyclical_run(150, "median", True, 2)
    got = result.posterior["theta"].values[0]
    kept = list(np.flatnonzero(sched.collect))
    checked = 0
    for a, b in zip(kept[:-1], kept[1:], strict=True):
        if b != a + 1:
            continue
        Z = got[kept.index(a)]
        step, hs = R.sgld_repulsive(
            mix_grad, Z, sched.step_size[b : b + 1], sched.temperature[b : b + 1], xi[b : b + 1]
        )
        kern = np.exp(-np.sum((Z[:, None] - Z[None]) ** 2, -1) / hs[0])
        scale = np.sqrt(2 * sched.step_size[b] / 150) * np.abs(xi[b]).max()
        tol = 1e-12 + 10 * np.linalg.cond(kern) * np.finfo(float).eps * scale
        assert np.abs(step[0] - got[kept.index(b)]).max() <= tol
        checked += 1
    assert checked >= 20


def test_reference_comparison_detects_a_missing_median_part_and_a_wrong_sign():
    # negative controls of the comparison above: the oracle without the median part of Gamma,
    # and with the printed -Gamma, both differ from the compiled step by far more than 1e-12
    z0, k = init(20), 10
    got = sgsim.sample(MIX, "sgld_repulsive", k, n_particles=20, init=z0, step_size=0.02, seed=1)
    got = got.posterior["theta"].values[0]
    xi = R.particle_normals(1, 0, 20, k, 2, np.ones(k, bool))
    temp = np.ones(k)
    right, _ = R.sgld_repulsive(mix_grad, z0, np.full(k, 0.02), temp, xi)
    no_median, _ = R.sgld_repulsive(mix_grad, z0, np.full(k, 0.02), temp, xi, median_correction=False)
    minus, _ = R.sgld_repulsive(mix_grad, z0, np.full(k, 0.02), temp, xi, sign=-1.0)
    assert np.max(np.abs(got - right)) < 1e-12
    assert np.max(np.abs(got - no_median)) > 1e-6
    assert np.max(np.abs(got - minus)) > 1e-4
    off = sgsim.sample(
        MIX, "sgld_repulsive", k, n_particles=20, init=z0, step_size=0.02, seed=1, median_correction=False
    )
    assert np.max(np.abs(off.posterior["theta"].values[0] - no_median)) < 1e-12


def test_median_part_of_gamma_is_the_divergence_of_the_diffusion():
    # Gamma_i = sum_j d k_ij / d z_j with k_ij = exp(-|z_i - z_j|^2 / h(Z)), h the median
    # heuristic: central differences of the kernel (step 1e-6, error ~1e-9) against the oracle's
    # analytic form, for an odd and an even number of pairs (7 and 5 particles: 21 and 10 pairs)
    def kernel(Z):
        d2 = np.sum((Z[:, None] - Z[None]) ** 2, -1)
        return np.exp(-d2 / (np.median(d2[np.triu_indices(len(Z), 1)]) / np.log(len(Z))))

    for n in (7, 5):
        Z = init(n, seed=n)
        numeric = np.zeros_like(Z)
        for j in range(n):
            for a in range(2):
                e = np.zeros_like(Z)
                e[j, a] = 1e-6
                numeric[:, a] += (kernel(Z + e)[:, j] - kernel(Z - e)[:, j]) / 2e-6
        # the oracle's drift with a zero gradient, zero noise and c = eps = 1 is Gamma itself
        one = np.ones(1)
        step, _ = R.sgld_repulsive(lambda Z: np.zeros_like(Z), Z, one, one, np.zeros((1, n, 2)), normalise=False)
        plain, _ = R.sgld_repulsive(
            lambda Z: np.zeros_like(Z), Z, one, one, np.zeros((1, n, 2)), normalise=False, median_correction=False
        )
        np.testing.assert_allclose(step[0] - Z, numeric, atol=1e-7)
        assert np.max(np.abs(plain[0] - Z - numeric)) > 1e-3  # the fixed-h Gamma alone is not it


def test_noise_covariance_is_the_kernel_times_the_identity():
    # one step from a fixed ensemble, 20,000 replicas: the increment's covariance (particle-major,
    # 12 x 12) against (2 eps T / L) K (x) I_2; each entry of an empirical covariance of n Gaussian
    # draws has SE sqrt((S_ij^2 + S_ii S_jj) / n); 5 SE per entry (144 entries)
    n_rep, L, eps = 20_000, 6, 0.05
    z0 = init(L, seed=5)
    result = sgsim.sample(
        GAUSS2, "sgld_repulsive", 1, n_chains=n_rep, n_particles=L, init=np.broadcast_to(z0, (n_rep, L, 2)),
        step_size=eps, bandwidth=1.5, seed=7, storage="final",
    )  # fmt: skip
    z1 = result.posterior["theta"].values[:, 0].reshape(n_rep, -1)
    kern = np.exp(-np.sum((z0[:, None] - z0[None]) ** 2, -1) / 1.5)
    drift, _ = R.sgld_repulsive(lambda Z: Z, z0, [eps], [1.0], np.zeros((1, L, 2)), bandwidth=1.5)
    want = 2 * eps / L * np.kron(kern, np.eye(2))

    def rejected(cov):
        emp = np.cov(z1, rowvar=False)
        se = np.sqrt((cov**2 + np.outer(np.diag(cov), np.diag(cov))) / n_rep)
        return np.any(np.abs(emp - cov) > 5 * se)

    mean_se = np.sqrt(np.diag(want) / n_rep)
    assert np.all(np.abs(z1.mean(0) - drift[0].ravel()) < 5 * mean_se)
    assert not rejected(want)
    # negative control: independent noise (SGLD's 2 eps / L per coordinate) is rejected
    assert rejected(2 * eps / L * np.eye(2 * L))


def _moments(method, bandwidth, **kw):
    # 4,000 two-particle ensembles on N(0, 1), d = 1, started from the target in random order;
    # eps = 0.01 without the 1/L (time 20), final state: E z_1^2, E z_2^2, E z_1 z_2 and their SEs
    n_rep = 4000
    z0 = np.random.default_rng(0).normal(size=(n_rep, 2, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        r = sgsim.sample(
            GAUSS1, method, 2000, n_chains=n_rep, n_particles=2, init=z0, step_size=0.01, normalise=False,
            bandwidth=bandwidth, seed=2, storage="final", on_divergence="mark", **kw,
        )  # fmt: skip
    z = r.posterior["theta"].values[:, -1, :, 0]
    ok = r.constant_data["diverged_at"].values == 0
    m = np.array([z[ok, 0] ** 2, z[ok, 1] ** 2, z[ok, 0] * z[ok, 1]])
    return m.mean(1), m.std(1, ddof=1) / np.sqrt(ok.sum()), ok.mean()


def _stationary(est, se, eps_lambda_max):
    # target (1, 1, 0); the discretisation bias of SGLD on N(0, 1) with step eps * lambda(D) is
    # 1 / (1 - eps lambda / 2) - 1 in the variance, lambda(D) <= lambda_max(K) <= L = 2 here
    bias = 1.0 / (1.0 - eps_lambda_max / 2) - 1.0
    return bool(np.all(np.abs(est - [1.0, 1.0, 0.0]) <= 4 * se + bias))


@pytest.mark.parametrize("bandwidth", [1.0, "median"])
def test_two_particles_sample_the_product_target(bandwidth):
    est, se, kept = _moments("sgld_repulsive", bandwidth)
    assert kept == 1.0
    assert _stationary(est, se, 0.01 * 2)


def test_the_printed_minus_gamma_and_the_uncorrected_median_are_rejected():
    # the same test, on the two steps that are not samplers of the product target: with -Gamma
    # the particles attract (E z_1 z_2 near 1/2); the median step without its part of Gamma
    # repels as log 2 / |z_1 - z_2| and blows up (chains marked diverged) or lands off the target
    est, se, _ = _moments("sgld_repulsive_minus_gamma", 1.0)
    assert not _stationary(est, se, 0.01 * 2)
    assert est[2] > 0.3
    est, se, kept = _moments("sgld_repulsive", "median", median_correction=False)
    assert kept < 1.0 or not _stationary(est, se, 0.01 * 2)


def test_ensembles_sample_a_gaussian_and_svgd_does_not():
    # 200 ensembles of 10 particles on N(0, I_2), started from the target. Per ensemble, the time
    # and particle averages of z_1, z_2 (mean) and z_1^2, z_2^2, z_1 z_2 (covariance); SE over
    # ensembles (independent); 4 SE plus, for the second moments, SGLD's variance bias
    # 1 / (1 - eps lambda / 2) - 1 with lambda the largest eigenvalue of K seen (none for the
    # mean and the cross moment, which are 0 by symmetry whatever the step)
    n_rep, L, eps = 200, 10, 0.02
    z0 = np.random.default_rng(1).normal(size=(n_rep, L, 2))
    kw = dict(n_chains=n_rep, n_particles=L, init=z0, step_size=eps, normalise=False, seed=4, burn_in=1000, thin=100)

    def verdict(method):
        r = sgsim.sample(GAUSS2, method, 6000, **kw)
        th = r.posterior["theta"].values  # (ensemble, draw, particle, 2)
        lam = 0.0
        for c in range(0, n_rep, 20):
            for s in range(th.shape[1]):
                Z, h = th[c, s], r.sample_stats["bandwidth"].values[c, s]
                lam = max(lam, np.linalg.eigvalsh(np.exp(-np.sum((Z[:, None] - Z[None]) ** 2, -1) / h))[-1])
        bias = 1.0 / (1.0 - eps * lam / 2) - 1.0
        stats = {
            "mean x": (th[..., 0], 0.0, 0.0),
            "mean y": (th[..., 1], 0.0, 0.0),
            "E x^2": (th[..., 0] ** 2, 1.0, bias),
            "E y^2": (th[..., 1] ** 2, 1.0, bias),
            "E xy": (th[..., 0] * th[..., 1], 0.0, 0.0),
        }
        failed = []
        for name, (values, truth, b) in stats.items():
            per = values.mean(axis=(1, 2))
            if abs(per.mean() - truth) > 4 * per.std(ddof=1) / np.sqrt(n_rep) + b:
                failed.append((name, round(float(per.mean()), 4)))
        return failed

    assert verdict("sgld_repulsive") == []
    # negative control: SVGD's fixed points underestimate the variance; its means are fine
    assert [name for name, _ in verdict("svgd")] == ["E x^2", "E y^2"]


def test_cholesky_jitter_is_used_only_when_needed_and_reported():
    kern = np.exp(-(np.subtract.outer(np.arange(4.0), np.arange(4.0)) ** 2) / 1e6)  # all ~1: singular
    c, delta = cholesky_with_jitter(kern.copy())
    assert delta > 0 and np.allclose(c @ c.T, kern + delta * np.eye(4), atol=1e-12)
    good = np.exp(-(np.subtract.outer(np.arange(4.0), np.arange(4.0)) ** 2))
    c, delta = cholesky_with_jitter(good.copy())
    assert delta == 0.0 and np.allclose(c @ c.T, good, atol=1e-14)
    # through sample: a bandwidth far beyond the particles' spread makes K singular to rounding;
    # the jitter that takes (1e-10) is recorded, below the warning threshold
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = sgsim.sample(MIX, "sgld_repulsive", 20, n_particles=8, step_size=0.01, bandwidth=1e8, seed=0)
    assert 0 < r.constant_data["final_jitter"].values[0] <= QUIET_JITTER
    assert r.sample_stats["jitter"].values[0, -1] == r.constant_data["final_jitter"].values[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = sgsim.sample(MIX, "sgld_repulsive", 20, n_particles=8, step_size=0.01, bandwidth=1.0, seed=0)
    assert r.constant_data["final_jitter"].values[0] == 0.0
    # the warning names the ensembles whose jitter went beyond the threshold, and only those
    note = SGLD_REPULSIVE.report({"jitter": np.array([0.0, 1e-6, 1e-10])})
    assert note is not None and "ensembles [1]" in note and "1e-06" in note
    assert SGLD_REPULSIVE.report({"jitter": np.array([0.0, 1e-10])}) is None


def test_threads_replica_counts_and_blas_threads_do_not_change_the_bits(tmp_path):
    # numba's threads forced to two (so that the comparison can fail on one core), and the
    # Cholesky factor's BLAS given 1 or 2 threads: sgsim holds BLAS to one thread for the run
    script = textwrap.dedent(
        """
        import sys
        import numba
        import numpy as np
        import sgsim

        assert numba.config.NUMBA_NUM_THREADS == 2
        t = sgsim.targets.mixture_3x3()
        runs = [sgsim.sample(t, "sgld_repulsive", 15, n_chains=2, n_particles=160, step_size=0.05, seed=5,
                             n_threads=n) for n in (1, 2)]
        one = sgsim.sample(t, "sgld_repulsive", 15, n_chains=1, n_particles=160, step_size=0.05, seed=5)
        np.save(sys.argv[1], np.stack([r.posterior["theta"].values for r in runs]))
        np.save(sys.argv[2], one.posterior["theta"].values)
        """
    )
    saved = []
    for blas in ("1", "2"):
        out, single = tmp_path / f"bits{blas}.npy", tmp_path / f"one{blas}.npy"
        env = {**os.environ, "NUMBA_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": blas}
        proc = subprocess.run(
            [sys.executable, "-c", script, str(out), str(single)], env=env, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr
        one, two = np.load(out)
        assert np.array_equal(one, two)
        assert np.array_equal(np.load(single)[0], one[0])
        assert not np.array_equal(one[0], one[1])
        saved.append(one)
    assert np.array_equal(saved[0], saved[1])


BAD = [
    ("one particle", dict(n_particles=1), ValueError, "n_particles"),
    ("bandwidth zero", dict(n_particles=3, bandwidth=0.0), ValueError, "bandwidth"),
    ("bandwidth negative", dict(n_particles=3, bandwidth=-1.0), ValueError, "bandwidth"),
    ("particles of the wrong shape", dict(n_particles=3, init=np.zeros((3, 3))), ValueError, "init"),
    ("non-finite particles", dict(n_particles=2, init=[[0.0, np.inf], [1.0, 1.0]]), ValueError, "init"),
    ("particles coincide", dict(n_particles=3, init=np.ones((3, 2))), ValueError, "coincide"),
    ("median_correction not bool", dict(n_particles=3, median_correction="no"), TypeError, "median_correction"),
]


@pytest.mark.parametrize("what, kwargs, exc, match", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_the_parameter(what, kwargs, exc, match):
    with pytest.raises(exc, match=match) as info:
        sgsim.sample(MIX, "sgld_repulsive", 10, step_size=0.05, seed=0, **kwargs)
    assert getattr(info.value, "parameter", None) is not None


# ----------------------------------------------------------------------------- random batches


@pytest.mark.parametrize("n_particles, batch_size, n_threads", [(23, 5, 1), (157, 10, 2)])
def test_random_batch_step_matches_the_reference(n_particles, batch_size, n_threads):
    # 23 = 4 batches of 5 and a last of 8; 157 particles run the parallel step on 2 threads
    k, seed = 30, 6
    sched = sgsim.schedules.cyclical(0.05, k, n_cycles=2, explore_fraction=0.3)
    z0 = init(n_particles)
    result = sgsim.sample(
        MIX, "sgld_repulsive_rb", schedule=sched, n_particles=n_particles, init=z0, bandwidth=0.8,
        batch_size=batch_size, seed=seed, n_threads=n_threads,
    )  # fmt: skip
    kept = np.flatnonzero(sched.collect)
    got = result.posterior["theta"].values[0]
    path = R.sgld_repulsive_rb(mix_grad, z0, sched.step_size, sched.temperature, seed, 0.8, batch_size)[kept]
    np.testing.assert_allclose(got, path, rtol=0, atol=1e-12 * np.abs(path).max())
    # negative control: the partitions and normals of another seed are far from the compiled step
    other = R.sgld_repulsive_rb(mix_grad, z0, sched.step_size, sched.temperature, seed + 1, 0.8, batch_size)[kept]
    assert np.max(np.abs(got - other)) > 1e-3


def test_random_batches_sample_a_gaussian():
    # each batch's step is an exact SGLD+R step of that batch, which leaves the product target
    # invariant; so does their composition: the same SE-based test as the exact sampler's, with
    # SGLD's bias bound for a step eps lambda_max(K_batch) / batch <= eps
    n_rep, L, eps = 100, 50, 0.05
    z0 = np.random.default_rng(1).normal(size=(n_rep, L, 2))
    r = sgsim.sample(
        GAUSS2, "sgld_repulsive_rb", 4000, n_chains=n_rep, n_particles=L, init=z0, step_size=eps, bandwidth=1.0,
        batch_size=5, seed=4, burn_in=1000, thin=100,
    )  # fmt: skip
    v = (r.posterior["theta"].values ** 2).mean(axis=(1, 2, 3))
    bias = 1.0 / (1.0 - eps / 2) - 1.0
    assert abs(v.mean() - 1.0) <= 4 * v.std(ddof=1) / np.sqrt(n_rep) + bias


RB_BAD = [
    ("median bandwidth", dict(), ValueError, "fixed bandwidth"),
    ("batch of one", dict(bandwidth=1.0, batch_size=1), ValueError, "batch_size"),
    ("batch beyond the ensemble", dict(bandwidth=1.0, batch_size=20), ValueError, "batch_size"),
]


@pytest.mark.parametrize("what, kwargs, exc, match", RB_BAD, ids=[b[0] for b in RB_BAD])
def test_random_batch_bad_input_names_the_parameter(what, kwargs, exc, match):
    with pytest.raises(exc, match=match) as info:
        sgsim.sample(MIX, "sgld_repulsive_rb", 10, n_particles=10, step_size=0.05, seed=0, **kwargs)
    assert getattr(info.value, "parameter", None) is not None


def test_pair_terms_that_cannot_fit_are_refused_before_work():
    # a million particles of the exact sampler need 16 TB of pair terms; the random-batch one does not
    with pytest.raises(ValueError, match="pair terms") as info:
        sgsim.sample(MIX, "sgld_repulsive", 10, n_particles=1_000_000, step_size=0.05, seed=0, storage="final")
    assert info.value.parameter == "n_particles" and "sgld_repulsive_rb" in str(info.value)


def test_batch_cholesky_refuses_a_singular_kernel_until_jittered():
    from sgsim.integrators.sgld_repulsive import _batch_cholesky

    ones = np.ones((4, 4))  # rank one: four coinciding particles
    c = np.zeros((4, 4))
    assert not _batch_cholesky(ones, c, 4, 0.0)
    assert _batch_cholesky(ones, c, 4, 1e-6)
    np.testing.assert_allclose(np.tril(c) @ np.tril(c).T, ones + 1e-6 * np.eye(4), atol=1e-12)
    good = np.exp(-(np.subtract.outer(np.arange(5.0), np.arange(5.0)) ** 2))
    c = np.zeros((8, 8))  # only the leading n x n block is used
    assert _batch_cholesky(good, c, 5, 0.0)
    np.testing.assert_allclose(np.tril(c[:5, :5]) @ np.tril(c[:5, :5]).T, good, atol=1e-13)


def test_minibatch_gradients_draw_from_each_particle_stream_before_its_normals():
    X = np.random.default_rng(0).normal(size=(40, 2))
    y = (X[:, 0] + 0.3 * np.random.default_rng(1).normal(size=40) > 0).astype(float)
    target = targets.logistic_regression(X, y, batch_size=7, replace=False)
    L, k, eps, seed = 6, 12, 1e-3, 11
    z0 = init(L, seed=2, low=-0.5, high=0.5, d=target.dim)
    result = sgsim.sample(target, "sgld_repulsive", k, n_particles=L, init=z0, step_size=eps, bandwidth=0.5, seed=seed)
    ex = target.extras
    gens = [np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(0, 0, p)))) for p in range(L)]
    drawers = [R.MinibatchDrawer(g, ex["n_data"], ex["batch_size"], ex["replace"]) for g in gens]
    Z, path = z0.copy(), []
    for _ in range(k):
        # per particle: its minibatch first, then (after every gradient) its normals
        G = np.array(
            [R.minibatch_grad_u(Z[p], ex["X"], ex["y"], ex["prior_precision"], drawers[p]()) for p in range(L)]
        )
        xi = np.array([g.standard_normal(target.dim) for g in gens])
        Z = R.sgld_repulsive(lambda _z, G=G: G, Z, [eps], [1.0], xi[None], bandwidth=0.5)[0][0]
        path.append(Z)
    np.testing.assert_allclose(result.posterior["theta"].values[0], np.array(path), rtol=0, atol=1e-12)
