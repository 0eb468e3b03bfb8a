"""sgsim.experiments.cyclical_logistic (Table 1 of [cSG]): the layout of the runs, the
step-size rules, the Laplace yardstick, the returned data, and the report script."""

from dataclasses import replace

import numpy as np
import pytest

from sgsim import schedules, theory
from sgsim.experiments import cyclical_logistic as cl
from sgsim.targets import regression

TINY = cl.Settings(n_burn_in=50, n_samples=150)


def test_paper_table_has_every_cell():
    assert set(cl.PAPER_TABLE1) == {(d, m) for d in cl.DATASET_ORDER for m, _ in cl.ALGORITHMS}
    assert cl.PAPER_TABLE1[("australian", "csghmc")] == 4707 and cl.PAPER_TABLE1[("german", "sgld")] == 492


def test_5000_after_1000_maps_to_six_cycles_of_1000():
    assert cl.DEFAULT.cyclical_layout() == (6000, 6, 1000)
    sched, burn_in = cl.method_schedule("csgld", 1e-3)
    assert burn_in == 1000 and sched.n_steps == 6000
    assert np.all(sched.stage == schedules.SAMPLING) and int(sched.collect[burn_in:].sum()) == 5000
    sched, burn_in = cl.method_schedule("sghmc", 1e-3)
    assert (sched.n_steps, burn_in) == (6000, 1000)
    # with an exploration stage: 800 sampling steps per cycle, 7 cycles after the burn-in
    explore = cl.Settings(explore_fraction=0.2)
    assert explore.cyclical_layout() == (8000, 8, 1000)
    sched, burn_in = cl.method_schedule("csghmc", 1e-3, explore)
    assert int(sched.collect[burn_in:].sum()) == 5600
    with pytest.raises(ValueError, match="unknown method"):
        cl.method_schedule("sgd", 1e-3)
    with pytest.raises(ValueError, match="step_rule"):
        cl.Settings(step_rule="tuned")


@pytest.fixture(scope="module")
def heart():
    target = cl.build_target("heart")
    return target, cl.laplace(target)


def test_target_and_laplace(heart):
    target, scale = heart
    assert target.dim == 14 and target.extras["batch_size"] == 32 and not target.extras["replace"]
    assert np.all(target.init_low == -1.0) and np.all(target.init_high == 1.0)
    assert np.max(np.abs(target.gradient(scale.mode))) < 1e-8
    # the Hessian behind the Laplace covariance, against differences of the exact gradient
    h = 1e-6
    fd = np.array(
        [(target.gradient(scale.mode + h * e) - target.gradient(scale.mode - h * e)) / (2 * h) for e in np.eye(14)]
    )
    np.testing.assert_allclose(np.linalg.inv(scale.covariance), fd, rtol=1e-6, atol=1e-6)
    v = regression.minibatch_gradient_covariance(target, scale.mode)
    np.testing.assert_allclose(scale.noise_eigenvalues, np.linalg.eigvalsh(v), rtol=1e-10)


def test_step_size_rules(heart):
    _, scale = heart
    a = cl.step_sizes(scale)
    lam_v = scale.noise_eigenvalues[-1]
    # noise rule: alpha^2 lambda_V is half the injected variance (2 alpha, resp. 2 eta alpha)
    assert a["sgld"] ** 2 * lam_v == pytest.approx(0.5 * 2 * a["sgld"])
    assert a["sghmc"] ** 2 * lam_v == pytest.approx(0.5 * 2 * 0.1 * a["sghmc"])
    # cyclical: the same sum of step sizes over the K = 6000 steps as the constant step
    for cyc, base in (("csgld", "sgld"), ("csghmc", "sghmc")):
        assert theory.cyclical_sum(a[cyc], 6, 6000) == pytest.approx(6000 * a[base], rel=1e-12)
    b = cl.step_sizes(scale, cl.Settings(step_rule="stability"))
    lam_h = scale.hessian_eigenvalues[-1]
    assert b["sgld"] * lam_h == pytest.approx(0.5) and b["sghmc"] * lam_h == pytest.approx(0.5 * 1.9)


@pytest.fixture(scope="module")
def tiny_tables():
    main = cl.ess_table(n_runs=2, seed=3, settings=TINY)
    check = cl.ess_table(n_runs=2, seed=3, settings=replace(TINY, step_rule="stability"))
    return main, check


def test_ess_table_returns_one_row_per_cell(tiny_tables):
    main, _ = tiny_tables
    assert list(main.datasets) == list(cl.DATASET_ORDER)
    assert main.datasets["german"].dim == 49 and main.datasets["german"].paper_covariates == 25
    assert len(main.rows) == 12
    for (name, method), row in main.rows.items():
        assert (row.dataset, row.method) == (name, method)
        assert row.median_ess.shape == (2,) and np.all(row.median_ess > 0)
        assert row.mean == pytest.approx(row.median_ess.mean())
        assert row.se == pytest.approx(np.std(row.median_ess, ddof=1) / np.sqrt(2))
        assert row.n_draws == 150 and row.burn_in == 50
        assert row.n_steps == 200  # constant: 50 + 150; cyclical: 4 cycles of 50
        assert np.all(row.sd_ratio > 0) and np.all(row.mean_error >= 0)


def test_ess_table_is_reproducible_and_validates():
    a = cl.ess_table(["heart"], n_runs=2, seed=5, settings=TINY, methods=["sgld"])
    b = cl.ess_table(["heart"], n_runs=2, seed=5, settings=TINY, methods=["sgld"])
    assert np.array_equal(a.rows[("heart", "sgld")].median_ess, b.rows[("heart", "sgld")].median_ess)
    with pytest.raises(ValueError, match="unknown data set"):
        cl.ess_table(["iris"], n_runs=1)
    with pytest.raises(ValueError, match="unknown method"):
        cl.ess_table(["heart"], n_runs=1, methods=["sgd"])
    with pytest.raises(ValueError, match="n_runs"):
        cl.ess_table(["heart"], n_runs=0)


def test_report_and_figure(tiny_tables, tmp_path):
    from paper_figures import cyclical_table1_ess as fig
    from paper_figures import get_entry

    main, check = tiny_tables
    text = fig.report(main, check, "t.png")
    assert "| quantity | paper value | ours | note |" in text
    assert "| SGLD, australian | 1676 |" in text and "(stability rule)" in text
    assert "48 features" in text and "arXiv" in text
    name = fig.save(fig.draw(main, check), tmp_path, "t.png")
    assert (tmp_path / name).stat().st_size > 0
    assert get_entry("cyclical_table1_ess").title.startswith("Table 1")
