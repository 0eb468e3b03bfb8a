"""Targets: densities ``exp(-U)`` with compiled gradients and what is known exactly.

Use :func:`get` to build a registered target by name, or the constructors directly. Every
constructor records how it was called (``target.spec``, a :class:`TargetSpec`), so that
:func:`build` rebuilds the same target in another process, e.g. to replay a run from its
result file.
"""

from __future__ import annotations

from .._validate import ParameterError
from ._base import FACTORIES, Target, TargetExtras, TargetSpec, build
from .exponential import exponential_mixture
from .gaussian import linear_gaussian, standard_gaussian
from .mixtures import gaussian_mixture, mixture_3x3, mixture_25
from .regression import data_target, logistic_regression

__all__ = [
    "Target",
    "TargetSpec",
    "TargetExtras",
    "FACTORIES",
    "build",
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
        raise ParameterError(
            "target", f"unknown target {name!r}; known targets: {', '.join(sorted(TARGETS))}"
        ) from None
    return factory(**kwargs)
