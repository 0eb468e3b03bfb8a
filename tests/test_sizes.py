"""Sizes and counts checked before any allocation or loop; no per-step work where nothing is kept per step.

``prepare`` counts the kept draws in closed form for sgsim's schedules (it used to visit every
step, so that ``n_steps=10**30`` with ``storage="final"`` never returned), refuses a run longer
than the compiled loops can count, and ``sample`` refuses, before allocating anything, a run
whose buffers and result would not fit in memory, naming the parameter and the bytes.
"""

import contextlib
import gc
import signal
import threading
import tracemalloc

import numpy as np
import pytest

import sgsim
import sgsim._validate as validate
from sgsim import schedules
from sgsim._validate import ParameterError
from sgsim.driver import _count_kept, _memory_parts, _prepare, prepare


@contextlib.contextmanager
def within(seconds: float):
    """Raise TimeoutError if the block runs longer than ``seconds`` (the hangs these tests catch)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("SIGALRM reaches the main thread only")

    def on_alarm(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def named(info, parameter):
    assert info.value.parameter == parameter, f"{info.value!r} names {info.value.parameter!r}"


# ----------------------------------------------------------------------------- counts and steps


def test_a_final_run_of_1e30_steps_is_refused_at_once_naming_n_steps():
    with within(5), pytest.raises(ParameterError, match=r"\[1, 4611686018427387903\]") as info:
        prepare("mixture_25", "sgld", 10**30, step_size=0.01, storage="final")
    named(info, "n_steps")
    # the largest count the loops hold (normal k d + i of a 2-dimensional target in int64) passes;
    # one more does not
    most = (2**63 - 1) // 2
    with within(5):
        run, steps = prepare("mixture_25", "sgld", most, step_size=0.01, storage="final")
    assert run.n_draws == 1 and steps.tolist() == [most - 1]
    with pytest.raises(ParameterError) as info:
        prepare("mixture_25", "sgld", most + 1, step_size=0.01, storage="final")
    named(info, "n_steps")


@pytest.mark.parametrize("storage", ["final", "moments"])
def test_counting_the_kept_draws_of_a_long_run_does_no_per_step_work(storage):
    # 2.8 x 10^15 steps in 7 cycles (the last 5 steps short): the draws a moments run averages
    n, m, beta, burn_in, thin = 28 * 10**14 - 5, 7, 0.25, 12_345, 3
    with within(2):
        run = _prepare("mixture_25", "csgld", n, step_size=0.01, n_cycles=m, explore_fraction=beta,
                       burn_in=burn_in, thin=thin, storage=storage)  # fmt: skip
    length = 4 * 10**14  # ceil(n / m)
    # the exploration steps of a cycle, as the schedule counts them (beta L less its float slack)
    first = schedules.exploration_steps(length, beta)
    assert burn_in < first
    collected = 6 * (length - first) + (n - 6 * length - first)
    assert run.n_draws == (1 if storage == "final" else -(-collected // thin))


def _own_formula(n):
    # a formula schedule of one's own that calls itself "cyclical": counted block by block
    def values(k0, k1):
        k = np.arange(k0, k1)
        return schedules.ScheduleBlock(
            k0, np.full(k1 - k0, 0.01), np.ones(k1 - k0), np.ones(k1 - k0, np.int8), np.zeros(k1 - k0, np.int32),
            k % 3 == 1,
        )  # fmt: skip

    fake = {"schedule": "cyclical", "cycle_length": 5, "explore_fraction": 0.0, "skip_per_cycle": 0, "n_steps": n}
    return schedules.Schedule.from_formula(n, values, fake)


def _schedules():
    yield schedules.constant(0.1, 1000)
    yield schedules.polynomial_decay(0.1, 0.55, 1000, hold=30)
    for n, m, beta, skip in [(1000, 3, 0.25, 0), (1000, 7, 0.5, 10), (999, 10, 0.0, 3), (50_000, 30, 0.25, 0),
                             (1000, 1, 0.9, 0), (1001, 4, 0.3, 200), (17, 17, 0.5, 0)]:  # fmt: skip
        yield schedules.cyclical(0.1, n, n_cycles=m, explore_fraction=beta, skip_per_cycle=skip)
    for n, window, warmup in [(1000, 7, 0), (1000, 7, 100), (1000, 1000, 0), (1000, 10, 985), (333, 1, 5)]:
        yield schedules.averaging_windows(0.1, n, window=window, warmup=warmup)
    rng = np.random.default_rng(0)
    yield schedules.Schedule(np.full(500, 0.1), 1.0, collect=rng.random(500) < 0.3)
    yield _own_formula(1000)


@pytest.mark.parametrize("schedule", list(_schedules()), ids=lambda s: s.description["schedule"])
def test_the_closed_form_counts_equal_the_kept_steps_listed_one_by_one(schedule):
    n = schedule.n_steps
    for burn_in in sorted({0, 1, 5, 99, n // 3, n // 2, n - 1}):
        for thin in (1, 2, 7, n, 2**62):
            assert _count_kept(schedule, burn_in, thin) == schedule.kept_steps(burn_in, thin).size, (burn_in, thin)


def test_the_count_of_an_own_formula_is_not_read_off_its_description():
    # the control of the closed forms: the description's cycle would give 1000 * 4 / 5 = 800
    s = _own_formula(1000)
    assert _count_kept(s, 0, 1) == s.kept_steps(0, 1).size == 333


def test_thin_and_burn_in_beyond_int64_are_named():
    for name in ("thin", "burn_in"):
        with pytest.raises(ParameterError, match=r"9223372036854775807") as info:  # was a raw OverflowError
            sgsim.sample("mixture_25", "sgld", 10, step_size=0.01, **{name: 2**64})
        named(info, name)
    # the largest thin is accepted: the first collected draw only
    r = sgsim.sample("mixture_25", "sgld", 10, step_size=0.01, thin=2**63 - 1, seed=0)
    assert r.posterior["theta"].shape == (1, 1, 2)


# ----------------------------------------------------------------------------- memory


def _peak_of(call) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        call()
    except ParameterError:
        pass
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


@pytest.mark.parametrize(
    "kwargs, parameter",
    [
        (dict(n_chains=2**40, storage="final"), "n_chains"),  # 16 TiB of states
        (dict(n_chains=2**31, storage="moments"), "n_chains"),  # the running moments
        (dict(n_chains=64, storage="draws", n_steps=10**8), "thin"),  # the draws
    ],
)
def test_a_run_too_large_for_memory_is_refused_before_any_allocation(kwargs, parameter):
    n_steps = kwargs.pop("n_steps", 1000)
    with within(10), pytest.raises(ParameterError, match="GiB") as info:
        sgsim.sample("mixture_25", "sgld", n_steps, step_size=0.01, seed=0, **kwargs)
    named(info, parameter)
    assert "n_chains = " in str(info.value)
    # nothing was allocated: a few MB of Python objects at most
    peak = _peak_of(lambda: sgsim.sample("mixture_25", "sgld", n_steps, step_size=0.01, seed=0, **kwargs))
    assert peak < 8 * 2**20, peak


def test_an_ensemble_whose_pair_terms_cannot_fit_names_n_particles():
    with within(10), pytest.raises(ParameterError, match="pair terms") as info:
        sgsim.sample("mixture_25", "svgd", 10, n_particles=10**7, step_size=0.01, seed=0, storage="final")
    named(info, "n_particles")


def test_prepare_refuses_to_list_the_kept_steps_of_one_chain_that_cannot_fit():
    with within(5), pytest.raises(ParameterError, match="one chain") as info:
        prepare("mixture_25", "sgld", 10**11, step_size=0.01)
    named(info, "thin")


@pytest.mark.parametrize(
    "size, kwargs",
    [
        ("n_steps", dict(n_steps=50_000, n_chains=4)),  # the draws and their records
        ("n_steps", dict(n_steps=10_000, n_chains=4, log_density=True)),  # with the densities' copy
        ("n_chains", dict(n_steps=10, n_chains=25_000, storage="final")),  # the chains' buffers
        ("n_chains", dict(n_steps=100, n_chains=2_500, storage="moments")),  # the running moments
    ],
)
def test_the_memory_counted_covers_what_a_run_holds_at_its_peak(size, kwargs):
    # what a run holds beyond a fixed overhead (ArviZ's objects), from its peak at two sizes x and 3 x
    lp = kwargs.pop("log_density", False)
    storage = kwargs.pop("storage", "draws")
    peaks, counted = [], []
    for scale in (1, 3):
        kw = {**kwargs, size: kwargs[size] * scale}
        n_steps, n_chains = kw["n_steps"], kw["n_chains"]

        def call(n_steps=n_steps, n_chains=n_chains):
            return sgsim.sample("standard_gaussian", "sgld", n_steps, n_chains=n_chains, step_size=0.05, seed=0,
                                log_density=lp, storage=storage)  # fmt: skip

        call()  # compiled, loaded
        peaks.append(min(_peak_of(call), _peak_of(call)))  # the quieter of two
        run = _prepare("standard_gaussian", "sgld", n_steps, step_size=0.05, storage=storage)
        counted.append(sum(_memory_parts(run, n_chains, 2, lp).values()))
    grew, counted_growth = peaks[1] - peaks[0], counted[1] - counted[0]
    # what the run's buffers grew by (tracemalloc sees NumPy's), less 10% for the noise of the
    # peak (other threads' allocations), and not many times more
    print(f"{size}: counted / grown = {counted_growth / grew:.3f}")
    assert 0.9 * grew <= counted_growth <= 2.5 * grew, (grew, counted_growth)


def test_the_limit_is_80_percent_of_the_memory_and_log_density_counts(monkeypatch):
    run = _prepare("standard_gaussian", "sgld", 20_000, step_size=0.05)
    without = sum(_memory_parts(run, 4, 2, False).values())
    with_lp = sum(_memory_parts(run, 4, 2, True).values())
    assert with_lp > without
    # a machine whose 80% lies between the two: the run without densities passes, with them not
    monkeypatch.setattr(validate, "memory_bytes", lambda: (without + with_lp) / 2 / 0.8)
    sgsim.sample("standard_gaussian", "sgld", 20_000, n_chains=4, step_size=0.05, seed=0)
    with pytest.raises(ParameterError, match="draws") as info:
        sgsim.sample("standard_gaussian", "sgld", 20_000, n_chains=4, step_size=0.05, seed=0, log_density=True)
    named(info, "thin")
