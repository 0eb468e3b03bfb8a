"""Loops cached on disk: a second process loads the loop instead of compiling it."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sampler_modules import scaled_sgld

import sgsim
from sgsim import targets
from sgsim.integrators import get_method
from sgsim.integrators._kernel_cache import cached_chain_loop

TESTS = Path(__file__).resolve().parent

RUN = """
import hashlib, json, sys
import sgsim
target, method, kwargs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if ":" in target or kwargs:
    target = sgsim.targets.get(target, **kwargs)
# SVGD with 200 particles on 2 threads runs its parallel step
more = dict(n_particles=200, n_threads=2) if method == "svgd" else {}
if method == "sgld_repulsive_rb":
    more = dict(n_particles=6, bandwidth=1.0, batch_size=3)
r = sgsim.sample(target, method, 50, n_chains=3, step_size=0.01, seed=4, **more)
print("bits", hashlib.sha256(r.posterior["theta"].values.tobytes()).hexdigest())
"""


def run(target, cache, method="sgld", kwargs=None, **env):
    """Sample in a fresh process on the loop cache ``cache``: a hash of the draws, and numba's
    cache messages about generated loop modules (``data saved``: compiled; ``data loaded``).
    ``kwargs`` are the target factory's arguments.
    """
    env = {**os.environ, "SGSIM_CACHE_DIR": str(cache), "NUMBA_DEBUG_CACHE": "1", "NUMBA_NUM_THREADS": "2", **env}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    args = [sys.executable, "-c", RUN, target, method, json.dumps(kwargs or {})]
    proc = subprocess.run(args, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    bits = [line for line in proc.stdout.splitlines() if line.startswith("bits")]
    loop_lines = [line for line in proc.stdout.splitlines() if "sgsim_loop_" in line]
    return bits[0], loop_lines


@pytest.mark.parametrize("method", ["sgld", "svgd"])
def test_a_second_process_loads_the_loop_from_disk(tmp_path, method):
    targets_ = ("mixture_25", "user_banana:banana") if method == "sgld" else ("mixture_25",)
    for target in targets_:
        cache = tmp_path / target.replace(":", "_")
        first_bits, first = run(target, cache, method)
        assert any("data saved" in line for line in first), first
        second_bits, second = run(target, cache, method)
        assert any("data loaded" in line for line in second) and not any("data saved" in line for line in second)
        assert second_bits == first_bits  # the cached machine code gives the same bits
    # negative control: with the disk cache off nothing is generated, and the bits are the same
    off = tmp_path / "off"
    bits, lines = run("mixture_25", off, method, SGSIM_JIT_CACHE="0")
    assert lines == [] and not list(off.glob("sgsim_loop_*.py"))
    assert bits == run("mixture_25", tmp_path / "mixture_25", method)[0]


@pytest.mark.parametrize(
    ("target", "kwargs", "method"),
    [
        # a data target's gradients are its family's module-level functions (sgsim.targets.regression)
        ("logistic_regression", {"dataset": "heart", "batch_size": 10}, "sgld"),
        # the random-batch ensemble step reads a tuple of jitters, written into the generated module
        ("mixture_25", {}, "sgld_repulsive_rb"),
    ],
)
def test_data_targets_and_the_random_batch_step_load_their_loop_from_disk(tmp_path, target, kwargs, method):
    first_bits, first = run(target, tmp_path, method, kwargs)
    assert any("data saved" in line for line in first), first
    second_bits, second = run(target, tmp_path, method, kwargs)
    assert any("data loaded" in line for line in second) and not any("data saved" in line for line in second)
    assert second_bits == first_bits


def test_a_gradient_that_cannot_be_imported_is_compiled_in_memory():
    base = targets.standard_gaussian(2)

    @sgsim.jit
    def local_grad(theta, params, out):  # a closure's function: no module attribute names it
        for i in range(theta.shape[0]):
            out[i] = theta[i]

    move, update = get_method("sgld").algorithm.step
    assert cached_chain_loop(move, update, local_grad, None) is None
    assert cached_chain_loop(move, update, base.grad_u, None) is not None
    hand = targets.Target("local", 2, local_grad, base.log_density_fn, base.params)
    r = sgsim.sample(hand, "sgld", 100, n_chains=2, step_size=0.1, seed=1, init=[0.5, -0.5])
    same = sgsim.sample(base, "sgld", 100, n_chains=2, step_size=0.1, seed=1, init=[0.5, -0.5])
    assert np.array_equal(r.posterior["theta"].values, same.posterior["theta"].values)


def test_editing_a_gradients_module_gives_a_new_loop(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("SGSIM_CACHE_DIR", str(cache))
    monkeypatch.syspath_prepend(str(tmp_path))
    source = (TESTS / "user_banana.py").read_text()
    module = tmp_path / "banana_edit.py"
    move, update = get_method("sgld").algorithm.step
    files = []
    for version in (source, source + "\n# edited: a helper beside the gradient changed\n"):
        module.write_text(version)
        sys.modules.pop("banana_edit", None)
        importlib.invalidate_caches()
        grad = importlib.import_module("banana_edit").grad_u
        assert cached_chain_loop(move, update, grad, None) is not None
        files.append(sorted(p.name for p in cache.glob("sgsim_loop_*.py")))
    assert len(files[0]) == 1 and len(files[1]) == 2  # the edit gave a second, separate loop


def test_samplers_with_the_same_step_source_in_two_modules_keep_cache_files_apart(tmp_path):
    # numba's cache index names the classes of the loop's arguments (the constants' NamedTuple):
    # a loop cached for one module's sampler must not be loaded, in another process, for another's
    for name in ("twin_a", "twin_b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}.py").write_text(scaled_sgld("twin"))
    script = "import sys, {0}, sgsim; sgsim.sample('mixture_25', 'twin', 20, n_chains=2, step_size=0.01, seed=1)"
    cache = tmp_path / "cache"
    for name in ("twin_a", "twin_b"):  # each process sees only its own module
        env = {**os.environ, "SGSIM_CACHE_DIR": str(cache), "PYTHONPATH": str(tmp_path / name)}
        proc = subprocess.run([sys.executable, "-c", script.format(name)], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(list(cache.glob("sgsim_loop_*.py"))) == 2
