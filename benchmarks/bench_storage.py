"""Peak memory and result-file size under each storage mode, each case in a fresh process.

Cases (SGLD on the 25-Gaussian mixture, constant step 0.01, seed 0):

- ``wide``: 100,000 chains x 1,000 steps;
- ``long``: 1 chain x 100,000,000 steps with ``thin = 100,000``;

each with ``storage="draws"``, ``"final"`` and ``"moments"``. A child process runs the
case, writes the result with :func:`sgsim.io.write_result`, and reports its peak resident
memory (``ru_maxrss``) and the file's size. An sgsim without storage modes (run with
``PYTHONPATH`` pointing at an older checkout) is measured in its one mode, every draw.

    python benchmarks/bench_storage.py                  # about 2 minutes on 2 cores
    python benchmarks/bench_storage.py --cases long --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

CASES = {"wide": (100_000, 1_000, 1), "long": (1, 100_000_000, 100_000)}

CHILD = textwrap.dedent(
    """
    import json, resource, sys, time
    import numpy as np
    import sgsim
    from sgsim.io import write_result

    n_chains, n_steps, thin = (int(a) for a in sys.argv[1:4])
    storage, path = sys.argv[4], sys.argv[5]
    kw = {} if storage == "legacy" else {"storage": storage}
    t = time.perf_counter()
    r = sgsim.sample("mixture_25", "sgld", n_steps, n_chains=n_chains, step_size=0.01, seed=0, thin=thin, **kw)
    sample_s = time.perf_counter() - t
    write_result(r, path)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"sample_s": sample_s, "peak_rss_bytes": peak}))
    """
)


def run_case(name: str, storage: str, tmp: Path) -> dict:
    n_chains, n_steps, thin = CASES[name]
    path = tmp / f"{name}_{storage}.nc"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(n_chains), str(n_steps), str(thin), storage, str(path)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return {"case": name, "storage": storage, "error": proc.stderr.strip().splitlines()[-1:]}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out.update(case=name, storage=storage, file_bytes=path.stat().st_size)
    path.unlink()
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="wide,long", help="comma-separated: wide, long")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    import sgsim

    modes = ("draws", "final", "moments") if "storage" in sgsim.sample.__code__.co_varnames else ("legacy",)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cases.split(","):
            for storage in modes:
                rows.append(run_case(name.strip(), storage, Path(tmp)))
                print(json.dumps(rows[-1]), flush=True)
    print(f"\nsgsim at {os.path.dirname(sgsim.__file__)}")
    print("| case | storage | peak memory | file | sampling s |\n|---|---|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['case']} | {r['storage']} | error: {r['error']} | | |")
            continue
        print(
            f"| {r['case']} | {r['storage']} | {r['peak_rss_bytes'] / 2**20:,.0f} MiB | "
            f"{r['file_bytes'] / 2**10:,.0f} KiB | {r['sample_s']:.1f} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
