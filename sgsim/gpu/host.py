"""The many-chain kernel built for this machine's CPU: the GPU path without a GPU.

:func:`build` compiles a kernel's source (:func:`sgsim.gpu.kernels.render` with
``device=False``) with the host's C++ compiler into a shared library, cached by the source's
digest, and :class:`HostExecutor` runs it, one chain after another, with the same arrays, the
same block loop and the same Philox normals as the GPU. ``sgsim.sample(..., backend="gpu-host")``
runs it; the tests use it to check the kernel's every line, step for step, against the CPU
kernels it mirrors. It is a reference, not a fast path: for speed on the CPU use
``backend="cpu"``.

The compiler is ``$CXX`` or ``g++``; floating-point contraction is off (``-ffp-contract=off``),
so that a multiply followed by an add rounds twice, as in the CPU kernels.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from .._validate import ParameterError
from .kernels import KernelSource

__all__ = ["compiler", "build", "HostExecutor"]

_FLAGS = ("-O2", "-std=c++17", "-ffp-contract=off", "-fPIC", "-shared", "-x", "c++")
_LIBRARIES: dict[str, ctypes.CDLL] = {}


def compiler() -> str | None:
    """The C++ compiler the host build uses (``$CXX``, else ``g++``, else ``c++``), or None."""
    for name in (os.environ.get("CXX"), "g++", "c++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _cache_dir() -> Path:
    base = os.environ.get("SGSIM_KERNEL_CACHE") or os.path.join(tempfile.gettempdir(), f"sgsim-kernels-{os.getuid()}")
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def build(source: KernelSource) -> ctypes.CDLL:
    """Compile ``source`` (host text) into a shared library, once per source and machine; load it.

    Raises
    ------
    ParameterError
        If no C++ compiler is found (naming ``backend``), or the compiler rejects the source.
    """
    if source.key in _LIBRARIES:
        return _LIBRARIES[source.key]
    cxx = compiler()
    if cxx is None:
        raise ParameterError(
            "backend", "backend='gpu-host' compiles the kernel with a C++ compiler: install g++ or set CXX"
        )
    path = _cache_dir() / f"{source.key}.so"
    if not path.exists():
        # written under a private name and renamed: a concurrent build or an interrupt never
        # leaves a half-written library under the final name
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=path.parent)
        os.close(fd)
        try:
            done = subprocess.run(
                [cxx, *_FLAGS, "-", "-o", tmp], input=source.code, capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                raise ParameterError("backend", f"the host compiler rejected the kernel:\n{done.stderr[-4000:]}")
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    lib = ctypes.CDLL(str(path))
    real = ctypes.c_float if source.precision == "float32" else ctypes.c_double
    i64, u32, ptr = ctypes.c_int64, ctypes.c_uint32, ctypes.c_void_p
    lib.sg_run_host.argtypes = [i64, ptr, ptr, ptr, ptr, ptr, ptr, i64, i64, real, u32, u32, ptr, ptr, ptr, ptr]
    lib.sg_run_host.restype = None
    lib.sg_normals_host.argtypes = [i64, ctypes.c_uint64, i64, u32, u32, ptr]
    lib.sg_normals_host.restype = None
    lib.sg_philox_host.argtypes = [ptr, ptr, ptr]
    lib.sg_philox_host.restype = None
    _LIBRARIES[source.key] = lib
    return lib


def _ptr(a: np.ndarray) -> int:
    assert a.flags.c_contiguous
    return a.ctypes.data


class HostExecutor:
    """Runs a kernel on the CPU with NumPy arrays, in the GPU executor's interface."""

    device = False
    name = "gpu-host"

    def put(self, array: np.ndarray) -> np.ndarray:
        """A device copy of the host array ``array``."""
        return np.ascontiguousarray(array)

    def zeros(self, shape, dtype) -> np.ndarray:
        """A zeroed device array."""
        return np.zeros(shape, dtype)

    def get(self, array: np.ndarray) -> np.ndarray:
        """A host copy of the device array ``array``."""
        return np.asarray(array)

    def free_memory(self) -> float | None:
        """Bytes of device memory a run may use (None: not a device, nothing to check)."""
        return None  # the host buffers are checked by sgsim.sampling

    def describe(self) -> str:
        """The device, in words (recorded as ``attrs["device"]``)."""
        return f"host CPU ({compiler()})"

    def build(self, source: KernelSource):
        """The compiled kernel of ``source``."""
        return build(source)

    def launch(self, lib, r, state, failed, alpha, sd, noisy, store, nb, k0, bound, key0, key1, out, count, mean, m2):
        """Advance chains ``0 .. r - 1`` over one block of ``nb`` steps starting at step ``k0``."""
        lib.sg_run_host(
            r, _ptr(state), _ptr(failed), _ptr(alpha), _ptr(sd), _ptr(noisy), _ptr(store), nb, k0, bound,
            key0, key1, _ptr(out), _ptr(count), _ptr(mean), _ptr(m2),
        )  # fmt: skip

    def normals(self, lib, source: KernelSource, n_chains: int, t0: int, n: int, key) -> np.ndarray:
        """Normals ``t0 .. t0 + n - 1`` of chains ``0 .. n_chains - 1``, shape ``(n_chains, n)``."""
        out = np.empty((n, n_chains), source.dtype)
        lib.sg_normals_host(n_chains, t0, n, int(key[0]), int(key[1]), _ptr(out))
        return out.T.copy()

    def synchronize(self) -> None:
        """Wait for the launched kernels to finish."""
        return None


def philox(lib, counter, key) -> np.ndarray:
    """Philox4x32-10 of one ``counter`` (4 words) under ``key`` (2 words), as the kernel computes it."""
    ctr = np.ascontiguousarray(counter, np.uint32)
    k = np.ascontiguousarray(key, np.uint32)
    out = np.empty(4, np.uint32)
    lib.sg_philox_host(_ptr(ctr), _ptr(k), _ptr(out))
    return out
