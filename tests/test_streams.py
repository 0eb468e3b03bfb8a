"""The stream schemes of a run: counter-based Philox (the default for independent chains) and PCG64.

docs: guide-reproducibility, theory-tolerances.

* the schemes a run may take, its default, and what is refused (naming ``stream``);
* a Philox chain's normals are its stream's, numbers ``k d + i`` at step ``k`` (checked through a
  step whose update is known exactly), and the PCG64 scheme's are not (the negative control);
* chain ``c``'s bits do not depend on the number of chains or threads, in the lane loop (a
  target with a block gradient) and in the chain loop (one without);
* the lane loop and the chain loop compute the same chains up to the rounding of the
  exponential (the block gradient's vectorised ``exp`` against libm's);
* a CPU run and a run of the GPU kernel (its host build, float64) of one seed follow each other
  chain by chain;
* result files written before the schemes existed (PCG64, no scheme recorded) replay bit for
  bit.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import sgsim
from sgsim import datasets, philox, targets
from sgsim._validate import ParameterError
from sgsim.gpu import host

DATA = Path(__file__).parent / "data"


def _theta(result) -> np.ndarray:
    return np.asarray(result.posterior["theta"].values)


def test_independent_chains_default_to_philox_and_the_scheme_is_recorded():
    r = sgsim.sample("standard_gaussian", "sgld", 20, n_chains=2, step_size=0.05, seed=0)
    assert r.attrs["stream"] == "philox" and "Philox4x32-10" in r.attrs["rng"]
    p = sgsim.sample("standard_gaussian", "sgld", 20, n_chains=2, step_size=0.05, seed=0, stream="pcg64")
    assert p.attrs["stream"] == "pcg64" and "PCG64" in p.attrs["rng"]
    assert not np.array_equal(_theta(r), _theta(p))
    # a replay takes the recorded scheme
    assert np.array_equal(_theta(sgsim.replay(p)), _theta(p))
    assert np.array_equal(_theta(sgsim.replay(r)), _theta(r))


def test_runs_that_draw_from_their_streams_default_to_pcg64_and_refuse_philox():
    # a minibatch gradient draws its indices from the chain's stream (emulated Gaussian gradient noise
    # does not: it joins the step's normals)
    x, y = datasets.load_heart()
    noisy = targets.regression.logistic_regression(x[:60], y[:60], batch_size=10)
    r = sgsim.sample(noisy, "sgld", 10, n_chains=2, step_size=1e-3, seed=0)
    assert r.attrs["stream"] == "pcg64"
    with pytest.raises(ParameterError, match="stream"):
        sgsim.sample(noisy, "sgld", 10, step_size=1e-3, seed=0, stream="philox")
    e = sgsim.sample("mixture_3x3", "svgd", 5, n_particles=4, step_size=0.05, seed=0)
    assert e.attrs["stream"] == "pcg64"
    with pytest.raises(ParameterError, match="stream"):
        sgsim.sample("mixture_3x3", "svgd", 5, n_particles=4, step_size=0.05, seed=0, stream="philox")


@pytest.mark.parametrize("stream", ["mt19937", 1, True])
def test_an_unknown_scheme_is_named(stream):
    with pytest.raises(ParameterError, match="stream"):
        sgsim.sample("standard_gaussian", "sgld", 5, step_size=0.05, seed=0, stream=stream)


@pytest.mark.parametrize("method", ["sgld", "sghmc"])
def test_a_philox_chain_draws_normal_k_d_plus_i_at_step_k(method):
    # on N(0, I) from theta_0 = 0 with v_0 = 0: SGLD's theta_k = (1 - a) theta_{k-1} + sqrt(2 a) xi_k and
    # SGHMC's first velocity v_1 = sqrt(2 eta a) xi_0, so the chain's first steps give back its normals
    # to rounding (1e-13: a few operations on numbers of order one)
    a, seed, d, n = 0.01, 3, 2, 3
    kw = {"friction": 0.5} if method == "sghmc" else {}
    r = sgsim.sample(
        targets.standard_gaussian(d), method, 3, n_chains=n, step_size=a, seed=seed, init=np.zeros(d), **kw
    )
    th = _theta(r)
    for c in range(n):
        xi = philox.normals(seed, c, 0, 3 * d).reshape(3, d)
        if method == "sgld":
            expect = np.zeros(d)
            for k in range(3):
                expect = (1 - a) * expect + np.sqrt(2 * a) * xi[k]
                np.testing.assert_allclose(th[c, k], expect, rtol=0, atol=1e-13)
        else:
            # theta_1 = theta_0 + v_0 = 0; theta_2 = theta_1 + v_1 with v_1 = sqrt(2 eta a) xi_0 (grad at 0 is 0)
            np.testing.assert_allclose(th[c, 1], np.sqrt(2 * 0.5 * a) * xi[0], rtol=0, atol=1e-13)
    # negative control: the PCG64 scheme's chain is not made of these normals
    p = sgsim.sample(targets.standard_gaussian(d), method, 3, n_chains=n, step_size=a, seed=seed, init=np.zeros(d),
                     stream="pcg64", **kw)  # fmt: skip
    assert np.max(np.abs(_theta(p)[:, -1] - th[:, -1])) > 1e-3


def _no_block(target):
    return dataclasses.replace(target, grad_u_block=None, spec=None)


@pytest.mark.parametrize("make", [targets.mixture_25, lambda: _no_block(targets.mixture_25())], ids=["lanes", "chains"])
def test_chain_c_does_not_depend_on_the_chain_or_thread_count(make):
    target = make()
    kw = dict(step_size=0.02, seed=7, n_cycles=2)
    few = _theta(sgsim.sample(target, "csghmc", 120, n_chains=3, n_threads=1, **kw))
    many = _theta(sgsim.sample(target, "csghmc", 120, n_chains=70, n_threads=2, **kw))
    assert np.array_equal(few, many[:3])


@pytest.mark.parametrize("method", ["sgld", "sghmc"])
def test_a_few_chains_a_thread_run_one_at_a_time_with_the_lane_loops_bits(method, monkeypatch):
    # fewer than FEW_CHAINS chains a thread run in the chain loop with the block gradient's one-point
    # form written in; 40 chains on one thread run in the lane loop: the same bits, chain by chain
    from sgsim import driver

    seen = []

    def spy(*args, **kwargs):
        seen.append(len(args) > 7 and args[7] is not None)
        return real(*args, **kwargs)

    real = driver.cached_chain_loop
    monkeypatch.setattr(driver, "cached_chain_loop", spy)
    target = targets.mixture_3x3()
    kw = dict(step_size=0.02, seed=5, init=np.array([0.4, -0.3]), **({"friction": 0.3} if method == "sghmc" else {}))
    few = _theta(sgsim.sample(target, method, 200, n_chains=3, n_threads=2, **kw))
    assert seen == [True]
    many = _theta(sgsim.sample(target, method, 200, n_chains=40, n_threads=1, **kw))
    assert seen == [True]  # the lane loop: no chain loop
    assert np.array_equal(few, many[:3])
    # negative control: the per-point gradient (rounded otherwise) does not give these bits
    point = _theta(sgsim.sample(_no_block(target), method, 200, n_chains=3, n_threads=2, **kw))
    assert not np.array_equal(point, few)
    np.testing.assert_allclose(point, few, rtol=0, atol=1e-9)


def test_the_lane_loop_and_the_chain_loop_agree_to_the_rounding_of_exp():
    # the block gradient's exp is within 1 ulp of libm's; over 300 steps of SGLD on the mixture the
    # two loops' chains stay within 1e-9 (the chain contracts near a mode: rounding does not grow)
    target = targets.mixture_25()
    kw = dict(n_chains=5, step_size=0.01, seed=2, init=np.array([0.3, -0.4]))
    lanes = _theta(sgsim.sample(target, "sgld", 300, **kw))
    chains = _theta(sgsim.sample(_no_block(target), "sgld", 300, **kw))
    np.testing.assert_allclose(lanes, chains, rtol=0, atol=1e-9)
    # negative control: another seed's chains are far from these
    other = _theta(sgsim.sample(_no_block(target), "sgld", 300, **{**kw, "seed": 3}))
    assert np.max(np.abs(other - lanes)) > 0.1


@pytest.mark.skipif(host.compiler() is None, reason="no C++ compiler: the GPU kernel's host build cannot be made")
@pytest.mark.parametrize("method", ["sgld", "sghmc"])
def test_a_cpu_run_and_a_gpu_kernel_run_of_one_seed_follow_each_other_chain_by_chain(method):
    # the same initial points (PCG64 init streams) and the same Philox normals: in float64 the two
    # differ by the rounding of exp, log and sin/cos only (1e-9 over 150 steps, as the GPU tests ask)
    kw = dict(n_chains=6, step_size=0.01, seed=4, **({"friction": 0.2} if method == "sghmc" else {}))
    cpu = _theta(sgsim.sample("mixture_25", method, 150, **kw))
    gpu = _theta(sgsim.sample("mixture_25", method, 150, backend="gpu-host", precision="float64", **kw))
    np.testing.assert_allclose(cpu, gpu, rtol=0, atol=1e-9)
    # negative control: another seed's GPU run is far from this CPU run
    other = _theta(sgsim.sample("mixture_25", method, 150, backend="gpu-host", precision="float64",
                                **{**kw, "seed": 5}))  # fmt: skip
    assert np.max(np.abs(other - cpu)) > 0.1


@pytest.mark.parametrize("name", ["csgld_mixture25_pcg64.nc", "sghmc_gaussian_pcg64.nc"])
def test_result_files_written_before_the_schemes_replay_bit_for_bit(name):
    # written by sgsim before the stream schemes (commit e77dcd4: PCG64 streams, no scheme recorded)
    old = sgsim.io.read_result(DATA / name)
    assert "stream" not in old.attrs
    again = sgsim.replay(DATA / name)
    assert again.attrs["stream"] == "pcg64"
    assert np.array_equal(_theta(again), _theta(old))


@pytest.mark.parametrize("name", ["csgld_mixture25_philox.nc", "sghmc_mixture3x3_philox.nc"])
def test_result_files_of_the_philox_scheme_replay_bit_for_bit(name):
    # golden files, written at the commit that fused the block gradients' multiply-adds: 70 chains of
    # cSGLD (a block of 64 lanes, then 6 in the few-lane form) and 3 of SGHMC (the few-lane form).
    # They pin the lane loop's arithmetic: a change to it (as fusing was) fails here, and renewing
    # them is a change of bits to be said in its commit
    old = sgsim.io.read_result(DATA / name)
    assert old.attrs["stream"] == "philox"
    again = sgsim.replay(DATA / name)
    assert np.array_equal(_theta(again), _theta(old))
    # negative control: the same run through the chain loop (the per-point gradient, unfused) is
    # other bits by rounding, which replay's own check rejects
    target = {"csgld_mixture25_philox.nc": targets.mixture_25, "sghmc_mixture3x3_philox.nc": targets.mixture_3x3}[name]
    with pytest.raises(sgsim.sampling.ReplayMismatchError, match="bit for bit expected"):
        sgsim.replay(DATA / name, target=_no_block(target()))
