"""Constant SGD on the OU quadratic at D = 100: microseconds per step, one chain.

The loss of "Stochastic Gradient Descent as Approximate Bayesian Inference" (§3) with a random
SPD Hessian ``A`` and gradient-noise covariance ``C`` (condition 10), ``S = 10``, ``N = 1000``,
rate ``epsilon = 1 / lambda_max(A)``. Each step evaluates ``A theta`` and draws the minibatch
noise ``N(0, C / S)`` (a rotated Gaussian: a second matrix-vector product). Timed in the same
run, on the same problem:

- ``sgsim``: ``sgsim.sample(target, "sgd", K, storage="final")``, end to end (the second call:
  compilation apart), and ``sgd`` with a full preconditioner ``H`` (a third product);
- ``numba + BLAS``: a compiled loop calling ``np.dot`` for both products (what the issue names
  as the reference, 4.5 us there);
- ``NumPy``: the same loop in Python with ``A @ theta`` and ``L @ xi``.

    python benchmarks/bench_constant_sgd.py          # about 30 s
"""

from __future__ import annotations

import argparse
import statistics
import time

import numba
import numpy as np

import sgsim

D, S, N = 100, 10, 1000


def spd(rng, d: int, kappa: float) -> np.ndarray:
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return q @ np.diag(np.exp(rng.uniform(0, np.log(kappa), d))) @ q.T


@numba.njit(cache=False)
def numba_blas(a, chol, theta, eps, n_steps, seed):
    np.random.seed(seed)
    for _ in range(n_steps):
        xi = np.random.standard_normal(theta.shape[0])
        theta = theta - eps * (np.dot(a, theta) + np.dot(chol, xi))
    return theta


def numpy_loop(a, chol, theta, eps, n_steps, rng):
    for _ in range(n_steps):
        theta = theta - eps * (a @ theta + chol @ rng.standard_normal(theta.shape[0]))
    return theta


def median_time(f, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    a, c = spd(rng, D, 10.0), spd(rng, D, 10.0)
    h = spd(rng, D, 3.0) / 3.0
    target = sgsim.targets.ou_quadratic(a, c, S, N)
    eps = 1.0 / np.linalg.eigvalsh(a)[-1]
    eps_h = 1.0 / np.max(np.linalg.eigvals(h @ a).real)
    chol = np.linalg.cholesky(c / S)
    k = args.steps
    theta0 = np.zeros(D)

    def run(method, rate, **options):
        return lambda: sgsim.sample(target, method, k, step_size=rate, seed=1, storage="final", init=theta0, **options)

    rows = {
        "sgsim sgd (identity H)": run("sgd", eps),
        "sgsim sgd (full H)": run("sgd", eps_h, preconditioner=h),
        "numba + BLAS np.dot": lambda: numba_blas(a, chol, theta0, eps, k, 1),
        "NumPy loop": lambda: numpy_loop(a, chol, theta0, eps, k // 10, np.random.default_rng(1)),
    }
    print(f"constant SGD, D = {D}, {k} steps (NumPy: {k // 10}), median of {args.reps}")
    print("| implementation | us / step |\n|---|---:|")
    for name, f in rows.items():
        f()  # compile
        per = median_time(f, args.reps) / (k // 10 if name == "NumPy loop" else k)
        print(f"| {name} | {per * 1e6:.2f} |")


if __name__ == "__main__":
    main()
