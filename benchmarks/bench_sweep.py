"""Sweeps: cells per minute on 2 local workers beside serial, and the scheduling overhead per cell.

1. Table 4's quick budget ([cSG] mode coverage on the 25-Gaussian mixture, "paper" setting:
   4 rows x 5 runs of 50,000 iterations, 1 or 4 chains): the 20 cells serially, on a process
   pool of 2 workers and on a Dask LocalCluster of 2 workers (start-up included, and apart).
2. Start-up (one trivial cell) and overhead: 200 trivial cells (a few normals from the seed)
   on each executor, milliseconds per cell, start-up included.

    python benchmarks/bench_sweep.py          # about 2 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from sgsim import sweep
from sgsim.experiments import cyclical_synthetic as cs


def trivial(seed: int) -> dict:
    """A cell that costs nothing: its time is the executor's."""
    return {"x": np.random.default_rng(seed).standard_normal(3)}


def table4_cells(n_runs: int) -> list[sweep.Cell]:
    rows = [(m, cs.N_PARALLEL if chains > 1 else 1) for _, _, m, chains in cs.ALGORITHMS]
    return [
        sweep.Cell(cs.coverage_run, dict(setting="paper", method=m, n_steps=cs.N_STEPS, n_chains=c, radius=cs.RADIUS,
                                         threshold=cs.THRESHOLD), int(s))
        for m, c in rows
        for s in cs.run_seeds(2020, n_runs, c)
    ]  # fmt: skip


def timed(cells, executor: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        sweep.run_sweep(cells, tmp, executor, n_workers=2)
        return time.perf_counter() - t0


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per Table 4 row (quick budget: 5)")
    args = parser.parse_args(argv)
    cells = table4_cells(args.runs)
    timed(cells[:1], "serial")  # compile this process's loops first
    print(f"Table 4, {args.runs} runs per row: {len(cells)} cells\n| executor | s | cells / min |\n|---|---:|---:|")
    for executor in sweep.EXECUTORS:
        t = timed(cells, executor)
        print(f"| {executor} | {t:.1f} | {len(cells) / t * 60:.0f} |")
    print("\nstart-up: one trivial cell (worker processes started and stopped)\n| executor | s |\n|---|---:|")
    for executor in sweep.EXECUTORS:
        print(f"| {executor} | {timed([sweep.Cell('bench_sweep:trivial', {}, 0)], executor):.2f} |")
    small = [sweep.Cell("bench_sweep:trivial", {}, s) for s in range(200)]
    print(f"\noverhead: {len(small)} trivial cells\n| executor | s in all | ms / cell |\n|---|---:|---:|")
    for executor in sweep.EXECUTORS:
        t = timed(small, executor)
        print(f"| {executor} | {t:.2f} | {t / len(small) * 1e3:.1f} |")


if __name__ == "__main__":
    main()
