"""Log-density targets (``sgsim.model``) beside a hand-written numba gradient of the same model.

**Workload.** Neal's funnel in 1 + 9 dimensions (``y ~ N(0, 9)``, ``x_i | y ~ N(0, e^y)``),
SGLD at a constant step of 1e-3, only the final state kept, every chain from the same
seeded box. The same model four ways: the compiled path (a numba ``grad_u`` written by hand,
as a user wrote models before), and log densities differentiated by JAX
(``jit(vmap(grad))``), by PyTorch (``torch.func.vmap(grad)``) and a vectorised NumPy
gradient.

**Figures.** Nanoseconds per step per chain at 4 and 1,000 chains (median of ``--reps``,
sampling time only: ``attrs["sampling_time_s"]``, compilation paid by a first small run),
and the fixed cost of one step, the figure at 1 chain in microseconds. For the design
choice: the cost of the gradient of all chains in one vectorised call, beside one call per
chain (as a sampler that calls a Python log density chain by chain pays it).

    python benchmarks/bench_model.py                 # about 2 minutes
    python benchmarks/bench_model.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import sgsim

D = 9


@sgsim.jit
def funnel_grad_u(theta, params, out):
    y = theta[0]
    e = np.exp(-y)
    s = 0.0
    for i in range(1, theta.shape[0]):
        s += theta[i] * theta[i]
        out[i] = theta[i] * e
    out[0] = y / 9.0 - 0.5 * s * e + 0.5 * (theta.shape[0] - 1)


@sgsim.jit
def funnel_log_density(theta, params):
    y = theta[0]
    s = 0.0
    for i in range(1, theta.shape[0]):
        s += theta[i] * theta[i]
    return -(y * y) / 18.0 - 0.5 * s * np.exp(-y) - 0.5 * (theta.shape[0] - 1) * y


def targets() -> dict:
    out = {"numba (by hand)": sgsim.targets.Target("funnel", D + 1, funnel_grad_u, funnel_log_density, ())}
    try:
        import jax.numpy as jnp

        def log_p(v):
            return -(v["y"] ** 2) / 18.0 - 0.5 * jnp.sum(v["x"] ** 2) * jnp.exp(-v["y"]) - 0.5 * D * v["y"]

        out["JAX"] = sgsim.model(log_p, parameters={"y": (), "x": D}, name="funnel")
    except ImportError:
        print("JAX is not installed: pip install 'sgsim[jax]'")
    try:
        import torch

        def log_p_torch(v):
            return -(v["y"] ** 2) / 18.0 - 0.5 * torch.sum(v["x"] ** 2) * torch.exp(-v["y"]) - 0.5 * D * v["y"]

        out["PyTorch"] = sgsim.model(log_p_torch, parameters={"y": (), "x": D}, backend="torch", name="funnel")
    except ImportError:
        print("PyTorch is not installed: pip install 'sgsim[torch]'")

    def log_p_np(v):
        return -(v["y"] ** 2) / 18.0 - 0.5 * np.sum(v["x"] ** 2, axis=-1) * np.exp(-v["y"]) - 0.5 * D * v["y"]

    def grad_np(v):
        e = np.exp(-v["y"])
        s = np.sum(v["x"] ** 2, axis=-1)
        return {"y": -v["y"] / 9.0 + 0.5 * s * e - 0.5 * D, "x": -v["x"] * e[:, None]}

    out["NumPy gradient"] = sgsim.model(
        log_p_np, parameters={"y": (), "x": D}, backend="numpy", grad_log_density=grad_np, name="funnel"
    )
    return out


def per_step(target, n_chains: int, n_steps: int, reps: int) -> float:
    times = []
    for r in range(reps):
        result = sgsim.sample(target, "sgld", n_steps, step_size=1e-3, n_chains=n_chains, seed=r, storage="final")
        times.append(result.attrs["sampling_time_s"])
    return statistics.median(times) / n_steps / n_chains


def gradient_calls(target, n_chains: int, reps: int = 200) -> tuple[float, float]:
    """Seconds for the gradient of ``n_chains`` points: one vectorised call, and one call per chain."""
    grad = target.batched.grad_u
    points = np.random.default_rng(0).uniform(-1, 1, size=(n_chains, D + 1))
    rows = [points[c : c + 1] for c in range(n_chains)]
    grad(points, None)
    t0 = time.perf_counter()
    for _ in range(reps):
        grad(points, None)
    once = (time.perf_counter() - t0) / reps
    n = max(1, reps // max(1, n_chains // 4))
    t0 = time.perf_counter()
    for _ in range(n):
        for row in rows:
            grad(row, None)
    each = (time.perf_counter() - t0) / n
    return once, each


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    report: dict = {"ns_per_step_per_chain": {}, "fixed_us_per_step": {}, "gradient_call_us": {}}
    plan = {4: 20_000, 1000: 500}
    for name, target in targets().items():
        sgsim.sample(target, "sgld", 20, step_size=1e-3, n_chains=4, seed=0)  # compile apart
        row = {c: 1e9 * per_step(target, c, n, args.reps) for c, n in plan.items()}
        report["ns_per_step_per_chain"][name] = row
        report["fixed_us_per_step"][name] = 1e6 * per_step(target, 1, 20_000, args.reps)
        print(f"{name:>16}: " + ", ".join(f"{c} chains {v:10.0f} ns" for c, v in row.items())
              + f"; one chain {report['fixed_us_per_step'][name]:.1f} us per step")  # fmt: skip
        if target.batched is not None:
            calls = {c: tuple(1e6 * t for t in gradient_calls(target, c)) for c in plan}
            report["gradient_call_us"][name] = calls
            for c, (once, each) in calls.items():
                print(f"{'':>16}  gradient of {c} chains: one call {once:9.1f} us, a call per chain {each:9.1f} us")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=1)
    return report


if __name__ == "__main__":
    main()
