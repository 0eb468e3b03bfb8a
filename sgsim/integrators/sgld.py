r"""SGLD and cyclical SGLD, in the cyclical paper's convention.

.. math::

    \theta_k = \theta_{k-1} - \alpha_k \nabla\tilde U(\theta_{k-1}) + \sqrt{2 \alpha_k T_k}\, \xi_k,
    \qquad \xi_k \sim N(0, I_d)

("Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning", §2; the paper prints
:math:`\nabla\tilde U(\theta_k)`, an index typo, THEORY H1). Drift ``alpha * grad U`` and noise
variance ``2 alpha``: Welling and Teh's ``epsilon`` is ``2 alpha`` (THEORY section 0).

``csgld`` is the same update driven by the cosine cyclical schedule (eq. 2): steps with
``r(k) < beta`` run at ``T = 0``, which is exactly plain SGD, and are not collected
(Algorithm 1).

Gradient-noise correction (``noise_correction=True``, off by default): with emulated
gradient noise of covariance ``V`` the injected covariance is reduced to
``2 alpha T I - alpha^2 V``, so the total per-step noise is exactly ``2 alpha T I``, as in the
paper's reference 25-Gaussian code (THEORY A1). It requires ``alpha_k V <= 2 T_k I`` at every
sampling step.

Correctness: for ``alpha_k -> 0`` with ``sum alpha_k = inf`` SGLD's iterates converge weakly to
``exp(-U/T)`` (Teh, Thiery and Vollmer 2016); [cSG] Theorem 1 bounds the Wasserstein distance
for the cyclical schedule. On linear-Gaussian targets the exact law of every iterate is
Gaussian with the recursion of THEORY F1, which the tests check.
"""

from __future__ import annotations

from ._base import CONSTANT_OPTIONS, CYCLICAL_OPTIONS, Method, constant_schedule, cyclical_schedule
from ._kernels import sgld_chain


def _validate(options: dict) -> dict:
    return dict(options)


def _injection(options: dict) -> tuple[float, float]:
    return 1.0, 1.0


def _run_chain(state, gen, work, target, k0, k1, schedule, options, noise, store, out, injected):
    (theta,) = state
    return sgld_chain(
        theta,
        gen,
        target.grad_u,
        target.stochastic_grad_u,
        target.params,
        work,
        k0,
        k1,
        schedule.step_size,
        noise.a,
        noise.c,
        noise.lam,
        noise.rotate,
        noise.basis,
        store,
        out,
        injected,
    )


SGLD = Method(
    name="sgld",
    summary="stochastic gradient Langevin dynamics, constant step size unless a schedule is given",
    default_schedule=constant_schedule,
    schedule_options=CONSTANT_OPTIONS,
    dynamics_options={},
    validate=_validate,
    injection=_injection,
    run_chain=_run_chain,
    references="Welling and Teh (2011); [cSG] §2",
)

CSGLD = Method(
    name="csgld",
    summary="cyclical SGLD: cosine step sizes, SGD exploration at T=0, sampling at T=1",
    default_schedule=cyclical_schedule,
    schedule_options=CYCLICAL_OPTIONS,
    dynamics_options={},
    validate=_validate,
    injection=_injection,
    run_chain=_run_chain,
    references="[cSG] eq. 2 and Algorithm 1",
)
