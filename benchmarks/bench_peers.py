"""The peer samplers (BAOAB, OBABO, SGNHT, pSGLD) beside SGLD and SGHMC, timed in the same run.

**Workload.** The cyclical paper's 25-Gaussian mixture (2-D, exact gradients), a constant step
of 0.001 (pSGLD: floor 1), 1,000 chains on one thread, only the final state kept, every chain
from the same seeded box. Compilation is paid by a first small run of each method; the figure
is the sampling time (``attrs["sampling_time_s"]``, median of ``--reps``) in nanoseconds per
step per chain, with its ratio to SGHMC's (the target: within 1.5x for SGNHT, BAOAB and
pSGLD).

    python benchmarks/bench_peers.py            # about a minute
    python benchmarks/bench_peers.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics

import sgsim

METHODS = {
    "sgld": {},
    "sghmc": {},
    "baoab": {},
    "obabo": {},
    "sgnht": {},
    "psgld": {"floor": 1.0},
    "psgld_gamma": {"floor": 1.0},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--chains", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    target = sgsim.targets.mixture_25()
    rows = {}
    for name, opts in METHODS.items():
        kw = dict(step_size=1e-3, storage="final", n_threads=1, seed=1, **opts)
        sgsim.sample(target, name, 10, n_chains=2, **kw)  # compile
        times = [
            sgsim.sample(target, name, args.steps, n_chains=args.chains, **kw).attrs["sampling_time_s"]
            for _ in range(args.reps)
        ]
        rows[name] = 1e9 * statistics.median(times) / (args.steps * args.chains)
    base = rows["sghmc"]
    print(f"{'method':<12} {'ns/step/chain':>14} {'x SGHMC':>8}")
    for name, ns in rows.items():
        print(f"{name:<12} {ns:14.1f} {ns / base:8.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
