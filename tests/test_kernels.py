"""The compiled kernels, deterministically: exact identities and agreement with the NumPy
reference (tests/reference.py) given the same injected standard normals."""

import numpy as np
import pytest
import reference as R

import sgsim
from sgsim import targets
from sgsim.sampling import prepare, run_chain

P = np.array([[2.0, 0.5], [0.5, 1.0]])
B = np.array([0.3, -0.2])
V_FULL = np.array([[0.5, 0.2], [0.2, 0.3]])  # non-diagonal: the kernels rotate into its eigenbasis

TARGETS = {
    "linear_rotated_V": targets.linear_gaussian(P, B, V_FULL),
    "linear_diagonal_V": targets.linear_gaussian(P, B, np.diag([0.4, 0.1])),
    "linear_no_noise": targets.linear_gaussian(P, B),
    # step sizes above 2 * 0.03 are locally unstable on mixture_25 and amplify rounding by 2 per step
    "mixture_25": targets.mixture_25().with_gradient_noise(1.0),
    "exponential_mixture": targets.exponential_mixture(),
}

STEP = {"linear": 0.2, "mixture_25": 0.03, "exponential_mixture": 0.05}

INIT = {"linear": [1.0, 2.0], "mixture_25": [0.9, -3.1], "exponential_mixture": [0.3]}


def reference_grad(target):
    if target.mode_centres is not None:
        return lambda x: R.mixture_grad_u(x, target.mode_centres, target.extras["variance"], target.extras["weights"])
    if "rates" in target.extras:
        return lambda x: R.exp_mixture_grad_u(x, target.extras["rates"], target.extras["weights"])
    return lambda x: R.linear_gaussian_grad_u(x, target.extras["precision"], target.extras["shift"])


def options(name, method, gamma_hat=0.0):
    alpha = STEP[name.split("_")[0] if name.startswith("linear") else name]
    opts = {}
    if method.endswith("hmc"):
        # alpha ~ epsilon^2 in SGHMC: smaller steps for the same resolution
        alpha = alpha / 4
        opts.update(friction=0.2, gamma_hat=gamma_hat)
    if method.startswith("c"):
        opts.update(n_cycles=4, explore_fraction=0.3)
    return dict(step_size=alpha, **opts)


def run_both(name, method, n_steps=400, correction=False, gamma_hat=0.0, v0=None, seed=2):
    """Run the compiled kernel and the reference on the same normals; return both paths."""
    target = TARGETS[name]
    d = target.dim
    theta0 = np.array(INIT[name.split("_")[0] if name.startswith("linear") else name])
    v0 = np.zeros(d) if v0 is None else np.asarray(v0, float)
    run, steps = prepare(target, method, n_steps, noise_correction=correction, **options(name, method, gamma_hat))
    xi = np.random.default_rng(seed).standard_normal((n_steps, 1, d))
    hmc = "velocity" in run.method.state_names
    state = (theta0.copy(), v0.copy()) if hmc else (theta0.copy(),)
    out = np.full((run.n_draws, d), np.nan)
    assert run_chain(run, state, None, out, injected=xi[:, 0]) == -1
    s = run.schedule
    if hmc:
        path, vpath = R.sghmc(
            reference_grad(target), theta0[None], v0[None], s.step_size, s.temperature, target.grad_noise_cov, xi,
            run.options["friction"], run.options["gamma_hat"], correction,
        )  # fmt: skip
        return out, state, path[steps, 0], (path[-1, 0], vpath[-1, 0])
    path = R.sgld(
        reference_grad(target), theta0[None], s.step_size, s.temperature, target.grad_noise_cov, xi, correction
    )
    return out, state, path[steps, 0], (path[-1, 0],)


METHODS = ["sgld", "sghmc", "csgld", "csghmc"]
CASES = [(name, method, False, 0.0) for name in TARGETS for method in METHODS]
CASES += [
    (name, method, True, 0.0) for name in ("linear_rotated_V", "linear_diagonal_V", "mixture_25") for method in METHODS
]
CASES += [
    (name, method, False, 0.1) for name in ("linear_rotated_V", "linear_no_noise") for method in ("sghmc", "csghmc")
]


@pytest.mark.parametrize("name, method, correction, gamma_hat", CASES)
def test_kernel_matches_reference_given_the_same_noise(name, method, correction, gamma_hat):
    out, state, ref, ref_final = run_both(name, method, correction=correction, gamma_hat=gamma_hat)
    scale = max(1.0, np.max(np.abs(ref)))
    assert np.max(np.abs(out - ref)) < 1e-12 * scale
    for got, want in zip(state, ref_final, strict=True):
        assert np.max(np.abs(got - want)) < 1e-12 * scale


def test_sghmc_with_initial_velocity_matches_reference():
    out, state, ref, ref_final = run_both("linear_rotated_V", "csghmc", v0=[0.3, -0.1])
    assert np.max(np.abs(out - ref)) < 1e-12
    assert np.max(np.abs(state[1] - ref_final[1])) < 1e-12


def test_reference_check_detects_a_wrong_noise_scale():
    # negative control for the comparison itself: the same normals scaled by sqrt(2) differ
    out, _, _, _ = run_both("linear_rotated_V", "csgld")
    target = TARGETS["linear_rotated_V"]
    run, steps = prepare(target, "csgld", 400, **options("linear_rotated_V", "csgld"))
    xi = np.random.default_rng(2).standard_normal((400, 1, 2))
    s = run.schedule
    wrong = R.sgld(reference_grad(target), np.array([[1.0, 2.0]]), s.step_size, s.temperature / 2, V_FULL, xi)
    assert np.max(np.abs(out - wrong[steps, 0])) > 1e-3


def test_blocks_of_steps_give_the_same_bits_as_one_call():
    target = TARGETS["linear_rotated_V"]
    run, _ = prepare(target, "csghmc", 300, **options("linear_rotated_V", "csghmc"))
    outs, states = [], []
    for bounds in ([0, 300], [0, 7, 150, 151, 300]):
        state = (np.array([1.0, 2.0]), np.zeros(2))
        out = np.full((run.n_draws, 2), np.nan)
        gen = np.random.default_rng(5)
        for k0, k1 in zip(bounds[:-1], bounds[1:], strict=True):
            assert run_chain(run, state, gen, out, k0, k1) == -1
        outs.append(out)
        states.append(state)
    assert np.array_equal(outs[0], outs[1])
    assert all(np.array_equal(a, b) for a, b in zip(states[0], states[1], strict=True))


def _gradient_of(target, stream):
    """The gradient a run's chains take: with Philox streams they run side by side with the target's
    block gradient, with PCG64 streams one by one with its per-point gradient.
    """

    def gradient(theta):
        if stream == "pcg64":
            return target.gradient(theta)
        out = np.empty((2, 1))
        target.grad_u_block(theta.reshape(2, 1).copy(), target.params, out, np.empty((8, 256)))
        return out[:, 0]

    return gradient


@pytest.mark.parametrize("stream", ["philox", "pcg64"])
def test_sgld_at_zero_temperature_is_exactly_gradient_descent(stream):
    target = targets.mixture_25()
    result = sgsim.sample(target, "csgld", 300, seed=1, init=[0.7, -1.3], step_size=0.05, n_cycles=3, temperature=0.0,
                          stream=stream)  # fmt: skip
    gradient = _gradient_of(target, stream)
    theta, expected = np.array([0.7, -1.3]), []
    for alpha in result.sample_stats["step_size"].values[0]:
        theta = theta - alpha * gradient(theta)
        expected.append(theta)
    assert np.array_equal(result.posterior["theta"].values[0], np.array(expected))  # bit for bit


@pytest.mark.parametrize("stream", ["philox", "pcg64"])
def test_sghmc_at_zero_temperature_is_exactly_momentum_sgd(stream):
    target, eta = targets.mixture_25(), 0.3
    result = sgsim.sample(
        target, "csghmc", 300, seed=1, init=[0.7, -1.3], init_velocity=[0.01, 0.02], step_size=0.01,
        n_cycles=3, temperature=0.0, friction=eta, stream=stream,
    )  # fmt: skip
    gradient = _gradient_of(target, stream)
    theta, v, expected = np.array([0.7, -1.3]), np.array([0.01, 0.02]), []
    for alpha in result.sample_stats["step_size"].values[0]:
        theta = theta + v
        v = (1.0 - eta) * v - alpha * gradient(theta)
        expected.append(theta)
    assert np.array_equal(result.posterior["theta"].values[0], np.array(expected))
    assert np.array_equal(result.constant_data["final_velocity"].values[0], v)


@pytest.mark.parametrize("method", ["csgld", "csghmc"])
def test_exploration_stage_is_noise_free_descent_even_at_temperature_one(method):
    target = TARGETS["linear_no_noise"]
    run, _ = prepare(target, method, 400, **options("linear_no_noise", method))
    n_explore = int(np.count_nonzero(run.schedule.stage[:100] == 0))
    assert n_explore == 30 and run.schedule.temperature[n_explore] == 1.0
    hmc = method == "csghmc"
    state = (np.array([1.0, 2.0]), np.zeros(2)) if hmc else (np.array([1.0, 2.0]),)
    assert run_chain(run, state, np.random.default_rng(0), np.empty((run.n_draws, 2)), 0, n_explore) == -1
    theta, v = np.array([1.0, 2.0]), np.zeros(2)
    for alpha in run.schedule.step_size[:n_explore]:
        if hmc:
            theta = theta + v
            v = (1.0 - 0.2) * v - alpha * target.gradient(theta)
        else:
            theta = theta - alpha * target.gradient(theta)
    assert np.array_equal(state[0], theta)


@pytest.mark.parametrize("method", METHODS)
def test_zero_gradient_and_zero_temperature_leave_theta_unchanged(method):
    target = targets.linear_gaussian(np.eye(2), shift=[1.0, 2.0])  # grad U(1, 2) = (0, 0) exactly
    cyc = {"n_cycles": 2} if method.startswith("c") else {}
    result = sgsim.sample(target, method, 50, seed=0, init=[1.0, 2.0], step_size=0.1, temperature=0.0, **cyc)
    assert np.all(result.posterior["theta"].values == np.array([1.0, 2.0]))
