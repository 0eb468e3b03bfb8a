r"""The Bayesian neural network regression of "Stochastic Gradient MCMC with Repulsive Forces" (§4.2, Tables 4 and 5).

A network with one hidden layer of ``n_hidden = 50`` ReLU units is fitted to a UCI regression set by
SGLD with ``L = 20`` independent chains and by SGLD with repulsive forces (SGLD+R) with ``L = 20``
interacting particles; the test root mean squared error (RMSE) and the test log-likelihood of the
model average over particles and thinned iterations are reported as mean ± standard error over
random train/test splits. The paper gives minibatches of 100, 2000 iterations, 20 particles, a
step chosen from the grid ``{1e-5, ..., 1e-3}`` on another fold, and samples every 10 iterations
after a burn-in. It does not give the number of splits, their proportions, the burn-in, the
priors, the noise model or the units of its step; ours are stated here and fixed before any result
was seen.

Data. :func:`sgsim.datasets.load` ships Boston housing (506 tracts, 13 features) and Concrete
(1030 mixtures, 8 features) offline; the paper's other sets (Kin8nm, Naval, Protein, Wine, Yacht)
are not shipped. Each split is a seeded random permutation, ``test_fraction = 0.1`` of the rows for
testing and the rest (``round(0.9 n)``) for training, the protocol of the benchmark this setup
comes from (Hernández-Lobato and Adams, "Probabilistic Backpropagation", 2015: 20 splits of 90/10
for these sets). Features and target are standardised with the training split's mean and
standard deviation (:func:`sgsim.datasets.standardise_features`; population sd) and the test
split is scaled with the same numbers. The scores are reported in the target's original units
(thousands of dollars for Boston, MPa for Concrete).

Model and potential. With inputs :math:`x`, standardised targets :math:`\tilde y = (y - m_y) /
s_y`, the network :math:`f(x; \theta)` and ``N`` training pairs,

.. math::

    U(\theta) = \frac{\tau}{2} \sum_{i=1}^{N} \big(\tilde y_i - f(x_i; \theta)\big)^2
        + \frac{\lambda}{2} \lVert\theta\rVert^2 + \text{const}
      = N \Big(\underbrace{\frac1B \sum_{b \in \mathcal B} \frac{\tau}{2}
        \big(\tilde y_b - f(x_b; \theta)\big)^2 + \frac{\lambda}{2N} \lVert\theta\rVert^2}_{\text{minibatch
        loss}}\Big) \text{ in expectation},

a Gaussian likelihood of fixed noise precision :math:`\tau` (``noise_precision``, on the
standardised target) and a Gaussian prior of precision :math:`\lambda` (``prior_precision``) on
every weight and bias; the samplers are given the minibatch loss with ``num_data = N``
(``U = N * loss``) and temperature 1 (the posterior). Choices:

- :math:`\tau = 10` is fixed rather than sampled under a Gamma prior (as Probabilistic
  Backpropagation's model and SVGD's benchmark code do) because the model average of
  :func:`sgsim.torch.predict` takes one noise precision for all samples. The value says that the
  noise has about a third of the target's standard deviation, the level of the test RMSEs that
  published Bayesian networks reach on both sets (Boston: about 2.5-3 against an sd of 9.2;
  Concrete: about 5-6 against 16.7). It is the same for both sets and both samplers, and the test
  log-likelihood depends on it directly.
- :math:`\lambda = 1`: a standard normal prior on every weight of the standardised problem.

Samplers, with the same step ``learning_rate`` :math:`\epsilon` on ``U`` (:ref:`theory-step-units`)
and no ``1/L`` in SGLD+R's kernel sums (``normalise=False``, as the authors' code runs), so that the
two differ only in the diffusion, ``D = I`` for SGLD and ``D = K`` for SGLD+R (the paper's framing,
§4.1):

.. math::

    \text{SGLD (each chain } i\text{):}\quad
        \theta_i \leftarrow \theta_i - \epsilon \nabla\tilde U(\theta_i) + \sqrt{2\epsilon}\, \xi_i,
    \qquad
    \text{SGLD+R:}\quad
        Z \leftarrow Z + \epsilon\big(-K \nabla\tilde U(Z) + \Gamma\big) + \sqrt{2\epsilon}\, C_K \Xi,

with ``K`` the RBF kernel of the flattened parameters at the median bandwidth, ``Gamma`` its
repulsion (with the median bandwidth's part) and ``C_K`` its Cholesky factor
(:class:`sgsim.torch.SGLDRepulsive`; "Stochastic Gradient MCMC with Repulsive Forces", eqs. 5, 7
and 8 with the signs of :ref:`erratum-rep-gamma-sign`; :ref:`theory-repulsive-samplers`). The SGLD
baseline is :class:`sgsim.torch.SGLD` over the stacked parameters of the ``L`` networks (one
``(L, *shape)`` tensor per layer), each network's gradient computed with ``torch.func`` under
``torch.vmap`` as SGLD+R computes it: ``L`` independent chains, which is SGLD+R with ``K = I``
step for step. The repulsion stays on for the whole run (the paper notes it could be switched off
in the second half). ``learning_rate = 1e-5``: the smallest value of the paper's grid; on these
sets at :math:`\tau = 10` a step of ``5e-5`` diverges, so no larger decade of the grid is usable
in our units.

Networks and predictions. Each network is ``Linear(d, 50) - ReLU - Linear(50, 1)`` in float64,
its weights drawn from :math:`\mathcal N(0, 1 / (\text{fan-in} + 1))` and its biases 0 (the
initialisation of SVGD's benchmark code), independently for the ``L`` networks; both samplers
start from the same networks and see the same minibatches (``batch_size`` rows drawn without
replacement at every step). After ``burn_in`` steps the ``L`` networks of every ``thin``-th step
are kept in a :class:`sgsim.torch.SampleStore` and averaged with equal weights
(:func:`sgsim.torch.predict`, ``likelihood="gaussian"``): the predictive is the mixture
:math:`\frac1S \sum_s \mathcal N(\tilde y; f(x; \theta_s), \tau^{-1})`. In the original units,
:math:`y = m_y + s_y \tilde y`, so the RMSE is :math:`s_y` times the standardised one and the
log-likelihood per test point gains the Jacobian :math:`-\log s_y`:

.. math::

    \mathrm{LL} = \frac{1}{n} \sum_{j=1}^{n} \log \frac1S \sum_{s=1}^{S}
        \mathcal N\big(y_j;\, m_y + s_y f(x_j; \theta_s),\, s_y^2 / \tau\big)
      = \mathrm{LL}_{\text{standardised}} - \log s_y .

Budgets (:data:`QUICK`, :data:`FULL`). Full: the paper's 2000 iterations, a burn-in of 1000 (the
paper gives none; half the run), every 10th iteration kept (100 steps of 20 networks, 2,000
networks averaged), on 20 splits per set (the benchmark's number). Quick: 3 splits of 500
iterations (burn-in 250, every 10th kept), for a two-core CPU: the networks are far from trained
and the scores are not the paper's.

Seeds. Everything comes from ``seed`` through ``numpy.random.SeedSequence(seed, spawn_key=(45,
data set, split, stream))``: the split (stream 0, a NumPy permutation), the initial networks (1),
the minibatches (2) and the noise of SGLD (3) and of SGLD+R (4), each a ``torch.Generator``
(:func:`sgsim.torch.make_generator`); torch's global generator is neither used nor changed. The
same seed gives the same numbers on the same machine and thread count.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from ... import datasets
from ..._validate import ParameterError, ParameterTypeError, integer, positive_float, real
from ...experiments._common import progress_bar
from ..optim import SGLD, make_generator
from ..particles import SGLDRepulsive, _Particle
from ..store import SampleStore, predict

__all__ = [
    "DATASETS",
    "METHODS",
    "PAPER_TABLE4",
    "PAPER_TABLE5",
    "BNNConfig",
    "QUICK",
    "FULL",
    "config",
    "Split",
    "make_split",
    "make_network",
    "init_networks",
    "minibatch_loss",
    "IndependentSGLD",
    "make_sampler",
    "TrainedRun",
    "train",
    "Scores",
    "evaluate",
    "mean_predictor",
    "MethodRuns",
    "BNNResult",
    "run_bnn_regression",
]

#: The shipped regression sets, in the order of their seed streams.
DATASETS = ("boston", "concrete")
#: The samplers: key and label.
METHODS = (("sgld", "SGLD"), ("sgld_repulsive", "SGLD+R"))

#: [Rep] Table 4, average test log-likelihood: data set -> ((SGLD mean, se), (SGLD+R mean, se)).
PAPER_TABLE4 = {
    "Boston": ((-2.551, 0.018), (-2.575, 0.007)),
    "Kin8nm": ((0.826, 0.005), (0.831, 0.006)),
    "Naval": ((3.379, 0.011), (3.428, 0.019)),
    "Protein": ((-2.991, 0.000), (-2.987, 0.001)),
    "Wine": ((-0.765, 0.008), (-0.750, 0.007)),
    "Yacht": ((-1.211, 0.020), (-1.172, 0.026)),
}
#: [Rep] Table 5, average test RMSE: data set -> ((SGLD mean, se), (SGLD+R mean, se)).
PAPER_TABLE5 = {
    "Boston": ((2.392, 0.018), (2.295, 0.017)),
    "Kin8nm": ((0.104, 0.001), (0.104, 0.001)),
    "Naval": ((0.008, 0.000), (0.008, 0.000)),
    "Protein": ((4.810, 0.003), (4.794, 0.003)),
    "Wine": ((0.522, 0.004), (0.514, 0.004)),
    "Yacht": ((0.942, 0.015), (0.894, 0.029)),
}

_KEY = 45  # the experiment's first spawn-key word (Tables 4 and 5)
_SPLIT, _INIT, _BATCHES = 0, 1, 2
_NOISE = {"sgld": 3, "sgld_repulsive": 4}
_DTYPE = torch.float64


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class BNNConfig:
    """The settings of one run of the experiment (see the module docs for the defaults' reasons).

    Attributes
    ----------
    datasets : tuple of str
        Names of :data:`DATASETS` to run.
    n_splits : int
        Random train/test splits per data set.
    n_steps : int
        Iterations per sampler and split.
    burn_in : int
        Iterations discarded before the first kept one.
    thin : int
        Keep the networks of every ``thin``-th iteration after the burn-in (steps ``burn_in + thin``,
        ``burn_in + 2 thin``, ..., up to ``n_steps``).
    n_particles : int
        ``L``: chains of SGLD, particles of SGLD+R.
    n_hidden : int
        ReLU units of the hidden layer.
    batch_size : int
        Training rows per minibatch (all of them when the training split is smaller).
    test_fraction : float
        Share of the rows held out for testing, in (0, 1).
    learning_rate : float
        ``epsilon``, the step on the potential ``U`` of both samplers.
    noise_precision : float
        ``tau``, the precision of the Gaussian noise on the standardised target.
    prior_precision : float
        ``lambda``, the precision of the Gaussian prior on every weight and bias.
    n_threads : int
        torch's intra-op CPU threads during :func:`run_bnn_regression` (``torch.set_num_threads``,
        restored afterwards). 1 by default: networks this small gain nothing from more, and on a
        busy machine two threads per process made the steps ten times slower here.
    """

    datasets: tuple[str, ...] = DATASETS
    n_splits: int = 3
    n_steps: int = 500
    burn_in: int = 250
    thin: int = 10
    n_particles: int = 20
    n_hidden: int = 50
    batch_size: int = 100
    test_fraction: float = 0.1
    learning_rate: float = 1e-5
    noise_precision: float = 10.0
    prior_precision: float = 1.0
    n_threads: int = 1

    def __post_init__(self) -> None:
        names = self.datasets
        if isinstance(names, str) or not isinstance(names, Sequence) or not names:
            raise ParameterTypeError("datasets", f"datasets must be a non-empty sequence of names, got {names!r}")
        for name in names:
            if name not in DATASETS:
                raise ParameterError("datasets", f"unknown data set {name!r}; shipped: {', '.join(DATASETS)}")
        object.__setattr__(self, "datasets", tuple(names))
        integer("n_splits", self.n_splits, low=1)
        integer("n_steps", self.n_steps, low=1)
        integer("burn_in", self.burn_in, low=0)
        integer("thin", self.thin, low=1)
        if self.burn_in + self.thin > self.n_steps:
            raise ParameterError(
                "n_steps", f"n_steps ({self.n_steps}) must reach burn_in + thin ({self.burn_in + self.thin}): no sample"
            )
        integer("n_particles", self.n_particles, low=2)
        integer("n_hidden", self.n_hidden, low=1)
        integer("batch_size", self.batch_size, low=1)
        real("test_fraction", self.test_fraction, 0.0, 1.0, low_open=True, high_open=True)
        positive_float("learning_rate", self.learning_rate)
        positive_float("noise_precision", self.noise_precision)
        positive_float("prior_precision", self.prior_precision)
        integer("n_threads", self.n_threads, low=1)

    @property
    def kept_steps(self) -> np.ndarray:
        """The iterations whose networks are kept (1-based), int64."""
        return np.arange(self.burn_in + self.thin, self.n_steps + 1, self.thin, dtype=np.int64)

    @property
    def n_samples(self) -> int:
        """Networks in each model average: kept iterations times ``n_particles``."""
        return int(self.kept_steps.size) * self.n_particles


#: Quick mode: 3 splits of 500 iterations per set and sampler (all of it in about 20 s on two CPU
#: cores); the networks are far from trained.
QUICK = BNNConfig()
#: Full mode: the paper's 2000 iterations (burn-in 1000, every 10th kept) on 20 splits per set.
FULL = replace(QUICK, n_splits=20, n_steps=2000, burn_in=1000)


def config(full: bool = False, **changes) -> BNNConfig:
    """:data:`FULL` or :data:`QUICK`, with ``changes`` applied (e.g. ``n_splits=5``)."""
    return replace(FULL if full else QUICK, **changes)


def _seed(seed: int, dataset: str, split: int, stream: int) -> int:
    """A 128-bit integer seed of one stream of one split, derived from ``seed``."""
    key = (_KEY, DATASETS.index(dataset), split, stream)
    words = np.random.SeedSequence(seed, spawn_key=key).generate_state(2, np.uint64)
    return int(words[0]) | (int(words[1]) << 64)


# --------------------------------------------------------------------------- data and networks


@dataclass(frozen=True)
class Split:
    """One train/test split, standardised with the training split's statistics.

    Attributes
    ----------
    dataset : str
    index : int
        The split's number (its seed stream).
    x_train, x_test : ndarray
        Standardised features, ``(n_train, d)`` and ``(n_test, d)``, float64.
    y_train, y_test : ndarray
        Standardised targets ``(y - y_mean) / y_scale``, ``(n_train,)`` and ``(n_test,)``.
    y_mean, y_scale : float
        Mean and standard deviation (``ddof = 0``) of the training targets, in the target's units.
    train_rows, test_rows : ndarray
        The rows of the data set in each part, int64.
    """

    dataset: str
    index: int
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    y_mean: float
    y_scale: float
    train_rows: np.ndarray
    test_rows: np.ndarray

    @property
    def n_train(self) -> int:
        """Training rows ``N``."""
        return int(self.y_train.size)

    @property
    def n_features(self) -> int:
        """Input dimension ``d``."""
        return int(self.x_train.shape[1])

    @property
    def y_test_original(self) -> np.ndarray:
        """The test targets in their original units."""
        return self.y_mean + self.y_scale * self.y_test


def make_split(dataset: str, index: int, seed: int, test_fraction: float = 0.1) -> Split:
    """Split ``dataset`` at random into ``round((1 - test_fraction) n)`` training and the other test rows.

    Parameters
    ----------
    dataset : str
        A name of :data:`DATASETS`.
    index : int
        ``>= 0``: the split's number; splits of different numbers are independent permutations.
    seed : int
        The experiment's seed.
    test_fraction : float
        In (0, 1).

    Returns
    -------
    Split
    """
    if dataset not in DATASETS:
        raise ParameterError("dataset", f"unknown data set {dataset!r}; shipped: {', '.join(DATASETS)}")
    index = integer("index", index)
    frac = real("test_fraction", test_fraction, 0.0, 1.0, low_open=True, high_open=True)
    X, y = datasets.load(dataset, standardise=False)
    n = y.size
    n_train = int(round((1.0 - frac) * n))
    if not 1 < n_train < n:
        raise ParameterError("test_fraction", f"test_fraction {frac} leaves {n_train} of {n} rows for training")
    order = np.random.default_rng(_seed(seed, dataset, index, _SPLIT)).permutation(n)
    train, test = np.sort(order[:n_train]), np.sort(order[n_train:])
    x_train, x_mean, x_scale = datasets.standardise_features(X[train])
    y_mean, y_scale = float(y[train].mean()), float(y[train].std())
    return Split(
        dataset=dataset,
        index=index,
        x_train=x_train,
        y_train=(y[train] - y_mean) / y_scale,
        x_test=(X[test] - x_mean) / x_scale,
        y_test=(y[test] - y_mean) / y_scale,
        y_mean=y_mean,
        y_scale=y_scale,
        train_rows=train.astype(np.int64),
        test_rows=test.astype(np.int64),
    )


def make_network(n_features: int, n_hidden: int = 50) -> torch.nn.Sequential:
    """``Linear(d, n_hidden) - ReLU - Linear(n_hidden, 1)`` in float64, uninitialised (torch's generator untouched).

    Parameters
    ----------
    n_features, n_hidden : int
        Input dimension and hidden ReLU units.

    Returns
    -------
    ``torch.nn.Sequential``
        Parameters ``0.weight`` ``(n_hidden, d)``, ``0.bias``, ``2.weight`` ``(1, n_hidden)``, ``2.bias``.
    """
    d = integer("n_features", n_features, low=1)
    h = integer("n_hidden", n_hidden, low=1)
    return torch.nn.Sequential(
        torch.nn.utils.skip_init(torch.nn.Linear, d, h, dtype=_DTYPE),
        torch.nn.ReLU(),
        torch.nn.utils.skip_init(torch.nn.Linear, h, 1, dtype=_DTYPE),
    )


def init_networks(n_networks: int, n_features: int, n_hidden: int, generator: torch.Generator) -> list:
    """``n_networks`` networks of :func:`make_network`, weights ``N(0, 1 / (fan-in + 1))``, biases 0.

    Parameters
    ----------
    n_networks : int
        How many (independent draws, in order, from ``generator``).
    n_features, n_hidden : int
        The architecture.
    generator : ``torch.Generator``
        A CPU generator (:func:`~sgsim.torch.make_generator`).

    Returns
    -------
    list of ``torch.nn.Sequential``
    """
    nets = [make_network(n_features, n_hidden) for _ in range(integer("n_networks", n_networks, low=1))]
    with torch.no_grad():
        for net in nets:
            for layer in net:
                if not isinstance(layer, torch.nn.Linear):
                    continue
                sd = 1.0 / math.sqrt(layer.in_features + 1)
                layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator, dtype=_DTYPE) * sd)
                layer.bias.zero_()
    return nets


def minibatch_loss(model, x: torch.Tensor, y: torch.Tensor, num_data: int, noise_precision: float,
                   prior_precision: float) -> torch.Tensor:  # fmt: skip
    r"""One network's minibatch loss, :math:`U / N` in expectation (see the module docs).

    .. math::

        \frac1B \sum_b \frac\tau2 \big(y_b - f(x_b)\big)^2 + \frac{\lambda}{2N} \lVert\theta\rVert^2

    Parameters
    ----------
    model : callable
        ``model(x)`` the network's output ``(B, 1)``, ``model.params`` its parameters by name (as
        the ``model`` of :meth:`sgsim.torch.SGLDRepulsive.step`).
    x, y : ``torch.Tensor``
        The minibatch, ``(B, d)`` and ``(B,)``, standardised.
    num_data : int
        ``N``, the training rows.
    noise_precision, prior_precision : float
        ``tau`` and ``lambda``.

    Returns
    -------
    ``torch.Tensor``
        A scalar.
    """
    residual = model(x).squeeze(-1) - y
    prior = sum(p.square().sum() for p in model.params.values())
    return 0.5 * noise_precision * residual.square().mean() + (0.5 * prior_precision / num_data) * prior


# --------------------------------------------------------------------------- samplers


class IndependentSGLD:
    r"""``L`` independent SGLD chains over ``L`` copies of a module, with the interface of ``SGLDRepulsive``.

    The networks' parameters are stacked (``torch.func.stack_module_state``) into one
    ``(L, *shape)`` tensor per parameter, and one :class:`~sgsim.torch.SGLD` moves them all:
    :math:`\theta_i \leftarrow \theta_i - \epsilon \nabla\tilde U(\theta_i) + \sqrt{2 \epsilon T}\,
    \xi_i` for every chain ``i``, with each chain's gradient from ``torch.func.grad`` under
    ``torch.vmap`` (as :class:`~sgsim.torch.SGLDRepulsive` computes its particles'). The normals of a
    step are one ``torch.randn`` over all the chains' parameters, laid out parameter by parameter.

    Parameters
    ----------
    models : sequence of ``torch.nn.Module``
        ``L >= 1`` modules of one architecture (no buffers), initialised independently.
    lr : float
        ``epsilon > 0``, the step on ``U``.
    temperature : float
        ``T >= 0``.
    num_data : int, optional
        ``N``: the loss is a mean over ``N`` data points.
    generator : ``torch.Generator``, optional
        The source of the normals; or ``seed``.
    seed : int, optional
        Seed of a new generator (:func:`~sgsim.torch.make_generator`).

    Attributes
    ----------
    params : dict of str to ``torch.Tensor``
        The stacked parameters by name, ``(L, *shape)`` each.
    optimizer : ``sgsim.torch.SGLD``
        The optimizer over them.
    n_particles : int
        ``L``.
    """

    def __init__(self, models, lr: float, temperature: float = 1.0, num_data: int | None = None,
                 generator: torch.Generator | None = None, seed: int | None = None):  # fmt: skip
        models = list(models)
        if not models or not all(isinstance(m, torch.nn.Module) for m in models):
            raise ParameterTypeError("models", "models must be a non-empty sequence of torch.nn.Module")
        if any(True for _ in models[0].buffers()):
            raise ParameterError("models", "modules with buffers are not supported")
        params, _ = torch.func.stack_module_state(models)
        self.params: dict[str, torch.Tensor] = params
        self.n_particles: int = len(models)
        self._base = models[0]
        self.optimizer = SGLD(list(params.values()), lr=lr, temperature=temperature, num_data=num_data,
                              generator=generator, seed=seed)  # fmt: skip

    def step(self, loss_fn: Callable, *args, noise: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
        """One SGLD step of every chain.

        Parameters
        ----------
        loss_fn : callable
            ``loss_fn(model, *args)``, one network's loss, as for :meth:`sgsim.torch.SGLDRepulsive.step`.
        *args
            Shared by all chains (the minibatch).
        noise : list of ``torch.Tensor``, optional
            Standard normals replacing the drawn ones, one ``(L, *shape)`` tensor per parameter.

        Returns
        -------
        ``torch.Tensor``
            The ``L`` losses before the step.
        """
        base = self._base

        def one(params):
            return loss_fn(_Particle(base, params, {}), *args).reshape(())

        grads, losses = torch.vmap(torch.func.grad_and_value(one))({n: p.detach() for n, p in self.params.items()})
        for name, p in self.params.items():
            p.grad = grads[name]
        self.optimizer.step(noise=noise)
        return losses.detach()


def make_sampler(method: str, models, cfg: BNNConfig, num_data: int, generator: torch.Generator):
    """The sampler of ``method`` (a key of :data:`METHODS`) over ``models``, with ``cfg``'s step.

    Returns
    -------
    IndependentSGLD or ``sgsim.torch.SGLDRepulsive``
        Both with ``params`` (``(L, *shape)`` by name) and ``step(loss_fn, *args)``.
    """
    if method == "sgld":
        return IndependentSGLD(models, lr=cfg.learning_rate, num_data=num_data, generator=generator)
    if method == "sgld_repulsive":
        return SGLDRepulsive(models, lr=cfg.learning_rate, num_data=num_data, normalise=False, generator=generator)
    raise ParameterError("method", f"method must be one of {[m for m, _ in METHODS]}, got {method!r}")


# --------------------------------------------------------------------------- one run


@dataclass
class TrainedRun:
    """One sampler's run on one split.

    Attributes
    ----------
    method : str
    store : SampleStore
        The kept networks, ``cfg.n_samples`` of them: step by step, particle by particle.
    train_loss : ndarray
        ``(n_steps,)``: the mean over the ``L`` networks of the minibatch loss before each step.
    seconds : float
        Wall time of the sampling loop.
    """

    method: str
    store: SampleStore
    train_loss: np.ndarray
    seconds: float


def _tensor(a: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(np.ascontiguousarray(a), dtype=_DTYPE)


def train(method: str, split: Split, cfg: BNNConfig, seed: int) -> TrainedRun:
    """Run ``method`` on ``split`` for ``cfg.n_steps`` iterations and keep the thinned networks after the burn-in.

    The initial networks and the minibatches come from the split's streams (the same for both
    methods), the noise from the method's own.

    Parameters
    ----------
    method : str
        ``"sgld"`` or ``"sgld_repulsive"``.
    split : Split
    cfg : BNNConfig
    seed : int
        The experiment's seed.

    Returns
    -------
    TrainedRun
    """
    if method not in _NOISE:
        raise ParameterError("method", f"method must be one of {list(_NOISE)}, got {method!r}")
    n = split.n_train
    nets = init_networks(cfg.n_particles, split.n_features, cfg.n_hidden,
                         make_generator(_seed(seed, split.dataset, split.index, _INIT)))  # fmt: skip
    noise = make_generator(_seed(seed, split.dataset, split.index, _NOISE[method]))
    sampler = make_sampler(method, nets, cfg, n, noise)
    batches = make_generator(_seed(seed, split.dataset, split.index, _BATCHES))
    x, y = _tensor(split.x_train), _tensor(split.y_train)
    size = min(cfg.batch_size, n)
    kept = set(cfg.kept_steps.tolist())
    store = SampleStore()
    names = list(sampler.params)
    losses = np.empty(cfg.n_steps)

    def loss_fn(model, xb, yb):
        return minibatch_loss(model, xb, yb, n, cfg.noise_precision, cfg.prior_precision)

    t0 = time.perf_counter()
    for k in range(1, cfg.n_steps + 1):
        rows = torch.randperm(n, generator=batches)[:size]
        losses[k - 1] = float(sampler.step(loss_fn, x[rows], y[rows]).mean())
        if k in kept:
            for i in range(cfg.n_particles):
                store.add([sampler.params[name][i] for name in names], step=k)
    seconds = time.perf_counter() - t0
    return TrainedRun(method, store, losses, seconds)


@dataclass(frozen=True)
class Scores:
    """Test scores of a model average, in the target's original units.

    Attributes
    ----------
    rmse : float
        RMSE of the mixture mean.
    log_likelihood : float
        Mean log predictive density per test point (nats), the Jacobian ``-log y_scale`` included.
    """

    rmse: float
    log_likelihood: float


def evaluate(store: SampleStore, split: Split, cfg: BNNConfig) -> Scores:
    """Test RMSE and log-likelihood of the equal-weight model average over ``store`` (:func:`sgsim.torch.predict`).

    Parameters
    ----------
    store : SampleStore
        Networks of :func:`make_network`'s architecture for ``split``.
    split : Split
    cfg : BNNConfig
        Its ``n_hidden`` and ``noise_precision``.

    Returns
    -------
    Scores
    """
    net = make_network(split.n_features, cfg.n_hidden)
    pred = predict(net, store, (_tensor(split.x_test), _tensor(split.y_test)), likelihood="gaussian",
                   noise_precision=cfg.noise_precision)  # fmt: skip
    m = pred.metrics()
    return Scores(m["test_rmse"] * split.y_scale, m["test_log_likelihood"] - math.log(split.y_scale))


def mean_predictor(split: Split) -> Scores:
    """Scores of predicting ``N(y_mean, y_scale^2)`` for every test point (the training mean and sd)."""
    y = split.y_test  # standardised: the prediction is N(0, 1)
    ll = -0.5 * math.log(2 * math.pi) - 0.5 * float(np.mean(y**2)) - math.log(split.y_scale)
    return Scores(float(np.sqrt(np.mean(y**2))) * split.y_scale, ll)


# --------------------------------------------------------------------------- the experiment


@dataclass(frozen=True)
class MethodRuns:
    """One sampler on one data set, split by split.

    Attributes
    ----------
    dataset, method : str
    rmse, log_likelihood : ndarray
        ``(n_splits,)``: test scores in the original units (:class:`Scores`).
    seconds : ndarray
        ``(n_splits,)``: sampling wall time.
    final_loss : ndarray
        ``(n_splits,)``: mean minibatch loss over the last ``thin`` iterations (standardised units).
    """

    dataset: str
    method: str
    rmse: np.ndarray
    log_likelihood: np.ndarray
    seconds: np.ndarray
    final_loss: np.ndarray


@dataclass
class BNNResult:
    """The experiment's results.

    Attributes
    ----------
    config : BNNConfig
    seed : int
    runs : dict
        ``(dataset, method) -> MethodRuns``.
    baseline : dict
        ``dataset -> MethodRuns`` of the mean predictor (:func:`mean_predictor`; ``method = "mean"``,
        zero seconds and loss).
    n_train, n_test : dict
        ``dataset -> int``: rows of each part of a split.
    """

    config: BNNConfig
    seed: int
    runs: dict = field(default_factory=dict)
    baseline: dict = field(default_factory=dict)
    n_train: dict = field(default_factory=dict)
    n_test: dict = field(default_factory=dict)


def _collect(dataset: str, method: str, scores: list, seconds: list, loss: list) -> MethodRuns:
    rmse = np.array([s.rmse for s in scores])
    ll = np.array([s.log_likelihood for s in scores])
    return MethodRuns(dataset, method, rmse, ll, np.array(seconds, dtype=np.float64), np.array(loss, dtype=np.float64))


def run_bnn_regression(cfg: BNNConfig = QUICK, seed: int = 0, progress: bool = False) -> BNNResult:
    """Both samplers on ``cfg.n_splits`` splits of every data set of ``cfg``.

    Parameters
    ----------
    cfg : BNNConfig
        :data:`QUICK`, :data:`FULL` or :func:`config`'s.
    seed : int
        Non-negative: the splits, initial networks, minibatches and noise (see the module docs).
    progress : bool
        Show a progress bar over the runs.

    Returns
    -------
    BNNResult
        ``runs[dataset, method].rmse`` etc. of shape ``(cfg.n_splits,)``.
    """
    if not isinstance(cfg, BNNConfig):
        raise ParameterTypeError("cfg", f"cfg must be a BNNConfig, got {type(cfg).__name__}")
    seed = integer("seed", seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.n_threads)
    try:
        return _run(cfg, seed, progress)
    finally:
        torch.set_num_threads(threads)


def _run(cfg: BNNConfig, seed: int, progress: bool) -> BNNResult:
    result = BNNResult(cfg, seed)
    methods = [m for m, _ in METHODS]
    with progress_bar(len(cfg.datasets) * cfg.n_splits * len(methods), "BNN regression", progress) as bar:
        for dataset in cfg.datasets:
            acc: dict[str, tuple[list, list, list]] = {m: ([], [], []) for m in methods + ["mean"]}
            for r in range(cfg.n_splits):
                split = make_split(dataset, r, seed, cfg.test_fraction)
                result.n_train[dataset], result.n_test[dataset] = split.n_train, int(split.y_test.size)
                base = acc["mean"]
                base[0].append(mean_predictor(split))
                base[1].append(0.0)
                base[2].append(0.0)
                for method in methods:
                    run = train(method, split, cfg, seed)
                    scores, times, loss = acc[method]
                    scores.append(evaluate(run.store, split, cfg))
                    times.append(run.seconds)
                    loss.append(float(run.train_loss[-cfg.thin :].mean()))
                    bar.update(1)
            for method in methods:
                result.runs[dataset, method] = _collect(dataset, method, *acc[method])
            result.baseline[dataset] = _collect(dataset, "mean", *acc["mean"])
    return result
