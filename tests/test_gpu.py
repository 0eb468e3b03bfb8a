"""The many-chain GPU path (sgsim.gpu), checked where there is no GPU.

docs: guide-gpu, theory-tolerances.

The kernel's one source is compiled here by the host's C++ compiler (``backend="gpu-host"``,
``sgsim.gpu.host``) and checked:

* its Philox4x32-10 against Random123's published known-answer vectors and a plain-Python
  implementation (tests/reference.py), its normals for independence of the chain count and
  against N(0, 1) within standard errors;
* step for step against the CPU kernels it mirrors, given the same normals (float64, to
  1e-12 relative), for every supported method and target, divergence included;
* in law: final-step mean and covariance against the exact law on the linear-Gaussian oracle,
  in both precisions, each with a wrong-noise-scale negative control; mode coverage on the
  25-Gaussian mixture against the CPU path;
* through the public API: storage modes, bits independent of the chain count, replay, errors.

The source is also compiled for an H100 (sm_90) by nvcc where nvcc is installed. The tests that
need a CUDA device (marked ``gpu``) skip without one.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
import reference as R
from stats import assert_within_se, check_gaussian_law

import sgsim
from sgsim import schedules, targets
from sgsim._validate import ParameterError
from sgsim.gpu import host, kernels, runner
from sgsim.sampling import DivergenceError, prepare, run_chain
from sgsim.theory import exact_law

needs_cxx = pytest.mark.skipif(host.compiler() is None, reason="no C++ compiler: the host build cannot be made")
pytestmark = needs_cxx


def _cuda_device() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


gpu = pytest.mark.skipif(not _cuda_device(), reason="needs CuPy and a CUDA device")

P = np.array([[2.0, 0.5], [0.5, 1.0]])
B = np.array([0.3, -0.2])
V = np.array([[0.5, 0.2], [0.2, 0.3]])  # non-diagonal gradient-noise covariance: the noise is rotated
LINEAR = targets.linear_gaussian(P, B, V)
INIT = np.array([1.0, 2.0])
A3 = np.array([[1.0, 0.3, 0.1], [0.3, 2.0, -0.2], [0.1, -0.2, 0.7]])
C3 = np.array([[1.5, -0.4, 0.2], [-0.4, 0.8, 0.1], [0.2, 0.1, 1.1]])
OU = targets.ou_quadratic(A3, C3, 4, 100)
H_FULL = np.array([[1.2, 0.3, 0.0], [0.3, 0.8, 0.1], [0.0, 0.1, 0.5]])
MIXTURE_3D = targets.gaussian_mixture(np.array([[0.0, 0.0, 0.0], [1.5, -1.0, 0.5], [-1.0, 1.0, 1.0]]), [0.3, 0.2, 0.5])

# (method, target, options): every supported step, on every supported gradient
CASES = {
    "sgld-mixture25": ("sgld", "mixture_25", dict(step_size=0.01)),
    "csgld-mixture25": ("csgld", "mixture_25", dict(step_size=0.05, n_cycles=3, explore_fraction=0.3)),
    "sghmc-mixture3x3": ("sghmc", "mixture_3x3", dict(step_size=0.01, friction=0.2)),
    "csghmc-linear": ("csghmc", LINEAR, dict(step_size=0.1, n_cycles=2, explore_fraction=0.25, friction=0.3)),
    "sgld-linear-rotated-noise": ("sgld", LINEAR, dict(step_size=0.1)),
    "sgld-mixture-3d": ("sgld", MIXTURE_3D, dict(step_size=0.02)),
    "sghmc-exponential": ("sghmc", "exponential_mixture", dict(step_size=0.01, friction=0.1)),
    "sgd-full-preconditioner": ("sgd", OU, dict(step_size=0.5, preconditioner=H_FULL)),
    "sgd-diagonal": ("sgd", OU, dict(step_size=0.5, preconditioner=np.array([1.3, 0.6, 0.9]))),
    "sgd-scalar": ("sgd", OU, dict(step_size=0.5, preconditioner=0.7)),
    "sgfs": ("sgfs", OU, dict(step_size=0.4, preconditioner=H_FULL, injected_cov=0.1)),
    "momentum_sgd": ("momentum_sgd", OU, dict(step_size=0.3, damping=0.2)),
    "sgld_wt": ("sgld_wt", OU, dict(step_size=0.002)),
    "iasg": ("iasg", OU, dict(step_size=0.5, window=7, warmup=5)),
}


def _target(t):
    return targets.get(t) if isinstance(t, str) else t


def _lib(run, precision="float64"):
    source = kernels.render(run, precision, device=False)
    return source, host.build(source)


# ----------------------------------------------------------------------------- Philox and normals

# Random123's known-answer vectors for philox4x32 10: counter, key, output (hexadecimal words)
KAT = [
    ("00000000 00000000 00000000 00000000", "00000000 00000000", "6627e8d5 e169c58d bc57ac4c 9b00dbd8"),
    ("ffffffff ffffffff ffffffff ffffffff", "ffffffff ffffffff", "408f276d 41c83b0e a20bc7c6 6d5451fd"),
    ("243f6a88 85a308d3 13198a2e 03707344", "a4093822 299f31d0", "d16cfe09 94fdcceb 5001e420 24126ea1"),
]


def _words(text):
    return [int(w, 16) for w in text.split()]


@pytest.fixture(scope="module")
def linear_lib():
    run, _ = prepare(LINEAR, "sgld", 10, step_size=0.1)
    return _lib(run)[1]


@pytest.mark.parametrize("ctr, key, expected", KAT)
def test_philox_matches_the_known_answer_vectors(linear_lib, ctr, key, expected):
    assert host.philox(linear_lib, _words(ctr), _words(key)).tolist() == _words(expected)
    assert R.philox4x32_10(_words(ctr), _words(key)) == _words(expected)
    # negative control: seven rounds (Philox4x32-7) is another function
    assert R.philox4x32_10(_words(ctr), _words(key), rounds=7) != _words(expected)


def test_philox_agrees_with_the_reference_on_random_counters(linear_lib):
    rng = np.random.default_rng(5)
    for _ in range(50):
        ctr, key = rng.integers(0, 2**32, 4, dtype=np.uint64), rng.integers(0, 2**32, 2, dtype=np.uint64)
        assert host.philox(linear_lib, ctr, key).tolist() == R.philox4x32_10(ctr.tolist(), key.tolist())


@pytest.mark.parametrize("precision", kernels.PRECISIONS)
def test_normals_of_a_chain_do_not_depend_on_the_chain_count_and_follow_their_counters(precision):
    run, _ = prepare(LINEAR, "sgld", 10, step_size=0.1)
    source, lib = _lib(run, precision)
    ex = host.HostExecutor()
    key = runner.philox_key(7)
    few = ex.normals(lib, source, 3, 0, 40, key)
    many = ex.normals(lib, source, 50, 0, 40, key)
    assert np.array_equal(few, many[:3])
    # normal t comes from block t // npb: an offset start gives the same values
    assert np.array_equal(ex.normals(lib, source, 3, 13, 27, key), few[:, 13:])
    # chain c's block b is Philox of counter (b, 0, c, 0): Box-Muller of its words, recomputed here
    npb = kernels.normals_per_block(precision)
    words = R.philox4x32_10([1, 0, 2, 0], list(key))
    # float32: the angle 2 pi v carries an absolute rounding error of about 1e-7
    tol = dict(rtol=1e-6, atol=1e-6) if precision == "float32" else dict(rtol=1e-14, atol=1e-15)
    assert np.allclose(few[2, npb : 2 * npb], R.box_muller(words, precision), **tol)
    # other seeds, other chains: other normals
    assert not np.array_equal(few, ex.normals(lib, source, 3, 0, 40, runner.philox_key(8)))
    assert not np.array_equal(few[0], few[1])


@pytest.mark.parametrize("precision", kernels.PRECISIONS)
def test_normals_have_the_standard_normal_moments(precision):
    run, _ = prepare(LINEAR, "sgld", 10, step_size=0.1)
    source, lib = _lib(run, precision)
    z = host.HostExecutor().normals(lib, source, 1000, 0, 1000, runner.philox_key(11)).astype(np.float64).ravel()
    n = z.size
    # SEs of the sample mean, variance, third and fourth moments of n iid N(0, 1) draws:
    # sqrt(1/n), sqrt(2/n), sqrt(15/n), sqrt(96/n)
    moments = np.array([z.mean(), z.var(), np.mean(z**3), np.mean(z**4)])
    truth, se = np.array([0.0, 1.0, 0.0, 3.0]), np.sqrt(np.array([1.0, 2.0, 15.0, 96.0]) / n)
    assert_within_se(moments, truth, se, what="normal moments")
    # lag-1 correlation within a chain's stream: SE 1 / sqrt(n)
    assert_within_se(np.mean(z[1:] * z[:-1]), 0.0, 1 / np.sqrt(n), what="lag-1 correlation")
    # negative control: a 1 % error of scale is rejected by the variance
    with pytest.raises(AssertionError, match="normal moments"):
        assert_within_se(np.array([(1.01 * z).var()]), 1.0, np.sqrt(2 / n), what="normal moments")


# Block 18544538 of chain 0 under seed 0 has word 2 = 0xffffffd9, whose top 24 bits are all ones
# (found by running sgsim.philox over the counters): the uniform at the top of its range.
EDGE_SEED, EDGE_BLOCK = 0, 18544538


def _edge_normals(executor, precision="float32"):
    run, _ = prepare(LINEAR, "sgld", 10, step_size=0.1)
    source = kernels.render(run, precision, device=executor != "host")
    ex = host.HostExecutor() if executor == "host" else _cuda_executor()
    lib = host.build(source) if executor == "host" else ex.build(source)
    key = runner.philox_key(EDGE_SEED)
    return ex.normals(lib, source, 1, 4 * EDGE_BLOCK, 4, key)[0].astype(np.float64), key


def _cuda_executor():
    from sgsim.gpu.device import CudaExecutor

    return CudaExecutor()


def _check_edge(z, key, fast=False):
    words = R.philox4x32_10([EDGE_BLOCK, 0, 0, 0], list(key))
    assert words[2] >> 8 == 2**24 - 1  # the case this checks
    assert np.all(np.isfinite(z)) and np.hypot(z[2], z[3]) > 0  # a finite, positive radius
    # the reference's normals: the host's to float32's rounding (as above); the GPU's within its
    # fast log's error, which near u = 1 is most of the radius (_fast_normals_close)
    ref = R.box_muller(words, "float32")
    assert _fast_normals_close(z, ref) if fast else np.allclose(z, ref, rtol=1e-6, atol=1e-6)


def test_a_uniform_at_the_top_of_its_range_gives_a_positive_radius():
    _check_edge(*_edge_normals("host"))
    # negative control: a 24-bit midpoint, (2^24 - 1/2) 2^-24, rounds to 1 in single precision,
    # so that the radius is 0 (on the GPU, 0 times the reciprocal square root of 0: NaN)
    words = R.philox4x32_10([EDGE_BLOCK, 0, 0, 0], list(runner.philox_key(EDGE_SEED)))
    u24 = (np.float32(words[2] >> 8) + np.float32(0.5)) * np.float32(2.0**-24)
    radius = np.sqrt(np.float32(-2) * np.log(u24))
    with pytest.raises(AssertionError):
        _check_edge(np.array([1.0, 1.0, radius, radius]), runner.philox_key(EDGE_SEED))


@gpu
def test_on_the_gpu_a_uniform_at_the_top_of_its_range_gives_a_positive_radius():
    _check_edge(*_edge_normals("gpu"), fast=True)


# ----------------------------------------------------------------------------- step for step


def _injected_cpu(run, result, lib, source, seed):
    """Every chain of ``result`` rerun by the CPU kernel with the GPU kernel's normals."""
    n_chains = result.posterior.sizes["chain"] if "posterior" in result.groups() else result["moments"].sizes["chain"]
    d = run.target.dim
    normals = host.HostExecutor().normals(lib, source, n_chains, 0, run.schedule.n_steps * d, runner.philox_key(seed))
    init = result.constant_data["init"].values
    finals, drawn, failed = [], [], []
    for c in range(n_chains):
        state = tuple(np.array(s, float) for s in run.method.algorithm.initial_state(init[c : c + 1], {}, run.options))
        state = tuple(s[0] for s in state)
        out = np.full((run.n_draws, d), np.nan)
        failed.append(run_chain(run, state, None, out, injected=normals[c].reshape(-1, d)))
        finals.append(np.stack(state))
        drawn.append(out)
    return np.array(finals), np.array(drawn), np.array(failed)


@pytest.mark.parametrize("case", list(CASES))
def test_the_kernel_equals_the_cpu_kernels_given_the_same_normals(case):
    method, target, options = CASES[case]
    target = _target(target)
    n_steps, seed = 150, 3
    run, _ = prepare(target, method, n_steps, **options)
    source, lib = _lib(run)
    result = sgsim.sample(
        target, method, n_steps, n_chains=6, seed=seed, backend="gpu-host", precision="float64", **options
    )
    finals, drawn, failed = _injected_cpu(run, result, lib, source, seed)
    assert np.all(failed == -1)
    gpu_draws = result.posterior["theta"].values
    gpu_finals = np.stack([result.constant_data[f"final_{name}"].values for name in run.method.algorithm.state], 1)
    scale = 1.0 + np.abs(drawn)
    # the same operations in the same order; only the libraries' exp may differ in the last bit
    assert np.max(np.abs(gpu_draws - drawn) / scale) < 1e-12, case
    assert np.max(np.abs(gpu_finals - finals) / (1.0 + np.abs(finals))) < 1e-12, case
    # negative control: the CPU kernel given the normals one step late is far from the kernel
    shifted = np.roll(
        host.HostExecutor().normals(lib, source, 1, 0, n_steps * target.dim, runner.philox_key(seed)), target.dim
    )
    state = tuple(
        np.array(s, float)[0]
        for s in run.method.algorithm.initial_state(result.constant_data["init"].values[:1], {}, run.options)
    )
    out = np.full((run.n_draws, target.dim), np.nan)
    run_chain(run, state, None, out, injected=shifted[0].reshape(-1, target.dim))
    assert np.max(np.abs(gpu_draws[0] - out)) > 1e-6


def test_a_diverging_chain_stops_at_the_cpu_kernels_step():
    # SGLD with a step far beyond stability on the rotated-noise oracle (its limit is 0.906): the
    # chains leave the bound; run on purpose past the refusal
    options = dict(step_size=1.2, step_check="ignore")
    run, _ = prepare(LINEAR, "sgld", 200, divergence_bound=50.0, **options)
    source, lib = _lib(run)
    with pytest.warns(RuntimeWarning, match="diverged"):
        result = sgsim.sample(
            LINEAR, "sgld", 200, n_chains=5, seed=4, backend="gpu-host", precision="float64", divergence_bound=50.0,
            on_divergence="mark", **options,
        )  # fmt: skip
    *_, failed = _injected_cpu(run, result, lib, source, 4)
    at = result.constant_data["diverged_at"].values
    assert np.all(at > 0)
    assert np.array_equal(at, failed + 1)
    assert np.all(np.isnan(result.posterior["theta"].values[np.arange(5), at - 1]))
    with pytest.raises(DivergenceError, match="chain 0 at step"):
        sgsim.sample(LINEAR, "sgld", 200, n_chains=5, seed=4, backend="gpu-host", divergence_bound=50.0, **options)


# ----------------------------------------------------------------------------- in law

K, CYCLES, BETA = 300, 3, 0.3
INIT3 = np.array([1.0, -0.5, 0.5])
E_SGFS = 0.1  # SGFS's injected covariance E E^T = 0.1 I


def _law_case(method):
    """(target, options, init, law): ``law(scale)`` is theta's exact (mean, cov) at the final step
    with the noise's variance multiplied by ``scale`` (1: the sampler's law)."""
    cyc = schedules.cyclical(0.1, K, n_cycles=CYCLES, explore_fraction=BETA)
    const = np.full(K, 1.0)
    if method == "csgld":
        options = dict(step_size=0.1, n_cycles=CYCLES, explore_fraction=BETA)
        path = lambda s: exact_law.sgld_law(P, B, cyc.step_size, s * cyc.temperature, s * V, init_mean=INIT)  # noqa: E731
        return LINEAR, options, INIT, path
    if method == "csghmc":
        options = dict(step_size=0.1, n_cycles=CYCLES, explore_fraction=BETA, friction=0.3)
        path = lambda s: exact_law.sghmc_law(P, B, cyc.step_size, 0.3, s * cyc.temperature, s * V, init_mean=INIT)  # noqa: E731
        return LINEAR, options, INIT, path
    if method == "sgld_wt":  # the cyclical paper's SGLD at half the rate: alpha = epsilon / 2
        path = lambda s: exact_law.sgld_law(P, B, 0.1 * const, s * const, s * V, init_mean=INIT)  # noqa: E731
        return LINEAR, dict(step_size=0.2), INIT, path
    # [SGDVI] units on the OU quadratic: A, per-example covariance C, batch size 4
    if method == "sgd":
        path = lambda s: exact_law.preconditioned_sgd_law(A3, s * C3, H_FULL, 0.5 * const, 4, INIT3)  # noqa: E731
        return OU, dict(step_size=0.5, preconditioner=H_FULL), INIT3, path
    if method == "momentum_sgd":
        path = lambda s: exact_law.momentum_sgd_law(A3, s * C3, 0.3 * const, 0.2, 4, np.r_[INIT3, 0, 0, 0])  # noqa: E731
        return OU, dict(step_size=0.3, damping=0.2), INIT3, path
    if method == "sgfs":
        e = np.sqrt(E_SGFS) * np.eye(3)
        path = lambda s: exact_law.sgfs_law(A3, s * C3, H_FULL, np.sqrt(s) * e, 0.4 * const, 4, INIT3)  # noqa: E731
        return OU, dict(step_size=0.4, preconditioner=H_FULL, injected_cov=E_SGFS), INIT3, path
    raise AssertionError(method)


LAW_METHODS = ["csgld", "csghmc", "sgld_wt", "sgd", "momentum_sgd", "sgfs"]


def _check_law(method, backend, precision, n_chains, wrong_scale, seed):
    target, options, init, law = _law_case(method)
    result = sgsim.sample(
        target, method, K, n_chains=n_chains, seed=seed, init=init, storage="final", backend=backend,
        precision=precision, **options,
    )  # fmt: skip
    final = result.constant_data["final_theta"].values
    d = target.dim

    def moments(scale):
        path = law(scale)
        return path.mean[-1][:d], path.cov[-1][:d, :d]  # theta's marginal of a (theta, v) law

    # replica mean, variances and covariances; their SEs are derived in stats.py
    check_gaussian_law(final, *moments(1.0), f"{method} {backend} {precision}")
    # negative control: the wrong noise scale (every noise variance times wrong_scale)
    with pytest.raises(AssertionError, match="variance|covariance"):
        check_gaussian_law(final, *moments(wrong_scale), "wrong noise scale")


@pytest.mark.parametrize("precision", kernels.PRECISIONS)
@pytest.mark.parametrize("method", LAW_METHODS)
def test_final_step_matches_the_exact_law(method, precision):
    # 20,000 chains: a 20 % error of the noise's variance is about 14 SEs of a sample variance
    _check_law(method, "gpu-host", precision, 20_000, 0.8, seed=21)


def _coverage(result, means):
    """Each mode's share of the chains' final states (nearest mode), and each state's squared distance to it."""
    theta = result.constant_data["final_theta"].values
    dist = ((theta[:, None, :] - means[None]) ** 2).sum(-1)
    return np.bincount(dist.argmin(1), minlength=len(means)) / theta.shape[0], dist.min(1)


def _check_coverage(backend, n_dev, n_cpu):
    options = dict(step_size=0.05, n_cycles=4, explore_fraction=0.25)
    target = targets.mixture_25()
    means = target.params[0]
    cpu = sgsim.sample(target, "csgld", 2000, n_chains=n_cpu, seed=1, storage="final", **options)
    dev = sgsim.sample(target, "csgld", 2000, n_chains=n_dev, seed=2, storage="final", backend=backend, **options)
    p_cpu, r_cpu = _coverage(cpu, means)
    p_dev, r_dev = _coverage(dev, means)
    # two independent proportions: SE = sqrt(p (1 - p) (1/n_dev + 1/n_cpu)) with the pooled p
    pooled = (n_cpu * p_cpu + n_dev * p_dev) / (n_cpu + n_dev)
    se = np.sqrt(pooled * (1 - pooled) * (1 / n_dev + 1 / n_cpu)) + 1e-12
    assert_within_se(p_dev - p_cpu, 0.0, se, what="mode coverage")
    # negative control: chains that never left the corner mode's basin (short, small steps from
    # (-4, -4)) are rejected by the same comparison of proportions
    stuck = sgsim.sample(target, "sgld", 200, n_chains=n_dev, seed=4, storage="final", backend=backend,
                         init=[-4.0, -4.0], step_size=0.001)  # fmt: skip
    p_stuck = _coverage(stuck, means)[0]
    with pytest.raises(AssertionError, match="mode coverage"):
        pooled = (n_cpu * p_cpu + n_dev * p_stuck) / (n_cpu + n_dev)
        se = np.sqrt(pooled * (1 - pooled) * (1 / n_dev + 1 / n_cpu)) + 1e-12
        assert_within_se(p_stuck - p_cpu, 0.0, se, what="mode coverage")
    # mean squared distance to the nearest mode: SE from both samples' variances
    spread_se = np.sqrt(r_cpu.var() / n_cpu + r_dev.var() / n_dev)
    assert_within_se(r_dev.mean() - r_cpu.mean(), 0.0, spread_se, what="within-mode spread")
    # negative control: the same comparison rejects chains run at temperature 0.6
    cold = sgsim.sample(
        target, "csgld", 2000, n_chains=n_dev, seed=3, storage="final", backend=backend, temperature=0.6, **options
    )
    r_cold = _coverage(cold, means)[1]
    with pytest.raises(AssertionError, match="within-mode spread"):
        spread_se = np.sqrt(r_cpu.var() / n_cpu + r_cold.var() / n_dev)
        assert_within_se(r_cold.mean() - r_cpu.mean(), 0.0, spread_se, what="within-mode spread")


def test_mode_coverage_on_the_25_gaussians_matches_the_cpu_path():
    _check_coverage("gpu-host", 4000, 4000)


@gpu
def test_on_the_gpu_mode_coverage_matches_the_cpu_path():
    _check_coverage("gpu", 1_000_000, 100_000)


# ----------------------------------------------------------------------------- the public API


def test_storage_modes_agree_and_a_chain_does_not_depend_on_the_chain_count():
    common = dict(step_size=0.05, seed=9, backend="gpu-host", precision="float32", burn_in=100, thin=3)
    draws = sgsim.sample("mixture_25", "sghmc", 600, n_chains=40, **common)
    few = sgsim.sample("mixture_25", "sghmc", 600, n_chains=3, **common)
    theta = draws.posterior["theta"].values
    assert draws.posterior["theta"].dtype == np.float64
    assert np.array_equal(few.posterior["theta"].values, theta[:3])
    final = sgsim.sample("mixture_25", "sghmc", 600, n_chains=40, storage="final", **common)
    assert np.array_equal(final.constant_data["final_theta"].values, draws.constant_data["final_theta"].values)
    moments = sgsim.sample("mixture_25", "sghmc", 600, n_chains=40, storage="moments", **common)
    assert np.array_equal(moments["moments"]["n_draws"].values, np.full(40, theta.shape[1]))
    assert np.allclose(moments["moments"]["theta_mean"].values, theta.mean(1), rtol=0, atol=1e-12)
    cov = np.stack([np.cov(t.T) for t in theta])
    assert np.allclose(moments["moments"]["theta_cov"].values, cov, rtol=0, atol=1e-11)
    assert draws.attrs["backend"] == "gpu-host" and draws.attrs["precision"] == "float32"
    assert draws.attrs["rng"].startswith("Philox4x32-10")


@pytest.mark.parametrize("shape", [(5,), (7, 1, 2), (7, 2, 3), (4, 65), (3, 10, 10)])
def test_the_chain_axis_moves_to_the_end_and_back(shape):
    # the host's copies into and out of the kernel's layout (chain last), index by index where a
    # chain holds few values and as one transposed copy where it holds many: NumPy's moveaxis
    a = np.random.default_rng(0).standard_normal(shape)
    there = runner._chain_last(a, np.float32)
    assert there.flags.c_contiguous and there.dtype == np.float32
    assert np.array_equal(there, np.moveaxis(a, 0, -1).astype(np.float32))
    back = np.empty_like(a)
    runner._chain_first(back, there)
    assert np.array_equal(back, np.moveaxis(there, -1, 0))
    # control: a reshape in place of the move (the chain axis's values in the wrong places)
    if a.ndim > 1:
        assert not np.array_equal(there, a.reshape(shape[1:] + shape[:1]).astype(np.float32))


def test_a_gpu_host_result_replays_bit_for_bit(tmp_path):
    first = sgsim.sample("exponential_mixture", "csghmc", 400, n_chains=8, step_size=0.02, n_cycles=2, seed=12,
                         backend="gpu-host")  # fmt: skip
    path = sgsim.io.write_result(first, tmp_path / "run.nc")
    again = sgsim.replay(path)
    assert again.attrs["backend"] == "gpu-host" and again.attrs["precision"] == "float32"
    assert np.array_equal(again.posterior["theta"].values, first.posterior["theta"].values)


def test_cpu_and_gpu_results_have_the_same_layout():
    common = dict(n_chains=4, step_size=0.05, seed=1, burn_in=50, thin=2)
    cpu = sgsim.sample("mixture_3x3", "sghmc", 200, **common)
    dev = sgsim.sample("mixture_3x3", "sghmc", 200, backend="gpu-host", **common)
    assert sorted(cpu.groups()) == sorted(dev.groups())
    for group in cpu.groups():
        assert sorted(cpu[group].data_vars) == sorted(dev[group].data_vars), group
        for name in cpu[group].data_vars:
            assert cpu[group][name].shape == dev[group][name].shape, (group, name)
    assert np.array_equal(cpu.sample_stats["step"].values, dev.sample_stats["step"].values)


@pytest.mark.parametrize(
    "kwargs, name, match",
    [
        (dict(backend="tpu"), "backend", "backend must be one of"),
        (dict(backend="gpu-host", precision="float16"), "precision", "precision must be one of"),
        (dict(precision="float32"), "precision", "needs backend='gpu'"),
    ],
)
def test_bad_backend_arguments_are_named(kwargs, name, match):
    with pytest.raises(ParameterError, match=match) as info:
        sgsim.sample("mixture_25", "sgld", 10, step_size=0.01, **kwargs)
    assert info.value.parameter == name


@pytest.mark.parametrize(
    "target, method, extra, match",
    [
        ("mixture_25", "svgd", dict(n_particles=4, step_size=0.01), "interacting particles"),
        (
            lambda: targets.logistic_regression(
                np.random.default_rng(0).normal(size=(20, 2)), np.r_[np.zeros(10), np.ones(10)], batch_size=5
            ),
            "sgld",
            dict(step_size=0.01),
            "draws minibatches",
        ),
    ],
    ids=["svgd", "data-target"],
)
def test_what_the_gpu_path_cannot_run_is_refused_before_any_work(target, method, extra, match):
    target = target() if callable(target) else target
    with pytest.raises(ParameterError, match=match) as info:
        sgsim.sample(target, method, 10, backend="gpu", **extra)
    assert info.value.parameter == "backend"
    assert "backend='cpu'" in str(info.value)


def test_a_user_target_without_a_gpu_gradient_is_refused():
    import user_banana

    with pytest.raises(ParameterError, match="gradient without a GPU kernel"):
        sgsim.sample(user_banana.banana(), "sgld", 10, step_size=0.01, backend="gpu-host")


@pytest.mark.skipif(_cuda_device(), reason="CuPy and a device are present")
def test_without_cupy_or_a_device_the_gpu_backend_says_what_to_install():
    with pytest.raises(ParameterError) as info:
        sgsim.sample("mixture_25", "sgld", 10, step_size=0.01, backend="gpu")
    assert info.value.parameter == "backend"
    assert '"sgsim[gpu-cuda12]"' in str(info.value) or "CUDA device" in str(info.value)


def test_the_device_memory_check_names_n_chains():
    class Small(host.HostExecutor):
        def free_memory(self):
            return 1e6

    run, _ = prepare("mixture_25", "sgld", 1000, step_size=0.01, storage="draws")
    assert runner.device_bytes(run, 10_000, "float32") == 10_000 * (2 * 4 + 8) + 10_000 * 1000 * 2 * 4 + 10_000 * 21
    with pytest.raises(ParameterError, match="need .* GiB on the device") as info:
        runner.check_device_memory(run, 10_000, "float32", Small())
    assert info.value.parameter == "n_chains"


def test_kernel_literals_are_exact():
    for value in (0.1, 1 / 3, -2.5e-300, 7.0):
        assert float.fromhex(kernels._literal(value, "float64")) == value
        assert np.float32(float.fromhex(kernels._literal(value, "float32").rstrip("f"))) == np.float32(value)


# ----------------------------------------------------------------------------- nvcc and the GPU

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


@needs_nvcc
@pytest.mark.parametrize("case", ["sgld-mixture25", "csghmc-linear", "sgfs", "iasg", "sghmc-exponential"])
@pytest.mark.parametrize("storage", ["final", "moments", "draws"])
def test_the_cuda_source_compiles_for_an_h100_without_spills(case, storage, tmp_path):
    method, target, options = CASES[case]
    run, _ = prepare(_target(target), method, 100, storage=storage, **options)
    src = tmp_path / "k.cu"
    src.write_text(kernels.render(run, "float32", device=True).code)
    done = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_90", "--cubin", "-Xptxas", "-v", str(src), "-o", str(tmp_path / "k.cubin")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # the fused loop keeps the chain in registers: no spills to local memory
    report = [line for line in done.stderr.splitlines() if "sg_run" in line or "spill" in line]
    spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", done.stderr)]
    assert spills and max(spills) == 0, report


# The fast single-precision intrinsics' error bounds (CUDA C Programming Guide, "Intrinsic
# Functions"): __logf and __sincosf err by at most 2^-21.41 absolutely on [0.5, 2] and [-pi, pi];
# __logf by 3 ulp below 0.5.
FAST_ABS = 2.0**-21.41


def _fast_normals_close(dev, ref) -> bool:
    """Whether float32 normals made with the fast log and sincos are ``ref`` within those bounds.

    A pair ``(2k, 2k + 1)`` is ``r (cos phi, sin phi)`` with ``r^2 = -2 log u``. An absolute error
    ``e`` of the log moves ``r^2`` by ``2 e``, so ``r`` by ``2 e / (r' + r)``: large where ``r`` is
    small (``u`` near 1), bounded since ``r >= 3.4e-4``. Three ulp of the log elsewhere and the
    reciprocal square root's rounding move ``r`` by a few ulp (``8 * 2^-24 r``); the sine and
    cosine add ``FAST_ABS r``, the products an ulp.
    """
    dev, ref = np.asarray(dev, np.float64).reshape(-1, 2), np.asarray(ref, np.float64).reshape(-1, 2)
    r_dev, r_ref = np.hypot(*dev.T), np.hypot(*ref.T)
    tol = 2 * FAST_ABS / (r_dev + r_ref) + r_ref * (FAST_ABS + 16 * 2.0**-24)
    return bool(np.all(np.abs(dev - ref) <= tol[:, None]))


@gpu
@pytest.mark.parametrize("precision", kernels.PRECISIONS)
def test_device_normals_equal_the_host_builds(precision):
    from sgsim.gpu.device import CudaExecutor

    run, _ = prepare(LINEAR, "sgld", 10, step_size=0.1)
    ex, hx = CudaExecutor(), host.HostExecutor()
    dev = ex.normals(ex.build(kernels.render(run, precision)), kernels.render(run, precision), 1000, 0, 64, (1, 2))
    src = kernels.render(run, precision, device=False)
    ref = hx.normals(host.build(src), src, 1000, 0, 64, (1, 2))
    if precision == "float32":
        # the fast log and sincos, within their error bounds; control: a 1e-4 error of scale
        assert _fast_normals_close(dev, ref)
        assert not _fast_normals_close(dev, 1.0001 * ref)
    else:
        # the library's log and sincos, which may differ from the host's in the last bit
        assert np.allclose(dev, ref, rtol=1e-13, atol=1e-14)
        assert not np.allclose(dev, 1.0001 * ref, rtol=1e-13, atol=1e-14)


@gpu
@pytest.mark.parametrize("case", ["csgld-mixture25", "csghmc-linear", "sgld-linear-rotated-noise", "sgfs", "iasg"])
def test_on_the_gpu_float64_follows_the_host_build(case):
    # the same source and normals; only CUDA's exp, log and sincos differ from the host's in the
    # last bit, so 150 steps stay within 1e-9 relative
    method, target, options = CASES[case]
    common = dict(n_chains=512, seed=6, precision="float64", **options)
    dev = sgsim.sample(_target(target), method, 150, backend="gpu", **common)
    ref = sgsim.sample(_target(target), method, 150, backend="gpu-host", **common)
    a, b = dev.posterior["theta"].values, ref.posterior["theta"].values
    assert np.max(np.abs(a - b) / (1 + np.abs(b))) < 1e-9


@gpu
@pytest.mark.parametrize("precision", kernels.PRECISIONS)
@pytest.mark.parametrize("method", LAW_METHODS)
def test_on_the_gpu_a_million_chains_match_the_exact_law(method, precision):
    # 10^6 chains: a 2 % error of the noise's variance is about 14 SEs of a sample variance
    _check_law(method, "gpu", precision, 1_000_000, 0.98, seed=31)


# ----------------------------------------------------------------------------- the CuPy executor, without CUDA


class _FakeCupy:
    """Just enough of CuPy for CudaExecutor: arrays are NumPy's, and a RawModule is the CUDA text
    with the host's math macros, built by the host compiler. Each launch checks the grid and the
    types of the arguments against the kernel's C signature, as CUDA would need them."""

    __version__ = "13.0.0"

    class cuda:  # noqa: N801 (CuPy's names)
        class runtime:  # noqa: N801
            @staticmethod
            def getDeviceCount():  # noqa: N802
                return 1

            @staticmethod
            def memGetInfo():  # noqa: N802
                return 8 * 2**30, 16 * 2**30

            @staticmethod
            def getDeviceProperties(device):  # noqa: N802
                return {"name": b"fake device"}

            @staticmethod
            def runtimeGetVersion():  # noqa: N802
                return 12080

        class Device:
            id = 0

            def synchronize(self):
                return None

    class _Pool:
        def total_bytes(self):
            return 0

        def used_bytes(self):
            return 0

    @staticmethod
    def get_default_memory_pool():
        return _FakeCupy._Pool()

    asarray = staticmethod(np.ascontiguousarray)
    zeros = staticmethod(np.zeros)
    empty = staticmethod(np.empty)
    asnumpy = staticmethod(np.asarray)

    class RawModule:
        def __init__(self, code, options=()):
            precision = "float32" if "typedef float real;" in code else "float64"
            assert "--std=c++17" in options
            host_code = code.replace(kernels._MATH[(precision, True)], kernels._MATH[(precision, False)])
            self.precision = precision
            self.lib = host.build(kernels.KernelSource(host_code, precision, 0, 0, ""))

        def get_function(self, name):
            real = np.dtype(self.precision)
            signatures = {
                "sg_run": (
                    "i8",
                    real,
                    "i8",
                    real,
                    real,
                    "u1",
                    "i8",
                    "i8",
                    "i8",
                    real,
                    "u4",
                    "u4",
                    real,
                    "i8",
                    "f8",
                    "f8",
                ),
                "sg_normals": ("i8", "u8", "i8", "u4", "u4", real),
            }
            scalars = {0, 7, 8, 9, 10, 11} if name == "sg_run" else {0, 1, 2, 3, 4}
            host_fn = getattr(self.lib, name + "_host")

            def launch(grid, block, args):
                assert len(args) == len(signatures[name])
                for i, (arg, dtype) in enumerate(zip(args, signatures[name], strict=True)):
                    if i in scalars:
                        assert isinstance(arg, np.generic) and arg.dtype == np.dtype(dtype), (name, i, arg)
                    else:
                        assert isinstance(arg, np.ndarray) and arg.dtype == np.dtype(dtype), (name, i, arg.dtype)
                        assert arg.flags.c_contiguous
                assert grid[0] * block[0] >= int(args[0]) > (grid[0] - 1) * block[0]
                host_fn(*(a.ctypes.data if isinstance(a, np.ndarray) else a.item() for a in args))

            return launch


def test_the_cupy_executor_passes_the_kernel_what_its_signature_says(monkeypatch):
    from sgsim.gpu import device

    monkeypatch.setattr(device, "_import_cupy", lambda: _FakeCupy)
    for precision in kernels.PRECISIONS:
        for storage in ("draws", "final", "moments"):
            common = dict(n_chains=300, step_size=0.05, n_cycles=2, seed=5, storage=storage, burn_in=10, thin=4)
            dev = sgsim.sample("mixture_25", "csghmc", 500, backend="gpu", precision=precision, **common)
            ref = sgsim.sample("mixture_25", "csghmc", 500, backend="gpu-host", precision=precision, **common)
            assert dev.attrs["device"].startswith("fake device")
            for group in ref.groups():
                if group == "run_spec":
                    continue
                for name in ref[group].data_vars:
                    assert np.array_equal(dev[group][name].values, ref[group][name].values), (precision, group, name)
    from sgsim.gpu.device import CudaExecutor

    run, _ = prepare(LINEAR, "sgld", 10, step_size=0.1)
    ex = CudaExecutor()
    source = kernels.render(run, "float64")
    normals = ex.normals(ex.build(source), source, 200, 5, 30, (3, 4))
    host_source = kernels.render(run, "float64", device=False)
    assert np.array_equal(
        normals, host.HostExecutor().normals(host.build(host_source), host_source, 200, 5, 30, (3, 4))
    )


def _nvrtc():
    import ctypes
    import ctypes.util
    import os

    path = os.environ.get("SGSIM_NVRTC") or ctypes.util.find_library("nvrtc")
    return ctypes.CDLL(path) if path else None


@pytest.mark.skipif(_nvrtc() is None, reason="no NVRTC library (set SGSIM_NVRTC to libnvrtc.so to run this)")
@pytest.mark.parametrize("precision", kernels.PRECISIONS)
@pytest.mark.parametrize("case", list(CASES))
def test_the_cuda_source_compiles_with_nvrtc(case, precision):
    """CuPy compiles the kernel with NVRTC, whose implicit declarations differ from nvcc's."""
    import ctypes

    lib = _nvrtc()
    method, target, options = CASES[case]
    run, _ = prepare(_target(target), method, 100, storage="moments", **options)
    prog = ctypes.c_void_p()
    code = kernels.render(run, precision).code.encode()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), code, b"sgsim.cu", 0, None, None) == 0
    opts = [b"--std=c++17", b"--gpu-architecture=compute_90"]
    rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    assert rc == 0, log.value.decode()
