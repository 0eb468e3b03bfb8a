"""Reading and writing results, atomically.

Every writer here goes through :func:`atomic_write`: the content is written to a temporary
file in the destination's directory, flushed and ``fsync``-ed, then moved over the
destination with ``os.replace`` (atomic on POSIX and Windows when both paths are on the
same file system). A reader therefore sees either the old file or the complete new one,
never a half-written file, and a run that is interrupted (Ctrl-C, a crash, a full disk)
keeps everything it finished before. If the writer raises, the temporary file is removed
and the destination is left as it was. A temporary file carries its writer's process id:
those of writes that were killed are removed by the next write of the same file.

A full disk, an exhausted quota or a file-size limit met while writing is one
:class:`NoSpaceError` (an ``OSError``) naming the file and the bytes it needs. A result is
encoded to netCDF in memory first (:func:`write_result`), so its exact size is known, the
space is reserved for the temporary file (``posix_fallocate``) and the bytes are written
from Python: the disk cannot fill inside the HDF5 library, which does not survive it.

Results are :class:`arviz.InferenceData` stored as netCDF-4 (HDF5) through ``h5netcdf``,
compressed with zlib as ArviZ does. HDF5 attributes hold at most 64-bit integers, while
:func:`sgsim.sample` with ``seed=None`` records a 128-bit seed; such integers are stored as
decimal strings and restored by :func:`read_result` (their names are listed in the
attribute ``sgsim_int_as_str``). Every result file carries a SHA-256 checksum of its arrays
and run spec (:func:`result_checksum`, attribute ``sgsim_sha256``), checked when it is read;
a file that cannot be read as a result (damaged, truncated, not netCDF, without the groups
of a result, or whose content no longer matches its checksum) is one
:class:`ResultFileError` naming the file. Files written before checksums were recorded have
none and are read without this check.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_savefig",
    "write_result",
    "read_result",
    "remove_stale_temporaries",
    "check_free_space",
    "result_checksum",
    "NoSpaceError",
    "ResultFileError",
]

_BIGINT_KEY = "sgsim_int_as_str"
_CHECKSUM_KEY = "sgsim_sha256"
_INT64 = np.iinfo(np.int64)
# the errors of a write that found no room: full disk, quota, file-size limit (RLIMIT_FSIZE)
_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class NoSpaceError(OSError):
    """There is no room to write ``path``; nothing half-written is left, the old file is kept.

    Its ``errno`` is the system's (``ENOSPC`` for a full disk, ``EDQUOT`` for a quota,
    ``EFBIG`` for a file-size limit); ``path`` is the destination and ``n_bytes`` the size it
    needs (None when unknown).
    """

    def __init__(self, err: int, path: str | os.PathLike, n_bytes: float | None, detail: str = ""):
        self.path = Path(path)
        self.n_bytes = n_bytes
        need = "" if n_bytes is None else f": it needs {int(n_bytes):,} bytes ({n_bytes / 2**20:,.1f} MiB)"
        try:
            free = f" and {shutil.disk_usage(self.path.parent).free:,} bytes are free"
        except OSError:
            free = ""
        if err == errno.EFBIG:
            what = f"the file-size limit (ulimit -f) does not allow writing {path}"
        elif err == errno.EDQUOT:
            what = f"the disk quota does not allow writing {path}"
        else:
            what = f"not enough free space to write {path}"
        super().__init__(err, f"{what}{need}{free if err == errno.ENOSPC else ''}{detail}")


class ResultFileError(ValueError):
    """A file that cannot be read or replayed as a result; ``path`` names it (None: a result in memory)."""

    def __init__(self, path: str | os.PathLike | None, message: str):
        self.path = None if path is None else Path(path)
        super().__init__(f"{'the result' if path is None else f'result file {path}'}: {message}")


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


def _host_tag() -> str:
    """The machine's name as a temporary file's tag: no dots or dashes (they separate the name's fields)."""
    return "".join(c if c.isalnum() else "_" for c in socket.gethostname()) or "host"


def remove_stale_temporaries(dest: str | os.PathLike) -> list[Path]:
    """Delete the temporary files that killed writes of ``dest`` left behind; return them.

    A temporary file is named ``.<name>.<host>-<pid>.<random>.tmp`` after the machine and
    process writing it; it is stale when that process, on this machine, no longer exists. A
    write in progress is never touched, nor is another machine's on a shared file system (this
    one cannot tell whether that process lives). A name without the host (``.<name>.<pid>.``,
    written by earlier versions) is taken as this machine's.
    """
    dest = Path(dest)
    removed = []
    here = _host_tag()
    for tmp in dest.parent.glob(f".{dest.name}.*.tmp"):
        writer = tmp.name[len(dest.name) + 2 :].split(".", 1)[0]
        host, _, pid = writer.rpartition("-")
        if host not in ("", here):
            continue
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            try:
                tmp.unlink()
                removed.append(tmp)
            except OSError:
                pass
    return removed


def check_free_space(directory: str | os.PathLike, n_bytes: float, what: str) -> None:
    """Raise :class:`NoSpaceError` (ENOSPC) unless ``directory`` has room for ``n_bytes``, 1% and 1 MiB more.

    A check before a write of unknown exact size (``what`` names the file); a write of known
    size reserves its space instead (:func:`atomic_write_bytes`).
    """
    free = shutil.disk_usage(directory).free
    need = 1.01 * float(n_bytes) + (1 << 20)
    if need > free:
        raise NoSpaceError(errno.ENOSPC, what, need)


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

    Raises
    ------
    NoSpaceError
        If the disk, a quota or a file-size limit leaves no room for the content (before
        or while writing it).

    Temporary files that earlier killed writes of ``path`` left behind are removed first
    (:func:`remove_stale_temporaries`).
    """
    dest = Path(path)
    if size_hint:
        dest.parent.mkdir(parents=True, exist_ok=True)
        check_free_space(dest.parent, size_hint, str(dest))
    return _replace_atomically(dest, writer, None)


def atomic_write_bytes(path: str | os.PathLike, data: bytes | bytearray | memoryview) -> Path:
    """Create or replace ``path`` atomically with ``data``, its space reserved first.

    The temporary file is given its full size with ``posix_fallocate`` before a byte is
    written (where the platform and file system offer it), so that a disk too full for
    ``data`` fails at once; either way, a full disk is a :class:`NoSpaceError` naming
    ``path`` and the bytes needed, and ``path`` keeps its old content.

    Returns
    -------
    pathlib.Path
        The destination path.
    """
    view = memoryview(data).cast("B")
    n_bytes = view.nbytes
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    # fewer free bytes than the file's own: refusing is certain to be right (no margin needed)
    if n_bytes > shutil.disk_usage(dest.parent).free:
        raise NoSpaceError(errno.ENOSPC, dest, n_bytes)

    def write(tmp: Path) -> None:
        fd = os.open(tmp, os.O_WRONLY)
        try:
            _reserve(fd, n_bytes)
            done = 0
            while done < n_bytes:
                done += os.write(fd, view[done:])
        finally:
            os.close(fd)

    return _replace_atomically(dest, write, n_bytes)


def _reserve(fd: int, n_bytes: int) -> None:
    # blocks allocated now cannot be missing later; a file system without the call (or an
    # emulation that refuses) only loses the early failure, never the error itself
    if n_bytes and hasattr(os, "posix_fallocate"):
        try:
            os.posix_fallocate(fd, 0, n_bytes)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise


def _replace_atomically(dest: Path, writer: Callable[[Path], Any], n_bytes: float | None) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(dest)
    tmp: Path | None = None
    try:
        prefix = f".{dest.name}.{_host_tag()}-{os.getpid()}."
        fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=prefix, suffix=".tmp")
        os.close(fd)
        tmp = Path(tmp_name)
        writer(tmp)
        with open(tmp, "rb+") as fh:
            fh.flush()
            os.fsync(fh.fileno())
        # mkstemp creates the file private (0600); give it the mode a plain open() would
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, dest)
    except BaseException as exc:
        if tmp is not None:
            try:
                tmp.unlink()
            except FileNotFoundError:
                pass
        if isinstance(exc, OSError) and not isinstance(exc, NoSpaceError) and exc.errno in _SPACE_ERRNOS:
            raise NoSpaceError(exc.errno, dest, n_bytes) from exc
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
    groups = {}
    for name, ds in _result_groups(idata).items():
        ds = ds.copy(deep=False)
        ds.attrs = _encode_attrs(ds.attrs)
        groups[name] = ds
    attrs = _encode_attrs(dict(idata.attrs))
    attrs[_CHECKSUM_KEY] = result_checksum(idata)
    data = _netcdf_bytes(groups, attrs)
    if data is not None:
        return atomic_write_bytes(path, data)

    # an xarray that cannot encode netCDF-4 in memory: written by HDF5 itself, after a check
    # of the free space for the uncompressed arrays (an overestimate)
    def write(tmp: Path) -> None:
        _write_netcdf_file(groups, attrs, tmp)

    size = sum(var.nbytes for ds in groups.values() for var in ds.variables.values())
    return atomic_write(path, write, size_hint=size)


def _result_groups(idata: Any) -> dict[str, Any]:
    """The result's groups as plain :class:`xarray.Dataset` by name (InferenceData or DataTree)."""
    from .results import group, groups_of

    return {str(name): group(idata, name) for name in groups_of(idata)}


def _compression(ds: Any) -> dict:
    # what ArviZ's to_netcdf compresses: numbers, booleans and bytes, with zlib
    return {name: {"zlib": True} for name, var in ds.variables.items() if var.dtype.kind in "biufcS"}


def _netcdf_bytes(groups: dict, attrs: dict) -> memoryview | None:
    """The netCDF-4 file of the groups, encoded in memory (None where xarray cannot do it)."""
    import xarray as xr

    if not hasattr(xr, "DataTree"):
        return None
    tree = xr.DataTree.from_dict({"/": xr.Dataset(attrs=attrs), **{f"/{k}": v for k, v in groups.items()}})
    encoding = {f"/{name}": _compression(ds) for name, ds in groups.items()}
    try:
        data = tree.to_netcdf(engine="h5netcdf", encoding=encoding)
    except (ValueError, TypeError, NotImplementedError):
        return None  # xarray before in-memory netCDF-4 (the file path then says what is wrong)
    return None if data is None else memoryview(data)


def _write_netcdf_file(groups: dict, attrs: dict, path: Path) -> None:
    import xarray as xr

    xr.Dataset(attrs=attrs).to_netcdf(path, mode="w", engine="h5netcdf")
    for name, ds in groups.items():
        ds.to_netcdf(path, mode="a", group=name, engine="h5netcdf", encoding=_compression(ds))


def _canonical(values: np.ndarray) -> bytes:
    # the value of an array, independent of how a file stores it (an int32 read back as int64,
    # a bool stored as int8, byte order): integers as int64/uint64, reals as float64 (exact)
    a = np.asarray(values)
    kind = a.dtype.kind
    if kind == "b":
        return np.ascontiguousarray(a, dtype="u1").tobytes()
    if kind == "i":
        return np.ascontiguousarray(a, dtype="<i8").tobytes()
    if kind == "u":
        return np.ascontiguousarray(a, dtype="<u8").tobytes()
    if kind == "f":
        return np.ascontiguousarray(a, dtype="<f8").tobytes()
    if kind == "c":
        return np.ascontiguousarray(a, dtype="<c16").tobytes()
    if kind in "mM":
        return np.ascontiguousarray(a.astype(f"{kind}8[ns]")).view("<i8").tobytes()
    return json.dumps([v.decode() if isinstance(v, bytes) else str(v) for v in a.ravel().tolist()]).encode()


def result_checksum(idata: Any) -> str:
    """The SHA-256 (hexadecimal) of a result's arrays and run spec, as recorded in its file.

    It covers every variable (data and coordinates) of every group, by group, name,
    dimensions, shape and value (integers as 64-bit, reals as float64, so that a type a file
    stores differently does not change it), and the run spec (``attrs["sgsim_config"]``).
    Other attributes (creation time, versions, timings) are not covered.

    Parameters
    ----------
    idata : arviz.InferenceData
        A result.

    Returns
    -------
    str
        64 hexadecimal digits.
    """
    h = hashlib.sha256(b"sgsim result checksum 1\0")

    def feed(part: bytes) -> None:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)

    config = idata.attrs.get("sgsim_config")
    feed(b"" if config is None else str(config).encode())
    groups = _result_groups(idata)
    for group in sorted(groups):
        ds = groups[group]
        for name in sorted(ds.variables, key=str):
            var = ds.variables[name]
            feed(json.dumps([group, str(name), [str(d) for d in var.dims], list(var.shape)]).encode())
            feed(_canonical(var.values))
    return h.hexdigest()


_RESULT_GROUPS = ("posterior", "unconstrained_posterior", "sample_stats", "constant_data", "moments")


def _check_result(idata: Any, path: Path) -> None:
    """Raise :class:`ResultFileError` unless ``idata`` read from ``path`` is an intact result."""
    names = set(_result_groups(idata))
    if not names & set(_RESULT_GROUPS):
        found = ", ".join(sorted(names)) or "none"
        raise ResultFileError(
            path, f"not a result: it has none of the groups of one ({', '.join(_RESULT_GROUPS)}); groups: {found}"
        )
    recorded = idata.attrs.get(_CHECKSUM_KEY)
    if recorded is None:
        return  # written before checksums were recorded
    actual = result_checksum(idata)
    if str(recorded) != actual:
        raise ResultFileError(
            path,
            f"its content does not match the checksum recorded when it was written (SHA-256 {str(recorded)[:16]}... "
            f"recorded, {actual[:16]}... read): the file was changed or damaged since",
        )


def _unreadable(path: Path, exc: BaseException) -> ResultFileError:
    with open(path, "rb") as fh:  # a file one may not read says so itself (PermissionError)
        head = fh.read(8)
    if head != b"\x89HDF\r\n\x1a\n":
        what = "empty" if not head else "not a netCDF-4 (HDF5) file"
        return ResultFileError(path, f"cannot be read: {what}")
    return ResultFileError(path, f"cannot be read (truncated or damaged?): {type(exc).__name__}: {exc}")


def read_result(path: str | os.PathLike) -> Any:
    """Read a result written by :func:`write_result` into memory.

    Every group is loaded eagerly and the file is closed, so the file can be replaced or
    deleted afterwards. Integers stored as strings (seeds beyond 64 bits) are restored. The
    content is checked against the checksum recorded in the file (:func:`result_checksum`);
    files written before checksums were recorded are read without this check.

    Returns
    -------
    arviz.InferenceData

    Raises
    ------
    FileNotFoundError
        If there is no file at ``path``.
    ResultFileError
        If the file is not a result (not netCDF, truncated or damaged, without the groups of
        a result) or its content does not match its checksum.

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
    from .results import groups_of, read_netcdf

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no result file at {path}")
    try:
        idata = read_netcdf(path)  # InferenceData under ArviZ 0.x, DataTree under 1.x
    except (MemoryError, RecursionError):
        raise
    except Exception as exc:  # h5py, h5netcdf, xarray and ArviZ each raise their own
        raise _unreadable(path, exc) from exc
    for name in groups_of(idata):
        idata[name].attrs = _decode_attrs(idata[name].attrs)
    idata.attrs = _decode_attrs(dict(idata.attrs))
    _check_result(idata, path)
    return idata
