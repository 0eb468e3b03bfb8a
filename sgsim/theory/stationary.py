"""Exact stationary laws of the discrete-time samplers on a scalar quadratic.

For ``U = a theta^2 / 2`` with constant step size these are the fixed points of the
linear recursions of :ref:`theory-conventions`, i.e. the solutions of the discrete Lyapunov
equation, written in closed form. They are the *discrete-time* truth against which the
integrators are tested, so a test needs no discretisation-bias allowance.
"""

from __future__ import annotations

from .._validate import ParameterError, boolean, finite_values, positive_float, real


def sgld_scalar_stationary(
    a: float, step_size: float, temperature: float = 1.0, grad_noise_var: float = 0.0, noise_correction: bool = False
) -> float:
    """Stationary variance of SGLD on ``U = a theta^2 / 2`` (:ref:`theory-sgld`).

    The iteration ``theta' = (1 - alpha a) theta - alpha zeta + sqrt(2 alpha T) xi`` with
    ``Var zeta = V`` has per-step noise ``q = 2 alpha T + alpha^2 V`` (``2 alpha T`` with the
    gradient-noise correction), so ``Var theta = q / (1 - (1 - alpha a)^2)``, i.e.
    ``(2T + alpha V) / (a (2 - alpha a))`` uncorrected. It tends to the target's ``T / a`` as
    ``alpha -> 0``.

    Parameters
    ----------
    a : float
        Curvature, > 0.
    step_size : float
        ``alpha``, with ``0 < alpha a < 2`` (otherwise the recursion is unstable).
    temperature : float
        ``T >= 0``.
    grad_noise_var : float
        ``V >= 0``.
    noise_correction : bool
        Inject ``2 alpha T - alpha^2 V`` instead of ``2 alpha T``; needs ``alpha V <= 2 T``.
    """
    a = positive_float("a", a)
    alpha = positive_float("step_size", step_size)
    temp = real("temperature", temperature, 0.0)
    v = real("grad_noise_var", grad_noise_var, 0.0)
    noise_correction = boolean("noise_correction", noise_correction)
    if not 0 < alpha * a < 2:  # the product underflows to 0 for a = step_size = 1e-200
        raise ParameterError("step_size", f"step_size * a must lie in (0, 2) for stability, got {alpha * a}")
    if noise_correction and temp > 0:
        if alpha * v > 2 * temp:
            raise ParameterError(
                "noise_correction",
                f"noise_correction needs step_size * grad_noise_var <= 2 temperature, got {alpha * v}",
            )
        q_over_alpha = 2 * temp
    else:
        q_over_alpha = 2 * temp + alpha * v
    # q / (alpha a (2 - alpha a)) with alpha cancelled (alpha * a may be subnormal)
    var = q_over_alpha / (a * (2 - alpha * a))
    finite_values("a", var, what="the stationary variance", hint=" (it is about temperature / a): a is too small")
    return var


def sghmc_scalar_stationary(
    a: float,
    step_size: float,
    friction: float,
    temperature: float = 1.0,
    grad_noise_var: float = 0.0,
    gamma_hat: float = 0.0,
    noise_correction: bool = False,
) -> tuple[float, float]:
    """Stationary variances of ``theta`` and ``v`` for SGHMC in [cSG] order (:ref:`theory-sghmc`).

    With ``q`` the per-step velocity-noise variance (``2 (eta - gamma_hat) alpha T + alpha^2 V``,
    or ``2 eta alpha T`` with the correction),

    ``Var theta = (2 - eta) q / (eta alpha a (2 (2 - eta) - alpha a))``,
    ``Var v = 2 alpha a Var theta / (2 - eta)``.

    With ``q = 2 eta alpha`` the velocity variance is ``alpha / (1 - eta/2)`` in the limit, not
    ``alpha``: the discrete friction factor. Stable iff ``0 < alpha a < 2 (2 - eta)``.

    Returns
    -------
    var_theta, var_v : float
    """
    a = positive_float("a", a)
    alpha = positive_float("step_size", step_size)
    eta = real("friction", friction, 0.0, 1.0, low_open=True)
    temp = real("temperature", temperature, 0.0)
    v = real("grad_noise_var", grad_noise_var, 0.0)
    gamma_hat = real("gamma_hat", gamma_hat, 0.0, eta)
    noise_correction = boolean("noise_correction", noise_correction)
    if not 0 < alpha * a < 2 * (2 - eta):  # the product underflows to 0 for a = step_size = 1e-200
        raise ParameterError(
            "step_size", f"step_size * a must lie in (0, 2 (2 - friction)) for stability, got {alpha * a}"
        )
    if noise_correction and temp > 0:
        if gamma_hat:
            raise ParameterError("gamma_hat", "gamma_hat must be 0 with noise_correction")
        if alpha * v > 2 * eta * temp:
            raise ParameterError(
                "noise_correction", "noise_correction needs step_size * grad_noise_var <= 2 friction temperature"
            )
        q_over_alpha = 2 * eta * temp
    else:
        q_over_alpha = 2 * (eta - gamma_hat) * temp + alpha * v
    # alpha cancelled (alpha * a may be subnormal); Var v = 2 q / (eta (2 (2 - eta) - alpha a))
    if not eta * a * (2 * (2 - eta) - alpha * a) > 0:
        raise ParameterError(
            "friction",
            f"friction * a underflows to 0 (friction = {eta:g}, a = {a:g}): the stationary variance overflows",
        )
    var_theta = (2 - eta) * q_over_alpha / (eta * a * (2 * (2 - eta) - alpha * a))
    var_v = 2 * alpha * q_over_alpha / (eta * (2 * (2 - eta) - alpha * a))
    finite_values("a", var_theta, what="the stationary variance", hint=" (it is about temperature / a): a is too small")
    finite_values("step_size", var_v, what="the velocity variance", hint=" (it grows as step_size^2)")
    return var_theta, var_v
