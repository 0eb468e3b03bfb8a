"""Speed of ``sgsim.sample`` on the 25-Gaussian mixture, against plain NumPy, in one run.

Measures nanoseconds per step per chain through the public API for SGLD and SGHMC with 4
and 1000 chains: the whole ``sgsim.sample`` call (end to end: validation, schedule,
generators, sampling, InferenceData) and the sampling loop alone
(``result.attrs["sampling_time_s"]``). Compilation is timed apart, on a tiny warm-up call.
A plain NumPy implementation vectorised over chains runs the same dynamics in the same
process, and the ratio of the two is printed.

    python benchmarks/bench_sampling.py                 # about a minute on 2 cores
    python benchmarks/bench_sampling.py --json out.json --reps 9

This is a measurement, never a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import threading
import time

import numba
import numpy as np

T0 = time.perf_counter()
import arviz  # noqa: E402,F401  (imported before timing: the first sample() would import it)

import sgsim  # noqa: E402

IMPORT_S = time.perf_counter() - T0

# the dynamics being timed; SGLD's step size is the paper's initial one ([cSG] §5.1)
METHODS = {
    "sgld": {"step_size": 0.05},
    "sghmc": {"step_size": 0.01, "friction": 0.1},
}
# (n_chains, sgsim steps, NumPy steps): the NumPy loop costs the same per step at any
# length, so it runs fewer steps to keep the whole benchmark short
SIZES = [(4, 50_000, 10_000), (1000, 5_000, 500)]
# the targets for SGLD end to end on the 2-core machine, ns per step per chain
TARGETS_NS = {("sgld", 4): 150.0, ("sgld", 1000): 100.0}


# ----------------------------------------------------------------------------- NumPy baseline


class NumpyMixture:
    """Plain NumPy SGLD / SGHMC on an isotropic Gaussian mixture, vectorised over chains.

    Built from the target's public description (centres, variances, weights). The
    exponents use the expanded form ``c_j + x . l_j - h_j |x|^2`` so that one matrix
    product gives all of them; the standard normals are drawn in bulk, ``block`` steps at
    a time, with a :class:`numpy.random.Generator`.
    """

    def __init__(self, target):
        mu = np.asarray(target.mode_centres, float)
        var = np.asarray(target.extras["variance"], float)
        w = np.asarray(target.extras["weights"], float)
        d = mu.shape[1]
        self.mu = mu
        self.h = 0.5 / var
        self.lin_t = (2.0 * self.h[:, None] * mu).T.copy()
        self.const = np.log(w) - 0.5 * d * np.log(2 * np.pi * var) - self.h * np.einsum("kd,kd->k", mu, mu)
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

    def run(self, method, x0, n_steps, step_size, friction=0.1, temperature=1.0, seed=0, block=1000):
        rng = np.random.default_rng(seed)
        x = x0.copy()
        v = np.zeros_like(x)
        out = np.empty((n_steps,) + x.shape)
        hmc = method == "sghmc"
        sd = np.sqrt(2.0 * (friction if hmc else 1.0) * step_size * temperature)
        for b0 in range(0, n_steps, block):
            xi = rng.standard_normal((min(block, n_steps - b0),) + x.shape)
            xi *= sd
            for k in range(xi.shape[0]):
                if hmc:
                    x += v
                    v = (1.0 - friction) * v - step_size * self.grad_u(x) + xi[k]
                else:
                    x = x - step_size * self.grad_u(x) + xi[k]
                out[b0 + k] = x
        return out


# ----------------------------------------------------------------------------- machine


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


@numba.njit(nogil=True)
def _spin(n):
    s = 0.0
    for i in range(n):
        s += np.sqrt(i * 1.0001)
    return s


def parallel_probe(n=20_000_000) -> float:
    """Work done by two threads per unit of time, relative to one: 2 on two free cores.

    These machines share their cores; when a neighbour is busy the second thread gains
    little, and every multi-threaded figure below drops with it.
    """
    _spin(10)

    def wall(threads):
        ts = [threading.Thread(target=_spin, args=(n,)) for _ in range(threads)]
        t = time.perf_counter()
        for th in ts:
            th.start()
        for th in ts:
            th.join()
        return time.perf_counter() - t

    one = min(wall(1) for _ in range(3))
    two = min(wall(2) for _ in range(3))
    return 2.0 * one / two


def machine() -> dict:
    return {
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "os_cpu_count": os.cpu_count(),
        "numba_threads": numba.get_num_threads(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "sgsim": sgsim.__version__,
    }


# ----------------------------------------------------------------------------- timing


def time_sample(target, method, n_chains, n_steps, seed):
    t = time.perf_counter()
    result = sgsim.sample(target, method, n_steps, n_chains=n_chains, seed=seed, **METHODS[method])
    wall = time.perf_counter() - t
    loop = result.attrs["sampling_time_s"]
    return wall, loop


def compile_times(target) -> dict:
    """Seconds of the first tiny call beyond a second one (numba compiles on first use)."""
    out = {}
    for method in METHODS:
        first, _ = time_sample(target, method, 2, 10, 0)
        again, _ = time_sample(target, method, 2, 10, 0)
        out[method] = first - again
    return out


def summary(values, per):
    ns = [v / per * 1e9 for v in values]
    return {"median": statistics.median(ns), "min": min(ns), "all": ns}


def run(reps: int, numpy_reps: int, sizes) -> dict:
    target = sgsim.targets.mixture_25()
    baseline = NumpyMixture(target)
    check = np.random.default_rng(0).uniform(-6, 6, (1000, 2))
    grad_error = float(np.max(np.abs(baseline.grad_u(check) - target.gradient(check))))

    report = {
        "machine": machine(),
        "import_s": IMPORT_S,
        "parallel_probe_before": parallel_probe(),
        "compile_s": compile_times(target),
        "numpy_grad_max_abs_diff": grad_error,
        "settings": {"target": "mixture_25", "methods": METHODS, "reps": reps, "numpy_reps": numpy_reps},
        "results": [],
    }
    raw = {}
    # rounds interleave the configurations, so that a slow spell of the machine hits all
    for rep in range(reps):
        for method in METHODS:
            for n_chains, n_steps, np_steps in sizes:
                wall, loop = time_sample(target, method, n_chains, n_steps, seed=rep)
                entry = raw.setdefault((method, n_chains), {"wall": [], "loop": [], "numpy": []})
                entry["wall"].append(wall)
                entry["loop"].append(loop)
                if rep < numpy_reps:
                    x0 = np.random.default_rng(rep).uniform(-10, 10, (n_chains, 2))
                    t = time.perf_counter()
                    baseline.run(method, x0, np_steps, seed=rep, **METHODS[method])
                    entry["numpy"].append(time.perf_counter() - t)
    for n_chains, n_steps, np_steps in sizes:
        for method in METHODS:
            entry = raw[(method, n_chains)]
            per = n_chains * n_steps
            row = {
                "method": method,
                "n_chains": n_chains,
                "n_steps": n_steps,
                "end_to_end_ns": summary(entry["wall"], per),
                "loop_ns": summary(entry["loop"], per),
                "numpy_n_steps": np_steps,
                "numpy_ns": summary(entry["numpy"], n_chains * np_steps),
                # the targets are for the default lengths; short runs are dominated by fixed costs
                "target_ns": TARGETS_NS.get((method, n_chains)) if sizes == SIZES else None,
            }
            row["numpy_over_end_to_end"] = row["numpy_ns"]["median"] / row["end_to_end_ns"]["median"]
            report["results"].append(row)
    report["parallel_probe_after"] = parallel_probe()
    return report


def markdown(report) -> str:
    m = report["machine"]
    lines = [
        f"sgsim {m['sgsim']} | {m['cpu']} | os.cpu_count() = {m['os_cpu_count']} | "
        f"numba threads = {m['numba_threads']} | numpy {m['numpy']}, numba {m['numba']}, Python {m['python']}",
        f"parallel probe (2 = two free cores): {report['parallel_probe_before']:.2f} before, "
        f"{report['parallel_probe_after']:.2f} after",
        "compile (first call beyond a second one): "
        + ", ".join(f"{k} {v:.2f} s" for k, v in report["compile_s"].items())
        + f"; import of sgsim and arviz {report['import_s']:.2f} s",
        "",
        "ns per step per chain, median (min) over "
        f"{report['settings']['reps']} runs; NumPy over {report['settings']['numpy_reps']}",
        "",
        "| method | chains | steps | end to end | sampling loop | NumPy | NumPy / end to end | target |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["results"]:
        e, lo, nu = r["end_to_end_ns"], r["loop_ns"], r["numpy_ns"]
        target = ""
        if r["target_ns"] is not None:
            target = f"<= {r['target_ns']:.0f}: {'met' if e['median'] <= r['target_ns'] else 'NOT met'}"
        lines.append(
            f"| {r['method']} | {r['n_chains']} | {r['n_steps']} | {e['median']:.0f} ({e['min']:.0f}) | "
            f"{lo['median']:.0f} ({lo['min']:.0f}) | {nu['median']:.0f} ({nu['min']:.0f}) | "
            f"{r['numpy_over_end_to_end']:.1f}x | {target} |"
        )
    lines.append("")
    lines.append(f"NumPy baseline gradient vs sgsim's: max abs difference {report['numpy_grad_max_abs_diff']:.1e}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--reps", type=int, default=7, help="runs of each sgsim configuration (default 7)")
    parser.add_argument("--numpy-reps", type=int, default=3, help="runs of the NumPy baseline (default 3)")
    parser.add_argument("--quick", action="store_true", help="one tenth of the steps, 2 runs: a smoke test")
    args = parser.parse_args(argv)
    sizes = SIZES
    reps, numpy_reps = args.reps, min(args.numpy_reps, args.reps)
    if args.quick:
        sizes = [(c, s // 10, n // 10) for c, s, n in SIZES]
        reps, numpy_reps = 2, 1
    report = run(reps, numpy_reps, sizes)
    print(markdown(report))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)


if __name__ == "__main__":
    main()
