"""The fixed cost of one ``sgsim.sample`` call, and what it adds to a short run per step.

Workload: SGLD (``step_size=0.01``) on the 25-Gaussian mixture, 4 chains, ``seed=0``, the
target given by name (as most callers do), compile excluded (one call of each configuration
first).

- *tiny*: 4 chains x 10 steps under each storage mode, ``--calls`` calls (default 400) of
  each, the modes interleaved call by call. Figures per call, median (and 10 % quantile):
  *wall*, the whole call; *loop*, ``attrs["sampling_time_s"]``, the driver's advance of the
  chains (thread hand-offs included); *overhead* = wall - loop: validation, target, schedule,
  noise factors, streams, the result and its InferenceData; *cpu*, the process's CPU time
  over the call (every thread; steadier than wall time on a loaded machine).
- *phases* (``--phases``): where the tiny draws call spends its time, each part timed with
  ``time.perf_counter`` around the function that does it (wrappers installed for the
  measurement only; a part the installed sgsim does not have is left out).
- *long*: 4 chains x 50,000 steps (``--steps``), ``--reps`` runs (default 15), only the final
  state kept: nanoseconds per step per chain end to end and loop only.

    python benchmarks/bench_fixed_cost.py                 # about 30 seconds
    python benchmarks/bench_fixed_cost.py --phases --json fixed.json
    cd /tmp && PYTHONPATH=/path/to/old/checkout python /path/to/benchmarks/bench_fixed_cost.py

Single figures move +-30 % between runs on a shared 2-core machine: compare versions in the
same session, and read the load average printed first.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import statistics
import time

import numpy as np

import sgsim

KW = {"n_chains": 4, "step_size": 0.01, "seed": 0}
STORAGES = ("draws", "final", "moments")
# (module, function, label): the parts of a call, outermost first
PHASES = (
    ("sgsim.sampling", "prepare", "prepare (validation, schedule, noise check)"),
    ("sgsim.driver", "_resolve_target", "  target by name"),
    ("sgsim.sampling", "execute", "execute (the chains' loop, thread hand-offs)"),
    ("sgsim.sampling", "_result", "result (arrays, spec, InferenceData)"),
    ("sgsim.sampling", "to_inference_data", "  InferenceData"),
    ("sgsim.spec", "encode", "  run spec encoding"),
)


def _call(n_steps: int, storage: str):
    c0, t0 = time.process_time(), time.perf_counter()
    result = sgsim.sample("mixture_25", "sgld", n_steps, storage=storage, **KW)
    t1, c1 = time.perf_counter(), time.process_time()
    return t1 - t0, float(result.attrs["sampling_time_s"]), c1 - c0


def tiny(calls: int) -> dict:
    for storage in STORAGES:  # compile, and build every cached layout, before timing
        _call(10, storage)
    times: dict[str, list[tuple[float, float, float]]] = {s: [] for s in STORAGES}
    for _ in range(calls):
        for storage in STORAGES:
            times[storage].append(_call(10, storage))
    out = {}
    for storage in STORAGES:
        w, lp, cpu = np.array(times[storage]).T
        over = w - lp
        out[storage] = {
            "wall_us": 1e6 * float(np.median(w)),
            "loop_us": 1e6 * float(np.median(lp)),
            "overhead_us": 1e6 * float(np.median(over)),
            "overhead_q10_us": 1e6 * float(np.quantile(over, 0.1)),
            "cpu_us": 1e6 * float(np.median(cpu)),
        }
    return out


@contextlib.contextmanager
def _timed_phases(acc: dict[str, float]):
    saved = []
    for module_name, name, label in PHASES:
        module = importlib.import_module(module_name)
        fn = getattr(module, name, None)
        if fn is None:
            continue

        def wrapper(*args, _fn=fn, _label=label, **kwargs):
            t0 = time.perf_counter()
            try:
                return _fn(*args, **kwargs)
            finally:
                acc[_label] = acc.get(_label, 0.0) + time.perf_counter() - t0

        setattr(module, name, wrapper)
        saved.append((module, name, fn))
    try:
        yield
    finally:
        for module, name, fn in saved:
            setattr(module, name, fn)


def phases(calls: int) -> dict:
    acc: dict[str, float] = {}
    with _timed_phases(acc):
        _call(10, "draws")
        acc.clear()
        t0 = time.perf_counter()
        for _ in range(calls):
            _call(10, "draws")
        total = time.perf_counter() - t0
    out = {"whole call": 1e6 * total / calls}
    out.update({label: 1e6 * acc[label] / calls for _, _, label in PHASES if label in acc})
    return out


def long(n_steps: int, reps: int) -> dict:
    _call(n_steps, "final")
    wall, loop = [], []
    for _ in range(reps):
        w, lp, _ = _call(n_steps, "final")
        wall.append(w)
        loop.append(lp)
    per = 1e9 / (KW["n_chains"] * n_steps)
    return {
        "n_chains": KW["n_chains"],
        "n_steps": n_steps,
        "end_to_end_ns": per * statistics.median(wall),
        "end_to_end_min_ns": per * min(wall),
        "loop_ns": per * statistics.median(loop),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=400, help="tiny calls per storage mode")
    parser.add_argument("--steps", type=int, default=50_000, help="steps of the long run")
    parser.add_argument("--reps", type=int, default=15, help="long runs")
    parser.add_argument("--phases", action="store_true", help="also time the parts of a tiny call")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()

    report: dict = {"sgsim": getattr(sgsim, "__version__", "?"), "load_average": os.getloadavg()}
    print(f"sgsim {report['sgsim']} from {os.path.dirname(sgsim.__file__)}; load average {report['load_average']}")
    report["tiny"] = tiny(args.calls)
    print(f"\n4 chains x 10 steps, median of {args.calls} calls (us per call)")
    print(f"{'storage':<10}{'wall':>10}{'loop':>10}{'overhead':>10}{'(q10)':>10}{'cpu':>10}")
    for storage, r in report["tiny"].items():
        print(
            f"{storage:<10}{r['wall_us']:>10.0f}{r['loop_us']:>10.0f}{r['overhead_us']:>10.0f}"
            f"{r['overhead_q10_us']:>10.0f}{r['cpu_us']:>10.0f}"
        )
    if args.phases:
        report["phases"] = phases(args.calls)
        print("\nparts of a 4 x 10 draws call (us per call; indented parts lie inside the one above)")
        for label, us in report["phases"].items():
            print(f"  {label:<48}{us:>8.0f}")
    report["long"] = long(args.steps, args.reps)
    r = report["long"]
    print(
        f"\n{r['n_chains']} chains x {r['n_steps']:,} steps, storage='final', median of {args.reps}: "
        f"{r['end_to_end_ns']:.1f} ns per step per chain end to end (min {r['end_to_end_min_ns']:.1f}), "
        f"{r['loop_ns']:.1f} loop only"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=1)


if __name__ == "__main__":
    main()
