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
"""

from __future__ import annotations

import os
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
