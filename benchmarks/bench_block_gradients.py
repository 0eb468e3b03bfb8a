"""Block gradients (``Target.grad_u_block``) beside the per-point ``grad_u``: ns per lane per call.

Workload: the 25-Gaussian mixture's gradient at W = 64 points (``--lanes``), computed

- ``point``: ``mixture_grad_u_2d`` called once per point from a compiled loop (the stable form
  that skips components below ``exp(-40)`` of the largest, with the C library's ``exp``);
- ``block_2d``: ``mixture_grad_u_block_2d``, the points as the inner SIMD loop, every component
  summed with the vectorised exp;
- ``block``: ``mixture_grad_u_block``, the same for any dimension (a pass over the lanes per
  coordinate).

at two point sets: exact draws from the mixture (chains at equilibrium, where the per-point form
skips all but one or two components) and uniform draws on the initial box ``[-10, 10]^2`` (the
start of a run). Each figure is the median (and minimum) over ``--reps`` rounds of ``--calls``
calls, the three interleaved within a round; the lanes' results are checked against each other
first.

    python benchmarks/bench_block_gradients.py            # about 20 seconds on 2 cores

A measurement, never a test: single figures move +-30% between runs on shared machines.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from sgsim import targets
from sgsim._jit import jit
from sgsim.targets.mixtures import mixture_grad_u_2d, mixture_grad_u_block, mixture_grad_u_block_2d


@jit(cache=False)
def _per_point(grad_u, theta, params, out, x, g, calls):
    for _ in range(calls):
        for lane in range(theta.shape[1]):
            x[0] = theta[0, lane]
            x[1] = theta[1, lane]
            grad_u(x, params, g)
            out[0, lane] = g[0]
            out[1, lane] = g[1]


@jit(cache=False)
def _blocks(grad_u_block, theta, params, out, scratch, calls):
    for _ in range(calls):
        grad_u_block(theta, params, out, scratch)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lanes", type=int, default=64)
    ap.add_argument("--calls", type=int, default=20_000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", help="write the figures to this file")
    a = ap.parse_args(argv)
    target = targets.mixture_25()
    rng = np.random.default_rng(0)
    sets = {
        "equilibrium": target.exact_draws(rng, a.lanes),
        "initial_box": rng.uniform(target.init_low, target.init_high, (a.lanes, 2)),
    }
    x, g, scratch = np.empty(2), np.empty(2), np.empty((8, a.lanes))
    kernels = {
        "point": lambda th, out, n: _per_point(mixture_grad_u_2d, th, target.params, out, x, g, n),
        "block_2d": lambda th, out, n: _blocks(mixture_grad_u_block_2d, th, target.params, out, scratch, n),
        "block": lambda th, out, n: _blocks(mixture_grad_u_block, th, target.params, out, scratch, n),
    }
    results = {}
    for set_name, pts in sets.items():
        theta = np.ascontiguousarray(pts.T)
        outs = {k: np.empty_like(theta) for k in kernels}
        for k, f in kernels.items():
            f(theta, outs[k], 1)  # compile, and check
        scale = np.abs(outs["point"]).max()
        for k in kernels:
            assert np.max(np.abs(outs[k] - outs["point"])) <= 1e-12 * scale, k
        times = {k: [] for k in kernels}
        names = list(kernels)
        for r in range(a.reps):
            for k in names[r % len(names) :] + names[: r % len(names)]:
                t0 = time.perf_counter()
                kernels[k](theta, outs[k], a.calls)
                times[k].append((time.perf_counter() - t0) / (a.calls * a.lanes) * 1e9)
        results[set_name] = {k: {"median": statistics.median(v), "min": min(v)} for k, v in times.items()}
        row = ", ".join(f"{k} {v['median']:.1f} (min {v['min']:.1f})" for k, v in results[set_name].items())
        print(f"{set_name:12s} W = {a.lanes}: ns per lane per call: {row}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"lanes": a.lanes, "calls": a.calls, "reps": a.reps, "ns_per_lane": results}, fh, indent=1)


if __name__ == "__main__":
    main()
