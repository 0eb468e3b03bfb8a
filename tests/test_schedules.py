"""Step-size, temperature and stage sequences (docs: theory-schedules): deterministic checks."""

import math

import numpy as np
import pytest

from sgsim import schedules, theory
from sgsim.schedules import EXPLORATION, SAMPLING, cyclical, exploration_steps

# (alpha_0, M, K) with K = M * L_c and L_c >= 2
FULL_CYCLES = [(0.1, 4, 400), (0.09, 30, 600), (0.5, 3, 9), (1.0, 7, 14), (0.3, 1, 1000), (0.05, 25, 50000)]


@pytest.mark.parametrize("alpha0, m, k", FULL_CYCLES)
def test_cyclical_starts_each_cycle_at_alpha0_and_is_periodic(alpha0, m, k):
    alpha = cyclical(alpha0, k, n_cycles=m).step_size
    length = k // m
    assert alpha[0] == alpha0
    assert np.all(alpha[::length] == alpha0)
    np.testing.assert_array_equal(alpha[length:], alpha[:-length])  # alpha_{k + L} = alpha_k
    assert np.all(np.diff(alpha.reshape(m, length), axis=1) < 0)  # decreasing within a cycle


@pytest.mark.parametrize("alpha0, m, k", FULL_CYCLES)
def test_cyclical_last_step_of_a_cycle(alpha0, m, k):
    length = k // m
    last = cyclical(alpha0, k, n_cycles=m).step_size[length - 1]
    # (alpha_0/2)(cos(pi (L-1)/L) + 1) = alpha_0 sin^2(pi / (2L)) ~ alpha_0 pi^2 / (4 L^2)
    assert last == pytest.approx(alpha0 * math.sin(math.pi / (2 * length)) ** 2, rel=1e-12)
    assert last == pytest.approx(alpha0 * math.pi**2 / (4 * length**2), rel=math.pi**2 / (12 * length**2) + 1e-12)


@pytest.mark.parametrize("alpha0, m, k", FULL_CYCLES)
def test_exact_sums_of_the_cyclical_schedule(alpha0, m, k):
    alpha = cyclical(alpha0, k, n_cycles=m).step_size
    assert theory.cyclical_sum(alpha0, m, k) == pytest.approx(np.sum(alpha), rel=1e-12)
    assert theory.cyclical_sum_squares(alpha0, m, k) == pytest.approx(np.sum(alpha**2), rel=1e-12)
    # the paper's K alpha_0 / 2 and 3 K alpha_0^2 / 8 drop alpha_0 M / 2 and alpha_0^2 M / 2 (docs: erratum-step-sums)
    assert np.sum(alpha) - k * alpha0 / 2 == pytest.approx(alpha0 * m / 2, rel=1e-9)


def test_exact_sums_with_one_step_per_cycle():
    alpha0, k = 0.2, 12
    alpha = cyclical(alpha0, k, n_cycles=k).step_size
    np.testing.assert_array_equal(alpha, alpha0)  # L_c = 1: constant
    assert theory.cyclical_sum(alpha0, k, k) == pytest.approx(k * alpha0, rel=1e-12)
    assert theory.cyclical_sum_squares(alpha0, k, k) == pytest.approx(np.sum(alpha**2), rel=1e-12)
    assert alpha0**2 * (3 * k / 8 + k / 2) != pytest.approx(np.sum(alpha**2), rel=0.1)  # the L >= 2 formula fails


def test_exact_sums_need_full_cycles():
    with pytest.raises(ValueError, match="multiple of n_cycles"):
        theory.cyclical_sum(0.1, 3, 10)
    with pytest.raises(ValueError, match="multiple of n_cycles"):
        theory.cyclical_sum_squares(0.1, 3, 10)


@pytest.mark.parametrize(
    "length, beta, n_explore",
    [(100, 0.55, 55), (100, 0.94, 94), (100, 0.8, 80), (10, 0.3, 3), (7, 0.5, 4), (50, 0.25, 13), (10, 0.0, 0)],
)
def test_stage_counts_per_cycle(length, beta, n_explore):
    assert exploration_steps(length, beta) == n_explore
    m = 3
    sched = cyclical(0.1, m * length, n_cycles=m, explore_fraction=beta)
    stage = sched.stage.reshape(m, length)
    np.testing.assert_array_equal((stage == EXPLORATION).sum(1), n_explore)
    np.testing.assert_array_equal((stage == SAMPLING).sum(1), length - n_explore)
    assert np.all(stage[:, :n_explore] == EXPLORATION)  # exploration comes first, r(k) < beta
    np.testing.assert_array_equal(sched.cycle, np.repeat(np.arange(m), length))


def test_exploration_count_is_exact_where_floating_point_is_not():
    assert math.ceil(0.55 * 100) == 56  # the naive rule is off by one here (docs: theory-schedules)
    assert exploration_steps(100, 0.55) == 55
    assert exploration_steps(100, 0.56) == 56
    assert exploration_steps(3, 0.999) == 3


def test_temperature_is_exactly_zero_on_exploration_steps():
    sched = cyclical(0.1, 400, n_cycles=4, explore_fraction=0.3, temperature=1.5)
    assert np.all(sched.temperature[sched.stage == EXPLORATION] == 0.0)
    assert np.all(sched.temperature[sched.stage == SAMPLING] == 1.5)
    assert np.count_nonzero(sched.stage == EXPLORATION) == 4 * 30


@pytest.mark.parametrize("skip", [0, 5])
def test_collect_only_sampling_steps_after_the_skip(skip):
    length, beta = 40, 0.25
    sched = cyclical(0.1, 3 * length, n_cycles=3, explore_fraction=beta, skip_per_cycle=skip)
    pos = np.arange(sched.n_steps) % length
    expected = pos >= exploration_steps(length, beta) + skip
    np.testing.assert_array_equal(sched.collect, expected)
    assert not np.any(sched.collect & (sched.stage == EXPLORATION))


def test_truncated_last_cycle_of_the_25_gaussian_run():
    sched = cyclical(0.09, 50_000, n_cycles=30, explore_fraction=0.25)
    length = schedules.cycle_length(50_000, 30)
    assert length == 1667
    assert sched.n_cycles == 30
    assert np.count_nonzero(sched.cycle == 29) == 50_000 - 29 * 1667
    assert sched.step_size[29 * 1667] == 0.09


def test_fewer_cycles_than_asked_warns():
    with pytest.warns(UserWarning, match="leaves 3 cycles"):
        sched = cyclical(0.1, 9, n_cycles=4)
    assert sched.n_cycles == 3


def test_polynomial_decay_with_hold_is_the_reference_code_baseline():
    sched = schedules.polynomial_decay(0.043, 0.55, 2000, hold=500)
    alpha = sched.step_size
    assert np.all(alpha[:500] == 0.043)
    t = np.arange(501, 2001)  # 0.043 (t - 500)^(-0.55) after the first 500 iterations
    np.testing.assert_allclose(alpha[500:], 0.043 * (t - 500.0) ** -0.55, rtol=1e-14)
    assert np.all(sched.temperature == 1.0) and np.all(sched.collect) and np.all(sched.stage == SAMPLING)


def test_polynomial_decay_without_hold():
    k = np.arange(1, 1001)
    np.testing.assert_allclose(schedules.polynomial_decay(0.05, 0.55, 1000).step_size, 0.05 * k**-0.55, rtol=1e-14)
    np.testing.assert_allclose(
        schedules.polynomial_decay(0.5, 1.0, 1000, b=10.0).step_size, 0.5 / (10.0 + k), rtol=1e-14
    )


def test_constant_schedule():
    sched = schedules.constant(0.3, 50, temperature=2.0)
    assert np.all(sched.step_size == 0.3) and np.all(sched.temperature == 2.0)
    assert np.all(sched.collect) and sched.n_cycles == 1 and sched.n_steps == 50


def test_schedule_arrays_are_read_only():
    sched = cyclical(0.1, 20, n_cycles=2)
    with pytest.raises(ValueError, match="read-only"):
        sched.step_size[0] = 1.0


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: cyclical(0.0, 100, n_cycles=4), "step_size"),
        (lambda: cyclical(-0.1, 100, n_cycles=4), "step_size"),
        (lambda: schedules.constant(0.0, 10), "step_size"),
        (lambda: cyclical(0.1, 100, n_cycles=4, explore_fraction=1.0), "explore_fraction"),
        (lambda: cyclical(0.1, 100, n_cycles=4, explore_fraction=-0.1), "explore_fraction"),
        (lambda: cyclical(0.1, 100, n_cycles=101), "n_cycles"),
        (lambda: cyclical(0.1, 100, n_cycles=0), "n_cycles"),
        (lambda: cyclical(0.1, 0, n_cycles=1), "n_steps"),
        (lambda: schedules.constant(0.1, 0), "n_steps"),
        (lambda: schedules.polynomial_decay(0.05, 1.5, 100), "gamma"),
        (lambda: schedules.polynomial_decay(0.05, -0.1, 100), "gamma"),
        (lambda: schedules.polynomial_decay(0.0, 0.55, 100), "^a must"),
        (lambda: schedules.polynomial_decay(0.05, 0.55, 100, hold=-1), "hold"),
        (lambda: cyclical(0.1, 100, n_cycles=4, temperature=-1.0), "temperature"),
        (lambda: cyclical(0.1, 100, n_cycles=4, skip_per_cycle=-1), "skip_per_cycle"),
    ],
)
def test_bad_input_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_non_integer_counts_are_type_errors():
    with pytest.raises(TypeError, match="n_steps"):
        schedules.constant(0.1, 10.5)
    with pytest.raises(TypeError, match="n_cycles"):
        cyclical(0.1, 10, n_cycles=2.0)


def test_constant_and_cyclical_share_one_argument_order():
    # Step size first, n_steps second, everything else by keyword: the same two positional
    # parameters in every constructor that has a single step size.
    import inspect

    for ctor in (schedules.constant, cyclical):
        params = inspect.signature(ctor).parameters.values()
        positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
        assert positional == ["step_size", "n_steps"], ctor.__name__
    # The old order cyclical(step_size, n_cycles, n_steps) is refused, never reinterpreted.
    with pytest.raises(TypeError):
        cyclical(0.1, 4, 100)  # type: ignore[misc]
    assert cyclical(0.1, 100, n_cycles=4).n_cycles == 4
