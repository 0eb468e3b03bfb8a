"""Integrators, registered by name. Adding one: a module defining a :class:`Method`, and one
``register`` line here.
"""

from __future__ import annotations

from . import sghmc, sgld
from ._base import METHODS, Method, get_method, register

__all__ = ["METHODS", "Method", "get_method", "register"]

register(sgld.SGLD)
register(sgld.CSGLD)
register(sghmc.SGHMC)
register(sghmc.CSGHMC)
