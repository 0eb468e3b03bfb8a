"""Trusting the Torch backend: a checkpoint resumes bit for bit, a diverging chain is named, the
SGD mapping holds to what is claimed, and every bad constructor argument is named.

- Resume: the standard PyTorch resume (save the model's and the sampler's ``state_dict``, build
  new ones with the same code, load both) continues the uninterrupted run bit for bit, for every
  sampler that draws noise; a ``state_dict`` without a generator state (as written before it was
  kept) loads with a warning and replays the first normals (the defect this fixes).
- Divergence: a step size beyond stability (SGLD, constant SGD, preconditioned SGD) overflows at
  the step the scalar recursion predicts, and the error names that step and the parameter; a
  stable step is never flagged.
- SGD: SGLD at T = 0 is ``torch.optim.SGD`` bit for bit; SGHMC at T = 0 is SGD with momentum to
  a rounding tolerance derived from the dynamics, and not bit for bit.
- Fuzz: hypothesis over the constructors, derandomized: 80 examples for each of the 7 noisy
  optimizers, 100 for ConstantSGD, 25 for each ensemble, 60 for SampleStore and sgd_arguments
  (770 in all).

Skipped as a whole where PyTorch (the ``torch`` extra) is not installed.
"""

from __future__ import annotations

import inspect
import io
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import sgsim
from sgsim._validate import ParameterError, ParameterTypeError
from sgsim.schedules import cyclical

torch = pytest.importorskip("torch")

from sgsim.torch import (  # noqa: E402
    BAOAB,
    OBABO,
    PSGLD,
    SGHMC,
    SGLD,
    SGNHT,
    SVGD,
    ConstantSGD,
    Divergence,
    DivergenceError,
    PreconditionedSGD,
    PSGLDGamma,
    SampleStore,
    ScheduleDriver,
    SGLDRepulsive,
    sgd_arguments,
)

NOISY = [SGLD, SGHMC, BAOAB, OBABO, SGNHT, PSGLD, PSGLDGamma]
X = torch.randn(16, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def net(seed=3):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1)).double()


def make(cls, model, **kwargs):
    return cls(model.parameters(), lr=1e-3, seed=1, **kwargs)


def advance(model, opt, k):
    for _ in range(k):
        opt.zero_grad()
        (model(X).pow(2).sum() + sum(p.pow(2).sum() for p in model.parameters())).backward()
        opt.step()


def flat(model):
    return torch.cat([p.detach().ravel() for p in model.parameters()])


def save(*objs):
    buf = io.BytesIO()
    torch.save([o.state_dict() for o in objs], buf)
    buf.seek(0)
    return torch.load(buf)  # weights_only: a state_dict holds nothing else


# --------------------------------------------------------------------------- resume


@pytest.mark.parametrize("cls", NOISY)
def test_the_standard_resume_continues_bit_for_bit(cls):
    model = net()
    opt = make(cls, model)
    advance(model, opt, 4)
    saved_model, saved_opt = save(model, opt)
    advance(model, opt, 5)  # the uninterrupted run

    again = net(seed=99)  # other weights, overwritten by the checkpoint
    again.load_state_dict(saved_model)
    resumed = make(cls, again)  # the same code builds the same optimizer
    resumed.load_state_dict(saved_opt)
    advance(again, resumed, 5)
    assert torch.equal(flat(again), flat(model))
    assert resumed.steps_taken == opt.steps_taken == 9

    # the defect as found: a state_dict without the generator's state (what load_state_dict got
    # before it was kept) resumes with a fresh generator, which replays the first steps' normals
    old = {k: v for k, v in saved_opt.items() if k not in ("generator", "steps", "divergence")}
    stale_model = net(seed=99)
    stale_model.load_state_dict(saved_model)
    stale = make(cls, stale_model)
    with pytest.warns(RuntimeWarning, match="replays the normals"):
        stale.load_state_dict(old)
    advance(stale_model, stale, 1)
    assert not torch.equal(flat(stale_model), flat(model))  # off at the first resumed step


def test_a_cyclical_run_resumes_through_the_schedule_driver():
    schedule = cyclical(1e-3, 12, n_cycles=2, explore_fraction=0.5)  # steps at T = 0 and T = 1
    model = net()
    opt = SGHMC(model.parameters(), lr=1e-3, seed=5)
    driver = ScheduleDriver(opt, schedule)
    for _ in range(5):
        advance_driver(model, opt, driver)
    saved_model, saved_opt = save(model, opt)
    while not driver.finished:
        advance_driver(model, opt, driver)
    again = net(seed=7)
    again.load_state_dict(saved_model)
    resumed = SGHMC(again.parameters(), lr=1e-3, seed=5)
    resumed.load_state_dict(saved_opt)
    second = ScheduleDriver(resumed, schedule, start=resumed.steps_taken)
    while not second.finished:
        advance_driver(again, resumed, second)
    assert torch.equal(flat(again), flat(model))


def advance_driver(model, opt, driver):
    opt.zero_grad()
    (model(X).pow(2).sum() + sum(p.pow(2).sum() for p in model.parameters())).backward()
    driver.step()


def test_a_foreign_or_broken_generator_state_is_refused_or_warned():
    model = net()
    opt = make(SGLD, model)
    advance(model, opt, 2)
    state = opt.state_dict()
    # a state saved on another device type cannot continue here: a warning, nothing loaded into the generator
    before = opt.generator.get_state()
    with pytest.warns(RuntimeWarning, match="does not continue"):
        opt.load_state_dict({**state, "generator": {"device": "cuda:0", "state": torch.zeros(16, dtype=torch.uint8)}})
    assert torch.equal(opt.generator.get_state(), before)
    for bad, kind in (
        ({"device": "cpu", "state": torch.zeros(3, dtype=torch.uint8)}, ParameterError),  # not a CPU state
        ({"device": "cpu", "state": [1, 2]}, ParameterTypeError),
        ("cpu", ParameterTypeError),
    ):
        with pytest.raises(kind) as info:
            opt.load_state_dict({**state, "generator": bad})
        assert info.value.parameter == "state_dict"


class Position(torch.nn.Module):
    def __init__(self, start):
        super().__init__()
        self.theta = torch.nn.Parameter(torch.tensor(start, dtype=torch.float64))


def ensemble(seed=0, n=5):
    g = torch.Generator().manual_seed(seed)
    return [Position(torch.randn(2, generator=g, dtype=torch.float64).tolist()) for _ in range(n)]


def potential(model):
    return 0.5 * model.params["theta"].pow(2).sum()


@pytest.mark.parametrize("cls", [SGLDRepulsive, SVGD])
def test_an_ensemble_resumes_bit_for_bit(cls):
    first = cls(ensemble(), lr=0.1, **({"seed": 2} if cls is SGLDRepulsive else {}))
    for _ in range(3):
        first.step(potential)
    (saved,) = save(first)
    for _ in range(4):
        first.step(potential)
    second = cls(ensemble(seed=9), lr=0.1, **({"seed": 2} if cls is SGLDRepulsive else {}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # SVGD has no generator: nothing to warn about
        second.load_state_dict(saved)
    for _ in range(4):
        second.step(potential)
    assert torch.equal(second.flat, first.flat) and second.steps_taken == 7
    if cls is SGLDRepulsive:  # negative control: the same particles without the generator's state
        stale = cls(ensemble(seed=9), lr=0.1, seed=2)
        with pytest.warns(RuntimeWarning, match="replays the normals"):
            stale.load_state_dict({k: v for k, v in saved.items() if k != "generator"})
        stale.step(potential)
        assert not torch.allclose(stale.flat, first.flat)


# --------------------------------------------------------------------------- divergence


def overflow_step(theta0, factor):
    """The first step at which ``theta_k = theta_{k-1} + factor theta_{k-1}`` is not finite (float64)."""
    x, k = np.float64(theta0), 0
    with np.errstate(over="ignore", invalid="ignore"):
        while np.isfinite(x):
            x, k = x + np.float64(factor) * x, k + 1
    return k


def quadratic_run(opt, theta, n_steps):
    for _ in range(n_steps):
        theta.grad = theta.detach().clone()  # grad U = theta on U = |theta|^2 / 2, exactly
        opt.step()


def test_an_unstable_step_is_raised_at_the_step_that_overflows():
    # SGLD at T = 0 on U = theta^2 / 2 with lr = 3: theta_k = (-2)^k theta_0, beyond float64 at a
    # step the same recursion in NumPy predicts: 1024 from theta_0 = 1 (2^1024 overflows; so does
    # the product 3 * 2^1023 of an unfused step, so fused or not, the step is the same)
    theta = torch.nn.Parameter(torch.ones(4, dtype=torch.float64))
    opt = SGLD([("weight", theta)], lr=3.0, temperature=0.0)
    expected = overflow_step(1.0, -3.0)
    assert expected == 1024
    with pytest.raises(DivergenceError) as info:
        quadratic_run(opt, theta, 2000)
    err = info.value
    assert isinstance(err, sgsim.DivergenceError) and isinstance(err, FloatingPointError)
    assert err.divergence.step == expected and err.chains == {0: expected}
    assert "at step 1024" in str(err) and "parameter 'weight'" in str(err)
    assert "gradient was finite" in str(err)
    # negative control: the stable step lr = 1.9 (|1 - lr| < 1) runs 200 steps without a word
    calm = torch.nn.Parameter(torch.full((4,), 1e300, dtype=torch.float64))
    quadratic_run(SGLD([calm], lr=1.9, temperature=0.0), calm, 2000)
    assert torch.isfinite(calm).all()


def test_a_non_finite_gradient_is_named_and_a_bound_catches_a_finite_runaway():
    theta = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    opt = SGHMC([theta], lr=0.1, seed=0)
    theta.grad = torch.tensor([0.0, math.nan, 0.0], dtype=torch.float64)
    with pytest.raises(DivergenceError, match=r"at step 1: param_groups\[0\]\['params'\]\[0\].*not finite"):
        opt.step()
    # a bound on |theta_i|: theta_k = (-2)^k from 1 passes 1e3 first at step 10 (1024); without a
    # bound (the control) nothing is said until the overflow, at step 1024
    for bound, expected in ((1e3, 10), (None, overflow_step(1.0, -3.0))):
        theta = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
        opt = SGLD([theta], lr=3.0, temperature=0.0, divergence_bound=bound)
        with pytest.raises(DivergenceError) as info:
            quadratic_run(opt, theta, 2000)
        assert info.value.divergence == Divergence(
            expected,
            expected - 1,
            "param_groups[0]['params'][0] (shape (2,))",
            "reached max |theta_i| = 1024 > divergence_bound = 1000"
            if bound
            else "has 2 non-finite entries of 2 (its gradient was finite: the step overflowed)",
        )


def test_mark_stops_the_chain_and_a_sparse_check_is_late_by_less_than_its_period():
    theta = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
    opt = SGLD([theta], lr=3.0, temperature=0.0, on_divergence="mark", check_every=100)
    with pytest.warns(RuntimeWarning, match="between steps 1001 and 1100"):
        quadratic_run(opt, theta, 1100)
    record = opt.divergence
    assert (record.step, record.checked) == (1100, 1000)  # overflow at 1024, seen at the next check
    stopped = theta.detach().clone()
    quadratic_run(opt, theta, 3)  # later steps move nothing
    torch.testing.assert_close(theta.detach(), stopped, rtol=0, atol=0, equal_nan=True)
    assert opt.steps_taken == 1100
    (saved,) = save(opt)
    again = SGLD([torch.nn.Parameter(theta.detach().clone())], lr=3.0, temperature=0.0, on_divergence="mark")
    again.load_state_dict(saved)
    assert again.divergence == record


@pytest.mark.parametrize("build", [
    lambda ps, **kw: ConstantSGD(ps, lr=3.0, **kw),
    lambda ps, **kw: PreconditionedSGD(ps, lr=1.5, preconditioner=2.0, **kw),
])  # fmt: skip
def test_constant_sgd_beyond_its_limit_is_raised_at_the_step_that_overflows(build):
    # constant SGD on U = theta^2 / 2 at lr H = 3 (limit 2): theta_k = (-2)^k, not finite at the
    # step the NumPy recursion predicts, 1024, named with its parameter (torch.optim.SGD itself
    # returns the infinities without a word)
    theta = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    with pytest.raises(DivergenceError) as info:
        quadratic_run(build([("weight", theta)]), theta, 2000)
    assert info.value.divergence.step == overflow_step(1.0, -3.0) == 1024
    assert "parameter 'weight'" in str(info.value) and "the step overflowed" in str(info.value)
    # mark: the chain stops at the check that saw it, the record survives a state_dict round trip
    theta = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    opt = build([theta], on_divergence="mark", check_every=100, divergence_bound=1e3)
    with pytest.warns(RuntimeWarning, match="between steps 1 and 100"):
        quadratic_run(opt, theta, 150)
    assert (opt.divergence.step, opt.steps_taken) == (100, 100)
    (saved,) = save(opt)
    again = build([torch.nn.Parameter(torch.ones(3, dtype=torch.float64))], on_divergence="mark")
    again.load_state_dict(saved)
    assert again.divergence == opt.divergence and again.steps_taken == 100
    # the control: a stable rate (|1 - lr H| = 0.9) runs 2000 steps from 1e300 without a word
    calm = torch.nn.Parameter(torch.full((3,), 1e300, dtype=torch.float64))
    opt = build([calm])
    for group in opt.param_groups:
        group["lr"] = 1.9 / (2.0 if isinstance(opt, PreconditionedSGD) else 1.0)
    quadratic_run(opt, calm, 2000)
    assert torch.isfinite(calm).all() and opt.divergence is None


def test_an_ensemble_that_diverges_names_its_particle():
    # one particle far out (|theta_0| = 50 beyond a bound of 40, the others within 3): it is named
    sampler = SGLDRepulsive(ensemble(), lr=1e-3, seed=0, bandwidth=1.0, divergence_bound=40.0)
    sampler.flat[3, 0] = 50.0
    with pytest.raises(DivergenceError, match=r"at step 1: particle 3's parameter 'theta' \(shape \(2,\)\) reached"):
        sampler.step(potential)
    # an overflowing step: every particle is marked (the kernel mixes them), later steps move nothing
    marked = SVGD(ensemble(), lr=1e300, on_divergence="mark")

    def steep(model):  # gradients of 1e10: the step of 1e300 overflows
        return 1e10 * potential(model)

    with pytest.warns(RuntimeWarning, match="diverged at step 1"):
        marked.step(steep)
    assert torch.isnan(marked.step(steep)).all() and marked.steps_taken == 1


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(on_divergence="warn"), "on_divergence"),
        (dict(on_divergence=None), "on_divergence"),
        (dict(check_every=0), "check_every"),
        (dict(check_every=True), "check_every"),
        (dict(check_every=2.0), "check_every"),
        (dict(divergence_bound=-1.0), "divergence_bound"),
        (dict(divergence_bound=math.nan), "divergence_bound"),
        (dict(divergence_bound="10"), "divergence_bound"),
        (dict(generator=torch.Generator()), "generator"),  # on the CPU, the parameter on "meta"
    ],
)
@pytest.mark.parametrize("cls", [SGLD, SGLDRepulsive])
def test_the_check_and_generator_arguments_are_named(cls, kwargs, name):
    if cls is SGLDRepulsive:
        if name == "generator":
            return  # the ensembles check their generator's device already (test_torch_particles)
        call = lambda: cls(ensemble(), lr=0.1, **kwargs)  # noqa: E731
    else:
        device = "meta" if name == "generator" else "cpu"
        call = lambda: cls([torch.zeros(3, device=device, requires_grad=True)], lr=0.1, **kwargs)  # noqa: E731
    with pytest.raises((ParameterError, ParameterTypeError)) as info:
        call()
    assert info.value.parameter == name and name in str(info.value)


# --------------------------------------------------------------------------- SGD at temperature 0


def quadratic(dtype, n=40, d=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(d, d, generator=g, dtype=torch.float64)
    h = (a @ a.T / d + torch.eye(d, dtype=torch.float64)).to(dtype)
    return torch.randn(n, d, generator=g, dtype=torch.float64).to(dtype), h


def run_pair(ours, theirs, a, b, h, n_steps, record=None):
    for _ in range(n_steps):
        for opt, x in ((ours, a), (theirs, b)):
            opt.zero_grad()
            (0.5 * torch.einsum("ni,ij,nj->", x, h, x)).backward()
            opt.step()
        if record is not None:
            record.append((a.detach().abs().max().item(), ours.state[a]["velocity"].abs().max().item()))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("foreach", [True, False])
def test_sgld_at_zero_temperature_is_sgd_bit_for_bit(dtype, foreach):
    start, h = quadratic(dtype)
    for num_data, nudge in ((None, False), (7, False), (7, True)):
        a, b = start.clone().requires_grad_(), start.clone().requires_grad_()
        ours = SGLD([a], lr=0.01, temperature=0.0, num_data=num_data)
        args = sgd_arguments(0.01, num_data=num_data)
        if nudge:  # negative control: torch's lr a few units in the last place (of dtype) larger
            args["lr"] *= 1 + 4 * torch.finfo(dtype).eps
        run_pair(ours, torch.optim.SGD([b], foreach=foreach, **args), a, b, h, 60)
        assert torch.equal(a, b) != nudge


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sghmc_at_zero_temperature_is_sgd_with_momentum_to_rounding(dtype):
    lr, eta, n_steps = 0.02, 0.3, 150
    start, h = quadratic(dtype)
    u = torch.finfo(dtype).eps / 2
    # The tolerance, derived. Each step ours rounds (1 - eta) v, lr g, their sum and theta + v;
    # torch rounds mu b, mu b + g, lr b and theta - lr b. With V_k = max(|v_{k-1}|, |v_k|) (so
    # |lr g_k| <= 2 V_k) and Theta_k = |theta_k| (largest entries), the two velocities (ours v,
    # torch's -lr b) differ by at most 7 roundings of numbers <= V_k, the positions by 2 of
    # numbers <= Theta_k, and the gradients, the same code at two points, by d roundings of
    # |H| |theta| each: a local error <= l_k = u (10 V_k + 2 Theta_k + 2 d lr |H| Theta_k). The
    # linearised step carries an error on (theta, v) by M = [[I - lr H, c I], [-lr H, c I]]
    # (c = 1 - eta), so after K steps the gap is <= sum_k |M^(K-k)| l_k (infinity norms).
    hh = h.double().numpy()
    d = hh.shape[0]
    m = np.block([[np.eye(d) - lr * hh, (1 - eta) * np.eye(d)], [-lr * hh, (1 - eta) * np.eye(d)]])
    carry = [1.0]  # |M^j|, j = 0 .. K - 1
    power = np.eye(2 * d)
    for _ in range(n_steps - 1):
        power = power @ m
        carry.append(np.abs(power).sum(1).max())
    h_norm = np.abs(hh).sum(1).max()
    for momentum, should_pass in ((1 - eta, True), ((1 - eta) * (1 + 1e-4), False)):
        a, b = start.clone().requires_grad_(), start.clone().requires_grad_()
        ours = SGHMC([a], lr=lr, friction=eta, temperature=0.0)
        args = {**sgd_arguments(lr, friction=eta), "momentum": momentum}
        path: list = []
        run_pair(ours, torch.optim.SGD([b], foreach=True, **args), a, b, h, n_steps, path)
        v = [0.0] + [p[1] for p in path]
        tol = sum(
            carry[n_steps - 1 - k] * u * (10 * max(v[k], v[k + 1]) + (2 + 2 * d * lr * h_norm) * path[k][0])
            for k in range(n_steps)
        )
        gap = float((a - b).detach().abs().max())
        assert (gap <= tol) == should_pass, (gap, tol)  # the control: momentum 1e-4 (relative) off
        if should_pass:
            assert 0 < gap and not torch.equal(a, b)  # not bit for bit: "exact" is claimed for SGLD only


def test_sgd_arguments_is_the_mapping_and_checks_its_arguments():
    assert sgd_arguments(0.001, friction=0.1, num_data=50) == {
        "lr": 0.001 * 50,
        "momentum": 0.9,
        "dampening": 0.0,
        "nesterov": False,
    }
    assert sgd_arguments(0.5)["momentum"] == 0.0
    for kwargs, name in (
        (dict(lr=0.0), "lr"),
        (dict(lr=True), "lr"),
        (dict(lr=0.1, friction=0.0), "friction"),
        (dict(lr=0.1, friction="0.5"), "friction"),
        (dict(lr=0.1, num_data=2.0), "num_data"),
    ):
        with pytest.raises((ParameterError, ParameterTypeError)) as info:
            sgd_arguments(**kwargs)
        assert info.value.parameter == name and name in str(info.value)


# --------------------------------------------------------------------------- constructor fuzz

HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=3),
    st.sampled_from(["0.5", "1", "raise"]),
    st.complex_numbers(allow_nan=False, allow_infinity=False, max_magnitude=10),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, -1.0, 1e-320, 1e308, -1e308]),
    st.lists(st.floats(-5, 5), max_size=2),
)


def numbers(low, high, ints=True):
    lo, hi = int(np.ceil(low)), int(np.floor(high))
    floats = st.floats(float(low), float(high), allow_nan=False)
    choices = [floats, floats.map(np.float32)]
    if ints and lo <= hi:
        choices += [st.integers(lo, hi), st.integers(lo, hi).map(np.int64)]
    return st.one_of(*choices)


def arg(valid, wrong_numbers=None):
    """Mostly ``valid``, one time in five a number out of range or a hostile value."""
    wrong = HOSTILE if wrong_numbers is None else st.one_of(wrong_numbers, HOSTILE)
    return st.integers(0, 4).flatmap(lambda k: wrong if k == 0 else valid)


RATE = arg(numbers(1e-6, 0.5), numbers(-5, 0))
TEMPERATURE = arg(numbers(0, 3), numbers(-5, -1e-9))
NUM_DATA = arg(st.one_of(st.none(), st.integers(1, 1000)), st.integers(-5, 0))
CHECK = {
    "on_divergence": arg(st.sampled_from(["raise", "mark"])),
    "check_every": arg(st.integers(1, 10), st.integers(-3, 0)),
    "divergence_bound": arg(st.one_of(st.none(), numbers(1e-3, 1e6)), numbers(-5, 0)),
    "seed": arg(st.one_of(st.none(), st.integers(0, 2**64)), st.integers(-5, -1)),
}
OPTIONS = {
    SGLD: {},
    SGHMC: {
        "friction": arg(numbers(0.01, 1), numbers(1.001, 3)),
        "gamma_hat": arg(numbers(0, 0.01), numbers(-1, -1e-9)),
    },
    BAOAB: {"friction": arg(numbers(0.01, 10), numbers(-3, 0))},
    OBABO: {"friction": arg(numbers(0.01, 10), numbers(-3, 0))},
    SGNHT: {
        "diffusion": arg(numbers(0.01, 10), numbers(-3, 0)),
        "friction_step": arg(st.sampled_from(["euler", "exponential"])),
    },
    PSGLD: {
        "rms_decay": arg(numbers(0.5, 0.999, ints=False), numbers(1, 3)),
        "floor": arg(numbers(1e-8, 1), numbers(-1, 0)),
    },
    PSGLDGamma: {
        "rms_decay": arg(numbers(0.5, 0.999, ints=False), numbers(1, 3)),
        "floor": arg(numbers(1e-8, 1), numbers(-1, 0)),
    },
}


def judge(name, call, step, accepted_names):
    """A refused call names one of its arguments; an accepted one steps to finite values or reports a divergence.

    ``accepted_names``: the callable's parameters (an error may name a missing one).
    """
    accepted_names = set(inspect.signature(accepted_names).parameters)
    try:
        obj = call()
    except (ValueError, TypeError) as exc:
        assert getattr(exc, "parameter", None) in accepted_names, (type(exc), exc)
        assert exc.parameter in str(exc) or name == "SampleStore"
        event(f"{name}: refused")
        return
    event(f"{name}: accepted")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # on_divergence="mark" warns
        try:
            values = step(obj)
        except DivergenceError:  # a reported divergence, not a silent one
            return
    if getattr(obj, "divergence", None) is None:
        assert torch.isfinite(values).all()


@pytest.mark.parametrize("cls", NOISY, ids=lambda c: c.__name__)
@settings(max_examples=80, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_the_noisy_optimizers(cls, data):
    kwargs = data.draw(
        st.fixed_dictionaries(
            {"lr": RATE}, optional={"temperature": TEMPERATURE, "num_data": NUM_DATA, **CHECK, **OPTIONS[cls]}
        )
    )
    theta = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))

    def step(opt):
        for _ in range(2):
            opt.zero_grad()
            (0.5 * theta.pow(2).sum()).backward()
            opt.step()
        return theta.detach()

    judge(cls.__name__, lambda: cls([theta], **kwargs), step, cls)


@settings(max_examples=100, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kwargs=st.fixed_dictionaries(
        {"lr": arg(st.one_of(numbers(1e-6, 0.5), st.just("kl_optimal")), numbers(-5, 0))},
        optional={
            "num_data": arg(st.integers(50, 1000), st.integers(-5, 0)),
            "batch_size": arg(st.integers(2, 50), st.integers(-5, 0)),
            "warmup": arg(st.integers(0, 5), st.integers(-5, -1)),
            "warmup_lr": arg(st.one_of(st.none(), numbers(1e-6, 0.5)), numbers(-5, 0)),
            "max_lr": arg(st.one_of(st.none(), numbers(1e-3, 10)), numbers(-5, 0)),
            "replace": arg(st.booleans()),
            "unbias": arg(st.booleans()),
        },
    )
)
def test_fuzz_constant_sgd(kwargs):
    theta = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))

    def step(opt):
        for _ in range(2):
            opt.zero_grad()
            (0.5 * theta.pow(2).sum()).backward()
            paired = "num_data" in kwargs and "batch_size" in kwargs  # eq. 21 needs N and S
            opt.step(first_example_grads=[theta.grad * 1.1] if paired else None)
        return theta.detach()

    judge("ConstantSGD", lambda: ConstantSGD([theta], **kwargs), step, ConstantSGD)


@pytest.mark.parametrize("cls", [SGLDRepulsive, SVGD], ids=lambda c: c.__name__)
@settings(max_examples=25, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_the_ensembles(cls, data):
    optional = {
        "num_data": NUM_DATA,
        "bandwidth": arg(st.one_of(st.just("median"), numbers(0.1, 10)), numbers(-3, 0)),
        "normalise": arg(st.booleans()),
        **CHECK,
    }
    if cls is SGLDRepulsive:
        optional.update(temperature=TEMPERATURE, median_correction=arg(st.booleans()))
    else:
        del optional["seed"]
    kwargs = data.draw(st.fixed_dictionaries({"lr": RATE}, optional=optional))

    def step(sampler):
        for _ in range(2):
            sampler.step(potential)
        return sampler.flat

    judge(cls.__name__, lambda: cls(ensemble(n=3), **kwargs), step, cls)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(
    kwargs=st.fixed_dictionaries(
        {},
        optional={
            "max_samples": arg(st.one_of(st.none(), st.integers(1, 5)), st.integers(-3, 0)),
            "seed": CHECK["seed"],
            "dtype": arg(st.sampled_from([None, torch.float32, torch.float64])),
        },
    ),
    lr=RATE,
    friction=arg(numbers(0.01, 1), numbers(1.001, 3)),
    num_data=NUM_DATA,
)
def test_fuzz_the_store_and_the_mapping(kwargs, lr, friction, num_data):
    x = torch.ones(2, dtype=torch.float64)

    def add(store):
        store.add([x], step=0)
        return store.vectors()

    judge("SampleStore", lambda: SampleStore(**kwargs), add, SampleStore)
    call_args = {"lr": lr, "friction": friction, "num_data": num_data}
    try:
        out = sgd_arguments(**call_args)
    except (ValueError, TypeError) as exc:
        assert exc.parameter in call_args
    else:
        assert all(math.isfinite(out[k]) for k in ("lr", "momentum")) and 0 <= out["momentum"] < 1
