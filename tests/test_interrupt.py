"""Ctrl-C stops a run within about a second; blocks change no bit; a fork does not deadlock on a compilation.

A block of steps runs in compiled code where Python sees no signal, so the driver sizes its
blocks by time (``sgsim.driver._BLOCK_SECONDS``): these tests send SIGINT to a running
``sample`` and time the KeyboardInterrupt, for chains and for a 200-particle ensemble whose
particle loops run on numba's threads (which, before the blocks were sized by time, did not
stop within 300 s); they check that the blocks' sizes change no bit of a run; and that a
process forked while another thread compiles can compile (numba's compiler lock).
"""

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numba
import numpy as np
import pytest
from numba.core.compiler_lock import global_compiler_lock

import sgsim
import sgsim._jit as jit_module
import sgsim.driver as driver

# Each case: a short run first (loads or compiles the loop), then a long one interrupted by
# SIGINT from a timer thread 0.5 s in; prints the seconds from the signal to the
# KeyboardInterrupt. The ensemble is the 200-particle SGLD+R run of the report (the loop of
# tests/test_sgld_repulsive.py's 160-particle runs: the same compiled code).
SCRIPT = textwrap.dedent(
    """
    import json, os, signal, sys, threading, time
    import sgsim

    t = sgsim.targets.mixture_3x3()
    cases = {
        "1 chain": lambda n: sgsim.sample("mixture_25", "sgld", n, step_size=0.01, seed=1, storage="final"),
        "4 chains, 2 threads": lambda n: sgsim.sample(
            "mixture_25", "sgld", n, n_chains=4, step_size=0.01, seed=1, storage="final", n_threads=2
        ),
        "200 particles, 2 threads": lambda n: sgsim.sample(
            t, "sgld_repulsive", n, n_particles=200, step_size=0.05, seed=5, storage="final", n_threads=2
        ),
    }
    # long enough never to end before the signal; short enough that counting the kept draws
    # step by step (what prepare did before) ends at once, so that the run itself is interrupted
    n_steps = {"1 chain": 10**8, "4 chains, 2 threads": 10**8, "200 particles, 2 threads": 10**6}
    latency = {}
    for name, run in cases.items():
        run(2)
        sent = []
        timer = threading.Timer(0.5, lambda: (sent.append(time.perf_counter()), os.kill(os.getpid(), signal.SIGINT)))
        timer.start()
        try:
            run(n_steps[name])
        except KeyboardInterrupt:
            latency[name] = time.perf_counter() - sent[0]
        else:
            latency[name] = None
    print(json.dumps(latency), flush=True)
    """
)


def test_ctrl_c_stops_chains_and_a_200_particle_ensemble_within_a_second():
    env = {**os.environ, "NUMBA_NUM_THREADS": "2"}
    try:
        done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as exc:  # what the ensemble did before: no exit
        pytest.fail(f"a run did not stop on SIGINT: {exc.stdout!r} {exc.stderr!r}")
    assert done.returncode == 0, done.stdout + done.stderr
    latency = json.loads(done.stdout.strip().splitlines()[-1])
    print("SIGINT latency (s):", latency)
    # blocks aim at 0.2 s; 2 s leaves room for a step of an ensemble on a loaded machine
    for name, seconds in latency.items():
        assert seconds is not None and seconds < 2.0, (name, latency)


def _everything(result) -> dict:
    return {
        f"{group}/{name}": result[group][name].values
        for group in sgsim.results.groups_of(result)
        for name in result[group].data_vars
    }


def _same_bits(a, b) -> bool:
    a, b = _everything(a), _everything(b)
    return a.keys() == b.keys() and all(
        a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes() for k in a if "sampling_time" not in k
    )


NOISY = sgsim.targets.linear_gaussian([[2.0, 0.5], [0.5, 1.0]], [0.3, -0.2], [[0.5, 0.2], [0.2, 0.3]])
CSGHMC = dict(step_size=0.02, n_cycles=3, explore_fraction=0.3, friction=0.3)
RUNS = {
    # chains on the pool's threads, Philox streams (lanes), burn-in and thinning
    "sgld": lambda: sgsim.sample(
        "mixture_25", "sgld", 300, n_chains=4, step_size=0.01, seed=3, burn_in=17, thin=3, n_threads=2
    ),  # fmt: skip
    # one chain on the calling thread, PCG64 streams (a noisy gradient), running moments (the
    # run of tests/test_storage.py)
    "csghmc": lambda: sgsim.sample(NOISY, "csghmc", 300, seed=3, storage="moments", **CSGHMC),
    # two ensembles on the pool's threads
    "svgd": lambda: sgsim.sample("mixture_25", "svgd", 40, n_chains=2, n_particles=20, step_size=0.05, seed=3),
    # one ensemble whose particle loops run on numba's threads
    "sgld_repulsive": lambda: sgsim.sample(
        sgsim.targets.mixture_3x3(), "sgld_repulsive", 5, n_particles=160, step_size=0.05, seed=5, n_threads=2
    ),  # fmt: skip
}


@pytest.mark.parametrize("name", list(RUNS))
def test_the_blocks_change_no_bit(monkeypatch, name):
    run = RUNS[name]
    blocks = []
    real_next = driver._Blocks.next

    def counted(self):
        bounds = real_next(self)
        if bounds is not None:
            blocks[-1] += 1
        return bounds

    monkeypatch.setattr(driver._Blocks, "next", counted)
    results = []
    # as sized by time; one step a block; blocks of at most 3 x (the driver's scale) steps
    for seconds, cap in ((driver._BLOCK_SECONDS, driver._BLOCK_STEPS), (0.0, driver._BLOCK_STEPS), (np.inf, 3)):
        monkeypatch.setattr(driver, "_BLOCK_SECONDS", seconds)
        monkeypatch.setattr(driver, "_BLOCK_STEPS", cap)
        blocks.append(0)
        results.append(run())
    n_steps = {"sgld": 300, "csghmc": 300, "svgd": 40, "sgld_repulsive": 5}[name]
    assert blocks[1] == n_steps and blocks[2] != n_steps, blocks  # the runs were cut differently
    assert _same_bits(results[0], results[1]) and _same_bits(results[0], results[2])


def test_the_bit_comparison_sees_another_seed():
    # the negative control of the test above
    assert not _same_bits(RUNS["svgd"](), sgsim.sample("mixture_25", "svgd", 40, n_chains=2, n_particles=20,
                                                       step_size=0.05, seed=4))  # fmt: skip


def test_the_first_block_is_one_step_and_later_ones_follow_the_time_they_take():
    blocks = driver._Blocks(0, 10**6, 40_000)
    assert blocks.next() == (0, 1)
    blocks.took(1, 1.0)  # a step of a second (a compilation, or a large ensemble): one step again
    assert blocks.next() == (1, 2)
    blocks.took(1, 1e-6)  # quick steps: the next block grows, by at most _BLOCK_GROWTH
    assert blocks.next() == (2, 2 + driver._BLOCK_GROWTH)
    for _ in range(10):
        blocks.took(blocks.size, 1e-6)
    k0, k1 = blocks.next()
    assert k1 - k0 == 40_000  # the cap
    blocks.took(40_000, 4.0)  # 10^4 steps a second: blocks of _BLOCK_SECONDS
    k0, k1 = blocks.next()
    assert k1 - k0 == int(driver._BLOCK_SECONDS * 10_000)
    # a run that knows the rate from an earlier one starts there, within the cap
    assert driver._Blocks(0, 10**6, 40_000, first=2_000).next() == (0, 2_000)
    assert driver._Blocks(0, 10**6, 40_000, first=10**9).next() == (0, 40_000)


def test_a_second_run_of_a_loop_starts_with_a_block_of_the_rate_it_measured(monkeypatch):
    sizes = []
    real_init = driver._Blocks.__init__

    def recorded(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        sizes.append(self.size)

    monkeypatch.setattr(driver._Blocks, "__init__", recorded)
    monkeypatch.setattr(driver, "_RATES", {})
    kw = dict(step_size=0.01, n_chains=3, seed=1)
    first = sgsim.sample("mixture_3x3", "sgld", 2000, **kw)
    second = sgsim.sample("mixture_3x3", "sgld", 2000, **kw)
    # the first run knew no rate: one step; the second starts with 0.2 s of steps at the rate the
    # first one's last block took (thousands: the whole run), and gives the same bits
    assert sizes[0] == 1 and sizes[1] >= 2000, sizes
    assert _same_bits(first, second)
    # control: without the remembered rate the second run starts with one step again
    driver._RATES.clear()
    sgsim.sample("mixture_3x3", "sgld", 2000, **kw)
    assert sizes[2] == 1


# ----------------------------------------------------------------------------- fork during a compilation


def _fork_while_compiling(hold_s: float, wait_limit_s: float):
    """Fork while another thread holds numba's compiler lock (as a compilation does) for ``hold_s``.

    The child compiles a new function and exits 0, or 5 on an error naming the fork; returns
    (the child's exit code or None if it still hung after ``wait_limit_s``, the fork's duration,
    the warnings the parent saw).
    """
    held, release = threading.Event(), threading.Event()

    def compile_slowly():
        with global_compiler_lock:
            held.set()
            release.wait(hold_s)

    thread = threading.Thread(target=compile_slowly)
    thread.start()
    held.wait()
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pid = os.fork()
        if pid == 0:  # the child: never returns to pytest
            code = 1
            try:
                f = numba.njit(lambda x: x + 1)
                code = 0 if f(1) == 2 else 3
            except RuntimeError as exc:
                code = 5 if "forked" in str(exc) else 4
            finally:
                os._exit(code)
    took = time.perf_counter() - t0
    release.set()
    thread.join()
    deadline = time.perf_counter() + wait_limit_s
    status = None
    while time.perf_counter() < deadline:
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(raw)
            break
        time.sleep(0.02)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    return status, took, [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_fork_waits_for_a_compilation_and_the_child_compiles():
    status, took, _ = _fork_while_compiling(hold_s=0.5, wait_limit_s=60)
    assert status == 0  # before the guard: the child's compilation waited for ever
    assert took >= 0.3  # the fork waited for the lock


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_compilation_longer_than_the_wait_gives_the_child_an_error_not_a_hang(monkeypatch):
    monkeypatch.setattr(jit_module, "FORK_WAIT_S", 0.05)
    status, took, said = _fork_while_compiling(hold_s=5.0, wait_limit_s=60)
    assert status == 5 and took < 1.0
    assert any("spawn" in text for text in said), said


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_without_the_guard_the_child_hangs(monkeypatch):
    # the negative control: the hazard is real (the child is killed after 3 s)
    monkeypatch.setattr(jit_module, "_compiler_lock", lambda: None)
    status, _, _ = _fork_while_compiling(hold_s=0.2, wait_limit_s=3)
    assert status is None
