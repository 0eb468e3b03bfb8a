"""The Torch backend (sgsim.torch): the compiled kernels' steps given the same normals, the exact
law of many chains, seeds, input checks, the num_data convention and the schedule driver.

Skipped as a whole where PyTorch (the ``torch`` extra) is not installed.
"""

import doctest
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from stats import check_gaussian_law

import sgsim
from sgsim import philox, schedules, targets, theory
from sgsim._validate import ParameterError, ParameterTypeError

torch = pytest.importorskip("torch")

import sgsim.torch as st  # noqa: E402
from sgsim.torch import SGHMC, SGLD, ScheduleDriver, make_generator  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
P = np.array([[2.0, 0.5], [0.5, 1.0]])
B = np.array([0.3, -0.2])
TARGET = targets.linear_gaussian(P, B)
P_T, B_T = torch.tensor(P), torch.tensor(B)
THETA0 = [1.0, 2.0]


def potential(theta):
    """``U(theta) = theta^T P theta / 2 - b^T theta``, summed over the rows of ``theta``."""
    return 0.5 * torch.einsum("...i,ij,...j->", theta, P_T, theta) - (theta @ B_T).sum()


def backward(opt, theta):
    opt.zero_grad()
    potential(theta).backward()


# --------------------------------------------------------------------------- the import without the extra


def test_import_without_torch_names_the_extra():
    # torch made unimportable in a fresh interpreter: sgsim imports, sgsim.torch says what to install
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import sgsim\n"
        "try:\n    import sgsim.torch\nexcept ImportError as e:\n    print('MESSAGE', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert "MESSAGE sgsim.torch needs PyTorch" in out.stdout
    assert 'pip install "sgsim[torch]"' in out.stdout


# --------------------------------------------------------------------------- the compiled kernels' steps


def spine_schedule(n_steps=120):
    # the cyclical schedule with every step collected, so that each iterate is compared
    c = schedules.cyclical(0.2, n_steps, n_cycles=3, explore_fraction=0.3)
    return schedules.Schedule(c.step_size, c.temperature, c.stage, c.cycle)


def spine_normals(schedule, seed, d=2):
    """The standard normals chain 0 of ``sgsim.sample(seed=seed)`` uses (its Philox stream): numbers
    ``k d .. k d + d - 1`` at step ``k`` with T > 0, none at T = 0.
    """
    z = philox.normals(seed, 0, 0, d * schedule.n_steps).reshape(-1, d)
    return [z[k] if t > 0 else None for k, t in enumerate(schedule.temperature)]


def torch_path(opt, theta, schedule, normals, scale=1.0):
    """Every iterate of ``opt`` driven by ``schedule`` with the given normals (times ``scale``)."""
    driver, path = ScheduleDriver(opt, schedule), []
    for xi in normals:
        backward(opt, theta)
        driver.step(noise=None if xi is None else [torch.tensor(scale * xi)])
        path.append(theta.detach().clone().numpy())
    return np.array(path)


def max_error(got, want):
    return np.max(np.abs(got - want)) / max(1.0, np.max(np.abs(want)))


def run_sgld(seed=4, scale=1.0):
    s = spine_schedule()
    spine = sgsim.sample(TARGET, "sgld", schedule=s, seed=seed, init=THETA0, storage="draws", thin=1)
    theta = torch.tensor(THETA0, dtype=torch.float64, requires_grad=True)
    path = torch_path(SGLD([theta], lr=1.0, seed=0), theta, s, spine_normals(s, seed), scale)
    return path, spine.posterior["theta"].values[0]


def run_sghmc(seed=4, friction=0.2, gamma_hat=0.05):
    s = spine_schedule()
    spine = sgsim.sample(
        TARGET, "sghmc", schedule=s, seed=seed, init=THETA0, friction=friction, gamma_hat=gamma_hat, thin=1
    )
    theta = torch.tensor(THETA0, dtype=torch.float64, requires_grad=True)
    opt = SGHMC([theta], lr=1.0, friction=friction, gamma_hat=gamma_hat, seed=0)
    path = torch_path(opt, theta, s, spine_normals(s, seed))
    return path, opt.state[theta]["velocity"].numpy(), spine


def test_sgld_takes_the_compiled_kernels_steps():
    path, spine = run_sgld()
    assert max_error(path, spine) < 1e-12


def test_sghmc_takes_the_compiled_kernels_steps_in_their_order():
    # after Torch step k the parameters hold theta_{k+1} = theta_k + v_k (where the next gradient is
    # taken), so they are the kernel's iterates shifted by one, and theta_1 = theta_0 (v_0 = 0)
    path, velocity, spine = run_sghmc()
    theta = spine.posterior["theta"].values[0]
    assert np.array_equal(theta[0], THETA0)
    assert max_error(path[:-1], theta[1:]) < 1e-12
    final_theta, final_v = (spine.constant_data[f"final_{n}"].values[0] for n in ("theta", "velocity"))
    assert max_error(velocity, final_v) < 1e-12
    assert max_error(path[-1], final_theta + final_v) < 1e-12


@pytest.mark.parametrize("name", sorted(st.MIRRORS))
def test_every_declared_mirror_takes_its_methods_steps(name):
    # the registry of mirrors is the one list: a mirror declared in sgsim.torch is checked here
    assert name in sgsim.METHODS
    result = st.check_mirror(name)
    assert result.status == "passed", result.detail
    # negative control: the same normals scaled by 1.05
    assert st.check_mirror(name, noise_scale=1.05).status == "failed"


def test_the_step_comparison_rejects_a_wrong_noise_scale_and_a_wrong_order():
    # negative controls of the comparison itself: noise sqrt(lr T) instead of sqrt(2 lr T) ...
    path, spine = run_sgld(scale=np.sqrt(0.5))
    assert max_error(path, spine) > 1e-3
    # ... and SGHMC with the gradient taken before the position moves (simultaneous update)
    s, seed, eta, gamma_hat = spine_schedule(), 4, 0.2, 0.05
    _, _, spine = run_sghmc(seed, eta, gamma_hat)
    theta = torch.tensor(THETA0, dtype=torch.float64, requires_grad=True)
    v, path = torch.zeros(2, dtype=torch.float64), []
    for a, t, xi in zip(s.step_size, s.temperature, spine_normals(s, seed), strict=True):
        theta.grad = None
        potential(theta).backward()
        with torch.no_grad():
            z = 0.0 if xi is None else np.sqrt(2 * (eta - gamma_hat) * a * t) * torch.tensor(xi)
            v_new = (1 - eta) * v - a * theta.grad + z
            theta += v  # the old velocity: the gradient was taken before the move
            v = v_new
        path.append(theta.detach().clone().numpy())
    assert max_error(np.array(path), spine.posterior["theta"].values[0]) > 1e-3


def test_zero_temperature_is_sgd_and_momentum_sgd():
    torch.manual_seed(0)
    start = torch.randn(7, 2, dtype=torch.float64)
    a, b = start.clone().requires_grad_(), start.clone().requires_grad_()
    ours, sgd = SGLD([a], lr=0.1, temperature=0.0, seed=1), torch.optim.SGD([b], lr=0.1, foreach=True)
    state = ours.generator.get_state()
    for _ in range(50):
        for opt, x in ((ours, a), (sgd, b)):
            backward(opt, x)
            opt.step()
    assert torch.equal(a, b)  # bit for bit
    assert torch.equal(ours.generator.get_state(), state)  # nothing drawn at T = 0
    eta = 0.3
    a, b = start.clone().requires_grad_(), start.clone().requires_grad_()
    ours = SGHMC([a], lr=0.05, friction=eta, temperature=0.0, seed=1)
    sgd = torch.optim.SGD([b], lr=0.05, momentum=1 - eta, foreach=True)
    for _ in range(50):
        for opt, x in ((ours, a), (sgd, b)):
            backward(opt, x)
            opt.step()
    # heavy ball: v_k = -lr * buf_k, so the two agree to rounding
    assert torch.allclose(a, b, rtol=1e-12, atol=1e-14)
    assert torch.equal(ours.generator.get_state(), state)


# --------------------------------------------------------------------------- the exact law of many chains

R = 4000  # independent chains: the rows of one (R, d) parameter, the loss summed over them


def chains(opt_cls, n_steps, **kwargs):
    theta = torch.zeros(R, 2, dtype=torch.float64, requires_grad=True)
    opt = opt_cls([theta], seed=11, **kwargs)
    for _ in range(n_steps):
        backward(opt, theta)
        opt.step()
    return theta.detach().numpy(), opt


def check_sgld(temperature):
    alpha, k = 0.1, 200
    x, _ = chains(SGLD, k, lr=alpha, temperature=temperature)
    # the exact law of theta_K from theta_0 = 0 at T = 1 (stationary to 1e-7 at K = 200); the SEs
    # are those of check_gaussian_law: sqrt(S_ii / R), S_ii sqrt(2 / (R - 1)), and the sample
    # covariance's sqrt((S_ij^2 + S_ii S_jj) / R), for R iid Gaussian replicas
    law = theory.sgld_law(P, B, alpha, n_steps=k)
    check_gaussian_law(x, law.mean[-1], law.cov[-1], what=f"torch SGLD at T={temperature}")


def check_sghmc(temperature):
    alpha, eta, k = 0.05, 0.3, 400
    x, opt = chains(SGHMC, k, lr=alpha, friction=eta, temperature=temperature)
    v = opt.state[next(iter(opt.state))]["velocity"].numpy()
    # after K Torch steps the state is (theta_{K+1}, v_K) = M (theta_K, v_K) with M = [[I, I], [0, I]]:
    # the exact law of step K mapped by M; SEs as in check_sgld, for the 4 coordinates
    law = theory.sghmc_law(P, B, alpha, eta, n_steps=k)
    m = np.block([[np.eye(2), np.eye(2)], [np.zeros((2, 2)), np.eye(2)]])
    mean, cov = m @ law.mean[-1], m @ law.cov[-1] @ m.T
    check_gaussian_law(np.hstack([x, v]), mean, cov, what=f"torch SGHMC at T={temperature}")


def test_sgld_chains_follow_the_exact_law():
    check_sgld(1.0)


def test_sghmc_chains_follow_the_exact_law():
    check_sghmc(1.0)


@pytest.mark.parametrize("check", [check_sgld, check_sghmc])
@pytest.mark.parametrize("temperature", [0.5, 2.0])  # injected variance lr (not 2 lr), and twice 2 lr
def test_the_law_check_rejects_a_wrong_noise_scale(check, temperature):
    with pytest.raises(AssertionError, match="variance"):
        check(temperature)


# --------------------------------------------------------------------------- seeds and generators


def noisy_run(opt_cls=SGLD, n_steps=20, **kwargs):
    theta = torch.linspace(-1, 1, 12, dtype=torch.float32).reshape(3, 4).requires_grad_()
    bias = torch.zeros(5, dtype=torch.float32, requires_grad=True)
    opt = opt_cls([theta, bias], lr=0.01, **kwargs)
    for _ in range(n_steps):
        opt.zero_grad()
        (theta.pow(2).sum() + bias.pow(2).sum()).backward()
        opt.step()
    return torch.cat([theta.detach().ravel(), bias.detach()]), opt


@pytest.mark.parametrize("opt_cls", [SGLD, SGHMC])
def test_same_seed_same_bits_and_different_seed_different_bits(opt_cls):
    a, opt = noisy_run(opt_cls, seed=7)
    b, _ = noisy_run(opt_cls, seed=7)
    c, _ = noisy_run(opt_cls, seed=8)
    assert opt.seed == 7
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_a_given_generator_and_a_fresh_seed():
    a, _ = noisy_run(seed=7)
    b, opt = noisy_run(generator=make_generator(7))  # the seed's generator, given
    assert torch.equal(a, b) and opt.seed is None
    c, _ = noisy_run(generator=torch.Generator().manual_seed(123))
    d, _ = noisy_run(generator=torch.Generator().manual_seed(123))
    assert torch.equal(c, d) and not torch.equal(a, c)
    # seed=None draws fresh entropy and records it: the run replays from it
    e, opt = noisy_run(seed=None)
    assert opt.seed is not None and opt.seed >= 0
    f, _ = noisy_run(seed=opt.seed)
    assert torch.equal(e, f)


def test_one_draw_per_step_laid_out_over_the_parameters():
    # the normals of a step are one torch.randn of the group's total size, split in parameter order
    _, opt = noisy_run(n_steps=0, seed=3, temperature=1.0)
    theta, bias = opt.param_groups[0]["params"]
    before = [theta.detach().clone(), bias.detach().clone()]
    for p in (theta, bias):
        p.grad = torch.zeros_like(p)
    opt.step()
    xi = torch.randn(17, generator=make_generator(3), dtype=torch.float32)
    sd = float(np.sqrt(2 * 0.01))
    assert torch.equal(theta.detach(), before[0].add(xi[:12].view(3, 4), alpha=sd))
    assert torch.equal(bias.detach(), before[1].add(xi[12:], alpha=sd))


def test_normals_follow_a_channels_last_parameters_memory_order():
    # a channels-last weight gets the buffer's normals in its own memory order (one dense stream)
    w = torch.zeros(2, 3, 4, 5).contiguous(memory_format=torch.channels_last).requires_grad_()
    opt = SGLD([w], lr=0.5, temperature=1.0, seed=3)
    w.grad = torch.zeros_like(w)
    opt.step()
    xi = torch.randn(w.numel(), generator=make_generator(3))
    assert w.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(w.detach(), xi.as_strided(w.shape, w.stride()))  # sd = sqrt(2 * 0.5 * 1) = 1


# --------------------------------------------------------------------------- bad input


def params():
    return [torch.zeros(3, requires_grad=True)]


BAD = [
    (SGLD, dict(lr=0.0), "lr"),
    (SGLD, dict(lr=-1.0), "lr"),
    (SGLD, dict(lr=float("nan")), "lr"),
    (SGLD, dict(lr="0.1"), "lr"),
    (SGLD, dict(lr=0.1, temperature=-0.1), "temperature"),
    (SGLD, dict(lr=0.1, num_data=0), "num_data"),
    (SGLD, dict(lr=0.1, num_data=2.5), "num_data"),
    (SGLD, dict(lr=0.1, seed=-1), "seed"),
    (SGLD, dict(lr=0.1, seed=1.5), "seed"),
    (SGLD, dict(lr=0.1, seed=1, generator=torch.Generator()), "seed"),
    (SGLD, dict(lr=0.1, generator=np.random.default_rng(0)), "generator"),
    (SGHMC, dict(lr=0.1, friction=0.0), "friction"),
    (SGHMC, dict(lr=0.1, friction=1.5), "friction"),
    (SGHMC, dict(lr=0.1, gamma_hat=-0.1), "gamma_hat"),
    (SGHMC, dict(lr=0.1, friction=0.1, gamma_hat=0.2), "gamma_hat"),
]


@pytest.mark.parametrize(("opt_cls", "kwargs", "name"), BAD)
def test_each_bad_argument_is_named(opt_cls, kwargs, name):
    with pytest.raises((ParameterError, ParameterTypeError)) as info:
        opt_cls(params(), **kwargs)
    assert info.value.parameter == name and name in str(info.value)


def test_bad_params_groups_and_noise_are_named():
    for bad in ([], iter([]), torch.zeros(3, requires_grad=True)):
        with pytest.raises((ParameterError, ParameterTypeError)) as info:
            SGLD(bad, lr=0.1)
        assert info.value.parameter == "params"
    with pytest.raises(ParameterError, match="temperature") as info:
        SGHMC([{"params": params(), "temperature": -1.0}], lr=0.1)
    opt = SGLD(params(), lr=0.1, seed=0)
    opt.param_groups[0]["lr"] = -0.5  # changed by hand: checked before the step does anything
    opt.param_groups[0]["params"][0].grad = torch.ones(3)
    with pytest.raises(ParameterError, match="lr"):
        opt.step()
    opt.param_groups[0]["lr"] = 0.5
    for noise, match in (([], "one tensor per parameter"), ([torch.zeros(4)], r"shape \(3,\)")):
        with pytest.raises(ParameterError, match=match) as info:
            opt.step(noise=noise)
        assert info.value.parameter == "noise"


def test_bad_driver_arguments_are_named():
    s = schedules.constant(0.1, 3)
    for args, name in (
        ((torch.optim.SGD(params(), lr=0.1), s), "optimizer"),
        ((SGLD(params(), lr=0.1, seed=0), "cyclical"), "schedule"),
    ):
        with pytest.raises(ParameterTypeError) as info:
            ScheduleDriver(*args)
        assert info.value.parameter == name
    with pytest.raises(ParameterError) as info:
        ScheduleDriver(SGLD(params(), lr=0.1, seed=0), s, start=4)
    assert info.value.parameter == "start"
    opt = SGLD(params(), lr=0.1, seed=0)
    driver = ScheduleDriver(opt, s, start=2)
    opt.param_groups[0]["params"][0].grad = torch.ones(3)
    assert driver.step().index == 2 and driver.finished
    with pytest.raises(ParameterError, match="3 steps have all run"):
        driver.step()


# --------------------------------------------------------------------------- num_data


DATA = torch.tensor(np.random.default_rng(0).standard_normal((50, 3)))
N = DATA.shape[0]


def regression_run(opt_cls, reduction, lr, n_steps=30, **kwargs):
    """A Gaussian linear regression: loss per point (x . w - 1)^2 / 2 + |w|^2 / (2 N)."""
    w = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    opt = opt_cls([w], lr=lr, seed=5, **kwargs)
    for _ in range(n_steps):
        opt.zero_grad()
        per_point = 0.5 * (DATA @ w - 1.0) ** 2 + 0.5 * w.pow(2).sum() / N
        (per_point.mean() if reduction == "mean" else per_point.sum()).backward()
        opt.step()
    return w.detach()


@pytest.mark.parametrize(("opt_cls", "extra"), [(SGLD, {}), (SGHMC, {"friction": 0.2})])
def test_num_data_on_the_mean_loss_is_the_summed_loss(opt_cls, extra):
    alpha = 0.004
    summed = regression_run(opt_cls, "sum", alpha, **extra)
    mean = regression_run(opt_cls, "mean", alpha, num_data=N, **extra)
    assert torch.allclose(mean, summed, rtol=1e-12, atol=1e-13)
    # the reference code's convention: learning rate epsilon on the mean loss at temperature 1 / N
    ref = regression_run(opt_cls, "mean", alpha * N, temperature=1.0 / N, **extra)
    assert torch.allclose(ref, summed, rtol=1e-12, atol=1e-13)
    # negative control: forgetting num_data on the mean loss is another chain
    assert not torch.allclose(regression_run(opt_cls, "mean", alpha, **extra), summed, rtol=1e-3)


# --------------------------------------------------------------------------- the schedule driver


def test_driver_sets_the_schedule_and_reports_its_stages():
    s = schedules.cyclical(0.05, 60, n_cycles=3, explore_fraction=0.4, skip_per_cycle=2)
    theta = torch.zeros(4, 2, dtype=torch.float64, requires_grad=True)
    opt = SGHMC([theta, torch.zeros(2, requires_grad=True)], lr=1.0, friction=0.5, seed=2)
    opt.add_param_group({"params": [torch.zeros(3, requires_grad=True)], "temperature": 3.0})
    seen, infos, drew = [], [], []

    def record(o, args, kwargs):
        seen.append([(g["lr"], g["temperature"]) for g in o.param_groups])

    opt.register_step_pre_hook(record)
    driver = ScheduleDriver(opt, s, block_size=7)  # blocks that straddle the stages
    while not driver.finished:
        backward(opt, theta)
        state = opt.generator.get_state()
        infos.append(driver.step())
        drew.append(not torch.equal(state, opt.generator.get_state()))
    seen = np.array(seen)  # (K, groups, 2)
    assert np.array_equal(seen[:, :, 0], np.repeat(s.step_size[:, None], 2, axis=1))
    assert np.array_equal(seen[:, :, 1], np.repeat(s.temperature[:, None], 2, axis=1))
    for field in ("step_size", "temperature", "stage", "cycle", "collect"):
        assert np.array_equal([getattr(i, field) for i in infos], getattr(s, field)), field
    assert [i.index for i in infos] == list(range(60)) and driver.steps_done == 60
    assert [i.sampling for i in infos] == list(s.stage == schedules.SAMPLING)
    # the generator advances on the sampling steps only
    assert drew == list(s.temperature > 0)


def test_exploration_steps_of_the_driver_are_gradient_descent():
    s = schedules.cyclical(0.1, 20, n_cycles=2, explore_fraction=0.5)
    theta = torch.tensor([[1.0, -2.0]], dtype=torch.float64, requires_grad=True)
    opt = SGLD([theta], lr=1.0, seed=9)
    driver = ScheduleDriver(opt, s)
    for _ in range(20):
        backward(opt, theta)
        before, grad = theta.detach().clone(), theta.grad.clone()
        info = driver.step()
        descent = before.add(grad, alpha=-info.step_size)  # torch.optim.SGD's own operation
        assert torch.equal(theta.detach(), descent) == (not info.sampling)


# --------------------------------------------------------------------------- docstrings


def test_docstring_examples_run():
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for module in (st.optim, st.schedule):
        for test in finder.find(module, globs={}):
            runner.run(test)
    assert runner.tries > 0 and runner.failures == 0
