"""Result files that can be trusted: space reserved before writing, checksums, damaged files, replay checks.

A full disk is simulated three ways: the free space reported to the writer (monkeypatched),
the operating system's calls failing with ENOSPC (monkeypatched ``posix_fallocate`` and
``write``), and a real limit in a child process (``RLIMIT_FSIZE``, which makes the kernel
refuse writes beyond it with EFBIG). Where the tests run as root and may mount, a real full
disk (a 200 KiB tmpfs) is filled too.
"""

from __future__ import annotations

import copy
import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import sgsim
from sgsim import io as sio
from sgsim.io import NoSpaceError, ResultFileError, read_result, result_checksum, write_result
from sgsim.sampling import ReplayMismatchError

DATA = Path(__file__).parent / "data"


def _leftovers(directory):
    return sorted(p.name for p in Path(directory).iterdir() if p.name.endswith(".tmp"))


@pytest.fixture(scope="module")
def small():
    return sgsim.sample("mixture_25", "sgld", 400, n_chains=2, step_size=0.01, seed=3)


@pytest.fixture(scope="module")
def large():
    # about 1 MB of arrays, which zlib packs into about 0.42 MB
    return sgsim.sample("mixture_25", "sgld", 5_000, n_chains=4, step_size=0.01, seed=0)


def _uncompressed(idata):
    return sum(var.nbytes for g in idata.groups() for var in idata[g].variables.values())


# ------------------------------------------------------------------------------------ space


def test_the_space_needed_is_the_compressed_files_exact_size(tmp_path, large, monkeypatch):
    first = write_result(large, tmp_path / "a.nc")
    size = first.stat().st_size
    # the old estimate (the arrays' bytes, 1% and 1 MiB) was 2.4x the file here (2.7x for 20,000
    # draws): a disk with room for the file was refused
    assert _uncompressed(large) > 2 * size
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(sio.shutil, "disk_usage", lambda p: usage._replace(free=size))
    assert write_result(large, tmp_path / "b.nc").stat().st_size == size
    # negative control: one byte less is refused, with the path and the bytes it needs
    monkeypatch.setattr(sio.shutil, "disk_usage", lambda p: usage._replace(free=size - 1))
    with pytest.raises(NoSpaceError, match=f"not enough free space to write {tmp_path / 'c.nc'}: it needs {size:,}"):
        write_result(large, tmp_path / "c.nc")
    assert not (tmp_path / "c.nc").exists() and _leftovers(tmp_path) == []


@pytest.mark.parametrize("failing", ["posix_fallocate", "write"])
def test_a_disk_that_fills_during_the_write_is_one_error_and_keeps_the_old_file(tmp_path, small, monkeypatch, failing):
    path = tmp_path / "r.nc"
    path.write_bytes(b"the previous result")
    real_write = os.write

    def no_space(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def half_then_full(fd, data):  # the first call lands, the next finds the disk full
        monkeypatch.setattr(sio.os, "write", no_space)
        return real_write(fd, bytes(data)[: len(data) // 2])

    if failing == "posix_fallocate":
        monkeypatch.setattr(sio.os, "posix_fallocate", no_space)
    else:  # a file system without fallocate: the write itself finds the disk full
        monkeypatch.setattr(
            sio.os, "posix_fallocate", lambda *a: (_ for _ in ()).throw(OSError(errno.EOPNOTSUPP, "no"))
        )
        monkeypatch.setattr(sio.os, "write", half_then_full)
    with pytest.raises(NoSpaceError) as info:
        write_result(small, path)
    assert info.value.errno == errno.ENOSPC and isinstance(info.value, OSError)
    assert str(path) in str(info.value) and "bytes" in str(info.value)
    assert path.read_bytes() == b"the previous result"
    assert _leftovers(tmp_path) == []
    monkeypatch.undo()  # negative control: the same write with room
    np.testing.assert_array_equal(read_result(write_result(small, path)).posterior["theta"], small.posterior["theta"])


_CHILD = textwrap.dedent(
    """
    import resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the kernel then refuses with EFBIG
    from sgsim.io import NoSpaceError, read_result, write_result
    src, dest = sys.argv[1], sys.argv[2]
    idata = read_result(src)
    for limit in map(int, sys.argv[3:]):
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
        try:
            write_result(idata, dest)
            print("written")
        except NoSpaceError as exc:
            print("NoSpaceError", exc.errno, exc)
        sys.stdout.flush()
    """
)


@pytest.mark.skipif(not hasattr(os, "posix_fallocate") or sys.platform != "linux", reason="Linux file-size limits")
def test_a_file_size_limit_met_mid_write_is_one_error_in_a_real_process(tmp_path, large):
    src = write_result(large, tmp_path / "src.nc")
    dest = tmp_path / "out" / "r.nc"
    dest.parent.mkdir()
    dest.write_bytes(b"old")
    script = tmp_path / "child.py"
    script.write_text(_CHILD)

    # one child, two limits: 100 kB, then (the negative control) room for the file
    limits = [100_000, src.stat().st_size + 4096]
    done = subprocess.run([sys.executable, str(script), str(src), str(dest), *map(str, limits)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    refused, written = done.stdout.splitlines()
    assert refused.startswith(f"NoSpaceError {errno.EFBIG}"), refused
    assert f"{src.stat().st_size:,} bytes" in refused and str(dest) in refused
    assert _leftovers(dest.parent) == []
    assert written == "written"
    assert result_checksum(read_result(dest)) == result_checksum(large)


_FULL_DISK = textwrap.dedent(
    """
    import shutil, sys
    from sgsim import io as sio
    idata = sio.read_result(sys.argv[1])
    real = shutil.disk_usage
    for when in ("checked", "after-check"):
        if when == "after-check":  # the disk fills after any check of the free space
            sio.shutil.disk_usage = lambda p: real(p)._replace(free=10**12)
        try:
            sio.write_result(idata, sys.argv[2])
            print("written")
        except sio.NoSpaceError as exc:
            print("NoSpaceError", exc.errno, open(sys.argv[2], "rb").read())
        sys.stdout.flush()
    """
)


def _mount_tmpfs(where: Path, size: str) -> bool:
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    return done.returncode == 0


def test_a_really_full_disk(tmp_path, large):
    # a 200 KiB tmpfs and a 0.42 MB result: HDF5 writing into it directly crashed the process (rc -11)
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "200k"):
        pytest.skip("needs root and a mountable tmpfs")
    try:
        src = write_result(large, tmp_path / "src.nc")
        (disk / "r.nc").write_bytes(b"old")
        script = tmp_path / "full.py"
        script.write_text(_FULL_DISK)
        done = subprocess.run([sys.executable, str(script), str(src), str(disk / "r.nc")],
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
        assert done.stdout.splitlines() == [f"NoSpaceError {errno.ENOSPC} b'old'"] * 2, done.stdout
        assert _leftovers(disk) == []
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


def test_sgsim_run_on_a_full_disk_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    from sgsim.cli import main

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(sio.shutil, "disk_usage", lambda p: usage._replace(free=1000))
    argv = ["run", "--target", "mixture_25", "--method", "sgld", "--n-steps", "200", "--step-size", "0.01",
            "--seed", "1", "--quiet", "--out", str(tmp_path)]  # fmt: skip
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"sgsim run: error: not enough free space to write {tmp_path / 'result.nc'}: it needs")
    assert "Traceback" not in err and not (tmp_path / "result.nc").exists()
    monkeypatch.undo()  # negative control
    assert main(argv) == 0 and (tmp_path / "result.nc").exists()


# ------------------------------------------------------------------------------- checksums


def test_every_result_file_carries_a_checksum_that_is_checked(tmp_path, small):
    import h5py

    path = write_result(small, tmp_path / "r.nc")
    back = read_result(path)  # the unchanged file reads (the negative control)
    assert back.attrs["sgsim_sha256"] == result_checksum(small) == result_checksum(back)
    assert len(back.attrs["sgsim_sha256"]) == 64
    with h5py.File(path, "r+") as f:  # one value changed in place, the file otherwise valid
        f["posterior/theta"][1, 17, 0] += 1e-12
    with pytest.raises(ResultFileError, match="does not match the checksum") as info:
        read_result(path)
    assert info.value.path == path and str(path) in str(info.value)


def test_the_checksum_covers_the_run_spec(tmp_path, small):
    import h5py

    path = write_result(small, tmp_path / "r.nc")
    with h5py.File(path, "r+") as f:
        f.attrs["sgsim_config"] = f.attrs["sgsim_config"].replace('"seed": 3', '"seed": 4')
    with pytest.raises(ResultFileError, match="does not match the checksum"):
        read_result(path)


def test_files_written_before_checksums_still_read():
    for name in ("csgld_mixture25_pcg64.nc", "sghmc_gaussian_pcg64.nc"):
        old = read_result(DATA / name)
        assert "sgsim_sha256" not in old.attrs
        assert old.posterior["theta"].shape[0] > 0


def test_the_checksum_sees_values_not_storage_types(small):
    # an int32 read back as int64, a bool as int8: the same values, the same checksum
    other = copy.deepcopy(small)
    other.sample_stats["cycle"] = other.sample_stats["cycle"].astype(np.int64)
    assert result_checksum(other) == result_checksum(small)
    other.sample_stats["cycle"] = other.sample_stats["cycle"] + 1  # negative control
    assert result_checksum(other) != result_checksum(small)


# --------------------------------------------------------------------------- damaged files


def _damaged(tmp_path, small):
    import xarray as xr

    good = write_result(small, tmp_path / "good.nc").read_bytes()
    files = {
        "empty": b"",
        "text": b"not a result at all\n",
        "random": np.random.default_rng(0).bytes(50_000),
        "truncated": good[: len(good) // 2],
        "header only": good[:4096],
        # a data chunk overwritten in the middle (zlib or the checksum catches it)
        "scribbled": good[: len(good) // 2] + bytes(4096) + good[len(good) // 2 + 4096 :],
    }
    for name, data in files.items():
        (tmp_path / f"{name}.nc").write_bytes(data)
    # valid netCDF files that are not results
    xr.Dataset({"x": ("i", np.arange(3.0))}).to_netcdf(tmp_path / "no groups.nc", engine="h5netcdf")
    xr.Dataset({"x": ("i", np.arange(3.0))}).to_netcdf(tmp_path / "wrong group.nc", group="foo", engine="h5netcdf")
    return [*files, "no groups", "wrong group"]


def test_a_damaged_or_foreign_file_is_one_error_naming_it(tmp_path, small):
    for name in _damaged(tmp_path, small):
        path = tmp_path / f"{name}.nc"
        with pytest.raises(ResultFileError) as info:
            read_result(path)
        assert info.value.path == path and str(path) in str(info.value), name
        with pytest.raises(ResultFileError):  # replay reads through the same door
            sgsim.replay(path)
    assert isinstance(info.value, ValueError)
    # negative control: the intact file reads
    assert read_result(tmp_path / "good.nc").posterior["theta"].shape == small.posterior["theta"].shape


def test_a_file_one_may_not_read_says_so_itself(tmp_path, small):
    path = write_result(small, tmp_path / "r.nc")
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    path.chmod(0)
    with pytest.raises(PermissionError):
        read_result(path)


# ----------------------------------------------------------------------------------- replay


def _rewrite(small, tmp_path, name, **attrs):
    other = copy.deepcopy(small)
    other.attrs = {**dict(small.attrs), **attrs}
    return write_result(other, tmp_path / name)


@pytest.mark.parametrize(
    "config",
    [
        # what sgsim wrote before run specs: its own small JSON, the target as a name
        json.dumps({"method": "sgld", "target": "mixture_25", "options": {"step_size": 0.01}, "seed": 3}),
        "sgld on mixture_25, seed 3",  # not JSON
        json.dumps("sgld on mixture_25"),  # JSON, not a mapping
    ],
)
def test_a_file_without_a_run_spec_says_which_version_wrote_it(tmp_path, small, config):
    path = _rewrite(small, tmp_path, "old.nc", sgsim_config=config, sgsim_version="0.0.3")
    with pytest.raises(ResultFileError, match=r"cannot be replayed .* written by sgsim 0\.0\.3") as info:
        sgsim.replay(path)
    assert info.value.path == path
    bare = copy.deepcopy(small)
    bare.attrs = {k: v for k, v in small.attrs.items() if k != "sgsim_config"}
    with pytest.raises(ResultFileError, match="records no run spec"):
        sgsim.replay(write_result(bare, tmp_path / "bare.nc"))


def test_another_versions_file_is_replayed_with_a_warning_naming_both(tmp_path, small):
    path = _rewrite(small, tmp_path, "v.nc", sgsim_version="0.0.9")
    with pytest.warns(UserWarning, match=rf"written by sgsim 0\.0\.9 and is replayed by sgsim {sgsim.__version__}"):
        again = sgsim.replay(path)
    np.testing.assert_array_equal(again.posterior["theta"].values, small.posterior["theta"].values)
    with warnings.catch_warnings():  # negative control: this version's file replays silently
        warnings.simplefilter("error")
        sgsim.replay(write_result(small, tmp_path / "same.nc"))


def test_another_versions_file_that_cannot_run_here_names_that_version(tmp_path, small):
    config = json.loads(small.attrs["sgsim_config"])
    config["method"] = "sgld_renamed"
    path = _rewrite(small, tmp_path, "gone.nc", sgsim_config=json.dumps(config), sgsim_version="0.0.9")
    with (
        pytest.warns(UserWarning, match="0.0.9"),
        pytest.raises(
            ResultFileError,
            match=rf"written by sgsim 0\.0\.9, cannot be replayed by sgsim {sgsim.__version__}: .*sgld_renamed",
        ),
    ):
        sgsim.replay(path)


def test_replay_compares_every_array_and_says_where_they_differ(tmp_path, small):
    back = read_result(write_result(small, tmp_path / "r.nc"))
    assert sgsim.replay(back) is not None  # negative control: the recording replays
    back.posterior["theta"].values[1, 37, 0] += 1e-13  # a recording that is not what the seed gives
    with pytest.raises(ReplayMismatchError, match=r"bit for bit expected\) in posterior\.theta") as info:
        sgsim.replay(back)
    err = info.value
    assert err.index == {"chain": 1, "draw": 37, "dim": 0} and err.group == "posterior" and err.variable == "theta"
    assert 0 < err.max_abs_diff < 1e-11
    assert "1 of 1,600 values differ, the first at (chain 1, draw 37, dim 0)" in str(err)
    assert f"replayed by sgsim {sgsim.__version__}" in str(err)
    np.testing.assert_array_equal(err.result.posterior["theta"].values, small.posterior["theta"].values)
    with pytest.warns(UserWarning, match="differs from the recording"):
        kept = sgsim.replay(back, on_mismatch="warn")
    np.testing.assert_array_equal(kept.posterior["theta"].values, small.posterior["theta"].values)
    back.posterior["theta"].values[1, 37, 0] -= 1e-13
    back.sample_stats["diverged"].values[0, 5] = True  # the statistics are compared too
    with pytest.raises(ReplayMismatchError, match=r"sample_stats\.diverged"):
        sgsim.replay(back)
    with pytest.raises(ValueError, match="on_mismatch"):
        sgsim.replay(back, on_mismatch="ignore")


def test_gpu_results_are_compared_to_the_stated_tolerance(small):
    from sgsim import spec as _spec
    from sgsim.sampling import _compare_replay, _recorded_spec

    spec, version = _recorded_spec(small, None)
    moved = copy.deepcopy(small)
    theta = moved.posterior["theta"].values
    for backend, precision, tol in [("gpu", "float32", 1e-4), ("gpu-host", "float64", 1e-9), ("cpu", "float64", 0)]:
        gpu = replace(spec, backend=backend, precision=precision)
        assert isinstance(gpu, _spec.RunSpec)
        theta[...] = small.posterior["theta"].values * (1 + 0.5 * tol)
        _compare_replay(small, moved, gpu, None, version, "raise")  # within: silent
        theta[...] = small.posterior["theta"].values * (1 + 3 * max(tol, 1e-15))  # beyond: reported
        with pytest.raises(ReplayMismatchError, match=r"posterior\.theta"):
            _compare_replay(small, moved, gpu, None, version, "raise")
