"""sgsim: theory and simulation of stochastic-gradient MCMC.

The main entry point is :func:`sample`; targets live in :mod:`sgsim.targets`, step-size
schedules in :mod:`sgsim.schedules`, metrics in :mod:`sgsim.diagnostics`.
"""

from __future__ import annotations

__version__ = "0.1.0"

from . import schedules, targets  # noqa: E402
from .integrators import METHODS  # noqa: E402
from .sampling import DivergenceError, sample  # noqa: E402

__all__ = ["sample", "DivergenceError", "METHODS", "schedules", "targets", "__version__"]
