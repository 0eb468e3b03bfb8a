"""Start-up cost of a process: ``import sgsim``, then its first sample, cold and from the disk cache.

Each figure comes from a fresh Python process (median of ``--reps``), timed inside it:

- ``import``: ``import sgsim``;
- ``first sample``: import plus the first ``sgsim.sample`` of 100 SGLD steps on 2 chains,
  result built (ArviZ and xarray are imported then), for the built-in 25-Gaussian mixture and
  for a user target (the README's banana, written to a temporary module); and of 100 SVGD
  steps on 2 ensembles of 50 particles on the mixture;
- *cold*: an empty sgsim cache directory (``SGSIM_CACHE_DIR``), so the chain loop is
  compiled and written to it; *warm*: a second process on the same directory, which loads it.

    python benchmarks/bench_start.py                       # about 1 minute
    cd /tmp && PYTHONPATH=/path/to/old/checkout python /path/to/benchmarks/bench_start.py --json old.json

(run it outside the repository when timing another checkout: ``python -c`` children put the
current directory first on the path).

An sgsim without the disk cache of loops shows the same figure cold and warm.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

BANANA = textwrap.dedent(
    """
    import numba
    import sgsim

    jit = getattr(sgsim, "jit", None) or numba.njit(cache=True)  # an sgsim before sgsim.jit

    @jit
    def grad_u(theta, params, out):
        r = theta[1] - params[0] * theta[0] ** 2
        out[0] = theta[0] - 2.0 * params[0] * theta[0] * r
        out[1] = r

    @jit
    def log_density(theta, params):
        r = theta[1] - params[0] * theta[0] ** 2
        return -0.5 * theta[0] ** 2 - 0.5 * r * r

    def banana(b=0.5):
        return sgsim.targets.Target("banana", 2, grad_u, log_density, (b,), grad_noise_cov=[[0.0, 0.0], [0.0, 0.0]],
                                    init_low=[-2.0, -1.0], init_high=[2.0, 3.0])
    """
)

CHILD = textwrap.dedent(
    """
    import json, sys, time
    t0 = time.perf_counter()
    import sgsim
    t1 = time.perf_counter()
    if sys.argv[1] == "banana":
        import bench_banana
        target = bench_banana.banana()
    else:
        target = sys.argv[1]
    more = {"n_particles": 50} if sys.argv[2] == "svgd" else {}
    sgsim.sample(target, sys.argv[2], 100, n_chains=2, step_size=0.01, seed=0, **more)
    t2 = time.perf_counter()
    print(json.dumps({"import_s": t1 - t0, "first_sample_s": t2 - t0}))
    """
)


def child(target: str, method: str, cache: Path, module_dir: Path) -> dict:
    env = {**os.environ, "SGSIM_CACHE_DIR": str(cache)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(module_dir), os.environ.get("PYTHONPATH", "")) if p)
    out = subprocess.run([sys.executable, "-c", CHILD, target, method], capture_output=True, text=True, env=env)
    if out.returncode != 0:  # e.g. an older sgsim that cannot build this target
        return {"import_s": float("nan"), "first_sample_s": float("nan"), "error": out.stderr.strip()[-300:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3, help="processes per figure (default 3)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        module_dir = Path(tmp)
        (module_dir / "bench_banana.py").write_text(BANANA)
        for target, method in (("mixture_25", "sgld"), ("banana", "sgld"), ("mixture_25", "svgd")):
            cold, warm = [], []
            for rep in range(args.reps):
                cache = module_dir / f"cache_{target}_{method}_{rep}"
                cold.append(child(target, method, cache, module_dir))
                warm.append(child(target, method, cache, module_dir))
            for name, runs in (("cold", cold), ("warm", warm)):
                rows.append(
                    {
                        "target": target,
                        "method": method,
                        "cache": name,
                        "import_s": statistics.median(r["import_s"] for r in runs),
                        "first_sample_s": statistics.median(r["first_sample_s"] for r in runs),
                    }
                )
    import sgsim

    print(f"sgsim {sgsim.__version__} at {os.path.dirname(sgsim.__file__)}")
    print("| target | method | cache | import sgsim s | import + first sample s |\n|---|---|---|---:|---:|")
    for r in rows:
        print(f"| {r['target']} | {r['method']} | {r['cache']} | {r['import_s']:.2f} | {r['first_sample_s']:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
