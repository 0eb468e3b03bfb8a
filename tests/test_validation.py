"""Input validation of ``sgsim.sample`` (each error names the parameter) and divergence handling."""

import re
import warnings

import numpy as np
import pytest

import sgsim
from sgsim import schedules, targets

LG = targets.linear_gaussian([[2.0, 0.5], [0.5, 1.0]], [0.3, -0.2])
NOISY = LG.with_gradient_noise(5.0)


DROP = object()  # marks a default argument left out


def sample(target=LG, method="sgld", n_steps=20, **kwargs):
    kwargs = {"step_size": 0.1, "seed": 0, **kwargs}
    return sgsim.sample(target, method, n_steps, **{k: v for k, v in kwargs.items() if v is not DROP})


BAD = [
    # (description, call kwargs, exception, match)
    ("step_size zero", dict(step_size=0.0), ValueError, "step_size"),
    ("step_size negative", dict(step_size=-0.1), ValueError, "step_size"),
    ("step_size missing", dict(method="csgld", n_cycles=2, step_size=DROP), TypeError, "step_size"),
    ("step_size not a number", dict(step_size="0.1"), TypeError, "step_size"),
    ("explore_fraction 1", dict(method="csgld", n_cycles=2, explore_fraction=1.0), ValueError, "explore_fraction"),
    ("explore_fraction < 0", dict(method="csgld", n_cycles=2, explore_fraction=-0.1), ValueError, "explore_fraction"),
    ("n_cycles > n_steps", dict(method="csgld", n_cycles=21), ValueError, "n_cycles"),
    ("init shape", dict(init=[0.0, 0.0, 0.0]), ValueError, "init"),
    ("init per-chain shape", dict(init=np.zeros((3, 2)), n_chains=2), ValueError, "init"),
    ("init non-finite", dict(init=[np.nan, 0.0]), ValueError, "init"),
    ("init_velocity shape", dict(method="sghmc", init_velocity=[0.0]), ValueError, "init_velocity"),
    ("init_velocity for sgld", dict(init_velocity=[0.0, 0.0]), TypeError, "init_velocity"),
    ("n_chains 0", dict(n_chains=0), ValueError, "n_chains"),
    ("n_chains float", dict(n_chains=2.0), TypeError, "n_chains"),
    ("unknown method", dict(method="sgnht_typo"), ValueError, "unknown method 'sgnht_typo'"),
    ("unknown target", dict(target="banana"), ValueError, "unknown target 'banana'"),
    ("unknown option", dict(stepsize=0.1), TypeError, "unknown option.*stepsize"),
    ("cyclical option for sgld", dict(n_cycles=2), TypeError, "unknown option.*n_cycles"),
    ("friction for sgld", dict(friction=0.1), TypeError, "unknown option.*friction"),
    ("not a Target", dict(target=np.eye(2)), TypeError, "target must be"),
    ("friction 0", dict(method="sghmc", friction=0.0), ValueError, "friction"),
    ("friction > 1", dict(method="sghmc", friction=1.5), ValueError, "friction"),
    ("gamma_hat > friction", dict(method="sghmc", friction=0.1, gamma_hat=0.2), ValueError, "gamma_hat"),
    ("gamma_hat < 0", dict(method="csghmc", n_cycles=2, gamma_hat=-0.1), ValueError, "gamma_hat"),
    ("temperature < 0", dict(temperature=-1.0), ValueError, "temperature"),
    ("burn_in = n_steps", dict(burn_in=20), ValueError, "burn_in"),
    ("burn_in < 0", dict(burn_in=-1), ValueError, "burn_in"),
    ("thin 0", dict(thin=0), ValueError, "thin"),
    ("seed negative", dict(seed=-1), ValueError, "seed"),
    ("seed float", dict(seed=1.5), TypeError, "seed"),
    ("seed string", dict(seed="1"), TypeError, "seed"),
    ("on_divergence", dict(on_divergence="ignore"), ValueError, "on_divergence"),
    ("n_threads 0", dict(n_threads=0), ValueError, "n_threads"),
    ("no draw kept", dict(method="csgld", n_cycles=2, explore_fraction=0.95), ValueError, "no draw"),
    ("n_steps missing", dict(n_steps=None), TypeError, "n_steps"),
    ("schedule type", dict(schedule=np.ones(20), step_size=DROP, n_steps=None), TypeError, "schedule"),
    ("schedule and step_size", dict(schedule=schedules.constant(0.1, 20)), TypeError, "not both"),
    ("schedule length", dict(schedule=schedules.constant(0.1, 30), step_size=DROP), ValueError, "n_steps"),
]


@pytest.mark.parametrize("kwargs, exc, match", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_named(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        sample(**kwargs)


@pytest.mark.parametrize(
    "method, kwargs",
    [("sgld", dict(step_size=0.5)), ("csgld", dict(step_size=0.5, n_cycles=2)), ("sghmc", dict(step_size=0.1))],
)
def test_infeasible_noise_correction_is_refused(method, kwargs):
    # SGLD needs alpha V <= 2 T (0.5 * 5 > 2); SGHMC alpha V <= 2 eta T (0.1 * 5 > 0.2)
    with pytest.raises(ValueError, match="noise_correction .* at step 1"):
        sample(NOISY, method, noise_correction=True, **kwargs)


def test_feasible_noise_correction_is_accepted():
    sample(NOISY, "sgld", noise_correction=True, step_size=0.4)  # 0.4 * 5 = 2 T exactly
    sample(NOISY, "sghmc", noise_correction=True, step_size=0.04, friction=0.1)  # 0.04 * 5 = 2 eta T


def test_noise_correction_with_gamma_hat_is_refused():
    # The correction already sets the total noise to 2 eta alpha T (sghmc.py docstring: "It
    # cannot be combined with a non-zero gamma_hat"); sgsim.theory refuses the combination.
    with pytest.raises(ValueError, match="gamma_hat"):
        sample(NOISY, "sghmc", noise_correction=True, step_size=0.01, friction=0.5, gamma_hat=0.1)


def test_friction_one_and_gamma_hat_equal_to_friction_are_allowed():
    sample(method="sghmc", friction=1.0, gamma_hat=1.0)


def test_many_chains_with_few_draws_raise_no_warning():
    # sample passes (chain, draw, dim) arrays; ArviZ's "More chains than draws" guess is spurious
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = sample(n_chains=5, n_steps=3)
    assert result.posterior["theta"].shape == (5, 3, 2)


# ----------------------------------------------------------------------------- divergence

SCALAR = targets.linear_gaussian([[1.0]])
# the tests below run a step beyond the stability limit on purpose (2 / lambda_max = 2 for SGLD
# here, 2 (2 - eta) = 3.8 for SGHMC), to see the divergence check catch it: they pass
# step_check="ignore", since a step beyond the limit on every step is otherwise refused before any
# work (tests/test_stability.py tests that refusal)
UNSTABLE = {"step_check": "ignore"}
# they pin the non-finite check, exactly where a state overflows: they turn the divergence bound
# off as well (tests/test_divergence.py tests the bound)
NO_BOUND = {"divergence_bound": None, **UNSTABLE}


def first_overflow_step(x0, alpha):
    """1-based step at which plain gradient descent on U = x^2 / 2 leaves the floats."""
    x, k = x0, 0
    while np.isfinite(x):
        x, k = x - alpha * x, k + 1
    return k


def test_divergence_raises_naming_chain_and_step():
    # alpha = 2.5 > 2 / lambda_max = 2: |1 - alpha| = 1.5 per step; from 1e300 it overflows at step 46
    step = first_overflow_step(1e300, 2.5)
    with pytest.raises(sgsim.DivergenceError, match=f"chain 0 at step {step}") as info:
        sgsim.sample(
            SCALAR,
            "sgld",
            100,
            n_chains=2,
            seed=0,
            step_size=2.5,
            temperature=0.0,
            init=[[1e300], [1e-300]],
            **NO_BOUND,
        )
    assert info.value.chains == {0: step}
    assert isinstance(info.value, FloatingPointError)


def test_divergence_of_every_chain_is_reported():
    with pytest.raises(sgsim.DivergenceError) as info:
        sgsim.sample(SCALAR, "sghmc", 3000, n_chains=3, seed=0, step_size=5.0, friction=0.1, **UNSTABLE)
    assert sorted(info.value.chains) == [0, 1, 2]
    assert all(re.search(f"chain {c} at step {k}", str(info.value)) for c, k in info.value.chains.items())


def test_marked_divergence_keeps_the_other_chains():
    # growth factor 1.5 per step: chains from O(1) stay finite for 100 steps, the one from 1e305 does not
    kwargs = dict(n_chains=3, seed=3, step_size=2.5, on_divergence="mark", **NO_BOUND)
    with pytest.warns(RuntimeWarning, match=r"chain 1 at step \d+"):
        marked = sgsim.sample(SCALAR, "sgld", 100, init=[[0.1], [1e305], [0.2]], **kwargs)
    clean = sgsim.sample(SCALAR, "sgld", 100, init=[[0.1], [0.0], [0.2]], **kwargs)
    diverged = marked.sample_stats["diverged"].values
    theta = marked.posterior["theta"].values[..., 0]
    assert not diverged[[0, 2]].any() and diverged[1].any()
    first = int(np.argmax(diverged[1]))
    assert np.all(np.isfinite(theta[1, :first])) and np.all(np.isnan(theta[1, first:]))
    assert np.all(diverged[1, first:])
    assert first + 1 == marked.sample_stats["step"].values[1, first]
    assert np.array_equal(theta[[0, 2]], clean.posterior["theta"].values[[0, 2], :, 0])
    assert not clean.sample_stats["diverged"].values.any()


def test_marked_step_agrees_with_the_raised_one():
    init = [[0.1], [1e305], [0.2]]
    with pytest.raises(sgsim.DivergenceError) as info:
        sgsim.sample(SCALAR, "sgld", 100, n_chains=3, seed=3, step_size=2.5, init=init, **NO_BOUND)
    with pytest.warns(RuntimeWarning):
        marked = sgsim.sample(
            SCALAR, "sgld", 100, n_chains=3, seed=3, step_size=2.5, init=init, on_divergence="mark", **NO_BOUND
        )
    assert info.value.chains == {1: int(np.argmax(marked.sample_stats["diverged"].values[1])) + 1}
