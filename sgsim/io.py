"""Reading and writing results, atomically.

Every writer here goes through :func:`atomic_write`: the content is written to a temporary
file in the destination's directory, flushed and ``fsync``-ed, then moved over the
destination with :func:`os.replace` (atomic on POSIX and Windows when both paths are on the
same file system). A reader therefore sees either the old file or the complete new one,
never a half-written file, and a run that is interrupted (Ctrl-C, a crash, a full disk)
keeps everything it finished before. If the writer raises, the temporary file is removed
and the destination is left as it was.

Results are :class:`arviz.InferenceData` stored as netCDF-4 (HDF5) through ``h5netcdf``.
HDF5 attributes hold at most 64-bit integers, while :func:`sgsim.sample` with
``seed=None`` records a 128-bit seed; such integers are stored as decimal strings and
restored by :func:`read_result` (their names are listed in the attribute
``sgsim_int_as_str``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["atomic_write", "atomic_write_text", "atomic_savefig", "write_result", "read_result"]

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


def atomic_write(path: str | os.PathLike, writer: Callable[[Path], Any]) -> Path:
    """Create or replace ``path`` atomically with what ``writer`` writes.

    Parameters
    ----------
    path : str or path-like
        Destination. Missing parent directories are created.
    writer : callable
        ``writer(tmp_path)`` writes the complete content to ``tmp_path``, a fresh empty
        file in the same directory as ``path``. If it raises, the temporary file is
        deleted, ``path`` is left untouched and the exception propagates.

    Returns
    -------
    pathlib.Path
        The destination path.
    """
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
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

    return atomic_write(path, write)


def read_result(path: str | os.PathLike) -> Any:
    """Read a result written by :func:`write_result` into memory.

    Every group is loaded eagerly and the file is closed, so the file can be replaced or
    deleted afterwards. Integers stored as strings (seeds beyond 64 bits) are restored.

    Returns
    -------
    arviz.InferenceData
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
