"""Reading and writing results, atomically.

Every writer here goes through :func:`atomic_write`: the content is written to a temporary
file in the destination's directory, flushed and ``fsync``-ed, then moved over the
destination with ``os.replace`` (atomic on POSIX and Windows when both paths are on the
same file system). A reader therefore sees either the old file or the complete new one,
never a half-written file, and a run that is interrupted (Ctrl-C, a crash, a full disk)
keeps everything it finished before. If the writer raises, the temporary file is removed
and the destination is left as it was. A temporary file carries its writer's process id:
those of writes that were killed are removed by the next write of the same file. The free
space is checked against the size to be written before a result is written, so that a full
disk is an ``OSError`` saying so rather than a crash of the HDF5 library half-way.

Results are :class:`arviz.InferenceData` stored as netCDF-4 (HDF5) through ``h5netcdf``.
HDF5 attributes hold at most 64-bit integers, while :func:`sgsim.sample` with
``seed=None`` records a 128-bit seed; such integers are stored as decimal strings and
restored by :func:`read_result` (their names are listed in the attribute
``sgsim_int_as_str``).
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "atomic_write",
    "atomic_write_text",
    "atomic_savefig",
    "write_result",
    "read_result",
    "remove_stale_temporaries",
    "check_free_space",
]

_BIGINT_KEY = "sgsim_int_as_str"
_INT64 = np.iinfo(np.int64)


def _umask() -> int:
    # os.umask can only be read by setting it; restore it at once
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_dir(directory: Path) -> None:
    # make the rename itself durable; not possible (nor needed) on every platform
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):  # alive but not ours, or no way to tell: keep its file
        return True
    return True


def remove_stale_temporaries(dest: str | os.PathLike) -> list[Path]:
    """Delete the temporary files that killed writes of ``dest`` left behind; return them.

    A temporary file is named ``.<name>.<pid>.<random>.tmp`` after the process writing it;
    it is stale when that process no longer exists (a write in progress is never touched).
    """
    dest = Path(dest)
    removed = []
    for tmp in dest.parent.glob(f".{dest.name}.*.tmp"):
        pid = tmp.name[len(dest.name) + 2 :].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            try:
                tmp.unlink()
                removed.append(tmp)
            except OSError:
                pass
    return removed


def check_free_space(directory: str | os.PathLike, n_bytes: float, what: str) -> None:
    """Raise ``OSError`` (ENOSPC) unless ``directory`` has room for ``n_bytes`` and 1% more.

    Checked before a write starts, so that a full disk gives this message instead of a
    failure half-way through (HDF5 does not always survive one).
    """
    free = shutil.disk_usage(directory).free
    need = 1.01 * float(n_bytes) + (1 << 20)
    if need > free:
        raise OSError(
            errno.ENOSPC,
            f"not enough free space in {directory} to write {what}: it needs about {need / 2**20:,.1f} MiB "
            f"and {free / 2**20:,.1f} MiB are free",
        )


def atomic_write(path: str | os.PathLike, writer: Callable[[Path], Any], size_hint: float = 0.0) -> Path:
    """Create or replace ``path`` atomically with what ``writer`` writes.

    Parameters
    ----------
    path : str or path-like
        Destination. Missing parent directories are created.
    writer : callable
        ``writer(tmp_path)`` writes the complete content to ``tmp_path``, a fresh empty
        file in the same directory as ``path``. If it raises, the temporary file is
        deleted, ``path`` is left untouched and the exception propagates.
    size_hint : float
        Bytes the content will take about: the free space is checked for them first
        (:func:`check_free_space`).

    Returns
    -------
    pathlib.Path
        The destination path.

    Temporary files that earlier killed writes of ``path`` left behind are removed first
    (:func:`remove_stale_temporaries`).
    """
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(dest)
    if size_hint:
        check_free_space(dest.parent, size_hint, str(dest))
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.{os.getpid()}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        writer(tmp)
        with open(tmp, "rb+") as fh:
            fh.flush()
            os.fsync(fh.fileno())
        # mkstemp creates the file private (0600); give it the mode a plain open() would
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, dest)
    except BaseException:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(dest.parent)
    return dest


def atomic_write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_write`)."""

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding=encoding, newline="\n") as fh:
            fh.write(text)

    return atomic_write(path, write)


def atomic_savefig(fig: Any, path: str | os.PathLike, **kwargs: Any) -> Path:
    """Save a matplotlib figure to ``path`` atomically.

    The format is taken from the suffix of ``path`` (the temporary file has another one);
    ``kwargs`` go to :meth:`matplotlib.figure.Figure.savefig`.
    """
    dest = Path(path)
    fmt = kwargs.pop("format", None) or dest.suffix.lstrip(".") or "png"

    def write(tmp: Path) -> None:
        fig.savefig(tmp, format=fmt, **kwargs)

    return atomic_write(dest, write)


def _encode_attrs(attrs: dict) -> dict:
    out = dict(attrs)
    big = []
    for key, value in attrs.items():
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            if not _INT64.min <= int(value) <= _INT64.max:
                out[key] = str(int(value))
                big.append(key)
    out.pop(_BIGINT_KEY, None)
    if big:
        out[_BIGINT_KEY] = ",".join(big)
    return out


def _decode_attrs(attrs: dict) -> dict:
    out = dict(attrs)
    names = out.pop(_BIGINT_KEY, "")
    for key in filter(None, str(names).split(",")):
        if key in out:
            out[key] = int(out[key])
    return out


def write_result(idata: Any, path: str | os.PathLike) -> Path:
    """Write an InferenceData (e.g. from :func:`sgsim.sample`) to netCDF, atomically.

    Parameters
    ----------
    idata : arviz.InferenceData
        The result; it is not modified.
    path : str or path-like
        Destination, conventionally ``*.nc``.

    Returns
    -------
    pathlib.Path
        The destination path.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> import sgsim
    >>> from sgsim.io import read_result, write_result
    >>> result = sgsim.sample("standard_gaussian", "sgld", 100, step_size=0.1, seed=0)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = write_result(result, Path(tmp) / "run.nc")
    ...     back = read_result(path)
    >>> path.name
    'run.nc'
    >>> bool(np.array_equal(back.posterior["theta"].values, result.posterior["theta"].values))
    True
    """
    import arviz as az

    groups = {}
    for name in idata.groups():
        ds = idata[name].copy(deep=False)
        ds.attrs = _encode_attrs(ds.attrs)
        groups[name] = ds
    clean = az.InferenceData(attrs=_encode_attrs(dict(idata.attrs)), **groups)

    def write(tmp: Path) -> None:
        clean.to_netcdf(str(tmp), engine="h5netcdf")

    # the arrays' bytes: netCDF adds little to them (no compression here)
    size = sum(
        var.nbytes
        for name in idata.groups()
        for var in list(idata[name].data_vars.values()) + list(idata[name].coords.values())
    )
    return atomic_write(path, write, size_hint=size)


def read_result(path: str | os.PathLike) -> Any:
    """Read a result written by :func:`write_result` into memory.

    Every group is loaded eagerly and the file is closed, so the file can be replaced or
    deleted afterwards. Integers stored as strings (seeds beyond 64 bits) are restored.

    Returns
    -------
    arviz.InferenceData

    Examples
    --------
    A run with ``seed=None`` records a 128-bit seed, which HDF5 cannot hold as an integer;
    it comes back as the same Python integer, and the run replays from the file:

    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> import sgsim
    >>> from sgsim.io import read_result, write_result
    >>> result = sgsim.sample("standard_gaussian", "sgld", 100, step_size=0.1, seed=None)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     back = read_result(write_result(result, Path(tmp) / "run.nc"))
    >>> back.attrs["seed"] == result.attrs["seed"]
    True
    >>> again = sgsim.replay(back)
    >>> bool(np.array_equal(again.posterior["theta"].values, result.posterior["theta"].values))
    True
    """
    import arviz as az

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no result file at {path}")
    with az.rc_context({"data.load": "eager"}):
        idata = az.from_netcdf(str(path), engine="h5netcdf")
    for name in idata.groups():
        idata[name].attrs = _decode_attrs(idata[name].attrs)
    idata.attrs = _decode_attrs(dict(idata.attrs))
    return idata
