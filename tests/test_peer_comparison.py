"""The peer comparison's bookkeeping and its exact-law prediction (sgsim.experiments.peer_comparison).

Bookkeeping: every sampler spends the same gradient evaluations (exactly on the mixtures,
within one step's cost on the data target, SGLD-CV's and SVRG-LD's extra costs counted), a
reSGLD ladder of L replicas counts L per step, and a short run's draws match its plan.
The prediction: SGLD's stationary covariance on the Gaussian fit with minibatch noise, read
off the compiled step, against SciPy's discrete Lyapunov solution of ``S = F S F^T + Q`` with
``F = I - alpha P`` and ``Q = 2 alpha I + alpha^2 V`` (deterministic, to 1e-10); the negative
control is the same solution without the noise term, which the same check rejects.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import scipy.linalg

import sgsim
from sgsim._validate import ParameterError
from sgsim.experiments import peer_comparison as pc

SMALL = dataclasses.replace(pc.QUICK, mixture_lanes=8, mixture_steps=400, ksd_draws=200)


@pytest.fixture(scope="module")
def mixture():
    return pc.problem("mixture_3x3", SMALL, seed=3)


def data_problem(lanes=8, n_data=690, batch=69):
    d = 3
    rng = np.random.default_rng(0)
    a = rng.standard_normal((d, d))
    cov = a @ a.T / d + 0.5 * np.eye(d)
    v = np.diag([3.0, 1.0, 2.0])
    return pc.Problem(name="data", target=None, curvature=np.linalg.inv(cov), grad_noise=v, lanes=lanes,
                      n_data=n_data, batch_size=batch, mean=np.array([0.3, -0.2, 1.0]),
                      second_moment=cov + 0.0, fit_cov=cov)  # fmt: skip


def test_every_sampler_spends_the_same_gradient_evaluations(mixture):
    budget = pc.budget_evaluations(mixture, SMALL)
    assert budget == SMALL.mixture_lanes * SMALL.mixture_steps
    for method in pc.METHODS:
        steps = pc.n_steps(method, mixture, SMALL)
        assert pc.gradient_evaluations(method, mixture, steps) == budget, method
        chains, particles = pc.layout(method, mixture)
        assert chains * (particles or 1) == mixture.lanes, method
    # one ladder of L replicas is L lanes: lanes / L ladders
    assert pc.layout("resgld", mixture) == (SMALL.mixture_lanes // pc.REPLICAS, pc.REPLICAS)
    assert pc.layout("svgd", mixture) == (1, SMALL.mixture_lanes)

    prob = data_problem()
    full = dataclasses.replace(SMALL, data_lanes=8, data_steps=1000, batch_size=69)
    total = pc.budget_evaluations(prob, full)
    assert total == 8 * 1000 * 69
    n, big, m = 69, 690, math.ceil(690 / 69)
    for method in pc.METHODS:
        k = pc.n_steps(method, prob, full)
        spent = pc.gradient_evaluations(method, prob, k)
        assert spent <= total < pc.gradient_evaluations(method, prob, k + 1), method
    k = pc.n_steps("sgld_cv", prob, full)
    assert pc.gradient_evaluations("sgld_cv", prob, k) == 8 * 2 * n * k + big and k == (total - big) // (16 * n)
    k = pc.n_steps("svrg_ld", prob, full)
    assert pc.gradient_evaluations("svrg_ld", prob, k) == 8 * (2 * n * k + big * math.ceil(k / m))
    assert pc.n_steps("sgld", prob, full) == 1000


def test_a_short_run_keeps_the_draws_its_plan_says(mixture):
    for method, lanes_kept in (("sgld", SMALL.mixture_lanes), ("resgld", SMALL.mixture_lanes // pc.REPLICAS),
                               ("sgld_repulsive", SMALL.mixture_lanes)):  # fmt: skip
        cell = pc.run_cell(method, mixture, SMALL, seed=5)
        assert cell.status == "ok" and cell.diverged == 0, cell
        assert cell.evaluations == SMALL.mixture_lanes * SMALL.mixture_steps
        assert cell.n_draws == lanes_kept * (SMALL.mixture_steps - SMALL.mixture_steps // 2), method
    refused = pc.run_cell("sgld_cv", mixture, SMALL, seed=5)
    assert refused.status == "n/a" and "data target" in refused.reason


def test_each_step_rule_is_the_samplers_own_limit():
    p = np.diag([4.0, 1.0])
    prob = dataclasses.replace(data_problem(), curvature=p, grad_noise=np.zeros((2, 2)), n_data=0,
                               mean=np.zeros(2), second_moment=np.linalg.inv(p))  # fmt: skip
    assert pc.stability_limit("sgld", prob)[0] == pytest.approx(0.5, rel=1e-12)
    assert pc.stability_limit("sghmc", prob)[0] == pytest.approx(2 * 1.9 / 4, rel=1e-12)
    alpha = pc.stability_limit("sgnht", prob)[0]
    h = math.sqrt(alpha)
    assert h * h * 4.0 == pytest.approx(2 * (2 - h * 1.0), rel=1e-12)
    # with the exponential friction the momentum keeps exp(-h A): h^2 lambda = 2 (1 + exp(-h A))
    h = math.sqrt(pc.stability_limit("sgnht_exp", prob)[0])
    assert h * h * 4.0 == pytest.approx(2 * (1 + math.exp(-h * 1.0)), rel=1e-12)
    # BAOAB's rule is the limit sgsim itself enforces: just inside runs, just beyond is refused
    limit = pc.stability_limit("baoab", prob)[0]
    target = sgsim.targets.linear_gaussian(p)
    sgsim.sample(target, "baoab", 5, seed=0, step_size=0.999 * limit)
    with pytest.raises(ParameterError, match="step_size"):
        sgsim.sample(target, "baoab", 5, seed=0, step_size=1.001 * limit)
    # SGLD at its limit: the stiffest direction's factor 1 - alpha lambda reaches -1
    assert 1.0 - pc.stability_limit("sgld", prob)[0] * 4.0 == pytest.approx(-1.0, abs=1e-12)


def test_sglds_predicted_covariance_is_the_lyapunov_solution_and_not_the_noiseless_one():
    prob = data_problem()
    alpha = 0.05
    got = pc.predicted_cov("sgld", prob, alpha)
    p = np.linalg.inv(prob.fit_cov)
    f = np.eye(3) - alpha * p
    want = scipy.linalg.solve_discrete_lyapunov(f, 2 * alpha * np.eye(3) + alpha**2 * prob.grad_noise)
    assert np.max(np.abs(got - want)) <= 1e-10 * np.max(np.abs(want))
    wrong = scipy.linalg.solve_discrete_lyapunov(f, 2 * alpha * np.eye(3))
    assert np.max(np.abs(got - wrong)) > 1e-3 * np.max(np.abs(want))
    assert pc.predicted_cov("baoab", prob, alpha) is None  # no law with minibatch noise for a splitting
