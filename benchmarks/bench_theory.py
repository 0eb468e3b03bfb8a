"""The OU stationary covariance of constant SGD at D = 100 to 1000: sgsim's eigenbasis solve
(:func:`sgsim.theory.ou.sgd_cov`) beside scipy's general continuous Lyapunov solver, timed in
the same run on the same random SPD ``A`` and ``C`` (condition 100), with the agreement of the
two. Median of ``--reps`` runs.

    python benchmarks/bench_theory.py        # about 30 seconds
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


if __name__ == "__main__":
    main()
