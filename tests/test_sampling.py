"""The InferenceData that ``sgsim.sample`` returns: which draws are kept, what each records."""

import json

import numpy as np
import pytest

import sgsim
from sgsim import schedules, targets

NOISY = targets.linear_gaussian([[2.0, 0.5], [0.5, 1.0]], [0.3, -0.2], [[0.5, 0.2], [0.2, 0.3]])
OPTS = dict(step_size=0.05, n_cycles=3, explore_fraction=0.3, friction=0.2)


@pytest.fixture(scope="module")
def result():
    return sgsim.sample(NOISY, "csghmc", 300, n_chains=2, seed=9, burn_in=131, thin=3, log_density=True, **OPTS)


def test_kept_steps_follow_schedule_burn_in_and_thin(result):
    sched = schedules.cyclical(0.05, 300, n_cycles=3, explore_fraction=0.3)
    kept = np.flatnonzero(sched.collect & (np.arange(300) >= 131))[::3]
    stats = result.sample_stats
    np.testing.assert_array_equal(stats["step"].values, np.tile(kept + 1, (2, 1)))
    for name in ("step_size", "temperature", "stage", "cycle"):
        np.testing.assert_array_equal(stats[name].values[0], getattr(sched, name)[kept])
    assert np.all(stats["stage"].values == schedules.SAMPLING) and np.all(stats["temperature"].values == 1.0)
    assert result.posterior["theta"].dims == ("chain", "draw", "dim")
    assert result.posterior["theta"].shape == (2, kept.size, 2)


def test_log_density_of_each_draw(result):
    theta = result.posterior["theta"].values
    np.testing.assert_allclose(result.sample_stats["lp"].values, NOISY.log_density(theta), rtol=1e-14)


def test_constant_data_holds_init_and_final_state(result):
    const = result.constant_data
    assert const["init"].shape == (2, 2) and const["final_velocity"].shape == (2, 2)
    # kept 0-based steps are 131, 134, ..., 299: the final state is the last draw
    assert result.sample_stats["step"].values[0, -1] == 300
    np.testing.assert_array_equal(const["final_theta"].values, result.posterior["theta"].values[:, -1])


def test_default_init_lies_in_the_target_box():
    init = sgsim.sample("mixture_25", "sgld", 60, n_chains=50, seed=1, step_size=0.01).constant_data["init"].values
    assert np.all((init >= -10) & (init <= 10)) and init.std() > 3


def test_recorded_config_replays_the_run(result):
    config = json.loads(result.attrs["sgsim_config"])
    sched = config["schedule"]
    assert sched["schedule"] == "cyclical" and sched["cycle_length"] == 100
    assert config["options"]["friction"] == 0.2 and config["grad_noise_cov"] == NOISY.grad_noise_cov.tolist()
    replay = sgsim.sample(
        NOISY, config["method"], sched["n_steps"], n_chains=config["n_chains"], seed=config["seed"],
        burn_in=config["burn_in"], thin=config["thin"], step_size=sched["step_size"], n_cycles=sched["n_cycles"],
        explore_fraction=sched["explore_fraction"], friction=config["options"]["friction"],
        gamma_hat=config["options"]["gamma_hat"], noise_correction=config["options"]["noise_correction"],
    )  # fmt: skip
    assert np.array_equal(replay.posterior["theta"].values, result.posterior["theta"].values)


def test_explicit_schedule_equals_the_named_options():
    sched = schedules.cyclical(0.05, 300, n_cycles=3, explore_fraction=0.3)
    a = sgsim.sample(NOISY, "sghmc", schedule=sched, n_chains=2, seed=4, friction=0.2)
    b = sgsim.sample(NOISY, "csghmc", 300, n_chains=2, seed=4, **OPTS)
    assert np.array_equal(a.posterior["theta"].values, b.posterior["theta"].values)
