"""The bias study on reference posteriors (sgsim.experiments.reference_bias).

SGLD at a large step on arK, a near-Gaussian posterior, against the exact law of its Gaussian
fit: the measured error of each coordinate's standard deviation must lie within 5 of its
standard errors of the prediction (the SE from the spread of the 64 independent chains'
second moments, carried to the sd by the delta method; the prediction's own error, from the
Gaussian fit of 10,000 gold draws, is far smaller). The negative control is the prediction
for half the step size, which the same check rejects.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("jax")

import sgsim  # noqa: E402
from sgsim.experiments import reference_bias as rb  # noqa: E402

BUDGET = dataclasses.replace(rb.QUICK, n_chains=64, n_steps=2000)


@pytest.fixture(scope="module")
def ark():
    return rb.reference("arK-arK")


def test_arK_is_near_gaussian_and_its_step_unit_is_the_stiffest_direction(ark):
    assert ark.near_gaussian and ark.n_data == 0 and ark.dim == 7
    assert np.isclose(ark.lambda_max, np.linalg.eigvalsh(ark.precision)[-1])


def test_sgld_bias_on_arK_follows_the_exact_law_and_rejects_half_the_step(ark):
    run = rb.bias_run(ark, "sgld", 0.8, None, BUDGET, seed=11)
    assert run.diverged == 0
    z = (run.err_sd - run.predicted_sd) / run.se_sd
    assert np.all(np.abs(z) <= 5.0), z
    # the stiffest coordinate's sd is inflated visibly (about 20% at c = 0.8)
    assert run.predicted_sd.max() > 0.15
    target = rb.posteriordb.reference_posterior("arK-arK")
    result = sgsim.sample(target, "sgld", BUDGET.n_steps, n_chains=4, seed=1, init=ark.mean[None].repeat(4, 0),
                       step_size=0.4 / ark.lambda_max, burn_in=BUDGET.n_steps // 2, thin=5)  # fmt: skip
    _, half = rb.predicted(ark, target, "sgld", 0.4 / ark.lambda_max, None, BUDGET, result)
    z_wrong = (run.err_sd - half) / run.se_sd
    assert np.max(np.abs(z_wrong)) > 5.0, z_wrong


def test_minibatch_sizes_follow_the_budget_and_a_port_check_runs():
    ref = rb.reference("mesquite-logmesquite_logvolume")
    assert rb.batch_sizes(ref, BUDGET) == [None, 5]
    small = dataclasses.replace(BUDGET, mala_chains=16, mala_warmup=600, mala_draws=600)
    check = rb.check_port("mesquite-logmesquite_logvolume", small, seed=3)
    assert check.comparison.ok and 0.3 < check.acceptance < 0.8
