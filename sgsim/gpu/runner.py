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
    state = ex.put(np.ascontiguousarray(buf.state.transpose(1, 2, 0)).astype(dt))
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
    buf.state[...] = ex.get(state).transpose(2, 0, 1)
    buf.failed[...] = ex.get(failed)
    if draws:
        buf.out[...] = ex.get(out).transpose(2, 0, 1)
    if moments:
        buf.count[...] = ex.get(count)
        buf.mean[...] = ex.get(mean).T
        buf.m2[...] = ex.get(m2).transpose(2, 0, 1)
    return ex.describe()
