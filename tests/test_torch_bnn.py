"""The Bayesian neural network regression of "Stochastic Gradient MCMC with Repulsive Forces" (Tables 4 and 5),
sgsim.torch.experiments.bnn_regression: the shapes of a tiny run and its seeds, the SGLD baseline as SGLD+R with
K = I step for step, trained networks against the mean predictor (untrained networks as the negative control), the
scores in original units against a NumPy mixture by hand, the report section, and bad input.

Skipped as a whole where PyTorch (the ``torch`` extra) is not installed.
"""

import copy
import importlib
import importlib.util
import math

import numpy as np
import pytest
from scipy.special import logsumexp

from sgsim._validate import ParameterError, ParameterTypeError
from sgsim.cli import _paper_figures

torch = pytest.importorskip("torch")

import sgsim.torch.experiments.bnn_regression as bnn  # noqa: E402
from sgsim.torch import SampleStore, SGLDRepulsive, make_generator  # noqa: E402

SEED = 7
TINY = bnn.config(datasets=("boston",), n_splits=2, n_steps=30, burn_in=10, thin=10, n_particles=4, n_hidden=8)


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    # small tensors: with a second busy process on two cores, torch's OpenMP regions cost milliseconds
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny():
    return bnn.run_bnn_regression(TINY, seed=SEED)


@pytest.fixture(scope="module")
def boston():
    return bnn.make_split("boston", 0, SEED)


# --------------------------------------------------------------------------- shapes and seeds


def test_a_tiny_run_has_the_documented_shapes(tiny):
    assert set(tiny.runs) == {("boston", "sgld"), ("boston", "sgld_repulsive")}
    for runs in [*tiny.runs.values(), *tiny.baseline.values()]:
        for values in (runs.rmse, runs.log_likelihood, runs.seconds, runs.final_loss):
            assert values.shape == (TINY.n_splits,)
        assert np.all(np.isfinite(runs.rmse)) and np.all(runs.rmse > 0)
        assert np.all(np.isfinite(runs.log_likelihood))
    assert tiny.n_train["boston"] == 455 and tiny.n_test["boston"] == 51  # round(0.9 * 506)
    assert TINY.kept_steps.tolist() == [20, 30] and TINY.n_samples == 8


def test_the_same_seed_gives_the_same_numbers(tiny):
    again = bnn.run_bnn_regression(TINY, seed=SEED)
    other = bnn.run_bnn_regression(TINY, seed=SEED + 1)
    for key, runs in tiny.runs.items():
        np.testing.assert_array_equal(again.runs[key].rmse, runs.rmse)
        np.testing.assert_array_equal(again.runs[key].log_likelihood, runs.log_likelihood)
        np.testing.assert_array_equal(again.runs[key].final_loss, runs.final_loss)
        assert not np.any(other.runs[key].rmse == runs.rmse)
    assert torch.get_num_threads() == 1  # the run restores the thread count it found


def test_splits_are_seeded_disjoint_and_standardised_on_the_training_part(boston):
    again = bnn.make_split("boston", 0, SEED)
    np.testing.assert_array_equal(again.test_rows, boston.test_rows)
    assert not np.array_equal(bnn.make_split("boston", 1, SEED).test_rows, boston.test_rows)
    rows = np.concatenate([boston.train_rows, boston.test_rows])
    assert np.array_equal(np.sort(rows), np.arange(506))
    np.testing.assert_allclose(boston.x_train.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(boston.x_train.std(0), 1, atol=1e-12)
    assert abs(boston.y_train.mean()) < 1e-12 and abs(boston.y_train.std() - 1) < 1e-12
    from sgsim import datasets

    _, y = datasets.load("boston", standardise=False)
    np.testing.assert_allclose(boston.y_test_original, y[boston.test_rows], rtol=1e-13)


def test_both_samplers_start_from_the_same_networks_and_minibatches(boston):
    cfg = bnn.config(n_steps=1, burn_in=0, thin=1, n_particles=3, n_hidden=5)
    runs = {m: bnn.train(m, boston, cfg, SEED) for m, _ in bnn.METHODS}
    # the loss before the first step: same networks, same minibatch
    assert runs["sgld"].train_loss[0] == runs["sgld_repulsive"].train_loss[0]
    # but different noise: the kept networks differ
    assert not torch.equal(runs["sgld"].store.vectors(), runs["sgld_repulsive"].store.vectors())


# --------------------------------------------------------------------------- the baseline is SGLD+R with K = I


def test_independent_sgld_is_sgld_repulsive_with_an_identity_kernel(boston):
    """With a bandwidth so small that every off-diagonal K_ij underflows to 0, SGLD+R (no 1/L) is L SGLD chains."""
    cfg = bnn.config(n_particles=4, n_hidden=6)
    n = boston.n_train
    nets = bnn.init_networks(cfg.n_particles, boston.n_features, cfg.n_hidden, make_generator(1))
    chains = bnn.IndependentSGLD(copy.deepcopy(nets), lr=1e-4, num_data=n, seed=2)
    flat = torch.cat([p.detach().reshape(cfg.n_particles, -1) for p in chains.params.values()], dim=1)
    d2 = torch.cdist(flat, flat).square()
    h = float(d2[~torch.eye(cfg.n_particles, dtype=torch.bool)].min()) / 2000  # exp(-2000) == 0
    rep = SGLDRepulsive(copy.deepcopy(nets), lr=1e-4, num_data=n, bandwidth=h, normalise=False, seed=3)
    gen = make_generator(4)
    x, y = torch.as_tensor(boston.x_train), torch.as_tensor(boston.y_train)

    def loss_fn(model, xb, yb):
        return bnn.minibatch_loss(model, xb, yb, n, cfg.noise_precision, cfg.prior_precision)

    shapes = [p.shape for p in chains.params.values()]
    for _ in range(5):
        rows = torch.randperm(n, generator=gen)[:50]
        xi = torch.randn(rep.flat.shape, generator=gen, dtype=torch.float64)
        split = [c.reshape(s) for c, s in zip(xi.split([math.prod(s[1:]) for s in shapes], dim=1), shapes, strict=True)]
        a = chains.step(loss_fn, x[rows], y[rows], noise=split)
        b = rep.step(loss_fn, x[rows], y[rows], noise=xi)
        torch.testing.assert_close(a, b, rtol=1e-13, atol=0)
    flat = torch.cat([p.detach().reshape(cfg.n_particles, -1) for p in chains.params.values()], dim=1)
    torch.testing.assert_close(flat, rep.flat, rtol=0, atol=1e-12)
    assert rep.jitter == 0.0


# --------------------------------------------------------------------------- trained against untrained


def test_trained_networks_beat_the_mean_predictor_and_untrained_ones_do_not(boston):
    cfg = bnn.config(n_steps=300, burn_in=200, thin=20)
    base = bnn.mean_predictor(boston)
    trained = bnn.evaluate(bnn.train("sgld_repulsive", boston, cfg, SEED).store, boston, cfg)
    assert trained.rmse < 0.6 * base.rmse
    assert trained.log_likelihood > base.log_likelihood + 0.5
    # negative control: the same check on the initial networks (the same model average, no step) fails
    store = SampleStore()
    for net in bnn.init_networks(cfg.n_particles, boston.n_features, cfg.n_hidden, make_generator(SEED)):
        store.add(net, step=0)
    untrained = bnn.evaluate(store, boston, cfg)
    assert not untrained.rmse < 0.6 * base.rmse
    assert untrained.rmse > 0.9 * base.rmse


def test_the_mean_predictor_is_a_gaussian_at_the_training_mean_and_sd(boston):
    y = boston.y_test_original
    s = bnn.mean_predictor(boston)
    sd = boston.y_scale
    expected = np.mean(-0.5 * np.log(2 * np.pi * sd**2) - (y - boston.y_mean) ** 2 / (2 * sd**2))
    assert s.log_likelihood == pytest.approx(expected, rel=1e-12)
    assert s.rmse == pytest.approx(np.sqrt(np.mean((y - boston.y_mean) ** 2)), rel=1e-12)


# --------------------------------------------------------------------------- scores against NumPy


def numpy_scores(store, split, cfg):
    """RMSE and log-likelihood of the Gaussian mixture in original units, by hand in NumPy."""
    d, h = split.n_features, cfg.n_hidden
    mu = []
    for v in store.vectors().numpy():
        w1, v = v[: h * d].reshape(h, d), v[h * d :]
        b1, v = v[:h], v[h:]
        w2, b2 = v[:h], v[h]
        out = np.maximum(split.x_test @ w1.T + b1, 0.0) @ w2 + b2
        mu.append(split.y_mean + split.y_scale * out)  # the network's mean in original units
    mu = np.array(mu)  # (S, n)
    y = split.y_test_original
    var = split.y_scale**2 / cfg.noise_precision  # the noise variance in original units
    log_dens = -0.5 * np.log(2 * np.pi * var) - (y - mu) ** 2 / (2 * var)
    ll = np.mean(logsumexp(log_dens, axis=0) - np.log(mu.shape[0]))
    return np.sqrt(np.mean((mu.mean(0) - y) ** 2)), ll


def test_the_scores_agree_with_a_numpy_mixture_in_original_units(boston):
    cfg = bnn.config(n_steps=40, burn_in=20, thin=5, n_particles=5)
    run = bnn.train("sgld", boston, cfg, SEED)
    assert len(run.store) == cfg.n_samples == 20
    ours = bnn.evaluate(run.store, boston, cfg)
    rmse, ll = numpy_scores(run.store, boston, cfg)
    assert ours.rmse == pytest.approx(rmse, rel=1e-10)
    assert ours.log_likelihood == pytest.approx(ll, rel=1e-10)
    # the Jacobian matters: without it the log-likelihood is off by log(y_scale) ~ 2.2 nats
    assert abs(ours.log_likelihood + math.log(boston.y_scale) - ll) > 2


# --------------------------------------------------------------------------- the report section


def test_the_section_draws_a_clean_figure_and_states_the_paper_values(tiny, tmp_path):
    figures = _paper_figures()
    script = importlib.import_module(f"{figures.__name__}.repulsive_tables45_bnn")
    style = importlib.import_module(f"{figures.__name__}._style")
    fig = script.draw(tiny)
    assert style.check_figure(fig) == []
    text = script.report(tiny, "x.png", full=False)
    for value in ("-2.551 ± 0.018", "-2.575 ± 0.007", "2.392 ± 0.018", "2.295 ± 0.017", "quick mode"):
        assert value in text
    assert "not shipped" in text and "Kin8nm" in text


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "changes, name",
    [
        ({"n_steps": 10, "burn_in": 10, "thin": 5}, "n_steps"),
        ({"datasets": ("wine",)}, "datasets"),
        ({"datasets": "boston"}, "datasets"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"n_particles": 1}, "n_particles"),
        ({"test_fraction": 1.0}, "test_fraction"),
        ({"noise_precision": -1.0}, "noise_precision"),
        ({"n_threads": 0}, "n_threads"),
    ],
)
def test_bad_settings_name_the_parameter(changes, name):
    with pytest.raises((ParameterError, ParameterTypeError)) as info:
        bnn.config(**changes)
    assert info.value.parameter == name


def test_bad_arguments_name_the_parameter(boston):
    with pytest.raises(ParameterError, match="method"):
        bnn.train("svgd", boston, TINY, SEED)
    with pytest.raises(ParameterTypeError) as info:
        bnn.run_bnn_regression({"n_splits": 1})
    assert info.value.parameter == "cfg"
    with pytest.raises(ParameterError) as info:
        bnn.make_split("yacht", 0, SEED)
    assert info.value.parameter == "dataset"


def test_without_torch_the_section_is_skipped_with_the_extra_named(monkeypatch, tmp_path):
    figures = _paper_figures()
    script = importlib.import_module(f"{figures.__name__}.repulsive_tables45_bnn")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    section = script.run(tmp_path, progress=False)
    assert section.figures == [] and "Skipped" in section.markdown and "sgsim[torch]" in section.markdown
    assert list(tmp_path.iterdir()) == []
