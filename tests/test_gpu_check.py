"""The GPU extras, the error without CuPy, and the prepared GPU check's driver (benchmarks/gpu_check.py).

The check itself runs on a GPU machine (and, as a dry run, with ``--host`` on a CPU in minutes);
here its pieces are tested: arguments, the plan of stages and their time limits, running a stage
under a limit, reading a JUnit report, the checks against the issue's targets, the report's
schema and the one-line summary.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import time
from pathlib import Path

import pytest

import sgsim
from sgsim._validate import ParameterError
from sgsim.gpu import device, runner

ROOT = Path(__file__).resolve().parent.parent


def _load():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # dataclasses resolve the module by name
    spec.loader.exec_module(module)
    return module


gc = _load()


# ----------------------------------------------------------------------------- the extras and the message


@pytest.fixture
def no_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` raises ImportError


def test_without_cupy_the_error_names_both_cuda_extras(no_cupy):
    for call in (
        lambda: runner.executor("gpu"),
        lambda: sgsim.sample("mixture_25", "sgld", 10, step_size=0.01, backend="gpu"),
    ):
        with pytest.raises(ParameterError) as info:
            call()
        assert info.value.parameter == "backend"
        message = str(info.value)
        assert "needs CuPy" in message
        assert '"sgsim[gpu-cuda12]"' in message and '"sgsim[gpu-cuda13]"' in message, message


def test_the_extras_the_message_names_exist_and_install_the_cupy_of_their_cuda():
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["gpu-cuda12"] == ["cupy-cuda12x>=13"]
    assert extras["gpu-cuda13"] == ["cupy-cuda13x>=14"]  # CuPy's CUDA 13 builds start at v14
    assert extras["gpu"] == ["sgsim[gpu-cuda12]"]  # the alias
    named = set(re.findall(r"sgsim\[([\w-]+)\]", device.INSTALL))
    assert named == {"gpu-cuda12", "gpu-cuda13"}
    assert named <= set(extras)
    # negative control: a name that is not an extra is caught by the same comparison
    assert not {"gpu-cuda11"} <= set(extras)


# ----------------------------------------------------------------------------- arguments and plan


def test_arguments_default_to_the_gpu_run_and_the_host_run_is_larger():
    args = gc.parse_args(["out"])
    assert (args.mode, args.budget, args.stages) == ("gpu", 510.0, list(gc.STAGES))
    assert args.wheels == ROOT / ".whl" / "gpu-check"
    host = gc.parse_args(["out", "--host", "--stages", "tests,install"])
    assert (host.mode, host.budget, host.stages) == ("host", 1800.0, ["install", "tests"])
    for bad in (["out", "--stages", "install,bogus"], ["out", "--budget", "0"], []):
        with pytest.raises(SystemExit):
            gc.parse_args(bad)


def test_the_gpu_plan_fits_in_one_call_and_runs_what_the_issue_asks(tmp_path):
    (tmp_path / "w").mkdir()
    for name in ("sgsim-0.1-py3-none-any.whl", "xarray_einstats-0.9.1-py3-none-any.whl"):
        (tmp_path / "w" / name).write_bytes(b"")
    args = gc.parse_args([str(tmp_path / "out"), "--wheels", str(tmp_path / "w")])
    stages = {s.name: s for s in gc.plan(args, tmp_path / "work")}
    assert list(stages) == list(gc.STAGES)
    # every stage's limit together within the budget, the budget within 9 minutes
    assert sum(s.timeout for s in stages.values()) <= args.budget <= 9 * 60
    install = stages["install"].command
    assert {"--no-index", "--find-links", "--no-deps", "--target"} <= set(install)
    assert install[-2:] == [str(tmp_path / "w" / n) for n in sorted(p.name for p in (tmp_path / "w").iterdir())]
    assert "xarray-einstats" in stages["probe"].command[-1].split(",")
    bench = stages["bench_gpu"].command
    assert bench[bench.index("--chains") + 1 : bench.index("--chains") + 3] == ["1000000", "10000000"]
    assert "--host" not in bench
    for name, extra in (("torch_fp32", set()), ("torch_bf16", {"--amp", "bf16", "--channels-last"})):
        cmd = stages[name].command
        assert cmd[cmd.index("--model") + 1] == "resnet18" and cmd[cmd.index("--batch") + 1] == "128"
        assert cmd[cmd.index("--device") + 1] == "cuda" and extra <= set(cmd)
        assert ("--amp" in cmd) == bool(extra)
    for stage in stages.values():
        if stage.name != "install":
            assert stage.env["PYTHONPATH"].split(":")[0] == str(tmp_path / "work" / "site")
    host = {s.name: s for s in gc.plan(gc.parse_args(["out", "--host"]), tmp_path / "work")}
    assert "--host" in host["bench_gpu"].command
    assert host["torch_bf16"].command[host["torch_bf16"].command.index("--device") + 1] == "cpu"
    assert host["tests"].env["CUDA_VISIBLE_DEVICES"] == ""


def test_a_stage_runs_under_its_limit_and_is_killed_whole_at_it(tmp_path):
    with (tmp_path / "log").open("w") as log, (tmp_path / "echo").open("w") as echo:
        ok = gc.Stage("probe", [sys.executable, "-c", "print('hello'); raise SystemExit(3)"], 30)
        res = gc.run_stage(ok, 30, log, echo)
        assert res["rc"] == 3 and not res["timed_out"]
        # a grandchild holding the output open: the whole process group must go at the limit
        slow = gc.Stage("tests", ["sh", "-c", "sleep 30 & sleep 30"], 0.5)
        t = time.monotonic()
        res = gc.run_stage(slow, 0.5, log, echo)
        assert res["timed_out"] and res["rc"] is None and time.monotonic() - t < 10
    text = (tmp_path / "log").read_text()
    assert "hello" in text and "exit 3" in text and "tests: timed out" in text


# ----------------------------------------------------------------------------- reading results


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_gpu" name="test_a"/>
<testcase classname="tests.test_gpu" name="test_b"/>
<testcase classname="tests.test_gpu" name="test_c"><failure message="assert 1 == 2">tb</failure></testcase>
<testcase classname="tests.test_gpu" name="test_d"><error message="boom">tb</error></testcase>
<testcase classname="tests.test_gpu" name="test_e"><skipped message="needs CuPy and a CUDA device"/></testcase>
<testcase classname="tests.test_gpu" name="test_f"><skipped message="nvcc is not installed"/></testcase>
<testcase classname="tests.test_torch_store" name="test_g"><skipped message="needs a CUDA device"/></testcase>
</testsuite></testsuites>"""


def test_the_junit_report_is_counted(tmp_path):
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    out = gc.read_junit(path)
    assert {k: out[k] for k in ("passed", "failed", "errors", "skipped", "gpu_skipped")} == {
        "passed": 2, "failed": 1, "errors": 1, "skipped": 3, "gpu_skipped": 2,
    }  # fmt: skip
    assert out["failures"][0] == "tests.test_gpu::test_c: assert 1 == 2"
    assert gc.read_junit(tmp_path / "missing.xml") is None


def _report(tmp_path, mode="gpu", sgld_ps=11.6, torch=True, failed=0):
    """A report assembled from synthetic stage outputs."""
    rows = [
        {"precision": p, "method": m, "chains": n, "kernel_ps": k, "sampling_ps": k + 1, "end_to_end_ps": k + 5}
        for p in ("float32", "float64")
        for m, k in (("sgld", sgld_ps), ("sghmc", 20.0))
        for n in gc.CHAINS[mode]
    ]
    (tmp_path / "bench.json").write_text(json.dumps({"gpu": rows, "memory": []}))
    torch_rows = {"torch SGD momentum": {"images_per_s": 1000.0}, "sgsim SGHMC": {"images_per_s": 990.0},
                  "sgsim SGLD": {"images_per_s": 960.0}}  # fmt: skip
    for p in ("fp32", "bf16"):
        (tmp_path / f"{p}.json").write_text(json.dumps({"rows": torch_rows}))
    (tmp_path / "junit.xml").write_text(
        JUNIT.replace('<failure message="assert 1 == 2">tb</failure>', "" if not failed else "<failure/>")
        .replace('<error message="boom">tb</error>', "")
        .replace("needs CuPy and a CUDA device", "other")
        .replace("needs a CUDA device", "other")
    )
    (tmp_path / "probe.json").write_text(json.dumps({"nvidia_smi": "NVIDIA H100 80GB HBM3, 81559 MiB"}))
    args = gc.parse_args(["out"] + (["--host"] if mode == "host" else []))
    stages = {s: {"rc": 0, "timed_out": False, "wall_s": 1.0, "timeout_s": 9.0, "command": ["x"]} for s in gc.STAGES}
    outputs = {"probe": tmp_path / "probe.json", "tests": tmp_path / "junit.xml", "bench_gpu": tmp_path / "bench.json"}
    if torch:
        outputs |= {"torch_fp32": tmp_path / "fp32.json", "torch_bf16": tmp_path / "bf16.json"}
    return gc.assemble(args, stages, outputs, "2026-01-01T00:00:00", 123.4, ["out"])


def test_checks_status_and_summary_of_a_passing_run(tmp_path):
    report = _report(tmp_path)
    gc.validate(report)
    json.loads(json.dumps(report))  # JSON-ready
    by_name = {c["name"]: c for c in report["checks"]}
    assert by_name["sgld float32 kernel at 1e+06 chains"] == {
        "name": "sgld float32 kernel at 1e+06 chains", "value": 11.6, "limit": 15.0, "op": "<=", "unit": "ps",
        "ok": True,
    }  # fmt: skip
    assert by_name["sgsim SGLD / SGD images/s, bf16"]["value"] == 0.96
    assert report["status"] == "PASS"
    line = report["summary"]
    assert "\n" not in line and line.startswith("gpu_check PASS [gpu] NVIDIA H100 80GB HBM3")
    assert "tests 4 passed, 0 failed, 3 skipped" in line
    assert "SGLD f32 kernel 11.6/11.6 ps (<= 15)" in line and "SGHMC f32 kernel 20.0/20.0 ps (<= 30)" in line
    assert "fp32 SGHMC 0.99 SGLD 0.96" in line and line.endswith("123 s")


def test_a_missed_target_fails_a_missing_figure_is_incomplete_and_a_dry_run_checks_no_target(tmp_path):
    # negative controls: the same checks reject SGLD at 16 ps, a failed test, and missing Torch figures
    slow = _report(tmp_path, sgld_ps=16.0)
    assert slow["status"] == "FAIL"
    assert [c["name"] for c in slow["checks"] if c["ok"] is False] == [
        "sgld float32 kernel at 1e+06 chains",
        "sgld float32 kernel at 1e+07 chains",
    ]
    assert _report(tmp_path, failed=1)["status"] == "FAIL"
    partial = _report(tmp_path, torch=False)
    assert partial["status"] == "INCOMPLETE" and "fp32 SGHMC n/a SGLD n/a" in partial["summary"]
    dry = _report(tmp_path, mode="host", sgld_ps=500.0)
    assert dry["status"] == "DRY-RUN-OK" and "dry run: not GPU figures" in dry["summary"]
    assert all(c["ok"] is None for c in dry["checks"] if c["unit"] != "tests")
    broken = dict(dry)
    del broken["checks"]
    with pytest.raises(ValueError, match="lacks 'checks'"):
        gc.validate(broken)


def test_unmet_requirements_are_named(tmp_path, monkeypatch):
    info = tmp_path / "fake_dist-1.0.dist-info"
    info.mkdir()
    info.joinpath("METADATA").write_text(
        "Metadata-Version: 2.1\nName: fake-dist\nVersion: 1.0\nRequires-Dist: numpy>=999\n"
        "Requires-Dist: no-such-package-xyz\nRequires-Dist: pytest\nRequires-Dist: other-xyz; extra == 'docs'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    unmet = gc.unmet_requirements(["fake-dist", "absent-dist-xyz"])
    assert len(unmet) == 3
    assert unmet[0].startswith("fake-dist needs numpy>=999: ") and unmet[0].endswith("is installed")
    assert unmet[1] == "fake-dist needs no-such-package-xyz: not installed"
    assert unmet[2] == "absent-dist-xyz: not installed"
    assert gc.dist_name(Path("xarray_einstats-0.9.1-py3-none-any.whl")) == "xarray-einstats"
