"""Optional JAX baseline: cyclical SGLD / SGHMC on the 25-Gaussian mixture, timed on the CPU.

A reference point for sgsim's benchmarks, not part of sgsim: it imports nothing from sgsim and
measures nothing of it. JAX is optional; install it with ``pip install "sgsim[bench]"`` (or
``pip install jax``, the CPU build). Importing this module never needs JAX (it is imported
inside the functions); ``available()`` says whether it can be used.

    python benchmarks/jax_reference.py                              # 4 / 1000 / 100,000 chains
    python benchmarks/jax_reference.py --chains 4,1000 --reps 2 --dtype float32 --json out.json

Workload (the same as ``bench_sampling.py``): equal-weight mixture of 25 Gaussians,
means {-4,-2,0,2,4}^2, covariance 0.03 I, U = -log density; step sizes are the first N values
of a_k = a0/2 (cos(pi mod(k-1, L)/L) + 1), L = ceil(K/M), a0 = 0.09, M = 30, K = 50,000, passed
in as an array; temperature 1; every chain starts at (0, 0) and only the final state is kept.
  SGLD:  theta_k = theta_{k-1} - a_k grad U(theta_{k-1}) + sqrt(2 a_k) xi_k
  SGHMC (eta = 0.1, v_0 = 0): theta_k = theta_{k-1} + v_{k-1},
         v_k = (1 - eta) v_{k-1} - a_k grad U(theta_k) + sqrt(2 eta a_k) xi_k
grad U(x) = sum_j r_j (x - mu_j) / s2 with r = softmax_j(-|x - mu_j|^2 / (2 s2)) (stable).

Implementation: one jitted function per (method, chain count, dtype): ``jax.vmap`` over chains
of a per-chain ``jax.lax.scan`` over the steps whose carry is the state and the chain's key.
Random numbers: JAX's default PRNG (threefry); ``jax.random.split(jax.random.key(seed), C)``
gives one key per chain, and each step splits the chain's key in two (carry, subkey) and draws
xi_k = normal(subkey, (2,)) in the run's dtype. Timed run r (0-based) uses seed + r.

float64 needs ``jax.config.update("jax_enable_x64", True)``, which ``time_run`` / ``check`` do
when asked for float64. The setting is process-wide and is not undone; the float32 path gives
every array an explicit dtype, so it runs in float32 either way. All work is placed on JAX's
CPU device, with XLA's default threading.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np

MEANS = np.array([(x, y) for x in (-4.0, -2.0, 0.0, 2.0, 4.0) for y in (-4.0, -2.0, 0.0, 2.0, 4.0)])
S2, ETA = 0.03, 0.1  # component variance, SGHMC friction
A0, M_CYCLES, K_STEPS = 0.09, 30, 50_000
CYCLE = math.ceil(K_STEPS / M_CYCLES)  # 1667 steps per cycle
DTYPES = ("float32", "float64")
_COMPILED: dict = {}


def available() -> bool:
    """True if JAX can be imported."""
    try:
        import jax  # noqa: F401
    except ImportError:
        return False
    return True


def cyclical_schedule(K=K_STEPS, M=M_CYCLES, a0=A0):
    """a_k = a0/2 (cos(pi mod(k-1, ceil(K/M)) / ceil(K/M)) + 1), k = 1..K (as in handtuned_sgld.py)."""
    c, k = math.ceil(K / M), np.arange(1, K + 1)
    return a0 / 2.0 * (np.cos(np.pi * np.mod(k - 1, c) / c) + 1.0)


def default_steps(chains):
    """4 -> 50,000; 1000 -> 5,000; 100,000 -> 1,000 (as in handtuned_sgld.py)."""
    return min(K_STEPS, max(1000, round(5_000_000 / chains)))


def grad_u_numpy(theta):
    """Plain NumPy grad U, theta (N, 2), float64."""
    d = theta[:, None, :] - MEANS[None, :, :]
    d2 = (d * d).sum(-1)
    w = np.exp(-(d2 - d2.min(1, keepdims=True)) / (2.0 * S2))
    return (w[:, :, None] * d).sum(1) / (S2 * w.sum(1, keepdims=True))


def _setup(dtype):
    """Import JAX, enable 64-bit if asked (process-wide), return (jax, jnp, CPU device)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, not {dtype!r}")
    import jax
    import jax.numpy as jnp

    if dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    return jax, jnp, jax.devices("cpu")[0]


def _grad_u(means, x):
    """grad U at one point x (2,): softmax over the 25 components."""
    import jax

    d = x[None, :] - means  # (25, 2)
    r = jax.nn.softmax(-(d * d).sum(-1) / (2.0 * S2))
    return r @ d / S2


def _sampler(method, n_chains, dtype):
    """Jitted f(seed, step_sizes) -> final states (n_chains, 2), not yet compiled."""
    jax, jnp, _ = _setup(dtype)
    dt = jnp.dtype(dtype)
    means = jnp.asarray(MEANS, dtype=dt)

    def sgld_chain(key, steps):
        def body(carry, a):
            x, key = carry
            key, sub = jax.random.split(key)
            x = x - a * _grad_u(means, x) + jnp.sqrt(2.0 * a) * jax.random.normal(sub, (2,), dt)
            return (x, key), None

        (x, _), _ = jax.lax.scan(body, (jnp.zeros(2, dt), key), steps)
        return x

    def sghmc_chain(key, steps):
        def body(carry, a):
            x, v, key = carry
            key, sub = jax.random.split(key)
            x = x + v
            xi = jax.random.normal(sub, (2,), dt)
            v = (1.0 - ETA) * v - a * _grad_u(means, x) + jnp.sqrt(2.0 * ETA * a) * xi
            return (x, v, key), None

        (x, _, _), _ = jax.lax.scan(body, (jnp.zeros(2, dt), jnp.zeros(2, dt), key), steps)
        return x

    chain = {"sgld": sgld_chain, "sghmc": sghmc_chain}[method]

    def run(seed, steps):
        keys = jax.random.split(jax.random.key(seed), n_chains)
        return jax.vmap(chain, in_axes=(0, None))(keys, steps)

    return jax.jit(run)


def _compiled(method, n_chains, n_steps, dtype):
    """(executable, compile seconds), cached per (method, chains, steps, dtype): compile_s is the first's."""
    key = (method, n_chains, n_steps, dtype)
    if key not in _COMPILED:
        jax, jnp, cpu = _setup(dtype)
        with jax.default_device(cpu):
            t0 = time.perf_counter()
            spec = jax.ShapeDtypeStruct((n_steps,), jnp.dtype(dtype))
            exe = _sampler(method, n_chains, dtype).lower(jnp.int32(0), spec).compile()
            _COMPILED[key] = (exe, time.perf_counter() - t0)
    return _COMPILED[key]


def time_run(
    method: str, n_chains: int, step_sizes: np.ndarray, dtype: str = "float32", reps: int = 3, seed: int = 0
) -> dict:
    """Compile (timed apart), then `reps` timed runs (run r uses seed + r), each blocked until ready."""
    if method not in ("sgld", "sghmc") or n_chains < 1 or reps < 1 or len(step_sizes) < 1:
        raise ValueError("method must be 'sgld' or 'sghmc'; n_chains, reps and len(step_sizes) >= 1")
    jax, jnp, cpu = _setup(dtype)
    n_steps = len(step_sizes)
    exe, compile_s = _compiled(method, n_chains, n_steps, dtype)
    steps = jax.device_put(np.asarray(step_sizes, dtype=dtype), cpu).block_until_ready()
    times = []
    for r in range(reps):
        seed_r = jnp.int32(seed + r)
        t0 = time.perf_counter()
        out = exe(seed_r, steps).block_until_ready()
        times.append(time.perf_counter() - t0)
    ns = [t / (n_chains * n_steps) * 1e9 for t in times]
    return {"method": method, "n_chains": n_chains, "n_steps": n_steps, "dtype": dtype, "compile_s": compile_s,
            "times_s": times, "ns_per_step_per_chain_median": statistics.median(ns),
            "ns_per_step_per_chain_min": min(ns), "final_states": np.asarray(out), "jax_version": jax.__version__,
            "device": f"{cpu} ({os.cpu_count()} logical CPUs)"}  # fmt: skip


def check(dtype: str = "float64") -> dict:
    """Gradient vs NumPy on 1000 points; 1000 SGLD and SGHMC chains after one cycle: finite, 25 modes hit."""
    jax, jnp, cpu = _setup(dtype)
    pts = np.random.default_rng(2024).uniform(-6.0, 6.0, size=(1000, 2)).astype(dtype)
    ref = grad_u_numpy(pts.astype(np.float64))  # at the points as rounded to `dtype`
    means = jnp.asarray(MEANS, dtype=dtype)
    with jax.default_device(cpu):
        g = np.asarray(jax.jit(jax.vmap(lambda x: _grad_u(means, x)))(jnp.asarray(pts)), np.float64)
    err = float(np.max(np.abs(g - ref)))
    rel = err / max(1.0, float(np.max(np.abs(ref))))  # relative to the largest gradient component
    res = {"dtype": dtype, "grad_max_abs_err": err, "grad_rel_err": rel}
    res["grad_ok"] = err < 1e-10 if dtype == "float64" else rel < 1e-4
    for method in ("sgld", "sghmc"):
        fin = time_run(method, 1000, cyclical_schedule()[:CYCLE], dtype, reps=1, seed=11)["final_states"]
        d2 = ((fin.astype(np.float64)[:, None, :] - MEANS[None]) ** 2).sum(-1)
        cnt = np.bincount(d2.argmin(1), minlength=len(MEANS))
        r = res[method] = {
            "finite": bool(np.isfinite(fin).all()),
            "modes_hit": int((cnt > 0).sum()),
            "per_mode_min_max": [int(cnt.min()), int(cnt.max())],
            "median_dist_to_mode": float(np.median(np.sqrt(d2.min(1)))),
        }
        r["ok"] = r["finite"] and r["modes_hit"] == len(MEANS)
    res["ok"] = res["grad_ok"] and res["sgld"]["ok"] and res["sghmc"]["ok"]
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ints = lambda v: [int(x) for x in v.split(",") if x.strip()]  # noqa: E731
    ap.add_argument("--chains", type=ints, default=[4, 1000, 100_000], help="comma-separated chain counts")
    ap.add_argument("--steps", type=int, help="steps at every chain count (default 50,000 / 5,000 / 1,000 for 4 / "
                    "1000 / 100,000 chains)")  # fmt: skip
    ap.add_argument("--dtype", default="float32,float64", help="float32, float64 or both, comma-separated")
    ap.add_argument("--methods", default="sgld,sghmc", help="sgld, sghmc or both, comma-separated")
    ap.add_argument("--reps", type=int, default=3, help="timed runs per configuration (default 3)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the checks and results to this file")
    a = ap.parse_args(argv)
    dtypes, methods = a.dtype.split(","), a.methods.split(",")
    if not available():
        print('JAX is not installed: pip install "sgsim[bench]" (or pip install jax)', file=sys.stderr)
        return 2
    if set(dtypes) - set(DTYPES) or set(methods) - {"sgld", "sghmc"} or not a.chains or min(a.chains) < 1:
        ap.error("bad --dtype, --methods or --chains")
    if a.reps < 1 or (a.steps is not None and not 1 <= a.steps <= K_STEPS):
        ap.error(f"--reps must be >= 1 and --steps in [1, {K_STEPS}]")
    checks = {dt: check(dt) for dt in dtypes}
    for dt, c in checks.items():
        print(f"check {dt}: grad max|err| {c['grad_max_abs_err']:.1e} (relative {c['grad_rel_err']:.1e})")
        for m in ("sgld", "sghmc"):
            x = c[m]
            print(f"  {m}, 1000 chains after {CYCLE} steps: finite {x['finite']}, modes {x['modes_hit']}/25 "
                  f"({x['per_mode_min_max'][0]}-{x['per_mode_min_max'][1]} chains each), median distance to "
                  f"the nearest mean {x['median_dist_to_mode']:.3f} (target 0.204)")  # fmt: skip
        print(f"  {'ok' if c['ok'] else 'FAILED'}", flush=True)
    if not all(c["ok"] for c in checks.values()):
        print("correctness check FAILED: nothing timed", file=sys.stderr)
        return 1
    sched, rows = cyclical_schedule(), []
    for C in a.chains:
        N = a.steps or default_steps(C)
        for dt in dtypes:
            for m in methods:
                r = time_run(m, C, sched[:N], dtype=dt, reps=a.reps, seed=a.seed)
                rows.append({k: v for k, v in r.items() if k != "final_states"})
                t = ", ".join(f"{x:.2f}" for x in r["times_s"])
                print(f"  {m} {dt} {C} chains x {N} steps: {t} s", file=sys.stderr, flush=True)
    print(f"\nJAX {rows[0]['jax_version']} on {rows[0]['device']}; ns per step per chain")
    print(f"{'method':8s}{'dtype':>9s}{'chains':>8s}{'steps':>8s}{'compile s':>11s}{'median ns':>11s}{'min ns':>9s}")
    for x in rows:
        print(f"{x['method']:8s}{x['dtype']:>9s}{x['n_chains']:8d}{x['n_steps']:8d}{x['compile_s']:11.2f}"
              f"{x['ns_per_step_per_chain_median']:11.1f}{x['ns_per_step_per_chain_min']:9.1f}")  # fmt: skip
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"checks": checks, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
