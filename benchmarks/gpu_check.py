"""One prepared check of the GPU path and the Torch backend on a GPU machine: install, test, measure.

    bash benchmarks/gpu_wheels.sh                  # here, with the network: the wheels, in .whl/gpu-check
    bash benchmarks/gpu_check.sh OUTDIR            # on the GPU machine (python3 there), the wheels carried
    bash benchmarks/gpu_check.sh OUTDIR --host     # the dry run on this CPU, at tiny sizes

Stages, each a child process under its own time limit, the limits summing to at most
``--budget`` seconds (510 by default, within one call of 9 minutes):

1. ``install``: the carried wheels (sgsim's own and the pure-Python packages the machine lacks)
   into a private folder with ``pip install --no-index --find-links``, no dependency resolution
   (the machine's NumPy, SciPy, numba, xarray, ... are used as they are); every later stage
   runs with that folder first on ``PYTHONPATH``, so it imports the installed sgsim, not this
   checkout's source.
2. ``probe``: the environment (Python, package versions, which sgsim was imported, compilers,
   the CUDA device as CuPy, PyTorch and JAX see it, ``nvidia-smi``), and every requirement of
   the carried packages that the environment does not meet.
3. ``tests``: ``tests/test_gpu.py`` and the Torch backend's CUDA tests (``TORCH_CUDA_TESTS``), on
   8 workers where pytest-xdist is installed, their outcome read from a JUnit XML report.
4. ``bench_gpu``: ``benchmarks/bench_gpu.py`` at 10^6 and 10^7 chains, float32 and float64,
   kernel time apart from the sampling loop and the whole call, the CPU path and JAX in the
   same run, device memory per storage mode beside ``sgsim.gpu.device_bytes``.
5. ``torch_fp32``, ``torch_bf16``: ``benchmarks/bench_torch.py`` with ResNet-18 on synthetic
   CIFAR-shaped batches of 128, in fp32, then in bf16 autocast with channels-last:
   ``torch.optim.SGD`` with momentum, sgsim's SGHMC and SGLD, and the per-parameter SGHMC loop.

Written into OUTDIR: ``gpu_check.log`` (every stage's output) and ``gpu_check.json`` (the
stages, the environment, the tests' outcome, both benchmarks' figures, and the checks against
issue 25's targets: SGLD at most 15 ps per step per chain and SGHMC at most 30 in float32 at
10^6 and 10^7 chains, sgsim's optimizers at least 95 % of SGD's images/s). The last line
printed is a one-line summary. With ``--host`` the same stages run on this machine at tiny
sizes (``backend="gpu-host"``, Torch on the CPU): a dry run of the script, whose figures are
not GPU figures and are checked against no target.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = "sgsim-gpu-check/1"
STAGES = ("install", "probe", "tests", "bench_gpu", "torch_fp32", "torch_bf16")
#: seconds per stage on the GPU machine (sum 500) and in the dry run on 2 CPU cores
TIMEOUTS = {
    "gpu": {"install": 40, "probe": 35, "tests": 165, "bench_gpu": 170, "torch_fp32": 45, "torch_bf16": 45},
    "host": {"install": 120, "probe": 120, "tests": 900, "bench_gpu": 400, "torch_fp32": 240, "torch_bf16": 240},
}
#: the issue's targets: ps per step per chain in float32 (at most), sgsim over SGD images/s (at least)
PS_LIMITS = {"sgld": 15.0, "sghmc": 30.0}
#: the GPU section's chain counts: the issue's on the GPU, tiny ones in the dry run
CHAINS = {"gpu": (1_000_000, 10_000_000), "host": (500, 2000)}
TORCH_RATIO = 0.95
TORCH_BASELINE = "torch SGD momentum"
TORCH_SGSIM = ("sgsim SGHMC", "sgsim SGLD")
#: a skip whose reason names this wants a device (test_gpu's "needs CuPy and a CUDA device",
#: the Torch tests' "no CUDA device" and "needs a CUDA device")
GPU_SKIP_REASON = "CUDA device"
#: the Torch backend's tests that need a CUDA device, run beside tests/test_gpu.py
TORCH_CUDA_TESTS = (
    "tests/test_torch_particles.py::test_a_cuda_ensemble_takes_the_cpu_steps",
    "tests/test_torch_store.py::test_cuda_parameters_go_to_pinned_memory_and_come_back_exactly",
)
#: packages whose versions the probe records
PACKAGES = (
    "sgsim", "numpy", "scipy", "numba", "numba-cuda", "pandas", "xarray", "arviz", "h5netcdf", "h5py",
    "xarray-einstats", "platformdirs", "matplotlib", "tqdm", "threadpoolctl", "torch", "cupy-cuda12x",
    "cupy-cuda13x", "jax", "jaxlib", "pytest", "pytest-xdist", "hypothesis", "packaging",
)  # fmt: skip


# ----------------------------------------------------------------------------- arguments and plan


def parse_args(argv=None) -> argparse.Namespace:
    """The command line: ``OUTDIR [--host] [--wheels DIR] [--budget S] [--stages a,b] [--python P]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path, help="where gpu_check.json and gpu_check.log are written")
    parser.add_argument("--host", action="store_true", help="the dry run on this CPU at tiny sizes")
    parser.add_argument("--wheels", type=Path, default=ROOT / ".whl" / "gpu-check", help="the carried wheels")
    parser.add_argument("--budget", type=float, default=None, help="seconds for all stages (510; --host 1800)")
    parser.add_argument("--stages", default=",".join(STAGES), help=f"a comma-separated subset of {STAGES}")
    parser.add_argument("--python", default=sys.executable, help="the interpreter the stages run")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (installed wheels, stage files)")
    parser.add_argument("--probe", type=Path, help=argparse.SUPPRESS)  # internal: the probe stage's child
    parser.add_argument("--dists", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    stages = [s for s in args.stages.split(",") if s]
    unknown = sorted(set(stages) - set(STAGES))
    if unknown:
        parser.error(f"unknown stages {unknown}: choose from {STAGES}")
    args.stages = [s for s in STAGES if s in stages]
    if args.budget is None:
        args.budget = 1800.0 if args.host else 510.0
    if args.budget <= 0:
        parser.error("--budget must be positive")
    args.mode = "host" if args.host else "gpu"
    return args


@dataclass
class Stage:
    """One stage: its command, its time limit, what it adds to the environment, the file it writes."""

    name: str
    command: list[str]
    timeout: float
    env: dict = field(default_factory=dict)
    output: Path | None = None


def wheel_files(wheels: Path) -> list[Path]:
    """The ``.whl`` files in ``wheels``, sorted."""
    return sorted(wheels.glob("*.whl")) if wheels.is_dir() else []


def dist_name(wheel: Path) -> str:
    """A wheel's distribution name, normalised (``xarray_einstats-0.9.1-py3-none-any.whl`` -> ``xarray-einstats``)."""
    return re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def find_nvrtc() -> str | None:
    """A path of the NVRTC library (for ``tests/test_gpu.py``'s NVRTC tests, through ``SGSIM_NVRTC``), or None.

    Looked for on the loader's path, in the CUDA Toolkit's folders and in the NVIDIA packages of
    this interpreter's ``site-packages`` (where PyTorch's and CuPy's CUDA libraries are).
    """
    import ctypes.util
    import glob
    import site

    found = ctypes.util.find_library("nvrtc")
    if found:
        return found
    roots = [*site.getsitepackages(), site.getusersitepackages()]
    patterns = ["/usr/local/cuda*/lib64/libnvrtc.so*", "/usr/local/cuda*/targets/*/lib/libnvrtc.so*"]
    patterns += [f"{r}/nvidia/{sub}/lib/libnvrtc.so*" for r in roots for sub in ("cuda_nvrtc", "cu13", "cu12")]
    for pattern in patterns:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def plan(args, work: Path) -> list[Stage]:
    """The stages to run, in order, with their commands and time limits (sizes by ``args.mode``)."""
    py = args.python
    site = work / "site"
    host = args.mode == "host"
    limits = TIMEOUTS[args.mode]
    wheels = wheel_files(args.wheels)
    dists = ",".join(dist_name(w) for w in wheels)
    # -P: the working directory is not put on sys.path, so the installed sgsim is imported
    isolate = ["-P"] if sys.version_info >= (3, 11) else []
    chains = [str(n) for n in CHAINS[args.mode]]
    bench_sizes = ["--chains", *chains, "--reps", "1" if host else "3"]
    # the CPU path at 10^5 chains and the memory at 10^7 on the GPU; at the largest tiny count on the host
    bench_sizes += ["--host", "--cpu-chains", chains[-1], "--memory-chains", chains[-1]] if host else []
    bench_sizes += [] if host else ["--memory-chains", "10000000"]
    stages = {
        "install": Stage(
            "install",
            [
                py,
                "-m",
                "pip",
                "install",
                "--no-index",
                "--find-links",
                str(args.wheels),
                "--no-deps",
                "--no-compile",
                "--no-cache-dir",
                "--disable-pip-version-check",
                "--target",
                str(site),
                *map(str, wheels),
            ],
            limits["install"],
        ),  # fmt: skip
        "probe": Stage(
            "probe",
            [
                py,
                *isolate,
                str(Path(__file__).resolve()),
                str(args.outdir),
                "--probe",
                str(work / "probe.json"),
                "--dists",
                dists,
            ],
            limits["probe"],
            output=work / "probe.json",
        ),  # fmt: skip
        "tests": Stage(
            "tests",
            [
                py,
                *isolate,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                # pytest-benchmark (where installed) stops a run under xdist with a warning-turned-error
                "-p",
                "no:benchmark",
                "tests/test_gpu.py",
                *TORCH_CUDA_TESTS,
                "--durations",
                "15",
                "--junitxml",
                str(work / "junit.xml"),
                *([] if host or not _has("xdist") else ["-n", "8"]),
            ],
            limits["tests"],
            output=work / "junit.xml",
        ),  # fmt: skip
        "bench_gpu": Stage(
            "bench_gpu",
            [py, "benchmarks/bench_gpu.py", "--json", str(work / "bench_gpu.json"), *bench_sizes],
            limits["bench_gpu"],
            output=work / "bench_gpu.json",
        ),
    }
    for precision, extra in (("fp32", []), ("bf16", ["--amp", "bf16", "--channels-last"])):
        size = (
            ["--device", "cpu", "--width", "8", "--batch", "8", "--steps", "2", "--warmup", "1", "--step-reps", "3"]
            if host
            else ["--device", "cuda", "--width", "64", "--batch", "128", "--steps", "100", "--warmup", "5",
                  "--step-reps", "30"]
        )  # fmt: skip
        out = work / f"torch_{precision}.json"
        stages[f"torch_{precision}"] = Stage(
            f"torch_{precision}",
            [py, "benchmarks/bench_torch.py", "--model", "resnet18", *size, *extra, "--json", str(out)],
            limits[f"torch_{precision}"],
            output=out,
        )
    env = {
        "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "PYTHONUNBUFFERED": "1",
        # JAX would otherwise take 75 % of the device's memory at its first use, before CuPy runs
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
        "MPLBACKEND": "Agg",
    }
    if host:
        env["CUDA_VISIBLE_DEVICES"] = ""  # the dry run is a CPU run even where a GPU is visible
    for stage in stages.values():
        if stage.name != "install":
            stage.env = dict(env)
    nvrtc = find_nvrtc()
    if nvrtc and "SGSIM_NVRTC" not in os.environ:
        stages["tests"].env["SGSIM_NVRTC"] = nvrtc  # the tests that compile every kernel with NVRTC
    return [stages[name] for name in args.stages]


# ----------------------------------------------------------------------------- running a stage


def run_stage(stage: Stage, timeout: float, log, echo=sys.stdout) -> dict:
    """Run ``stage`` for at most ``timeout`` seconds, its output into ``log`` and ``echo``.

    The stage runs in its own process group, which is killed whole at the time limit.

    Returns
    -------
    dict
        ``rc`` (None when killed), ``timed_out``, ``wall_s``, ``timeout_s`` and ``command``.
    """
    header = f"\n===== {stage.name}: {' '.join(stage.command)} (limit {timeout:.0f} s)\n"
    for stream in (log, echo):
        stream.write(header)
        stream.flush()
    env = {**os.environ, **stage.env}
    t0 = time.monotonic()
    killed = threading.Event()
    with subprocess.Popen(
        stage.command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        errors="replace", start_new_session=True,
    ) as proc:  # fmt: skip

        def kill():
            if proc.poll() is not None:  # it ended just before its limit
                return
            killed.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                echo.write(line)
            rc = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                kill()
                proc.wait()
    wall = time.monotonic() - t0
    timed_out = killed.is_set()
    footer = f"===== {stage.name}: {'timed out' if timed_out else f'exit {rc}'} after {wall:.1f} s\n"
    for stream in (log, echo):
        stream.write(footer)
        stream.flush()
    return {
        "rc": None if timed_out else rc,
        "timed_out": timed_out,
        "wall_s": round(wall, 2),
        "timeout_s": round(timeout, 1),
        "command": stage.command,
    }


# ----------------------------------------------------------------------------- the probe (a child process)


def unmet_requirements(dists) -> list[str]:
    """The requirements of the installed distributions ``dists`` that this environment does not meet."""
    from importlib import metadata

    from packaging.requirements import Requirement

    unmet = []
    for name in dists:
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            unmet.append(f"{name}: not installed")
            continue
        for text in requires:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue  # an extra's requirement, or one for another platform
            try:
                have = metadata.version(req.name)
            except metadata.PackageNotFoundError:
                unmet.append(f"{name} needs {req}: not installed")
                continue
            if req.specifier and not req.specifier.contains(have, prereleases=True):
                unmet.append(f"{name} needs {req}: {have} is installed")
    return unmet


def _run(command: list[str]) -> str | None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    return (done.stdout + done.stderr).strip()


def probe(dists) -> dict:
    """The environment the stages run in, as a JSON-ready dict (each part's failure recorded, not raised)."""
    import platform
    from importlib import metadata

    info: dict = {"python": platform.python_version(), "executable": sys.executable, "machine": platform.machine()}
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    info["packages"] = versions
    try:
        info["unmet_requirements"] = unmet_requirements(dists)
    except Exception as exc:  # packaging missing: recorded
        info["unmet_requirements"] = [f"not checked: {type(exc).__name__}: {exc}"]
    try:
        import sgsim

        info["sgsim_file"] = sgsim.__file__
        from sgsim.gpu import host

        info["cxx"] = host.compiler()
    except Exception as exc:
        info["sgsim_error"] = f"{type(exc).__name__}: {exc}"
    info["nvcc"] = shutil.which("nvcc")
    info["nvidia_smi"] = (
        _run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,clocks.max.sm", "--format=csv,noheader"])
        if shutil.which("nvidia-smi")
        else None
    )
    try:
        from sgsim.gpu import runner

        info["cupy_device"] = runner.executor("gpu").describe()
    except Exception as exc:
        info["cupy_device"] = f"{type(exc).__name__}: {exc}"
    try:
        import torch

        cuda = torch.cuda.is_available()
        info["torch_cuda"] = {
            "available": cuda,
            "device": torch.cuda.get_device_name(0) if cuda else None,
            "cuda": torch.version.cuda,
            "bf16": bool(cuda and torch.cuda.is_bf16_supported()),
        }
    except Exception as exc:
        info["torch_cuda"] = f"{type(exc).__name__}: {exc}"
    try:
        import jax

        info["jax_devices"] = [str(d) for d in jax.devices()]
    except Exception as exc:
        info["jax_devices"] = f"{type(exc).__name__}: {exc}"
    return info


# ----------------------------------------------------------------------------- reading the results


def read_junit(path: Path) -> dict | None:
    """Counts, failures and skip reasons of a pytest JUnit XML report (None if there is none)."""
    if not path.is_file():
        return None
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        return {"error": f"unreadable report: {exc}"}
    out = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "gpu_skipped": 0, "failures": [], "skip_reasons": {}}
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        kinds = {child.tag: child for child in case}
        if "failure" in kinds or "error" in kinds:
            tag = "failure" if "failure" in kinds else "error"
            out["failed" if tag == "failure" else "errors"] += 1
            out["failures"].append(f"{name}: {(kinds[tag].get('message') or '')[:300]}")
        elif "skipped" in kinds:
            out["skipped"] += 1
            reason = kinds["skipped"].get("message") or ""
            out["skip_reasons"][reason] = out["skip_reasons"].get(reason, 0) + 1
            out["gpu_skipped"] += GPU_SKIP_REASON in reason
        else:
            out["passed"] += 1
    return out


def read_json(path: Path | None):
    """The JSON at ``path``, or None when it is missing or unreadable."""
    if path is None or not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        return None


def _check(name, value, limit, op, unit, gpu):
    ok = None if value is None or not gpu else (value <= limit if op == "<=" else value >= limit)
    return {"name": name, "value": value, "limit": limit, "op": op, "unit": unit, "ok": ok}


def checks(report: dict) -> list[dict]:
    """The issue's targets against what was measured; ``ok`` is None where nothing was measured or in a dry run."""
    gpu = report["mode"] == "gpu"
    out = []
    tests = report.get("tests") or {}
    if "passed" in tests:
        out.append(_check("tests failed or errors", tests["failed"] + tests["errors"], 0, "<=", "tests", True))
        if gpu:
            out.append(_check("GPU tests skipped", tests["gpu_skipped"], 0, "<=", "tests", True))
    else:
        out.append(_check("tests failed or errors", None, 0, "<=", "tests", gpu))
    rows = (report.get("bench_gpu") or {}).get("gpu") or []
    for method, limit in PS_LIMITS.items():
        for n in CHAINS[report["mode"]]:
            row = next((r for r in rows if (r["method"], r["precision"], r["chains"]) == (method, "float32", n)), None)
            value = None if row is None else round(row["kernel_ps"], 2)
            out.append(_check(f"{method} float32 kernel at {n:.0e} chains", value, limit, "<=", "ps", gpu))
    for precision in ("fp32", "bf16"):
        rows_t = ((report.get("torch") or {}).get(precision) or {}).get("rows") or {}
        base = (rows_t.get(TORCH_BASELINE) or {}).get("images_per_s")
        for name in TORCH_SGSIM:
            mine = (rows_t.get(name) or {}).get("images_per_s")
            value = None if not base or mine is None else round(mine / base, 3)
            out.append(_check(f"{name} / SGD images/s, {precision}", value, TORCH_RATIO, ">=", "ratio", gpu))
    return out


def status(report: dict) -> str:
    """``PASS``, ``FAIL`` (a target missed, a test failed), ``INCOMPLETE`` (a stage failed, a figure
    missing) on the GPU; ``DRY-RUN-OK`` or ``DRY-RUN-INCOMPLETE`` with ``--host``."""
    stages_ok = all(s["rc"] == 0 for s in report["stages"].values())
    measured = all(c["value"] is not None for c in report["checks"])
    if report["mode"] == "host":
        failed_tests = any(c["name"] == "tests failed or errors" and c["ok"] is False for c in report["checks"])
        return "DRY-RUN-OK" if stages_ok and measured and not failed_tests else "DRY-RUN-INCOMPLETE"
    if any(c["ok"] is False for c in report["checks"]):
        return "FAIL"
    return "PASS" if stages_ok and measured else "INCOMPLETE"


def _fmt(value, spec):
    return "n/a" if value is None else format(value, spec)


def summary(report: dict) -> str:
    """The one line printed last: status, device, tests, the float32 kernel figures, Torch ratios, time."""
    env = report.get("environment") or {}
    device = env.get("nvidia_smi") or env.get("cupy_device") or "device unknown"
    if report["mode"] == "host":
        device = "host CPU (dry run: not GPU figures)"
    tests = report.get("tests") or {}
    part_tests = (
        f"tests {tests['passed']} passed, {tests['failed'] + tests['errors']} failed, {tests['skipped']} skipped"
        if "passed" in tests
        else "tests n/a"
    )
    by_name = {c["name"]: c["value"] for c in report["checks"]}
    kernel = [
        f"{m.upper()} f32 kernel "
        + "/".join(_fmt(by_name.get(f"{m} float32 kernel at {n:.0e} chains"), ".1f") for n in CHAINS[report["mode"]])
        + f" ps (<= {PS_LIMITS[m]:g})"
        for m in PS_LIMITS
    ]
    ratios = {p: [f"{n.split()[1]} {_fmt(by_name.get(f'{n} / SGD images/s, {p}'), '.2f')}" for n in TORCH_SGSIM]
              for p in ("fp32", "bf16")}  # fmt: skip
    torch_part = "Torch sgsim/SGD " + ", ".join(f"{p} {' '.join(r)}" for p, r in ratios.items())
    late = [name for name, s in report["stages"].items() if s["timed_out"]]
    broken = [name for name, s in report["stages"].items() if not s["timed_out"] and s["rc"] != 0]
    parts = [
        f"gpu_check {report['status']} [{report['mode']}] {device.splitlines()[0]}",
        part_tests,
        *kernel,
        f"{torch_part} (>= {TORCH_RATIO})",
    ]
    if late:
        parts.append(f"timed out: {','.join(late)}")
    if broken:
        parts.append(f"failed: {','.join(broken)}")
    parts.append(f"{report['wall_s']:.0f} s")
    return " | ".join(parts)


#: the report's keys and their types (``validate`` checks them)
REPORT_KEYS = {
    "schema": str,
    "mode": str,
    "started": str,
    "wall_s": float,
    "budget_s": float,
    "argv": list,
    "stages": dict,
    "environment": (dict, type(None)),
    "tests": (dict, type(None)),
    "bench_gpu": (dict, type(None)),
    "torch": dict,
    "checks": list,
    "status": str,
    "summary": str,
}


def validate(report: dict) -> None:
    """Raise ValueError if ``report`` lacks a key of :data:`REPORT_KEYS` or has one of another type."""
    for key, kind in REPORT_KEYS.items():
        if key not in report:
            raise ValueError(f"report lacks {key!r}")
        if not isinstance(report[key], kind):
            raise ValueError(f"report[{key!r}] is {type(report[key]).__name__}")
    if report["schema"] != SCHEMA or report["mode"] not in ("gpu", "host"):
        raise ValueError(f"schema {report['schema']!r}, mode {report['mode']!r}")
    for name, stage in report["stages"].items():
        if name not in STAGES or set(stage) != {"rc", "timed_out", "wall_s", "timeout_s", "command"}:
            raise ValueError(f"stage {name!r}: {sorted(stage)}")
    for check in report["checks"]:
        if set(check) != {"name", "value", "limit", "op", "unit", "ok"}:
            raise ValueError(f"check {check}")
    if "\n" in report["summary"]:
        raise ValueError("the summary is not one line")


def assemble(args, stage_results: dict, outputs: dict, started: str, wall: float, argv) -> dict:
    """The report of a run from its stages' results and output files."""
    report = {
        "schema": SCHEMA,
        "mode": args.mode,
        "started": started,
        "wall_s": round(float(wall), 1),
        "budget_s": float(args.budget),
        "argv": list(argv),
        "stages": stage_results,
        "environment": read_json(outputs.get("probe")),
        "tests": read_junit(outputs["tests"]) if outputs.get("tests") else None,
        "bench_gpu": read_json(outputs.get("bench_gpu")),
        "torch": {p: read_json(outputs.get(f"torch_{p}")) for p in ("fp32", "bf16")},
    }
    report["checks"] = checks(report)
    report["status"] = status(report)
    report["summary"] = ""
    report["summary"] = summary(report)
    return report


# ----------------------------------------------------------------------------- main


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.probe is not None:  # the probe stage's child process
        args.probe.write_text(json.dumps(probe([d for d in args.dists.split(",") if d]), indent=1))
        print(json.dumps(json.loads(args.probe.read_text()), indent=1))
        return 0
    if "install" in args.stages and not wheel_files(args.wheels):
        print(f"no wheels in {args.wheels}: run `bash benchmarks/gpu_wheels.sh` where the registry can be reached")
        return 2
    args.outdir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="sgsim-gpu-check-"))
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    t0 = time.monotonic()
    results, outputs = {}, {}
    with open(args.outdir / "gpu_check.log", "w") as log:
        log.write(f"gpu_check {args.mode} {started}: {' '.join(argv)}\nwork folder {work}\n")
        for stage in plan(args, work):
            left = args.budget - (time.monotonic() - t0)
            if left < 5:
                results[stage.name] = {"rc": None, "timed_out": True, "wall_s": 0.0, "timeout_s": 0.0,
                                       "command": stage.command}  # fmt: skip
                log.write(f"===== {stage.name}: not run, the budget is spent\n")
                continue
            results[stage.name] = run_stage(stage, min(stage.timeout, left), log)
            outputs[stage.name] = stage.output
            if stage.output is not None and stage.output.is_file():
                # kept beside the log as each stage ends: a run cut short still returns what it finished
                shutil.copy2(stage.output, args.outdir / stage.output.name)
        report = assemble(args, results, outputs, started, time.monotonic() - t0, argv)
        validate(report)
        (args.outdir / "gpu_check.json").write_text(json.dumps(report, indent=1))
        log.write(report["summary"] + "\n")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(report["summary"], flush=True)
    return 0 if report["status"] in ("PASS", "DRY-RUN-OK") else 1


if __name__ == "__main__":
    sys.exit(main())
