"""Table 1 as a frontier: the MALA reference is exact (its own convergence, and the Laplace
law it must not equal), the relaxation time of the linear recursion, the friction rule, and
the experiment end to end on one data set with a small budget."""

import math

import numpy as np
import pytest
from sgsim._paper_figures import cyclical_table1_frontier as fig
from stats import assert_within_se

from sgsim.experiments import ess_frontier as ef
from sgsim.experiments.cyclical_logistic import DEFAULT, build_target, laplace


def test_the_mala_reference_converges_to_the_posterior():
    ref = ef.reference("heart", 6000, seed=1)
    assert ref.rhat_max < 1.01 and ref.ess_min > 1000 and 0.4 < ref.acceptance < 0.75
    # the posterior is not its Laplace approximation: its mean differs from the mode by up to about
    # half a posterior sd here, far beyond the reference's SE (ref sd / sqrt(ESS min) per coordinate)
    scale = laplace(build_target("heart", DEFAULT))
    se = ref.sd / math.sqrt(ref.ess_min)
    assert np.max(np.abs(ref.mean - scale.mode) / se) > 20
    # a second, independent reference agrees within its SE (5 SE on each coordinate, both errors)
    other = ef.reference("heart", 6000, seed=2)
    assert_within_se(other.mean, ref.mean, se * math.sqrt(2), what="two MALA references")
    # negative control: a reference shifted by a tenth of a posterior sd is rejected
    with pytest.raises(AssertionError):
        assert_within_se(other.mean + 0.1 * ref.sd, ref.mean, se * math.sqrt(2), what="shifted")


def test_relaxation_time_and_critical_friction():
    lam = np.array([0.5, 50.0])
    # SGLD: rho = |1 - alpha lambda_min|
    assert math.isclose(ef._relaxation("sgld", 0.01, 0.0, lam), -1 / math.log(1 - 0.005), rel_tol=1e-12)
    # SGHMC at critical damping of the slowest direction relaxes faster than SGLD with eta times its step
    alpha = 0.01
    eta = 2 * math.sqrt(alpha * lam[0])
    assert ef._relaxation("sghmc", alpha, eta, lam) < ef._relaxation("sgld", eta * alpha, 0.0, lam)
    settings, _, scale = ef._settings(ef.PROTOCOLS["exact, critical"], "heart", 100)
    alpha = ef.step_sizes(scale, settings)["sghmc"]
    assert math.isclose(settings.friction, 2 * math.sqrt(alpha * scale.hessian_eigenvalues[0]), rel_tol=1e-6)


def test_the_frontier_on_one_data_set(tmp_path):
    res = ef.frontier(datasets=("heart",), methods=("sgld", "sghmc"), n_seeds=1, n_samples=400,
                      reference_steps=2000, seed=3)  # fmt: skip
    assert len(res.points) == 2 * len(ef.PROTOCOLS)
    for p in res.points:
        assert p.burn_in >= max(1000, p.relaxation) and np.all(p.ess_median > 0)
    name = fig.save(fig.draw(res), tmp_path, "frontier.png")
    text = fig.report(res, name)
    assert (tmp_path / "frontier.png").stat().st_size > 10_000 and "| quantity |" in text
