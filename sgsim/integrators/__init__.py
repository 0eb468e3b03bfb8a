"""Integrators, registered by name.

Adding one: a module defining an :class:`~sgsim.algorithms.Algorithm` (state, options,
compiled step, noise) and its :class:`~sgsim.algorithms.Method` presets, and one ``register``
line here per method (``CONTRIBUTING.md`` in the repository says which checks it then meets).
"""

from __future__ import annotations

from . import constant_sgd, psgld, resgld, sghmc, sghmc_repulsive, sgld, sgld_cv, sgld_repulsive, sgnht, splitting, svgd
from ._base import INDEPENDENT, INTERACTING, METHODS, ORIGINS, Algorithm, Method, Option, get_method, register

__all__ = [
    "METHODS",
    "ORIGINS",
    "Algorithm",
    "Method",
    "Option",
    "get_method",
    "register",
    "INDEPENDENT",
    "INTERACTING",
]

register(sgld.METHOD)
register(sgld.CYCLICAL)
register(sghmc.METHOD)
register(sghmc.CYCLICAL)
register(svgd.METHOD)
register(sgld_repulsive.METHOD)
register(sgld_repulsive.CYCLICAL)
register(sgld_repulsive.MINUS_GAMMA)
register(sgld_repulsive.RANDOM_BATCH)
register(resgld.METHOD)
register(sghmc_repulsive.METHOD)
register(sghmc_repulsive.CYCLICAL)
for _method in constant_sgd.METHODS:
    register(_method)
for _method in splitting.METHODS:
    register(_method)
register(sgnht.METHOD)
register(sgnht.CYCLICAL)
for _method in psgld.METHODS:
    register(_method)
for _method in sgld_cv.METHODS:
    register(_method)
