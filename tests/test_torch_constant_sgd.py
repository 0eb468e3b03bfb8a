"""The Torch constant-SGD optimizers (sgsim.torch.constant_sgd): torch.optim.SGD bit for bit, NumPy
transcriptions of every update (Theorem 1's rate, Corollary 3's preconditioner, a fixed H), eq. 21's
online estimate against sgsim.estimators and against the true C (with the unfixed bias rejected),
the stationary covariance of constant SGD, state_dict, and input checks.

The model is the quadratic of "Stochastic Gradient Descent as Approximate Bayesian Inference" §3
(sgsim.targets.ou_quadratic): averaged loss theta^T A theta / 2, per-example gradients
A theta + b_n with b_n ~ N(0, C) (with replacement) or a finite centred population (without),
so C, Tr C and the minibatch noise C / S are exact. Many chains are the rows of one parameter:
the estimate then covers the block-diagonal C of all the chains, whose D / Tr C is that of one.
"""

import copy
import doctest

import numpy as np
import pytest
from stats import assert_within_se, check_gaussian_law

from sgsim import targets
from sgsim._validate import ParameterError, ParameterTypeError
from sgsim.estimators import OnlineNoiseCovariance, bias_factor
from sgsim.theory import kl, ou

torch = pytest.importorskip("torch")

import sgsim.torch.constant_sgd as csgd  # noqa: E402
from sgsim.torch.constant_sgd import ConstantSGD, PreconditionedSGD  # noqa: E402

N, S = 1000, 4
MODEL = targets.ou_quadratic(
    [[2.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 1.5]], [[1.0, 0.4, -0.2], [0.4, 2.0, 0.3], [-0.2, 0.3, 0.5]], S, N
)
A, C = MODEL.extras["hessian"], MODEL.extras["noise_cov"]
D = A.shape[0]
A_T, CHOL = torch.tensor(A), torch.tensor(np.linalg.cholesky(C))
F64 = torch.float64


def per_example(theta, gen, batch_size=S):
    """Per-example gradients ``A theta + b_i`` of a minibatch drawn with replacement: (S, R, d)."""
    b = torch.randn(batch_size, *theta.shape, generator=gen, dtype=F64) @ CHOL.T
    return theta.detach() @ A_T + b


def sgd_chains(opt_factory, n_chains, n_steps, seed=0, observe=True):
    """Run ``n_chains`` chains (rows of one parameter) from 0; return the parameter and the optimizer."""
    theta = torch.zeros(n_chains, D, dtype=F64, requires_grad=True)
    opt, gen, lrs = opt_factory([theta]), torch.Generator().manual_seed(seed), []
    for _ in range(n_steps):
        g = per_example(theta, gen)
        theta.grad = g.mean(0)
        opt.step(first_example_grads=[g[0]] if observe else None)
        lrs.append(opt.param_groups[0]["lr"])
    return theta.detach().numpy(), opt, np.array(lrs)


# --------------------------------------------------------------------------- torch.optim.SGD bit for bit


def two_group_model(dtype):
    torch.manual_seed(0)
    w, b, v = torch.randn(4, 3, dtype=dtype), torch.randn(3, dtype=dtype), torch.randn(2, 2, dtype=dtype)
    return [t.clone().requires_grad_() for t in (w, b, v)]


def loss_terms(params, x):
    w, b, v = params
    return ((x @ w + b).tanh().pow(2).sum(1) + v.sin().sum()) / 2  # one term per example


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind", ["fixed", "fixed_observing", "kl_warmup"])
def test_a_fixed_rate_is_torch_sgd_bit_for_bit(dtype, kind):
    # a fixed rate, with or without the estimate, and the warm-up of lr="kl_optimal", are torch.optim.SGD
    ours, theirs = two_group_model(dtype), two_group_model(dtype)
    groups = lambda p: [{"params": p[:2]}, {"params": p[2:], "lr": 0.03}]  # noqa: E731
    if kind == "kl_warmup":
        opt = ConstantSGD(groups(ours), lr="kl_optimal", warmup_lr=0.1, warmup=100, num_data=50, batch_size=8)
    else:
        opt = ConstantSGD(groups(ours), lr=0.1, num_data=50, batch_size=8)
    sgd = torch.optim.SGD(groups(theirs), lr=0.1, foreach=True)
    x = torch.randn(60, 8, 4, generator=torch.Generator().manual_seed(1), dtype=dtype)
    for xb in x:
        g1 = None
        if kind != "fixed":
            g1 = torch.autograd.grad(loss_terms(ours, xb)[0], ours)
        for o, p in ((opt, ours), (sgd, theirs)):
            o.zero_grad()
            loss_terms(p, xb).mean().backward()
        opt.step(first_example_grads=g1)
        sgd.step()
        assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))
    assert (opt.pairs == 60) == (kind != "fixed")


# --------------------------------------------------------------------------- eq. 21 against sgsim.estimators


@pytest.mark.parametrize("replace", [True, False])
@pytest.mark.parametrize("unbias", [True, False])
def test_the_estimate_is_eq21s_online_estimator(replace, unbias):
    # the same pairs (g_1, g_S) fed to both, over two parameters: Tr and diagonal of OnlineNoiseCovariance
    rng = np.random.default_rng(3)
    n_data, s, d = 20, 5, 5
    ref = OnlineNoiseCovariance(d, s, n_data, replace=replace, unbias=unbias)
    opts = [
        cls([torch.zeros(2, dtype=F64), torch.zeros(1, 3, dtype=F64)], 0.1, n_data, s, replace=replace, unbias=unbias)
        for cls in (ConstantSGD, lambda *a, **k: PreconditionedSGD(a[0], a[1], 1.0, *a[2:], **k))
    ]
    for _ in range(40):
        g1, gs = rng.standard_normal(d), rng.standard_normal(d)
        ref.update(g1, gs)
        for opt in opts:
            p, q = opt.param_groups[0]["params"]
            p.grad, q.grad = torch.tensor(gs[:2]), torch.tensor(gs[2:]).reshape(1, 3)
            opt.step(first_example_grads=[torch.tensor(g1[:2]), torch.tensor(g1[2:]).reshape(1, 3)])
    cov = ref.covariance
    for opt in opts:
        assert opt.pairs == 40
        assert abs(opt.trace_c - np.trace(cov)) <= 1e-12 * np.trace(cov)
    diag = np.concatenate([t.numpy().ravel() for t in opts[1].c_diagonal()])
    assert np.allclose(diag, np.diag(cov), rtol=1e-12, atol=0)


# --------------------------------------------------------------------------- (a) the estimate of Tr C


def test_trace_estimate_converges_to_tr_c_and_the_paper_form_is_biased():
    r, t = 100, 300
    runs = {u: sgd_chains(lambda p, u=u: ConstantSGD(p, 0.05, N, S, unbias=u), r, t)[1] for u in (True, False)}
    truth = r * np.trace(C)  # Tr of the block-diagonal C of r chains
    # each step adds sum_r |g1 - gS|^2 / b, iid over steps (the noise does not depend on theta), with
    # g1 - gS ~ N(0, b C) per chain: variance 2 b^2 Tr(C^2) per chain, so SE = sqrt(2 r Tr(C^2) / t)
    se = np.sqrt(2 * r * np.trace(C @ C) / t)
    assert_within_se(runs[True].trace_c, truth, se, what="Tr C with the bias fixed")
    b = bias_factor(S, N, True)
    assert b == 1 - 1 / S
    assert_within_se(runs[False].trace_c, b * truth, b * se, what="the paper's form: (1 - 1/S) Tr C")
    # negative control: the paper's form is not an estimate of Tr C (1 - 1/S = 0.75, 25 % low)
    with pytest.raises(AssertionError, match="Tr C"):
        assert_within_se(runs[False].trace_c, truth, se, what="the paper's form as Tr C")


def test_trace_estimate_without_replacement_has_the_finite_population_factor():
    # a finite population of n = 10 centred per-example offsets, S = 4 distinct ones per step and chain
    n, r, t = 10, 200, 300
    rng = np.random.default_rng(5)
    offsets = rng.standard_normal((n, D)) @ np.linalg.cholesky(C).T
    offsets -= offsets.mean(0)
    c_pop = offsets.T @ offsets / n  # C = (1/N) sum_n (g_n - g)(g_n - g)^T, the conventions' definition
    off = torch.tensor(offsets)
    gen = torch.Generator().manual_seed(6)
    # two runs on the same minibatches, counted with the right factor and with the with-replacement one
    thetas = {rep: torch.zeros(r, D, dtype=F64, requires_grad=True) for rep in (False, True)}
    opts = {rep: ConstantSGD([thetas[rep]], 0.05, n, S, replace=rep) for rep in (False, True)}
    terms = []
    for _ in range(t):
        idx = torch.rand(r, n, generator=gen).argsort(1)[:, :S]  # a uniform S-subset per chain
        for rep, theta in thetas.items():
            g = theta.detach() @ A_T + off[idx].transpose(0, 1)  # (S, r, d)
            theta.grad = g.mean(0)
            opts[rep].step(first_example_grads=[g[0]])
        terms.append(float(((g[0] - g.mean(0)) ** 2).sum()))
    b = bias_factor(S, n, False)
    assert b == pytest.approx((1 - 1 / S) * n / (n - 1))
    # the per-step sums are iid over steps: SE from their sample standard deviation
    se = np.std(terms, ddof=1) / np.sqrt(t) / b
    assert_within_se(opts[False].trace_c, r * np.trace(c_pop), se, what="Tr C without replacement")
    # negative control: the with-replacement factor misses N / (N - 1) = 1.11
    with pytest.raises(AssertionError, match="Tr C"):
        assert_within_se(opts[True].trace_c, r * np.trace(c_pop), se, what="Tr C with the wrong factor")


def test_diagonal_estimate_converges_to_the_diagonal_of_c():
    r, t = 100, 300
    factory = lambda p: PreconditionedSGD(p, 1.0, "diagonal", N, S, warmup_lr=0.05, warmup=20)  # noqa: E731
    _, opt, _ = sgd_chains(factory, r, t)
    est = opt.c_diagonal()[0].numpy()  # (r, d): one estimate per chain and coordinate
    # per entry g1 - gS ~ N(0, b C_kk): each term / b has variance 2 C_kk^2; r t iid terms per coordinate
    assert_within_se(est.mean(0), np.diag(C), np.diag(C) * np.sqrt(2 / (r * t)), what="C_kk")
    assert_within_se(opt.trace_c, r * np.trace(C), np.sqrt(2 * r * np.trace(C @ C) / t), what="Tr C")
    with pytest.raises(AssertionError, match="C_kk"):  # negative control: the unfixed bias
        assert_within_se(est.mean(0) * (1 - 1 / S), np.diag(C), np.diag(C) * np.sqrt(2 / (r * t)), what="C_kk")


# --------------------------------------------------------------------------- (b) Theorem 1's rate


def kl_run(unbias=True, r=100, t=300, warmup=20):
    factory = lambda p: ConstantSGD(p, "kl_optimal", N, S, warmup_lr=0.05, warmup=warmup, unbias=unbias)  # noqa: E731
    return sgd_chains(factory, r, t)


def test_the_kl_optimal_rate_is_theorem_1():
    r, t, warmup = 100, 300, 20
    _, opt, lrs = kl_run(r=r, t=t, warmup=warmup)
    assert np.all(lrs[: warmup - 1] == 0.05) and np.all(lrs[warmup - 1 :] != 0.05)  # the switch at `warmup` pairs
    # the rate is 2 S D / (N Tr C_hat) of the current estimate, D = r d entries ...
    assert opt.current_lr == pytest.approx(2 * S * r * D / (N * opt.trace_c), rel=1e-12)
    # ... and Theorem 1's rate of the true C: delta method on Tr C_hat (SE as in the test of (a)),
    # with the second-order bias eps* (SE / Tr C)^2 of 1 / Tr C_hat as the known bias
    truth = kl.optimal_lr(C, N, S)
    assert truth == pytest.approx(2 * S * D / (N * np.trace(C)), rel=1e-15)
    rel_se = np.sqrt(2 * r * np.trace(C @ C) / t) / (r * np.trace(C))
    assert_within_se(opt.current_lr, truth, truth * rel_se, bias=truth * rel_se**2, what="Theorem 1's rate")
    # negative control: the paper's biased estimate gives a rate 1 / (1 - 1/S) = 4/3 too high
    _, biased, _ = kl_run(unbias=False, r=r, t=t, warmup=warmup)
    with pytest.raises(AssertionError, match="Theorem 1"):
        assert_within_se(biased.current_lr, truth, truth * rel_se, bias=truth * rel_se**2, what="Theorem 1's rate")


def numpy_kl_sgd(theta0, offsets, observe, lr0, warmup, n_data, s, replace, max_lr=None):
    """NumPy transcription of ConstantSGD(lr="kl_optimal"): eq. 21 with its bias fixed, Theorem 1, SGD."""
    b = (1 - 1 / s) * (1.0 if replace else n_data / (n_data - 1))
    f = 1.0 if replace else (n_data - s) / (n_data - 1)
    theta, mean_sq, pairs, rate, path = theta0.copy(), 0.0, 0, lr0, []
    for off, obs in zip(offsets, observe, strict=True):
        g = theta @ A + off  # (s, d)
        gs = g.mean(0)
        if obs:
            pairs += 1
            mean_sq += (np.sum((g[0] - gs) ** 2) - mean_sq) / pairs
        if pairs >= warmup:
            rate = 2 * s * theta.size / (n_data * f * mean_sq / b)
            rate = rate if max_lr is None else min(rate, max_lr)
        theta = theta - rate * gs
        path.append(theta)
    return np.array(path)


@pytest.mark.parametrize(("replace", "cap"), [(True, None), (False, None), (True, 0.5)])
def test_kl_optimal_sgd_matches_its_numpy_transcription(replace, cap):
    # two parameters (D = 3 entries in all), pairs on two steps of three: the rest use the standing estimate
    n_data, s, warmup, t = 40, 4, 5, 60
    rng = np.random.default_rng(7)
    offsets = rng.standard_normal((t, s, D)) @ np.linalg.cholesky(C).T
    observe = np.arange(t) % 3 != 2
    theta0 = np.array([1.0, -0.5, 0.25])
    max_lr = None if cap is None else cap * kl.optimal_lr(C, n_data, s)
    want = numpy_kl_sgd(theta0, offsets, observe, 0.05, warmup, n_data, s, replace, max_lr)
    w, v = torch.tensor(theta0[:2]).requires_grad_(), torch.tensor(theta0[2:]).requires_grad_()
    opt = ConstantSGD([w, v], "kl_optimal", n_data, s, warmup_lr=0.05, warmup=warmup, max_lr=max_lr, replace=replace)
    got = []
    for off, obs in zip(offsets, observe, strict=True):
        g = np.concatenate([w.detach().numpy(), v.detach().numpy()]) @ A + off
        gs = torch.tensor(g.mean(0))
        w.grad, v.grad = gs[:2].clone(), gs[2:].clone()
        opt.step(first_example_grads=[torch.tensor(g[0, :2]), torch.tensor(g[0, 2:])] if obs else None)
        got.append(np.concatenate([w.detach().numpy(), v.detach().numpy()]))
    assert np.max(np.abs(np.array(got) - want)) < 1e-12
    if cap is not None:
        assert opt.current_lr == max_lr  # the cap binds
    # negative control of the comparison: the rate of the paper's f = 1 without replacement, or no cap
    other = numpy_kl_sgd(theta0, offsets, observe, 0.05, warmup, n_data, s, not replace, None)
    assert np.max(np.abs(np.array(got) - other)) > 1e-6


# --------------------------------------------------------------------------- (c) the preconditioned steps


def numpy_preconditioned(theta0, offsets, observe, lr, h=None, warmup_lr=None, warmup=None, n_data=None, s=None,
                         h_max=None):  # fmt: skip
    """NumPy transcription of PreconditionedSGD: a fixed diagonal h, or Corollary 3 from eq. 21."""
    theta, var, pairs, path = theta0.copy(), np.zeros_like(theta0), 0, []
    for off, obs in zip(offsets, observe, strict=True):
        g = theta @ A + off
        gs = g.mean(0)
        if h is not None:
            theta = theta - lr * h * gs
        else:
            if obs:
                pairs += 1
                var += ((g[0] - gs) ** 2 - var) / pairs
            if pairs < warmup:
                theta = theta - warmup_lr * gs
            else:
                c_kk = var / (1 - 1 / s)  # with replacement: f = 1, b = 1 - 1/S
                with np.errstate(divide="ignore"):
                    hk = 2 * s / (n_data * c_kk)
                hk = np.where(c_kk > 0, hk, 0.0) if h_max is None else np.minimum(hk, h_max)
                theta = theta - lr * hk * gs
        path.append(theta)
    return np.array(path)


def torch_preconditioned(opt, params, offsets, observe):
    got = []
    for off, obs in zip(offsets, observe, strict=True):
        theta = np.concatenate([p.detach().numpy().ravel() for p in params])
        g = theta @ A + off
        gs, split = g.mean(0), np.cumsum([p.numel() for p in params])[:-1]
        for p, part in zip(params, np.split(gs, split), strict=True):
            p.grad = torch.tensor(part).reshape(p.shape)
        g1 = [torch.tensor(part).reshape(p.shape) for p, part in zip(params, np.split(g[0], split), strict=True)]
        opt.step(first_example_grads=g1 if obs else None)
        got.append(np.concatenate([p.detach().numpy().ravel() for p in params]))
    return np.array(got)


def preconditioned_inputs(t=50, zero_noise_coordinate=False):
    rng = np.random.default_rng(8)
    offsets = rng.standard_normal((t, S, D)) @ np.linalg.cholesky(C).T
    if zero_noise_coordinate:
        offsets[..., 1] = 0.0  # the examples agree on coordinate 1: C_11 = 0
    theta0 = np.array([1.0, -0.5, 0.25])
    params = [torch.tensor(theta0[:1]).requires_grad_(), torch.tensor(theta0[1:]).reshape(1, 2).requires_grad_()]
    return theta0, offsets, np.arange(t) % 4 != 3, params


@pytest.mark.parametrize("scalar", [False, True])
def test_a_fixed_preconditioner_matches_its_numpy_transcription(scalar):
    theta0, offsets, observe, params = preconditioned_inputs()
    h = np.full(D, 0.7) if scalar else np.array([0.5, 2.0, 0.25])
    pre = 0.7 if scalar else [torch.tensor(h[:1]), torch.tensor(h[1:]).reshape(1, 2)]
    opt = PreconditionedSGD(params, 0.4, pre, N, S)
    got = torch_preconditioned(opt, params, offsets, observe)
    want = numpy_preconditioned(theta0, offsets, observe, 0.4, h=h)
    assert np.max(np.abs(got - want)) < 1e-12
    # negative control of the comparison: the same steps without H
    assert np.max(np.abs(got - numpy_preconditioned(theta0, offsets, observe, 0.4, h=np.ones(D)))) > 1e-3


@pytest.mark.parametrize(("zero", "h_max"), [(False, None), (True, None), (True, 0.03)])
def test_corollary_3_preconditioner_matches_its_numpy_transcription(zero, h_max):
    # warm-up at warmup_lr, then H_kk = 2 S / (N C_kk); a coordinate without noise gets h_max, or 0
    theta0, offsets, observe, params = preconditioned_inputs(zero_noise_coordinate=zero)
    opt = PreconditionedSGD(params, 0.8, "diagonal", N, S, warmup_lr=0.05, warmup=6, max_preconditioner=h_max)
    got = torch_preconditioned(opt, params, offsets, observe)
    want = numpy_preconditioned(theta0, offsets, observe, 0.8, warmup_lr=0.05, warmup=6, n_data=N, s=S, h_max=h_max)
    assert np.max(np.abs(got - want)) < 1e-12
    h = np.concatenate([opt.state[p]["preconditioner"].numpy().ravel() for p in params])
    c_hat = np.concatenate([c.numpy().ravel() for c in opt.c_diagonal()])
    if not zero:
        # the rule is sgsim.theory.kl.diagonal_preconditioner's (Corollary 3) on the estimated diagonal
        assert np.allclose(h, np.diag(kl.diagonal_preconditioner(np.diag(c_hat), N, S)), rtol=1e-12, atol=0)
    else:
        assert c_hat[1] == 0 and h[1] == (0.0 if h_max is None else h_max)
    # negative control of the comparison: the paper's unfixed bias in H
    other = numpy_preconditioned(theta0, offsets, observe, 0.8 / (1 - 1 / S), warmup_lr=0.05, warmup=6, n_data=N,
                                 s=S, h_max=h_max)  # fmt: skip
    assert np.max(np.abs(got - other)) > 1e-6


# --------------------------------------------------------------------------- (d) the stationary covariance


def stationary_check(x, lr, what):
    # R iid chains: mean, variances and covariances with check_gaussian_law's SEs; the truth is the
    # exact discrete covariance, reached to (1 - lr lambda_min)^(2K) < 1e-23 after K = 100 steps
    check_gaussian_law(x, np.zeros(D), ou.sgd_cov(A, C, lr, S, exact=True), what=what)


def test_constant_sgd_reaches_its_exact_discrete_covariance():
    lr, k = 0.35, 100  # lr lambda_max(A) = 0.78: the OU and discrete laws differ by up to 64 %
    x, _, _ = sgd_chains(lambda p: ConstantSGD(p, lr), 4000, k, seed=2, observe=False)
    stationary_check(x, lr, "torch constant SGD")
    # negative controls: the law of a wrong rate, and the OU law (eq. 13) of the right one
    with pytest.raises(AssertionError, match="variance"):
        stationary_check(x, 0.75 * lr, "wrong rate")
    with pytest.raises(AssertionError, match="variance"):
        check_gaussian_law(x, np.zeros(D), ou.sgd_cov(A, C, lr, S), what="OU law")


# --------------------------------------------------------------------------- state_dict


def test_state_dict_carries_the_estimate():
    a = torch.zeros(5, D, dtype=F64, requires_grad=True)
    b = a.detach().clone().requires_grad_()
    make = lambda p: ConstantSGD([p], "kl_optimal", N, S, warmup_lr=0.05, warmup=10)  # noqa: E731
    first, gen = make(a), torch.Generator().manual_seed(4)
    for _ in range(15):
        g = per_example(a, gen)
        a.grad = g.mean(0)
        first.step(first_example_grads=[g[0]])
    with torch.no_grad():
        b.copy_(a)
    second = make(b)
    second.load_state_dict(copy.deepcopy(first.state_dict()))  # as saved to and read from disk
    assert second.pairs == 15 and second.trace_c == first.trace_c and second.current_lr == first.current_lr
    for _ in range(5):
        g = per_example(a, gen)
        for opt, p in ((first, a), (second, b)):
            p.grad = g.mean(0)
            opt.step(first_example_grads=[g[0]])
    assert torch.equal(a, b)


# --------------------------------------------------------------------------- (e) bad input


def params():
    return [torch.zeros(3, requires_grad=True)]


KL = dict(lr="kl_optimal", warmup_lr=0.1, num_data=10, batch_size=4)
DIAG = dict(lr=1.0, preconditioner="diagonal", warmup_lr=0.1, num_data=10, batch_size=4)
BAD = [
    (ConstantSGD, dict(lr=0.0), "lr"),
    (ConstantSGD, dict(lr=-1.0), "lr"),
    (ConstantSGD, dict(lr=float("nan")), "lr"),
    (ConstantSGD, dict(lr="fast"), "lr"),
    (ConstantSGD, dict(lr=0.1, num_data=10, batch_size=11), "batch_size"),
    (ConstantSGD, dict(lr=0.1, num_data=10, batch_size=0), "batch_size"),
    (ConstantSGD, dict(lr=0.1, num_data=0, batch_size=1), "num_data"),
    (ConstantSGD, dict(lr=0.1, num_data=10.5, batch_size=1), "num_data"),
    (ConstantSGD, dict(lr=0.1, num_data=10), "batch_size"),
    (ConstantSGD, dict(lr=0.1, batch_size=4), "num_data"),
    (ConstantSGD, dict(lr=0.1, warmup_lr=0.1), "warmup_lr"),
    (ConstantSGD, dict(lr=0.1, max_lr=1.0), "max_lr"),
    (ConstantSGD, dict(lr=0.1, replace="yes"), "replace"),
    (ConstantSGD, dict(lr=0.1, unbias=1), "unbias"),
    (ConstantSGD, {**KL, "warmup_lr": None}, "warmup_lr"),
    (ConstantSGD, {**KL, "warmup_lr": 0.0}, "warmup_lr"),
    (ConstantSGD, {**KL, "num_data": None, "batch_size": None}, "num_data"),
    (ConstantSGD, {**KL, "batch_size": 1}, "batch_size"),
    (ConstantSGD, {**KL, "batch_size": 10, "replace": False}, "batch_size"),
    (ConstantSGD, {**KL, "warmup": 0}, "warmup"),
    (ConstantSGD, {**KL, "max_lr": -1.0}, "max_lr"),
    (PreconditionedSGD, dict(lr=0.0, preconditioner=1.0), "lr"),
    (PreconditionedSGD, dict(lr=0.1, preconditioner=0.0), "preconditioner"),
    (PreconditionedSGD, dict(lr=0.1, preconditioner="adam"), "preconditioner"),
    (PreconditionedSGD, dict(lr=0.1, preconditioner=torch.ones(3)), "preconditioner"),
    (PreconditionedSGD, dict(lr=0.1, preconditioner=[]), "preconditioner"),
    (PreconditionedSGD, dict(lr=0.1, preconditioner=[torch.ones(2)]), "preconditioner"),
    (PreconditionedSGD, dict(lr=0.1, preconditioner=[torch.tensor([1.0, 0.0, 1.0])]), "preconditioner"),
    (PreconditionedSGD, dict(lr=0.1, preconditioner=[torch.tensor([1.0, float("inf"), 1.0])]), "preconditioner"),
    (PreconditionedSGD, dict(lr=0.1, preconditioner=1.0, max_preconditioner=1.0), "max_preconditioner"),
    (PreconditionedSGD, dict(lr=0.1, preconditioner=1.0, warmup_lr=0.1), "warmup_lr"),
    (PreconditionedSGD, {**DIAG, "warmup_lr": None}, "warmup_lr"),
    (PreconditionedSGD, {**DIAG, "num_data": None, "batch_size": None}, "num_data"),
    (PreconditionedSGD, {**DIAG, "batch_size": 1}, "batch_size"),
    (PreconditionedSGD, {**DIAG, "max_preconditioner": 0.0}, "max_preconditioner"),
]


@pytest.mark.parametrize(("opt_cls", "kwargs", "name"), BAD)
def test_each_bad_argument_is_named(opt_cls, kwargs, name):
    with pytest.raises((ParameterError, ParameterTypeError)) as info:
        opt_cls(params(), **kwargs)
    assert info.value.parameter == name and name in str(info.value)


def test_bad_params_steps_and_pairs_are_named():
    for bad in ([], iter([]), torch.zeros(3, requires_grad=True)):
        with pytest.raises((ParameterError, ParameterTypeError)) as info:
            ConstantSGD(bad, lr=0.1)
        assert info.value.parameter == "params"
    with pytest.raises(ParameterError) as info:
        ConstantSGD([{"params": params(), "lr": -1.0}], lr=0.1)
    assert info.value.parameter == "lr"
    p = params()
    p[0].grad = torch.ones(3)
    opt = ConstantSGD(p, lr=0.1)
    with pytest.raises(ParameterTypeError) as info:  # no N and S: the bias of eq. 21 is unknown
        opt.step(first_example_grads=[torch.ones(3)])
    assert info.value.parameter == "num_data"
    opt.param_groups[0]["lr"] = -0.5  # changed by hand: refused before the step does anything
    with pytest.raises(ParameterError, match="lr"):
        opt.step()
    opt = ConstantSGD(p, lr=0.1, num_data=10, batch_size=1)
    with pytest.raises(ParameterError) as info:
        opt.step(first_example_grads=[torch.ones(3)])
    assert info.value.parameter == "batch_size"
    opt = ConstantSGD(p, **KL)
    for bad in ([], [torch.ones(4)], [torch.ones(3, dtype=F64)], torch.ones(3), ["x"]):
        with pytest.raises((ParameterError, ParameterTypeError)) as info:
            opt.step(first_example_grads=bad)
        assert info.value.parameter == "first_example_grads"
    assert opt.pairs == 0 and float(p[0].detach().abs().sum()) == 0.0  # nothing happened
    # no noise at all after warm-up: Theorem 1's rate is undefined, and the error says why
    opt = ConstantSGD(p, **{**KL, "warmup": 2})
    opt.step(first_example_grads=[p[0].grad.clone()])
    with pytest.raises(ParameterError, match="noise is zero") as info:
        opt.step(first_example_grads=[p[0].grad.clone()])
    assert info.value.parameter == "first_example_grads"


# --------------------------------------------------------------------------- docstrings


def test_docstring_examples_run():
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(csgd, globs={}):
        runner.run(test)
    assert runner.tries > 0 and runner.failures == 0
