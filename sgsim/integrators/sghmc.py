r"""SGHMC and cyclical SGHMC, in the cyclical paper's parametrisation and update order.

.. math::

    \theta_k = \theta_{k-1} + v_{k-1}, \qquad
    v_k = (1-\eta) v_{k-1} - \alpha_k \nabla\tilde U(\theta_k)
          + \sqrt{2 (\eta - \hat\gamma) \alpha_k T_k}\, \xi_k

("Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning", §2). The position moves
first and the gradient is taken at the *new* position; ``v_0 = 0`` unless given. ``eta`` is
the friction (``1 - eta`` the momentum coefficient) and ``gamma_hat`` in ``[0, eta]`` the
estimate of the gradient noise. In Chen, Fox and Guestrin's (2014) unit-mass notation,
``alpha = epsilon^2`` and ``eta = epsilon C``; eliminating ``v`` gives heavy-ball momentum
SGD with ``mu = eta`` (THEORY A2).

``csghmc`` drives the same update with the cosine cyclical schedule; its exploration
steps run at ``T = 0``, i.e. SGD with momentum. The momentum is not reset at stage or
cycle boundaries, as in the reference code.

Gradient-noise correction (``noise_correction=True``): the injected covariance becomes
``2 eta alpha_k T_k I - alpha_k^2 V`` so that the total is exactly ``2 eta alpha_k T_k I``; for
``V = s^2 I`` this is ``gamma_hat_k = alpha_k s^2 / 2`` (THEORY A2), and it needs
``alpha_k V <= 2 eta T_k I``. It cannot be combined with a non-zero ``gamma_hat``.

The exact discrete-time law on linear-Gaussian targets is THEORY F5; at stationarity on
``U = a theta^2 / 2`` the velocity variance is ``alpha / (1 - eta/2)``, not ``alpha``.
"""

from __future__ import annotations

from .._validate import real
from ._base import CONSTANT_OPTIONS, CYCLICAL_OPTIONS, Method, constant_schedule, cyclical_schedule
from ._kernels import sghmc_chain


def _validate(options: dict) -> dict:
    eta = real("friction", options["friction"], 0.0, 1.0, low_open=True)
    gamma_hat = real("gamma_hat", options["gamma_hat"], 0.0, eta)
    return {"friction": eta, "gamma_hat": gamma_hat}


def _injection(options: dict) -> tuple[float, float]:
    return options["friction"] - options["gamma_hat"], options["friction"]


def _run_chain(state, gen, work, target, k0, k1, schedule, options, noise, store, out, injected):
    theta, velocity = state
    return sghmc_chain(
        theta,
        velocity,
        gen,
        target.grad_u,
        target.stochastic_grad_u,
        target.params,
        work,
        k0,
        k1,
        schedule.step_size,
        options["friction"],
        noise.a,
        noise.c,
        noise.lam,
        noise.rotate,
        noise.basis,
        store,
        out,
        injected,
    )


_DYNAMICS = {"friction": 0.1, "gamma_hat": 0.0}

SGHMC = Method(
    name="sghmc",
    summary="stochastic gradient HMC ([cSG] parametrisation), constant step size unless a schedule is given",
    default_schedule=constant_schedule,
    schedule_options=CONSTANT_OPTIONS,
    dynamics_options=_DYNAMICS,
    validate=_validate,
    injection=_injection,
    run_chain=_run_chain,
    state_names=("theta", "velocity"),
    references="Chen, Fox and Guestrin (2014); [cSG] §2",
)

CSGHMC = Method(
    name="csghmc",
    summary="cyclical SGHMC: cosine step sizes, momentum SGD exploration at T=0, sampling at T=1",
    default_schedule=cyclical_schedule,
    schedule_options=CYCLICAL_OPTIONS,
    dynamics_options=_DYNAMICS,
    validate=_validate,
    injection=_injection,
    run_chain=_run_chain,
    state_names=("theta", "velocity"),
    references="[cSG] eq. 2 and Algorithm 1",
)
