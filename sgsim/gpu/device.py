"""The many-chain kernel on a CUDA GPU, through CuPy (the optional extras ``sgsim[gpu-cuda12]``,
``sgsim[gpu-cuda13]``; ``sgsim[gpu]`` is the first).

:class:`CudaExecutor` compiles a kernel's source with NVRTC (``cupy.RawModule``; CuPy caches
the compiled module on disk by its source) and launches it with one thread per chain over
each block of steps. Nothing here is specific to a run: the run's arithmetic is in the source
(:mod:`sgsim.gpu.kernels`), the block loop in :mod:`sgsim.gpu.runner`.
"""

from __future__ import annotations

import numpy as np

from .._validate import ParameterError
from .kernels import THREADS, KernelSource

__all__ = ["CudaExecutor", "INSTALL"]

#: what to install, by the machine's CUDA major version (``nvcc --version`` gives the toolkit's, the header of
#: ``nvidia-smi`` the newest the driver runs)
INSTALL = (
    'pip install "sgsim[gpu-cuda12]" (CuPy for CUDA 12) or "sgsim[gpu-cuda13]" (CuPy for CUDA 13), the one of '
    "the machine's CUDA Toolkit; a CUDA 12 build also runs under a CUDA 13 driver"
)


def _import_cupy():
    try:
        import cupy
    except ImportError:
        raise ParameterError("backend", f"backend='gpu' needs CuPy: {INSTALL}") from None
    return cupy


class CudaExecutor:
    """Runs a kernel on the current CUDA device with CuPy arrays."""

    device = True
    name = "gpu"

    def __init__(self):
        cupy = _import_cupy()
        try:
            n = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # the CUDA driver is missing or refuses (CuPy raises its own types)
            raise ParameterError("backend", f"backend='gpu': CuPy finds no usable CUDA device ({exc})") from None
        if n == 0:
            raise ParameterError("backend", "backend='gpu': CuPy finds no CUDA device")
        self.cp = cupy

    def put(self, array: np.ndarray):
        """A device copy of the host array ``array``."""
        return self.cp.asarray(np.ascontiguousarray(array))

    def zeros(self, shape, dtype):
        """A zeroed device array."""
        return self.cp.zeros(shape, dtype)

    def get(self, array) -> np.ndarray:
        """A host copy of the device array ``array``."""
        return self.cp.asnumpy(array)

    def free_memory(self) -> float | None:
        """Bytes of device memory a run may use (None: not a device, nothing to check)."""
        free, _ = self.cp.cuda.runtime.memGetInfo()
        # memory the pool holds but does not use can be given to this run too
        pool = self.cp.get_default_memory_pool()
        return float(free + pool.total_bytes() - pool.used_bytes())

    def describe(self) -> str:
        """The device, in words (recorded as ``attrs["device"]``)."""
        props = self.cp.cuda.runtime.getDeviceProperties(self.cp.cuda.Device().id)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        return f"{name} (CUDA runtime {self.cp.cuda.runtime.runtimeGetVersion()}, CuPy {self.cp.__version__})"

    def build(self, source: KernelSource):
        """The compiled kernel of ``source``."""
        module = self.cp.RawModule(code=source.code, options=("--std=c++17",))
        return module

    def launch(
        self, module, r, state, failed, alpha, sd, noisy, store, nb, k0, bound, key0, key1, out, count, mean, m2
    ):
        """Advance chains ``0 .. r - 1`` over one block of ``nb`` steps starting at step ``k0``."""
        kernel = module.get_function("sg_run")
        grid = ((int(r) + THREADS - 1) // THREADS,)
        real = state.dtype.type
        kernel(
            grid, (THREADS,),
            (np.int64(r), state, failed, alpha, sd, noisy, store, np.int64(nb), np.int64(k0), real(bound),
             np.uint32(key0), np.uint32(key1), out, count, mean, m2),
        )  # fmt: skip

    def normals(self, module, source: KernelSource, n_chains: int, t0: int, n: int, key) -> np.ndarray:
        """Normals ``t0 .. t0 + n - 1`` of chains ``0 .. n_chains - 1``, shape ``(n_chains, n)``."""
        out = self.cp.empty((n, n_chains), source.dtype)
        kernel = module.get_function("sg_normals")
        grid = ((n_chains + THREADS - 1) // THREADS,)
        kernel(
            grid, (THREADS,),
            (np.int64(n_chains), np.uint64(t0), np.int64(n), np.uint32(key[0]), np.uint32(key[1]), out),
        )  # fmt: skip
        return self.cp.asnumpy(out).T.copy()

    def synchronize(self) -> None:
        """Wait for the launched kernels to finish."""
        self.cp.cuda.Device().synchronize()
