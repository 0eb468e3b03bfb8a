r"""SGLD with variance-reduced gradients: SGLD-CV and SVRG-LD, and their cyclical presets.

The step is SGLD's (:mod:`sgsim.integrators.sgld`, the cyclical paper's units),

.. math::

    \theta_k = \theta_{k-1} - \alpha_k \widehat{\nabla U}(\theta_{k-1}) + \sqrt{2 \alpha_k T_k}\, \xi_k,

and what differs is the gradient estimate, declared by the record's ``gradient``
(:class:`~sgsim.algorithms.Algorithm`): the data target's minibatch gradient is replaced by

* ``sgld_cv``: a control variate around a fixed control point ``theta_hat`` (by default the
  mode, found by Newton's method before the run; one given by the caller must be stationary),
  ``grad U(theta_hat) + (N / n) sum_{i in B} (grad ell_i(theta) - grad ell_i(theta_hat))``:
  Baker, Fearnhead, Fox and Nemeth (2019), "Control variates for stochastic gradient MCMC",
  SGLD-CV (their step ``h`` is ``2 alpha``);
* ``svrg_ld``: the same around each chain's snapshot, retaken every ``m`` steps with the full
  gradient there: Dubey, Reddi, Poczos, Smola, Xing and Williamson (2016), "Variance reduction in
  stochastic gradient Langevin dynamics", SVRG-LD (their ``eta_t / 2`` is ``alpha``).

Both estimates are unbiased, so the algorithms are SGLD with less minibatch noise:
asymptotically exact as SGLD is. ``csgld_cv`` and ``csvrg_ld`` drive them with the cosine
cyclical schedule ([cSG] eq. 2). The estimators themselves are
:func:`sgsim.targets.control_variates.control_variate` and
:func:`~sgsim.targets.control_variates.svrg`; the exact mean and covariance of every iterate on
linear regression, :func:`sgsim.theory.minibatch_law.minibatch_sgld_moments`.

Stability: SGLD's (:mod:`sgsim.integrators.sgld`). Both estimates have, on average over
minibatches, the Hessian of ``U``, so the mean recursion on ``U = L x^2 / 2`` contracts exactly
while ``step_size * L < 2``; a run whose every step is beyond ``2 / L`` (``L`` the target's
:meth:`~sgsim.targets.Target.curvature_bound`) is refused before any work.
"""

from __future__ import annotations

import math

import numpy as np

from .._validate import finite_array, integer
from ..targets import control_variates as _cv
from ._base import (
    CONSTANT_OPTIONS,
    CYCLICAL_OPTIONS,
    INDEPENDENT,
    NO_CONSTANTS,
    Algorithm,
    Method,
    Option,
    constant_schedule,
    cyclical_schedule,
)
from ._loop import stay
from .sgld import _noise, step_limit, update

__all__ = ["SGLD_CV", "SVRG_LD", "METHODS", "example_target"]


def _control_point(name: str, value):
    return None if value is None else np.ascontiguousarray(finite_array(name, value), dtype=np.float64)


def _snapshot_every(name: str, value):
    return None if value is None else integer(name, value, low=1)


def _check_cv(options: dict, target) -> dict:
    _cv.check_data_target(target, "sgld_cv")
    if options["control_point"] is not None:
        _cv.check_control_point(target, options["control_point"])
    return options


def _check_svrg(options: dict, target) -> dict:
    _cv.check_data_target(target, "svrg_ld")
    return options


def _svrg_every(options: dict, target) -> int:
    # one pass over the data between snapshots unless told otherwise (Dubey et al.'s epoch)
    every = options["snapshot_every"]
    return math.ceil(target.extras["n_data"] / target.extras["batch_size"]) if every is None else every


_UNITS = "cyclical paper: drift step_size * grad U, injected noise variance 2 * step_size * T"

SGLD_CV = Algorithm(
    name="sgld_cv",
    summary="SGLD with a control-variate gradient around the mode",
    coupling=INDEPENDENT,
    state=("theta",),
    options={
        "control_point": Option(
            None, _control_point, "the control point theta_hat, a stationary point of U (default: the mode)"
        )
    },
    units=_UNITS,
    step=(stay, update),
    constants=lambda options: NO_CONSTANTS,
    noise=_noise,
    check=_check_cv,
    step_limit=step_limit,
    asymptotically_exact=True,
    references="Baker, Fearnhead, Fox and Nemeth (2019), Control variates for stochastic gradient MCMC",
    gradient=lambda target, options: _cv.control_variate(target, options["control_point"]),
)

SVRG_LD = Algorithm(
    name="svrg_ld",
    summary="SGLD with SVRG's gradient around per-chain snapshots",
    coupling=INDEPENDENT,
    state=("theta",),
    options={
        "snapshot_every": Option(
            None, _snapshot_every, "steps m >= 1 between a chain's snapshots (default: ceil(N / n), one pass)"
        )
    },
    units=_UNITS,
    step=(stay, update),
    constants=lambda options: NO_CONSTANTS,
    noise=_noise,
    check=_check_svrg,
    step_limit=step_limit,
    asymptotically_exact=True,
    references="Dubey et al. (2016), Variance reduction in stochastic gradient Langevin dynamics",
    gradient=lambda target, options: _cv.svrg(target, _svrg_every(options, target)),
)


def example_target():
    """A small linear regression in minibatches (the methods' ``example``: fast, replayable)."""
    from ..targets import linear_regression

    rng = np.random.default_rng(23)
    X = rng.standard_normal((40, 2))
    y = X @ np.array([1.0, -0.5]) + 0.3 * rng.standard_normal(40)
    return linear_regression(X, y, noise_precision=4.0, batch_size=4, name="linear_regression_40")


METHODS = (
    Method(
        "sgld_cv",
        SGLD_CV,
        constant_schedule,
        CONSTANT_OPTIONS,
        "SGLD-CV: SGLD with a control-variate gradient around the mode",
        "Baker et al. (2019), SGLD-CV",
        example={"target": example_target, "step_size": 0.002},
    ),
    Method(
        "csgld_cv",
        SGLD_CV,
        cyclical_schedule,
        CYCLICAL_OPTIONS,
        "cyclical SGLD-CV: cosine step sizes, SGD exploration at T=0",
        "Baker et al. (2019); [cSG] eq. 2",
        example={"target": example_target, "step_size": 0.002, "n_cycles": 2},
    ),
    Method(
        "svrg_ld",
        SVRG_LD,
        constant_schedule,
        CONSTANT_OPTIONS,
        "SVRG-LD: SGLD with SVRG's gradient around per-chain snapshots",
        "Dubey et al. (2016), SVRG-LD",
        example={"target": example_target, "step_size": 0.002, "snapshot_every": 10},
    ),
    Method(
        "csvrg_ld",
        SVRG_LD,
        cyclical_schedule,
        CYCLICAL_OPTIONS,
        "cyclical SVRG-LD: cosine step sizes, SGD exploration at T=0",
        "Dubey et al. (2016); [cSG] eq. 2",
        example={"target": example_target, "step_size": 0.002, "n_cycles": 2, "snapshot_every": 10},
    ),
)
