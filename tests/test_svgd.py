"""SVGD, the first interacting-particle algorithm: the compiled step against the NumPy oracle,
the two-particle fixed point, bits across threads and replica counts, and bad input."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import reference as R

import sgsim
from sgsim import dynamics, targets
from sgsim.targets import regression
from sgsim.theory import fokker_planck

MIX = targets.mixture_3x3()


def mix_grad(Z):
    return R.mixture_grad_u(Z, MIX.mode_centres, MIX.extras["variance"], MIX.extras["weights"])


def init(n, seed=0, low=-3.0, high=3.0, d=2):
    return np.random.default_rng(seed).uniform(low, high, (n, d))


@pytest.mark.parametrize("bandwidth", ["median", 0.7])
@pytest.mark.parametrize("normalise", [True, False])
@pytest.mark.parametrize("n_particles, n_threads", [(30, 1), (150, 2)])  # 150 >= PARALLEL_PARTICLES: numba threads
def test_compiled_step_matches_the_reference(bandwidth, normalise, n_particles, n_threads):
    z0 = init(n_particles)
    eps = 0.02 if normalise else 0.02 / n_particles
    result = sgsim.sample(
        MIX, "svgd", 40, n_particles=n_particles, init=z0, step_size=eps, bandwidth=bandwidth,
        normalise=normalise, seed=0, n_threads=n_threads,
    )  # fmt: skip
    path, hs = R.svgd(mix_grad, z0, np.full(40, eps), None if bandwidth == "median" else bandwidth, normalise)
    got = result.posterior["theta"].values[0]
    assert got.shape == path.shape
    np.testing.assert_allclose(got, path, rtol=0, atol=1e-12 * max(1.0, np.abs(path).max()))
    np.testing.assert_allclose(result.sample_stats["bandwidth"].values[0], hs, rtol=1e-13)


def test_reference_comparison_detects_a_wrong_sign_of_the_repulsion():
    # negative control for the comparison: the printed paper's attractive kernel term
    z0 = init(20)
    got = sgsim.sample(MIX, "svgd", 10, n_particles=20, init=z0, step_size=0.02, bandwidth=0.7, seed=0)
    got = got.posterior["theta"].values[0]
    right, _ = R.svgd(mix_grad, z0, np.full(10, 0.02), 0.7)
    Z, wrong = z0.copy(), []
    for _ in range(10):
        diff = Z[:, None] - Z[None]
        kern = np.exp(-np.sum(diff**2, -1) / 0.7)
        Z = Z + 0.02 * (kern @ -mix_grad(Z) - (2 / 0.7) * np.einsum("ij,ijk->ik", kern, diff)) / 20
        wrong.append(Z)
    assert np.max(np.abs(got - right)) < 1e-12
    assert np.max(np.abs(got - np.array(wrong))) > 1e-3


def test_numpy_definition_in_dynamics_agrees_with_the_reference():
    z0 = init(25, seed=3)
    h = dynamics.median_bandwidth(z0)
    path, hs = R.svgd(mix_grad, z0, [0.05])
    assert h == pytest.approx(hs[0], rel=1e-15)
    np.testing.assert_allclose(z0 + 0.05 * dynamics.svgd_velocity(z0, mix_grad(z0), h), path[0], atol=1e-13)
    cov = dynamics.repulsive_noise_cov(z0, h, 0.05)
    np.testing.assert_allclose(cov, 2 * 0.05 / 25 * np.exp(-dynamics.pairwise_sq_dists(z0) / h), rtol=1e-15)


@pytest.mark.parametrize("s2, h", [(1.0, 1.0), (1.0, 2.0), (0.5, 2.0)])
def test_two_particles_settle_at_the_closed_form_fixed_point(s2, h):
    # L = 2, d = 1, target N(0, s2): the symmetric fixed point (a, -a) has a^2 = (h/4) log(1 + 4 s2 / h)
    target = targets.linear_gaussian([[1.0 / s2]])
    result = sgsim.sample(
        target, "svgd", 4000, n_particles=2, init=[[0.3], [2.1]], step_size=0.2, bandwidth=h, seed=0, storage="final"
    )
    z = result.posterior["theta"].values[0, -1, :, 0]
    a2 = fokker_planck.svgd_two_particle_fixed_point(s2, h)
    assert z[0] == pytest.approx(-z[1], abs=1e-12)  # symmetric, from an asymmetric start
    assert z[1] ** 2 == pytest.approx(a2, rel=1e-10)
    # the variance is underestimated: even a 10% tolerance rejects the target's own variance
    assert z[1] ** 2 != pytest.approx(s2, rel=0.1)


def test_ensembles_do_not_depend_on_the_number_of_replicas():
    one = sgsim.sample(MIX, "svgd", 30, n_chains=1, n_particles=12, step_size=0.05, seed=4)
    three = sgsim.sample(MIX, "svgd", 30, n_chains=3, n_particles=12, step_size=0.05, seed=4, n_threads=2)
    theta = three.posterior["theta"].values
    assert np.array_equal(one.posterior["theta"].values[0], theta[0])
    assert not np.any(theta[1] == theta[2])
    assert np.array_equal(one.constant_data["init"].values[0], three.constant_data["init"].values[0])


def test_default_initial_particles_come_from_per_particle_streams():
    result = sgsim.sample(MIX, "svgd", 5, n_chains=2, n_particles=4, step_size=0.05, seed=9)
    z0 = result.constant_data["init"].values
    for r in range(2):
        for p in range(4):
            gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence(9, spawn_key=(r, 1, p))))
            assert np.array_equal(z0[r, p], gen.uniform(MIX.init_low, MIX.init_high))


def test_result_layout_keeps_particles_apart_from_chains():
    result = sgsim.sample(MIX, "svgd", 20, n_chains=2, n_particles=5, step_size=0.05, seed=1, thin=4)
    assert result.posterior["theta"].dims == ("chain", "draw", "particle", "dim")
    assert result.posterior["theta"].shape == (2, 5, 5, 2)
    assert result.sample_stats["bandwidth"].dims == ("chain", "draw")
    assert result.constant_data["init"].dims == ("chain", "particle", "dim")
    assert result.attrs["coupling"] == "interacting"


def test_minibatch_gradients_draw_from_each_particle_stream():
    X = np.random.default_rng(0).normal(size=(40, 2))
    y = (X[:, 0] + 0.3 * np.random.default_rng(1).normal(size=40) > 0).astype(float)
    target = targets.logistic_regression(X, y, batch_size=7, replace=False)
    z0 = init(6, seed=2, low=-0.5, high=0.5, d=target.dim)
    result = sgsim.sample(target, "svgd", 15, n_particles=6, init=z0, step_size=1e-3, seed=11)
    ex = target.extras
    drawers = [
        R.MinibatchDrawer(
            np.random.Generator(np.random.PCG64(np.random.SeedSequence(11, spawn_key=(0, 0, p)))),
            ex["n_data"],
            ex["batch_size"],
            ex["replace"],
        )  # fmt: skip
        for p in range(6)
    ]

    def grad(Z):
        return np.array(
            [R.minibatch_grad_u(Z[p], ex["X"], ex["y"], ex["prior_precision"], drawers[p]()) for p in range(6)]
        )

    path, _ = R.svgd(grad, z0, np.full(15, 1e-3))
    np.testing.assert_allclose(result.posterior["theta"].values[0], path, rtol=0, atol=1e-12)
    assert regression.minibatch_gradient_covariance(target, z0[0]).shape == (target.dim, target.dim)


def test_threads_do_not_change_the_bits_even_on_one_core(tmp_path):
    # force two numba threads, so that the comparison can fail on a one-core machine too
    script = textwrap.dedent(
        """
        import sys
        import numba
        import numpy as np
        import sgsim

        assert numba.config.NUMBA_NUM_THREADS == 2
        t = sgsim.targets.mixture_3x3()
        runs = [sgsim.sample(t, "svgd", 15, n_chains=2, n_particles=160, step_size=0.05, seed=5, n_threads=n)
                for n in (1, 2)]
        np.save(sys.argv[1], np.stack([r.posterior["theta"].values for r in runs]))
        """
    )
    out = tmp_path / "bits.npy"
    env = {**os.environ, "NUMBA_NUM_THREADS": "2"}
    proc = subprocess.run(
        [sys.executable, "-c", script, str(out)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    one, two = np.load(out)
    assert np.array_equal(one, two)


BAD = [
    ("n_particles missing", dict(), TypeError, "n_particles"),
    ("one particle", dict(n_particles=1), ValueError, "n_particles"),
    ("bandwidth zero", dict(n_particles=3, bandwidth=0.0), ValueError, "bandwidth"),
    ("bandwidth negative", dict(n_particles=3, bandwidth=-1.0), ValueError, "bandwidth"),
    ("bandwidth word", dict(n_particles=3, bandwidth="mean"), ValueError, "bandwidth"),
    ("bandwidth bool", dict(n_particles=3, bandwidth=True), TypeError, "bandwidth"),
    ("normalise not bool", dict(n_particles=3, normalise="yes"), TypeError, "normalise"),
    ("init shape", dict(n_particles=3, init=np.zeros((4, 2))), ValueError, "init"),
    ("init non-finite", dict(n_particles=2, init=[[0.0, np.nan], [1.0, 1.0]]), ValueError, "init"),
    ("particles coincide", dict(n_particles=3, init=np.ones((3, 2))), ValueError, "coincide"),
    ("temperature is not an SVGD option", dict(n_particles=3, temperature=1.0), TypeError, "temperature"),
]


@pytest.mark.parametrize("what, kwargs, exc, match", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_the_parameter(what, kwargs, exc, match):
    with pytest.raises(exc, match=match) as info:
        sgsim.sample(MIX, "svgd", 10, step_size=0.05, seed=0, **kwargs)
    assert getattr(info.value, "parameter", None) is not None


def test_independent_methods_refuse_particles():
    with pytest.raises(TypeError, match="n_particles") as info:
        sgsim.sample(MIX, "sgld", 10, step_size=0.05, n_particles=3)
    assert info.value.parameter == "n_particles"
