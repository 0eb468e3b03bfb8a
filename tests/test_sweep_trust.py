"""Sweeps under faults: keys that follow the cell's code, defaults and sgsim's version; two
drivers on one store; a store changed under a reader; a killed driver's workers; Ctrl-C; a
pool worker that dies; an unwritable store."""

import importlib
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import sweep_trust_cells as tc

import sgsim
from sgsim import sweep
from sgsim._validate import ParameterError

HERE = Path(__file__).resolve().parent

MODULE = """
def cell(a, seed, scale={scale}):
    # {comment}
    return {{"x": a * scale + seed}}
"""


def _module(tmp_path, monkeypatch, scale, comment="v1"):
    """(Re)write and (re)import the cell module ``keyed_cells`` from ``tmp_path``."""
    (tmp_path / "keyed_cells.py").write_text(MODULE.format(scale=scale, comment=comment))
    if "keyed_cells" in sys.modules:
        return importlib.reload(sys.modules["keyed_cells"])
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module("keyed_cells")


def test_keys_follow_defaults_code_and_sgsim_version(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # reload from the source, never a stale .pyc
    monkeypatch.delitem(sys.modules, "keyed_cells", raising=False)
    store = tmp_path / "store"
    _module(tmp_path, monkeypatch, scale=1.0)
    first = sweep.grid("keyed_cells:cell", 2, a=[1.0, 2.0])
    assert sweep.run_sweep(first, store).n_computed == 4
    # a changed default: new keys, computed again, and the new results are the ones returned
    _module(tmp_path, monkeypatch, scale=3.0)
    second = sweep.grid("keyed_cells:cell", 2, a=[1.0, 2.0])
    assert float(sweep.compute(second[:1], store)[0]["x"]) == 3.0 * 1.0 + 0
    assert {c.key for c in second}.isdisjoint(c.key for c in first)
    assert sweep.run_sweep(second, store).n_computed == 3
    assert first[0].arguments == {"a": 1.0, "scale": 1.0} and second[0].arguments["scale"] == 3.0
    # a change of the module's code alone: a new key under reuse="exact"; "any" reuses the
    # result of the same function, arguments and seed
    _module(tmp_path, monkeypatch, scale=3.0, comment="v2, same results")
    third = sweep.grid("keyed_cells:cell", 2, a=[1.0, 2.0])
    assert [c.identity for c in third] == [c.identity for c in second]
    assert {c.key for c in third}.isdisjoint(c.key for c in second)
    assert sweep.run_sweep(third, store, reuse="any").n_found == 4
    assert sweep.run_sweep(third, store).n_computed == 4
    # another sgsim version: another key
    before = third[0].key
    monkeypatch.setattr(sgsim, "__version__", sgsim.__version__ + ".post1")
    assert sweep.Cell("keyed_cells:cell", {"a": 1.0}, 0).key != before
    with pytest.raises(ParameterError) as info:
        sweep.Cell("keyed_cells:cell", {"b": 1.0}, 0)  # an argument the function does not take
    assert info.value.parameter == "params"
    with pytest.raises(ParameterError) as info:
        sweep.run_sweep(third, store, reuse="sometimes")
    assert info.value.parameter == "reuse"


def test_a_reader_never_deletes_what_another_driver_wrote(tmp_path, monkeypatch):
    # Store.read used to unlink a file it could not verify: by name, after reading it. A file
    # another driver had just renamed into place in between (a valid result) was deleted.
    store = sweep.Store(tmp_path)
    cell = sweep.Cell(tc.logged, {"a": 1.0, "log": str(tmp_path / "log")}, 0)
    store.path(cell).write_bytes(b"PK\x03\x04 a truncated file")
    real_load = np.load

    def racing_load(fh, **kwargs):
        sweep.Store(tmp_path).write(cell, {"x": np.float64(1.0)})  # the other driver, mid-read
        return real_load(fh, **kwargs)

    monkeypatch.setattr(np, "load", racing_load)
    assert store.read(cell) is None  # what this reader opened was corrupt
    monkeypatch.setattr(np, "load", real_load)
    assert float(store.read(cell)["x"]) == 1.0  # and the other driver's file is still there


TWO_DRIVERS = """
import json, os, sys, time
sys.path.insert(0, {here!r})
import sweep_trust_cells
from sgsim import sweep

if __name__ == "__main__":
    store, log, go = sys.argv[1:4]
    cells = sweep.grid(sweep_trust_cells.logged, 4, fixed={{"log": log, "pause": 0.1}}, a=[0.0, 1.0])
    open(go + "." + str(os.getpid()), "w").close()
    while not os.path.exists(go):
        time.sleep(0.005)
    r = sweep.run_sweep(cells, store)
    print(json.dumps([r.n_found, r.n_computed, getattr(r, "n_elsewhere", 0)]))
"""


def _script(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text.format(here=str(HERE))))
    return str(path)


def _wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_two_drivers_on_one_store_compute_each_cell_once(tmp_path):
    script = _script(tmp_path, "two.py", TWO_DRIVERS)
    log, go = tmp_path / "log", tmp_path / "go"
    args = [sys.executable, script, str(tmp_path / "store"), str(log), str(go)]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    _wait_for(lambda: len(list(tmp_path.glob("go.*"))) == 2, 60, "both drivers")
    go.touch()  # both start the sweep at once
    reports = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    print(f"two drivers: [found, computed, by the other] = {reports}")
    assert all(p.returncode == 0 for p in procs)
    lines = log.read_text().splitlines()
    computed = sorted((float(a), int(s)) for _, a, s in (line.split() for line in lines))
    assert computed == sorted((a, s) for a in (0.0, 1.0) for s in range(4))  # each of the 8 cells once
    assert sum(r[1] for r in reports) == 8 and all(r[1] > 0 for r in reports)  # and the work was shared
    assert len(list((tmp_path / "store").glob("*.npz"))) == 8 and not list((tmp_path / "store").glob("*.claim"))


DRIVER = """
import os, sys
sys.path.insert(0, {here!r})
import sweep_trust_cells
from sgsim import sweep

if __name__ == "__main__":
    store, folder, executor = sys.argv[1:4]
    fixed = {{"folder": folder, "pause": 0.3}}
    cells = sweep.grid(sweep_trust_cells.report_pid_and_sleep, 6, fixed=fixed, a=[0.0, 1.0])
    sweep.run_sweep(cells, store, executor, n_workers=2)
"""


def _alive(pid):
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status  # a zombie has exited


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_killed_drivers_pool_workers_exit_with_it(tmp_path):
    script = _script(tmp_path, "driver.py", DRIVER)
    folder = tmp_path / "pids"
    folder.mkdir()
    proc = subprocess.Popen([sys.executable, script, str(tmp_path / "store"), str(folder), "processes"])
    _wait_for(lambda: len(list(folder.iterdir())) >= 2, 60, "two workers")
    workers = [int(p.name) for p in folder.iterdir()]
    proc.kill()  # kill -9 of the driver alone
    proc.wait()
    start = time.monotonic()
    try:
        _wait_for(lambda: not any(_alive(p) for p in workers), 5, f"workers {workers} to exit")
    finally:
        for pid in workers:  # never leave them behind, whatever happened
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    print(f"workers gone {time.monotonic() - start:.2f} s after the driver's kill -9")


def test_ctrl_c_says_what_is_saved_in_the_api_and_the_command(tmp_path):
    script = _script(tmp_path, "driver.py", DRIVER)
    config = tmp_path / "sweep.json"
    config.write_text(
        json.dumps(
            {
                "function": "sweep_trust_cells:report_pid_and_sleep",
                "seeds": 6,
                "grid": {"a": [0.0, 1.0]},
                "fixed": {"folder": str(tmp_path / "cli_pids"), "pause": 0.5},
                "store": str(tmp_path / "cli_store"),
            }
        )
    )
    (tmp_path / "cli_pids").mkdir()
    (tmp_path / "pids").mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    # each run is started, waited for and interrupted in turn: started together, a loaded machine
    # let the first one finish all its cells while the second was still importing
    runs = {
        "api": lambda: subprocess.Popen(
            [sys.executable, script, str(tmp_path / "store"), str(tmp_path / "pids"), "processes"],
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        ),
        "cli": lambda: subprocess.Popen(
            [sys.executable, "-m", "sgsim", "sweep", str(config), "--quiet"],
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        ),
    }
    stores = {"api": tmp_path / "store", "cli": tmp_path / "cli_store"}
    latency = {}
    for name, start_run in runs.items():
        proc = start_run()
        _wait_for(lambda: len(list(stores[name].glob("*.npz"))) >= 2, 60, f"two cells of {name}")  # noqa: B023
        os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C in a terminal: to the driver and its workers
        start = time.monotonic()
        err = proc.communicate(timeout=30)[1]
        latency[name] = round(time.monotonic() - start, 2)
        saved = len(list(stores[name].glob("*.npz")))
        lines = [line for line in err.splitlines() if line.strip()]
        said = f"sgsim sweep: interrupted; {saved} of 12 cells are finished and saved in {stores[name]} "
        if name == "cli":  # one line, status 130
            assert proc.returncode == 130 and len(lines) == 1 and lines[0].startswith(said), err
        else:  # the line, then KeyboardInterrupt propagates
            assert lines[0].startswith(said) and lines[-1] == "KeyboardInterrupt", err
            assert proc.returncode == -signal.SIGINT
        assert 2 <= saved < 12
    print(f"Ctrl-C to exit: {latency}")
    for pid in (int(p.name) for p in (tmp_path / "pids").iterdir()):
        _wait_for(lambda: not _alive(pid), 5, f"worker {pid}")  # noqa: B023


def test_a_dying_pool_worker_fails_only_its_cell(tmp_path):
    cells = sweep.grid(tc.dies_for, 3, fixed={"bad": 1.0}, a=[0.0, 1.0])
    with pytest.raises(sweep.SweepError) as info:
        sweep.run_sweep(cells, tmp_path, "processes", n_workers=2)
    failed = list(info.value.failures)
    assert [(c.params["a"], c.seed) for c in failed] == [(1.0, 0)]
    assert "worker process died" in info.value.failures[failed[0]]
    assert len(list(tmp_path.glob("*.npz"))) == 5


def test_an_unwritable_store_is_named_before_any_cell(tmp_path, capsys):
    from sgsim.cli import main

    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    store, log = blocker / "store", tmp_path / "log"
    cells = sweep.grid(tc.logged, 2, fixed={"log": str(log)}, a=[0.0])
    with pytest.raises(ParameterError, match=f"cannot write to the sweep store {store}: ") as info:
        sweep.run_sweep(cells, store)
    assert info.value.parameter == "store" and not log.exists()  # no cell ran
    config = tmp_path / "sweep.json"
    config.write_text(json.dumps({"function": "sweep_trust_cells:logged", "seeds": 2, "grid": {"a": [0.0]},
                                  "fixed": {"log": str(log)}, "store": str(store)}))  # fmt: skip
    assert main(["sweep", str(config), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(store) in err[0] and "Not a directory" in err[0] and not log.exists()


def test_the_dask_nannys_close_warning_is_dropped_and_others_kept():
    # every Dask run ended with 'distributed.nanny - WARNING - Worker process still alive after
    # 4.0 seconds, killing' (a worker that ran compiled loops takes seconds to exit); a handler
    # on the logger itself sees what passes its filters whatever distributed's logging config
    logger = logging.getLogger("distributed.nanny")
    seen = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: seen.append(record.getMessage())
    quiet = sweep._QuietNannyClose()
    logger.addHandler(handler)
    logger.addFilter(quiet)
    try:
        logger.warning("Worker process still alive after 4.0 seconds, killing")
        logger.warning("Restarting worker")
    finally:
        logger.removeFilter(quiet)
        logger.removeHandler(handler)
    assert seen == ["Restarting worker"]
