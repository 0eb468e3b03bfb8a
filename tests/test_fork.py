"""sgsim inside processes started by fork: no hang, no abort, the same bits."""

import os
import subprocess
import sys
import textwrap

import pytest

# The parent runs a 200-particle ensemble on 2 threads (a parallel step), then forks; the
# child runs the same ensemble. ``guard`` = 0 turns sgsim's fork handling off in the child,
# the negative control: the child must then be aborted by the OpenMP runtime (or hang).
SCRIPT = textwrap.dedent(
    """
    import os, sys, warnings
    import numpy as np
    import sgsim, sgsim.driver as s

    def run():
        r = sgsim.sample("mixture_25", "svgd", 30, n_particles=200, step_size=0.05, seed=4,
                         storage="final", n_threads=2)
        return r.constant_data["final_theta"].values

    parent = run()
    print("layer", s._openmp_layer(), flush=True)
    pid = os.fork()
    if pid == 0:
        if sys.argv[1] == "0":
            s._FORK["forked_after_openmp"] = False
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            child = run()
        said = any("forked" in str(w.message) for w in caught)
        os._exit(0 if np.array_equal(child, parent) and said == s._openmp_layer() else 3)
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status), flush=True)
    """
)


def _run(guard: str):
    env = {**os.environ, "NUMBA_NUM_THREADS": "2"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, guard], env=env, capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        return None, "timeout"
    return done, done.stdout + done.stderr


def test_a_forked_child_runs_a_parallel_ensemble_with_the_same_bits():
    done, out = _run("1")
    assert done is not None and done.returncode == 0, out
    assert "child 0" in out, out


def test_without_the_guard_the_forked_child_is_aborted():
    done, out = _run("0")
    if done is not None and "layer False" in out:
        pytest.skip("numba's threading layer here is not OpenMP, which forks safely")
    # the hazard the guard exists for: numba's OpenMP layer kills (or hangs) the child
    assert done is None or "child 0" not in out, out
