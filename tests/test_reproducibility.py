"""Seeds and streams (sgsim.rng): the same seed gives the same bits, whatever the number of
chains, threads or blocks; the seed used is recorded in every result."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import sgsim
import sgsim.driver
from sgsim import targets

NOISY = targets.linear_gaussian([[2.0, 0.5], [0.5, 1.0]], [0.3, -0.2], [[0.5, 0.2], [0.2, 0.3]])
CSGHMC = dict(step_size=0.01, n_cycles=2, explore_fraction=0.25, friction=0.2)


def run(seed=7, n_chains=3, method="csghmc", target="mixture_25", **kwargs):
    opts = CSGHMC if method == "csghmc" else dict(step_size=0.1)
    return sgsim.sample(target, method, 200, n_chains=n_chains, seed=seed, **{**opts, **kwargs})


def theta(result):
    return result.posterior["theta"].values


def assert_same_bits(a, b):
    assert np.array_equal(theta(a), theta(b), equal_nan=True)
    for name in ("init", "final_theta"):
        assert np.array_equal(a.constant_data[name].values, b.constant_data[name].values)


def test_same_seed_gives_identical_bits():
    a, b = run(), run()
    assert_same_bits(a, b)
    for name in ("step_size", "temperature", "stage", "cycle", "step", "diverged"):
        assert np.array_equal(a.sample_stats[name].values, b.sample_stats[name].values)
    assert np.array_equal(a.constant_data["final_velocity"].values, b.constant_data["final_velocity"].values)


@pytest.mark.parametrize("method, target", [("csghmc", "mixture_25"), ("sgld", NOISY)])
def test_different_seeds_give_different_draws(method, target):
    a, b = run(7, method=method, target=target), run(8, method=method, target=target)
    assert not np.any(theta(a) == theta(b))
    assert not np.any(a.constant_data["init"].values == b.constant_data["init"].values)


def test_chains_of_one_run_differ():
    draws = theta(run(7, n_chains=3))
    assert not np.any(draws[0] == draws[1]) and not np.any(draws[1] == draws[2])


@pytest.mark.parametrize("method, target", [("csghmc", "mixture_25"), ("sgld", NOISY)])
def test_chain_c_does_not_depend_on_the_number_of_chains(method, target):
    one, three, eight = (run(11, n, method=method, target=target) for n in (1, 3, 8))
    assert np.array_equal(theta(one)[0], theta(eight)[0])
    assert np.array_equal(theta(three), theta(eight)[:3])
    assert np.array_equal(three.constant_data["init"].values, eight.constant_data["init"].values[:3])


def test_threads_do_not_change_the_bits():
    assert_same_bits(run(5, 4, n_threads=1), run(5, 4, n_threads=2))


def test_numba_thread_count_does_not_change_the_bits(tmp_path):
    # two numba threads are forced, so that the comparison can fail on a one-core machine too;
    # both the chains' pool (n_threads) and numba's own thread count are varied
    script = textwrap.dedent(
        """
        import sys
        import numba
        import numpy as np
        import sgsim

        assert numba.config.NUMBA_NUM_THREADS == 2
        runs = []
        for numba_threads, n_threads in [(1, 1), (2, 2), (2, 1), (1, 2)]:
            numba.set_num_threads(numba_threads)
            r = sgsim.sample("mixture_25", "csghmc", 200, n_chains=5, seed=5, n_threads=n_threads,
                             step_size=0.01, n_cycles=2, explore_fraction=0.25, friction=0.2)
            runs.append(r.posterior["theta"].values)
        np.save(sys.argv[1], np.stack(runs))
        """
    )
    out = tmp_path / "bits.npy"
    env = {**os.environ, "NUMBA_NUM_THREADS": "2"}
    proc = subprocess.run(
        [sys.executable, "-c", script, str(out)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    runs = np.load(out)
    assert all(np.array_equal(runs[0], other) for other in runs[1:])
    assert np.array_equal(runs[0], theta(run(5, 5)))  # and the parent's default threads


def test_blocking_of_steps_does_not_change_the_bits(monkeypatch):
    reference = run(5, 2)
    monkeypatch.setattr(sgsim.driver, "_BLOCK_STEPS", 7)
    assert_same_bits(reference, run(5, 2))


def test_seed_is_recorded():
    result = run(1234, 2)
    assert result.attrs["seed"] == 1234
    assert result.posterior.attrs["seed"] == 1234
    assert result.sample_stats.attrs["seed"] == 1234
    config = json.loads(result.attrs["sgsim_config"])
    assert config["seed"] == 1234 and config["method"] == "csghmc" and config["n_chains"] == 2


def test_seed_none_records_entropy_that_replays_the_run():
    a, b = run(None, 2), run(None, 2)
    seed = a.attrs["seed"]
    assert isinstance(seed, int) and seed >= 0 and a.posterior.attrs["seed"] == seed
    assert seed != b.attrs["seed"] and not np.array_equal(theta(a), theta(b))
    assert_same_bits(a, run(seed, 2))
