"""Targets: densities ``exp(-U)`` with compiled gradients and what is known exactly.

Use :func:`get` to build a registered target by name, or the constructors directly. Every
constructor records how it was called (``target.spec``, a :class:`TargetSpec`), so that
:func:`build` rebuilds the same target in another process, e.g. to replay a run from its
result file.
"""

from __future__ import annotations

from .._validate import ParameterError
from . import posteriordb
from ._base import (
    FACTORIES,
    Batched,
    Target,
    TargetExtras,
    TargetSpec,
    build,
    check_functions,
    check_gradient,
    check_points,
    from_reference,
)
from .autodiff import model
from .exponential import exponential_mixture
from .gaussian import linear_gaussian, ou_quadratic, standard_gaussian
from .mixtures import gaussian_mixture, mixture_3x3, mixture_25
from .parameters import Parameters, interval, lower, ordered, positive, real, upper
from .regression import data_target, linear_regression, logistic_regression, softmax_regression

__all__ = [
    "Target",
    "TargetSpec",
    "Batched",
    "model",
    "posteriordb",
    "Parameters",
    "real",
    "positive",
    "lower",
    "upper",
    "interval",
    "ordered",
    "TargetExtras",
    "FACTORIES",
    "build",
    "check_functions",
    "check_gradient",
    "check_points",
    "from_reference",
    "get",
    "TARGETS",
    "gaussian_mixture",
    "mixture_25",
    "mixture_3x3",
    "exponential_mixture",
    "linear_gaussian",
    "ou_quadratic",
    "standard_gaussian",
    "data_target",
    "logistic_regression",
    "linear_regression",
    "softmax_regression",
]

#: The built-in synthetic and data targets by name, as ``sgsim run --target`` lists them.
TARGETS = {
    "mixture_25": mixture_25,
    "mixture_3x3": mixture_3x3,
    "exponential_mixture": exponential_mixture,
    "standard_gaussian": standard_gaussian,
}


def get(name: str, /, **kwargs) -> Target:
    """Build a target by name with ``kwargs``.

    ``name`` is one of ``TARGETS`` (built with their defaults), a registered factory of
    ``FACTORIES`` (``"gaussian_mixture"``, ``"logistic_regression"``, ... with their
    arguments), or ``"package.module:function"``, a user's function that returns a
    :class:`Target` (see :func:`from_reference`).

    Examples
    --------
    >>> import numpy as np
    >>> from sgsim import targets
    >>> target = targets.get("mixture_25")
    >>> print(target.name, target.dim, target.mode_centres.shape)
    mixture_25 2 (25, 2)
    >>> print(np.diag(target.second_moment).round(2))  # E x x^T = 8.03 I
    [8.03 8.03]

    A registered factory takes its arguments as keywords, and records them in
    ``target.spec`` so that :func:`build` makes the same target again:

    >>> target = targets.get("linear_gaussian", precision=[[2.0, 0.0], [0.0, 0.5]])
    >>> print(target.extras["covariance"])
    [[0.5 0. ]
     [0.  2. ]]
    >>> targets.build(target.spec).fingerprint() == target.fingerprint()
    True
    """
    if isinstance(name, Target):
        return name
    if isinstance(name, str) and name in TARGETS:
        return TARGETS[name](**kwargs)
    if isinstance(name, str) and (name in FACTORIES or ":" in name):
        return from_reference(name, **kwargs)
    raise ParameterError(
        "target",
        f"unknown target {name!r}; known targets: {', '.join(sorted(set(TARGETS) | set(FACTORIES)))}, "
        "or 'package.module:function'",
    )
