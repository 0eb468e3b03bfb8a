r"""The uncertainty experiment of "Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning" (§5.4, Figure 4).

A three-layer MLP (two hidden ReLU layers and a linear output, ``784-100-100-10`` by default)
is trained on MNIST digits by eight methods, and the entropy of its predictive distribution is
measured on images of another kind (out of distribution, OOD), where the ideal prediction is
uniform over the ten classes, of entropy :math:`\log 10 \approx 2.30` nats. The paper plots the
empirical CDF of that entropy and finds that cSGLD and cSGHMC put the least probability on
low-entropy (over-confident) predictions.

Data. 5,000 MNIST digits (:func:`sgsim.datasets.load_mnist_5k`, pixels in [0, 1]), shuffled
with a seeded generator and split into ``n_train`` training and ``n_test`` test images (the
paper trains on MNIST's 60,000). OOD: Fashion-MNIST's test images
(:func:`sgsim.datasets.load_fashion_mnist`) when Debian's files are installed, else the letters
A-J rendered in matplotlib's fonts (:func:`sgsim.datasets.render_letters`), a **re-creation**
of the paper's notMNIST, which no offline package ships; ``ood`` chooses.

Model and potential. With a Gaussian prior of precision :math:`\lambda` on every weight and
bias, the potential of the :math:`N = n_\text{train}` training pairs is

.. math::

    U(\theta) = -\sum_{i=1}^{N} \log p(y_i \mid x_i, \theta) + \frac{\lambda}{2} \lVert\theta\rVert^2
        = N \Big(\underbrace{-\frac1N \sum_i \log p(y_i \mid x_i, \theta)
        + \frac{\lambda}{2N} \lVert\theta\rVert^2}_{\text{mean loss}}\Big),

and each step takes a minibatch of ``batch_size`` pairs: the loss is the minibatch's mean
cross-entropy plus :math:`\lambda \lVert\theta\rVert^2 / (2N)`, and the optimizers are given
``num_data = N`` (``U = N * loss``). The samplers target :math:`\exp(-U / T)`: ``temperature
= 1`` (the default) is the Bayesian posterior. The reference code of the paper runs its
networks at :math:`T = 1/N` on this :math:`U` (its noise :math:`\sqrt{2\epsilon T/N}` with
``T = 1/50000`` on the mean loss: a "cold" posterior); ``temperature`` is an option here, and
the default is not cold.

Units. ``learning_rate`` is :math:`\epsilon`, the step on the *mean* loss (as for
``torch.optim.SGD``); the optimizers get :math:`\alpha = \epsilon / N` on :math:`U`
(:ref:`theory-step-units`). The update of SGLD and SGHMC is that of :class:`~sgsim.torch.SGLD`
and :class:`~sgsim.torch.SGHMC` ("Cyclical Stochastic Gradient MCMC for Bayesian Deep
Learning", §2):

.. math::

    \theta_k = \theta_{k-1} - \alpha_k \nabla\tilde U(\theta_{k-1}) + \sqrt{2\alpha_k T_k}\,\xi_k,
    \qquad
    v_k = (1 - \eta) v_{k-1} - \alpha_k \nabla\tilde U(\theta_k) + \sqrt{2\eta\alpha_k T_k}\,\xi_k,
    \quad \theta_{k+1} = \theta_k + v_k.

Methods (:data:`METHODS`), each with the same initial weights and the same minibatches:

- SGD and SGDM: SGLD and SGHMC at :math:`T = 0` (exactly SGD, and heavy-ball SGD with
  momentum :math:`1 - \eta`), with the decreasing step sizes of SGLD below; one model, the
  last iterate.
- SGLD and SGHMC: decreasing step sizes :math:`\alpha_k = a (b + k)^{-0.55}`
  (:func:`sgsim.schedules.polynomial_decay`, [cSG] eq. 1), from :math:`\epsilon/N` at the
  first step down to ``final_fraction`` of it at the last; no noise (:math:`T = 0`) for the
  first ``1 - sampling_fraction`` of the steps, then :math:`T` = ``temperature``, as the paper
  runs its SG-MCMC baselines (§5.2: noise only in the last 50 of 200 epochs); ``n_samples``
  samples evenly spaced over the noisy steps, the last at the end.
- Snapshot-SGD and Snapshot-SGDM (Huang et al., "Snapshot ensembles: train 1, get M for free"):
  the cosine cycles of :func:`sgsim.schedules.cyclical` ([cSG] eq. 2) with ``n_cycles``
  cycles from :math:`\alpha_0 = \epsilon/N`, at :math:`T = 0` throughout; one snapshot at the
  end of each cycle.
- cSGLD and cSGHMC: the same cycles, exploring at :math:`T = 0` for the first
  ``explore_fraction`` of each and sampling at :math:`T` = ``temperature`` for the rest
  (:class:`~sgsim.torch.ScheduleDriver`); ``samples_per_cycle`` samples evenly spaced over each
  sampling stage, the last at the end of the cycle.

The momentum methods use ``momentum_learning_rate`` (default :math:`\eta\,\epsilon`, so that the
heavy ball's effective step :math:`\alpha/\eta` equals the first-order methods' :math:`\alpha`).
The samples of a method are kept in a :class:`~sgsim.torch.SampleStore` and averaged with equal
weights (:func:`~sgsim.torch.predict`, Bayesian model averaging): test error, test NLL (nats per
image) and the predictive entropy (nats) of every test and OOD image.

Seeds. Everything comes from ``seed`` through ``numpy.random.SeedSequence(seed,
spawn_key=(0x554E43, stream, method))``: the split (stream 0), the OOD letters (1), the initial
weights (2, drawn from a ``torch.Generator`` with PyTorch's default ``nn.Linear`` law
:math:`U(-1/\sqrt{\text{fan-in}}, 1/\sqrt{\text{fan-in}})`, without touching torch's global
generator), the minibatch order (3, a fresh permutation each epoch, dropping the remainder) and
each method's noise (4). Initial weights and minibatches are shared by the methods (common
random numbers); the same seed gives the same numbers on the same machine and thread count.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from ... import datasets
from ... import schedules as _schedules
from ..._validate import ParameterError, ParameterTypeError, integer, positive_float, real
from ...experiments._common import progress_bar
from ..optim import SGHMC, SGLD, make_generator
from ..schedule import ScheduleDriver
from ..store import Predictions, SampleStore, predict

__all__ = [
    "N_CLASSES",
    "MAX_ENTROPY",
    "DECAY_EXPONENT",
    "METHODS",
    "Method",
    "UncertaintyConfig",
    "QUICK",
    "FULL",
    "config",
    "MethodResult",
    "UncertaintyResult",
    "run_uncertainty",
    "mnist_split",
    "ood_images",
    "make_mlp",
    "method_schedule",
    "kept_steps",
    "train_method",
    "evaluate",
    "empirical_cdf",
]

#: Number of classes.
N_CLASSES = 10
#: ``log 10``, the entropy of the uniform prediction over the classes (nats).
MAX_ENTROPY = math.log(N_CLASSES)

#: Exponent of the decreasing schedules ([cSG] eq. 1 and its experiments: 0.55).
DECAY_EXPONENT = 0.55

# first word of every spawn key of this experiment ("UNC" in ASCII): sgsim's own streams start
# with a chain or replica index, which would have to reach 5.5 million to meet it
_KEY = 0x554E43
_SPLIT, _LETTERS, _INIT, _BATCHES, _NOISE = range(5)


@dataclass(frozen=True)
class Method:
    """One method of Figure 4.

    Attributes
    ----------
    key : str
        Short name, e.g. ``"csgld"``.
    label : str
        The paper's name, e.g. ``"cSGLD"``.
    sampler : str
        ``"sgld"`` (first order) or ``"sghmc"`` (momentum).
    schedule : str
        ``"decay"`` (:func:`sgsim.schedules.polynomial_decay`) or ``"cyclical"``.
    noisy : bool
        Whether it samples at the temperature (else ``T = 0`` throughout: an optimizer).
    description : str
        One line: the schedule, the temperature and the samples kept.
    """

    key: str
    label: str
    sampler: str
    schedule: str
    noisy: bool
    description: str


#: The eight methods, in the order of the figure's legend.
METHODS: tuple[Method, ...] = (
    Method("sgd", "SGD", "sgld", "decay", False, "decreasing steps, T = 0: the last iterate"),
    Method("sgdm", "SGDM", "sghmc", "decay", False, "as SGD, with momentum"),
    Method("snapshot_sgd", "Snapshot-SGD", "sgld", "cyclical", False, "cosine cycles, T = 0: the end of each cycle"),
    Method("snapshot_sgdm", "Snapshot-SGDM", "sghmc", "cyclical", False, "as Snapshot-SGD, with momentum"),
    Method("sgld", "SGLD", "sgld", "decay", True, "decreasing steps, noise in the last ones: samples there"),
    Method("sghmc", "SGHMC", "sghmc", "decay", True, "as SGLD, with momentum"),
    Method("csgld", "cSGLD", "sgld", "cyclical", True, "cosine cycles: explore at T = 0, then sample"),
    Method("csghmc", "cSGHMC", "sghmc", "cyclical", True, "as cSGLD, with momentum"),
)
_BY_KEY = {m.key: m for m in METHODS}


@dataclass(frozen=True)
class UncertaintyConfig:
    """The settings of one run of the experiment (units in the module docs).

    Attributes
    ----------
    n_train, n_test : int
        Training and test images drawn from the 5,000 MNIST digits (``n_train + n_test <= 5000``).
    n_ood : int
        OOD images: a multiple of 10 for the letters (``n_ood / 10`` per letter), a random
        subset of Fashion-MNIST's 10,000 test images otherwise.
    ood : str
        ``"auto"`` (Fashion-MNIST if installed, else letters), ``"letters"`` or ``"fashion"``.
    hidden : tuple of int
        Widths of the hidden ReLU layers.
    batch_size : int
        Minibatch size; ``n_train // batch_size`` steps per epoch.
    n_epochs : int
        Epochs of every method (the same number of steps for all).
    learning_rate : float
        ``epsilon > 0``, the largest step on the mean loss (SGD-type methods).
    momentum_learning_rate : float or None
        The same for the momentum methods; None takes ``friction * learning_rate``.
    friction : float
        ``eta`` in (0, 1]: the momentum methods keep ``1 - eta`` of their velocity per step.
    prior_precision : float
        ``lambda > 0``, the precision of the Gaussian prior on every parameter (of ``U``).
    temperature : float
        ``T > 0`` of the sampling steps (1: the posterior; the reference code's cold ``1 / N``
        is ``1 / n_train``).
    n_cycles : int
        ``M``, the cycles of the cyclical methods (``n_epochs`` a multiple of it is tidy, not
        required).
    explore_fraction : float
        ``beta`` in [0, 1): the exploration part of each cycle of cSGLD and cSGHMC.
    samples_per_cycle : int
        Samples of cSGLD and cSGHMC per cycle.
    sampling_fraction : float
        In (0, 1]: the last part of the steps of SGLD and SGHMC that is noisy.
    n_samples : int
        Samples of SGLD and SGHMC.
    final_fraction : float
        In (0, 1): the decreasing schedule's last step size over its first.
    eval_batch_size : int
        Images per forward pass at evaluation.
    """

    n_train: int = 4000
    n_test: int = 1000
    n_ood: int = 1000
    ood: str = "auto"
    hidden: tuple[int, ...] = (100, 100)
    batch_size: int = 100
    n_epochs: int = 20
    learning_rate: float = 0.5
    momentum_learning_rate: float | None = None
    friction: float = 0.1
    prior_precision: float = 1.0
    temperature: float = 1.0
    n_cycles: int = 4
    explore_fraction: float = 0.8
    samples_per_cycle: int = 3
    sampling_fraction: float = 0.25
    n_samples: int = 20
    final_fraction: float = 0.1
    eval_batch_size: int = 1000

    def __post_init__(self) -> None:
        integer("n_train", self.n_train, low=1)
        integer("n_test", self.n_test, low=1)
        if self.n_train + self.n_test > 5000:
            raise ParameterError("n_test", f"n_train + n_test must be <= 5000, got {self.n_train + self.n_test}")
        integer("n_ood", self.n_ood, low=1)
        if self.ood not in ("auto", "letters", "fashion"):
            raise ParameterError("ood", f"ood must be 'auto', 'letters' or 'fashion', got {self.ood!r}")
        if not self.hidden or any(integer("hidden", h, low=1) != h for h in self.hidden):
            raise ParameterError("hidden", f"hidden must hold at least one width >= 1, got {self.hidden!r}")
        integer("batch_size", self.batch_size, low=1, high=self.n_train)
        integer("n_epochs", self.n_epochs, low=1)
        positive_float("learning_rate", self.learning_rate)
        if self.momentum_learning_rate is not None:
            positive_float("momentum_learning_rate", self.momentum_learning_rate)
        real("friction", self.friction, 0.0, 1.0, low_open=True)
        positive_float("prior_precision", self.prior_precision)
        positive_float("temperature", self.temperature)
        integer("n_cycles", self.n_cycles, low=1, high=self.n_steps)
        real("explore_fraction", self.explore_fraction, 0.0, 1.0, high_open=True)
        integer("samples_per_cycle", self.samples_per_cycle, low=1)
        real("sampling_fraction", self.sampling_fraction, 0.0, 1.0, low_open=True)
        integer("n_samples", self.n_samples, low=1)
        real("final_fraction", self.final_fraction, 0.0, 1.0, low_open=True, high_open=True)
        integer("eval_batch_size", self.eval_batch_size, low=1)

    @property
    def steps_per_epoch(self) -> int:
        """``n_train // batch_size``."""
        return self.n_train // self.batch_size

    @property
    def n_steps(self) -> int:
        """``K``, the steps of every method."""
        return self.n_epochs * self.steps_per_epoch

    @property
    def momentum_lr(self) -> float:
        """``epsilon`` of the momentum methods: ``momentum_learning_rate``, or ``friction * learning_rate``."""
        if self.momentum_learning_rate is None:
            return self.friction * self.learning_rate
        return self.momentum_learning_rate

    def lr(self, method: Method) -> float:
        """``epsilon`` of ``method`` on the mean loss."""
        return self.momentum_lr if method.sampler == "sghmc" else self.learning_rate


#: Quick mode: 20 epochs of 40 steps per method, 4 cycles of 5 epochs (all eight methods in
#: about 10 s on one CPU thread).
QUICK = UncertaintyConfig()
#: Full mode: the paper's budget for its networks (§5.2: 200 epochs, M = 4 cycles, beta = 0.8
#: for CIFAR-10, 3 samples per cycle; noise in the last 50 epochs and 20 samples for SGLD and
#: SGHMC); the paper gives none for the MLP ("until convergence"). 5,000 OOD images; about
#: 80 s on one CPU thread.
FULL = replace(QUICK, n_epochs=200, n_ood=5000)


def config(full: bool = False, **changes) -> UncertaintyConfig:
    """:data:`FULL` or :data:`QUICK`, with ``changes`` applied.

    Parameters
    ----------
    full : bool
        The full budget (:data:`FULL`) rather than the quick one (:data:`QUICK`).
    **changes
        Fields of :class:`UncertaintyConfig` to change, e.g. ``temperature=1 / 4000`` for the
        reference code's cold posterior.

    Returns
    -------
    UncertaintyConfig
        The settings, checked.
    """
    return replace(FULL if full else QUICK, **changes)


def _seed(seed: int, stream: int, index: int = 0) -> int:
    """A 128-bit integer seed of one stream of the experiment, derived from ``seed``."""
    words = np.random.SeedSequence(seed, spawn_key=(_KEY, stream, index)).generate_state(2, np.uint64)
    return int(words[0]) | (int(words[1]) << 64)


# --------------------------------------------------------------------------- data and model


def mnist_split(n_train: int, n_test: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A seeded random split of the 5,000 MNIST digits (pixels in [0, 1]).

    Parameters
    ----------
    n_train, n_test : int
        Sizes, ``n_train + n_test <= 5000``; the rest is unused.
    seed : int
        The experiment's seed (the permutation is drawn on its own stream).

    Returns
    -------
    x_train : ndarray
        ``(n_train, 784)`` images, float32.
    y_train : ndarray
        ``(n_train,)`` labels 0-9, int64.
    x_test : ndarray
        ``(n_test, 784)`` images, float32.
    y_test : ndarray
        ``(n_test,)`` labels, int64.
    """
    X, y = datasets.load("mnist_5k")
    order = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_KEY, _SPLIT))).permutation(len(y))
    train, test = order[:n_train], order[n_train : n_train + n_test]
    return (X[train].astype(np.float32), y[train].astype(np.int64), X[test].astype(np.float32),
            y[test].astype(np.int64))  # fmt: skip


def ood_images(n: int, kind: str = "auto", seed: int = 0) -> tuple[np.ndarray, str]:
    """``n`` out-of-distribution images (float32, pixels in [0, 1]) and the name of their set.

    Parameters
    ----------
    n : int
        Number of images: a multiple of 10 for the letters, at most 10,000 for Fashion-MNIST.
    kind : str
        ``"letters"``: :func:`sgsim.datasets.render_letters` (a re-creation of notMNIST);
        ``"fashion"``: a seeded subset of Fashion-MNIST's test images; ``"auto"``: Fashion-MNIST
        when its files are installed, else the letters.
    seed : int
        The experiment's seed (the letters and the subset are drawn on their own stream).

    Returns
    -------
    X : ndarray, float32 of shape (n, 784)
        The images, row by row.
    name : str
        ``"letters"`` or ``"fashion"``.
    """
    n = integer("n_ood", n, low=1)
    if kind not in ("auto", "letters", "fashion"):
        raise ParameterError("ood", f"ood must be 'auto', 'letters' or 'fashion', got {kind!r}")
    if kind in ("auto", "fashion"):
        try:
            X, _ = datasets.load_fashion_mnist()
        except FileNotFoundError:
            if kind == "fashion":
                raise
        else:
            if n > len(X):
                raise ParameterError("n_ood", f"n_ood must be <= {len(X)} for Fashion-MNIST, got {n}")
            rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_KEY, _LETTERS)))
            return X[np.sort(rng.choice(len(X), n, replace=False))].astype(np.float32), "fashion"
    if n % N_CLASSES:
        raise ParameterError("n_ood", f"n_ood must be a multiple of {N_CLASSES} for the letters, got {n}")
    X, _ = datasets.render_letters(n // N_CLASSES, _seed(seed, _LETTERS) % 2**63)
    return X.astype(np.float32), "letters"


def make_mlp(hidden: Sequence[int], seed: int, n_in: int = 784, n_out: int = N_CLASSES) -> torch.nn.Sequential:
    r"""The MLP ``n_in - hidden... - n_out`` with ReLUs, initialised from ``seed`` (float32, CPU).

    Every weight and bias is drawn from :math:`U(-1/\sqrt{f}, 1/\sqrt{f})`, ``f`` the layer's
    fan-in (PyTorch's default law for ``nn.Linear``), by a ``torch.Generator`` made from
    ``seed`` (:func:`~sgsim.torch.make_generator`), so that torch's global generator is
    neither used nor changed.

    Parameters
    ----------
    hidden : sequence of int
        Widths of the hidden layers (two for the paper's three-layer MLP).
    seed : int
        Non-negative seed of the initial weights.
    n_in, n_out : int
        Input and output sizes.

    Returns
    -------
    ``torch.nn.Sequential``
        ``Linear, ReLU, ..., Linear``: logits of ``n_out`` classes.
    """
    widths = [n_in, *hidden, n_out]
    layers: list[torch.nn.Module] = []
    for a, b in zip(widths[:-1], widths[1:], strict=True):
        # skip_init: torch's own initialisation would draw from (and move) its global generator
        layers += [torch.nn.utils.skip_init(torch.nn.Linear, a, b), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    gen = make_generator(seed)
    with torch.no_grad():
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                bound = 1.0 / math.sqrt(layer.in_features)
                for p in (layer.weight, layer.bias):
                    p.copy_(torch.rand(p.shape, generator=gen) * (2 * bound) - bound)
    return model


# --------------------------------------------------------------------------- schedules


def method_schedule(method: Method, cfg: UncertaintyConfig) -> _schedules.Schedule:
    """The step sizes (on ``U``) and temperatures of ``method``, one per step.

    Parameters
    ----------
    method : Method
        One of :data:`METHODS`.
    cfg : UncertaintyConfig
        The settings.

    Returns
    -------
    Schedule
        Decreasing (:func:`sgsim.schedules.polynomial_decay`, ``alpha_k = a (b + k)^-0.55`` from
        ``alpha_1 = alpha_0 = epsilon / N`` to ``alpha_K = final_fraction * alpha_0``, or less
        decay when ``K < final_fraction^(-1/0.55)``, about 66 steps for 0.1; for SGLD and SGHMC
        at ``T = 0`` before the last ``sampling_fraction`` of the steps) or cyclical
        (:func:`sgsim.schedules.cyclical`, ``explore_fraction`` for cSGLD and cSGHMC, ``T = 0``
        throughout for the snapshot methods).
    """
    n = cfg.n_steps
    alpha0 = cfg.lr(method) / cfg.n_train
    temp = cfg.temperature if method.noisy else 0.0
    if method.schedule == "cyclical":
        beta = cfg.explore_fraction if method.noisy else 0.0
        return _schedules.cyclical(alpha0, n, n_cycles=cfg.n_cycles, explore_fraction=beta, temperature=temp)
    # alpha_k = a (b + k)^-gamma with alpha_1 = alpha0 and alpha_K = final_fraction * alpha0:
    # (b + K) / (b + 1) = r = final_fraction^(-1 / gamma); with K < r, b = 0 and the decay stops short
    r = cfg.final_fraction ** (-1.0 / DECAY_EXPONENT)
    b = max((n - r) / (r - 1.0), 0.0)
    decay = _schedules.polynomial_decay(alpha0 * (b + 1.0) ** DECAY_EXPONENT, DECAY_EXPONENT, n, b=b)
    first_noisy = n - _noisy_steps(cfg)
    stage = np.where(np.arange(n) >= first_noisy, _schedules.SAMPLING, _schedules.EXPLORATION).astype(np.int8)
    temperature = np.where(stage == _schedules.SAMPLING, temp, 0.0)
    description = dict(decay.description, temperature=temp, first_noisy_step=first_noisy)
    return _schedules.Schedule(decay.step_size, temperature, stage, collect=stage == _schedules.SAMPLING,
                               description=description)  # fmt: skip


def _noisy_steps(cfg: UncertaintyConfig) -> int:
    return max(1, round(cfg.sampling_fraction * cfg.n_steps))


def _evenly(start: int, stop: int, count: int) -> list[int]:
    """``count`` (at most ``stop - start``) indices evenly spaced in ``[start, stop)``, the last ``stop - 1``."""
    length = stop - start
    count = min(count, length)
    return sorted({start - 1 + -(-(j + 1) * length // count) for j in range(count)})


def kept_steps(method: Method, cfg: UncertaintyConfig, schedule: _schedules.Schedule | None = None) -> np.ndarray:
    """0-based indices of the steps after which ``method`` keeps its parameters as a sample.

    SGD, SGDM: the last step. Snapshot: the last step of each cycle. SGLD, SGHMC:
    ``n_samples`` evenly spaced over the noisy steps. cSGLD, cSGHMC: ``samples_per_cycle``
    evenly spaced over each cycle's sampling stage. The last step of the run is always kept.

    Parameters
    ----------
    method : Method
        One of :data:`METHODS`.
    cfg : UncertaintyConfig
        The settings.
    schedule : Schedule, optional
        ``method_schedule(method, cfg)``, if already built.

    Returns
    -------
    ndarray of int64
        Increasing step indices.
    """
    schedule = method_schedule(method, cfg) if schedule is None else schedule
    n = schedule.n_steps
    if method.schedule == "decay":
        if not method.noisy:
            return np.array([n - 1], np.int64)
        return np.array(_evenly(n - _noisy_steps(cfg), n, cfg.n_samples), np.int64)
    cycle, stage = schedule.cycle, schedule.stage
    keep: list[int] = []
    for c in range(schedule.n_cycles):
        steps = np.flatnonzero(cycle == c)
        if method.noisy:
            sampling = steps[stage[steps] == _schedules.SAMPLING]
            if sampling.size:
                keep += _evenly(int(sampling[0]), int(sampling[-1]) + 1, cfg.samples_per_cycle)
        else:
            keep.append(int(steps[-1]))
    return np.array(sorted(set(keep) | {n - 1}), np.int64)


# --------------------------------------------------------------------------- training and evaluation


def _method(method: Method | str) -> Method:
    if isinstance(method, Method) and method in METHODS:
        return method
    if isinstance(method, str) and method in _BY_KEY:
        return _BY_KEY[method]
    raise ParameterError("method", f"method must be one of {list(_BY_KEY)}, got {method!r}")


def _optimizer(method: Method, model: torch.nn.Module, cfg: UncertaintyConfig, seed: int):
    lr = cfg.lr(method) / cfg.n_train
    if method.sampler == "sghmc":
        return SGHMC(model.parameters(), lr=lr, friction=cfg.friction, temperature=0.0, num_data=cfg.n_train,
                     seed=seed)  # fmt: skip
    return SGLD(model.parameters(), lr=lr, temperature=0.0, num_data=cfg.n_train, seed=seed)


def train_method(
    method: Method | str,
    cfg: UncertaintyConfig,
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    seed: int,
) -> tuple[torch.nn.Module, SampleStore]:
    """Train the MLP with one method and keep its samples.

    Parameters
    ----------
    method : Method or str
        One of :data:`METHODS`, or its key.
    cfg : UncertaintyConfig
        The settings (``x_train`` must hold ``cfg.n_train`` images).
    x_train, y_train : ``torch.Tensor``
        Images ``(N, 784)`` (float32) and labels ``(N,)`` (int64).
    seed : int
        The experiment's seed: the initial weights and the minibatches are the same for every
        method, the noise is the method's own.

    Returns
    -------
    model : ``torch.nn.Sequential``
        The MLP after the last step.
    store : SampleStore
        The kept samples (:func:`kept_steps`), with ``train_loss`` (the minibatch's mean loss,
        prior term included) recorded for each.
    """
    method = _method(method)
    n = cfg.n_train
    if x_train.shape != (n, 784) or y_train.shape != (n,):
        raise ParameterError("x_train", f"x_train must be ({n}, 784) and y_train ({n},), one label per image")
    model = make_mlp(cfg.hidden, _seed(seed, _INIT))
    params = list(model.parameters())
    schedule = method_schedule(method, cfg)
    keep = set(kept_steps(method, cfg, schedule).tolist())
    optimizer = _optimizer(method, model, cfg, _seed(seed, _NOISE, METHODS.index(method)))
    driver = ScheduleDriver(optimizer, schedule)
    batches = make_generator(_seed(seed, _BATCHES))
    prior = 0.5 * cfg.prior_precision / n  # the prior's share of the mean loss, per squared parameter
    store = SampleStore()
    b = cfg.batch_size
    model.train()
    for _ in range(cfg.n_epochs):
        order = torch.randperm(n, generator=batches)
        for j in range(cfg.steps_per_epoch):
            idx = order[j * b : (j + 1) * b]
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x_train[idx]), y_train[idx])
            loss = loss + prior * torch.stack([p.pow(2).sum() for p in params]).sum()
            loss.backward()
            step = driver.step()
            if step.index in keep:
                store.add(model, step=step.index + 1, cycle=step.cycle, scalars={"train_loss": loss.detach()})
    return model, store


def evaluate(model: torch.nn.Module, store: SampleStore, x, y=None, batch_size: int = 1000) -> Predictions:
    """The equal-weight model average of the stored samples on images ``x`` (and labels ``y``).

    Parameters
    ----------
    model : ``torch.nn.Module``
        The MLP whose parameters have the store's shapes (restored afterwards).
    store : SampleStore
        The samples.
    x : array_like
        Images ``(n, 784)``.
    y : array_like, optional
        Their labels ``(n,)``.
    batch_size : int
        Images per forward pass.

    Returns
    -------
    Predictions
        From :func:`~sgsim.torch.predict`: ``entropy`` (nats, one per image), and with ``y``
        ``metrics()["test_error"]`` and ``["test_nll"]``.
    """
    x = torch.as_tensor(x, dtype=torch.float32)
    data = x if y is None else (x, torch.as_tensor(y, dtype=torch.int64))
    return predict(model, store, data, batch_size=batch_size)


@dataclass(frozen=True)
class MethodResult:
    """What one method gives.

    Attributes
    ----------
    method : Method
        The method.
    n_samples : int
        Models averaged.
    test_error : float
        Error of the model average on the MNIST test images, in [0, 1].
    test_nll : float
        Its negative log-likelihood, nats per test image.
    test_entropy : ndarray
        Predictive entropy (nats) of each test image, ``(n_test,)``.
    ood_entropy : ndarray
        Predictive entropy (nats) of each OOD image, ``(n_ood,)``, in ``[0, log 10]``.
    sample_steps : ndarray
        The 1-based steps of the samples.
    train_loss : ndarray
        The minibatch mean loss (prior included) at each sample's step.
    seconds : float
        Wall time of training and evaluation (not reproducible, unlike the rest).
    """

    method: Method
    n_samples: int
    test_error: float
    test_nll: float
    test_entropy: np.ndarray
    ood_entropy: np.ndarray
    sample_steps: np.ndarray
    train_loss: np.ndarray
    seconds: float = field(compare=False)

    def fraction_below(self, h: float) -> float:
        """Fraction of OOD images whose predictive entropy is ``<= h`` nats (the CDF at ``h``)."""
        return float(np.mean(self.ood_entropy <= h))


@dataclass(frozen=True)
class UncertaintyResult:
    """The experiment's output: one :class:`MethodResult` per method, and the settings.

    Attributes
    ----------
    config : UncertaintyConfig
        The settings.
    seed : int
        The experiment's seed.
    ood : str
        The OOD set used: ``"letters"`` (re-created notMNIST) or ``"fashion"``.
    methods : dict
        Method key to :class:`MethodResult`, in the order of :data:`METHODS`.
    n_threads : int
        ``torch.get_num_threads()`` during the run.
    """

    config: UncertaintyConfig
    seed: int
    ood: str
    methods: dict[str, MethodResult]
    n_threads: int

    @property
    def max_entropy(self) -> float:
        """``log 10``, the entropy of the uniform prediction (nats)."""
        return MAX_ENTROPY

    def fractions_below(self, h: float) -> dict[str, float]:
        """Per method, the fraction of OOD images with entropy ``<= h`` nats."""
        return {k: r.fraction_below(h) for k, r in self.methods.items()}


def empirical_cdf(values, grid) -> np.ndarray:
    """The empirical CDF of ``values`` at each point of ``grid``: the fraction ``<= h``.

    Parameters
    ----------
    values : array_like
        The sample, e.g. ``MethodResult.ood_entropy``.
    grid : array_like
        Where to evaluate it.

    Returns
    -------
    ndarray of float64
        The shape of ``grid``; non-decreasing along a sorted grid, in [0, 1].
    """
    v = np.sort(np.asarray(values, dtype=np.float64).ravel())
    if v.size == 0:
        raise ParameterError("values", "values must hold at least one value")
    return np.searchsorted(v, np.asarray(grid, dtype=np.float64), side="right") / v.size


def run_uncertainty(
    cfg: UncertaintyConfig | None = None,
    seed: int = 0,
    methods: Sequence[str] | None = None,
    progress: bool = False,
    threads: int | None = 1,
) -> UncertaintyResult:
    """Run the experiment: train each method, average its samples, score it in and out of distribution.

    Parameters
    ----------
    cfg : UncertaintyConfig, optional
        The settings; :data:`QUICK` by default (:func:`config` for full mode or changes).
    seed : int
        Non-negative seed of everything (module docs).
    methods : sequence of str, optional
        Keys of :data:`METHODS` to run, in that order; all by default.
    progress : bool
        Show a progress bar over the methods.
    threads : int, optional
        ``torch.set_num_threads`` during the run (restored afterwards); None leaves it. One by
        default: the MLP's matrix products are too small to gain from more, and on a busy
        machine OpenMP's waiting threads made a step ten times slower.

    Returns
    -------
    UncertaintyResult
        Per method: the test error and NLL, and the predictive entropy of every test and OOD image.
    """
    cfg = QUICK if cfg is None else cfg
    if not isinstance(cfg, UncertaintyConfig):
        raise ParameterTypeError("cfg", f"cfg must be an UncertaintyConfig, got {type(cfg).__name__}")
    seed = integer("seed", seed, low=0)
    keys = [m.key for m in METHODS] if methods is None else list(methods)
    unknown = [k for k in keys if k not in _BY_KEY]
    if unknown or not keys or len(set(keys)) != len(keys):
        raise ParameterError("methods", f"methods must be distinct keys of {list(_BY_KEY)}, got {keys!r}")
    if threads is not None:
        threads = integer("threads", threads, low=1)
    x_train, y_train, x_test, y_test = mnist_split(cfg.n_train, cfg.n_test, seed)
    x_ood, ood = ood_images(cfg.n_ood, cfg.ood, seed)
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
    out: dict[str, MethodResult] = {}
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        used = torch.get_num_threads()
        with progress_bar(len(keys), "Figure 4 methods", progress, unit="method") as bar:
            for key in keys:
                out[key] = _run_method(_BY_KEY[key], cfg, xt, yt, (x_test, y_test), x_ood, seed)
                bar.update()
    finally:
        torch.set_num_threads(before)
    return UncertaintyResult(cfg, seed, ood, out, used)


def _run_method(method: Method, cfg: UncertaintyConfig, xt, yt, test, x_ood, seed: int) -> MethodResult:
    """Train one method, then score its model average on the test and OOD images."""
    t0 = time.perf_counter()
    model, store = train_method(method, cfg, xt, yt, seed)
    inside = evaluate(model, store, test[0], test[1], cfg.eval_batch_size)
    away = evaluate(model, store, x_ood, None, cfg.eval_batch_size)
    scores = inside.metrics()
    return MethodResult(
        method=method,
        n_samples=len(store),
        test_error=scores["test_error"],
        test_nll=scores["test_nll"],
        test_entropy=inside.entropy.numpy().astype(np.float64),
        ood_entropy=away.entropy.numpy().astype(np.float64),
        sample_steps=store.steps,
        train_loss=store.scalars["train_loss"],
        seconds=time.perf_counter() - t0,
    )
