"""Nested R-hat (sgsim.diagnostics.nested_rhat).

Against a NumPy transcription of the published definition (Margossian et al. 2024,
Definition 2.2), written here with explicit loops, to 1e-12, for every grouping (an int, labels,
the cycles of a cyclical run); near 1 for mixed chains and above the threshold 1.01 for
chains stuck in different modes (the negative control); bad input.
"""

import arviz as az
import numpy as np
import pytest

from sgsim import diagnostics
from sgsim._validate import ParameterError


def reference(x):
    """nR-hat of x (K, M, N) for one coordinate, term by term as printed."""
    k_, m_, n_ = x.shape
    chain_mean = np.array([[sum(x[k, m, n] for n in range(n_)) / n_ for m in range(m_)] for k in range(k_)])
    super_mean = [sum(chain_mean[k]) / m_ for k in range(k_)]
    overall = sum(super_mean) / k_
    b_nu = sum((super_mean[k] - overall) ** 2 for k in range(k_)) / (k_ - 1)
    w_nu = 0.0
    for k in range(k_):
        b_k = 0.0 if m_ == 1 else sum((chain_mean[k, m] - super_mean[k]) ** 2 for m in range(m_)) / (m_ - 1)
        w_k = (
            0.0
            if n_ == 1
            else sum(sum((x[k, m, n] - chain_mean[k, m]) ** 2 for n in range(n_)) / (n_ - 1) for m in range(m_)) / m_
        )
        w_nu += (b_k + w_k) / k_
    return np.sqrt(1 + b_nu / w_nu)


@pytest.mark.parametrize("k, m, n", [(4, 3, 10), (3, 1, 20), (5, 6, 1), (2, 2, 2)])
def test_equals_the_published_definition(k, m, n):
    rng = np.random.default_rng(k * 100 + m * 10 + n)
    # superchains with different means, so that the between term matters
    nested = rng.standard_normal((k, m, n, 2)) + 0.3 * rng.standard_normal((k, 1, 1, 2))
    want = np.array([reference(nested[..., i]) for i in range(2)])
    chains = nested.reshape(k * m, n, 2)  # superchain by superchain
    np.testing.assert_allclose(diagnostics.nested_rhat(chains, k), want, rtol=1e-12)
    # the same grouping by labels, with the chains shuffled
    order = rng.permutation(k * m)
    labels = np.repeat([f"s{j}" for j in range(k)], m)[order]
    np.testing.assert_allclose(diagnostics.nested_rhat(chains[order], labels), want, rtol=1e-12)


def cyclical_result(x, cycle, diverged=None):
    c, n = x.shape[:2]
    stats = {"cycle": np.tile(cycle, (c, 1))}
    if diverged is not None:
        stats["diverged"] = diverged
    return az.from_dict(posterior={"theta": x}, sample_stats=stats, dims={"theta": ["dim"]})


def test_cycles_as_superchains():
    # 3 chains, a warm-up of 5 draws (cycle -1) then 4 cycles of 12 kept draws: superchain m is
    # cycle m, its chains are the 3 chains' draws in cycle m
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 53, 2))
    cycle = np.concatenate([np.full(5, -1), np.repeat(np.arange(4), 12)])
    nested = np.stack([x[:, cycle == j] for j in range(4)])  # (cycle, chain, draw, d)
    want = np.array([reference(nested[..., i]) for i in range(2)])
    np.testing.assert_allclose(diagnostics.nested_rhat(cyclical_result(x, cycle), "cycle"), want, rtol=1e-12)
    # a diverged chain is left out of every cycle
    diverged = np.zeros((3, 53), bool)
    diverged[2, 40:] = True
    y = x.copy()
    y[2, 40:] = np.nan
    with pytest.warns(RuntimeWarning, match=r"chains \[2\] diverged"):
        got = diagnostics.nested_rhat(cyclical_result(y, cycle, diverged), "cycle")
    want = np.array([reference(nested[:, :2, :, i]) for i in range(2)])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # unequal cycles are refused
    with pytest.raises(ParameterError, match="same number of kept draws") as info:
        diagnostics.nested_rhat(cyclical_result(x, np.repeat(np.arange(4), [14, 13, 13, 13])), "cycle")
    assert info.value.parameter == "superchains"


def test_near_one_when_mixed_and_above_the_threshold_when_stuck():
    # Mixed: 8 superchains of 16 iid chains of 50 draws; at stationarity nR^2 - 1 is about
    # 1 / (M N_eff) = 1 / 800, so nR is about 1.0006, well below 1 + delta = 1.01.
    # Stuck (negative control): the same chains, each superchain in one of the modes -2 and +2
    # of a two-mode law; B_nu is about 4 and W_nu about 1, so nR is about sqrt(5) > 1.01.
    rng = np.random.default_rng(11)
    k, m, n = 8, 16, 50
    x = rng.standard_normal((k * m, n, 1))
    mixed = diagnostics.nested_rhat(x, k)
    assert abs(mixed[0] - 1.0) < 0.003 and mixed[0] < diagnostics.NESTED_RHAT_THRESHOLD
    modes = np.repeat(np.tile([-2.0, 2.0], k // 2), m)[:, None, None]
    stuck = diagnostics.nested_rhat(x + modes, k)
    assert stuck[0] > 2.0 > diagnostics.NESTED_RHAT_THRESHOLD
    # chains that mixed between the modes (each chain's draws from both) pass again
    both = x + np.where(rng.random((k * m, n, 1)) < 0.5, -2.0, 2.0)
    assert diagnostics.nested_rhat(both, k)[0] < diagnostics.NESTED_RHAT_THRESHOLD


@pytest.mark.parametrize(
    "draws, superchains, parameter, match",
    [
        (np.zeros((4, 10, 1)), 1, "superchains", r">= 2"),
        (np.zeros((4, 10, 1)), 3, "superchains", "do not split"),
        (np.zeros((4, 10, 1)), [0, 0, 1], "superchains", "one label per chain"),
        (np.zeros((4, 10, 1)), [0, 0, 0, 1], "superchains", "same number of chains"),
        (np.zeros((4, 10, 1)), [0, 0, 0, 0], "superchains", "at least 2 superchains"),
        (np.zeros((4, 1, 1)), 4, "superchains", "no within-superchain variance"),
        (np.zeros((4, 10, 1)), "cycles", "superchains", "'cycle'"),
        (np.zeros((4, 10, 1)), "cycle", "superchains", "cycles"),
        (np.zeros((4, 0, 1)), 2, "draws", "at least one draw"),
        (np.zeros((4, 10, 2, 1)), 2, "draws", r"\(chain, draw, d\)"),
    ],
)
def test_bad_input_names_its_parameter(draws, superchains, parameter, match):
    with pytest.raises(ParameterError, match=match) as info:
        diagnostics.nested_rhat(draws, superchains)
    assert info.value.parameter == parameter
