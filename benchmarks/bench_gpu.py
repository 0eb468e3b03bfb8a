"""Speed and memory of the many-chain GPU path (``sample(backend="gpu")``), with references in the same run.

Workload (``bench_sampling.py``'s): SGLD and SGHMC (friction 0.1) on the 25-Gaussian mixture,
the first 1000 step sizes of the cyclical schedule ``alpha_0 = 0.09``, ``M = 30``,
``K = 50,000``, every chain from (0, 0), only the final state kept. Chains: 10^4, 10^5, 10^6,
10^7, in float32 and float64.

Measured, in picoseconds per step per chain (median over ``--reps`` runs): the kernels alone
(CUDA events around each launch, summed over the blocks), the sampling loop with the state's
copies to and from the device (``attrs["sampling_time_s"]``), and the whole ``sgsim.sample``
call. Compilation (NVRTC; CuPy then caches the module on disk) is timed apart, on a first
call of 128 chains. In the same run: sgsim's CPU path at 10^5 chains (all the machine's
threads), and, when JAX is installed, JAX's vmap + scan of the same algorithm on the default
JAX device (``benchmarks/jax_reference.py``'s sampler; on a GPU machine, set
``XLA_PYTHON_CLIENT_PREALLOCATE=false`` so that JAX does not take most of the device's memory
before CuPy runs). Memory: the device memory each storage mode holds at 10^7 chains (CuPy's
pool after the run, and :func:`sgsim.gpu.device_bytes`).

    python benchmarks/bench_gpu.py                  # on a machine with a CUDA device and CuPy
    python benchmarks/bench_gpu.py --quick          # a smoke test
    python benchmarks/bench_gpu.py --chains 1000000 10000000 --json out.json   # the chain counts of one's choice
    python benchmarks/bench_gpu.py --host --quick   # the same kernel built for this CPU (backend="gpu-host")

``benchmarks/gpu_check.sh`` runs it on a GPU machine with the tests and the Torch benchmark.

The issue's targets: at most 15 ps per step per chain for SGLD at 10^6 and 10^7 chains, and at
most twice that for SGHMC. This is a measurement, never a test.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import sgsim
from sgsim._validate import ParameterError
from sgsim.gpu import device_bytes, runner
from sgsim.sampling import prepare

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sampling import FRICTION, schedule  # noqa: E402

N_STEPS = 1000
CHAINS = [10_000, 100_000, 1_000_000, 10_000_000]


class Timed:
    """Wraps an executor: CUDA events (or the host clock) around every kernel launch."""

    def __init__(self, inner):
        self.inner = inner
        self.kernel_s = 0.0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def launch(self, *args):
        if self.inner.device:
            cp = self.inner.cp
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            self.inner.launch(*args)
            stop.record()
            stop.synchronize()
            self.kernel_s += cp.cuda.get_elapsed_time(start, stop) / 1e3
        else:
            t = time.perf_counter()
            self.inner.launch(*args)
            self.kernel_s += time.perf_counter() - t


def run_gpu(backend, method, n_chains, precision, storage="final", thin=1, seed=0):
    """(kernel s, sampling s, end-to-end s, result) of one run, the executor timed.

    No divergence bound and no step check, as the CPU benchmarks run this workload: its schedule's
    3-step warm-up lies beyond SGLD's stability limit, and at its largest steps (79 % of SGHMC's
    limit on the mixture) a few SGHMC chains in a thousand swing out to |theta_i| of about 65 and
    come back as the step shrinks, past the mixture's automatic bound of 60.
    """
    timed = Timed(runner.executor(backend))
    original = runner.executor
    runner.executor = lambda name: timed
    try:
        kw = {"friction": FRICTION} if method == "sghmc" else {}
        t = time.perf_counter()
        result = sgsim.sample(
            "mixture_25", method, schedule=schedule(N_STEPS), n_chains=n_chains, init=np.zeros(2), seed=seed,
            storage=storage, thin=thin, backend=backend, precision=precision, divergence_bound=None,
            step_check="ignore", **kw,
        )  # fmt: skip
        wall = time.perf_counter() - t
    finally:
        runner.executor = original
    return timed.kernel_s, float(result.attrs["sampling_time_s"]), wall, result


def ps(seconds, n_chains, n_steps=N_STEPS):
    return 1e12 * seconds / (n_chains * n_steps)


def gpu_section(backend, chains, reps, rows=None, save=lambda: None):
    rows = [] if rows is None else rows
    for precision in ("float32", "float64"):
        for method in ("sgld", "sghmc"):
            t = time.perf_counter()
            run_gpu(backend, method, 128, precision)
            first = time.perf_counter() - t
            for n in chains:
                runs = [run_gpu(backend, method, n, precision, seed=r)[:3] for r in range(reps)]
                k, s, w = (statistics.median(x[i] for x in runs) for i in range(3))
                rows.append({"precision": precision, "method": method, "chains": n, "kernel_ps": ps(k, n),
                             "sampling_ps": ps(s, n), "end_to_end_ps": ps(w, n), "first_call_s": first})  # fmt: skip
                print(f"{backend} {precision} {method:5s} {n:>10,d} chains: kernel {ps(k, n):8.1f} ps, "
                      f"sampling {ps(s, n):8.1f} ps, end to end {ps(w, n):8.1f} ps", flush=True)  # fmt: skip
                save()
    return rows


def cpu_section(n_chains, reps):
    rows = []
    for method in ("sgld", "sghmc"):
        kw = {"friction": FRICTION} if method == "sghmc" else {}
        sgsim.sample("mixture_25", method, schedule=schedule(10), n_chains=4, init=np.zeros(2), storage="final",
                     divergence_bound=None, step_check="ignore", **kw)  # fmt: skip
        times = []
        for r in range(reps):
            res = sgsim.sample("mixture_25", method, schedule=schedule(N_STEPS), n_chains=n_chains, init=np.zeros(2),
                               storage="final", seed=r, divergence_bound=None, step_check="ignore", **kw)  # fmt: skip
            times.append(float(res.attrs["sampling_time_s"]))
        rows.append({"method": method, "chains": n_chains, "sampling_ps": ps(statistics.median(times), n_chains)})
        print(
            f"cpu float64 {method:5s} {n_chains:>10,d} chains: sampling {rows[-1]['sampling_ps']:8.1f} ps", flush=True
        )
    return rows


def jax_section(chains, reps):
    try:
        import jax
        import jax_reference
    except ImportError:
        return {"skipped": "JAX is not installed"}
    rows = []
    device = jax.devices()[0]
    alpha = schedule(N_STEPS).step_size.astype(np.float32)
    for method in ("sgld", "sghmc"):
        for n in chains:
            try:
                fn = jax_reference._sampler(method, n, "float32")
                steps = jax.device_put(alpha, device)
                fn(0, steps).block_until_ready()
                times = []
                for r in range(reps):
                    t = time.perf_counter()
                    fn(r + 1, steps).block_until_ready()
                    times.append(time.perf_counter() - t)
            except Exception as exc:  # out of memory at large counts: recorded, not fatal
                rows.append({"method": method, "chains": n, "error": type(exc).__name__})
                continue
            rows.append({"method": method, "chains": n, "ps": ps(statistics.median(times), n), "device": str(device)})
            print(f"jax float32 {method:5s} {n:>10,d} chains on {device}: {rows[-1]['ps']:8.1f} ps", flush=True)
    return rows


def memory_section(backend, n_chains):
    rows = []
    for storage, thin in (("final", 1), ("moments", 1), ("draws", 100)):
        run, _ = prepare("mixture_25", "sgld", schedule=schedule(N_STEPS), storage=storage, thin=thin)
        row = {
            "storage": storage,
            "thin": thin,
            "chains": n_chains,
            "device_bytes": device_bytes(run, n_chains, "float32"),
        }
        if backend == "gpu":
            import cupy

            pool = cupy.get_default_memory_pool()
            pool.free_all_blocks()
            run_gpu(backend, "sgld", n_chains, "float32", storage=storage, thin=thin)
            row["pool_bytes"] = int(pool.total_bytes())
        rows.append(row)
        print(f"memory {storage:8s} (thin {thin}) at {n_chains:,} chains: {row}", flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="10^4 and 10^5 chains, one repetition")
    parser.add_argument("--host", action="store_true", help='backend="gpu-host": the kernel built for this CPU')
    parser.add_argument("--chains", type=int, nargs="+", help=f"chain counts of the GPU section (default {CHAINS})")
    parser.add_argument("--cpu-chains", type=int, help="chains of the CPU path's run (default 10^5; --quick 10^4)")
    parser.add_argument("--memory-chains", type=int, help="chains of the memory section (default 10^7)")
    parser.add_argument("--no-jax", action="store_true", help="leave JAX out")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    backend = "gpu-host" if args.host else "gpu"
    chains = args.chains or (CHAINS[:2] if args.quick else CHAINS)
    reps = 1 if args.quick else args.reps
    try:
        device = runner.executor(backend).describe()
    except ParameterError as exc:
        print(f"no device for backend={backend!r}: {exc}")
        return 2
    report = {"device": device, "python": platform.python_version(), "sgsim": sgsim.__version__, "steps": N_STEPS}
    print(f"device: {device}", flush=True)

    def save():  # after every section: a run stopped by a time limit keeps what it measured
        if args.json:
            args.json.write_text(json.dumps(report, indent=1))

    report["gpu"] = []
    gpu_section(backend, chains if not args.host else [c for c in chains if c <= 100_000], reps, report["gpu"], save)
    report["cpu"] = cpu_section(args.cpu_chains or (100_000 if not args.quick else 10_000), reps)
    save()
    # on the host, JAX runs on its CPU device: a check of the code, not a reference figure
    report["jax"] = jax_section(chains[:3], reps) if not args.no_jax else {"skipped": "--no-jax"}
    save()
    report["memory"] = memory_section(backend, args.memory_chains or (10_000_000 if not args.quick else chains[-1]))
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
