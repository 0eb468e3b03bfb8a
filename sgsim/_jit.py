"""The one place that decides how sgsim compiles its kernels.

Every compiled function in sgsim is decorated with :func:`jit` (never with a bare
``numba.njit``), so compilation flags live here and nowhere else. Two environment
variables are read once, at import:

``SGSIM_JIT_CACHE``
    ``1`` (default) caches compiled targets on disk. Kernels that receive a compiled
    gradient as an argument cannot be cached by numba and are compiled once per process
    whatever this says.
``SGSIM_FASTMATH``
    ``0`` (default). ``fastmath`` changed nothing measurable on these kernels and would
    allow reassociation that breaks bit-reproducibility across builds.

``NUMBA_DISABLE_JIT=1`` is honoured: every function then runs as plain Python, which
the test-suite uses once so that coverage sees the kernels.

Forks: a child made by ``os.fork`` while another thread compiles would inherit numba's
compiler lock held by a thread it does not have, and its first compilation would wait for
ever. So a fork waits for the compilation in progress to end (up to ``FORK_WAIT_S``) and
holds the lock across the fork; past that wait the child's compilations raise an error that
says so. Processes started with ``spawn`` or ``forkserver`` need none of this.
"""

from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path

import numba

__all__ = ["jit", "is_compiled", "JIT_DISABLED", "cache_dir"]

_CACHE = os.environ.get("SGSIM_JIT_CACHE", "1") != "0"
_FASTMATH = os.environ.get("SGSIM_FASTMATH", "0") == "1"
JIT_DISABLED = bool(getattr(numba.config, "DISABLE_JIT", False))


def cache_dir() -> Path:
    """Where sgsim keeps what it compiles for later processes (generated loops, JAX executables).

    ``SGSIM_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/sgsim`` or ``~/.cache/sgsim``.
    """
    root = os.environ.get("SGSIM_CACHE_DIR")
    if root:
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sgsim"


def jit(func=None, *, cache: bool | None = None, inline: bool = False, parallel: bool = False):
    """Compile ``func`` in nopython mode, releasing the GIL, with sgsim's flags.

    Parameters
    ----------
    func : callable, optional
        The function to compile. When omitted, a decorator is returned.
    cache : bool, optional
        Override the on-disk cache for this function (``False`` for kernels that take
        compiled functions as arguments, which numba cannot cache). Code that lives in no
        file (typed into a console, ``exec``) is compiled without the cache.
    inline : bool
        Inline the function into its callers (numba's ``inline="always"``).
    parallel : bool
        Turn ``numba.prange`` loops into parallel loops on numba's threads (else they run
        as plain ``range`` loops: the same function compiled both ways gives the same bits
        when every iteration writes its own outputs).
    """
    use_cache = _CACHE if cache is None else (cache and _CACHE)

    def njit(cached: bool):
        return numba.njit(
            nogil=True,
            cache=cached,
            fastmath=_FASTMATH,
            error_model="numpy",
            inline="always" if inline else "never",
            parallel=parallel,
        )

    def compile_(f):
        try:
            return njit(use_cache)(f)
        except RuntimeError as exc:  # code without a file (exec, a console) has no cache locator
            if "cannot cache" not in str(exc):
                raise
            return njit(False)(f)

    return compile_ if func is None else compile_(func)


def is_compiled(func) -> bool:
    """Whether ``func`` is a numba-compiled function that a kernel can call.

    With ``NUMBA_DISABLE_JIT=1`` every plain callable is accepted, since nothing is
    compiled then.
    """
    if JIT_DISABLED:
        return callable(func)
    from numba.core.registry import CPUDispatcher

    return isinstance(func, CPUDispatcher)


# ----------------------------------------------------------------------------- forks

#: seconds a fork waits for a compilation in progress in another thread to end
FORK_WAIT_S = 60.0

_forking = threading.local()


def _compiler_lock():
    """The global compiler lock of numba (every compilation holds it), or None if not found."""
    from numba.core import compiler_lock

    lock = getattr(getattr(compiler_lock, "global_compiler_lock", None), "_lock", None)
    return lock if hasattr(lock, "acquire") and hasattr(lock, "release") else None


class _ForkedCompilerLock:
    """The compiler lock of a child forked while another thread compiled: compiling raises.

    The thread that held the parent's lock does not exist in the child, so the lock would never
    be released and the child's first compilation would wait for ever; this says why instead.
    """

    def acquire(self, blocking=True, timeout=-1):
        raise RuntimeError(
            "this process was forked while another thread of its parent was compiling with numba (for longer "
            f"than sgsim waits, {FORK_WAIT_S:g} s), so nothing can be compiled in it: start worker processes with "
            "the 'spawn' or 'forkserver' method (multiprocessing.get_context('spawn'))"
        )

    def release(self):
        raise RuntimeError("the compiler lock of a forked child is never held")

    def _is_owned(self):
        return False


def _before_fork() -> None:
    # wait for a compilation in another thread to end, and hold the lock across the fork, so that
    # the child starts with the lock free; a compilation by this very thread re-enters it at once
    lock = _compiler_lock()
    _forking.lock = None
    _forking.timed_out = False
    if lock is None:
        return
    if lock.acquire(timeout=FORK_WAIT_S):
        _forking.lock = lock
        return
    _forking.timed_out = True
    warnings.warn(
        f"os.fork() while another thread compiles with numba, still compiling after {FORK_WAIT_S:g} s: the child "
        "will not be able to compile. Start worker processes with the 'spawn' or 'forkserver' method.",
        RuntimeWarning,
        stacklevel=2,
    )


def _after_fork_in_parent() -> None:
    lock = getattr(_forking, "lock", None)
    _forking.lock = None
    if lock is not None:
        lock.release()


def _after_fork_in_child() -> None:
    lock = getattr(_forking, "lock", None)
    _forking.lock = None
    if lock is not None:
        lock.release()  # the forking thread is the child's one thread: it owns the lock here too
    elif getattr(_forking, "timed_out", False):
        from numba.core import compiler_lock

        compiler_lock.global_compiler_lock._lock = _ForkedCompilerLock()  # type: ignore[assignment]


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)
