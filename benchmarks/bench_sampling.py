"""Speed of ``sgsim.sample`` through the public API, with references timed in the same run.

Workload (the hand-tuned reference's, so that figures can be set side by side): SGLD and
SGHMC (friction 0.1) on the 25-Gaussian mixture, step sizes the first N values of the
cyclical schedule ``alpha_0 = 0.09``, ``M = 30``, ``K = 50,000``, every chain from (0, 0),
only the final state kept (``storage="final"``; an sgsim without storage modes keeps the
last draw with ``burn_in = N - 1``). Chain counts and steps: 4 x 50,000, 1000 x 5,000,
100,000 x 1,000 (about 5e6 chain-steps each), then 10,000 x 200 (short runs must cost what
long runs cost per step) and 1,000,000 x 10 (end to end, seconds).

Measured, in nanoseconds per step per chain (median and min over ``--reps`` runs, the
configurations interleaved round by round): the whole ``sgsim.sample`` call ("end to end")
and its sampling loop (``attrs["sampling_time_s"]``). Compilation is timed apart, on a tiny
first call. In the same process: a plain NumPy implementation vectorised over chains, and,
when JAX is installed (``pip install "sgsim[bench]"``), JAX's vmap + scan in float32 and
float64 (``benchmarks/jax_reference.py``). Also SVGD's milliseconds per iteration on the
3x3 mixture at L = 100 and 1000, median heuristic and fixed bandwidth, 1 and 2 threads.

    python benchmarks/bench_sampling.py                  # about 3 minutes on 2 cores
    python benchmarks/bench_sampling.py --quick          # a smoke test
    python benchmarks/bench_sampling.py --json out.json --sections chains,particles

Run it under an older checkout (``PYTHONPATH=/path/to/old`` so that ``import sgsim`` finds
it) to time that version with the same workload. This is a measurement, never a test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

import numba
import numpy as np

T0 = time.perf_counter()
import arviz  # noqa: E402,F401  (imported before timing: the first sample() would import it)

import sgsim  # noqa: E402

IMPORT_S = time.perf_counter() - T0
sys.path.insert(0, str(Path(__file__).resolve().parent))

A0, M_CYCLES, K_STEPS, FRICTION = 0.09, 30, 50_000, 0.1
CHAIN_SIZES = [(4, 50_000), (1000, 5_000), (100_000, 1_000)]
EXTRA_SIZES = [(10_000, 200), (1_000_000, 10)]
HAS_STORAGE = "storage" in sgsim.sample.__code__.co_varnames


def step_sizes(n: int) -> np.ndarray:
    """The first ``n`` step sizes of the cyclical schedule (alpha_0 = 0.09, M = 30, K = 50,000)."""
    length = math.ceil(K_STEPS / M_CYCLES)
    k = np.arange(n)
    return A0 / 2 * (np.cos(np.pi * (k % length) / length) + 1)


def schedule(n: int):
    alpha = step_sizes(n)
    ones = np.ones(n)
    try:
        return sgsim.schedules.Schedule(alpha, ones)
    except TypeError:  # the first version's Schedule took every array
        return sgsim.schedules.Schedule(
            step_size=alpha, temperature=ones, stage=np.ones(n, np.int8), cycle=np.zeros(n, np.int32),
            collect=np.ones(n, bool), description={"schedule": "benchmark"},
        )  # fmt: skip


def run_sgsim(target, method, n_chains, n_steps, seed=0):
    sched = schedule(n_steps)
    kw = {"friction": FRICTION} if method == "sghmc" else {}
    kw.update({"storage": "final"} if HAS_STORAGE else {"burn_in": n_steps - 1})
    # no bound where there is one: SGHMC's chains swing out to |theta_i| ~ 65 at this schedule's
    # largest steps and come back, past the mixture's automatic bound of 60
    # (and no step check: the warm-up's steps lie beyond SGLD's stability limit)
    kw.update({"divergence_bound": None} if "divergence_bound" in sgsim.sample.__code__.co_varnames else {})
    kw.update({"step_check": "ignore"} if "step_check" in sgsim.sample.__code__.co_varnames else {})
    t = time.perf_counter()
    result = sgsim.sample(target, method, schedule=sched, n_chains=n_chains, init=np.zeros(2), seed=seed, **kw)
    wall = time.perf_counter() - t
    return wall, float(result.attrs["sampling_time_s"]), np.asarray(result.posterior["theta"].values[:, -1])


# ----------------------------------------------------------------------------- NumPy reference


class NumpyMixture:
    """Plain NumPy SGLD / SGHMC on an isotropic Gaussian mixture, vectorised over chains."""

    def __init__(self, target):
        mu = np.asarray(target.mode_centres, float)
        var = np.asarray(target.extras["variance"], float)
        w = np.asarray(target.extras["weights"], float)
        self.mu, self.h = mu, 0.5 / var
        self.lin_t = (2.0 * self.h[:, None] * mu).T.copy()
        self.const = np.log(w) - mu.shape[1] / 2 * np.log(2 * np.pi * var) - self.h * np.einsum("kd,kd->k", mu, mu)
        self.two_h = 2.0 * self.h

    def grad_u(self, x):
        sq = np.einsum("cd,cd->c", x, x)
        e = x @ self.lin_t
        e += self.const
        e -= np.multiply.outer(sq, self.h)
        e -= e.max(axis=1, keepdims=True)
        np.exp(e, out=e)
        e /= e.sum(axis=1, keepdims=True)
        e *= self.two_h
        return e.sum(axis=1)[:, None] * x - e @ self.mu

    def run(self, method, n_chains, alpha, seed=0, block=1000):
        rng = np.random.default_rng(seed)
        x, v = np.zeros((n_chains, 2)), np.zeros((n_chains, 2))
        hmc = method == "sghmc"
        for b0 in range(0, alpha.size, block):
            a = alpha[b0 : b0 + block]
            xi = rng.standard_normal((a.size, n_chains, 2)) * np.sqrt(2 * (FRICTION if hmc else 1.0) * a)[:, None, None]
            for k in range(a.size):
                if hmc:
                    x += v
                    v = (1 - FRICTION) * v - a[k] * self.grad_u(x) + xi[k]
                else:
                    x = x - a[k] * self.grad_u(x) + xi[k]
        return x


# ----------------------------------------------------------------------------- machine


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            return next(ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown"


@numba.njit(nogil=True)
def _spin(n):
    s = 0.0
    for i in range(n):
        s += np.sqrt(i * 1.0001)
    return s


def parallel_probe(n=20_000_000) -> float:
    """Work two threads get done per unit of time relative to one: 2.0 when both cores are free."""
    _spin(10)

    def wall(k):
        ts = [threading.Thread(target=_spin, args=(n,)) for _ in range(k)]
        t = time.perf_counter()
        for th in ts:
            th.start()
        for th in ts:
            th.join()
        return time.perf_counter() - t

    return 2.0 * min(wall(1) for _ in range(3)) / min(wall(2) for _ in range(3))


def machine() -> dict:
    return {
        "cpu": cpu_model(),
        "os_cpu_count": os.cpu_count(),
        "numba_threads": numba.get_num_threads(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "sgsim": sgsim.__version__,
        "sgsim_path": str(Path(sgsim.__file__).parent),
    }


def ns(values, per) -> dict:
    v = [x / per * 1e9 for x in values]
    return {"median": statistics.median(v), "min": min(v), "all": v}


# ----------------------------------------------------------------------------- sections


def chains_section(reps: int, sizes, extra, jax_reps: int) -> dict:
    target = sgsim.targets.mixture_25()
    compile_s = {}
    for method in ("sgld", "sghmc"):
        first = run_sgsim(target, method, 2, 10)[0]
        compile_s[method] = first - run_sgsim(target, method, 2, 10)[0]
    raw: dict = {}
    for rep in range(reps):  # rounds interleave the configurations
        for method in ("sgld", "sghmc"):
            for n_chains, n_steps in sizes + extra:
                if n_chains * n_steps > 2e7 and rep >= max(1, reps // 2):
                    continue  # the largest runs take long; fewer rounds suffice
                wall, loop, final = run_sgsim(target, method, n_chains, n_steps, seed=rep)
                entry = raw.setdefault((method, n_chains, n_steps), {"wall": [], "loop": []})
                entry["wall"].append(wall)
                entry["loop"].append(loop)
                entry["finite"] = bool(np.all(np.isfinite(final)))
    rows = []
    numpy_ref = NumpyMixture(target)
    for (method, n_chains, n_steps), e in raw.items():
        row = {
            "method": method,
            "n_chains": n_chains,
            "n_steps": n_steps,
            "end_to_end_ns": ns(e["wall"], n_chains * n_steps),
            "loop_ns": ns(e["loop"], n_chains * n_steps),
            "end_to_end_s": statistics.median(e["wall"]),
            "finite": e["finite"],
        }
        if (n_chains, n_steps) in sizes and n_chains <= 1000:
            np_steps = max(200, n_steps // 10)
            t = time.perf_counter()
            numpy_ref.run(method, n_chains, step_sizes(np_steps))
            row["numpy_ns"] = (time.perf_counter() - t) / (n_chains * np_steps) * 1e9
        rows.append(row)
    out = {"compile_s": compile_s, "rows": rows, "jax": []}
    try:
        import jax_reference
    except ImportError:  # pragma: no cover - the module ships beside this script
        jax_reference = None
    if jax_reference is not None and jax_reference.available() and jax_reps > 0:
        for dtype in ("float32", "float64"):
            for method in ("sgld", "sghmc"):
                for n_chains, n_steps in sizes + extra[:1]:
                    r = jax_reference.time_run(method, n_chains, step_sizes(n_steps), dtype=dtype, reps=jax_reps)
                    r.pop("final_states", None)
                    out["jax"].append(r)
    return out


def particles_section(reps: int, sizes=(100, 1000)) -> dict:
    """ms per iteration of each interacting method sgsim has, on the 3x3 mixture."""
    from sgsim.integrators import METHODS

    target = sgsim.targets.mixture_3x3()
    rows = []
    for method in [m for m in ("svgd", "sgld_repulsive") if m in METHODS]:
        for n_part in sizes:
            z0 = np.random.default_rng(0).uniform(-4.0, 4.0, (n_part, 2))
            n_iter = 200 if n_part <= 100 else 30
            for bandwidth in ("median", 1.0):
                for threads in (1, 2):
                    kw = dict(n_particles=n_part, init=z0, step_size=0.05, bandwidth=bandwidth, seed=0,
                              n_threads=threads)  # fmt: skip
                    sgsim.sample(target, method, 2, storage="final", **kw)  # compile
                    times = []
                    for _ in range(reps):
                        r = sgsim.sample(target, method, n_iter, storage="final", **kw)
                        times.append(r.attrs["sampling_time_s"] / n_iter * 1e3)
                    rows.append({
                        "method": method, "n_particles": n_part, "bandwidth": bandwidth, "threads": threads,
                        "ms_per_iteration": {"median": statistics.median(times), "min": min(times)},
                    })  # fmt: skip
    return {"rows": rows}


# ----------------------------------------------------------------------------- report


TARGETS = "within 1.3x of the best hand-tuned kernel (SGLD 40 / 27 / 27, SGHMC 35 / 27 / 26 ns measured here)"


def markdown(report) -> str:
    m = report["machine"]
    lines = [
        f"sgsim {m['sgsim']} ({m['sgsim_path']}) | {m['cpu']} | {m['os_cpu_count']} CPUs | numba threads "
        f"{m['numba_threads']} | numpy {m['numpy']}, numba {m['numba']}, Python {m['python']}",
        f"parallel probe (2 = two free cores): {report['probe_before']:.2f} before, {report['probe_after']:.2f} after;"
        f" import of sgsim and arviz {report['import_s']:.2f} s",
    ]
    if "chains" in report:
        c = report["chains"]
        lines += [
            "",
            "compile (first tiny call beyond a second): "
            + ", ".join(f"{k} {v:.2f} s" for k, v in c["compile_s"].items()),
            "",
            "| method | chains | steps | end to end ns | loop ns | end to end s | NumPy ns |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in c["rows"]:
            e, lo = r["end_to_end_ns"], r["loop_ns"]
            npy = f"{r['numpy_ns']:.0f}" if "numpy_ns" in r else ""
            lines.append(
                f"| {r['method']} | {r['n_chains']:,} | {r['n_steps']:,} | {e['median']:.1f} ({e['min']:.1f}) | "
                f"{lo['median']:.1f} ({lo['min']:.1f}) | {r['end_to_end_s']:.2f} | {npy} |"
            )
        if c["jax"]:
            lines += ["", "| JAX | dtype | chains | steps | ns (min) | compile s |", "|---|---|---:|---:|---:|---:|"]
            for r in c["jax"]:
                lines.append(
                    f"| {r['method']} | {r['dtype']} | {r['n_chains']:,} | {r['n_steps']:,} | "
                    f"{r['ns_per_step_per_chain_median']:.1f} ({r['ns_per_step_per_chain_min']:.1f}) | "
                    f"{r['compile_s']:.2f} |"
                )
    if "particles" in report:
        lines += ["", "| method | particles | bandwidth | threads | ms / iteration (min) |", "|---|---:|---|---:|---:|"]
        for r in report["particles"]["rows"]:
            t = r["ms_per_iteration"]
            lines.append(
                f"| {r['method']} | {r['n_particles']} | {r['bandwidth']} | {r['threads']} | "
                f"{t['median']:.3f} ({t['min']:.3f}) |"
            )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--reps", type=int, default=5, help="timed runs of each configuration (default 5)")
    parser.add_argument("--jax-reps", type=int, default=3, help="timed runs of each JAX configuration (0: skip)")
    parser.add_argument("--sections", default="chains,particles", help="comma-separated: chains, particles")
    parser.add_argument("--quick", action="store_true", help="small sizes, 2 runs: a smoke test")
    args = parser.parse_args(argv)
    sections = {s.strip() for s in args.sections.split(",")}
    sizes, extra, reps = CHAIN_SIZES, EXTRA_SIZES, args.reps
    if args.quick:
        sizes, extra, reps = [(4, 2000), (1000, 200)], [(10_000, 20)], 2
    report = {"machine": machine(), "import_s": IMPORT_S, "probe_before": parallel_probe()}
    if "chains" in sections:
        report["chains"] = chains_section(reps, sizes, extra, 0 if args.quick else args.jax_reps)
    if "particles" in sections and "n_particles" in getattr(getattr(sgsim.sample, "__code__", None), "co_varnames", ()):
        report["particles"] = particles_section(reps, (30,) if args.quick else (100, 1000))
    report["probe_after"] = parallel_probe()
    print(markdown(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
