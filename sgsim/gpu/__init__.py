"""The many-chain path: independent chains of synthetic targets, one GPU thread per chain.

``sgsim.sample(target, method, ..., backend="gpu")`` runs the independent-chain methods
(SGLD, SGHMC, their cyclical presets, the constant-SGD family) on the synthetic targets
(Gaussian mixtures, the exponential mixture, linear-Gaussian oracles with emulated gradient
noise) with the CPU path's arguments, storage modes, divergence rule and result layout. The
chains agree with the CPU path in law, not in bits: they draw Philox4x32-10 normals keyed by
``(seed, chain)`` (:mod:`sgsim.gpu.kernels`).

It needs CuPy and a CUDA device (``pip install "sgsim[gpu-cuda12]"`` or ``"sgsim[gpu-cuda13]"``,
by the machine's CUDA major version; ``sgsim[gpu]`` is the first); without them sgsim is
unchanged and ``backend="gpu"`` says what to install. ``backend="gpu-host"`` runs the same
kernel built for the CPU (:mod:`sgsim.gpu.host`), to check it where there is no GPU.

Modules: :mod:`~sgsim.gpu.kernels` (the kernel's source, generated from one description),
:mod:`~sgsim.gpu.runner` (the block loop), :mod:`~sgsim.gpu.device` (CuPy),
:mod:`~sgsim.gpu.host` (the host build).
"""

from __future__ import annotations

from .kernels import PRECISIONS, supported
from .runner import BACKENDS, device_bytes, philox_key

__all__ = ["BACKENDS", "PRECISIONS", "supported", "device_bytes", "philox_key"]
