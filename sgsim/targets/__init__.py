"""Targets: densities ``exp(-U)`` with compiled gradients and what is known exactly.

Use :func:`get` to build a registered target by name, or the constructors directly.
"""

from __future__ import annotations

from ._base import Target
from .exponential import exponential_mixture
from .gaussian import linear_gaussian, standard_gaussian
from .mixtures import gaussian_mixture, mixture_3x3, mixture_25
from .regression import data_target, logistic_regression

__all__ = [
    "Target",
    "get",
    "TARGETS",
    "gaussian_mixture",
    "mixture_25",
    "mixture_3x3",
    "exponential_mixture",
    "linear_gaussian",
    "standard_gaussian",
    "data_target",
    "logistic_regression",
]

TARGETS = {
    "mixture_25": mixture_25,
    "mixture_3x3": mixture_3x3,
    "exponential_mixture": exponential_mixture,
    "standard_gaussian": standard_gaussian,
}


def get(name: str, **kwargs) -> Target:
    """Build the registered target ``name`` (one of ``TARGETS``) with ``kwargs``."""
    if isinstance(name, Target):
        return name
    try:
        factory = TARGETS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown target {name!r}; known targets: {', '.join(sorted(TARGETS))}") from None
    return factory(**kwargs)
