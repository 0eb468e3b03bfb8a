"""sgsim: theory and simulation of stochastic-gradient MCMC.

The main entry point is :func:`sample` (and :func:`replay`, which reruns a result file);
targets live in :mod:`sgsim.targets` (a target of one's own takes functions compiled with
:func:`jit`), step-size schedules in :mod:`sgsim.schedules`, the
mathematics of each step in :mod:`sgsim.dynamics`, metrics in :mod:`sgsim.diagnostics`.
"""

from __future__ import annotations

__version__ = "0.1.0"

from . import algorithms, dynamics, io, schedules, targets  # noqa: E402
from ._jit import jit  # noqa: E402
from .integrators import METHODS  # noqa: E402
from .sampling import DivergenceError, replay, sample  # noqa: E402
from .targets import model  # noqa: E402

__all__ = [
    "sample",
    "replay",
    "DivergenceError",
    "METHODS",
    "model",
    "jit",
    "algorithms",
    "dynamics",
    "io",
    "schedules",
    "targets",
    "__version__",
]
