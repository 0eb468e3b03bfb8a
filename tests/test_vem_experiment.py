"""The Figure 6 experiment (variational EM on optdigits): its pieces against direct
computations, and the whole on a small subset into a report section."""

import numpy as np
from scipy.special import logsumexp
from sgsim._paper_figures import sgdvi_fig6_vem as fig6

from sgsim import datasets, targets
from sgsim.experiments import vem_hyperparameter as vem


def test_largest_curvature_is_that_of_the_exact_hessian():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 4)) * np.array([1.0, 2.0, 0.5, 3.0])
    y = X @ np.ones(4) + rng.standard_normal(200)
    t = targets.linear_regression(X, y, batch_size=10, standardise=False)
    exact = np.linalg.eigvalsh(t.extras["precision"])[-1] / 200
    assert abs(vem.largest_curvature(t, t.mean) / exact - 1) < 1e-6
    # negative control: the smallest eigenvalue is far from it
    assert np.linalg.eigvalsh(t.extras["precision"])[0] / 200 < 0.5 * exact


def test_validation_nll_is_the_mean_softmax_nll():
    X, y = datasets.load("optdigits")
    X, y = X[:300], y[:300]
    t = targets.softmax_regression(X, y, n_classes=10, standardise=False, batch_size=10)
    theta = np.random.default_rng(1).standard_normal(t.dim) * 0.1
    design = np.column_stack([np.ones(len(y)), X])
    logits = design @ theta.reshape(design.shape[1], 10)
    want = float(np.mean(logsumexp(logits, axis=1) - logits[np.arange(len(y)), y.astype(int)]))
    assert abs(vem.validation_nll(t, theta, X, y) - want) < 1e-12


def test_the_experiment_and_figure_on_a_subset(tmp_path, monkeypatch):
    X, y = datasets.load("optdigits")
    small = (X[:700], y[:700])
    monkeypatch.setattr(vem.datasets, "load", lambda name, standardise=True: small)
    res = vem.run(3000, seed=3, n_grid=3)
    assert res.n_train + res.n_val == 700 and res.val_nll.shape == (3,)
    assert res.capped.diverged is None and res.capped.selected > 0 and np.isfinite(res.capped.val_nll)
    # on 490 digits Theorem 1's rate is far beyond the stability limit: that run diverges, is reported
    assert res.theorem.diverged is not None and "rho0" in res.theorem.diverged and np.isnan(res.theorem.selected)
    assert res.capped.lr <= 1 / res.curvature + 1e-12
    name = fig6.save(fig6.draw(res), tmp_path, "f6.png")
    text = fig6.report(res, 3000, name)
    assert (tmp_path / "f6.png").stat().st_size > 10_000 and "| quantity |" in text
