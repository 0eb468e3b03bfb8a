"""Sweeps: cells, the resumable store, and the executors (serial, a process pool, a Dask
LocalCluster on loopback), with killed workers, a killed driver and corrupt files."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import sweep_cells

from sgsim import sweep
from sgsim._validate import ParameterError, ParameterTypeError

HERE = Path(__file__).resolve().parent


def cells_of(function=sweep_cells.noisy_sum, seeds=3, **axes):
    return sweep.grid(function, seeds, **(axes or {"a": [0.0, 1.5], "b": [1, 2]}))


def contents(store_dir):
    """Every stored cell file, name -> its arrays (the checksum metadata included)."""
    out = {}
    for path in sorted(Path(store_dir).glob("*.npz")):
        with np.load(path) as data:
            out[path.name] = {k: data[k].copy() for k in data.files}
    return out


def same_contents(x, y):
    assert sorted(x) == sorted(y)
    for name in x:
        assert sorted(x[name]) == sorted(y[name])
        for k in x[name]:
            assert np.array_equal(x[name][k], y[name][k]), (name, k)


def test_cells_have_stable_keys_and_duplicates_run_once(tmp_path):
    cells = cells_of()
    assert len(cells) == 12 and len({c.key for c in cells}) == 12
    again = sweep.Cell("sweep_cells:noisy_sum", {"b": 1, "a": 0.0}, 0)
    assert again == cells[0] and again.key == cells[0].key  # parameter order does not matter
    rep = sweep.run_sweep(cells + cells[:3], tmp_path)
    assert (rep.n_cells, rep.n_computed) == (12, 12)
    ds = sweep.Store(tmp_path).summary(cells)
    assert ds["total"].dims == ("a", "b", "seed") and ds["draws"].shape == (2, 2, 3, 3)
    want = 1.5 + 2 + np.random.default_rng(2).standard_normal(3).sum()
    assert float(ds["total"].sel(a=1.5, b=2, seed=2)) == want


def test_a_rerun_skips_finished_cells_and_recomputes_a_corrupt_one(tmp_path):
    cells = cells_of()
    sweep.run_sweep(cells, tmp_path)
    before = contents(tmp_path)
    rep = sweep.run_sweep(cells, tmp_path)
    assert (rep.n_found, rep.n_computed) == (12, 0)
    # a truncated file and one with a flipped byte: both detected, recomputed, never read
    paths = sorted(tmp_path.glob("*.npz"))
    data = paths[0].read_bytes()
    paths[0].write_bytes(data[: len(data) // 2])
    raw = bytearray(paths[1].read_bytes())
    raw[len(raw) // 3] ^= 0xFF
    paths[1].write_bytes(bytes(raw))
    rep = sweep.run_sweep(cells, tmp_path)
    assert (rep.n_found, rep.n_computed) == (10, 2)
    same_contents(before, contents(tmp_path))


def test_a_failing_cell_is_reported_after_the_others_and_retried(tmp_path):
    cells = sweep.grid(sweep_cells.fails_for, 2, fixed={"bad": 1.0}, a=[0.0, 1.0, 2.0])
    with pytest.raises(sweep.SweepError, match="a = 1.0 is refused") as info:
        sweep.run_sweep(cells, tmp_path)
    assert len(info.value.failures) == 2 and len(list(tmp_path.glob("*.npz"))) == 4
    ds = sweep.Store(tmp_path).summary(cells)
    assert np.isnan(ds["total"].sel(a=1.0)).all() and not np.isnan(ds["total"].sel(a=2.0)).any()


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda d: sweep.grid(lambda a, seed: {"x": a}, 1, a=[1]), "function"),
        (lambda d: sweep.grid("sweep_cells:nothing_here", 1, a=[1]), "function"),
        (lambda d: sweep.grid(sweep_cells.noisy_sum, 0, a=[1]), "seeds"),
        (lambda d: sweep.grid(sweep_cells.noisy_sum, 1, a=1.0), "a"),
        (lambda d: sweep.grid(sweep_cells.noisy_sum, 1, a=[object()]), "params"),
        (lambda d: sweep.run_sweep(cells_of(), d, "threads"), "executor"),
        (lambda d: sweep.run_sweep(cells_of(), d, "processes", scheduler="tcp://x:1"), "scheduler"),
        (lambda d: sweep.run_sweep(cells_of(), d, "processes", n_workers=0), "n_workers"),
    ],
)
def test_bad_input_is_named(tmp_path, call, name):
    with pytest.raises((ParameterError, ParameterTypeError)) as info:
        call(tmp_path)
    assert info.value.parameter == name


def test_serial_processes_and_dask_write_identical_cells(tmp_path):
    pytest.importorskip("distributed")
    cells = sweep.grid(
        sweep.sample_cell, 2, fixed={"target": "mixture_25", "method": "sgld", "n_steps": 500, "n_chains": 3},
        step_size=[0.01, 0.03],
    )  # fmt: skip
    stores = {}
    for executor in sweep.EXECUTORS:
        stores[executor] = tmp_path / executor
        rep = sweep.run_sweep(cells, stores[executor], executor, n_workers=2)
        assert rep.n_computed == len(cells)
    assert rep.dashboard and rep.dashboard.startswith("http://127.0.0.1")
    same_contents(contents(stores["serial"]), contents(stores["processes"]))
    same_contents(contents(stores["serial"]), contents(stores["dask"]))


def test_a_dask_worker_killed_mid_cell_and_every_cell_stored_once(tmp_path):
    pytest.importorskip("distributed")
    marker = tmp_path / "crashed"
    cells = sweep.grid(sweep_cells.crash_once, 2, fixed={"marker": str(marker)}, a=[0.0, 1.0, 2.0])
    rep = sweep.run_sweep(cells, tmp_path / "store", "dask", n_workers=2)
    assert marker.exists()  # a worker did die
    assert rep.n_computed == 6 and len(list((tmp_path / "store").glob("*.npz"))) == 6
    ref = tmp_path / "ref"
    sweep.run_sweep(sweep.grid(sweep_cells.crash_once, 2, fixed={"marker": str(marker)}, a=[0.0, 1.0, 2.0]), ref)
    same_contents(contents(tmp_path / "store"), contents(ref))


DRIVER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {here!r})
    import sweep_cells
    from sgsim import sweep

    if __name__ == "__main__":
        cells = sweep.grid(sweep_cells.slow, [0, 1, 2, 3], fixed={{"pause": 0.4}}, a=[0.0, 1.0, 2.0])
        sweep.run_sweep(cells, sys.argv[1], "processes", n_workers=2)
    """
)


def test_a_killed_driver_resumes_with_nothing_lost_or_duplicated(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(here=str(HERE)))
    store = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, str(script), str(store)], start_new_session=True)
    deadline = time.monotonic() + 120
    while len(list(store.glob("*.npz"))) < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its pool, mid-sweep
    proc.wait()
    partial = len(list(store.glob("*.npz")))
    assert 3 <= partial < 12, partial
    subprocess.run([sys.executable, str(script), str(store)], check=True, timeout=300)
    ref = tmp_path / "ref"
    subprocess.run([sys.executable, str(script), str(ref)], check=True, timeout=300)
    assert len(list(store.glob("*.npz"))) == 12
    same_contents(contents(store), contents(ref))


def test_without_dask_the_error_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r"sgsim\[dask\]"):
        sweep.run_sweep(cells_of(), tmp_path, "dask")
    assert sweep.run_sweep(cells_of(), tmp_path).n_computed == 12  # the other executors still work


def test_the_sweep_command_runs_a_config_and_writes_the_summary(tmp_path, capsys):
    import json

    import xarray as xr

    from sgsim.cli import main

    config = tmp_path / "sweep.json"
    config.write_text(json.dumps({"function": "sweep_cells:noisy_sum", "seeds": 2, "grid": {"a": [0.0, 1.0]},
                                  "fixed": {"b": 3}, "store": str(tmp_path / "store")}))  # fmt: skip
    assert main(["sweep", str(config), "--quiet"]) == 0
    assert "4 cells, 0 already stored, 4 computed" in capsys.readouterr().out
    assert main(["sweep", str(config), "--quiet"]) == 0
    assert "4 already stored, 0 computed" in capsys.readouterr().out
    with xr.open_dataset(tmp_path / "store" / "summary.nc", engine="h5netcdf") as ds:
        assert ds["total"].dims == ("a", "seed") and float(ds["b"]) == 3
    config.write_text(json.dumps({"function": "sweep_cells:noisy_sum", "seeds": 0, "store": str(tmp_path)}))
    with pytest.raises(SystemExit) as info:
        main(["sweep", str(config)])
    assert info.value.code == 2 and "seeds" in capsys.readouterr().err


def test_table4_runs_are_cells_and_the_same_wherever_they_run(tmp_path):
    from sgsim.experiments import cyclical_synthetic as cs

    kwargs = dict(n_runs=2, n_steps=3000, seed=4)  # 30 cycles of 100 steps, 50 kept per cycle
    serial = cs.mode_coverage_table("reference", **kwargs)
    with sweep.executing("processes", 2):
        pooled = cs.mode_coverage_table("reference", store=tmp_path, **kwargs)
    for key, row in serial.rows.items():
        assert np.array_equal(row.coverage, pooled.rows[key].coverage)
        assert np.array_equal(row.n_draws, pooled.rows[key].n_draws)
    # the store keeps the 8 runs: a second call reads them back
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.glob("*.npz")}
    again = cs.mode_coverage_table("reference", store=tmp_path, **kwargs)
    assert len(stamps) == 8 and stamps == {p: p.stat().st_mtime_ns for p in tmp_path.glob("*.npz")}
    assert np.array_equal(again.rows["sgld"].coverage, serial.rows["sgld"].coverage)
