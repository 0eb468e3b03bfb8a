"""The uncertainty experiment of [cSG] Figure 4 (sgsim.torch.experiments.uncertainty) and its figure script.

On a tiny budget: the documented shapes, entropies in [0, log 10], the same seed giving the same
numbers, a trained MLP far below chance in distribution and an untrained one at chance (the
negative control of that check), the schedules and kept samples of each method, bad input; the
script's figure and report on the tiny result, its captions against the experiment's budgets,
and its section when PyTorch is missing.

Skipped as a whole where PyTorch (the ``torch`` extra) is not installed.
"""

import importlib
import math

import numpy as np
import pytest

from sgsim import schedules
from sgsim._validate import ParameterError
from sgsim.cli import _paper_figures

torch = pytest.importorskip("torch")

import sgsim.torch.experiments.uncertainty as unc  # noqa: E402
from sgsim.torch import SampleStore  # noqa: E402

PACKAGE = _paper_figures().__name__
script = importlib.import_module(f"{PACKAGE}.cyclical_fig4_uncertainty")
style = importlib.import_module(f"{PACKAGE}._style")

TINY = unc.config(
    n_train=1000,
    n_test=500,
    n_ood=100,
    hidden=(32,),
    batch_size=50,
    n_epochs=4,
    n_cycles=2,
    samples_per_cycle=2,
    n_samples=3,
)
#: Error of a classifier that is far better than chance (0.9 for ten balanced classes).
FAR_BELOW_CHANCE = 0.4


@pytest.fixture(scope="module")
def tiny():
    return unc.run_uncertainty(TINY, seed=1)


def _numbers(res):
    return {
        k: (r.test_error, r.test_nll, r.test_entropy, r.ood_entropy, r.sample_steps, r.train_loss)
        for k, r in res.methods.items()
    }


# --------------------------------------------------------------------------- the experiment


def test_the_tiny_run_returns_the_documented_shapes(tiny):
    assert list(tiny.methods) == [m.key for m in unc.METHODS]
    assert tiny.ood in ("letters", "fashion") and tiny.seed == 1 and tiny.config is TINY
    for key, r in tiny.methods.items():
        kept = unc.kept_steps(r.method, TINY)
        assert r.n_samples == kept.size == r.sample_steps.size == r.train_loss.size
        assert np.array_equal(r.sample_steps, kept + 1)
        assert r.test_entropy.shape == (TINY.n_test,) and r.ood_entropy.shape == (TINY.n_ood,)
        assert 0 <= r.test_error <= 1 and r.test_nll > 0, key
    counts = {k: r.n_samples for k, r in tiny.methods.items()}
    m, s, c = TINY.n_cycles, TINY.n_samples, TINY.n_cycles * TINY.samples_per_cycle
    expected = {"sgd": 1, "sgdm": 1, "snapshot_sgd": m, "snapshot_sgdm": m}
    expected |= {"sgld": s, "sghmc": s, "csgld": c, "csghmc": c}
    assert counts == expected


def test_entropies_lie_between_zero_and_log_10(tiny):
    for r in tiny.methods.values():
        for h in (r.test_entropy, r.ood_entropy):
            assert np.all(h >= -1e-12) and np.all(h <= math.log(10) + 1e-9)
        assert r.fraction_below(math.log(10) + 1e-9) == 1.0
    frac = tiny.fractions_below(0.5)
    assert frac.keys() == tiny.methods.keys() and all(0 <= f <= 1 for f in frac.values())


def test_the_same_seed_gives_the_same_numbers(tiny):
    keys = ("sgd", "csghmc", "sgld")  # an optimizer and two samplers, momentum or not
    again = unc.run_uncertainty(TINY, seed=1, methods=keys)
    other = unc.run_uncertainty(TINY, seed=2, methods=keys)
    first, second, third = _numbers(tiny), _numbers(again), _numbers(other)
    for k in keys:
        for a, b in zip(first[k], second[k], strict=True):
            assert np.array_equal(a, b), k
        assert not np.array_equal(first[k][3], third[k][3]), k


def test_a_trained_model_is_far_below_chance_and_an_untrained_one_is_not(tiny):
    for key, r in tiny.methods.items():
        assert r.test_error < FAR_BELOW_CHANCE, key
    # negative control: the same check rejects the initial weights, which sit at chance (0.9)
    _, _, x_test, y_test = unc.mnist_split(TINY.n_train, TINY.n_test, 1)
    for seed in range(3):
        model = unc.make_mlp(TINY.hidden, seed)
        store = SampleStore()
        store.add(model, step=0)
        scores = unc.evaluate(model, store, x_test, y_test).metrics()
        assert not scores["test_error"] < FAR_BELOW_CHANCE
        assert 0.75 < scores["test_error"] <= 1.0
        assert scores["mean_entropy"] == pytest.approx(math.log(10), abs=0.05)


def test_no_method_falls_far_behind_in_distribution(tiny):
    # at T = 1 the samplers still predict the test digits about as well as the optimizers
    nll = {k: r.test_nll for k, r in tiny.methods.items()}
    assert max(nll.values()) < 2 * min(nll.values())


# --------------------------------------------------------------------------- schedules and samples


def test_the_schedules_follow_the_module_docs():
    n = TINY.n_steps
    assert n == TINY.n_epochs * (TINY.n_train // TINY.batch_size)
    by = {m.key: m for m in unc.METHODS}
    alpha0 = TINY.learning_rate / TINY.n_train
    # decreasing: from alpha_0 to final_fraction alpha_0 when K >= final_fraction^(-1/0.55)
    s = unc.method_schedule(by["sgld"], TINY)
    assert n >= TINY.final_fraction ** (-1 / unc.DECAY_EXPONENT)
    assert s.step_size[0] == pytest.approx(alpha0, rel=1e-12)
    assert s.step_size[-1] == pytest.approx(TINY.final_fraction * alpha0, rel=1e-12)
    assert np.all(np.diff(s.step_size) < 0)
    noisy = round(TINY.sampling_fraction * n)
    assert np.array_equal(s.temperature, np.r_[np.zeros(n - noisy), np.full(noisy, TINY.temperature)])
    sgd = unc.method_schedule(by["sgd"], TINY)
    assert np.array_equal(sgd.step_size, s.step_size) and not sgd.temperature.any()
    # momentum methods: eta * epsilon
    assert unc.method_schedule(by["sghmc"], TINY).step_size[0] == pytest.approx(TINY.friction * alpha0, rel=1e-12)
    # cyclical: cSGLD explores at T = 0, Snapshot never samples, both on the same cosine
    c = unc.method_schedule(by["csgld"], TINY)
    snap = unc.method_schedule(by["snapshot_sgd"], TINY)
    assert np.array_equal(c.step_size, snap.step_size) and c.n_cycles == TINY.n_cycles
    assert set(c.temperature) == {0.0, TINY.temperature} and not snap.temperature.any()
    assert np.array_equal(c.temperature > 0, c.stage == schedules.SAMPLING)


def test_the_samples_are_kept_where_the_docs_say():
    by = {m.key: m for m in unc.METHODS}
    n = TINY.n_steps
    assert unc.kept_steps(by["sgd"], TINY).tolist() == [n - 1]
    length = n // TINY.n_cycles
    assert unc.kept_steps(by["snapshot_sgdm"], TINY).tolist() == [length - 1, n - 1]
    s = unc.method_schedule(by["csgld"], TINY)
    kept = unc.kept_steps(by["csgld"], TINY)
    assert np.all(s.temperature[kept] > 0) and kept[-1] == n - 1
    assert np.array_equal(np.bincount(s.cycle[kept]), [TINY.samples_per_cycle] * TINY.n_cycles)
    kept = unc.kept_steps(by["sghmc"], TINY)
    assert kept.size == TINY.n_samples and kept[-1] == n - 1
    assert np.all(unc.method_schedule(by["sghmc"], TINY).temperature[kept] > 0)


def test_the_empirical_cdf():
    cdf = unc.empirical_cdf([0.1, 0.2, 0.2, 0.5], [0.0, 0.1, 0.15, 0.2, 0.49, 0.5, 3.0])
    assert cdf.tolist() == [0.0, 0.25, 0.25, 0.75, 0.75, 1.0, 1.0]


def test_the_initial_weights_follow_the_seed_and_leave_torch_alone():
    state = torch.random.get_rng_state()
    a, b, c = unc.make_mlp((8,), 3), unc.make_mlp((8,), 3), unc.make_mlp((8,), 4)
    assert torch.equal(torch.random.get_rng_state(), state)
    pa, pb, pc = (torch.nn.utils.parameters_to_vector(m.parameters()) for m in (a, b, c))
    assert torch.equal(pa, pb) and not torch.equal(pa, pc)
    weight = next(a.parameters()).detach()  # the first layer's weights
    assert float(weight.abs().max()) <= 1 / math.sqrt(784)


@pytest.mark.parametrize(
    ("changes", "name"),
    [
        ({"n_train": 0}, "n_train"),
        ({"n_train": 4500, "n_test": 1000}, "n_test"),
        ({"ood": "notmnist"}, "ood"),
        ({"hidden": ()}, "hidden"),
        ({"temperature": 0.0}, "temperature"),
        ({"friction": 0.0}, "friction"),
        ({"explore_fraction": 1.0}, "explore_fraction"),
        ({"batch_size": 5000}, "batch_size"),
    ],
)
def test_bad_settings_name_the_parameter(changes, name):
    with pytest.raises(ParameterError) as err:
        unc.config(**changes)
    assert err.value.parameter == name


def test_bad_arguments_name_the_parameter():
    with pytest.raises(ParameterError, match="method"):
        unc.train_method("adam", TINY, torch.zeros(TINY.n_train, 784), torch.zeros(TINY.n_train, dtype=torch.long), 0)
    with pytest.raises(ParameterError, match="methods"):
        unc.run_uncertainty(TINY, methods=["sgd", "sgd"])
    with pytest.raises(ParameterError, match="n_ood"):
        unc.ood_images(15, "letters")


# --------------------------------------------------------------------------- the figure script


def test_the_figure_and_report_of_the_tiny_run(tiny, tmp_path):
    fig = script.draw(tiny)
    assert style.check_figure(fig) == []
    text = script.report(tiny, "x.png")
    for r in tiny.methods.values():
        assert f"| {r.method.label} |" in text
    assert "re-creation" in text or tiny.ood == "fashion"
    verdicts = ("| holds", "| does not hold", "| not resolved")
    assert sum(text.count(v) for v in verdicts) == 5


def test_the_captions_state_the_experiments_budgets():
    assert script.EPOCHS == {False: unc.QUICK.n_epochs, True: unc.FULL.n_epochs}
    assert script.ARCHITECTURE == "-".join(map(str, (784, *unc.QUICK.hidden, 10)))
    assert unc.FULL.hidden == unc.QUICK.hidden
    assert script.MAX_ENTROPY == unc.MAX_ENTROPY


def test_without_torch_the_section_is_skipped(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    section = script.run(tmp_path, progress=False)
    assert section.figures == [] and "Skipped" in section.markdown and "sgsim[torch]" in section.markdown
    assert list(tmp_path.iterdir()) == []
