r"""Sweeps: many independent runs (cells) in one process, on a process pool or on Dask, into a
resumable store.

A **cell** is one call ``function(**params, seed=seed)`` of an importable function that
returns a dict of numbers or arrays (its summary of one run: errors, ESS, moments). A sweep
is a list of cells, usually a grid: the cartesian product of some parameter axes times a list
of seeds (:func:`grid`). Cells are independent and deterministic in their seed, so where a
cell runs (which process, which machine, in which order) never changes its result: the
same sweep serial, on a process pool and on Dask writes bit-identical cells.

The store
---------
:class:`Store` is a directory with one file per finished cell, ``<key>.npz``, where ``key``
is a hash of the cell's function, parameters and seed. The driver writes each result as it
arrives, atomically (a temporary file renamed into place), together with the cell's
description and a SHA-256 checksum of its arrays. A rerun of the same sweep skips every cell
whose file is there and verifies; a truncated or otherwise corrupt file (a machine that lost
power mid-write of another program, a disk error) fails the check and is computed again,
never read as a result. So a sweep whose driver is killed loses only the cells that were
running, and the next run computes exactly those: nothing is lost and nothing duplicated.
:meth:`Store.summary` gathers the results of a list of cells into an :class:`xarray.Dataset`
(one dimension per grid axis and ``seed`` when the cells form a grid).

Executors
---------
``"serial"`` runs the cells in this process; ``"processes"`` on a local pool of long-lived
worker processes (started with ``forkserver`` where the platform has it, else ``spawn``, never
``fork``: see the README on processes), each compiling sgsim's loops once; ``"dask"`` on a
Dask cluster (``pip install "sgsim[dask]"``): a ``LocalCluster`` of ``n_workers`` processes
by default, or the running cluster at ``scheduler`` (``"tcp://host:8786"``), whose dashboard
address is printed. A Dask worker that dies mid-cell has its cell rescheduled by Dask; the
driver writes each result once. A cell that raises is reported (with its parameters and
the error) after the others have finished, and left out of the store, so that a rerun
retries it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io as _io
import itertools
import json
import multiprocessing
import os
import zipfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

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
    """

    function: str | Callable
    params: dict = field(default_factory=dict)
    seed: int = 0

    def __post_init__(self):
        object.__setattr__(self, "function", _function_path(self.function))
        object.__setattr__(self, "params", _canonical(dict(self.params)))
        object.__setattr__(self, "seed", integer("seed", self.seed))

    def __eq__(self, other) -> bool:
        return isinstance(other, Cell) and self.describe() == other.describe()

    def __hash__(self) -> int:
        return hash(self.describe())

    def describe(self) -> str:
        """The cell as canonical JSON (what its key hashes)."""
        return json.dumps({"function": self.function, "params": self.params, "seed": self.seed}, sort_keys=True)

    @property
    def key(self) -> str:
        """32 hex digits of the SHA-256 of :meth:`describe`: the cell's file name in a store."""
        return hashlib.sha256(self.describe().encode()).hexdigest()[:32]


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


class Store:
    """A directory of finished cells, one verified ``<key>.npz`` each (see the module notes)."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)

    def path(self, cell: Cell) -> Path:
        """Where ``cell``'s result lives."""
        return self.directory / f"{cell.key}.npz"

    def write(self, cell: Cell, result: dict[str, np.ndarray]) -> Path:
        """Store ``result`` of ``cell`` atomically, with the cell's description and a checksum."""
        meta = json.dumps({"cell": json.loads(cell.describe()), "sha256": _checksum(result)})

        def writer(tmp: Path) -> None:
            buf = _io.BytesIO()
            arrays: dict[str, Any] = {**result, _META: np.array(meta)}
            np.savez(buf, **arrays)
            tmp.write_bytes(buf.getvalue())

        return atomic_write(self.path(cell), writer)

    def read(self, cell: Cell) -> dict[str, np.ndarray] | None:
        """``cell``'s verified result, or None when it is missing or corrupt (a corrupt file is removed)."""
        path = self.path(cell)
        if not path.exists():
            return None
        try:
            # the file is opened here, so that it is closed even when numpy cannot parse it
            with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as data:
                stored = {k: data[k] for k in data.files}
            meta = json.loads(str(stored.pop(_META)))
            ok = meta["cell"] == json.loads(cell.describe()) and meta["sha256"] == _checksum(stored)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, json.JSONDecodeError):
            ok = False
        if not ok:
            path.unlink(missing_ok=True)
            return None
        return stored

    def done(self, cell: Cell) -> bool:
        """Whether ``cell`` has a verified result."""
        return self.read(cell) is not None

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
    """What a sweep did: cells found in the store, computed now, and where."""

    n_cells: int
    n_found: int
    n_computed: int
    executor: str
    dashboard: str | None = None


def _context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def run_sweep(
    cells: Sequence[Cell],
    store: Store | str | os.PathLike,
    executor: str = "serial",
    *,
    n_workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = False,
) -> SweepReport:
    """Run every cell of ``cells`` that ``store`` does not hold yet, writing each result as it arrives.

    Parameters
    ----------
    cells : sequence of Cell
        The sweep (duplicates are run once).
    store : Store or path
        The result store (created if needed).
    executor : {"serial", "processes", "dask"}
        Where the cells run (see the module notes).
    n_workers : int, optional
        Worker processes of ``"processes"`` and of a local Dask cluster (default: 2).
    scheduler : str, optional
        ``"dask"`` only: the address of a running scheduler instead of a local cluster.
    progress : bool
        A progress bar over the cells.

    Returns
    -------
    SweepReport
        How many cells were found in the store and how many were computed.

    Raises
    ------
    SweepError
        After all other cells have finished, if some cells raised.

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
    store = store if isinstance(store, Store) else Store(store)
    unique = list(dict.fromkeys(cells))
    pending = [c for c in unique if not store.done(c)]
    report = SweepReport(len(unique), len(unique) - len(pending), 0, executor)
    failures: dict[Cell, str] = {}
    # tqdm.auto warns in a notebook without ipywidgets even when the bar is disabled
    tqdm = importlib.import_module("tqdm.auto" if progress else "tqdm").tqdm
    bar = tqdm(total=len(unique), initial=report.n_found, desc="cells", unit="cell", disable=not progress)

    def finish(cell: Cell, result=None, error: BaseException | None = None) -> None:
        if error is not None:
            failures[cell] = f"{type(error).__name__}: {error}"
        else:
            store.write(cell, result)
            report.n_computed += 1
        bar.update(1)

    try:
        if executor == "serial" or not pending:
            for cell in pending:
                try:
                    result = run_cell(cell)
                except Exception as exc:  # reported with the others at the end
                    finish(cell, error=exc)
                else:
                    finish(cell, result)
        elif executor == "processes":
            with ProcessPoolExecutor(max_workers=workers, mp_context=_context()) as pool:
                futures = {pool.submit(run_cell, c): c for c in pending}
                for fut in as_completed(futures):
                    error = fut.exception()
                    finish(futures[fut], None if error else fut.result(), error)
        else:
            report.dashboard = _run_dask(pending, workers, scheduler, finish)
    finally:
        bar.close()
    if failures:
        raise SweepError(failures)
    return report


def _run_dask(pending: list[Cell], workers: int, scheduler: str | None, finish) -> str | None:
    try:
        from distributed import Client, LocalCluster
        from distributed import as_completed as dask_completed
    except ImportError:  # pragma: no cover - exercised without the extra
        raise ImportError('executor="dask" needs Dask: pip install "sgsim[dask]"') from None
    cluster = None
    if scheduler is None:
        cluster = LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=":0"
        )
        client = Client(cluster)
    else:
        client = Client(scheduler)
    try:
        dashboard = client.dashboard_link
        print(f"sgsim sweep: Dask dashboard at {dashboard}", flush=True)
        futures = client.map(run_cell, pending, key=[f"sgsim-cell-{c.key}" for c in pending], pure=False)
        cell_of = {f.key: c for f, c in zip(futures, pending, strict=True)}
        for fut in dask_completed(futures):
            cell = cell_of[fut.key]
            if fut.status == "error":
                finish(cell, error=fut.exception())
            else:
                finish(cell, fut.result())
        return dashboard
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


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
) -> list[dict[str, np.ndarray]]:
    """Run ``cells`` (see :func:`run_sweep`) and return their results in order.

    With ``store=None`` the results pass through a temporary store that is removed after;
    with a store, finished cells are reused and an interrupted call resumes. ``executor=None``
    takes the one of the enclosing :func:`executing` block (serial outside any).
    """
    import tempfile

    if executor is None:
        executor = _DEFAULTS["executor"]
        n_workers = _DEFAULTS["n_workers"] if n_workers is None else n_workers
        scheduler = _DEFAULTS["scheduler"] if scheduler is None else scheduler
    if store is None:
        with tempfile.TemporaryDirectory(prefix="sgsim-sweep-") as tmp:
            return compute(cells, tmp, executor, n_workers=n_workers, scheduler=scheduler, progress=progress)
    store = store if isinstance(store, Store) else Store(store)
    run_sweep(cells, store, executor, n_workers=n_workers, scheduler=scheduler, progress=progress)
    out = []
    for cell in cells:
        result = store.read(cell)
        if result is None:  # removed behind our back (another process cleaning the store)
            raise RuntimeError(f"cell {cell.describe()} vanished from the store {store.directory}")
        out.append(result)
    return out
