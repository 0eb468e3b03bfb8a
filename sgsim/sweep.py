r"""Sweeps: many independent runs (cells) in one process, on a process pool or on Dask, into a
resumable store.

A **cell** is one call ``function(**params, seed=seed)`` of an importable function that
returns a dict of numbers or arrays (its summary of one run: errors, ESS, moments). A sweep
is a list of cells, usually a grid: the cartesian product of some parameter axes times a list
of seeds (:func:`grid`). Cells are independent and deterministic in their seed, so where a
cell runs (which process, which machine, in which order) never changes its result: the
same sweep serial, on a process pool and on Dask writes bit-identical cells.

Cell keys: when a stored result is reused
-----------------------------------------
A cell's key (its file name in a store) is ``<identity>-<code>``. The *identity* hashes the
function's ``"module:qualname"``, every argument it receives with the function's defaults
applied (so a changed default is a different cell) and the seed. The *code* part hashes the
bytes of the module file that defines the function and ``sgsim.__version__``. With the
default policy ``reuse="exact"`` a rerun reuses a stored result only when all of these are
unchanged: editing the cell's module, changing a default or upgrading sgsim computes the cells
again (into new files; the old ones stay, and are never read). ``reuse="any"`` reuses a
stored result of the same identity whatever code or sgsim version wrote it (the newest file
of that identity), for a sweep whose module was edited in ways that do not change results.
Code outside the cell's module is not hashed: a cell that calls a module of one's own which
changed must be run with a new store (sgsim's own modules are covered by its version).

The store
---------
:class:`Store` is a directory with one file per finished cell, ``<key>.npz``. The driver
writes each result as it arrives, atomically (a temporary file renamed into place), together
with the cell's description and a SHA-256 checksum of its arrays. A rerun of the same sweep
skips every cell whose file is there and verifies; a truncated or otherwise corrupt file (a
machine that lost power mid-write of another program, a disk error) fails the check and is
computed again (the new file replaces it), never read as a result. Reading never deletes a
file: a file found corrupt may already have been replaced by a valid one that another driver
has just written. So a sweep whose driver is killed loses only the cells that were running,
and the next run computes exactly those: nothing is lost and nothing duplicated.
:meth:`Store.summary` gathers the results of a list of cells into an :class:`xarray.Dataset`
(one dimension per grid axis and ``seed`` when the cells form a grid). :func:`run_sweep`
checks that the store can be written (creating a file in it) before it runs any cell.

Several drivers on one store
----------------------------
Drivers started on the same store, on one machine or on several sharing a file system,
share the work: before a cell is sent to a worker its driver takes the cell's claim, an
exclusive lock (``fcntl.flock``) on the file ``<key>.claim`` holding the driver's pid and
host. A driver skips the cells whose claim another driver holds and, when it has nothing else
left, waits for their results, taking over any claim that is freed without a result. The lock
belongs to the driver's process, so the operating system frees the claims of a driver that
dies, ``kill -9`` included: its cells are computed by the next driver that reaches them. Each
cell is computed once. (Without ``fcntl``, on Windows, there are no claims and two drivers
compute the same cells; the store stays valid.)

Executors
---------
``"serial"`` runs the cells in this process; ``"processes"`` on a local pool of long-lived
worker processes (started with ``forkserver`` where the platform has it, else ``spawn``, never
``fork``: see the README on processes), each compiling sgsim's loops once; ``"dask"`` on a
Dask cluster (``pip install "sgsim[dask]"``): a ``LocalCluster`` of ``n_workers`` processes
by default, or the running cluster at ``scheduler`` (``"tcp://host:8786"``), whose dashboard
address is printed. A Dask worker that dies mid-cell has its cell rescheduled by Dask; the
driver writes each result once. A pool worker that dies (a crash in compiled code, the
out-of-memory killer) takes the cells it was running with it: the pool is restarted, those
cells are run again one at a time, and a cell that kills its worker on its own too is
reported failed; the other cells are unaffected. A cell that raises is reported (with its
parameters and the error) after the others have finished, and left out of the store, so that
a rerun retries it.

Workers watch their driver: a pool worker exits as soon as its driver is gone, ``kill -9``
included (``multiprocessing.parent_process()``'s sentinel), and Dask's local workers do the
same through their nanny. Pool workers ignore Ctrl-C, which goes to the driver: it stops the
workers, says on stderr how many cells are finished and saved in the store, and raises
``KeyboardInterrupt`` (``sgsim sweep`` exits with status 130). The cells that were running
are computed by the next run.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import inspect
import io as _io
import itertools
import json
import logging
import multiprocessing
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

from ._validate import ParameterError, ParameterTypeError, integer
from .io import atomic_write
from .results import flat_draws

__all__ = [
    "Cell",
    "Store",
    "SweepError",
    "SweepReport",
    "grid",
    "run_sweep",
    "run_cell",
    "compute",
    "executing",
    "sample_cell",
    "EXECUTORS",
]

EXECUTORS = ("serial", "processes", "dask")
_META = "__sgsim_cell__"


def _function_path(function: str | Callable) -> str:
    """``"module:qualname"`` of an importable module-level function."""
    if isinstance(function, str):
        path = function
    else:
        mod, name = getattr(function, "__module__", None), getattr(function, "__qualname__", "")
        if not mod or mod == "__main__" or "<" in name or "." in name:
            raise ParameterTypeError(
                "function",
                f"a cell's function must be importable by name from a module (not __main__, a lambda or a "
                f"closure): got {mod}:{name}",
            )
        path = f"{mod}:{name}"
    _load(path)
    return path


def _load(path: str) -> Callable:
    mod, _, name = path.partition(":")
    try:
        obj = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ParameterError("function", f"cannot import the cell function {path!r}: {exc}") from None
    if not callable(obj):
        raise ParameterTypeError("function", f"{path!r} is not callable")
    return obj


def _canonical(value: Any) -> Any:
    # parameters as JSON: numbers, strings, bools, None, lists and dicts of them
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_canonical(v) for v in (value.tolist() if isinstance(value, np.ndarray) else value)]
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    raise ParameterTypeError(
        "params", f"cell parameters must be JSON-like (numbers, strings, lists, dicts), got {value!r}"
    )


def _default(value: Any) -> Any:
    # a default argument in canonical form; one that is not JSON-like is named by its type
    # (a change of its value is then not seen: the module's hash still is)
    try:
        return _canonical(value)
    except ParameterTypeError:
        return f"<{type(value).__module__}.{type(value).__qualname__}>"


def _arguments(path: str, function: Callable, params: dict, seed: int) -> dict:
    """Every argument ``function`` receives in ``function(**params, seed=seed)``, defaults
    applied, in canonical form (the seed left out).
    """
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin without a signature: only what is given
        return dict(params)
    try:
        bound = signature.bind(**params, seed=seed)
    except TypeError as exc:
        message = f"the cell function {path} cannot be called with {params} and seed: {exc}"
        raise ParameterError("params", message) from None
    bound.apply_defaults()
    out: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        elif kind is not inspect.Parameter.VAR_POSITIONAL and name != "seed":
            out[name] = value if name in params else _default(value)
    return out


_SOURCE_HASHES: dict[int, tuple[Callable, str]] = {}


def _source_hash(function: Callable) -> str:
    """SHA-256 of the bytes of the module file defining ``function`` (of its source when the
    module has no file; of its qualified name as a last resort).
    """
    hit = _SOURCE_HASHES.get(id(function))
    if hit is not None and hit[0] is function:
        return hit[1]
    try:
        data = Path(inspect.getsourcefile(function) or inspect.getfile(function)).read_bytes()
    except (TypeError, OSError):
        try:
            data = inspect.getsource(function).encode()
        except (TypeError, OSError):
            data = f"{function.__module__}:{function.__qualname__}".encode()
    digest = hashlib.sha256(data).hexdigest()
    _SOURCE_HASHES[id(function)] = (function, digest)  # the reference keeps the id from being reused
    return digest


def _code_fingerprint(function: Callable) -> str:
    """16 hex digits over the function's module file and sgsim's version."""
    import sgsim

    text = json.dumps({"source": _source_hash(function), "sgsim": sgsim.__version__})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, eq=False)
class Cell:
    """One run of a sweep: ``function(**params, seed=seed)``.

    Attributes
    ----------
    function : str
        ``"module:qualname"`` of an importable function returning a dict of numbers or arrays
        (the function itself is accepted and converted).
    params : dict
        Its keyword arguments, JSON-like (kept in canonical form).
    seed : int
        The run's seed, passed as ``seed=``.
    arguments : dict
        Every argument the function receives but the seed: ``params`` with the function's
        defaults applied (what the key hashes, with the seed).
    code : str
        16 hex digits hashing the function's module file and ``sgsim.__version__`` (see the
        module notes on when a stored result is reused).

    Raises
    ------
    ParameterError
        If the function cannot be imported or cannot be called with ``params`` and ``seed``.
    """

    function: str | Callable
    params: dict = field(default_factory=dict)
    seed: int = 0
    arguments: dict = field(init=False, repr=False)
    code: str = field(init=False, repr=False)

    def __post_init__(self):
        path = _function_path(self.function)
        function = _load(path)
        object.__setattr__(self, "function", path)
        object.__setattr__(self, "params", _canonical(dict(self.params)))
        object.__setattr__(self, "seed", integer("seed", self.seed))
        object.__setattr__(self, "arguments", _arguments(path, function, self.params, self.seed))
        object.__setattr__(self, "code", _code_fingerprint(function))

    def __eq__(self, other) -> bool:
        return isinstance(other, Cell) and self.describe() == other.describe()

    def __hash__(self) -> int:
        return hash(self.describe())

    def identify(self) -> str:
        """The cell's function, arguments (defaults applied) and seed as canonical JSON."""
        return json.dumps({"function": self.function, "params": self.arguments, "seed": self.seed}, sort_keys=True)

    def describe(self) -> str:
        """:meth:`identify` and the code fingerprint as canonical JSON (what the key hashes)."""
        return json.dumps(
            {"function": self.function, "params": self.arguments, "seed": self.seed, "code": self.code},
            sort_keys=True,
        )

    @property
    def identity(self) -> str:
        """32 hex digits of the SHA-256 of :meth:`identify`."""
        return hashlib.sha256(self.identify().encode()).hexdigest()[:32]

    @property
    def key(self) -> str:
        """``<identity>-<code>``: the cell's file name in a store."""
        return f"{self.identity}-{self.code}"


def grid(function: str | Callable, seeds: int | Sequence[int], fixed: dict | None = None, **axes) -> list[Cell]:
    """The cells of a grid: every combination of the ``axes`` values, times every seed.

    Parameters
    ----------
    function : str or callable
        The cell function (importable by name).
    seeds : int or sequence of int
        The seeds, or their number (``0 .. seeds - 1``).
    fixed : dict, optional
        Parameters shared by every cell.
    **axes : sequence
        One list of values per varied parameter.

    Examples
    --------
    Two step sizes times two seeds of the ready-made cell :func:`sample_cell`, run in this
    process by :func:`compute`:

    >>> from sgsim import sweep
    >>> cells = sweep.grid(
    ...     "sgsim.sweep:sample_cell",
    ...     seeds=2,
    ...     fixed={"target": "standard_gaussian", "method": "sgld", "n_steps": 500},
    ...     step_size=[0.05, 0.1],
    ... )
    >>> len(cells)
    4
    >>> print(cells[1].params["step_size"], cells[1].seed)
    0.05 1
    >>> results = sweep.compute(cells)
    >>> sorted(results[0])
    ['final', 'mean', 'n_diverged', 'var']
    >>> results[0]["mean"].shape
    (2,)
    """
    seed_list = list(range(integer("seeds", seeds, low=1))) if isinstance(seeds, (int, np.integer)) else list(seeds)
    if not seed_list:
        raise ParameterError("seeds", "a sweep needs at least one seed")
    for name, values in axes.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise ParameterTypeError(name, f"axis {name!r} must be a list of values, got {values!r}")
    names = list(axes)
    path = _function_path(function)
    cells = []
    for combo in itertools.product(*(list(axes[n]) for n in names)):
        for seed in seed_list:
            cells.append(Cell(path, {**(fixed or {}), **dict(zip(names, combo, strict=True))}, seed))
    return cells


def run_cell(cell: Cell) -> dict[str, np.ndarray]:
    """Run one cell in this process; its result as a dict of float or int arrays."""
    out = _load(str(cell.function))(**cell.params, seed=cell.seed)
    if not isinstance(out, dict) or not out:
        raise TypeError(f"cell function {cell.function} must return a non-empty dict, got {type(out).__name__}")
    result = {}
    for name, value in out.items():
        arr = np.asarray(value)
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("__"):
            raise TypeError(f"cell function {cell.function}: result names must be identifiers, got {name!r}")
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"cell function {cell.function}: result {name!r} is not numeric ({arr.dtype})")
        result[name] = arr
    return result


def sample_cell(
    target: str, method: str, n_steps: int, seed: int, n_chains: int = 1, target_kwargs: dict | None = None,
    **options,
) -> dict[str, np.ndarray]:  # fmt: skip
    """A ready-made cell: ``sgsim.sample`` of a registered target, summarised.

    Returns the mean and variance of the kept draws per coordinate (over chains and draws),
    the final state of each chain, and the number of diverged chains (``on_divergence="mark"``).
    """
    from . import targets
    from .sampling import sample

    tgt = targets.build(targets.TargetSpec(target, dict(target_kwargs or {})))
    r = sample(tgt, method, n_steps, n_chains=n_chains, seed=seed, on_divergence="mark", progress=False, **options)
    theta = flat_draws(r)
    flat = theta.reshape(-1, theta.shape[-1])
    diverged = r.sample_stats["diverged"].values.any(axis=-1) if "diverged" in r.sample_stats else np.zeros(n_chains)
    return {
        "mean": np.nanmean(flat, axis=0),
        "var": np.nanvar(flat, axis=0),
        "final": theta[:, -1],
        "n_diverged": np.int64(np.count_nonzero(diverged)),
    }


def _checksum(result: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(result):
        arr = np.ascontiguousarray(result[name])
        h.update(f"{name}|{arr.dtype.str}|{arr.shape}|".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return float("-inf")


class _Claim:
    """An exclusive ``flock`` on a claim file, held until :meth:`release` or the process's end."""

    def __init__(self, path: Path, fd: int | None):
        self.path, self.fd = path, fd

    @classmethod
    def take(cls, path: Path) -> _Claim | None:
        if fcntl is None:  # no advisory locks here: every driver computes its cells
            return cls(path, None)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # held by another process
                os.close(fd)
                return None
            # the holder may have released (removed) the file between our open and our lock:
            # then this lock is on a removed file, and the claim is taken anew
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
                return cls(path, fd)
            os.close(fd)

    def release(self) -> None:
        """Remove the claim file (ours while the lock is held), then unlock it."""
        if self.fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(self.fd)
            self.fd = None


REUSE = ("exact", "any")


class Store:
    """A directory of finished cells, one verified ``<key>.npz`` each (see the module notes).

    Parameters
    ----------
    directory : str or path-like
        The store's directory (created when a sweep first writes to it).
    reuse : {"exact", "any"}
        Which stored results count as a cell's: only those of the same key (the same code and
        sgsim version, the default), or any of the same function, arguments and seed.
    """

    def __init__(self, directory: str | os.PathLike, reuse: str = "exact"):
        if reuse not in REUSE:
            raise ParameterError("reuse", f"reuse must be one of {REUSE}, got {reuse!r}")
        self.directory = Path(directory)
        self.reuse = reuse

    def path(self, cell: Cell) -> Path:
        """Where ``cell``'s result lives (is written)."""
        return self.directory / f"{cell.key}.npz"

    def check_writable(self) -> None:
        """Create the directory if needed and a file in it, then remove that file.

        Raises
        ------
        ParameterError
            Naming ``store``, with the directory and the reason, if either fails.
        """
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=self.directory, prefix=".sgsim-probe-")
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise ParameterError("store", f"cannot write to the sweep store {self.directory}: {reason}") from None

    def write(self, cell: Cell, result: dict[str, np.ndarray]) -> Path:
        """Store ``result`` of ``cell`` atomically, with the cell's description and a checksum."""
        import sgsim

        meta = json.dumps(
            {
                "cell": json.loads(cell.describe()),
                "sha256": _checksum(result),
                "sgsim_version": sgsim.__version__,
            }
        )

        def writer(tmp: Path) -> None:
            buf = _io.BytesIO()
            arrays: dict[str, Any] = {**result, _META: np.array(meta)}
            np.savez(buf, **arrays)
            tmp.write_bytes(buf.getvalue())

        return atomic_write(self.path(cell), writer)

    def _load(self, path: Path, want: dict, exact: bool) -> dict[str, np.ndarray] | None:
        try:
            # the file is opened here, so that it is closed even when numpy cannot parse it
            with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as data:
                stored = {k: data[k] for k in data.files}
            meta = json.loads(str(stored.pop(_META)))
            cell = dict(meta["cell"])
            if not exact:
                cell.pop("code", None)
            ok = cell == want and meta["sha256"] == _checksum(stored)
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile, json.JSONDecodeError):
            ok = False
        # a file that does not verify is left where it is: another driver may have replaced it
        # with a valid one since it was opened, and a new result replaces it atomically anyway
        return stored if ok else None

    def read(self, cell: Cell) -> dict[str, np.ndarray] | None:
        """``cell``'s verified result, or None when it is missing or does not verify.

        With ``reuse="any"``, the newest verified file of the cell's identity when its own key
        has none. Nothing is ever deleted.
        """
        path = self.path(cell)
        if path.exists():
            result = self._load(path, json.loads(cell.describe()), exact=True)
            if result is not None or self.reuse == "exact":
                return result
        if self.reuse == "exact":
            return None
        others = [q for q in self.directory.glob(f"{cell.identity}-*.npz") if q != path]
        for other in sorted(others, key=_mtime, reverse=True):
            result = self._load(other, json.loads(cell.identify()), exact=False)
            if result is not None:
                return result
        return None

    def done(self, cell: Cell) -> bool:
        """Whether ``cell`` has a verified result."""
        return self.read(cell) is not None

    def claim(self, cell: Cell) -> _Claim | None:
        """Take ``cell``'s claim (see the module notes): a held claim, or None when another live
        process holds it.
        """
        return _Claim.take(self.directory / f"{cell.key}.claim")

    def summary(self, cells: Sequence[Cell]):
        """The results of ``cells`` as an :class:`xarray.Dataset`.

        Dimension ``cell`` with each parameter and ``seed`` as a coordinate; when every cell
        has the same scalar parameters and they form a full grid, it is unstacked into one
        dimension per varied parameter and ``seed`` (the parameters every cell shares become
        scalar coordinates). Results are stored as floats there, so that a missing cell is NaN.

        Raises
        ------
        ValueError
            If no cell has a result.
        """
        import xarray as xr

        results = [self.read(c) for c in cells]
        first = next((r for r in results if r is not None), None)
        if first is None:
            raise ValueError(f"none of the {len(cells)} cells has a result in {self.directory}")
        data = {}
        for name, ref in first.items():
            stack = np.full((len(cells),) + ref.shape, np.nan)
            for i, r in enumerate(results):
                if r is not None and name in r:
                    stack[i] = r[name]
            data[name] = (("cell",) + tuple(f"{name}_dim_{j}" for j in range(ref.ndim)), stack)
        names = sorted({k for c in cells for k in c.params})
        scalar = all(set(c.params) == set(names) for c in cells) and all(
            isinstance(c.params[n], (int, float, str, bool)) for c in cells for n in names
        )
        coords: dict[str, Any] = {"seed": ("cell", [c.seed for c in cells])}
        ds = xr.Dataset(data, coords=coords)
        if not scalar:
            return ds
        # parameters that vary become coordinates (dimensions when they form a full grid), the
        # others scalar coordinates
        varied = [n for n in names if len({c.params[n] for c in cells}) > 1]
        for n in names:
            ds = ds.assign_coords({n: ("cell", [c.params[n] for c in cells]) if n in varied else cells[0].params[n]})
        index = [*varied, "seed"]
        combos = {tuple(c.params[n] for n in varied) + (c.seed,) for c in cells}
        size = int(np.prod([len({c.params[n] for c in cells}) for n in varied])) * len({c.seed for c in cells})
        if len(combos) == len(cells) == size:
            ds = ds.set_index(cell=index).unstack("cell").transpose(*index, ...)
        return ds


class SweepError(RuntimeError):
    """Some cells failed; the others are in the store. ``failures`` maps each failed cell to its error."""

    def __init__(self, failures: dict[Cell, str]):
        self.failures = failures
        lines = [f"  {c.params} seed {c.seed}: {err}" for c, err in list(failures.items())[:10]]
        more = f"\n  ... and {len(failures) - 10} more" if len(failures) > 10 else ""
        super().__init__(
            f"{len(failures)} cell(s) failed (the others are stored; rerun to retry):\n" + "\n".join(lines) + more
        )


@dataclass
class SweepReport:
    """What a sweep did: cells found in the store, computed now, computed meanwhile by another
    driver on the same store, and where.
    """

    n_cells: int
    n_found: int
    n_computed: int
    executor: str
    dashboard: str | None = None
    n_elsewhere: int = 0


def _context():
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    # the server imports sgsim once, so that a worker (a restarted one too) starts without
    # importing it again; what else the program asked the server to preload is kept
    from multiprocessing import forkserver

    preload = list(getattr(getattr(forkserver, "_forkserver", None), "_preload_modules", None) or ["__main__"])
    if __name__ not in preload:
        ctx.set_forkserver_preload([*preload, __name__])
    return ctx


def _watch_parent() -> None:
    """In a pool worker: leave Ctrl-C to the driver, and exit as soon as the driver is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = multiprocessing.parent_process()
    if parent is None:  # pragma: no cover - always set in a spawned or forkserver child
        return

    def watch() -> None:
        parent.join()  # returns when the driver's end of the sentinel pipe closes: it has exited
        os._exit(1)

    threading.Thread(target=watch, name="sgsim-watch-driver", daemon=True).start()


_WORKER_DIED = "its worker process died while running it alone, after dying with it among others"


class _Serial:
    """Runs each cell in this process when asked for results."""

    def __init__(self):
        self.cells: list[Cell] = []

    def free(self) -> bool:
        return not self.cells

    def busy(self) -> bool:
        return bool(self.cells)

    def submit(self, cell: Cell) -> None:
        self.cells.append(cell)

    def results(self, timeout: float | None):
        cell = self.cells.pop()
        try:
            return [(cell, run_cell(cell), None)]
        except Exception as exc:  # reported with the others at the end
            return [(cell, None, exc)]

    def close(self) -> None:
        pass


class _Pool:
    """A process pool with at most ``n`` cells in flight (so each one in flight is running).

    When a worker dies the pool breaks and every cell in flight fails with it; they are run
    again one at a time on a new pool, and one that breaks the pool alone is failed.
    """

    def __init__(self, n: int):
        self.n = n
        self.pool = self._start()
        self.futures: dict[Any, Cell] = {}
        self.retry: list[Cell] = []
        self.suspects: set[Cell] = set()

    def _start(self):
        return ProcessPoolExecutor(max_workers=self.n, mp_context=_context(), initializer=_watch_parent)

    def free(self) -> bool:
        return not self.retry and not self.suspects.intersection(self.futures.values()) and len(self.futures) < self.n

    def busy(self) -> bool:
        return bool(self.futures or self.retry)

    def submit(self, cell: Cell) -> None:
        self.futures[self.pool.submit(run_cell, cell)] = cell

    def results(self, timeout: float | None):
        if self.retry and not self.futures:
            self.submit(self.retry.pop(0))
        done, _ = wait(self.futures, timeout, FIRST_COMPLETED)
        out, lost = [], []
        for fut in done:
            cell = self.futures.pop(fut)
            error = fut.exception()
            if isinstance(error, BrokenProcessPool):
                lost.append(cell)
            else:
                out.append((cell, None if error else fut.result(), error))
        if lost:
            lost += list(self.futures.values())  # they all went down with the pool
            self.futures.clear()
            self.close()
            self.pool = self._start()
            if len(lost) == 1 and lost[0] in self.suspects:
                out.append((lost[0], None, RuntimeError(_WORKER_DIED)))
            else:
                self.suspects.update(lost)
                self.retry += lost
        return out

    def close(self) -> None:
        # stop the workers now (a running cell is not waited for: it is not stored, the next
        # run computes it)
        processes = list((getattr(self.pool, "_processes", None) or {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        for proc in processes:
            with contextlib.suppress(Exception):
                proc.kill()
        for proc in processes:
            with contextlib.suppress(Exception):
                proc.join(5)


class _QuietNannyClose(logging.Filter):
    """Drop the nanny's warning that a worker was still exiting when the cluster closed.

    A worker process that has run sgsim's compiled loops takes a few seconds to tear them down
    at exit, longer than the nanny's close budget on a loaded machine; the nanny then kills it,
    which loses nothing (every result is in by then) but logged ``distributed.nanny - WARNING``
    at the end of every run. Other warnings of the nanny are kept.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "still alive after" not in record.getMessage()


class _Dask:
    """Cells on a Dask cluster (a LocalCluster of ``n`` processes, or the one at ``scheduler``)."""

    def __init__(self, n: int, scheduler: str | None):
        try:
            from distributed import Client, LocalCluster
            from distributed import as_completed as dask_completed
        except ImportError:  # pragma: no cover - exercised without the extra
            raise ImportError('executor="dask" needs Dask: pip install "sgsim[dask]"') from None
        self.n = n if scheduler is None else None
        self.filter = _QuietNannyClose()
        logging.getLogger("distributed.nanny").addFilter(self.filter)
        self.cluster = None
        if scheduler is None:
            self.cluster = LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=":0"
            )
            self.client = Client(self.cluster)
        else:
            self.client = Client(scheduler)
        self.dashboard = self.client.dashboard_link
        print(f"sgsim sweep: Dask dashboard at {self.dashboard}", flush=True)
        self.queue = dask_completed([], with_results=False)
        self.cells: dict[str, Cell] = {}

    def free(self) -> bool:
        limit = self.n or 2 * max(1, len(self.client.scheduler_info().get("workers", {})))
        return len(self.cells) < limit

    def busy(self) -> bool:
        return bool(self.cells)

    def submit(self, cell: Cell) -> None:
        fut = self.client.submit(run_cell, cell, key=f"sgsim-cell-{cell.key}", pure=False)
        self.cells[str(fut.key)] = cell
        self.queue.add(fut)

    def results(self, timeout: float | None):
        if timeout is None:
            batch = self.queue.next_batch(block=True)
        else:
            deadline = time.monotonic() + timeout
            while not self.queue.has_ready() and time.monotonic() < deadline:
                time.sleep(0.02)
            batch = self.queue.next_batch(block=False)
        out = []
        for fut in batch:
            cell = self.cells.pop(str(fut.key))
            if fut.status == "error":
                out.append((cell, None, fut.exception()))
            else:
                out.append((cell, fut.result(), None))
        return out

    def close(self) -> None:
        try:
            self.client.close()
            if self.cluster is not None:
                self.cluster.close()
        finally:
            logging.getLogger("distributed.nanny").removeFilter(self.filter)


def run_sweep(
    cells: Sequence[Cell],
    store: Store | str | os.PathLike,
    executor: str = "serial",
    *,
    n_workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = False,
    reuse: str | None = None,
) -> SweepReport:
    """Run every cell of ``cells`` that ``store`` does not hold yet, writing each result as it arrives.

    Parameters
    ----------
    cells : sequence of Cell
        The sweep (duplicates are run once).
    store : Store or path
        The result store (created if needed; checked writable before any cell runs).
    executor : {"serial", "processes", "dask"}
        Where the cells run (see the module notes).
    n_workers : int, optional
        Worker processes of ``"processes"`` and of a local Dask cluster (default: 2).
    scheduler : str, optional
        ``"dask"`` only: the address of a running scheduler instead of a local cluster.
    progress : bool
        A progress bar over the cells.
    reuse : {"exact", "any"}, optional
        Which stored results are reused (see the module notes); default: the store's
        (``"exact"`` for a path).

    Returns
    -------
    SweepReport
        How many cells were found in the store, computed now, and computed meanwhile by
        another driver on the same store.

    Raises
    ------
    SweepError
        After all other cells have finished, if some cells raised.
    ParameterError
        Naming ``store`` if the store cannot be written, before any cell runs.
    KeyboardInterrupt
        On Ctrl-C, after stopping the workers and saying on stderr how many cells are saved.

    Examples
    --------
    A second run of the same sweep finds every cell in the store and computes none;
    :meth:`Store.summary` lays the results out on the grid's axes:

    >>> import tempfile
    >>> from sgsim import sweep
    >>> cells = sweep.grid(
    ...     "sgsim.sweep:sample_cell",
    ...     seeds=2,
    ...     fixed={"target": "standard_gaussian", "method": "sgld", "n_steps": 500},
    ...     step_size=[0.05, 0.1],
    ... )
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     first = sweep.run_sweep(cells, tmp)
    ...     second = sweep.run_sweep(cells, tmp)
    ...     summary = sweep.Store(tmp).summary(cells)
    >>> print(first.n_computed, second.n_found, second.n_computed)
    4 4 0
    >>> summary["mean"].dims
    ('step_size', 'seed', 'mean_dim_0')
    """
    if executor not in EXECUTORS:
        raise ParameterError("executor", f"executor must be one of {EXECUTORS}, got {executor!r}")
    if scheduler is not None and executor != "dask":
        raise ParameterTypeError("scheduler", "scheduler is the address of a Dask scheduler: use executor='dask'")
    workers = 2 if n_workers is None else integer("n_workers", n_workers, low=1)
    if isinstance(store, Store):
        store = store if reuse is None or reuse == store.reuse else Store(store.directory, reuse)
    else:
        store = Store(store, "exact" if reuse is None else reuse)
    store.check_writable()
    unique = list(dict.fromkeys(cells))
    pending = [c for c in unique if not store.done(c)]
    report = SweepReport(len(unique), len(unique) - len(pending), 0, executor)
    failures: dict[Cell, str] = {}
    # tqdm.auto warns in a notebook without ipywidgets even when the bar is disabled
    tqdm = importlib.import_module("tqdm.auto" if progress else "tqdm").tqdm
    bar = tqdm(total=len(unique), initial=report.n_found, desc="cells", unit="cell", disable=not progress)
    backend: _Serial | _Pool | _Dask | None = None
    try:
        if pending:
            if executor == "serial":
                backend = _Serial()
            elif executor == "processes":
                backend = _Pool(workers)
            else:
                dask = _Dask(workers, scheduler)
                report.dashboard = dask.dashboard
                backend = dask
            _drive(pending, store, backend, report, failures, bar)
    except KeyboardInterrupt:
        if backend is not None:
            with contextlib.suppress(BaseException):
                backend.close()
            backend = None
        saved = report.n_found + report.n_computed + report.n_elsewhere
        print(
            f"sgsim sweep: interrupted; {saved} of {report.n_cells} cells are finished and saved in "
            f"{store.directory} ({report.n_computed} computed by this run); rerun to compute the "
            f"{report.n_cells - saved} others",
            file=sys.stderr,
            flush=True,
        )
        raise
    finally:
        if backend is not None:
            backend.close()
        bar.close()
    if failures:
        raise SweepError(failures)
    return report


_POLL_S = 0.25


@contextlib.contextmanager
def _sigint_deferred():
    """Hold a Ctrl-C that arrives within the block until its end (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def _drive(pending: list[Cell], store: Store, backend, report: SweepReport, failures: dict, bar) -> None:
    """Claim, submit and store the pending cells; wait for those another driver holds."""
    queue = list(pending)
    queue.reverse()  # popped from the end: in order
    claims: dict[Cell, _Claim] = {}
    others: list[Cell] = []  # claimed by another driver: theirs unless they give them up
    last_look = time.monotonic()
    try:
        while queue or others or backend.busy():
            while queue and backend.free():
                cell = queue.pop()
                claim = store.claim(cell)
                if claim is None:
                    others.append(cell)
                elif store.done(cell):  # written by another driver since we looked
                    claim.release()
                    report.n_elsewhere += 1
                    bar.update(1)
                else:
                    claims[cell] = claim
                    backend.submit(cell)
            if others and (not backend.busy() or time.monotonic() - last_look > _POLL_S):
                if not backend.busy():
                    time.sleep(_POLL_S)
                last_look = time.monotonic()
                for cell in others:
                    if store.done(cell):
                        report.n_elsewhere += 1
                        bar.update(1)
                    else:  # try its claim again: freed if its driver died
                        queue.append(cell)
                others = []
                continue
            if not backend.busy():
                continue
            for cell, result, error in backend.results(_POLL_S if others else None):
                with _sigint_deferred():  # a result received is stored and counted, or neither
                    try:
                        if error is not None:
                            failures[cell] = f"{type(error).__name__}: {error}"
                        else:
                            store.write(cell, result)
                            report.n_computed += 1
                    finally:
                        claims.pop(cell).release()
                bar.update(1)
    finally:
        for claim in claims.values():
            claim.release()


_DEFAULTS: dict[str, Any] = {"executor": "serial", "n_workers": None, "scheduler": None}


@contextlib.contextmanager
def executing(executor: str = "serial", n_workers: int | None = None, scheduler: str | None = None):
    """Within the block, :func:`compute` called without an executor uses these (``sgsim
    reproduce --executor ... --scheduler ...`` sets them around the paper experiments).
    """
    if executor not in EXECUTORS:
        raise ParameterError("executor", f"executor must be one of {EXECUTORS}, got {executor!r}")
    old = dict(_DEFAULTS)
    _DEFAULTS.update(executor=executor, n_workers=n_workers, scheduler=scheduler)
    try:
        yield
    finally:
        _DEFAULTS.clear()
        _DEFAULTS.update(old)


def compute(
    cells: Sequence[Cell],
    store: Store | str | os.PathLike | None = None,
    executor: str | None = None,
    *,
    n_workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = False,
    reuse: str | None = None,
) -> list[dict[str, np.ndarray]]:
    """Run ``cells`` (see :func:`run_sweep`) and return their results in order.

    With ``store=None`` the results pass through a temporary store that is removed after;
    with a store, finished cells are reused and an interrupted call resumes. ``executor=None``
    takes the one of the enclosing :func:`executing` block (serial outside any); ``reuse``
    is :func:`run_sweep`'s.
    """
    import tempfile

    if executor is None:
        executor = _DEFAULTS["executor"]
        n_workers = _DEFAULTS["n_workers"] if n_workers is None else n_workers
        scheduler = _DEFAULTS["scheduler"] if scheduler is None else scheduler
    if store is None:
        with tempfile.TemporaryDirectory(prefix="sgsim-sweep-") as tmp:
            return compute(cells, tmp, executor, n_workers=n_workers, scheduler=scheduler, progress=progress)
    if isinstance(store, Store):
        store = store if reuse is None or reuse == store.reuse else Store(store.directory, reuse)
    else:
        store = Store(store, "exact" if reuse is None else reuse)
    run_sweep(cells, store, executor, n_workers=n_workers, scheduler=scheduler, progress=progress)
    out = []
    for cell in cells:
        result = store.read(cell)
        if result is None:  # removed behind our back (another process cleaning the store)
            raise RuntimeError(f"cell {cell.describe()} vanished from the store {store.directory}")
        out.append(result)
    return out
