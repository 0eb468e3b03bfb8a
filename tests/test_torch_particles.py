"""SGLD with repulsive forces and SVGD over an ensemble of Torch modules (sgsim.torch.particles):
the compiled kernels' steps given the same normals, the definitions of sgsim.dynamics on a
small network, the stationary moments of many ensembles (SVGD as the negative control), seeds,
and bad input.

Skipped as a whole where PyTorch (the ``torch`` extra) is not installed.
"""

import doctest

import numpy as np
import pytest
import reference as R
from stats import assert_within_se

import sgsim
from sgsim import dynamics, schedules, targets
from sgsim._validate import ParameterError, ParameterTypeError

torch = pytest.importorskip("torch")

import sgsim.torch.particles as tp  # noqa: E402
from sgsim.torch import ScheduleDriver, make_generator  # noqa: E402
from sgsim.torch.particles import SVGD, SGLDRepulsive  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    # the tensors here are tiny: with a second busy process on two cores, torch's OpenMP regions
    # (exp, Cholesky of a 20 x 20 matrix) cost milliseconds each instead of microseconds
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


P = np.array([[2.0, 0.5], [0.5, 1.0]])
B = np.array([0.3, -0.2])
TARGET = targets.linear_gaussian(P, B)
P_T, B_T = torch.tensor(P), torch.tensor(B)
L = 8


class Position(torch.nn.Module):
    """A "network" whose only parameter is a position in the plane and whose output is ``U`` there."""

    def __init__(self, z):
        super().__init__()
        self.theta = torch.nn.Parameter(torch.as_tensor(z, dtype=torch.float64).clone())

    def forward(self):
        return 0.5 * self.theta @ P_T @ self.theta - B_T @ self.theta


def potential(model):
    return model()


def ensemble(z0):
    return [Position(z) for z in z0]


def start(n=L, seed=0):
    return np.random.default_rng(seed).uniform(-3.0, 3.0, (n, 2))


def max_error(got, want):
    return np.max(np.abs(got - want)) / max(1.0, np.max(np.abs(want)))


# --------------------------------------------------------------------------- the compiled kernels' steps


def varied_schedule(n_steps=60):
    """Two cosine cycles with exploration (T = 0), sampling at T = 0.5 then T = 1, every step collected."""
    c = schedules.cyclical(0.3, n_steps, n_cycles=2, explore_fraction=0.3)
    return schedules.Schedule(c.step_size, c.temperature * (0.5 + 0.5 * c.cycle), c.stage, c.cycle)


def torch_path(sampler, normals, driver=None):
    path = []
    for xi in normals:
        noise = torch.tensor(xi)
        if driver is None:
            sampler.step(potential, noise=noise)
        else:
            driver.step(potential, noise=noise)
        path.append(sampler.flat.clone().numpy())
    return np.array(path)


def sgld_repulsive_pair(bandwidth, normalise, seed=3, n_part=L, **torch_options):
    """The compiled csgld_repulsive path over ``varied_schedule`` and the Torch sampler's, with its normals."""
    s, z0 = varied_schedule(), start(n_part)
    spine = sgsim.sample(
        TARGET, "csgld_repulsive", schedule=s, n_particles=n_part, init=z0, bandwidth=bandwidth, normalise=normalise,
        seed=seed, thin=1,
    )  # fmt: skip
    # particle p of replica 0 draws d normals from its own stream (seed, 0, 0, p) at each step with T > 0
    xi = R.particle_normals(seed, 0, n_part, s.n_steps, 2, s.temperature > 0)
    options = dict(bandwidth=bandwidth, normalise=normalise, **torch_options)
    sampler = SGLDRepulsive(ensemble(z0), lr=1.0, seed=0, **options)
    path = torch_path(sampler, xi, ScheduleDriver(sampler, s))
    return path, spine, sampler


@pytest.mark.parametrize(
    ("bandwidth", "normalise", "n_part"),
    [("median", True, L), ("median", False, L), (0.7, True, L), (0.7, False, L), ("median", True, 2), (0.7, True, 3)],
)
def test_sgld_repulsive_takes_the_compiled_kernels_steps(bandwidth, normalise, n_part):
    # the exploration steps (SVGD's step, no draws), T = 0.5 (T on Gamma and the median part) and T = 1;
    # two particles: one pair, the median part of Gamma cancels the repulsion exactly
    path, spine, sampler = sgld_repulsive_pair(bandwidth, normalise, n_part=n_part)
    assert max_error(path, spine.posterior["theta"].values[0]) < 1e-10
    np.testing.assert_allclose(sampler.bandwidth, spine.sample_stats["bandwidth"].values[0, -1], rtol=1e-10)
    assert sampler.jitter == 0.0 == spine.constant_data["final_jitter"].values[0]


@pytest.mark.parametrize("bandwidth", ["median", 0.7])
@pytest.mark.parametrize("normalise", [True, False])
def test_svgd_takes_the_compiled_kernels_steps(bandwidth, normalise):
    z0, k = start(), 40
    spine = sgsim.sample(
        TARGET, "svgd", k, n_particles=L, init=z0, step_size=0.1, bandwidth=bandwidth, normalise=normalise, thin=1
    )
    sampler = SVGD(ensemble(z0), lr=0.1, bandwidth=bandwidth, normalise=normalise)
    path = []
    for _ in range(k):
        sampler.step(potential)
        path.append(sampler.flat.clone().numpy())
    assert max_error(np.array(path), spine.posterior["theta"].values[0]) < 1e-10


def test_the_step_comparison_rejects_a_wrong_sign_a_missing_1_over_l_and_a_missing_median_part():
    # negative controls of the comparison itself: the printed -Gamma (compiled), normalise
    # dropped on one side only, and the median bandwidth's part of Gamma left out
    path, spine, _ = sgld_repulsive_pair("median", True)
    want = spine.posterior["theta"].values[0]
    s, z0, xi = varied_schedule(), start(), R.particle_normals(3, 0, L, 60, 2, varied_schedule().temperature > 0)
    minus = sgsim.sample(TARGET, "sgld_repulsive_minus_gamma", schedule=s, n_particles=L, init=z0, seed=3, thin=1)
    assert max_error(path, minus.posterior["theta"].values[0]) > 1e-3
    unnormalised = SGLDRepulsive(ensemble(z0), lr=1.0, normalise=False, seed=0)
    assert max_error(torch_path(unnormalised, xi, ScheduleDriver(unnormalised, s)), want) > 1e-3
    no_median, _, _ = sgld_repulsive_pair("median", True, median_correction=False)
    assert max_error(no_median, want) > 1e-6
    off = sgsim.sample(
        TARGET, "csgld_repulsive", schedule=s, n_particles=L, init=z0, seed=3, thin=1, median_correction=False
    )
    assert max_error(no_median, off.posterior["theta"].values[0]) < 1e-10


def test_zero_temperature_is_svgd_bit_for_bit_and_draws_nothing():
    z0 = start()
    a = SGLDRepulsive(ensemble(z0), lr=0.2, temperature=0.0, seed=1)
    b = SVGD(ensemble(z0), lr=0.2)
    state = a.generator.get_state()
    for _ in range(30):
        a.step(potential)
        b.step(potential)
    assert torch.equal(a.flat, b.flat)
    assert torch.equal(a.generator.get_state(), state)


# --------------------------------------------------------------------------- a network: dynamics definitions

X = torch.tensor(np.random.default_rng(2).standard_normal((20, 3)))
Y = torch.sin(X.sum(1, keepdim=True))


class Net(torch.nn.Module):
    """Two layers, a frozen scale and a buffer: 21 trainable parameters."""

    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(3, 4, dtype=torch.float64)
        self.out = torch.nn.Linear(4, 1, dtype=torch.float64)
        self.scale = torch.nn.Parameter(torch.tensor(0.5, dtype=torch.float64), requires_grad=False)
        self.register_buffer("shift", torch.tensor(0.1, dtype=torch.float64))

    def forward(self, x):
        return self.scale * self.out(torch.tanh(self.hidden(x))) + self.shift


def net_loss(model, x, y):
    """Mean squared error plus a Gaussian prior on the trainable parameters, divided by N (a mean loss)."""
    prior = sum(p.pow(2).sum() for p in model.params.values())
    return 0.5 * (model(x) - y).pow(2).mean() + 0.5 * prior / len(x)


def nets(n=6):
    torch.manual_seed(0)
    return [Net() for _ in range(n)]


def autograd_gradients(models):
    """``grad U`` of each model by ordinary autograd, flattened in ``named_parameters`` order, (L, P)."""
    rows = []
    for m in models:
        m.zero_grad()
        (len(X) * net_loss_plain(m)).backward()
        rows.append(torch.cat([p.grad.reshape(-1) for p in m.parameters() if p.requires_grad]))
    return torch.stack(rows).numpy()


def net_loss_plain(m):
    prior = sum(p.pow(2).sum() for p in m.parameters() if p.requires_grad)
    return 0.5 * (m(X) - Y).pow(2).mean() + 0.5 * prior / len(X)


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_a_network_step_is_the_dynamics_definition_on_its_flattened_parameters(temperature):
    # one step with a fixed bandwidth: Z + eps phi(Z) (sgsim.dynamics.svgd_velocity, gradients by
    # plain autograd on each module) plus, at T = 1, the Cholesky factor of 2 eps K / L
    # (sgsim.dynamics.repulsive_noise_cov) times the injected normals
    models, eps, h = nets(), 0.01, 2.0
    z = np.stack([torch.cat([p.detach().reshape(-1) for p in m.parameters() if p.requires_grad]) for m in models])
    grads = autograd_gradients(models)
    sampler = SGLDRepulsive(models, lr=eps, temperature=temperature, num_data=len(X), bandwidth=h, seed=0)
    assert sampler.flat.shape == (6, 21) and set(sampler.buffers) == {"scale", "shift"}
    xi = np.random.default_rng(3).standard_normal(z.shape)
    losses = sampler.step(net_loss, X, Y, noise=torch.tensor(xi))
    want = z + eps * dynamics.svgd_velocity(z, grads, h)
    if temperature > 0:
        want += np.linalg.cholesky(dynamics.repulsive_noise_cov(z, h, eps)) @ xi
    assert max_error(sampler.flat.numpy(), want) < 1e-12
    np.testing.assert_allclose(losses.numpy(), [float(net_loss_plain(m).detach()) for m in models], rtol=1e-13)
    # the particles' outputs, and a particle loaded back into a module
    out = sampler.predict(X)
    module = Net()
    module.load_state_dict(sampler.particle(4))
    assert out.shape == (6, 20, 1) and torch.allclose(out[4], module(X), rtol=0, atol=1e-14)
    assert torch.equal(sampler.params["hidden.weight"][4], module.hidden.weight.detach())


def test_num_data_on_the_mean_loss_is_the_summed_loss():
    def run(loss, **kw):
        sampler = SGLDRepulsive(nets(), lr=1e-3, seed=5, **kw)
        for _ in range(10):
            sampler.step(loss, X, Y)
        return sampler.flat

    summed = run(lambda m, x, y: len(x) * net_loss(m, x, y))
    assert torch.allclose(run(net_loss, num_data=len(X)), summed, rtol=1e-12, atol=1e-13)
    # negative control: forgetting num_data on the mean loss is another ensemble
    assert not torch.allclose(run(net_loss), summed, rtol=1e-3)


# --------------------------------------------------------------------------- stationary moments


class Standard(torch.nn.Module):
    def __init__(self, z):
        super().__init__()
        self.theta = torch.nn.Parameter(torch.as_tensor(z).clone())

    def forward(self):
        return 0.5 * self.theta.pow(2).sum()


def moments(cls, n_rep=20, n_part=20, eps=0.02, n_steps=100):
    """Per ensemble, the particle and time averages of x, y, x^2, y^2, xy on N(0, I_2), started
    from the target; and the largest eigenvalue of K seen (at the last step of each ensemble)."""
    rng = np.random.default_rng(1)
    per, lam = [], 0.0
    for r in range(n_rep):
        seed = {"seed": 100 + r} if cls is SGLDRepulsive else {}
        sampler = cls([Standard(z) for z in rng.standard_normal((n_part, 2))], lr=eps, normalise=False, **seed)
        path = []
        for _ in range(n_steps):
            sampler.step(potential)
            path.append(sampler.flat.numpy().copy())
        z = np.array(path)
        x, y = z[..., 0], z[..., 1]
        per.append([x.mean(), y.mean(), (x**2).mean(), (y**2).mean(), (x * y).mean()])
        last = z[-1]
        kern = dynamics.rbf_kernel(last, sampler.bandwidth)
        lam = max(lam, float(np.linalg.eigvalsh(kern)[-1]))
    return np.array(per), lam


def verdict(cls):
    # ensembles are independent: SE of each moment = the spread of its per-ensemble averages over
    # sqrt(R); 5 SE plus, for the second moments, SGLD's stationary variance bias
    # 1 / (1 - eps lambda / 2) - 1 at the largest step eps lambda (lambda: max eigenvalue of K
    # seen; normalise=False); none for the means and the cross moment, 0 by symmetry whatever the step
    eps = 0.02
    per, lam = moments(cls, eps=eps)
    bias = 1.0 / (1.0 - eps * lam / 2) - 1.0
    se = per.std(axis=0, ddof=1) / np.sqrt(len(per))
    failed = []
    for i, (name, truth, b) in enumerate(
        [("mean x", 0.0, 0.0), ("mean y", 0.0, 0.0), ("E x^2", 1.0, bias), ("E y^2", 1.0, bias), ("E xy", 0.0, 0.0)]
    ):
        try:
            assert_within_se(per[:, i].mean(), truth, se[i], z=5.0, bias=b, what=name)
        except AssertionError:
            failed.append(name)
    return failed


def test_ensembles_sample_a_gaussian_and_svgd_does_not():
    assert verdict(SGLDRepulsive) == []
    # negative control: SVGD's ensembles settle with too small a spread; its means are right
    assert verdict(SVGD) == ["E x^2", "E y^2"]


# --------------------------------------------------------------------------- seeds, jitter


def noisy_run(n_steps=15, **kwargs):
    sampler = SGLDRepulsive(ensemble(start()), lr=0.1, **kwargs)
    for _ in range(n_steps):
        sampler.step(potential)
    return sampler.flat.clone(), sampler


def test_same_seed_same_bits_and_a_given_generator():
    a, sampler = noisy_run(seed=7)
    b, _ = noisy_run(seed=7)
    c, _ = noisy_run(seed=8)
    assert sampler.seed == 7 and torch.equal(a, b) and not torch.equal(a, c)
    d, given = noisy_run(generator=make_generator(7))
    assert torch.equal(a, d) and given.seed is None
    e, fresh = noisy_run(seed=None)  # fresh entropy, recorded: the run replays from it
    assert fresh.seed is not None and torch.equal(e, noisy_run(seed=fresh.seed)[0])


def test_one_draw_of_shape_l_by_p_per_step():
    _, sampler = noisy_run(n_steps=0, seed=3, bandwidth=1.0)
    z = sampler.flat.clone().numpy()
    sampler.step(potential)
    xi = torch.randn((L, 2), generator=make_generator(3), dtype=torch.float64).numpy()
    grads = z @ P - B
    want = (
        z
        + 0.1 * dynamics.svgd_velocity(z, grads, 1.0)
        + np.linalg.cholesky(dynamics.repulsive_noise_cov(z, 1.0, 0.1)) @ xi
    )
    assert max_error(sampler.flat.numpy(), want) < 1e-13


def test_float32_ensembles_stay_float32_and_follow_the_float64_steps():
    z0, xi = start(), torch.tensor(np.random.default_rng(4).standard_normal((20, L, 2)))
    runs = []
    for dtype in (torch.float32, torch.float64):
        models = [Standard(torch.tensor(z, dtype=dtype)) for z in z0]
        sampler = SGLDRepulsive(models, lr=0.05, seed=0)
        for x in xi:
            sampler.step(potential, noise=x)
        assert sampler.flat.dtype == dtype and sampler.params["theta"].dtype == dtype
        runs.append(sampler.flat.double())
    assert torch.allclose(runs[0], runs[1], rtol=0, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_a_cuda_ensemble_takes_the_cpu_steps():
    z0, xi = start(), torch.tensor(np.random.default_rng(4).standard_normal((20, L, 2)))
    runs = []
    for device in ("cpu", "cuda"):
        sampler = SGLDRepulsive([Standard(torch.tensor(z)).to(device) for z in z0], lr=0.05, seed=0)
        assert sampler.generator.device.type == device
        for x in xi:
            sampler.step(potential, noise=x)
        sampler.step(potential)  # drawn on the device
        runs.append(sampler.flat.cpu())
    assert torch.allclose(runs[0], runs[1], rtol=0, atol=1e-2)  # the last step's normals differ


def test_jitter_is_added_when_the_kernel_is_singular_and_warned_of_when_large():
    # a bandwidth far beyond the particles' spread: all of K's eigenvalues but the largest fall below
    # its rounding error, and the smallest jitter makes it factorable
    sampler = SGLDRepulsive(ensemble(start()), lr=0.01, bandwidth=1e12, seed=0)
    sampler.step(potential)
    assert 0 < sampler.jitter <= tp.QUIET_JITTER
    # K is positive semidefinite in exact arithmetic: rounding alone never needs more than 1e-10, so
    # the warning is exercised on a matrix with an eigenvalue of -1e-7 (it takes 1e-6)
    indefinite = torch.tensor([[1.0, 1.0 + 1e-7], [1.0 + 1e-7, 1.0]], dtype=torch.float64)
    with pytest.warns(RuntimeWarning, match="numerically singular"):
        factor = sampler._cholesky(indefinite)
    assert sampler.jitter == 1e-6
    assert torch.allclose(factor @ factor.T, indefinite + 1e-6 * torch.eye(2), rtol=0, atol=1e-14)
    diverged = SGLDRepulsive(ensemble(start()), lr=0.01, bandwidth=1.0, seed=0)
    diverged.flat[0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match="not finite"):
        diverged.step(potential)


# --------------------------------------------------------------------------- bad input


BAD = [
    (dict(models=ensemble(start(1))), "models"),
    (dict(models=Position([0.0, 1.0])), "models"),
    (dict(models=[Position([0.0, 1.0]), Standard(torch.zeros(2))]), "models"),
    (dict(models=[Position([0.0, 1.0]), "a module"]), "models"),
    (dict(models=[Position([0.0, 1.0])] * 3), "models"),  # one module thrice: the median finds no spread
    (dict(lr=0.0), "lr"),
    (dict(lr=float("nan")), "lr"),
    (dict(temperature=-1.0), "temperature"),
    (dict(num_data=0), "num_data"),
    (dict(bandwidth=0.0), "bandwidth"),
    (dict(bandwidth=-1.0), "bandwidth"),
    (dict(bandwidth="mean"), "bandwidth"),
    (dict(bandwidth=True), "bandwidth"),
    (dict(normalise="yes"), "normalise"),
    (dict(median_correction=1), "median_correction"),
    (dict(seed=-1), "seed"),
    (dict(seed=1, generator=torch.Generator()), "seed"),
    (dict(generator=np.random.default_rng(0)), "generator"),
]


@pytest.mark.parametrize(("kwargs", "name"), BAD)
def test_each_bad_argument_is_named(kwargs, name):
    args = {"models": ensemble(start()), "lr": 0.1, **kwargs}
    with pytest.raises((ParameterError, ParameterTypeError)) as info:
        SGLDRepulsive(**args)
    assert info.value.parameter == name and name in str(info.value)


def test_bad_step_input_is_named():
    sampler = SGLDRepulsive(ensemble(start()), lr=0.1, seed=0)
    for noise in (torch.zeros(L, 3), np.zeros((L, 2))):
        with pytest.raises(ParameterError) as info:
            sampler.step(potential, noise=noise)
        assert info.value.parameter == "noise"
    for loss_fn, kind in ((None, ParameterTypeError), (lambda m: m.params["theta"], ParameterError)):
        with pytest.raises(kind) as info:
            sampler.step(loss_fn)
        assert info.value.parameter == "loss_fn"
    sampler.param_groups[0]["lr"] = -0.5  # changed by hand: checked before the step does anything
    before = sampler.flat.clone()
    with pytest.raises(ParameterError) as info:
        sampler.step(potential)
    assert info.value.parameter == "lr" and torch.equal(sampler.flat, before)
    with pytest.raises(ParameterTypeError) as info:
        ScheduleDriver(SVGD(ensemble(start()), lr=0.1), schedules.constant(0.1, 3))
    assert info.value.parameter == "optimizer"  # SVGD has no temperature to schedule
    sampler.flat[:] = 0.0  # every particle at one point: the median heuristic has no bandwidth
    sampler.param_groups[0]["lr"] = 0.1
    with pytest.raises(ParameterError, match="coincide") as info:
        sampler.step(potential)
    assert info.value.parameter == "bandwidth"


# --------------------------------------------------------------------------- docstrings


def test_docstring_examples_run():
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(tp, globs={}):
        runner.run(test)
    assert runner.tries > 0 and runner.failures == 0
