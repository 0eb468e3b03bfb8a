"""sgsim.experiments.cyclical_synthetic: settings, seeds and the shape of the returned data."""

import numpy as np
import pytest

from sgsim import schedules
from sgsim.experiments import cyclical_synthetic as cs


def test_run_seeds_are_deterministic_prefix_stable_and_keyed_by_chains():
    a = cs.run_seeds(3, 10, 1)
    np.testing.assert_array_equal(a, cs.run_seeds(3, 10, 1))
    np.testing.assert_array_equal(a[:4], cs.run_seeds(3, 4, 1))
    assert not set(a) & set(cs.run_seeds(3, 10, 4))
    assert not np.array_equal(a, cs.run_seeds(4, 10, 1))
    with pytest.raises(ValueError, match="seed"):
        cs.run_seeds(-1, 2, 1)


def test_settings_follow_theory_b1():
    paper, ref = cs.SETTINGS["paper"], cs.SETTINGS["reference"]
    p = paper.csgld_schedule(50_000)
    assert schedules.cycle_length(50_000, 30) == 1667
    assert np.sum(p.stage[:1667] == schedules.EXPLORATION) == 417
    r = ref.csgld_schedule(50_000)
    assert np.all(r.stage == schedules.SAMPLING)
    assert np.sum(r.collect[:1667]) == 1667 - 50
    s = ref.sgld_schedule(600)
    assert np.all(s.step_size[:500] == 0.043)
    assert s.step_size[501] == pytest.approx(0.043 * 2**-0.55)
    assert paper.sgld_schedule(3).step_size[2] == pytest.approx(0.05 * 3**-0.55)
    for setting in (paper, ref):
        assert np.array_equal(setting.target().grad_noise_cov, np.eye(2))
        assert setting.noise_correction
    with pytest.raises(ValueError, match="unknown setting"):
        cs.get_setting("nope")


def test_schedule_curves_sums():
    c = cs.schedule_curves("paper", 50_000)
    assert c.sum_cyclical == pytest.approx(np.sum(c.cyclical))
    assert c.paper_sum_cyclical == pytest.approx(2250.0)
    assert c.full_sum_cyclical == pytest.approx(0.09 * (50_010 + 30) / 2)
    assert c.last_cycle_length == 50_000 - 29 * 1667
    assert c.exploration.sum() == 30 * 417


def test_small_table_and_density_agree_on_run_zero():
    n_steps, seed = 3000, 7
    table = cs.mode_coverage_table("reference", n_runs=2, n_steps=n_steps, seed=seed)
    assert list(table.rows) == [a[0] for a in cs.ALGORITHMS]
    single = table.rows["csgld"]
    np.testing.assert_array_equal(single.seeds, cs.run_seeds(seed, 2, 1))
    collected = int(cs.SETTINGS["reference"].csgld_schedule(n_steps).collect.sum())
    assert np.all(single.n_draws == collected)
    assert np.all(table.rows["parallel_sgld"].n_draws == 4 * n_steps)
    for row in table.rows.values():
        assert np.all((row.coverage >= 0) & (row.coverage <= 25))
        assert row.se == pytest.approx(np.std(row.coverage, ddof=1) / np.sqrt(2))
    dc = cs.density_comparison("reference", n_chains=1, n_steps=n_steps, seed=seed, bins=60)
    assert dc.run_seed == single.seeds[0]
    assert dc.runs["csgld"].coverage == single.coverage[0]
    assert dc.runs["sgld"].coverage == table.rows["sgld"].coverage[0]
    assert dc.target_density.shape == (60, 60)
