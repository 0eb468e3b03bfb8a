"""The Torch peers of SGLD (BAOAB, OBABO, SGNHT, pSGLD): defaults tied to their records, bad input
named, checkpoints that resume with the same bits, one thermostat over all the parameters, and
the temperature-0 steps (damped dynamics, RMSprop).

The compiled kernels' steps themselves are checked by ``tests/test_torch.py`` over every entry
of ``sgsim.torch.MIRRORS``. Skipped as a whole where PyTorch is not installed.
"""

import inspect
import io

import numpy as np
import pytest

import sgsim
from sgsim._validate import ParameterError, ParameterTypeError
from sgsim.integrators import splitting

torch = pytest.importorskip("torch")

import sgsim.torch as st  # noqa: E402
from sgsim.torch import BAOAB, OBABO, PSGLD, SGNHT, PSGLDGamma  # noqa: E402

P = np.array([[2.0, 0.5], [0.5, 1.0]])
B = np.array([0.3, -0.2])
P_T, B_T = torch.tensor(P), torch.tensor(B)
PEERS = [BAOAB, OBABO, SGNHT, PSGLD, PSGLDGamma]


def potential(*parts):
    """``U = theta^T P theta / 2 - b^T theta`` of ``theta``, given whole or as its coordinates' tensors."""
    theta = torch.cat(parts) if len(parts) > 1 else parts[0]
    return 0.5 * theta @ P_T @ theta - theta @ B_T


def test_defaults_are_the_records():
    # an option the check leaves at its default is the record's default on both sides
    for name, mirror in st.MIRRORS.items():
        signature = inspect.signature(mirror.optimizer)
        for option in mirror.options:
            want = sgsim.METHODS[name].algorithm.options[option].default
            assert signature.parameters[option].default == want, (name, option)


@pytest.mark.parametrize("name", ["sgnht", "psgld_gamma"])
@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_the_temperature_reading_steps_follow_their_kernels_at_any_temperature(name, temperature):
    # SGNHT's set point and the Gamma term read the step's temperature; check_mirror's default
    # schedules run at T = 1 (and 0 in csgnht's exploration), so other temperatures are checked here
    assert st.check_mirror(name, temperature=temperature).status == "passed"
    assert st.check_mirror(name, temperature=temperature, noise_scale=1.05).status == "failed"


@pytest.mark.parametrize("name", ["sgnht", "csgnht"])
def test_sgnht_with_the_exponential_friction_follows_its_kernel(name):
    assert st.check_mirror(name, friction_step="exponential").status == "passed"
    assert st.check_mirror(name, friction_step="exponential", noise_scale=1.05).status == "failed"


# --------------------------------------------------------------------------- bad input


def params():
    return [torch.zeros(3, requires_grad=True)]


BAD = [
    *[(cls, dict(lr=0.0), "lr") for cls in PEERS],
    *[(cls, dict(lr=0.1, num_data=0), "num_data") for cls in PEERS],
    *[(cls, dict(lr=0.1, temperature=-1.0), "temperature") for cls in PEERS],
    (BAOAB, dict(lr=0.1, friction=0.0), "friction"),
    (OBABO, dict(lr=0.1, friction=float("inf")), "friction"),
    (BAOAB, dict(lr=0.1, friction="1"), "friction"),
    (SGNHT, dict(lr=0.1, diffusion=0.0), "diffusion"),
    (SGNHT, dict(lr=0.1, friction_step="exact"), "friction_step"),
    (PSGLD, dict(lr=0.1, rms_decay=0.0), "rms_decay"),
    (PSGLD, dict(lr=0.1, rms_decay=1.0), "rms_decay"),
    (PSGLD, dict(lr=0.1, floor=0.0), "floor"),
    (PSGLDGamma, dict(lr=0.1, seed=1, generator=torch.Generator()), "seed"),
]


@pytest.mark.parametrize(("opt_cls", "kwargs", "name"), BAD)
def test_each_bad_argument_is_named(opt_cls, kwargs, name):
    with pytest.raises((ParameterError, ParameterTypeError)) as info:
        opt_cls(params(), **kwargs)
    assert info.value.parameter == name and name in str(info.value)


def test_sgnht_groups_that_disagree_are_refused_before_any_work():
    a, b = torch.ones(2, requires_grad=True), torch.ones(3, requires_grad=True)
    for name, value in (("lr", 0.2), ("diffusion", 2.0), ("temperature", 0.0)):
        opt = SGNHT([{"params": [a]}, {"params": [b], name: value}], lr=0.1, seed=0)
        a.grad, b.grad = torch.ones(2), torch.ones(3)
        with pytest.raises(ParameterError, match=f"one {name}") as info:
            opt.step()
        assert info.value.parameter == name
        assert torch.equal(a.detach(), torch.ones(2)) and not opt.state  # nothing moved, nothing kept
    opt = SGNHT(params(), lr=0.1, seed=0)
    opt.param_groups[0]["temperature"] = -0.3  # set by hand: checked at the step
    opt.param_groups[0]["params"][0].grad = torch.ones(3)
    with pytest.raises(ParameterError, match="temperature") as info:
        opt.step()
    assert info.value.parameter == "temperature"


# --------------------------------------------------------------------------- checkpoints


KW = {
    BAOAB: dict(lr=0.05, friction=0.7),
    OBABO: dict(lr=0.05, friction=0.7),
    SGNHT: dict(lr=0.02, diffusion=0.5),
    PSGLD: dict(lr=0.01, rms_decay=0.9, floor=0.1),
    PSGLDGamma: dict(lr=0.01, rms_decay=0.9, floor=0.1),
}


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1)).double()


def make(cls, net):
    # two parameter groups, the second with its own num_data (SGNHT's thermostat spans both)
    groups = [{"params": list(net[0].parameters())}, {"params": list(net[2].parameters()), "num_data": 2}]
    return cls(groups, seed=3, **KW[cls])


X = torch.linspace(-1, 1, 20, dtype=torch.float64).reshape(5, 4)


def advance(net, opt, n):
    for _ in range(n):
        opt.zero_grad()
        (net(X).pow(2).sum() + sum(p.pow(2).sum() for p in net.parameters())).backward()
        opt.step()


def flat(net):
    return torch.cat([p.detach().ravel() for p in net.parameters()])


@pytest.mark.parametrize("cls", PEERS)
def test_a_checkpoint_resumes_with_the_same_bits(cls):
    net = model()
    opt = make(cls, net)
    advance(net, opt, 7)
    buf = io.BytesIO()
    torch.save({"model": net.state_dict(), "opt": opt.state_dict(), "rng": opt.generator.get_state()}, buf)
    advance(net, opt, 9)
    buf.seek(0)
    saved = torch.load(buf)
    again = model()
    again.load_state_dict(saved["model"])
    resumed = make(cls, again)
    resumed.load_state_dict(saved["opt"])
    resumed.generator.set_state(saved["rng"])
    advance(again, resumed, 9)
    assert torch.equal(flat(again), flat(net))
    # negative control: the same weights and generator without the optimizer's state (momentum, step
    # count, thermostat, second moment) take other steps
    fresh_net = model()
    fresh_net.load_state_dict(saved["model"])
    fresh = make(cls, fresh_net)
    fresh.generator.set_state(saved["rng"])
    advance(fresh_net, fresh, 9)
    assert not torch.allclose(flat(fresh_net), flat(net), rtol=1e-6, atol=0)


def test_the_checkpointed_state_is_named_and_counted():
    net = model()
    for cls, keys in (
        (BAOAB, {"momentum", "step"}),
        (OBABO, {"momentum", "step"}),
        (SGNHT, {"momentum", "step"}),
        (PSGLD, {"second_moment"}),
        (PSGLDGamma, {"second_moment", "step", "last_theta", "last_gradient"}),
    ):
        opt = make(cls, net)
        advance(net, opt, 3)
        state = opt.state_dict()["state"]
        per_param = [v for k, v in state.items() if isinstance(k, int)]
        assert len(per_param) == 4 and all(set(v) == keys for v in per_param), cls.__name__
        if "step" in keys:
            assert all(v["step"] == 3 for v in per_param)
        if cls is SGNHT:
            assert set(state) - {0, 1, 2, 3} == {"thermostat"}  # one thermostat for the optimizer


# --------------------------------------------------------------------------- one thermostat


def sgnht_path(split, n_steps=60, seed=5):
    """SGNHT on U with theta whole, or as two one-coordinate groups (``split``), or two optimizers."""
    theta0 = [1.0, 2.0]
    gen = torch.Generator().manual_seed(seed)
    if split == "whole":
        parts = [torch.tensor(theta0, dtype=torch.float64, requires_grad=True)]
        opts = [SGNHT(parts, lr=0.04, diffusion=0.5, seed=0)]
    else:
        parts = [torch.tensor([v], dtype=torch.float64, requires_grad=True) for v in theta0]
        if split == "groups":
            opts = [SGNHT([{"params": [parts[0]]}, {"params": [parts[1]]}], lr=0.04, diffusion=0.5, seed=0)]
        else:  # one optimizer, hence one thermostat, per coordinate
            opts = [SGNHT([p], lr=0.04, diffusion=0.5, seed=0) for p in parts]
    path = []
    for _ in range(n_steps):
        xi = torch.randn(2, generator=gen, dtype=torch.float64)
        for opt in opts:
            opt.zero_grad()
        potential(*parts).backward()
        if len(parts) == 1:
            opts[0].step(noise=[xi])
        elif len(opts) == 1:
            opts[0].step(noise=[xi[:1], xi[1:]])
        else:
            for opt, z in zip(opts, (xi[:1], xi[1:]), strict=True):
                opt.step(noise=[z])
        path.append(torch.cat([p.detach() for p in parts]).numpy().copy())
    return np.array(path)


def test_sgnht_has_one_thermostat_over_all_its_parameters():
    # the whole vector is the compiled kernel's chain (check_mirror); split over two parameter groups
    # it is the same chain: |p|^2 / d sums over both groups. Both sums hold the same two squares in
    # the same order, so the paths agree to rounding
    whole = sgnht_path("whole")
    assert np.max(np.abs(sgnht_path("groups") - whole)) < 1e-13
    # negative control: a thermostat per coordinate is another chain
    assert np.max(np.abs(sgnht_path("optimizers") - whole)) > 1e-3


# --------------------------------------------------------------------------- temperature 0


@pytest.mark.parametrize(("cls", "oracle"), [(BAOAB, splitting.baoab_oracle), (OBABO, splitting.obabo_oracle)])
def test_a_splitting_at_zero_temperature_is_damped_deterministic_dynamics(cls, oracle):
    # the NumPy oracle of the compiled step, part by part, without noise: to rounding (1e-12 of the
    # path's scale), the generator untouched; the damped dynamics ends at the mode P^-1 b
    alpha, friction = 0.1, 0.8
    theta = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    opt = cls([theta], lr=alpha, friction=friction, temperature=0.0, seed=1)
    state = opt.generator.get_state()
    x = np.array([[1.0, 2.0], [0.0, 0.0]])
    errors = []
    for k in range(400):
        opt.zero_grad()
        potential(theta).backward()
        opt.step()
        x = oracle(x, lambda t: P @ t - B, None, alpha, k, {"friction": friction})
        errors.append(np.max(np.abs(theta.detach().numpy() - x[0])))
    assert max(errors) < 1e-12
    assert torch.equal(opt.generator.get_state(), state)
    assert np.allclose(theta.detach().numpy(), np.linalg.solve(P, B), atol=1e-10)
    # negative control: the same check on the other splitting's oracle fails
    other = splitting.obabo_oracle if cls is BAOAB else splitting.baoab_oracle
    y = np.array([[1.0, 2.0], [0.0, 0.0]])
    for k in range(3):
        y = other(y, lambda t: P @ t - B, None, alpha, k, {"friction": friction})
    theta = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    opt = cls([theta], lr=alpha, friction=friction, temperature=0.0, seed=1)
    for _ in range(3):
        opt.zero_grad()
        potential(theta).backward()
        opt.step()
    assert np.max(np.abs(theta.detach().numpy() - y[0])) > 1e-4


def test_psgld_at_zero_temperature_is_rmsprop_bit_for_bit():
    # RMSprop's conventions match with alpha = rms_decay, eps = floor added to sqrt(V) (not inside
    # the root), V_0 = 0, no momentum, centring or weight decay, and the gradient of U itself
    # (num_data None): PSGLD runs RMSprop's foreach operations in its order, so the bits agree
    torch.manual_seed(0)
    start = torch.randn(7, 2, dtype=torch.float64)

    def run(opt_cls, **kwargs):
        x = start.clone().requires_grad_()
        opt = opt_cls([x], **kwargs)
        for _ in range(50):
            opt.zero_grad()
            (0.5 * torch.einsum("ki,ij,kj->", x, P_T, x) + x.pow(4).sum()).backward()
            opt.step()
        return x.detach(), opt

    ours, opt = run(PSGLD, lr=0.01, rms_decay=0.9, floor=1e-3, temperature=0.0, seed=1)
    rms, _ = run(torch.optim.RMSprop, lr=0.01, alpha=0.9, eps=1e-3, foreach=True)
    assert torch.equal(ours, rms)
    assert torch.equal(opt.generator.get_state(), st.make_generator(1).get_state())  # nothing drawn
    # negative control: another eps (the floor inside the root's convention differs likewise)
    other, _ = run(torch.optim.RMSprop, lr=0.01, alpha=0.9, eps=2e-3, foreach=True)
    assert not torch.allclose(ours, other, rtol=1e-9, atol=0)
