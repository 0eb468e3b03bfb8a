"""The block loop of the many-chain path: a prepared run, its buffers, one kernel launch per block.

:func:`execute` is the GPU path's counterpart of ``sgsim.driver._execute``: it takes the same
``sgsim.driver.Run``, the same host buffers and the same storage index
(``sgsim.driver._Keeper``), so that the schedule, the noise factors, what is kept and in
which slot, and the result's layout are computed by the code the CPU path uses. Only the
chains' arithmetic runs elsewhere: the state is copied to the executor once, each block's
shared per-step arrays are sent (a few values per step), and the kernel advances every
chain over the block; at the end the state, the failures, the draws or the moments are copied
back into the host buffers.
"""

from __future__ import annotations

import numpy as np

from .._validate import ParameterError
from ..philox import key as philox_key
from . import kernels

__all__ = ["execute", "executor", "check_device_memory", "philox_key", "device_bytes", "BACKENDS", "BLOCK_STEPS"]

#: ``sample(backend=...)``: the CPU kernels, the GPU kernel on CUDA, the GPU kernel built for the CPU
BACKENDS = ("cpu", "gpu", "gpu-host")
#: steps per kernel launch
BLOCK_STEPS = 10_000


def executor(backend: str):
    """The executor of ``backend``: ``"gpu"``, CuPy on the current CUDA device; ``"gpu-host"``, the host build.

    Raises
    ------
    ParameterError
        Naming ``backend``: an unknown backend, or ``"gpu"`` without CuPy or a CUDA device
        (the message says what to install).
    """
    if backend == "gpu":
        from .device import CudaExecutor

        return CudaExecutor()
    if backend == "gpu-host":
        from .host import HostExecutor

        return HostExecutor()
    raise ParameterError("backend", f"backend must be one of {BACKENDS}, got {backend!r}")


def device_bytes(run, n_chains: int, precision: str) -> int:
    """Bytes of device memory a run holds: state, failures, kept draws or running moments, one block's arrays.

    Parameters
    ----------
    run : sgsim.driver.Run
        A prepared run (``sgsim.sampling.prepare``): its target's dimension, its algorithm's
        state rows, its storage mode and number of kept draws.
    n_chains : int
        Chains.
    precision : {"float32", "float64"}
        The type of the state and of kept draws (running moments are always float64).

    Returns
    -------
    int

    Examples
    --------
    Ten million chains of cSGLD on the 25-Gaussian mixture, keeping their running moments:

    >>> from sgsim.gpu import device_bytes
    >>> from sgsim.sampling import prepare
    >>> run, _ = prepare("mixture_25", "csgld", 1000, step_size=0.09, n_cycles=4, storage="moments")
    >>> round(device_bytes(run, 10_000_000, "float32") / 1e9, 2)
    0.72
    """
    d, n_state = run.target.dim, len(run.method.algorithm.state)
    size = np.dtype(precision).itemsize
    total = n_chains * (n_state * d * size + 8)
    if run.storage == "draws":
        total += n_chains * run.n_draws * d * size
    elif run.storage == "moments":
        total += n_chains * 8 * (1 + d + d * d)
    total += BLOCK_STEPS * (size * (d + 1) + 9)
    return int(total)


def check_device_memory(run, n_chains: int, precision: str, ex) -> None:
    """Refuse a run whose buffers would not fit in the device's free memory (90 % of it).

    Raises
    ------
    ParameterError
        Naming ``n_chains``, with the memory needed and free and what to change.
    """
    free = ex.free_memory()
    need = device_bytes(run, n_chains, precision)
    if free is not None and need > 0.9 * free:
        raise ParameterError(
            "n_chains",
            f"{n_chains:,} chains with storage={run.storage!r} need {need / 2**30:,.2f} GiB on the device, which has "
            f"{free / 2**30:,.2f} GiB free: use fewer chains, keep fewer draws (thin, burn_in), or use storage='final' "
            "or 'moments'",
        )


#: trailing sizes up to which the chain-axis moves copy index by index
_FEW = 64


def _chain_last(a: np.ndarray, dtype) -> np.ndarray:
    """``a`` of shape ``(R, ...)`` as a contiguous ``(..., R)`` array of ``dtype``.

    Where the trailing axes hold few values (a chain's state), one strided copy per trailing
    index: at ``10^7`` chains of a 2-dimensional state, 0.02-0.06 s on two cores where NumPy's
    copy of the whole transposed array into fresh memory took 0.5-0.8 s, several times the
    1000 steps of an H200's kernel.
    """
    if np.prod(a.shape[1:]) > _FEW:
        return np.ascontiguousarray(a.transpose(*range(1, a.ndim), 0), dtype)
    out = np.empty(a.shape[1:] + a.shape[:1], dtype)
    for idx in np.ndindex(*a.shape[1:]):
        out[idx] = a[(slice(None), *idx)]
    return out


def _chain_first(dst: np.ndarray, src: np.ndarray) -> None:
    """Write ``src`` of shape ``(..., R)`` into ``dst`` of shape ``(R, ...)``, casting: ``_chain_last``'s inverse."""
    if np.prod(dst.shape[1:]) > _FEW:
        dst[...] = src.transpose(src.ndim - 1, *range(src.ndim - 1))
        return
    for idx in np.ndindex(*dst.shape[1:]):
        dst[(slice(None), *idx)] = src[idx]


def execute(run, buf, keeper, seed: int, precision: str, ex, progress=None) -> str:
    """Advance every chain of ``buf`` over ``run``'s schedule with executor ``ex``; return the device's name.

    ``buf`` is the host's ``sgsim.driver._Buffers`` (state ``(R, n_state, d)`` in float64),
    updated in place as the CPU path would update it.
    """
    source = kernels.render(run, precision, device=ex.device)
    n_rep, n_state, d = buf.state.shape
    check_device_memory(run, n_rep, precision, ex)
    module = ex.build(source)
    dt = source.dtype
    # chain last: a warp's threads read and write consecutive values
    state = ex.put(_chain_last(buf.state, dt))
    failed = ex.put(buf.failed)
    draws = run.storage == "draws"
    moments = run.storage == "moments"
    out = ex.zeros((run.n_draws, d, n_rep) if draws else (1,), dt)
    count = ex.zeros((n_rep,) if moments else (1,), np.int64)
    mean = ex.zeros((d, n_rep) if moments else (1,), np.float64)
    m2 = ex.zeros((d, d, n_rep) if moments else (1,), np.float64)
    key0, key1 = philox_key(seed)
    bound = run.kernel_bound(precision)
    n_steps = run.schedule.n_steps
    for k0 in range(0, n_steps, BLOCK_STEPS):
        k1 = min(n_steps, k0 + BLOCK_STEPS)
        block = run.schedule.block(k0, k1)
        sd, _, _, noisy, _ = run.noise(block)
        store = keeper.store(block)
        ex.launch(
            module, n_rep, state, failed, ex.put(block.step_size.astype(dt)), ex.put(sd.astype(dt)),
            ex.put(noisy.astype(np.uint8)), ex.put(store.astype(np.int64)), k1 - k0, k0, bound, key0, key1,
            out, count, mean, m2,
        )  # fmt: skip
        if progress is not None:
            ex.synchronize()
            progress.update((k1 - k0) * n_rep)
    ex.synchronize()
    _chain_first(buf.state, ex.get(state))
    buf.failed[...] = ex.get(failed)
    if draws:
        _chain_first(buf.out, ex.get(out))
    if moments:
        buf.count[...] = ex.get(count)
        _chain_first(buf.mean, ex.get(mean))
        _chain_first(buf.m2, ex.get(m2))
    return ex.describe()
