"""Storage modes: the final state and the running moments are exactly what the kept draws
give; memory follows what is kept, not the number of steps."""

import tracemalloc

import numpy as np
import pytest

import sgsim
from sgsim import diagnostics, targets
from sgsim.io import read_result, write_result
from sgsim.results import groups_of

NOISY = targets.linear_gaussian([[2.0, 0.5], [0.5, 1.0]], [0.3, -0.2], [[0.5, 0.2], [0.2, 0.3]])
CSGHMC = dict(step_size=0.02, n_cycles=3, explore_fraction=0.3, friction=0.3)
MIX = targets.mixture_3x3()


def run(storage, method="csghmc", target=NOISY, **kwargs):
    opts = {**(CSGHMC if method == "csghmc" else dict(step_size=0.05)), **kwargs}
    return sgsim.sample(target, method, 600, n_chains=3, seed=8, storage=storage, **opts)


def test_final_storage_keeps_the_last_state_only():
    draws, final = run("draws", burn_in=0), run("final")
    theta = final.posterior["theta"].values
    assert theta.shape == (3, 1, 2)
    # the run ends in a sampling stage, so the last kept draw is the final state
    assert draws.sample_stats["step"].values[0, -1] == 600
    assert np.array_equal(theta[:, 0], draws.posterior["theta"].values[:, -1])
    assert np.array_equal(theta[:, 0], final.constant_data["final_theta"].values)
    assert final.sample_stats["step"].values[0, 0] == 600 and final.attrs["storage"] == "final"


def test_final_storage_of_a_run_that_ends_exploring():
    # the first 430 steps of 3 cycles of 200: the run ends in cycle 3's exploration stage
    full = sgsim.schedules.cyclical(0.02, 600, n_cycles=3, explore_fraction=0.3)
    b = full.block(0, 430)
    sched = sgsim.schedules.Schedule(b.step_size, b.temperature, b.stage, b.cycle, b.collect)
    draws = sgsim.sample(NOISY, "sgld", schedule=sched, n_chains=2, seed=1)
    final = sgsim.sample(NOISY, "sgld", schedule=sched, n_chains=2, seed=1, storage="final")
    assert np.array_equal(final.posterior["theta"].values[:, 0], draws.constant_data["final_theta"].values)
    assert final.sample_stats["stage"].values[0, 0] == 0


@pytest.mark.parametrize("burn_in, thin", [(0, 1), (123, 4)])
def test_moments_are_the_mean_and_covariance_of_the_kept_draws(burn_in, thin):
    draws = run("draws", burn_in=burn_in, thin=thin).posterior["theta"].values
    mom = run("moments", burn_in=burn_in, thin=thin)
    assert "posterior" not in groups_of(mom) and mom.attrs["storage"] == "moments"
    m = mom["moments"]
    assert np.all(m["n_draws"].values == draws.shape[1])
    np.testing.assert_allclose(m["theta_mean"].values, draws.mean(axis=1), rtol=1e-12, atol=1e-14)
    cov = np.stack([np.cov(x.T) for x in draws])
    np.testing.assert_allclose(m["theta_cov"].values, cov, rtol=1e-10, atol=1e-14)
    # negative control: the moments of every draw (no thinning) differ
    if thin > 1:
        every = run("draws", burn_in=burn_in).posterior["theta"].values
        assert not np.allclose(m["theta_cov"].values, np.stack([np.cov(x.T) for x in every]), rtol=1e-3)


def test_moments_of_an_ensemble_are_per_particle():
    kw = dict(n_chains=2, n_particles=5, step_size=0.05, seed=3, thin=3, burn_in=10)
    draws = sgsim.sample(MIX, "svgd", 120, **kw).posterior["theta"].values
    m = sgsim.sample(MIX, "svgd", 120, storage="moments", **kw)["moments"]
    assert m["theta_mean"].dims == ("chain", "particle", "dim")
    np.testing.assert_allclose(m["theta_mean"].values, draws.mean(axis=1), rtol=1e-12, atol=1e-14)
    cov = np.array([[np.cov(draws[c, :, p].T) for p in range(5)] for c in range(2)])
    np.testing.assert_allclose(m["theta_cov"].values, cov, rtol=1e-9, atol=1e-14)


def test_diagnostics_say_when_a_result_holds_moments():
    mom = run("moments", method="sgld", target="mixture_25")
    with pytest.raises(ValueError, match="needs draws.*running moments"):
        diagnostics.mode_coverage(mom, targets.mixture_25().mode_centres)
    with pytest.raises(ValueError, match="running moments"):
        diagnostics.ess(mom)
    # moment errors pool the chains' moments: equal to those of the draws themselves
    draws = run("draws", method="sgld", target="mixture_25")
    a = diagnostics.moment_errors(mom, targets.mixture_25())
    b = diagnostics.moment_errors(draws, targets.mixture_25())
    np.testing.assert_allclose(a["mean"], b["mean"], rtol=1e-12)
    np.testing.assert_allclose(a["second_moment"], b["second_moment"], rtol=1e-12)


def test_moments_result_survives_the_file_round_trip(tmp_path):
    mom = run("moments")
    back = read_result(write_result(mom, tmp_path / "m.nc"))
    assert np.array_equal(back["moments"]["theta_cov"].values, mom["moments"]["theta_cov"].values)


def test_memory_follows_what_is_kept_not_the_number_of_steps():
    # 10,000,000 steps with thin = 1,000,000: 10 draws kept. The schedule, noise and storage index
    # are computed block by block (a few MB); one whole-run array of a float per step would be 80 MB.
    sgsim.sample(NOISY, "csgld", 1000, seed=0, step_size=0.02, n_cycles=2, thin=100)  # compile first
    tracemalloc.start()
    try:
        result = sgsim.sample(NOISY, "csgld", 10_000_000, seed=0, step_size=0.02, n_cycles=20, thin=1_000_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.posterior["theta"].shape == (1, 10, 2)
    assert peak < 16_000_000, f"peak traced memory {peak / 1e6:.1f} MB"


def test_running_moments_hold_nothing_per_draw():
    # 100 chains x 200,000 averaged draws: anything of one byte per (chain, draw) would be 20 MB
    sgsim.sample(NOISY, "sgld", 100, n_chains=100, seed=0, step_size=0.05, storage="moments")  # compile first
    tracemalloc.start()
    try:
        result = sgsim.sample(NOISY, "sgld", 200_000, n_chains=100, seed=0, step_size=0.05, storage="moments")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert int(result["moments"]["n_draws"].values[0]) == 200_000
    assert peak < 10_000_000, f"peak traced memory {peak / 1e6:.1f} MB"


def test_bad_storage_is_named():
    with pytest.raises(ValueError, match="storage") as info:
        run("everything")
    assert info.value.parameter == "storage"
