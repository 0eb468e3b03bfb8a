r"""The CIFAR-10/100 experiment of "Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning" (§5.3, Tables 2-3).

A ResNet-18 is sampled by cSGHMC or cSGLD for 200 epochs in ``M = 4`` cosine cycles from
:math:`\alpha_0 = 0.5`; 3 samples are kept per cycle, and their predictions are averaged
(Bayesian model averaging, BMA) for the test error and the test negative log-likelihood (NLL).
With ``--chains 4`` the same is run as four independent chains whose samples are pooled (the
parallel variant of Table 3). Run it as a script, on a GPU::

    python -m sgsim.torch.experiments.cifar --data ~/data/cifar-10-batches-py --out runs/c10-csghmc \
        --device cuda --amp bf16 --channels-last --compile

    # CIFAR-100, cSGLD, four parallel chains of 200 epochs each (Table 3's 200/800):
    python -m sgsim.torch.experiments.cifar --data ~/data/cifar-100-python --dataset cifar100 --sampler csgld \
        --chains 4 --out runs/c100-csgld-x4

An interrupted run (a signal, ``--stop-after-steps``, a crash) continues with ``--resume`` and
the same ``--out``. It is not part of ``sgsim reproduce``: a CPU would take weeks.

Potential and units. With a Gaussian prior of precision :math:`\lambda = w N` on every weight
(``w`` = ``weight_decay``, :math:`5 \times 10^{-4}`) and the :math:`N` training pairs,

.. math::

    U(\theta) = -\sum_{i=1}^{N} \log p(y_i \mid x_i, \theta) + \frac{\lambda}{2} \lVert\theta\rVert^2
        = N \Big(\underbrace{-\frac1N \sum_{i} \log p(y_i \mid x_i, \theta)
            + \frac{w}{2} \lVert\theta\rVert^2}_{\text{mean loss}}\Big),

and each step takes the mean cross-entropy of a minibatch plus :math:`w \lVert\theta\rVert^2/2`
(the prior is written into the loss, where the reference code adds ``w theta`` to the gradient:
the same step). The samplers get ``num_data = N`` (``U = N * loss``) and the step size
:math:`\alpha_k = \epsilon_k / N` on :math:`U`, :math:`\epsilon_k` being the step on the mean loss
(``--alpha0`` is :math:`\epsilon_1`, as in the paper and its code; :ref:`theory-step-units`). The
updates are those of :class:`~sgsim.torch.SGHMC` and :class:`~sgsim.torch.SGLD` ("Cyclical
Stochastic Gradient MCMC for Bayesian Deep Learning", §2):

.. math::

    \text{cSGHMC:}\quad v_k = (1 - \eta) v_{k-1} - \alpha_k \nabla\tilde U(\theta_k)
        + \sqrt{2 \eta \alpha_k T_k}\, \xi_k, \qquad \theta_{k+1} = \theta_k + v_k,

    \text{cSGLD:}\quad \theta_{k+1} = \theta_k - \alpha_k \nabla\tilde U(\theta_k)
        + \sqrt{2 \alpha_k T_k}\, \xi_k,

with :math:`\alpha_k = (\alpha_0 / 2N)(\cos(\pi r(k)) + 1)` (eq. 2,
:func:`sgsim.schedules.cyclical`), :math:`T_k = 0` while :math:`r(k) < \beta` (exploration:
SGD, or SGD with momentum :math:`1 - \eta`) and :math:`T_k` = ``--temperature`` after
(sampling), stepped by :class:`~sgsim.torch.ScheduleDriver` once per minibatch over
``epochs * ceil(N / batch_size)`` steps. In the reference code's terms the noise is
:math:`\sqrt{2 \epsilon_k \eta T / N}` on the mean loss, which is the same step.

Settings, and where they differ from the reference code (ruqizhang/csgmcmc, ``cifar_csghmc.py``,
``cifar_csgmcmc.py`` and their CIFAR-100 twins):

- ``--temperature`` (default 1, the posterior, as the paper states: "the sampling stage
  corresponds to T = 1"). The reference code runs at ``temperature = 1/50000 = 1/N`` in these
  units, a cold posterior: ``--temperature 2e-5`` reproduces it.
- ``--beta`` (default: the paper's 0.8 for CIFAR-10 and 0.94 for CIFAR-100, §5.3). The paper's
  Table 2 is what this script reproduces, so its stated values are the defaults. The reference
  code switches the noise on in the last 5 of every 50 epochs (``beta = 0.9``) for CIFAR-10 and
  for cSGHMC on CIFAR-100, and in the last 3 (``beta = 0.94``) for cSGLD on CIFAR-100;
  ``--beta 0.9`` runs the former.
- ``--friction`` (default 0.9, i.e. momentum 0.1): the reference cSGHMC code keeps
  ``(1 - alpha) v`` with ``alpha = 0.9`` and injects ``sqrt(2 lr alpha T / N)``, so its
  :math:`\eta` is 0.9. A momentum of 0.9 (:math:`\eta = 0.1`) at :math:`\alpha_0 = 0.5` would be
  a heavy-ball step of :math:`\alpha_0 / \eta = 5` on the mean loss, ten times cSGLD's.
- Samples (``--samples-per-cycle``, 3): the parameters (and the batch-norm statistics) at the
  ends of the last 3 epochs of each cycle's sampling stage, as the reference code saves after
  epochs 48, 49 and 50 of each 50; a cycle whose sampling stage holds fewer epoch ends is an
  error. They are averaged with equal weights (§5.3: "one may simply set the normalizing term
  to be the same"), by :func:`~sgsim.torch.predict`.
- Minibatches of 64 (the reference code's), the last of each epoch smaller (``50000 = 781 * 64
  + 16``), a fresh random order each epoch; the standard augmentation (a random 32 x 32 crop of
  the image padded with 4 black pixels, then a horizontal flip with probability 1/2) and the
  per-channel normalisation of the reference code, on tensors (no torchvision).
- Parallel chains (``--chains C``): independent chains from independent seeds, run one after the
  other, each with ``--cycles`` cycles, their samples pooled into one model average.
  ``--budget per-chain`` (default) gives each chain ``--epochs`` epochs (Table 3's 200/800);
  ``--budget split`` divides ``--epochs`` among the chains (e.g. ``--epochs 200 --chains 4
  --cycles 1``: four 50-epoch chains of one cycle, the parallel counterpart of one 4-cycle
  chain at the same cost).

ResNet-18 (:class:`ResNet18`): He et al.'s 18-layer residual network in its CIFAR form (a 3 x 3
stem of stride 1 and no max-pooling, four stages of two basic blocks with 64, 128, 256 and 512
channels, global average pooling and a linear layer: 11,173,962 parameters for 10 classes);
``--width`` scales the channels (64 is the paper's). The initial weights follow PyTorch's default
law, drawn from a seeded generator.

Randomness. Each chain ``c`` draws from four ``torch.Generator`` s, made by
:func:`~sgsim.torch.make_generator` from ``numpy.random.SeedSequence(seed, spawn_key=(103,
stream, c))``: the initial weights (stream 0), the minibatch order (1), the augmentation (2),
all on the CPU so that they are the same on every device, and the sampler's noise (3, on the
parameters' device). Torch's global generator is not used.

Checkpoints and resuming. After every epoch, and every ``--checkpoint-minutes`` within one, the
run writes ``OUT/checkpoint.pt`` atomically (a temporary file, ``fsync``, ``os.replace``): the
model (parameters and batch-norm statistics), the sampler's state (SGHMC's velocities, the
parameter groups), the states of the three generators in use (the minibatch order's as of the start
of the epoch, whose permutation is drawn again), the schedule position, the epoch, the step within
it and the epoch's running sums, the list of samples and the history. Each sample is written
once, to ``OUT/samples/sample_NNNN.pt``, before the checkpoint that lists it. ``--resume`` loads
all of it and continues where the run stopped; on the same machine, device and settings, the
result is the same, bit for bit, as that of a run never interrupted (the tests check this on
the CPU). SIGINT and SIGTERM finish the current step, write a checkpoint and exit with status 75
(a second SIGINT stops at once). On a GPU, bit-identical resuming needs ``--deterministic``
(deterministic cuDNN algorithms, no autotuning); without it the resumed run is another draw of
the same sampler.

``torch.compile`` (``--compile``) compiles the model's forward pass only (``dynamic=False``:
a graph for the full minibatches, one for the short last one, and one for evaluation). The
sampler's step stays eager: it reads ``lr`` and ``temperature`` as Python floats, which the
driver changes at every step. Compiled, a step would take each new float as a constant and
recompile until Dynamo's recompile limit, then fall back to eager (PyTorch's remedy is an ``lr``
held in a tensor); eager, the changing ``lr`` costs nothing. ``--amp bf16`` runs the forward
pass under ``torch.autocast`` in bfloat16; the parameters, the gradients, the noise and the
loss stay float32. ``--channels-last`` stores the activations and the convolution weights in
NHWC order (the sampler's noise follows each parameter's memory order).

Results: ``OUT/results.json`` (written atomically): the configuration and seed, the data's
SHA-256, the schedule, the BMA test error (a fraction) and NLL (nats per image), each sample's
own test error and NLL, the per-epoch history and the sessions that ran it.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import pickle
import platform
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from ... import __version__
from ..._validate import ParameterError, ParameterTypeError, integer, positive_float, real
from ...schedules import Schedule, cycle_length, cyclical
from ..optim import SGHMC, SGLD, make_generator
from ..schedule import ScheduleDriver
from ..store import SampleStore, predict

__all__ = [
    "DATASETS",
    "PAPER_BETA",
    "CifarConfig",
    "Execution",
    "ResNet18",
    "make_resnet18",
    "load_cifar",
    "augment",
    "normalize",
    "make_schedule",
    "collection_steps",
    "chain_generators",
    "run",
    "main",
    "EXIT_STOPPED",
]

# the experiment's key in SeedSequence spawn keys, and its streams
_KEY = 103
_INIT, _ORDER, _AUG, _NOISE = 0, 1, 2, 3

#: Exit status of a run that wrote a checkpoint and stopped before the end (EX_TEMPFAIL).
EXIT_STOPPED = 75

_CHECKPOINT_FORMAT = 1


@dataclass(frozen=True)
class _DatasetSpec:
    folder: str  # the folder of the python version's archive
    train: tuple[str, ...]
    test: tuple[str, ...]
    label_key: bytes
    n_classes: int
    mean: tuple[float, float, float]  # per channel, of pixels in [0, 1] (the reference code's)
    std: tuple[float, float, float]


#: The two data sets: the files of their python versions (``cifar-10-python.tar.gz``,
#: ``cifar-100-python.tar.gz``, extracted) and the normalisation of the reference code.
DATASETS: dict[str, _DatasetSpec] = {
    "cifar10": _DatasetSpec(
        "cifar-10-batches-py",
        tuple(f"data_batch_{i}" for i in range(1, 6)),
        ("test_batch",),
        b"labels",
        10,
        (0.4914, 0.4822, 0.4465),
        (0.2023, 0.1994, 0.2010),
    ),
    "cifar100": _DatasetSpec(
        "cifar-100-python",
        ("train",),
        ("test",),
        b"fine_labels",
        100,
        (0.5071, 0.4867, 0.4408),
        (0.2675, 0.2565, 0.2761),
    ),
}

#: The exploration fraction the paper states for each data set (§5.3), the default of ``beta``.
PAPER_BETA = {"cifar10": 0.8, "cifar100": 0.94}

_SAMPLERS = ("csghmc", "csgld")
_BUDGETS = ("per-chain", "split")


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class CifarConfig:
    """The settings that define a run (its samples depend on these and on nothing else but the data).

    Every value is checked at construction; an error names the field (the command-line flag
    with ``-`` for ``_``).

    Parameters
    ----------
    dataset : {"cifar10", "cifar100"}
        The data set.
    sampler : {"csghmc", "csgld"}
        cSGHMC (:class:`~sgsim.torch.SGHMC`) or cSGLD (:class:`~sgsim.torch.SGLD`).
    epochs : int
        ``>= 1``: epochs of each chain (``budget="per-chain"``) or of all chains together
        (``"split"``).
    cycles : int
        ``M >= 1``, cosine cycles per chain.
    alpha0 : float
        ``> 0``, the first step size of each cycle on the *mean* loss (0.5 in the paper); the
        samplers get ``alpha0 / N`` on ``U``.
    beta : float, optional
        Exploration fraction of each cycle, in [0, 1); None takes the paper's value for the
        data set (:data:`PAPER_BETA`: 0.8 for CIFAR-10, 0.94 for CIFAR-100).
    samples_per_cycle : int
        ``>= 1``: samples per cycle, at the ends of the last epochs of its sampling stage.
    temperature : float
        ``T >= 0`` of the sampling stage, in units of ``U`` (1: the posterior; the reference
        code's ``1/N`` is a cold posterior).
    friction : float
        cSGHMC's ``eta`` in (0, 1] (momentum ``1 - eta``); 0.9 as the reference code.
    weight_decay : float
        ``w >= 0``: the prior's term ``w |theta|^2 / 2`` of the mean loss (prior precision
        ``w N`` on ``U``).
    batch_size : int
        ``>= 1``, images per step.
    chains : int
        ``>= 1`` independent chains, pooled.
    budget : {"per-chain", "split"}
        Whether ``epochs`` is each chain's or is divided among the chains.
    width : int
        ``>= 1``, the channels of the ResNet's first stage (64 for ResNet-18).
    n_train, n_test : int, optional
        ``>= 1``: use only the first images of the training or test set (None: all).
    seed : int
        ``>= 0``, the seed of every random number of the run.
    """

    dataset: str = "cifar10"
    sampler: str = "csghmc"
    epochs: int = 200
    cycles: int = 4
    alpha0: float = 0.5
    beta: float | None = None
    samples_per_cycle: int = 3
    temperature: float = 1.0
    friction: float = 0.9
    weight_decay: float = 5e-4
    batch_size: int = 64
    chains: int = 1
    budget: str = "per-chain"
    width: int = 64
    n_train: int | None = None
    n_test: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.dataset not in DATASETS:
            raise ParameterError("dataset", f"dataset must be one of {sorted(DATASETS)}, got {self.dataset!r}")
        if self.sampler not in _SAMPLERS:
            raise ParameterError("sampler", f"sampler must be one of {_SAMPLERS}, got {self.sampler!r}")
        integer("epochs", self.epochs, low=1)
        integer("cycles", self.cycles, low=1)
        positive_float("alpha0", self.alpha0)
        if self.beta is None:
            object.__setattr__(self, "beta", PAPER_BETA[self.dataset])
        object.__setattr__(self, "beta", real("beta", self.beta, 0.0, 1.0, high_open=True))
        integer("samples_per_cycle", self.samples_per_cycle, low=1)
        real("temperature", self.temperature, 0.0)
        real("friction", self.friction, 0.0, 1.0, low_open=True)
        real("weight_decay", self.weight_decay, 0.0)
        integer("batch_size", self.batch_size, low=1)
        integer("chains", self.chains, low=1)
        if self.budget not in _BUDGETS:
            raise ParameterError("budget", f"budget must be one of {_BUDGETS}, got {self.budget!r}")
        if self.budget == "split" and self.epochs % self.chains:
            raise ParameterError(
                "epochs", f"with budget 'split', epochs ({self.epochs}) must be a multiple of chains ({self.chains})"
            )
        integer("width", self.width, low=1)
        for name in ("n_train", "n_test"):
            if getattr(self, name) is not None:
                integer(name, getattr(self, name), low=1)
        integer("seed", self.seed, low=0)
        if self.cycles > self.epochs_per_chain:
            raise ParameterError(
                "cycles", f"cycles must be <= the epochs of a chain ({self.epochs_per_chain}), got {self.cycles}"
            )
        if self.cycles * self.samples_per_cycle > self.epochs_per_chain:
            raise ParameterError(
                "samples_per_cycle",
                f"cycles * samples_per_cycle = {self.cycles * self.samples_per_cycle} samples at epoch ends need "
                f"as many epochs per chain, got {self.epochs_per_chain}",
            )

    @property
    def epochs_per_chain(self) -> int:
        """Epochs of each chain."""
        return self.epochs // self.chains if self.budget == "split" else self.epochs

    @property
    def total_epochs(self) -> int:
        """Epochs of all chains together (the cost of Table 3)."""
        return self.epochs_per_chain * self.chains

    @property
    def explore_fraction(self) -> float:
        """``beta``, resolved (never None after construction)."""
        assert self.beta is not None
        return self.beta


@dataclass(frozen=True)
class Execution:
    """How a run is executed: none of these changes what is sampled (on the CPU; see ``device``).

    Parameters
    ----------
    device : str, optional
        ``"cuda"`` or ``"cpu"`` (or any torch device string); None takes CUDA when available.
        The numbers depend on the device, so a resumed run should use the one it started on.
    amp : {"off", "bf16"}
        Forward pass in bfloat16 under ``torch.autocast``.
    channels_last : bool
        NHWC memory order for the activations and convolution weights.
    compile : bool
        ``torch.compile`` the model's forward pass (not the sampler's step).
    deterministic : bool
        Deterministic algorithms only (``torch.use_deterministic_algorithms``, no cuDNN
        autotuning): needed for bit-identical resuming on a GPU.
    eval_batch_size : int
        ``>= 1``, test images per forward pass.
    eval_every : int
        ``>= 0``: the current iterate's test error every that many epochs (0: never).
    checkpoint_minutes : float
        ``>= 0``: also checkpoint within an epoch once this many minutes have passed since the
        last checkpoint (0: at epoch ends only).
    stop_after_steps : int, optional
        ``>= 1``: checkpoint and stop once the run (all chains) has taken this many steps.
    progress : bool
        Show a tqdm progress bar and one line per epoch.
    """

    device: str | None = None
    amp: str = "off"
    channels_last: bool = False
    compile: bool = False
    deterministic: bool = False
    eval_batch_size: int = 1000
    eval_every: int = 10
    checkpoint_minutes: float = 0.0
    stop_after_steps: int | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        if self.amp not in ("off", "bf16"):
            raise ParameterError("amp", f"amp must be 'off' or 'bf16', got {self.amp!r}")
        integer("eval_batch_size", self.eval_batch_size, low=1)
        integer("eval_every", self.eval_every, low=0)
        real("checkpoint_minutes", self.checkpoint_minutes, 0.0)
        if self.stop_after_steps is not None:
            integer("stop_after_steps", self.stop_after_steps, low=1)

    def torch_device(self) -> torch.device:
        """The device, resolved and checked."""
        name = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            device = torch.device(name)
        except (RuntimeError, TypeError) as exc:
            raise ParameterError("device", f"device must name a torch device, got {name!r}") from exc
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ParameterError("device", "device 'cuda' asked for, but this torch has no CUDA device available")
        return device


# --------------------------------------------------------------------------- model


class _BasicBlock(nn.Module):
    """Two 3 x 3 convolutions with batch norm, and the identity (or a 1 x 1 projection) added."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18 for 32 x 32 images (He et al., "Deep Residual Learning for Image Recognition", 2016).

    The CIFAR form used by the cyclical paper's code: a 3 x 3 convolution of stride 1 (no
    max-pooling), four stages of two basic blocks with ``width``, ``2 width``, ``4 width`` and
    ``8 width`` channels (the last three halving the resolution), global average pooling and a
    linear layer. Convolutions have no bias; each is followed by batch norm.

    Parameters
    ----------
    num_classes : int
        Outputs (logits).
    width : int
        Channels of the first stage; 64 is ResNet-18 (11,173,962 parameters for 10 classes).
    """

    def __init__(self, num_classes: int = 10, width: int = 64):
        super().__init__()
        num_classes = integer("num_classes", num_classes, low=1)
        width = integer("width", width, low=1)
        self.conv1 = nn.Conv2d(3, width, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        stages, c_in = [], width
        for i, stride in enumerate((1, 2, 2, 2)):
            c_out = width * 2**i
            stages.append(nn.Sequential(_BasicBlock(c_in, c_out, stride), _BasicBlock(c_out, c_out, 1)))
            c_in = c_out
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.linear = nn.Linear(c_in, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(batch, num_classes)`` of images ``(batch, 3, H, W)``."""
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        # the mean over the 4 x 4 map is the reference code's avg_pool2d(out, 4); its gradient
        # is deterministic on every device
        return self.linear(out.mean(dim=(2, 3)))


def make_resnet18(num_classes: int, width: int, seed: int) -> ResNet18:
    r"""A :class:`ResNet18` on the CPU, initialised from ``seed``.

    Every convolution and linear weight, and the linear bias, is drawn from
    :math:`U(-1/\sqrt{f}, 1/\sqrt{f})`, ``f`` the fan-in (PyTorch's default law, as the reference
    code's network had), by a generator made from ``seed`` (:func:`~sgsim.torch.make_generator`);
    batch norm starts at scale 1 and shift 0. Torch's global generator is left as it was.

    Parameters
    ----------
    num_classes, width : int
        As for :class:`ResNet18`.
    seed : int
        ``>= 0``.

    Returns
    -------
    ResNet18
    """
    gen = make_generator(seed)
    with torch.random.fork_rng(devices=[]):
        model = ResNet18(num_classes, width)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                fan_in = module.weight[0].numel()
                bound = 1.0 / math.sqrt(fan_in)
                for p in (module.weight, module.bias):
                    if p is not None:
                        p.copy_(torch.rand(p.shape, generator=gen) * (2 * bound) - bound)
    return model


def _sample_tensors(model: nn.Module) -> list[torch.Tensor]:
    """What a sample holds: the parameters, then the floating-point buffers (batch-norm statistics)."""
    return list(model.parameters()) + [b for b in model.buffers() if b.is_floating_point()]


class _SampleView(nn.Module):
    """The model as :func:`~sgsim.torch.predict` sees it: its ``parameters()`` include the batch-norm statistics.

    A network with batch norm predicts with the running statistics of its own training, so a
    sample must carry them (the reference code saves whole ``state_dict`` s); the store keeps
    whatever ``parameters()`` yields, and ``predict`` loads and restores the same.
    """

    def __init__(self, model: nn.Module, forward: Callable[[torch.Tensor], torch.Tensor], amp: bool):
        super().__init__()
        self.model = model
        self.__dict__["_forward"] = forward  # not a submodule: a compiled model wraps the same one
        self._amp = amp

    def parameters(self, recurse: bool = True) -> Iterator[Any]:
        return iter(_sample_tensors(self.model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with _autocast(x.device, self._amp):
            return self.__dict__["_forward"](x).float()


def _autocast(device: torch.device, enabled: bool):
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=enabled)


# --------------------------------------------------------------------------- data


def _find_files(data, spec: _DatasetSpec) -> Path:
    """The folder holding every file of ``spec``: ``data`` itself or its standard subfolder."""
    names = spec.train + spec.test
    expected = ", ".join(names)
    if data is None:
        raise ParameterError("data", f"data must name the folder of the files {expected}")
    root = Path(data).expanduser()
    if not root.is_dir():
        raise ParameterError(
            "data",
            f"data: no folder {str(root)!r}; expected a folder holding the files {expected} "
            f"(the python version of the data set, extracted; or the folder above its {spec.folder}/)",
        )
    candidates = [root, root / spec.folder]
    for folder in candidates:
        if all((folder / n).is_file() for n in names):
            return folder
    best = max(candidates, key=lambda f: sum((f / n).is_file() for n in names))
    missing = [n for n in names if not (best / n).is_file()]
    raise ParameterError(
        "data",
        f"data: {str(best)!r} lacks {', '.join(missing)}; expected the files {expected} "
        f"in {str(root)!r} or in {str(root / spec.folder)!r}",
    )


def _read_batch(path: Path, spec: _DatasetSpec) -> tuple[np.ndarray, np.ndarray]:
    # the data set's own format: a pickled dict; only open files you trust
    with open(path, "rb") as f:
        try:
            entry = pickle.load(f, encoding="bytes")
        except Exception as exc:
            raise ParameterError("data", f"data: {str(path)!r} is not a pickled CIFAR batch ({exc})") from exc
    if not isinstance(entry, dict) or b"data" not in entry or spec.label_key not in entry:
        raise ParameterError("data", f"data: {str(path)!r} lacks the keys b'data' and {spec.label_key!r}")
    x = np.asarray(entry[b"data"])
    y = np.asarray(entry[spec.label_key], dtype=np.int64)
    if x.dtype != np.uint8 or x.ndim != 2 or x.shape[1] != 3 * 32 * 32 or y.shape != (x.shape[0],):
        raise ParameterError(
            "data", f"data: {str(path)!r} must hold uint8 images (n, 3072) and n labels, got {x.dtype} {x.shape}"
        )
    if y.size and (y.min() < 0 or y.max() >= spec.n_classes):
        raise ParameterError("data", f"data: {str(path)!r} has labels outside [0, {spec.n_classes})")
    return x.reshape(-1, 3, 32, 32), y


def load_cifar(data, dataset: str = "cifar10") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The training and test images and labels of CIFAR-10 or CIFAR-100, from their python version.

    Reads the pickled batches of ``cifar-10-python.tar.gz`` (``data_batch_1`` .. ``data_batch_5``,
    ``test_batch``) or ``cifar-100-python.tar.gz`` (``train``, ``test``; the 100 fine labels), in
    ``data`` or in its subfolder ``cifar-10-batches-py`` / ``cifar-100-python``. The files are
    pickles: read only files you trust.

    Parameters
    ----------
    data : str or path
        The folder.
    dataset : {"cifar10", "cifar100"}
        Which one.

    Returns
    -------
    x_train, y_train, x_test, y_test : ``torch.Tensor``
        Images as uint8 ``(n, 3, 32, 32)``, labels as int64 ``(n,)``, in the files' order.

    Raises
    ------
    ParameterError
        (``parameter = "data"``) If the folder or a file is missing (the message lists the
        files expected and those missing), or a file is not a CIFAR batch.
    """
    if dataset not in DATASETS:
        raise ParameterError("dataset", f"dataset must be one of {sorted(DATASETS)}, got {dataset!r}")
    spec = DATASETS[dataset]
    folder = _find_files(data, spec)
    out = []
    for names in (spec.train, spec.test):
        parts = [_read_batch(folder / n, spec) for n in names]
        out.append(torch.from_numpy(np.concatenate([p[0] for p in parts])))
        out.append(torch.from_numpy(np.concatenate([p[1] for p in parts])))
    return out[0], out[1], out[2], out[3]


def augment(images: torch.Tensor, generator: torch.Generator, padding: int = 4) -> torch.Tensor:
    """A random crop of each image padded with black, then a random horizontal flip.

    torchvision's ``RandomCrop(32, padding=4)`` then ``RandomHorizontalFlip()``, as one gather:
    image ``i`` is cropped at rows ``dy_i ..`` and columns ``dx_i ..`` of its zero-padded copy,
    ``(dy_i, dx_i)`` uniform on ``{0, .., 2 padding}^2``, and mirrored when ``f_i = 1``, ``f_i``
    uniform on ``{0, 1}``. The random numbers are drawn on the CPU, in this order:
    ``torch.randint(0, 2 padding + 1, (n, 2))`` (``dy, dx``), then ``torch.randint(0, 2, (n,))``
    (``f``), so that every device sees the same crops.

    Parameters
    ----------
    images : ``torch.Tensor``
        ``(n, C, H, W)``, any dtype and device (uint8 pixels, so that the padding is black).
    generator : ``torch.Generator``
        A CPU generator.
    padding : int
        ``>= 0`` pixels on each side.

    Returns
    -------
    ``torch.Tensor``
        ``(n, C, H, W)``, of ``images``' dtype and device.
    """
    n, c, h, w = images.shape
    shifts = torch.randint(0, 2 * padding + 1, (n, 2), generator=generator)
    flips = torch.randint(0, 2, (n,), generator=generator).bool()
    dev = images.device
    shifts, flips = shifts.to(dev), flips.to(dev)
    padded = F.pad(images, (padding, padding, padding, padding))
    rows = shifts[:, 0, None] + torch.arange(h, device=dev)
    cols = shifts[:, 1, None] + torch.arange(w, device=dev)
    cols = torch.where(flips[:, None], cols.flip(1), cols)
    i = torch.arange(n, device=dev)[:, None, None, None]
    ch = torch.arange(c, device=dev)[None, :, None, None]
    return padded[i, ch, rows[:, None, :, None], cols[:, None, None, :]]


def normalize(images: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """``(images / 255 - mean) / std`` per channel, in float32 (torchvision's ``ToTensor`` then ``Normalize``).

    Parameters
    ----------
    images : ``torch.Tensor``
        uint8 ``(n, 3, H, W)``.
    mean, std : ``torch.Tensor``
        ``(3,)`` per-channel values of pixels in [0, 1].

    Returns
    -------
    ``torch.Tensor``
        float32, of ``images``' shape and device.
    """
    mean = mean.to(images.device, torch.float32).view(1, -1, 1, 1)
    std = std.to(images.device, torch.float32).view(1, -1, 1, 1)
    return (images.to(torch.float32) / 255.0 - mean) / std


def _fingerprint(*tensors: torch.Tensor) -> str:
    digest = hashlib.sha256()
    for t in tensors:
        digest.update(t.contiguous().numpy().tobytes())
    return digest.hexdigest()


# --------------------------------------------------------------------------- schedule and samples


def make_schedule(config: CifarConfig, n_train: int) -> tuple[Schedule, int]:
    """The cyclical schedule of one chain, on ``U``, and the steps per epoch.

    Parameters
    ----------
    config : CifarConfig
        The run.
    n_train : int
        ``N``, the training images.

    Returns
    -------
    schedule : Schedule
        :func:`sgsim.schedules.cyclical` with ``step_size = alpha0 / N``,
        ``n_steps = epochs_per_chain * steps_per_epoch``, ``n_cycles = cycles``,
        ``explore_fraction = beta`` and the sampling stage at ``temperature``.
    steps_per_epoch : int
        ``ceil(N / batch_size)`` (the last minibatch of an epoch may be short).

    Raises
    ------
    ParameterError
        If the cycles do not fit the steps (``parameter = "cycles"``).
    """
    n_train = integer("n_train", n_train, low=1)
    spe = -(-n_train // config.batch_size)
    n_steps = config.epochs_per_chain * spe
    length = cycle_length(n_steps, config.cycles)
    if -(-n_steps // length) < config.cycles:
        raise ParameterError("cycles", f"{n_steps} steps in cycles of ceil(K / M) = {length} make fewer than "
                             f"{config.cycles} cycles")  # fmt: skip
    schedule = cyclical(config.alpha0 / n_train, n_steps, n_cycles=config.cycles,
                        explore_fraction=config.explore_fraction, temperature=config.temperature)  # fmt: skip
    return schedule, spe


def collection_steps(schedule: Schedule, steps_per_epoch: int, samples_per_cycle: int) -> np.ndarray:
    """0-based indices of the steps after which a sample is kept: the last epoch ends of each sampling stage.

    For every cycle of ``schedule``, the last ``samples_per_cycle`` steps that end an epoch
    (``k + 1`` a multiple of ``steps_per_epoch``) and belong to the cycle's sampling stage.

    Parameters
    ----------
    schedule : Schedule
        One chain's schedule.
    steps_per_epoch : int
        ``>= 1``.
    samples_per_cycle : int
        ``>= 1``.

    Returns
    -------
    ndarray of int64
        Sorted, ``n_cycles * samples_per_cycle`` of them.

    Raises
    ------
    ParameterError
        (``parameter = "samples_per_cycle"``) If a cycle's sampling stage holds fewer epoch ends.
    """
    spe = integer("steps_per_epoch", steps_per_epoch, low=1)
    per_cycle = integer("samples_per_cycle", samples_per_cycle, low=1)
    ends = np.arange(spe - 1, schedule.n_steps, spe)
    cycles, collect = np.empty(ends.size, np.int64), np.empty(ends.size, bool)
    for i, k in enumerate(ends):
        b = schedule.block(int(k), int(k) + 1)
        cycles[i], collect[i] = b.cycle[0], b.collect[0]
    kept = []
    for c in range(schedule.n_cycles):
        mine = ends[(cycles == c) & collect]
        if mine.size < per_cycle:
            raise ParameterError(
                "samples_per_cycle",
                f"cycle {c + 1} has {mine.size} epoch ends in its sampling stage, fewer than samples_per_cycle = "
                f"{per_cycle}: lower samples_per_cycle or beta, or add epochs",
            )
        kept.append(mine[-per_cycle:])
    return np.concatenate(kept).astype(np.int64)


def _seed(seed: int, stream: int, chain: int) -> int:
    """A 128-bit seed of one stream of one chain, derived from the run's seed."""
    words = np.random.SeedSequence(seed, spawn_key=(_KEY, stream, chain)).generate_state(2, np.uint64)
    return int(words[0]) | (int(words[1]) << 64)


def chain_generators(seed: int, chain: int, device=None) -> dict[str, torch.Generator]:
    """The fresh generators of one chain: ``"order"``, ``"augment"`` (CPU) and ``"noise"`` (on ``device``).

    Parameters
    ----------
    seed : int
        The run's seed.
    chain : int
        ``>= 0``.
    device : str or device, optional
        The parameters' device (CPU by default).

    Returns
    -------
    dict of ``torch.Generator``
    """
    return {
        "order": make_generator(_seed(seed, _ORDER, chain)),
        "augment": make_generator(_seed(seed, _AUG, chain)),
        "noise": make_generator(_seed(seed, _NOISE, chain), device),
    }


# --------------------------------------------------------------------------- files


def _atomic_write(path: Path, write: Callable[[Any], None], mode: str = "wb") -> None:
    """Write ``path`` through a temporary file in its folder, flushed to disk, then renamed over it."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    with contextlib.suppress(OSError):  # the rename itself, where the platform allows it
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_json(path: Path, obj) -> None:
    _atomic_write(path, lambda f: f.write(json.dumps(obj, indent=1, allow_nan=True) + "\n"), "w")


def _sample_path(out: Path, i: int) -> Path:
    return out / "samples" / f"sample_{i:04d}.pt"


def _cpu(obj):
    """``obj`` with every tensor copied to the CPU (for a checkpoint that loads anywhere)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().clone()
    if isinstance(obj, dict):
        return {k: _cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cpu(v) for v in obj)
    return obj


# --------------------------------------------------------------------------- the run


class _Stop:
    """Why the run should stop at the next step boundary (set by a signal handler), if it should."""

    def __init__(self) -> None:
        self.reason: str | None = None


@dataclass
class _Position:
    """Where a run stands: chain, epoch (0-based, == epochs_per_chain when the chain is done), step in it."""

    chain: int = 0
    epoch: int = 0
    batch: int = 0
    samples: list[dict] = field(default_factory=list)  # metadata of the samples written so far
    history: list[dict] = field(default_factory=list)
    sessions: list[dict] = field(default_factory=list)


def _run_key(config: CifarConfig, n_train: int, n_test: int, fingerprint: str) -> dict:
    return {**asdict(config), "n_train_used": n_train, "n_test_used": n_test, "data_sha256": fingerprint}


def _session(ex: Execution, device: torch.device, start_step: int) -> dict:
    return {
        "start_step": start_step,
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor(),
        "amp": ex.amp,
        "channels_last": ex.channels_last,
        "compile": ex.compile,
        "deterministic": ex.deterministic,
        "threads": torch.get_num_threads(),
        "torch": str(torch.__version__),
        "sgsim": __version__,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


@contextlib.contextmanager
def _determinism(device: torch.device, deterministic: bool):
    """Turn cuDNN autotuning off and deterministic algorithms on, if asked; restore the previous settings after."""
    saved = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark,
             torch.backends.cudnn.deterministic)  # fmt: skip
    try:
        if device.type == "cuda":
            torch.backends.cudnn.benchmark = not deterministic
            torch.backends.cudnn.deterministic = deterministic
        if deterministic:
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
            torch.use_deterministic_algorithms(True, warn_only=True)
        yield
    finally:
        torch.use_deterministic_algorithms(saved[0])
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = saved[1], saved[2]


class _Chain:
    """One chain's model, sampler, generators and schedule driver, fresh or restored."""

    def __init__(self, config: CifarConfig, chain: int, schedule: Schedule, n_train: int, n_classes: int,
                 device: torch.device, ex: Execution):  # fmt: skip
        self.model = make_resnet18(n_classes, config.width, _seed(config.seed, _INIT, chain)).to(device)
        if ex.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        self.forward: Callable[[torch.Tensor], torch.Tensor] = (
            torch.compile(self.model, dynamic=False) if ex.compile else self.model
        )
        self.params = list(self.model.parameters())
        self.generators = chain_generators(config.seed, chain, device)
        first = schedule.block(0, 1).step_size[0]
        self.optimizer: SGHMC | SGLD
        if config.sampler == "csghmc":
            self.optimizer = SGHMC(self.params, lr=float(first), friction=config.friction,
                                   temperature=config.temperature, num_data=n_train,
                                   generator=self.generators["noise"])  # fmt: skip
        else:
            self.optimizer = SGLD(self.params, lr=float(first), temperature=config.temperature, num_data=n_train,
                                  generator=self.generators["noise"])  # fmt: skip
        self.schedule = schedule
        self.driver = ScheduleDriver(self.optimizer, schedule)
        # the minibatch order's state at the start of the current epoch (its permutation is drawn again)
        self.order_at_epoch_start = self.generators["order"].get_state()

    def train_step(self, x: torch.Tensor, y: torch.Tensor, weight_decay: float, amp: bool):
        """One step on a minibatch: the mean cross-entropy plus the prior's term, its gradient, the sampler."""
        self.optimizer.zero_grad(set_to_none=True)
        with _autocast(x.device, amp):
            logits = self.forward(x)
        ce = F.cross_entropy(logits.float(), y)
        loss = ce
        if weight_decay > 0:
            loss = ce + 0.5 * weight_decay * torch.stack([p.square().sum() for p in self.params]).sum()
        loss.backward()
        return ce.detach(), logits.detach(), self.driver.step()

    def state(self) -> dict:
        return {
            "model": _cpu(self.model.state_dict()),
            "optimizer": _cpu(self.optimizer.state_dict()),
            "generators": {
                "order": self.order_at_epoch_start.clone(),
                "augment": self.generators["augment"].get_state(),
                "noise": self.generators["noise"].get_state(),
            },
            "steps_done": self.driver.steps_done,
        }

    def restore(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        for name, gen in self.generators.items():
            gen.set_state(state["generators"][name])
        self.order_at_epoch_start = state["generators"]["order"].clone()
        self.driver = ScheduleDriver(self.optimizer, self.schedule, start=int(state["steps_done"]))


def run(config: CifarConfig, data, out, *, resume: bool = False, execution: Execution | None = None) -> dict:
    """Run (or resume) the experiment; write checkpoints, samples and ``OUT/results.json``.

    Parameters
    ----------
    config : CifarConfig
        What to run.
    data : str or path
        The folder of the data set's files (:func:`load_cifar`).
    out : str or path
        The run's folder: ``checkpoint.pt``, ``samples/``, ``results.json``.
    resume : bool
        Continue the run whose checkpoint is in ``out`` (start afresh if there is none). Without
        it, an existing checkpoint is an error.
    execution : Execution, optional
        Device, precision, compilation, progress, checkpoint timing, stopping.

    Returns
    -------
    dict
        ``{"status": "finished", **results}`` (what ``results.json`` holds), or
        ``{"status": "stopped", "steps": n, "reason": ...}`` when the run checkpointed and
        stopped before its end.

    Raises
    ------
    ParameterError
        If the data are missing (``"data"``), ``out`` holds a checkpoint and ``resume`` is
        false, or the checkpoint is of another run (``"resume"``).
    """
    if not isinstance(config, CifarConfig):
        raise ParameterTypeError("config", f"config must be a CifarConfig, got {type(config).__name__}")
    ex = Execution() if execution is None else execution
    if not isinstance(ex, Execution):
        raise ParameterTypeError("execution", f"execution must be an Execution, got {type(ex).__name__}")
    return _run(config, data, out, resume, ex, _Stop())


def _run(config: CifarConfig, data, out, resume: bool, ex: Execution, stop: _Stop) -> dict:
    device = ex.torch_device()
    out = Path(out).expanduser()
    ckpt_path = out / "checkpoint.pt"
    if ckpt_path.exists() and not resume:
        raise ParameterError("resume", f"{str(ckpt_path)!r} exists: pass resume (--resume) to continue that run, "
                             "or choose another out (--out)")  # fmt: skip
    spec = DATASETS[config.dataset]
    x_train, y_train, x_test, y_test = load_cifar(data, config.dataset)
    for name, n_have, n_want in (("n_train", len(y_train), config.n_train), ("n_test", len(y_test), config.n_test)):
        if n_want is not None and n_want > n_have:
            raise ParameterError(name, f"{name} = {n_want} exceeds the {n_have} images of the data")
    if config.n_train is not None:
        x_train, y_train = x_train[: config.n_train], y_train[: config.n_train]
    if config.n_test is not None:
        x_test, y_test = x_test[: config.n_test], y_test[: config.n_test]
    n = len(y_train)
    key = _run_key(config, n, len(y_test), _fingerprint(x_train, y_train, x_test, y_test))
    schedule, spe = make_schedule(config, n)
    collect = {int(k) for k in collection_steps(schedule, spe, config.samples_per_cycle)}
    n_steps = schedule.n_steps

    pos, saved = _Position(), None
    if resume and not ckpt_path.exists():
        print(f"no checkpoint in {str(out)!r}: starting the run", file=sys.stderr)
    if resume and ckpt_path.exists():
        saved = torch.load(ckpt_path, map_location="cpu", weights_only=True)
        if saved.get("format") != _CHECKPOINT_FORMAT:
            raise ParameterError("resume", f"{str(ckpt_path)!r} is not a checkpoint of this script's format")
        changed = {k: (saved["run_key"].get(k), v) for k, v in key.items() if saved["run_key"].get(k) != v}
        if changed:
            diff = "; ".join(f"{k}: checkpoint {a!r}, now {b!r}" for k, (a, b) in changed.items())
            raise ParameterError("resume", f"the checkpoint in {str(out)!r} is of another run ({diff})")
        pos = _Position(saved["chain"], saved["epoch"], saved["batch"], list(saved["samples"]),
                        list(saved["history"]), list(saved["sessions"]))  # fmt: skip
    (out / "samples").mkdir(parents=True, exist_ok=True)
    global_step = pos.chain * n_steps + pos.epoch * spe + pos.batch
    pos.sessions.append(_session(ex, device, global_step))

    amp = ex.amp == "bf16"
    mean, std = torch.tensor(spec.mean), torch.tensor(spec.std)
    x_train_d, y_train_d = x_train.to(device), y_train.to(device)
    fmt = torch.channels_last if ex.channels_last else torch.contiguous_format
    x_test_d = normalize(x_test.to(device), mean, std).contiguous(memory_format=fmt)
    y_test_d = y_test.to(device)
    store = SampleStore(device="cpu", seed=config.seed)
    shapes: list[torch.Size] | None = None
    chain_state: _Chain | None = None
    bar = None
    last_checkpoint = time.monotonic()

    def checkpoint(ch: _Chain, chain: int, epoch: int, batch: int, sums: torch.Tensor) -> None:
        nonlocal last_checkpoint
        state = {
            "format": _CHECKPOINT_FORMAT,
            "run_key": key,
            "chain": chain,
            "epoch": epoch,
            "batch": batch,
            "sums": sums.detach().cpu().clone(),
            "samples": pos.samples,
            "history": pos.history,
            "sessions": pos.sessions,
            **ch.state(),
        }
        _atomic_write(ckpt_path, lambda f: torch.save(state, f))
        last_checkpoint = time.monotonic()

    with _determinism(device, ex.deterministic):
        for ch_index in range(pos.chain, config.chains):
            ch = _Chain(config, ch_index, schedule, n, spec.n_classes, device, ex)
            if shapes is None:
                shapes = [t.shape for t in _sample_tensors(ch.model)]
                _reload_samples(store, out, pos.samples, shapes)
            # running sums of the epoch: cross-entropy (times batch size), errors, images
            sums = torch.zeros(3, dtype=torch.float64, device=device)
            if saved is not None and saved["chain"] == ch_index:
                ch.restore(saved)
                sums = saved["sums"].to(device)
            saved = None
            epoch0, batch0 = (pos.epoch, pos.batch) if ch_index == pos.chain else (0, 0)
            chain_state = ch
            if ex.progress:
                bar = tqdm(total=n_steps, initial=ch.driver.steps_done, unit="step", dynamic_ncols=True,
                           desc=f"{config.sampler} {config.dataset} chain {ch_index + 1}/{config.chains}")  # fmt: skip
            ch.model.train()
            for epoch in range(epoch0, config.epochs_per_chain):
                if batch0 == 0:
                    ch.order_at_epoch_start = ch.generators["order"].get_state()
                perm = torch.randperm(n, generator=ch.generators["order"])
                t_epoch = time.monotonic()
                for b in range(batch0, spe):
                    idx = perm[b * config.batch_size : (b + 1) * config.batch_size].to(device)
                    x = normalize(augment(x_train_d[idx], ch.generators["augment"]), mean, std)
                    y = y_train_d[idx]
                    ce, logits, now = ch.train_step(x.contiguous(memory_format=fmt), y, config.weight_decay, amp)
                    with torch.no_grad():
                        sums[0] += ce.double() * len(idx)
                        sums[1] += (logits.argmax(dim=1) != y).sum()
                        sums[2] += len(idx)
                    global_step += 1
                    if bar is not None:
                        bar.update(1)
                    end_of_epoch = b == spe - 1
                    if end_of_epoch:
                        entry = _epoch_entry(ch_index, epoch, now, sums, config, n, time.monotonic() - t_epoch)
                        if now.index in collect:
                            i = len(pos.samples)
                            meta = {"chain": ch_index, "cycle": now.cycle, "epoch": epoch + 1, "step": now.index + 1,
                                    "train_loss": entry["train_loss"]}  # fmt: skip
                            _keep_sample(store, ch.model, meta, _sample_path(out, i))
                            pos.samples.append(meta)
                            entry["sample"] = i
                        if ex.eval_every and (epoch + 1) % ex.eval_every == 0:
                            entry.update(_evaluate(ch, x_test_d, y_test_d, ex.eval_batch_size, amp))
                        pos.history.append(entry)
                        sums.zero_()
                        if bar is not None:
                            bar.write(_describe(entry))
                    if ex.stop_after_steps is not None and global_step >= ex.stop_after_steps:
                        stop.reason = stop.reason or f"stop_after_steps = {ex.stop_after_steps}"
                    timed = (
                        ex.checkpoint_minutes > 0 and time.monotonic() - last_checkpoint >= 60 * ex.checkpoint_minutes
                    )
                    if end_of_epoch or stop.reason or timed:
                        at = (epoch + 1, 0) if end_of_epoch else (epoch, b + 1)
                        if end_of_epoch:
                            # the next epoch starts here: its permutation comes from this state
                            ch.order_at_epoch_start = ch.generators["order"].get_state()
                        checkpoint(ch, ch_index, at[0], at[1], sums)
                    if stop.reason:
                        if bar is not None:
                            bar.close()
                        print(f"checkpointed after step {global_step} ({stop.reason}); continue with --resume",
                              file=sys.stderr)  # fmt: skip
                        return {"status": "stopped", "steps": global_step, "reason": stop.reason}
                batch0 = 0
            if bar is not None:
                bar.close()
                bar = None

        assert chain_state is not None
        results = _results(config, ex, key, schedule, spe, store, pos, chain_state, x_test_d, y_test_d, amp,
                           str(Path(data).expanduser()))  # fmt: skip
    _write_json(out / "results.json", results)
    return {"status": "finished", **results}


def _keep_sample(store: SampleStore, model: nn.Module, meta: dict, path: Path) -> None:
    """Add the model's parameters and batch-norm statistics to the store, and write them to ``path``."""
    store.add(_sample_tensors(model), step=meta["step"], cycle=meta["cycle"],
              scalars={"chain": meta["chain"], "epoch": meta["epoch"]})  # fmt: skip
    record = {**meta, "vector": store.vector(-1)}
    _atomic_write(path, lambda f: torch.save(record, f))


def _reload_samples(store: SampleStore, out: Path, samples: Sequence[dict], shapes: Sequence[torch.Size]) -> None:
    """Add the samples a checkpoint lists back into a fresh store, from their files."""
    for i, meta in enumerate(samples):
        path = _sample_path(out, i)
        if not path.is_file():
            raise ParameterError("resume", f"the checkpoint lists {len(samples)} samples, but {str(path)!r} is missing")
        vector = torch.load(path, map_location="cpu", weights_only=True)["vector"]
        views = [chunk.view(s) for chunk, s in zip(vector.split([math.prod(s) for s in shapes]), shapes, strict=True)]
        store.add(views, step=meta["step"], cycle=meta["cycle"], scalars={"chain": meta["chain"],
                  "epoch": meta["epoch"]})  # fmt: skip


def _epoch_entry(chain: int, epoch: int, now, sums: torch.Tensor, config: CifarConfig, n: int, seconds: float) -> dict:
    loss, errors, count = (float(v) for v in sums.cpu())
    return {
        "chain": chain,
        "epoch": epoch + 1,
        "step": now.index + 1,
        "cycle": now.cycle,
        "stage": "sampling" if now.sampling else "exploration",
        "lr_mean_loss": now.step_size * n,
        "temperature": now.temperature,
        "train_loss": loss / count,
        "train_error": errors / count,
        "seconds": seconds,
    }


def _describe(entry: dict) -> str:
    text = (
        f"epoch {entry['epoch']} {entry['stage']}: loss {entry['train_loss']:.4f} train err {entry['train_error']:.4f}"
    )
    if "test_error" in entry:
        text += f" test err {entry['test_error']:.4f}"
    if "sample" in entry:
        text += f" [sample {entry['sample'] + 1}]"
    return text


@torch.no_grad()
def _evaluate(ch: _Chain, x: torch.Tensor, y: torch.Tensor, batch_size: int, amp: bool) -> dict:
    """The current iterate's test error and NLL (one model, no averaging)."""
    ch.model.eval()
    try:
        errors, nll = 0.0, 0.0
        for a in range(0, len(y), batch_size):
            with _autocast(x.device, amp):
                logits = ch.forward(x[a : a + batch_size])
            lp = torch.log_softmax(logits.double(), dim=1)
            yb = y[a : a + batch_size]
            errors += float((lp.argmax(dim=1) != yb).sum())
            nll -= float(lp.gather(1, yb[:, None]).sum())
    finally:
        ch.model.train()
    return {"test_error": errors / len(y), "test_nll": nll / len(y)}


def _results(config, ex, key, schedule, spe, store, pos, ch, x_test, y_test, amp, data_dir) -> dict:
    view = _SampleView(ch.model, ch.forward, amp)
    pred = predict(view, store, (x_test, y_test), batch_size=ex.eval_batch_size)
    bma = pred.metrics()
    samples = [
        {
            **meta,
            "test_error": float(pred.per_sample["test_error"][i]),
            "test_nll": float(pred.per_sample["test_nll"][i]),
        }
        for i, meta in enumerate(pos.samples)
    ]
    print(f"BMA over {len(store)} samples: test error {100 * bma['test_error']:.2f} %, "
          f"NLL {bma['test_nll']:.4f} nats per image", file=sys.stderr)  # fmt: skip
    return {
        "experiment": "Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning, §5.3 (CIFAR, Tables 2-3)",
        "config": asdict(config),
        "seed": config.seed,
        "data": {
            "dataset": config.dataset,
            "directory": data_dir,
            "n_train": key["n_train_used"],
            "n_test": key["n_test_used"],
            "sha256": key["data_sha256"],
        },
        "schedule": {**schedule.description, "steps_per_epoch": spe},
        "cost": {"epochs_per_chain": config.epochs_per_chain, "total_epochs": config.total_epochs},
        "units": {
            "alpha0": "step size on the mean loss (the samplers get alpha0 / n_train on U)",
            "temperature": "T on U = n_train * mean loss (1: the posterior)",
            "test_error": "fraction of test images",
            "test_nll": "nats per test image",
        },
        "bma": {**bma, "n_samples": len(store)},
        "samples": samples,
        "history": pos.history,
        "sessions": pos.sessions,
        "versions": {"sgsim": __version__, "torch": str(torch.__version__), "python": platform.python_version()},
    }


# --------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m sgsim.torch.experiments.cifar",
        description="cSGHMC / cSGLD on CIFAR-10/100 with a ResNet-18 (Cyclical Stochastic Gradient MCMC for "
        "Bayesian Deep Learning, §5.3). Defaults are the paper's. Exit status 0: finished; 75: checkpointed "
        "and stopped early (continue with --resume); 2: a bad argument.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    d = CifarConfig()
    p.add_argument(
        "--data",
        required=True,
        default=argparse.SUPPRESS,
        help="folder of the python version's files (or the folder above it)",
    )
    p.add_argument("--out", default="cifar_run", help="the run's folder: checkpoint.pt, samples/, results.json")
    p.add_argument("--resume", action="store_true", help="continue the run checkpointed in --out")
    p.add_argument("--dataset", choices=sorted(DATASETS), default=d.dataset, help="data set")
    p.add_argument("--sampler", choices=_SAMPLERS, default=d.sampler, help="sampler")
    p.add_argument("--epochs", type=int, default=d.epochs, help="per chain, or of all chains with --budget split")
    p.add_argument("--cycles", type=int, default=d.cycles, help="cosine cycles M per chain")
    p.add_argument("--alpha0", type=float, default=d.alpha0, help="first step size of a cycle, on the mean loss")
    p.add_argument(
        "--beta",
        type=float,
        default=None,
        help="exploration fraction; None: the paper's 0.8 (CIFAR-10) or 0.94 (CIFAR-100)",
    )
    p.add_argument("--samples-per-cycle", type=int, default=d.samples_per_cycle, help="at the last epoch ends")
    p.add_argument("--temperature", type=float, default=d.temperature, help="T on U (1: posterior; 2e-5: the code's)")
    p.add_argument("--friction", type=float, default=d.friction, help="cSGHMC's eta (momentum 1 - eta)")
    p.add_argument(
        "--weight-decay", type=float, default=d.weight_decay, help="Gaussian prior, w |theta|^2 / 2 per mean loss"
    )
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="images per step")
    p.add_argument("--chains", type=int, default=d.chains, help="independent chains, pooled")
    p.add_argument("--budget", choices=_BUDGETS, default=d.budget, help="--epochs per chain, or split")
    p.add_argument("--width", type=int, default=d.width, help="channels of the first stage (64: ResNet-18)")
    p.add_argument("--n-train", type=int, default=None, help="use the first N training images only; None: all")
    p.add_argument("--n-test", type=int, default=None, help="use the first N test images only; None: all")
    p.add_argument("--seed", type=int, default=d.seed, help="seed of every random number")
    e = Execution()
    p.add_argument("--device", default=None, help="cuda or cpu; None: cuda when available")
    p.add_argument("--amp", choices=("off", "bf16"), default=e.amp, help="bfloat16 forward pass")
    p.add_argument("--channels-last", action="store_true", help="NHWC memory order")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (not the sampler's step)")
    p.add_argument("--deterministic", action="store_true", help="deterministic kernels (bit-identical resume on GPU)")
    p.add_argument("--eval-batch-size", type=int, default=e.eval_batch_size, help="test images per pass")
    p.add_argument("--eval-every", type=int, default=e.eval_every, help="test the current iterate every N epochs")
    p.add_argument("--checkpoint-minutes", type=float, default=e.checkpoint_minutes,
                   help="also checkpoint within an epoch after this many minutes (0: epoch ends only)")  # fmt: skip
    p.add_argument(
        "--stop-after-steps",
        type=int,
        default=None,
        help="checkpoint and stop after this many steps of the run; None: run to the end",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


_CONFIG_FIELDS = tuple(CifarConfig.__dataclass_fields__)
_EXECUTION_FIELDS = tuple(f for f in Execution.__dataclass_fields__ if f != "progress")


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: ``python -m sgsim.torch.experiments.cifar --data DIR [options]``.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments (``sys.argv[1:]`` by default).

    Returns
    -------
    int
        0 when the run finished, :data:`EXIT_STOPPED` (75) when it checkpointed and stopped
        early; a bad argument exits with status 2 and a message naming its flag.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    stop = _Stop()
    try:
        config = CifarConfig(**{k: getattr(args, k) for k in _CONFIG_FIELDS})
        execution = Execution(**{k: getattr(args, k) for k in _EXECUTION_FIELDS}, progress=not args.no_progress)
        handlers = _install_handlers(stop)
        try:
            result = _run(config, args.data, args.out, args.resume, execution, stop)
        finally:
            for sig, old in handlers.items():
                signal.signal(sig, old)
    except (ParameterError, ParameterTypeError) as exc:
        flag = "--" + exc.parameter.replace("_", "-")
        parser.error(f"{flag}: {exc}")
    return 0 if result["status"] == "finished" else EXIT_STOPPED


def _install_handlers(stop: _Stop) -> dict:
    """SIGINT and SIGTERM ask for a checkpoint and a stop at the next step; a second SIGINT stops at once."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}

    def handler(signum, frame):
        if stop.reason is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.reason = f"signal {signal.Signals(signum).name}"

    saved = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        saved[sig] = signal.signal(sig, handler)
    return saved


if __name__ == "__main__":  # pragma: no cover - the command line
    sys.exit(main())
