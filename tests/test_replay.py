"""Runs as data: every result records its spec, and sgsim.replay reruns it bit for bit."""

import json
from dataclasses import replace

import numpy as np
import pytest

import sgsim
from sgsim import schedules, targets
from sgsim.io import read_result, write_result
from sgsim.results import groups_of
from sgsim.targets.gaussian import linear_gaussian_grad_u, linear_gaussian_log_density


def same_bits(a, b):
    groups = [g for g in groups_of(a) if g != "run_spec"]
    assert groups == [g for g in groups_of(b) if g != "run_spec"]
    for group in groups:
        for name, var in a[group].data_vars.items():
            assert np.array_equal(var.values, b[group][name].values, equal_nan=True), (group, name)


def round_trip(result, tmp_path, **kwargs):
    path = write_result(result, tmp_path / "result.nc")
    again = sgsim.replay(path, **kwargs)
    same_bits(read_result(path), again)
    return again


def test_replay_of_a_built_in_target(tmp_path):
    result = sgsim.sample("mixture_25", "csgld", 500, n_chains=3, seed=None, step_size=0.05, n_cycles=2, thin=3)
    again = round_trip(result, tmp_path)
    assert again.attrs["seed"] == result.attrs["seed"]


def test_replay_of_a_data_target_names_the_data_set_only(tmp_path):
    target = targets.logistic_regression(dataset="heart", batch_size=16)
    result = sgsim.sample(target, "sghmc", 300, n_chains=2, seed=4, step_size=1e-3, friction=0.2, burn_in=100)
    spec = json.loads(result.attrs["sgsim_config"])
    assert spec["target"]["factory"] == "logistic_regression" and spec["target"]["kwargs"]["dataset"] == "heart"
    assert spec["target"]["kwargs"]["X"] is None  # the data are not copied into the result
    round_trip(result, tmp_path)


def test_replay_of_a_linear_regression_names_the_data_set_only(tmp_path):
    target = targets.linear_regression(dataset="fair", batch_size=16, replace=True)
    result = sgsim.sample(target, "sgld", 200, n_chains=2, seed=5, step_size=1e-5)
    spec = json.loads(result.attrs["sgsim_config"])
    assert spec["target"]["factory"] == "linear_regression" and spec["target"]["kwargs"]["dataset"] == "fair"
    assert spec["target"]["kwargs"]["X"] is None and spec["target"]["kwargs"]["y"] is None
    round_trip(result, tmp_path)


def test_a_softmax_regression_is_rebuilt_from_its_data_set_name():
    # what replay does with a run's target (the sampling round trip is the same as above; the
    # softmax kernels are left uncompiled here to keep the test fast)
    target = targets.softmax_regression(dataset="optdigits", batch_size=16)
    assert target.spec.kwargs["dataset"] == "optdigits" and target.spec.kwargs["X"] is None
    again = targets.build(target.spec)
    assert again.fingerprint() == target.fingerprint() and again.dim == 630
    # negative control: another batch size is another target
    assert targets.build(replace(target.spec, kwargs={**target.spec.kwargs, "batch_size": 17})).fingerprint() != (
        target.fingerprint()
    )


def test_replay_with_modified_targets_explicit_init_and_moments(tmp_path):
    target = targets.linear_gaussian([[2.0, 0.5], [0.5, 1.0]], [0.3, -0.2]).with_gradient_noise(0.3)
    target = target.with_init_box(-2.0, [1.0, 3.0])
    init = np.array([[0.1, 0.2], [0.3, -0.4]])
    result = sgsim.sample(
        target, "sghmc", 400, n_chains=2, seed=2, init=init, init_velocity=[0.01, 0.0], step_size=0.01,
        noise_correction=True, storage="moments",
    )  # fmt: skip
    # arrays of the spec are stored as arrays, referenced from the JSON
    assert "run_spec" in groups_of(result)
    assert np.array_equal(result["run_spec"]["spec.init"].values, init)
    assert json.loads(result.attrs["sgsim_config"])["init"] == {"__array__": "spec.init"}
    round_trip(result, tmp_path)


def test_replay_of_a_schedule_built_from_arrays(tmp_path):
    full = schedules.cyclical(0.05, 300, n_cycles=3, explore_fraction=0.3)
    b = full.block(0, 230)
    sched = schedules.Schedule(b.step_size, b.temperature, b.stage, b.cycle, b.collect, {"schedule": "truncated"})
    result = sgsim.sample("mixture_3x3", "sgld", schedule=sched, n_chains=2, seed=6)
    assert "spec.schedule_arrays.step_size" in result["run_spec"].data_vars
    round_trip(result, tmp_path)


def test_the_spec_holds_the_schedules_arrays_and_its_own_copy_of_the_callers():
    # a schedule's arrays are read-only and its own: the record takes them as they are; an array the
    # caller may still write to (init) is copied, so that writing to it later changes no record
    steps = np.linspace(0.01, 0.02, 50)
    sched = schedules.Schedule(steps, np.ones(50))
    init = np.zeros((2, 2))
    result = sgsim.sample("mixture_3x3", "sgld", schedule=sched, n_chains=2, seed=6, init=init)
    spec = result["run_spec"]
    assert np.shares_memory(spec["spec.schedule_arrays.step_size"].values, sched.arrays()["step_size"])
    assert not np.shares_memory(spec["spec.init"].values, init)
    init[0, 0] = 1.0
    assert spec["spec.init"].values[0, 0] == 0.0
    # negative control: the caller's step sizes were copied by the schedule, so writing to them
    # changes neither the schedule nor the record
    steps[0] = 1.0
    assert spec["spec.schedule_arrays.step_size"].values[0] == 0.01


def test_replay_of_an_ensemble(tmp_path):
    result = sgsim.sample("mixture_3x3", "svgd", 60, n_chains=2, n_particles=7, step_size=0.05, seed=3, bandwidth=0.8)
    round_trip(result, tmp_path)


def hand_built(shift=0.0):
    prec = np.eye(2)
    return targets.Target(
        name="hand", dim=2, grad_u=linear_gaussian_grad_u, log_density_fn=linear_gaussian_log_density,
        params=(prec, np.full(2, shift), np.full(2, shift), 0.0), grad_noise_cov=np.zeros((2, 2)),
        init_low=-np.ones(2), init_high=np.ones(2),
    )  # fmt: skip


def test_a_hand_built_target_needs_to_be_given(tmp_path):
    result = sgsim.sample(hand_built(), "sgld", 50, seed=1, step_size=0.1)
    path = write_result(result, tmp_path / "r.nc")
    with pytest.raises(ValueError, match="built by hand") as info:
        sgsim.replay(path)
    assert info.value.parameter == "target"
    same_bits(read_result(path), sgsim.replay(path, target=hand_built()))
    # negative control: another target is refused, not silently sampled
    with pytest.raises(ValueError, match="the target given is not the one sampled"):
        sgsim.replay(path, target=hand_built(shift=0.5))


def test_a_target_changed_after_construction_is_detected(tmp_path):
    target = targets.mixture_25()
    moved = replace(target, init_low=np.full(2, -1.0), init_high=np.full(2, 1.0))  # the spec still says [-10, 10]
    result = sgsim.sample(moved, "sgld", 50, seed=1, step_size=0.01)
    with pytest.raises(ValueError, match="the target rebuilt from the result is not the one sampled"):
        sgsim.replay(write_result(result, tmp_path / "r.nc"))


def test_a_run_beyond_the_stability_limit_replays(tmp_path):
    # SGLD on the standard Gaussian is stable while step_size < 2 / L = 2. A step of 2.02 on every
    # step is refused by default, so the run is recorded with step_check="ignore" (the run the issue
    # measured; 60 steps grow the state by 1.02^60 ~ 3.3, finite, and no divergence bound stops it)
    kw = dict(n_chains=2, seed=0, step_size=2.02, divergence_bound=None)
    with pytest.raises(ValueError, match="step_size"):
        sgsim.sample("standard_gaussian", "sgld", 60, **kw)  # the control: refused when recorded unchecked
    result = sgsim.sample("standard_gaussian", "sgld", 60, step_check="ignore", **kw)
    # replay reruns what was recorded, without the recording call's stability check (it used to
    # refuse the run, the check being repeated with its default "raise")
    round_trip(result, tmp_path)
