"""The sample store and model averaging of sgsim.torch.store: Algorithm R's uniform reservoir,
exact round trips, the model average against NumPy by hand, log-mean-exp against underflow, the
predictive entropy, the Gaussian mixture, the InferenceData, and bad input.

Skipped as a whole where PyTorch (the ``torch`` extra) is not installed.
"""

import doctest
import itertools
import math

import numpy as np
import pytest
from stats import assert_within_se

from sgsim._validate import ParameterError, ParameterTypeError

torch = pytest.importorskip("torch")

import sgsim.torch.store as ss  # noqa: E402
from sgsim.torch import make_generator  # noqa: E402
from sgsim.torch.store import SampleStore, predict  # noqa: E402

F64 = torch.float64


def randomise(module, gen, scale=1.0):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(scale * torch.randn(p.shape, generator=gen, dtype=p.dtype))


# --------------------------------------------------------------------------- reservoir sampling

N_ITEMS, K_KEEP, REPS = 8, 3, 3000


def reservoir_run(seed, n=N_ITEMS, k=K_KEEP, choose=None):
    """The steps (item ids) a reservoir of ``k`` keeps out of ``n`` offers; ``choose`` replaces Algorithm R."""
    store = SampleStore(max_samples=k, seed=seed)
    if choose is not None:
        store._choose_slot = choose.__get__(store)
    item = torch.zeros(1, dtype=F64)
    for m in range(n):
        item.fill_(m)
        store.add([item], step=m)
    kept = store.steps
    # each kept vector is the item offered at that step, in the order of the offers
    assert np.array_equal(store.vectors()[:, 0].numpy(), kept) and np.all(np.diff(kept) > 0)
    return kept


def last_slot(self, n):
    """A biased reservoir: admits sample n with Algorithm R's probability k / n, always into the last slot."""
    k = self.max_samples
    if n <= k:
        return n - 1
    j = int(torch.randint(n, (1,), generator=self.generator).item())
    return k - 1 if j < k else None


def check_reservoir(kept_sets, n=N_ITEMS, k=K_KEEP):
    """Per-item and per-subset frequencies of ``kept_sets`` against the uniform law of a size-k reservoir."""
    reps = len(kept_sets)
    member = np.zeros((reps, n))
    for r, kept in enumerate(kept_sets):
        member[r, kept] = 1
    # item i is kept with probability p = k / n in each independent run: SE of the frequency sqrt(p (1 - p) / R)
    p = k / n
    assert_within_se(member.mean(0), p, math.sqrt(p * (1 - p) / reps), what="per-item frequency")
    # every k-subset has probability q = 1 / C(n, k): the same binomial SE per cell
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(n), k))}
    counts = np.bincount([subsets[tuple(int(v) for v in kept)] for kept in kept_sets], minlength=len(subsets))
    q = 1 / len(subsets)
    assert_within_se(counts / reps, q, math.sqrt(q * (1 - q) / reps), what="per-subset frequency")


def test_the_reservoir_keeps_every_item_with_probability_k_over_n():
    check_reservoir([reservoir_run(seed) for seed in range(REPS)])


def test_the_reservoir_check_rejects_a_biased_reservoir():
    # negative control: the same check, the same seeds, a reservoir that always replaces its last slot
    with pytest.raises(AssertionError, match="per-item frequency"):
        check_reservoir([reservoir_run(seed, choose=last_slot) for seed in range(REPS)])


def test_the_reservoir_is_reproducible_and_on_its_own_stream():
    a, b, c = (reservoir_run(s, n=40, k=5) for s in (7, 7, 8))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    store = SampleStore(max_samples=2, seed=None)  # fresh entropy, recorded: the run replays from it
    again = SampleStore(max_samples=2, seed=store.seed)
    assert torch.equal(store.generator.get_state(), again.generator.get_state())
    # an optimizer seeded with the same number draws from another generator state
    assert not torch.equal(SampleStore(seed=7).generator.get_state(), make_generator(7).get_state())


def test_the_reservoir_draws_only_when_full_and_an_unbounded_store_keeps_all():
    store = SampleStore(max_samples=3, seed=1)
    state = store.generator.get_state()
    x = torch.zeros(2)
    assert all(store.add([x], step=s) for s in range(3))
    assert torch.equal(store.generator.get_state(), state)  # nothing drawn while filling
    kept = [store.add([x], step=s) for s in range(3, 50)]
    assert store.n_seen == 50 and len(store) == 3 and 0 < sum(kept) < 47
    assert all(kept[s - 3] for s in store.steps if s >= 3)  # what is held was reported kept
    everything = SampleStore(seed=1)
    for s in range(20):
        assert everything.add([x], step=s, cycle=s // 10)
    assert np.array_equal(everything.steps, np.arange(20)) and np.array_equal(everything.cycles, np.arange(20) // 10)


# --------------------------------------------------------------------------- the store's round trip


class Net(torch.nn.Module):
    """Parameters of several shapes and layouts: a channels-last convolution and a linear layer."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 3).to(memory_format=torch.channels_last)
        self.fc = torch.nn.Linear(4, 5)
        self.scale = torch.nn.Parameter(torch.ones(()))


def test_load_into_restores_every_parameter_exactly():
    gen = torch.Generator().manual_seed(0)
    net = Net()
    store = SampleStore()
    snapshots = []
    for s in range(4):
        randomise(net, gen)
        snapshots.append([p.detach().clone() for p in net.parameters()])
        assert store.add(net, step=s)
    assert store.dtype == torch.float32 and store.n_parameters == sum(p.numel() for p in net.parameters())
    randomise(net, gen)  # the store holds copies: changing the model afterwards changes nothing
    for i in (2, 0, 3, -3):
        store.load_into(net, i)
        assert all(torch.equal(p, q) for p, q in zip(net.parameters(), snapshots[i], strict=True))
    assert net.conv.weight.is_contiguous(memory_format=torch.channels_last)  # its layout kept
    # the flat vector is torch's parameters_to_vector of the (logical) parameters, in order
    flat = torch.nn.utils.parameters_to_vector(p.contiguous() for p in snapshots[1])
    assert torch.equal(store.vector(1), flat) and torch.equal(store.vectors()[1], flat)
    assert all(torch.equal(v, store.vector(i)) for i, v in enumerate(store))


def test_mixed_dtypes_are_stored_in_their_common_dtype_and_restored_exactly():
    a = torch.randn(3, dtype=torch.float32, generator=torch.Generator().manual_seed(1)) / 3
    b = torch.randn(2, 2, dtype=F64, generator=torch.Generator().manual_seed(2)) / 7
    store = SampleStore()
    store.add([a, b], step=0)
    assert store.dtype == F64
    x, y = torch.zeros_like(a), torch.zeros_like(b)
    store.load_into([x, y], 0)
    assert torch.equal(x, a) and torch.equal(y, b) and x.dtype == torch.float32
    half = SampleStore(dtype=torch.float16)  # an explicit, narrower dtype rounds, as asked
    half.add([b], step=0)
    assert half.vector(0).dtype == torch.float16 and torch.equal(half.vector(0), b.ravel().half())


def test_metadata_and_scalars_follow_the_samples():
    store = SampleStore(max_samples=4, seed=3)
    x = torch.zeros(1)
    for s in range(30):
        x.fill_(s)
        store.add([x], step=s + 1, cycle=s // 10, weight=0.5 + s, scalars={"train_loss": torch.tensor(2.0 * s)})
    steps = store.steps
    assert np.array_equal(store.vectors()[:, 0].numpy(), steps - 1)
    assert np.array_equal(store.cycles, (steps - 1) // 10)
    assert np.array_equal(store.weights, steps - 0.5)
    assert np.array_equal(store.scalars["train_loss"], 2.0 * (steps - 1))
    diverged = SampleStore()
    diverged.add([x], step=0, scalars={"train_loss": torch.tensor(float("nan"))})  # recorded as it is
    assert np.isnan(diverged.scalars["train_loss"][0])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_parameters_go_to_pinned_memory_and_come_back_exactly():
    net = Net().cuda()
    gen = torch.Generator().manual_seed(4)
    store = SampleStore(max_samples=3, seed=0)
    cpu_copies = []
    for s in range(3):
        with torch.no_grad():
            for p in net.parameters():
                p.copy_(torch.randn(p.shape, generator=gen))
        cpu_copies.append([p.detach().cpu() for p in net.parameters()])
        store.add(net, step=s)
    assert store.vector(0).device.type == "cpu" and store.vector(0).is_pinned()
    for i in range(3):
        store.load_into(net, i)
        assert all(torch.equal(p.cpu(), q) for p, q in zip(net.parameters(), cpu_copies[i], strict=True))


# --------------------------------------------------------------------------- classification: the model average

D, K, S, NX = 3, 4, 5, 11
GEN_X = np.random.default_rng(0)
X = GEN_X.standard_normal((NX, D))
Y = GEN_X.integers(0, K, NX)
W = GEN_X.uniform(0.1, 2.0, S)


def softmax_store(weights=None, scale=1.0, seed=5):
    """A linear softmax model and a store of S random samples of it, float64."""
    model = torch.nn.Linear(D, K).double()
    store, gen = SampleStore(), torch.Generator().manual_seed(seed)
    for s in range(S):
        randomise(model, gen, scale)
        store.add(model, step=s, weight=1.0 if weights is None else float(weights[s]))
    return model, store


def numpy_probs(store):
    """Each sample's softmax probabilities ``(S, n, K)``, by hand in NumPy from the stored vectors."""
    out = []
    for v in store.vectors().numpy():
        a, b = v[: K * D].reshape(K, D), v[K * D :]
        z = X @ a.T + b
        e = np.exp(z - z.max(1, keepdims=True))
        out.append(e / e.sum(1, keepdims=True))
    return np.array(out)


def test_bma_equals_the_mixture_by_hand():
    model, store = softmax_store(W)
    probs = numpy_probs(store)
    w = W / W.sum()
    mixture = np.einsum("s,snk->nk", w, probs)
    pred = predict(model, store, (torch.tensor(X), torch.tensor(Y)), batch_size=4)
    assert np.max(np.abs(pred.probs.numpy() - mixture)) < 1e-12
    assert np.allclose(pred.weights, w, rtol=1e-15, atol=0)
    # the model average's metrics and each sample's own
    assert pred.metrics()["test_error"] == np.mean(mixture.argmax(1) != Y)
    assert abs(pred.metrics()["test_nll"] + np.mean(np.log(mixture[np.arange(NX), Y]))) < 1e-12
    entropy = -np.sum(mixture * np.log(mixture), 1)
    assert np.max(np.abs(pred.entropy.numpy() - entropy)) < 1e-12
    own = probs[:, np.arange(NX), Y]
    assert np.max(np.abs(pred.per_sample["test_nll"] + np.log(own).mean(1))) < 1e-12
    assert np.array_equal(pred.per_sample["test_error"], (probs.argmax(2) != Y).mean(1))
    # explicit weights override the store's; uniform ones average plainly
    plain = predict(model, store, (torch.tensor(X), torch.tensor(Y)), weights=np.ones(S))
    assert np.max(np.abs(plain.probs.numpy() - probs.mean(0))) < 1e-12
    # negative control: averaging the logits instead of the probabilities is another predictive
    logits = torch.stack([torch.tensor(np.log(p)) for p in probs])
    assert np.max(np.abs(torch.softmax(logits.mean(0), -1).numpy() - probs.mean(0))) > 1e-3


def test_predict_by_loader_equals_by_tensors_and_restores_the_model():
    model, store = softmax_store(W)
    model.train()
    before = [p.detach().clone() for p in model.parameters()]
    x, y = torch.tensor(X), torch.tensor(Y)
    by_tensors = predict(model, store, (x, y), batch_size=3)
    batches = [(x[a : a + 3], y[a : a + 3]) for a in range(0, NX, 3)]
    by_loader = predict(model, store, batches)
    assert torch.allclose(by_loader.log_probs, by_tensors.log_probs, rtol=0, atol=1e-15)
    assert np.array_equal(by_loader.per_sample["test_error"], by_tensors.per_sample["test_error"])
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before, strict=True)) and model.training
    # inputs without targets: the model average only, the same
    no_targets = predict(model, store, x)
    assert torch.equal(no_targets.log_probs, predict(model, store, (x,)).log_probs)
    assert no_targets.targets is None and no_targets.per_sample == {} and set(no_targets.metrics()) == {"mean_entropy"}
    assert torch.allclose(no_targets.log_probs, by_tensors.log_probs, rtol=0, atol=1e-15)


def test_bma_helpers_match_predict():
    model, store = softmax_store(W)
    logits = []
    for i in range(len(store)):
        store.load_into(model, i)
        logits.append(model(torch.tensor(X)).detach())
    lp = ss.bma_log_probs(torch.stack(logits), weights=W)
    pred = predict(model, store, (torch.tensor(X), torch.tensor(Y)))
    assert torch.allclose(lp, pred.log_probs, rtol=0, atol=1e-14)
    assert ss.error_rate(lp, Y) == pred.metrics()["test_error"]
    assert abs(ss.nll(lp, Y) - pred.metrics()["test_nll"]) < 1e-14


# --------------------------------------------------------------------------- log-mean-exp against underflow


def naive_nll(per_sample_log_probs, y):
    """``-mean_i log(mean_s p_s(y_i))`` with the probabilities exponentiated first (underflows)."""
    p = np.exp(per_sample_log_probs)[:, np.arange(len(y)), y].mean(0)
    with np.errstate(divide="ignore"):
        return -np.mean(np.log(p))


def test_nll_equals_the_naive_formula_where_it_does_not_underflow():
    logits = np.random.default_rng(1).normal(scale=3.0, size=(S, NX, K))
    lp = logits - np.log(np.exp(logits).sum(2, keepdims=True))
    ours = ss.nll(ss.bma_log_probs(torch.tensor(logits)), Y)
    assert abs(ours - naive_nll(lp, Y)) < 1e-12 * max(1.0, abs(ours))


def test_nll_stays_finite_where_the_naive_formula_gives_inf():
    # two classes, target 1 with log p_s(1) = -c_s - log(1 + e^-c_s), c_s = 1000 + s: every probability
    # underflows, and the exact NLL is 1000 - log(mean_s e^-s) (the log1p term is below 1e-400)
    c = 1000.0 + np.arange(S)
    logits = np.zeros((S, 1, 2))
    logits[:, 0, 1] = -c
    y = np.array([1])
    exact = 1000.0 - np.log(np.mean(np.exp(-np.arange(S))))
    ours = ss.nll(ss.bma_log_probs(torch.tensor(logits)), y)
    assert abs(ours - exact) < 1e-12 * exact
    lp = logits - np.log(np.exp(logits).sum(2, keepdims=True))
    assert naive_nll(lp, y) == np.inf  # negative control: the naive formula underflows
    # and through predict: a model whose logits are that far apart
    model = torch.nn.Linear(1, 2, bias=False).double()
    store = SampleStore()
    for cs in c:
        with torch.no_grad():
            model.weight.copy_(torch.tensor([[0.0], [-cs]]))
        store.add(model, step=0)
    pred = predict(model, store, (torch.ones(1, 1, dtype=F64), torch.tensor(y)))
    assert abs(pred.metrics()["test_nll"] - exact) < 1e-12 * exact
    assert np.allclose(pred.per_sample["test_nll"], c, rtol=1e-15)


def test_log_mean_exp_weights_and_zero_weights():
    x = torch.tensor([[-800.0, 1.0], [-801.0, 2.0], [5.0, 3.0]], dtype=F64)
    w = torch.tensor([1.0, 3.0, 0.0], dtype=F64)
    got = ss.log_mean_exp(x, dim=0, weights=w)
    # a zero weight removes the sample; the rest by hand, shifted by the maximum
    want0 = -800 + math.log(0.25 + 0.75 * math.exp(-1))
    want1 = math.log(0.25 * math.e + 0.75 * math.e**2)
    assert torch.allclose(got, torch.tensor([want0, want1], dtype=F64), rtol=1e-15, atol=0)
    assert torch.allclose(ss.log_mean_exp(x, dim=1), torch.logsumexp(x, 1) - math.log(2), rtol=1e-15, atol=0)


# --------------------------------------------------------------------------- predictive entropy


def test_entropy_bounds_and_exact_values():
    logits = torch.tensor(np.random.default_rng(2).normal(scale=4.0, size=(S, 200, K)))
    h = ss.predictive_entropy(ss.bma_log_probs(logits))
    assert torch.all(h >= -1e-15) and torch.all(h <= math.log(K) + 1e-15)
    uniform = torch.full((1, K), -math.log(K), dtype=F64)
    assert abs(float(ss.predictive_entropy(uniform)[0]) - math.log(K)) < 1e-15
    certain = torch.log(torch.tensor([[0.0, 1.0, 0.0, 0.0]], dtype=F64))  # 0 log 0 = 0
    assert float(ss.predictive_entropy(certain)[0]) == 0.0
    p = 0.2
    binary = torch.log(torch.tensor([[p, 1 - p]], dtype=F64))
    assert abs(float(ss.predictive_entropy(binary)[0]) + p * math.log(p) + (1 - p) * math.log(1 - p)) < 1e-15
    # the average of two certain, disagreeing samples is the uniform two-class distribution: log 2
    two = torch.tensor([[[0.0, -1e300]], [[-1e300, 0.0]]], dtype=F64)
    assert abs(float(ss.predictive_entropy(ss.bma_log_probs(two))[0]) - math.log(2)) < 1e-15


# --------------------------------------------------------------------------- regression: the Gaussian mixture

TAU = 2.5
XR = np.random.default_rng(3).standard_normal((NX, D))
YR = np.random.default_rng(4).standard_normal(NX)


def regression_store(weights, outputs=1):
    model = torch.nn.Linear(D, outputs).double()
    store, gen = SampleStore(), torch.Generator().manual_seed(6)
    for s in range(S):
        randomise(model, gen)
        store.add(model, step=s, weight=float(weights[s]))
    mus = np.array([XR @ v[: outputs * D].reshape(outputs, D).T + v[outputs * D :] for v in store.vectors().numpy()])
    return model, store, mus  # mus (S, n, outputs)


def numpy_gaussian(mus, y, w):
    """Mixture mean, variance, and mean test log-likelihood, straight from the formulas."""
    w = w / w.sum()
    mean = np.einsum("s,sn...->n...", w, mus)
    var = 1 / TAU + np.einsum("s,sn...->n...", w, (mus - mean) ** 2)
    dens = np.sqrt(TAU / (2 * np.pi)) * np.exp(-0.5 * TAU * (y - mus) ** 2)  # (S, n, ...)
    per_input = dens.reshape(S, NX, -1).prod(2)
    return mean, var, np.mean(np.log(np.einsum("s,sn->n", w, per_input)))


def test_gaussian_mixture_metrics_equal_numpy():
    model, store, mus = regression_store(W)
    mean, var, ll = numpy_gaussian(mus[..., 0], YR, W)
    pred = predict(model, store, (torch.tensor(XR), torch.tensor(YR)), batch_size=4, likelihood="gaussian",
                   noise_precision=TAU)  # fmt: skip
    assert np.max(np.abs(pred.mean.numpy() - mean)) < 1e-12 and np.max(np.abs(pred.variance.numpy() - var)) < 1e-12
    m = pred.metrics()
    assert abs(m["test_rmse"] - np.sqrt(np.mean((YR - mean) ** 2))) < 1e-12
    assert abs(m["test_log_likelihood"] - ll) < 1e-12
    own_ll = np.mean(0.5 * np.log(TAU / (2 * np.pi)) - 0.5 * TAU * (YR - mus[..., 0]) ** 2, 1)
    assert np.max(np.abs(pred.per_sample["test_log_likelihood"] - own_ll)) < 1e-12
    assert np.max(np.abs(pred.per_sample["test_rmse"] - np.sqrt(np.mean((YR - mus[..., 0]) ** 2, 1)))) < 1e-12
    # the batch helpers give the same
    hm, hv = ss.gaussian_mixture(mus[..., 0], TAU, weights=W)
    assert np.max(np.abs(hm.numpy() - mean)) < 1e-12 and np.max(np.abs(hv.numpy() - var)) < 1e-12
    assert abs(ss.gaussian_log_likelihood(mus[..., 0], YR, TAU, weights=W) - ll) < 1e-12
    assert abs(ss.rmse(hm, YR) - m["test_rmse"]) < 1e-12
    # negative control: the noise variance alone (no spread between samples) is not the mixture's
    assert np.max(np.abs(var - 1 / TAU)) > 1e-2


def test_gaussian_with_several_outputs_adds_their_log_densities():
    model, store, mus = regression_store(np.ones(S), outputs=2)
    y = np.stack([YR, -YR], 1)
    mean, var, ll = numpy_gaussian(mus, y, np.ones(S))
    pred = predict(model, store, (torch.tensor(XR), torch.tensor(y)), likelihood="gaussian", noise_precision=TAU)
    assert np.max(np.abs(pred.variance.numpy() - var)) < 1e-12
    assert abs(pred.metrics()["test_log_likelihood"] - ll) < 1e-12


def test_gaussian_log_likelihood_stays_finite_where_the_densities_underflow():
    means = np.array([[0.0], [1.0]])  # (S=2, n=1)
    y, tau = np.array([60.0]), 1.0  # log-densities -1800 and -1741: exp underflows to 0
    ld = -0.5 * math.log(2 * math.pi) - 0.5 * (y[0] - means[:, 0]) ** 2
    exact = ld.max() + math.log(np.mean(np.exp(ld - ld.max())))
    assert abs(ss.gaussian_log_likelihood(means, y, tau) - exact) < 1e-12 * abs(exact)
    with np.errstate(divide="ignore"):
        assert np.log(np.mean(np.exp(ld))) == -np.inf  # negative control: the naive form


# --------------------------------------------------------------------------- InferenceData


def test_inference_data_holds_scalars_per_sample_not_weights():
    model, store = softmax_store(W)
    pred = predict(model, store, (torch.tensor(X), torch.tensor(Y)))
    idata = ss.to_inference_data(store, pred)
    assert sorted(idata.groups()) == ["constant_data", "posterior", "sample_stats"]
    stats = idata.sample_stats
    for name in ("step", "cycle", "bma_weight", "test_nll", "test_error"):
        assert stats[name].dims == ("chain", "draw") and stats[name].shape == (1, S), name
    assert np.array_equal(stats["step"].values[0], store.steps)
    assert np.array_equal(stats["bma_weight"].values[0], W)
    assert np.array_equal(stats["test_nll"].values[0], pred.per_sample["test_nll"])
    assert idata.posterior["theta"].shape == (1, S, 0)  # no network weights anywhere
    assert sum(v.size for g in idata.groups() for v in idata[g].data_vars.values()) == 5 * S
    assert idata.attrs["seed"] == store.seed and idata.attrs["n_seen"] == S and idata.attrs["max_samples"] == 0
    assert idata.attrs["bma_test_nll"] == pred.metrics()["test_nll"]
    # a mapping of per-sample scalars, with the store's own (e.g. the training loss)
    store2 = SampleStore(max_samples=3, seed=0)
    for s in range(6):
        store2.add(model, step=s, cycle=s // 3, scalars={"train_loss": 0.1 * s})
    idata2 = ss.to_inference_data(store2, {"custom": np.arange(3.0)})
    assert np.allclose(idata2.sample_stats["train_loss"].values[0], 0.1 * store2.steps)
    assert idata2.attrs["max_samples"] == 3 and idata2.sample_stats["custom"].shape == (1, 3)


def test_inference_data_round_trips_through_netcdf(tmp_path):
    from sgsim.io import read_result, write_result

    model, store = softmax_store(seed=1)
    idata = ss.to_inference_data(store, predict(model, store, (torch.tensor(X), torch.tensor(Y))))
    back = read_result(write_result(idata, tmp_path / "store.nc"))
    assert np.array_equal(back.sample_stats["test_error"].values, idata.sample_stats["test_error"].values)
    assert back.attrs["seed"] == store.seed


# --------------------------------------------------------------------------- bad input


def named(name, call, *args, **kwargs):
    with pytest.raises((ParameterError, ParameterTypeError)) as info:
        call(*args, **kwargs)
    assert info.value.parameter == name, (info.value.parameter, str(info.value))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(max_samples=0), "max_samples"),
        (dict(max_samples=-2), "max_samples"),
        (dict(max_samples=1.5), "max_samples"),
        (dict(max_samples=True), "max_samples"),
        (dict(seed=-1), "seed"),
        (dict(seed=0.5), "seed"),
        (dict(dtype=torch.int64), "dtype"),
        (dict(dtype="float64"), "dtype"),
        (dict(device="no such device"), "device"),
    ],
)
def test_bad_store_arguments_are_named(kwargs, name):
    named(name, SampleStore, **kwargs)


def test_bad_add_and_load_arguments_are_named():
    store = SampleStore()
    x = torch.zeros(2, 3)
    named("module_or_params", store.add, [], step=0)
    named("module_or_params", store.add, "weights", step=0)
    named("module_or_params", store.add, [torch.zeros(2, dtype=torch.long)], step=0)
    store.add([x], step=0, scalars={"train_loss": 1.0})
    named("module_or_params", store.add, [torch.zeros(3, 2)], step=1, scalars={"train_loss": 1.0})
    named("module_or_params", store.add, [x, x], step=1, scalars={"train_loss": 1.0})
    named("step", store.add, [x], step=-1)
    named("cycle", store.add, [x], step=1, cycle=-1)
    named("weight", store.add, [x], step=1, weight=-0.5)
    named("weight", store.add, [x], step=1, weight=float("nan"))
    named("scalars", store.add, [x], step=1, scalars={"step": 1.0})
    named("scalars", store.add, [x], step=1, scalars={"other": 1.0})
    named("scalars", store.add, [x], step=1, scalars=[1.0])
    named("scalars['train_loss']", store.add, [x], step=1, scalars={"train_loss": torch.ones(2)})
    assert store.n_seen == 1 and len(store) == 1  # nothing was added by a rejected call
    named("module_or_params", store.load_into, [torch.zeros(3, 3)], 0)
    named("i", store.load_into, [x], 1)
    named("i", store.load_into, [x], 0.0)


def test_bad_predict_arguments_are_named():
    model, store = softmax_store()
    x, y = torch.tensor(X), torch.tensor(Y)
    named("module", predict, lambda t: t, store, x)
    named("module", predict, torch.nn.Linear(D + 1, K).double(), store, x)
    named("store", predict, model, "store", x)
    named("store", predict, model, SampleStore(), x)
    named("likelihood", predict, model, store, x, likelihood="poisson")
    named("noise_precision", predict, model, store, x, likelihood="gaussian")
    named("noise_precision", predict, model, store, x, likelihood="gaussian", noise_precision=0.0)
    named("noise_precision", predict, model, store, x, noise_precision=1.0)
    named("weights", predict, model, store, x, weights=np.ones(S + 1))
    named("weights", predict, model, store, x, weights=-np.ones(S))
    named("weights", predict, model, store, x, weights=np.zeros(S))
    named("batch_size", predict, model, store, (x, y), batch_size=0)
    named("batch_size", predict, model, store, [(x, y)], batch_size=2)
    named("data", predict, model, store, (x, y[:-1]))
    named("data", predict, model, store, (x, y + K))
    named("data", predict, model, store, (x, y.double()))
    named("data", predict, model, store, 3.0)
    named("data", predict, model, store, [])
    named("data", predict, model, store, [(x, y), (x, None)])
    # a loader whose batches change between passes (a shuffling loader) is caught
    perms = iter(torch.randperm(NX, generator=torch.Generator().manual_seed(s)) for s in range(10 * S))

    class Shuffled:
        def __iter__(self):
            p = next(perms)
            yield x[p], y[p]

    named("data", predict, model, store, Shuffled())
    reg = torch.nn.Linear(D, 1).double()
    rstore = SampleStore()
    rstore.add(reg, step=0)
    named("data", predict, reg, rstore, (x, torch.zeros(NX, 2, dtype=F64)), likelihood="gaussian", noise_precision=1.0)


def test_bad_helper_and_results_arguments_are_named():
    lp = torch.log_softmax(torch.zeros(3, K, dtype=F64), -1)
    named("logits", ss.bma_log_probs, lp)
    named("targets", ss.nll, lp, [0, 1])
    named("targets", ss.error_rate, lp, [0.0, 1.0, 2.0])
    named("targets", ss.nll, lp, [0, 1, K])
    named("log_probs", ss.predictive_entropy, lp[0])
    named("weights", ss.log_mean_exp, lp, weights=[1.0, 2.0])
    named("noise_precision", ss.gaussian_mixture, np.zeros((2, 3)), -1.0)
    named("targets", ss.gaussian_log_likelihood, np.zeros((2, 3)), np.zeros(4), 1.0)
    named("targets", ss.rmse, np.zeros(3), np.zeros(2))
    model, store = softmax_store()
    named("store", ss.to_inference_data, SampleStore())
    named("store", ss.to_inference_data, [])
    named("metrics", ss.to_inference_data, store, {"test_nll": np.zeros(S - 1)})
    named("metrics", ss.to_inference_data, store, {"cycle": np.zeros(S)})
    named("metrics", ss.to_inference_data, store, np.zeros(S))


# --------------------------------------------------------------------------- docstrings


def test_docstring_examples_run():
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(ss, globs={}):
        runner.run(test)
    assert runner.tries > 0 and runner.failures == 0
