"""CPU chains against hand-tuned kernels, timed in the same run: the two stream schemes, compile times.

Workload: SGLD and SGHMC (friction 0.1) on the 25-Gaussian mixture, step sizes the first N
values of the cyclical schedule ``alpha_0 = 0.09``, ``M = 30``, ``K = 50,000``, every chain
from (0, 0), only the final state kept (:mod:`bench_sampling`'s workload). Sizes: 1,000 x
5,000 and 100,000 x 1,000 chains x steps (the sampling loop, ``attrs["sampling_time_s"]``),
and 4 x 50,000 end to end (the whole ``sgsim.sample`` call).

Configurations, interleaved round by round (the first one rotating): ``sgsim.sample`` with
Philox streams (the default: chains side by side with the target's block gradient where a
chunk holds enough chains, else one by one) and with PCG64 streams (``stream="pcg64"``, the
scheme before); and, when ``--handtuned PATH`` names a module of hand-tuned kernels with the
interface ``KERNELS`` (keys ``(method, name)``) and ``run(key, theta0, step_sizes, seed,
threads, pool)``, each of its kernels on numba's thread count. Figures are nanoseconds per
step per chain (median and min over the rounds).

Compile time (:func:`compile_section`): the first call of each method in a fresh process, a
tiny run, minus the same call warm: with its generated loop compiled from scratch, with
nothing cached at all, and the warm start of a second process. Both stream schemes.

    python benchmarks/bench_cpu_limit.py --handtuned PATH/handtuned_sgld.py     # ~5 min on 2 cores
    python benchmarks/bench_cpu_limit.py --quick                                # a smoke test

A measurement on a quiet machine, never a test: single figures move +-30% between runs on
shared machines, ratios within one run about +-15%.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba
import numpy as np

import sgsim

A0, M_CYCLES, K_STEPS, FRICTION = 0.09, 30, 50_000, 0.1
SIZES = [(1000, 5000, "loop"), (100_000, 1000, "loop"), (4, 50_000, "end_to_end")]
QUICK_SIZES = [(1000, 300, "loop"), (20_000, 50, "loop"), (4, 3000, "end_to_end")]


def step_sizes(n: int) -> np.ndarray:
    """The first ``n`` step sizes of the cyclical schedule (alpha_0 = 0.09, M = 30, K = 50,000)."""
    length = math.ceil(K_STEPS / M_CYCLES)
    k = np.arange(n)
    return A0 / 2 * (np.cos(np.pi * (k % length) / length) + 1)


def run_sgsim(method: str, n_chains: int, n_steps: int, stream: str, seed: int = 0) -> tuple[float, float, np.ndarray]:
    """(wall s, loop s, final states) of one ``sgsim.sample`` call."""
    sched = sgsim.schedules.Schedule(step_sizes(n_steps), np.ones(n_steps))
    kw = {"friction": FRICTION} if method == "sghmc" else {}
    # the hand-tuned kernels' workload as they run it: their cyclical schedule, whose 3-step warm-up
    # lies wholly beyond SGLD's limit, and no bound (SGHMC's chains make excursions to |theta| ~ 61
    # on it, past the 25-Gaussian mixture's bound of 60, which the kernels do not watch)
    t = time.perf_counter()
    r = sgsim.sample(
        "mixture_25", method, schedule=sched, n_chains=n_chains, init=np.zeros(2), seed=seed, storage="final",
        stream=stream, step_check="ignore", divergence_bound=None, **kw,
    )  # fmt: skip
    wall = time.perf_counter() - t
    return wall, float(r.attrs["sampling_time_s"]), np.asarray(r.posterior["theta"].values[:, -1])


def load_handtuned(path: str | None):
    """The hand-tuned module at ``path`` (None: no reference)."""
    if not path:
        return None
    spec = importlib.util.spec_from_file_location("handtuned_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timing_section(sizes, reps: int, handtuned) -> list[dict]:
    threads = numba.get_num_threads()
    pool = ThreadPoolExecutor(threads)
    configs: list[tuple[str, str]] = [("sgsim", "philox"), ("sgsim", "pcg64")]
    if handtuned is not None:
        configs += list(dict.fromkeys(("handtuned", name) for (_, name) in handtuned.KERNELS))
    for method in ("sgld", "sghmc"):  # compile everything first
        for kind, name in configs:
            if kind == "sgsim":
                run_sgsim(method, 2, 3, name)
            else:
                handtuned.run((method, name), np.zeros((2, 2)), step_sizes(3), 0, 1, pool)
    rows = []
    for method in ("sgld", "sghmc"):
        for n_chains, n_steps, measure in sizes:
            times: dict = {c: [] for c in configs}
            alpha = step_sizes(n_steps)
            for rep in range(reps + 1):  # round 0 warms up
                order = configs[rep % len(configs) :] + configs[: rep % len(configs)]
                for kind, name in order:
                    if kind == "sgsim":
                        wall, loop, final = run_sgsim(method, n_chains, n_steps, name, seed=rep)
                        value = wall if measure == "end_to_end" else loop
                    else:
                        t = time.perf_counter()
                        final = handtuned.run((method, name), np.zeros((n_chains, 2)), alpha, rep, threads, pool)
                        value = time.perf_counter() - t
                    if not np.all(np.isfinite(final)):
                        raise RuntimeError(f"non-finite final states: {kind} {name} {method} {n_chains}")
                    if rep:
                        times[(kind, name)].append(value / (n_chains * n_steps) * 1e9)
            for (kind, name), v in times.items():
                rows.append({
                    "method": method, "n_chains": n_chains, "n_steps": n_steps, "measure": measure, "kind": kind,
                    "config": name, "median_ns": statistics.median(v), "min_ns": min(v), "all_ns": v,
                })  # fmt: skip
            print(f"  {method} {n_chains} x {n_steps} done", file=sys.stderr, flush=True)
    return rows


_COMPILE = """
import json, sys, time
import numpy as np
t0 = time.perf_counter()
import sgsim
imported = time.perf_counter() - t0
import arviz  # a result's first build imports it: not compile time
out = {"import_s": imported}
for method in ("sgld", "sghmc"):
    for stream in ("philox", "pcg64"):
        kw = {"friction": 0.1} if method == "sghmc" else {}
        n = int(sys.argv[1])
        t = time.perf_counter()
        sgsim.sample("mixture_25", method, 5, n_chains=n, step_size=0.01, seed=0, storage="final", stream=stream, **kw)
        first = time.perf_counter() - t
        t = time.perf_counter()
        sgsim.sample("mixture_25", method, 5, n_chains=n, step_size=0.01, seed=0, storage="final", stream=stream, **kw)
        out[f"{method}/{stream}/{n}"] = first - (time.perf_counter() - t)
print(json.dumps(out))
"""


def compile_section(tmp_root: str) -> dict:
    """Compile time per method and warm start, each in fresh processes.

    ``loop_<n>``: the method's generated loop compiled from scratch (an empty loop cache), the
    functions of sgsim's modules loaded from numba's cache as after any first use; ``warm_<n>``: a
    second process on that loop cache; ``cold_<n>``: nothing cached at all (``SGSIM_JIT_CACHE=0``).
    """
    out = {}

    def child(env, n):
        done = subprocess.run([sys.executable, "-c", _COMPILE, str(n)], env=env, capture_output=True, text=True)
        return json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else done.stderr[-2000:]

    for n in (4, 1000):  # 4 chains: blocks of 2 lanes a thread; 1000: full blocks of 64
        loops = os.path.join(tmp_root, f"loops_{n}")
        env = {**os.environ, "SGSIM_JIT_CACHE": "1", "SGSIM_CACHE_DIR": loops}
        out[f"loop_{n}"] = child(env, n)
        out[f"warm_{n}"] = child(env, n)
        out[f"cold_{n}"] = child({**os.environ, "SGSIM_JIT_CACHE": "0"}, n)
    return out


def ratios(rows: list[dict]) -> list[str]:
    """sgsim's median against the best hand-tuned kernel's, per method and size."""
    lines = []
    keys = {(r["method"], r["n_chains"], r["n_steps"]) for r in rows}
    for key in sorted(keys):
        sel = [r for r in rows if (r["method"], r["n_chains"], r["n_steps"]) == key]
        hand = [r for r in sel if r["kind"] == "handtuned"]
        if not hand:
            continue
        best = min(hand, key=lambda r: r["median_ns"])
        simd = [r for r in hand if "simd" in r["config"]]
        for r in sel:
            if r["kind"] == "sgsim":
                extra = f", {r['median_ns'] / simd[0]['median_ns']:.2f}x the SIMD kernel" if simd else ""
                lines.append(
                    f"{key[0]} {key[1]:,} x {key[2]:,} sgsim/{r['config']}: {r['median_ns'] / best['median_ns']:.2f}x "
                    f"the best ({best['config']}){extra}"
                )
    return lines


def markdown(report: dict) -> str:
    lines = [
        f"sgsim {sgsim.__version__} | numba {numba.__version__} ({numba.get_num_threads()} threads) | "
        f"{os.cpu_count()} CPUs",
        "",
        "| method | chains x steps | measure | configuration | median ns | min ns |",
        "|---|---|---|---|---:|---:|",
    ]
    for r in report["rows"]:
        lines.append(
            f"| {r['method']} | {r['n_chains']:,} x {r['n_steps']:,} | {r['measure']} | {r['kind']}/{r['config']} | "
            f"{r['median_ns']:.1f} | {r['min_ns']:.1f} |"
        )
    lines += ["", *ratios(report["rows"])]
    if "compile" in report:
        lines += ["", "compile / warm start (s, first call minus a warm call):"]
        for k, v in report["compile"].items():
            lines.append(f"- {k}: {json.dumps(v) if isinstance(v, dict) else v}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--handtuned", metavar="PATH", help="a module of hand-tuned kernels to time beside sgsim")
    parser.add_argument("--reps", type=int, default=5, help="timed rounds (default 5)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--quick", action="store_true", help="small sizes, 2 rounds: a smoke test")
    parser.add_argument("--no-compile", action="store_true", help="skip the compile-time section")
    parser.add_argument(
        "--measure", choices=("loop", "end_to_end"), help="time only the sizes of this measure (default: all)"
    )
    args = parser.parse_args(argv)
    sizes, reps = (QUICK_SIZES, 2) if args.quick else (SIZES, args.reps)
    sizes = [s for s in sizes if args.measure in (None, s[2])]
    report: dict = {"rows": timing_section(sizes, reps, load_handtuned(args.handtuned))}
    if not args.no_compile:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            report["compile"] = compile_section(tmp)
    print(markdown(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
