"""[SGDVI] Figures 3-5 (iterate averaging on synthetic linear regression): the running variance
estimates, IASG's window means against the exact discrete prediction with the iterates'
covariance rejected, and the figures from a small budget."""

import numpy as np
import pytest
from sgsim._paper_figures import sgdvi_figs345_iasg as fig
from stats import assert_within_se

from sgsim.experiments import iterate_averaging as ia


def test_running_variances_are_those_of_each_prefix():
    draws = np.random.default_rng(0).standard_normal((3, 12, 4))
    lo, hi = ia._running_var(draws, 3)
    for j, end in enumerate(range(3, 13, 3)):
        var = draws[:, :end].var(axis=1, ddof=1)
        np.testing.assert_allclose(lo[:, j], var.min(axis=1), rtol=1e-10)
        np.testing.assert_allclose(hi[:, j], var.max(axis=1), rtol=1e-10)
    lo1, _ = ia._running_var(draws, 1)
    assert np.isnan(lo1[:, 0]).all() and not np.isnan(lo1[:, 1:]).any()


@pytest.fixture(scope="module")
def covs():
    return ia.covariances(seed=5, n_chains=60, windows_per_chain=1)


def test_window_means_have_the_predicted_variances(covs):
    # 60 independent window means (one per chain, after a warm-up of five relaxation times): the
    # sample variance of n Gaussian draws has SE var * sqrt(2 / (n - 1)); 5 SE on each diagonal
    # entry. The exact discrete prediction treats the minibatch noise as constant (it is, to
    # O(epsilon) here: the posterior is tight), hence the 5% bias allowance.
    n = covs.n_means
    want = np.diag(covs.exact)
    got = np.diag(covs.iasg)
    assert_within_se(got, want, want * np.sqrt(2 / (n - 1)), bias=0.05 * want, what="IASG window means")
    # negative control: the iterates' own stationary variances, ~25 times larger
    sgd = np.diag(covs.sgd)
    with pytest.raises(AssertionError):
        assert_within_se(got, sgd, sgd * np.sqrt(2 / (n - 1)), bias=0.05 * sgd, what="iterates")
    # and the theory: eq. 34 (A = C assumed) within a few percent of the exact prediction and of
    # the posterior, as A5 nearly holds for data drawn from the model
    assert covs.a_vs_c < 0.1
    assert np.linalg.norm(covs.eq34 - covs.exact) / np.linalg.norm(covs.exact) < 0.1
    assert np.linalg.norm(covs.eq34 - covs.posterior) / np.linalg.norm(covs.posterior) < 0.05


def test_figures_from_a_small_budget(covs, tmp_path):
    v = ia.convergence(seed=6, n_runs=4, n_passes=4)
    assert v.min_var[("IASG", "MAP")].shape == (4, 4)
    names = [fig.save(f(x), tmp_path, f"f{i}.png") for i, (f, x) in
             enumerate([(fig.draw_fig3, covs), (fig.draw_fig4, v), (fig.draw_fig5, v)])]  # fmt: skip
    text = fig.report(covs, v, names)
    assert all((tmp_path / n).stat().st_size > 10_000 for n in names) and "| quantity |" in text
