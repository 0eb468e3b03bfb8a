"""Theory at scale, each beside the general method in the same run.

1. The OU stationary covariance of constant SGD at D = 100 to 1000: sgsim's eigenbasis solve
   (:func:`sgsim.theory.ou.sgd_cov`) beside scipy's general continuous Lyapunov solver, on the
   same random SPD ``A`` and ``C`` (condition 100), with their agreement. Median of ``--reps``.
2. The exact law of SGLD (:func:`sgsim.theory.sgld_law`) at D = 500 over K = 1000 steps with
   ``V = 0.5 I`` (commuting with ``P``): the eigenbasis recursion (the variances; the dense
   covariances are built on first access, timed apart) beside the dense recursion, once.

    python benchmarks/bench_theory.py        # about a minute
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from scipy.linalg import solve_continuous_lyapunov

from sgsim.theory import ou

BATCH = 8


def spd(rng, d: int, kappa: float) -> np.ndarray:
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return q @ np.diag(np.exp(rng.uniform(0, np.log(kappa), d))) @ q.T


def timed(f, reps: int) -> tuple[float, np.ndarray]:
    times, out = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print("| D | sgsim eigenbasis ms | scipy general ms | max relative difference |\n|---:|---:|---:|---:|")
    for d in (100, 500, 1000):
        a, c = spd(rng, d, 100.0), spd(rng, d, 100.0)
        eps = 0.5 / np.linalg.eigvalsh(a)[-1]
        t_fast, fast = timed(lambda a=a, c=c, eps=eps: ou.sgd_cov(a, c, eps, BATCH), args.reps)
        t_gen, gen = timed(
            lambda a=a, c=c, eps=eps: solve_continuous_lyapunov(a, eps / BATCH * c), max(1, args.reps // 2)
        )
        diff = float(np.max(np.abs(fast - gen)) / np.max(np.abs(gen)))
        print(f"| {d} | {t_fast * 1e3:.1f} | {t_gen * 1e3:.1f} | {diff:.1e} |")
    from sgsim import dynamics
    from sgsim.theory import exact_law, sgld_law

    d, k = 500, 1000
    p = spd(rng, d, 100.0)
    alpha = np.full(k, 0.5 / np.linalg.eigvalsh(p)[-1])
    t0 = time.perf_counter()
    law = sgld_law(p, np.ones(d), alpha, 1.0, 0.5)
    t_law = time.perf_counter() - t0
    t0 = time.perf_counter()
    _ = law.cov
    t_cov = time.perf_counter() - t0
    step = dynamics.sgld_linear(p, np.ones(d), alpha, np.ones(k), 0.5 * np.eye(d))
    t0 = time.perf_counter()
    dense = exact_law._propagate_general(step, np.zeros(d), np.zeros((d, d)))
    t_dense = time.perf_counter() - t0
    diff = float(np.max(np.abs(law.cov[-1] - dense.cov[-1])) / np.max(np.abs(dense.cov[-1])))
    print(f"\nsgld_law, D = {d}, K = {k}: eigenbasis {t_law:.3f} s (dense covariances on access {t_cov:.2f} s)")
    print(f"dense recursion {t_dense:.2f} s; ratio {t_dense / t_law:.0f}x; last covariance agrees to {diff:.1e}")


if __name__ == "__main__":
    main()
