"""SGLD with repulsive forces at scale: the random-batch variant's speed at L = 1,000 to 100,000,
and its stationary error beside the exact sampler's at L = 1,000.

Speed: milliseconds per iteration of ``sgld_repulsive_rb`` (batches of 10, bandwidth 1) on the
3x3 mixture at L = 1,000, 10,000 and 100,000 particles, 1 and 2 threads, with the exact
``sgld_repulsive`` at L = 1,000 (Cholesky factor of the 1000 x 1000 kernel every step) timed in
the same run; compilation apart (a tiny first call).

Error: one ensemble on N(0, I_2) and on the 3x3 mixture (bandwidth 1, ``normalise=True``),
started from the target's box, 2,000 iterations of which every 50th of the last 1,000 is
pooled (particles x iterations): the error of the pooled mean and of the pooled second moment
against the target's exact ones, for the exact sampler at L = 1,000 and the random batches at
L = 1,000, 10,000 and 100,000 (the exact sampler's Cholesky factor is out of reach beyond a
few thousand), all at step size 0.5 (the exact sampler
divides its kernel sums by L = 1,000 and the random batches by 10, so a particle's drift is
of the same order in both: its kernel-weighted neighbours over the particles it sees).
``--quick`` shrinks everything for a smoke test.

    python benchmarks/bench_particles_scale.py --json out.json      # about 3 minutes
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings
from pathlib import Path

import numpy as np

import sgsim


def speed(sizes, reps: int) -> list[dict]:
    target = sgsim.targets.mixture_3x3()
    rows = []
    cases = [("sgld_repulsive", sizes[0], {})] + [("sgld_repulsive_rb", n, {"batch_size": 10}) for n in sizes]
    for method, n, extra in cases:
        z0 = np.random.default_rng(0).uniform(-4.0, 4.0, (n, 2))
        n_iter = max(3, int(2e6 // (n * (100 if method == "sgld_repulsive" else 1))))
        for threads in (1, 2):
            kw = dict(n_particles=n, init=z0, step_size=0.05, bandwidth=1.0, seed=0, n_threads=threads, **extra)
            sgsim.sample(target, method, 2, storage="final", **kw)  # compile
            times = []
            for _ in range(reps):
                r = sgsim.sample(target, method, n_iter, storage="final", **kw)
                times.append(r.attrs["sampling_time_s"] / n_iter * 1e3)
            rows.append({"method": method, "n_particles": n, "threads": threads,
                         "ms_per_iteration": statistics.median(times)})  # fmt: skip
    return rows


def error(cases, n_iter: int) -> list[dict]:
    """Moment errors of one ensemble per (method, L) against each target's exact moments."""
    rows = []
    for name, target in (
        ("N(0, I_2)", sgsim.targets.standard_gaussian(2)),
        ("3x3 mixture", sgsim.targets.mixture_3x3()),
    ):
        mean, second = target.mean, target.second_moment
        for method, n in cases:
            extra = {"batch_size": 10} if method == "sgld_repulsive_rb" else {}
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                r = sgsim.sample(target, method, n_iter, n_particles=n, step_size=0.5, bandwidth=1.0, seed=1,
                                 burn_in=n_iter // 2, thin=max(1, n_iter // 20), **extra)  # fmt: skip
            x = r.posterior["theta"].values.reshape(-1, 2)
            rows.append({
                "target": name, "method": method, "n_particles": n, "step_size": 0.5,
                "mean_error": float(np.max(np.abs(x.mean(0) - mean))),
                "second_moment_error": float(np.max(np.abs(x.T @ x / len(x) - second))),
                "wall_s": time.perf_counter() - t0,
            })  # fmt: skip
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    args = parser.parse_args(argv)
    sizes = (200, 2000) if args.quick else (1000, 10_000, 100_000)
    if args.quick:
        cases = [("sgld_repulsive", 200), ("sgld_repulsive_rb", 200), ("sgld_repulsive_rb", 2000)]
    else:
        cases = [("sgld_repulsive", 1000), ("sgld_repulsive_rb", 1000), ("sgld_repulsive_rb", 10_000),
                 ("sgld_repulsive_rb", 100_000)]  # fmt: skip
    report = {"speed": speed(sizes, 1 if args.quick else args.reps),
              "error": error(cases, 200 if args.quick else 2000)}  # fmt: skip
    print("| method | particles | threads | ms / iteration |\n|---|---:|---:|---:|")
    for r in report["speed"]:
        print(f"| {r['method']} | {r['n_particles']:,} | {r['threads']} | {r['ms_per_iteration']:.2f} |")
    print("\n| target | method | particles | max mean error | max second-moment error | wall s |")
    print("|---|---|---:|---:|---:|---:|")
    for r in report["error"]:
        print(f"| {r['target']} | {r['method']} | {r['n_particles']:,} | {r['mean_error']:.4f} | "
              f"{r['second_moment_error']:.4f} | {r['wall_s']:.1f} |")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
