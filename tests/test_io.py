"""sgsim.io: atomic writes and the netCDF round trip of results."""

import errno
import os

import numpy as np
import pytest

import sgsim
from sgsim.io import atomic_savefig, atomic_write, atomic_write_text, read_result, write_result


def _leftovers(directory):
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


def test_atomic_write_text_creates_and_replaces(tmp_path):
    path = tmp_path / "sub" / "report.md"
    atomic_write_text(path, "first\n")
    assert path.read_text() == "first\n"
    atomic_write_text(path, "second\n")
    assert path.read_text() == "second\n"
    assert _leftovers(path.parent) == []
    # the same mode as a file created by open(): mkstemp's private 0600 is not kept
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_failed_write_keeps_the_old_file_and_no_temp_file(tmp_path):
    path = tmp_path / "result.nc"
    path.write_bytes(b"complete old content")

    def half_then_crash(tmp):
        tmp.write_bytes(b"half of the new")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(path, half_then_crash)
    assert path.read_bytes() == b"complete old content"
    assert _leftovers(tmp_path) == []


def test_interrupt_during_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "report.md"
    atomic_write_text(path, "finished sections")

    def interrupted(tmp):
        tmp.write_text("partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, interrupted)
    assert path.read_text() == "finished sections"
    assert _leftovers(tmp_path) == []


def test_failed_write_of_a_new_file_leaves_nothing(tmp_path):
    def crash(tmp):
        raise ValueError("bad figure")

    with pytest.raises(ValueError):
        atomic_write(tmp_path / "fig.png", crash)
    assert list(tmp_path.iterdir()) == []


def test_atomic_savefig_uses_the_destination_suffix(tmp_path):
    from matplotlib.figure import Figure

    fig = Figure()
    fig.subplots().plot([0, 1], [1, 0])
    atomic_savefig(fig, tmp_path / "a.png")
    atomic_savefig(fig, tmp_path / "a.svg")
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (tmp_path / "a.svg").read_bytes()[:500]
    assert _leftovers(tmp_path) == []


@pytest.fixture(scope="module")
def small_result():
    return sgsim.sample(
        "mixture_25", "csgld", 400, n_chains=2, seed=11, step_size=0.05, n_cycles=4, explore_fraction=0.25
    )


def test_result_round_trip(tmp_path, small_result):
    path = write_result(small_result, tmp_path / "result.nc")
    back = read_result(path)
    np.testing.assert_array_equal(back.posterior["theta"].values, small_result.posterior["theta"].values)
    for name in ("step_size", "stage", "cycle", "step"):
        np.testing.assert_array_equal(back.sample_stats[name].values, small_result.sample_stats[name].values)
    np.testing.assert_array_equal(back.constant_data["init"].values, small_result.constant_data["init"].values)
    assert back.attrs["seed"] == 11
    assert back.posterior.attrs["seed"] == 11
    assert back.attrs["sgsim_config"] == small_result.attrs["sgsim_config"]
    assert _leftovers(tmp_path) == []


def test_read_result_is_in_memory(tmp_path, small_result):
    path = write_result(small_result, tmp_path / "result.nc")
    back = read_result(path)
    path.unlink()  # the data must not depend on an open file
    assert back.posterior["theta"].values.shape == small_result.posterior["theta"].values.shape


def test_seed_beyond_64_bits_survives_the_round_trip(tmp_path):
    # seed=None records 128 bits of fresh entropy, more than an HDF5 integer attribute holds
    seed = 2**100 + 7
    idata = sgsim.sample("mixture_25", "sgld", 50, seed=seed, step_size=0.01)
    back = read_result(write_result(idata, tmp_path / "r.nc"))
    assert back.attrs["seed"] == seed
    assert isinstance(back.attrs["seed"], int)
    assert back.sample_stats.attrs["seed"] == seed
    assert "sgsim_int_as_str" not in back.attrs
    assert idata.attrs["seed"] == seed  # the caller's object is not modified
    assert "sgsim_int_as_str" not in idata.attrs


def test_read_result_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no result file"):
        read_result(tmp_path / "nothing.nc")


def test_stale_temporaries_of_killed_writes_are_removed(tmp_path):
    import subprocess
    import sys

    from sgsim import io as sio
    from sgsim.io import atomic_write_text

    dest = tmp_path / "r.txt"
    # a process that has exited: its pid is free
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".r.txt.{int(dead.stdout)}.abc123.tmp"
    stale.write_bytes(b"x" * 1000)
    live = tmp_path / f".r.txt.{os.getppid()}.def456.tmp"  # a writer still running: kept
    live.write_bytes(b"y")
    other = tmp_path / ".other.txt.1.ghi.tmp"  # another file's: not ours to judge
    other.write_bytes(b"z")
    # the current names carry the host: this machine's dead writer is stale; a writer on another
    # machine sharing the directory (its pid means nothing here) is never touched
    here = sio._host_tag()
    stale_here = tmp_path / f".r.txt.{here}-{int(dead.stdout)}.jkl.tmp"
    stale_here.write_bytes(b"w")
    elsewhere = tmp_path / f".r.txt.othermachine-{int(dead.stdout)}.mno.tmp"
    elsewhere.write_bytes(b"v")
    atomic_write_text(dest, "done")
    assert dest.read_text() == "done"
    assert not stale.exists() and live.exists() and other.exists()
    assert not stale_here.exists() and elsewhere.exists()


def test_a_full_disk_is_a_clear_error_before_writing(tmp_path, monkeypatch):
    import shutil

    from sgsim import io as sio

    idata = sgsim.sample("mixture_25", "sgld", 2000, n_chains=4, step_size=0.01, seed=0)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(sio.shutil, "disk_usage", lambda p: usage._replace(free=10_000))
    with pytest.raises(OSError, match="not enough free space") as info:
        sio.write_result(idata, tmp_path / "r.nc")
    assert info.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind
    monkeypatch.undo()  # negative control: with the real free space it is written
    assert sio.write_result(idata, tmp_path / "r.nc").exists()
