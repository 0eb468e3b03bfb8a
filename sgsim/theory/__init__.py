"""Pure mathematics of the samplers: closed forms and exact laws. Imports no integrator."""

from .stationary import sghmc_scalar_stationary, sgld_scalar_stationary

__all__ = ["sgld_scalar_stationary", "sghmc_scalar_stationary"]
