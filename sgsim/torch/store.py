r"""Keep the samples of a Torch sampler off the accelerator, average their predictions, report per sample.

State, update and read-out, in that order:

- state: :class:`~sgsim.torch.SampleStore` holds each kept sample as one flat vector (the parameters in
  ``torch.nn.utils.parameters_to_vector`` order, each flattened in its logical row-major order),
  on ``device`` (the CPU by default, in pinned memory when the parameters live on a CUDA device),
  with its metadata: ``step``, ``cycle``, a weight for model averaging and any scalars given
  (e.g. the training loss).
- update (:meth:`~sgsim.torch.SampleStore.add`): the ``n``-th sample offered is kept always when the store is
  unbounded; with ``max_samples = k`` the store is a uniform reservoir (Vitter, "Random Sampling
  with a Reservoir", 1985, Algorithm R): the first ``k`` samples fill it, and sample ``n > k``
  draws ``j`` uniformly in ``{0, ..., n - 1}`` and replaces slot ``j`` if ``j < k``. By induction
  on ``n``, after ``n`` offers every sample is in the store with probability

  .. math::

      P(\text{sample } m \text{ kept after } n \text{ offers})
          = \frac{k}{\max(m, k)} \prod_{t=\max(m, k) + 1}^{n} \Big(1 - \frac{1}{t}\Big) = \frac{k}{n},
          \qquad m \le n,

  and every subset of ``k`` samples is equally likely. A rejected sample is never copied.
- read-out: :func:`~sgsim.torch.predict` loads each sample into a model in turn and averages its predictive
  distribution over the samples (Bayesian model averaging, the predictive of the cyclical paper's
  experiments, "Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning", §5), with weights
  :math:`w_s \ge 0`, :math:`\sum_s w_s = 1` (uniform by default):

  .. math::

      \bar p(y \mid x) = \sum_{s=1}^{S} w_s\, p(y \mid x, \theta_s), \qquad
      \log \bar p(y \mid x) = \operatorname{logsumexp}_s \big(\log w_s + \log p(y \mid x, \theta_s)\big),

  the second form (a log-mean-exp) being the one computed, so that a probability below the
  smallest float (``exp(-800)``) is not rounded to zero. For classification
  ``log p(y | x, theta_s)`` is the log-softmax of the model's logits; the test error, the negative
  log-likelihood (NLL) and the predictive entropy are those of :math:`\bar p`
  (:func:`~sgsim.torch.store.error_rate`, :func:`~sgsim.torch.store.nll`,
  :func:`~sgsim.torch.store.predictive_entropy`). For regression with Gaussian noise of
  precision :math:`\tau`, :math:`p(y \mid x, \theta_s) = \mathcal N(y; \mu_s(x), \tau^{-1})`
  and :math:`\bar p` is a mixture of Gaussians (:func:`~sgsim.torch.store.gaussian_mixture`,
  :func:`~sgsim.torch.store.gaussian_log_likelihood`). :func:`~sgsim.torch.to_inference_data`
  turns the store's per-sample scalars (never the network weights) into an
  ``arviz.InferenceData`` through :mod:`sgsim.results`.

Units: ``step`` and ``cycle`` are the caller's (e.g. the 1-based step and 0-based cycle of
:class:`~sgsim.torch.ScheduledStep`); log-likelihoods are in nats per test input; errors are
fractions in [0, 1].
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .. import __version__
from .. import rng as _rng
from .._validate import ParameterError, ParameterTypeError, integer, positive_float, real
from ..results import RunOutput
from ..results import to_inference_data as _results_to_inference_data
from .optim import make_generator

__all__ = [
    "SampleStore",
    "Predictions",
    "predict",
    "log_mean_exp",
    "bma_log_probs",
    "error_rate",
    "nll",
    "predictive_entropy",
    "gaussian_mixture",
    "gaussian_log_likelihood",
    "rmse",
    "to_inference_data",
]

# the store's reservoir draws come from SeedSequence(seed, spawn_key=(0, 3)), a stream apart from
# the optimizers' (0, 2): with one seed for both, which samples are kept is independent of the noise
_RESERVOIR_STREAM_KEY = (0, 3)

# the per-sample variables of to_inference_data that come from the store itself
_RESERVED = ("step", "cycle", "bma_weight")


def _reservoir_seed(seed: int) -> int:
    """A 128-bit seed for :func:`make_generator`, derived from ``seed`` on the reservoir's own stream."""
    words = np.random.SeedSequence(seed, spawn_key=_RESERVOIR_STREAM_KEY).generate_state(2, np.uint64)
    return int(words[0]) | (int(words[1]) << 64)


def _tensors(name: str, module_or_params) -> list[torch.Tensor]:
    """The tensors of a module (its ``parameters()``) or of an iterable of tensors, checked."""
    tensors: list[torch.Tensor]
    if isinstance(module_or_params, torch.nn.Module):
        tensors = list(module_or_params.parameters())
    elif isinstance(module_or_params, torch.Tensor):
        tensors = [module_or_params]
    elif isinstance(module_or_params, Iterable) and not isinstance(module_or_params, (str, bytes, Mapping)):
        tensors = list(module_or_params)
    else:
        raise ParameterTypeError(
            name, f"{name} must be a torch.nn.Module or an iterable of tensors, got {type(module_or_params).__name__}"
        )
    if not tensors:
        raise ParameterError(name, f"{name} holds no parameter")
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise ParameterTypeError(name, f"{name} must hold tensors only, got {type(t).__name__}")
        if not (t.is_floating_point() or t.is_complex()) or t.is_sparse:
            raise ParameterTypeError(name, f"{name} must hold dense floating-point tensors, got {t.dtype}")
    return tensors


def _check_scalar(name: str, value):
    """``value`` if it is a real number or a one-element real tensor (its value is not read here)."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.is_complex() or value.dtype == torch.bool:
            raise ParameterError(name, f"{name} must be a real scalar, got a {value.dtype} tensor of {value.numel()}")
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.integer, np.floating)):
        raise ParameterTypeError(name, f"{name} must be a real number or a one-element tensor, got {type(value)}")
    return value


def _scalar_value(value) -> float:
    return float(value.item()) if isinstance(value, torch.Tensor) else float(value)


class SampleStore:
    r"""The kept samples of a run, one flat vector each, with their step, cycle, weight and scalars.

    Every sample is copied off the accelerator when it is added (into pinned CPU memory, with
    ``non_blocking`` copies, when the parameters are on a CUDA device and ``device`` is the CPU),
    so that a store of many samples costs no accelerator memory. With ``max_samples = k`` the
    store is a uniform reservoir of size ``k`` (Algorithm R, see the module docs): after ``n``
    offers each one is kept with probability ``k / n``, whatever ``n``, and the choices come from
    a ``torch.Generator`` made by :func:`~sgsim.torch.make_generator` from the store's seed, so
    that a run with the same seed keeps the same samples.

    Sample ``i`` (``0 <= i < len(store)``) is the ``i``-th kept sample in the order they were
    offered, whatever the reservoir slot that holds it.

    Parameters
    ----------
    max_samples : int, optional
        ``k >= 1``: the reservoir's size; None keeps every sample.
    device : str or device
        Where the samples are kept; ``"cpu"`` by default.
    dtype : dtype, optional
        The floating-point ``torch`` dtype of the stored vectors; None takes the parameters'
        common dtype (``torch.promote_types`` over them) at the first :meth:`add`, so that
        :meth:`load_into` restores them exactly.
    seed : int, optional
        Non-negative seed of the reservoir's generator; None draws fresh entropy, recorded in
        ``seed``. The generator is ``make_generator(s)`` with ``s`` derived from ``seed`` on a
        stream of its own, so that an optimizer and a store given the same seed draw
        independent numbers.

    Attributes
    ----------
    max_samples : int or None
        As given.
    device : device
        Where the samples live.
    seed : int
        The sgsim seed of the reservoir's generator.
    generator : ``torch.Generator``
        The CPU generator of the reservoir's choices (to checkpoint: ``generator.get_state()``).
    n_seen : int
        Number of samples offered to :meth:`add`, kept or not.

    Raises
    ------
    ParameterError
        If ``max_samples < 1``, ``seed < 0`` or ``device`` is not a device.
    ParameterTypeError
        If an argument has the wrong type.

    Examples
    --------
    A reservoir of 3 samples out of 10, each a copy of a model's parameters:

    >>> import torch
    >>> from sgsim.torch.store import SampleStore
    >>> model = torch.nn.Linear(2, 1)
    >>> store = SampleStore(max_samples=3, seed=0)
    >>> for k in range(10):
    ...     with torch.no_grad():
    ...         _ = model.weight.fill_(float(k))
    ...     _ = store.add(model, step=k + 1, cycle=k // 5)
    >>> len(store), store.n_seen, store.n_parameters
    (3, 10, 3)
    >>> bool((store.steps == sorted(store.steps)).all())  # in the order they were offered
    True
    >>> store.load_into(model, 0)
    >>> bool(model.weight[0, 0] == float(store.steps[0] - 1))
    True
    """

    def __init__(self, max_samples: int | None = None, device="cpu", dtype=None, seed: int | None = None):
        self.max_samples = None if max_samples is None else integer("max_samples", max_samples, low=1)
        try:
            self.device = torch.device(device)
        except (RuntimeError, TypeError) as exc:
            raise ParameterError("device", f"device must name a torch device, got {device!r}") from exc
        if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise ParameterTypeError("dtype", f"dtype must be a floating-point torch.dtype or None, got {dtype!r}")
        self._dtype: torch.dtype | None = dtype
        self.seed: int = _rng.resolve_seed(seed)
        self.generator: torch.Generator = make_generator(_reservoir_seed(self.seed))
        self.n_seen = 0
        self._shapes: tuple[torch.Size, ...] | None = None
        self._scalar_names: tuple[str, ...] | None = None
        self._pinned = False
        # one entry per reservoir slot (per kept sample when unbounded), in slot order
        self._vectors: list[torch.Tensor] = []
        self._arrival: list[int] = []
        self._step: list[int] = []
        self._cycle: list[int] = []
        self._weight: list[float] = []
        self._scalars: list[tuple[float, ...]] = []
        self._pending: list[Any] = []  # CUDA events of copies still in flight

    # ----------------------------------------------------------------------- what the store holds

    def __len__(self) -> int:
        return len(self._vectors)

    @property
    def n_samples(self) -> int:
        """Number of samples kept (at most ``max_samples``)."""
        return len(self._vectors)

    @property
    def shapes(self) -> tuple:
        """The shapes of the parameters, in order (empty before the first :meth:`add`)."""
        return self._shapes or ()

    @property
    def n_parameters(self) -> int:
        """Length of each stored vector (0 before the first :meth:`add`)."""
        return sum(math.prod(s) for s in self.shapes)

    @property
    def dtype(self):
        """The dtype of the stored vectors (None before the first :meth:`add` unless given)."""
        return self._dtype

    def _order(self) -> list[int]:
        return sorted(range(len(self._arrival)), key=self._arrival.__getitem__)

    @property
    def steps(self) -> np.ndarray:
        """``step`` of each kept sample (int64, in the order they were offered)."""
        return np.array([self._step[j] for j in self._order()], dtype=np.int64)

    @property
    def cycles(self) -> np.ndarray:
        """``cycle`` of each kept sample (int64)."""
        return np.array([self._cycle[j] for j in self._order()], dtype=np.int64)

    @property
    def weights(self) -> np.ndarray:
        """Model-averaging weight of each kept sample as given to :meth:`add` (float64, not normalised)."""
        return np.array([self._weight[j] for j in self._order()], dtype=np.float64)

    @property
    def scalars(self) -> dict[str, np.ndarray]:
        """The ``scalars`` given to :meth:`add`, one float64 array per name, per kept sample."""
        names = self._scalar_names or ()
        order = self._order()
        return {name: np.array([self._scalars[j][c] for j in order], dtype=np.float64) for c, name in enumerate(names)}

    def vector(self, i: int) -> torch.Tensor:
        """The flat parameter vector of sample ``i`` (the stored tensor itself: do not modify it).

        Parameters
        ----------
        i : int
            ``0 <= i < len(store)``, or negative to count from the end.

        Returns
        -------
        ``torch.Tensor``
            Of shape ``(n_parameters,)``, on the store's device.
        """
        return self._vectors[self._slot(i)]

    def vectors(self) -> torch.Tensor:
        """All kept samples stacked, ``(n_samples, n_parameters)`` (a new tensor, on the store's device)."""
        self._synchronize()
        if not self._vectors:
            return torch.empty(0, self.n_parameters, dtype=self._dtype, device=self.device)
        return torch.stack([self._vectors[j] for j in self._order()])

    def __iter__(self) -> Iterator[torch.Tensor]:
        """The flat vectors of the kept samples, in the order they were offered."""
        self._synchronize()
        return iter([self._vectors[j] for j in self._order()])

    def _slot(self, i) -> int:
        n = len(self._vectors)
        if isinstance(i, bool) or not isinstance(i, numbers.Integral):
            raise ParameterTypeError("i", f"i must be an int, got {type(i).__name__}")
        i = int(i)
        if not -n <= i < n:
            raise ParameterError("i", f"i must lie in [{-n}, {n}) for a store of {n} samples, got {i}")
        self._synchronize()
        return self._order()[i]

    def _synchronize(self) -> None:
        """Wait for the copies still in flight, before anything reads the stored vectors."""
        for event in self._pending:
            event.synchronize()
        self._pending.clear()

    def _check_shapes(self, module_or_params, name: str = "module") -> list[torch.Tensor]:
        """The parameters of ``module_or_params``, checked against the stored shapes.

        Parameters
        ----------
        module_or_params : ``torch.nn.Module`` or iterable of tensors
            The model (its ``parameters()``) or its tensors, in order.
        name : str
            The argument's name in the error message.

        Returns
        -------
        list of ``torch.Tensor``

        Raises
        ------
        ParameterError
            If the number of tensors or a shape differs from the store's.
        """
        tensors = _tensors(name, module_or_params)
        if self._shapes is None:
            return tensors
        shapes = tuple(t.shape for t in tensors)
        if shapes != self._shapes:
            raise ParameterError(
                name,
                f"{name} has parameters of shapes {[tuple(s) for s in shapes]}; the store holds "
                f"{[tuple(s) for s in self._shapes]}",
            )
        return tensors

    # ----------------------------------------------------------------------- update

    def _choose_slot(self, n: int) -> int | None:
        """Algorithm R: the slot of the ``n``-th sample offered (1-based), or None to drop it."""
        k = self.max_samples
        if k is None:
            return n - 1
        if n <= k:
            return n - 1
        j = int(torch.randint(n, (1,), generator=self.generator).item())
        return j if j < k else None

    def add(self, module_or_params, *, step: int, cycle: int = 0, weight: float = 1.0, scalars=None) -> bool:
        """Offer the current parameters as a sample; copy them if the store keeps them.

        Parameters
        ----------
        module_or_params : ``torch.nn.Module`` or iterable of tensors
            The model (its ``parameters()``) or its tensors, in a fixed order; the first call
            fixes their shapes.
        step : int
            ``>= 0``, the iteration that produced the sample (e.g. ``ScheduledStep.index + 1``).
        cycle : int
            ``>= 0``, its cycle (e.g. ``ScheduledStep.cycle``).
        weight : float
            ``>= 0``, its weight in :func:`~sgsim.torch.predict`'s model average (normalised there), e.g. a
            cycle's weight from :func:`sgsim.diagnostics.cycle_weights` divided by the number
            of samples of that cycle (mind :ref:`erratum-cycle-weights`).
        scalars : mapping, optional
            Per-sample numbers to record (e.g. ``{"train_loss": loss}``), real scalars or
            one-element tensors (NaN and infinities are recorded as they are); the first call
            fixes the names. They are read only when the sample is kept (a tensor on an
            accelerator then costs one synchronisation).

        Returns
        -------
        bool
            Whether the sample was kept.

        Raises
        ------
        ParameterError
            If a shape differs from the first sample's, or a number is out of range.
        ParameterTypeError
            If an argument has the wrong type.
        """
        tensors = self._check_shapes(module_or_params, "module_or_params")
        step = integer("step", step, low=0)
        cycle = integer("cycle", cycle, low=0)
        weight = real("weight", _scalar_value(_check_scalar("weight", weight)), 0.0)
        if scalars is None:
            scalars = {}
        if not isinstance(scalars, Mapping):
            raise ParameterTypeError("scalars", f"scalars must be a mapping of names to numbers, got {type(scalars)}")
        names = tuple(scalars)
        for name in names:
            if not isinstance(name, str) or not name.isidentifier() or name in _RESERVED:
                raise ParameterError(
                    "scalars", f"scalar names must be identifiers other than {_RESERVED}, got {name!r}"
                )
        if self._scalar_names is not None and set(names) != set(self._scalar_names):
            raise ParameterError(
                "scalars", f"scalars must have the names of the first sample {self._scalar_names}, got {names}"
            )
        for name in names:
            _check_scalar(f"scalars[{name!r}]", scalars[name])
        if self._shapes is None:
            dtype = self._dtype
            if dtype is None:
                dtype = tensors[0].dtype
                for t in tensors[1:]:
                    dtype = torch.promote_types(dtype, t.dtype)
                if not dtype.is_floating_point:
                    raise ParameterTypeError("module_or_params", f"parameters of dtype {dtype} cannot be stored")
            self._dtype = dtype
            self._shapes = tuple(t.shape for t in tensors)
            self._scalar_names = names
            self._pinned = self.device.type == "cpu" and tensors[0].device.type == "cuda"
        self.n_seen += 1
        slot = self._choose_slot(self.n_seen)
        if slot is None:
            return False
        values = tuple(_scalar_value(scalars[name]) for name in self._scalar_names or ())
        if slot == len(self._vectors):
            buffer = torch.empty(self.n_parameters, dtype=self._dtype, device=self.device, pin_memory=self._pinned)
            self._vectors.append(buffer)
            for column in (self._arrival, self._step, self._cycle, self._weight, self._scalars):
                column.append(None)  # type: ignore[arg-type]
        self._copy_in(tensors, self._vectors[slot])
        self._arrival[slot] = self.n_seen
        self._step[slot] = step
        self._cycle[slot] = cycle
        self._weight[slot] = weight
        self._scalars[slot] = values
        return True

    @torch.no_grad()
    def _copy_in(self, tensors: list[torch.Tensor], buffer: torch.Tensor) -> None:
        # each parameter into its slice, in logical (row-major) order, the dtype cast by copy_;
        # device-to-pinned and device-to-device copies are queued, and waited for before a read
        streams = set()
        queued = buffer.device.type == "cuda" or self._pinned
        for t, chunk in zip(tensors, buffer.split([t.numel() for t in tensors]), strict=True):
            non_blocking = queued and t.device.type == "cuda"
            chunk.view(t.shape).copy_(t.detach(), non_blocking=non_blocking)
            if non_blocking:
                streams.add(t.device)
        for device in streams:
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(device))
            self._pending.append(event)

    # ----------------------------------------------------------------------- read-out

    @torch.no_grad()
    def load_into(self, module_or_params, i: int) -> None:
        """Copy sample ``i`` into a model's parameters, in place (their device, dtype and layout kept).

        Parameters
        ----------
        module_or_params : ``torch.nn.Module`` or iterable of tensors
            The model, or its tensors in the order given to :meth:`add`.
        i : int
            ``0 <= i < len(store)``, or negative to count from the end.

        Raises
        ------
        ParameterError
            If the shapes differ from the stored ones, or ``i`` is out of range.
        """
        tensors = self._check_shapes(module_or_params, "module_or_params")
        vector = self._vectors[self._slot(i)]
        for t, chunk in zip(tensors, vector.split([t.numel() for t in tensors]), strict=True):
            t.copy_(chunk.view(t.shape), non_blocking=vector.is_pinned())


# --------------------------------------------------------------------------- metrics


def _as_tensor(name: str, value, dtype=None) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value if dtype is None else value.to(dtype)
    try:
        return torch.as_tensor(np.asarray(value), dtype=dtype)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ParameterTypeError(name, f"{name} must be a tensor or an array") from exc


def _normalised_weights(weights, n: int, dtype=torch.float64, device=None) -> torch.Tensor:
    """``weights`` as a 1-D tensor of ``n`` non-negative entries summing to 1 (uniform if None)."""
    if weights is None:
        return torch.full((n,), 1.0 / n, dtype=dtype, device=device)
    w = _as_tensor("weights", weights, dtype).to(device)
    if w.shape != (n,):
        raise ParameterError("weights", f"weights must have shape ({n},), one per sample, got {tuple(w.shape)}")
    if not bool(torch.isfinite(w).all()) or bool((w < 0).any()):
        raise ParameterError("weights", "weights must be finite and >= 0")
    total = w.sum()
    if not total > 0:
        raise ParameterError("weights", "weights must not all be zero")
    return w / total


def log_mean_exp(x, dim: int = 0, weights=None) -> torch.Tensor:
    r"""``log(sum_s w_s exp(x_s))`` along ``dim``, without underflow.

    .. math::

        \operatorname{LME}_w(x) = \log \sum_{s=1}^{S} w_s e^{x_s}
            = m + \log \sum_{s=1}^{S} w_s e^{x_s - m}, \qquad m = \max_s x_s,

    with the weights normalised to sum to 1 (``1 / S`` each by default: the log of the mean of
    ``exp(x)``). Every term of the second sum is at most ``w_s``, and the largest is ``w_s``, so
    the result is finite whenever one ``x_s`` with ``w_s > 0`` is, where ``log(mean(exp(x)))``
    gives ``-inf`` as soon as every ``x_s`` is below about ``-745`` (float64).

    Parameters
    ----------
    x : ``torch.Tensor`` or array_like
        Values, e.g. log-probabilities of ``S`` samples along ``dim``.
    dim : int
        The axis of the samples.
    weights : array_like, optional
        ``S`` non-negative weights, normalised here; None for uniform.

    Returns
    -------
    ``torch.Tensor``
        ``x`` reduced along ``dim``.
    """
    x = _as_tensor("x", x)
    if not x.is_floating_point():
        x = x.to(torch.float64)
    dim = dim % x.dim() if x.dim() else 0
    n = x.shape[dim]
    if n == 0:
        raise ParameterError("x", "x must hold at least one sample along dim")
    if weights is None:
        return torch.logsumexp(x, dim) - math.log(n)
    w = _normalised_weights(weights, n, x.dtype, x.device)
    shape = [1] * x.dim()
    shape[dim] = n
    # log 0 = -inf removes a zero-weight sample from the sum
    return torch.logsumexp(x + torch.log(w).view(shape), dim)


def bma_log_probs(logits, weights=None) -> torch.Tensor:
    r"""Log of the model-averaged class probabilities, from per-sample logits.

    .. math::

        \log \bar p(k \mid x_i) = \log \sum_{s=1}^{S} w_s \operatorname{softmax}(f_s(x_i))_k
            = \operatorname{LME}_{w,s}\big(\log\operatorname{softmax}(f_s(x_i))_k\big),

    computed as :func:`~sgsim.torch.store.log_mean_exp` of the log-softmax, so that no probability underflows.

    Parameters
    ----------
    logits : ``torch.Tensor`` or array_like
        ``(S, n, K)``: the logits (or log-probabilities) of ``S`` samples for ``n`` inputs and
        ``K`` classes.
    weights : array_like, optional
        ``S`` non-negative model-averaging weights (normalised); None for ``1 / S`` each.

    Returns
    -------
    ``torch.Tensor``
        ``(n, K)`` log-probabilities; ``exp`` of a row sums to 1 up to rounding.
    """
    logits = _as_tensor("logits", logits)
    if logits.dim() != 3:
        raise ParameterError("logits", f"logits must have shape (samples, inputs, classes), got {tuple(logits.shape)}")
    return log_mean_exp(torch.log_softmax(logits, dim=-1), dim=0, weights=weights)


def _class_targets(log_probs: torch.Tensor, targets) -> torch.Tensor:
    targets = _as_tensor("targets", targets).to(log_probs.device)
    if log_probs.dim() != 2:
        raise ParameterError("log_probs", f"log_probs must have shape (inputs, classes), got {tuple(log_probs.shape)}")
    if targets.shape != log_probs.shape[:1]:
        raise ParameterError(
            "targets",
            f"targets must have shape ({log_probs.shape[0]},), one class per input, got {tuple(targets.shape)}",
        )
    if targets.is_floating_point() or targets.is_complex() or targets.dtype == torch.bool:
        raise ParameterTypeError("targets", f"targets must hold integer class indices, got {targets.dtype}")
    if targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= log_probs.shape[1]):
        raise ParameterError("targets", f"targets must be class indices in [0, {log_probs.shape[1]})")
    return targets.long()


def error_rate(log_probs, targets) -> float:
    r"""Fraction of inputs whose most probable class is not the target.

    .. math::

        \text{error} = \frac1n \sum_{i=1}^{n} \mathbf 1\big[\arg\max_k \bar p(k \mid x_i) \ne y_i\big],

    the first of tied classes winning (as ``argmax``).

    Parameters
    ----------
    log_probs : ``torch.Tensor`` or array_like
        ``(n, K)`` log-probabilities (or probabilities, or logits: only their order matters).
    targets : ``torch.Tensor`` or array_like of int
        ``(n,)`` classes in ``[0, K)``.

    Returns
    -------
    float
        In [0, 1].
    """
    log_probs = _as_tensor("log_probs", log_probs)
    targets = _class_targets(log_probs, targets)
    return float((log_probs.argmax(dim=1) != targets).double().mean())


def nll(log_probs, targets) -> float:
    r"""Mean negative log-likelihood of the targets, in nats per input.

    .. math::

        \mathrm{NLL} = -\frac1n \sum_{i=1}^{n} \log \bar p(y_i \mid x_i),

    read off log-probabilities (e.g. those of :func:`~sgsim.torch.store.bma_log_probs`, a log-mean-exp over the
    samples), so that a target probability below ``exp(-745)`` gives a large finite NLL rather
    than ``inf``.

    Parameters
    ----------
    log_probs : ``torch.Tensor`` or array_like
        ``(n, K)`` log-probabilities.
    targets : ``torch.Tensor`` or array_like of int
        ``(n,)`` classes in ``[0, K)``.

    Returns
    -------
    float
        ``>= 0`` for normalised log-probabilities.
    """
    log_probs = _as_tensor("log_probs", log_probs)
    targets = _class_targets(log_probs, targets)
    return float(-log_probs.gather(1, targets[:, None]).double().mean())


def predictive_entropy(log_probs) -> torch.Tensor:
    r"""Entropy of each input's predictive distribution, in nats.

    .. math::

        H_i = -\sum_{k=1}^{K} \bar p(k \mid x_i) \log \bar p(k \mid x_i), \qquad 0 \le H_i \le \log K,

    with ``0 log 0 = 0``: 0 for a certain prediction, ``log K`` for the uniform one (up to rounding).

    Parameters
    ----------
    log_probs : ``torch.Tensor`` or array_like
        ``(n, K)`` normalised log-probabilities (e.g. from :func:`~sgsim.torch.store.bma_log_probs`).

    Returns
    -------
    ``torch.Tensor``
        ``(n,)``.
    """
    log_probs = _as_tensor("log_probs", log_probs)
    if log_probs.dim() != 2:
        raise ParameterError("log_probs", f"log_probs must have shape (inputs, classes), got {tuple(log_probs.shape)}")
    p = log_probs.exp()
    return -torch.where(p > 0, p * log_probs, torch.zeros_like(p)).sum(dim=1)


def _sample_means(means) -> torch.Tensor:
    """``means`` as a floating tensor of shape ``(samples, inputs, ...)``, or a named error."""
    mu = _as_tensor("means", means)
    if not mu.is_floating_point():
        mu = mu.to(torch.float64)
    if mu.dim() < 2:
        raise ParameterError("means", f"means must have shape (samples, inputs, ...), got {tuple(mu.shape)}")
    return mu


def _gaussian_log_density(targets: torch.Tensor, mean: torch.Tensor, precision: float) -> torch.Tensor:
    """``log N(y; mu, 1 / tau)`` elementwise."""
    return 0.5 * math.log(precision / (2 * math.pi)) - 0.5 * precision * (targets - mean) ** 2


def _input_sum(x: torch.Tensor) -> torch.Tensor:
    """Sum over every axis after the first (the inputs'): independent outputs of one input."""
    return x.reshape(x.shape[0], -1).sum(dim=1)


def gaussian_mixture(means, noise_precision: float, weights=None) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Mean and variance of the model-averaged Gaussian predictive.

    With :math:`p(y \mid x, \theta_s) = \mathcal N(y; \mu_s(x), \tau^{-1})` the mixture
    :math:`\bar p = \sum_s w_s \mathcal N(\mu_s, \tau^{-1})` has (law of total variance)

    .. math::

        \bar\mu(x) = \sum_s w_s\, \mu_s(x), \qquad
        \bar\sigma^2(x) = \tau^{-1} + \sum_s w_s \big(\mu_s(x) - \bar\mu(x)\big)^2,

    the second sum computed about the mean (no cancellation).

    Parameters
    ----------
    means : ``torch.Tensor`` or array_like
        ``(S, n, ...)``: each sample's predicted mean for ``n`` inputs.
    noise_precision : float
        ``tau > 0``, the precision of the observation noise.
    weights : array_like, optional
        ``S`` non-negative weights (normalised); None for ``1 / S`` each.

    Returns
    -------
    mean, variance : ``torch.Tensor``
        Each ``(n, ...)``.
    """
    tau = positive_float("noise_precision", noise_precision)
    mu = _sample_means(means)
    w = _normalised_weights(weights, mu.shape[0], mu.dtype, mu.device).view((-1,) + (1,) * (mu.dim() - 1))
    mean = (w * mu).sum(dim=0)
    return mean, 1.0 / tau + (w * (mu - mean) ** 2).sum(dim=0)


def _regression_targets(name: str, targets, shape: torch.Size, dtype, device) -> torch.Tensor:
    y = _as_tensor(name, targets).to(device=device, dtype=dtype)
    if y.shape != shape:
        raise ParameterError(name, f"{name} must have the predictions' shape {tuple(shape)}, got {tuple(y.shape)}")
    return y


def gaussian_log_likelihood(means, targets, noise_precision: float, weights=None) -> float:
    r"""Mean test log-likelihood of the model-averaged Gaussian predictive, in nats per input.

    .. math::

        \mathrm{LL} = \frac1n \sum_{i=1}^{n} \log \sum_{s=1}^{S} w_s\,
            \mathcal N\big(y_i; \mu_s(x_i), \tau^{-1}\big)
        = \frac1n \sum_{i=1}^{n} \operatorname{LME}_{w,s}\Big(\tfrac12 \log\tfrac{\tau}{2\pi}
            - \tfrac\tau2 \big(y_i - \mu_s(x_i)\big)^2\Big),

    a log-mean-exp over the samples (:func:`~sgsim.torch.store.log_mean_exp`), finite even where every density
    underflows. An input with several outputs (independent noise) adds their log-densities.

    Parameters
    ----------
    means : ``torch.Tensor`` or array_like
        ``(S, n, ...)``: each sample's predicted mean.
    targets : ``torch.Tensor`` or array_like
        ``(n, ...)``: the observed values.
    noise_precision : float
        ``tau > 0``.
    weights : array_like, optional
        ``S`` non-negative weights (normalised); None for ``1 / S`` each.

    Returns
    -------
    float
    """
    tau = positive_float("noise_precision", noise_precision)
    mu = _sample_means(means)
    y = _regression_targets("targets", targets, mu.shape[1:], mu.dtype, mu.device)
    per_sample = torch.stack([_input_sum(_gaussian_log_density(y, m, tau)) for m in mu])  # (S, n)
    return float(log_mean_exp(per_sample, dim=0, weights=weights).mean())


def rmse(predictions, targets) -> float:
    r"""Root mean squared error, :math:`\sqrt{\frac1N \sum_j (y_j - \hat y_j)^2}` over every entry.

    Parameters
    ----------
    predictions, targets : ``torch.Tensor`` or array_like
        Of one shape, e.g. the mixture mean of :func:`~sgsim.torch.store.gaussian_mixture` and the observed values.

    Returns
    -------
    float
    """
    pred = _as_tensor("predictions", predictions)
    if not pred.is_floating_point():
        pred = pred.to(torch.float64)
    y = _regression_targets("targets", targets, pred.shape, pred.dtype, pred.device)
    return float(((y - pred) ** 2).mean().sqrt())


# --------------------------------------------------------------------------- predictions


@dataclass(frozen=True)
class Predictions:
    """What :func:`~sgsim.torch.predict` returns: the model average over the samples and per-sample scalars.

    Attributes
    ----------
    likelihood : str
        ``"categorical"`` or ``"gaussian"``.
    weights : ndarray
        The normalised model-averaging weights, one per sample.
    log_probs : ``torch.Tensor`` or None
        Categorical: ``(n, K)`` log of the averaged class probabilities (:func:`~sgsim.torch.store.bma_log_probs`).
    mean, variance : ``torch.Tensor`` or None
        Gaussian: the mixture's mean and variance (:func:`~sgsim.torch.store.gaussian_mixture`), ``(n, ...)``.
    targets : ``torch.Tensor`` or None
        The targets of the data, if it had any.
    log_likelihood : ``torch.Tensor`` or None
        ``(n,)``: ``log p_bar(y_i | x_i)`` of each target under the model average (None without targets).
    per_sample : dict
        Per-sample scalars, each an ndarray of shape ``(S,)``: ``test_nll`` and ``test_error``
        (categorical), or ``test_log_likelihood`` and ``test_rmse`` (Gaussian), each of one
        sample's own predictive; empty without targets.
    noise_precision : float or None
        Gaussian: ``tau``.
    """

    likelihood: str
    weights: np.ndarray
    log_probs: torch.Tensor | None = None
    mean: torch.Tensor | None = None
    variance: torch.Tensor | None = None
    targets: torch.Tensor | None = None
    log_likelihood: torch.Tensor | None = None
    per_sample: dict = field(default_factory=dict)
    noise_precision: float | None = None

    @property
    def probs(self) -> torch.Tensor:
        """The averaged class probabilities, ``exp(log_probs)`` (categorical only)."""
        if self.log_probs is None:
            raise ParameterError("likelihood", "probabilities exist for the categorical likelihood only")
        return self.log_probs.exp()

    @property
    def entropy(self) -> torch.Tensor:
        """Predictive entropy of each input (:func:`~sgsim.torch.store.predictive_entropy`; categorical only)."""
        if self.log_probs is None:
            raise ParameterError("likelihood", "the predictive entropy is computed for the categorical likelihood only")
        return predictive_entropy(self.log_probs)

    def metrics(self) -> dict[str, float]:
        """The model average's test metrics.

        Returns
        -------
        dict
            Categorical: ``test_error`` (:func:`~sgsim.torch.store.error_rate`), ``test_nll``
            (:func:`~sgsim.torch.store.nll`) and
            ``mean_entropy`` (the mean of :attr:`entropy`). Gaussian: ``test_rmse`` (of the
            mixture mean) and ``test_log_likelihood`` (per input). Without targets, only the
            entropy.
        """
        out: dict[str, float] = {}
        if self.log_probs is not None:
            if self.targets is not None:
                out["test_error"] = error_rate(self.log_probs, self.targets)
                out["test_nll"] = nll(self.log_probs, self.targets)
            out["mean_entropy"] = float(self.entropy.mean())
        elif self.targets is not None and self.log_likelihood is not None:
            out["test_rmse"] = rmse(self.mean, self.targets)
            out["test_log_likelihood"] = float(self.log_likelihood.mean())
        return out


def _batches(data, batch_size) -> Callable[[], Iterator[tuple[torch.Tensor, torch.Tensor | None]]]:
    """A function that returns a fresh iterator of ``(x, y or None)`` batches at each call."""
    if isinstance(data, torch.Tensor) or (
        isinstance(data, tuple) and 1 <= len(data) <= 2 and all(isinstance(t, torch.Tensor) for t in data)
    ):
        x, y = (data, None) if isinstance(data, torch.Tensor) else (data[0], data[1] if len(data) == 2 else None)
        if x.dim() == 0 or (y is not None and (y.dim() == 0 or y.shape[0] != x.shape[0])):
            raise ParameterError("data", "data must be inputs x, or (x, y) with one target per row of x")
        size = x.shape[0] if batch_size is None else integer("batch_size", batch_size, low=1)

        def tensors():
            for a in range(0, x.shape[0], max(size, 1)):
                yield x[a : a + size], None if y is None else y[a : a + size]

        return tensors
    if batch_size is not None:
        raise ParameterError("batch_size", "batch_size splits tensors; a loader makes its own batches")
    if not isinstance(data, Iterable) or isinstance(data, (str, bytes, Mapping)):
        raise ParameterTypeError("data", f"data must be a tensor, (x, y) tensors or a loader, got {type(data)}")

    def loader():
        for item in data:
            if isinstance(item, torch.Tensor):
                yield item, None
            elif isinstance(item, (tuple, list)) and item and all(isinstance(t, torch.Tensor) for t in item[:2]):
                yield item[0], item[1] if len(item) > 1 else None
            else:
                raise ParameterTypeError("data", "a loader must yield tensors x or tuples (x, y, ...)")

    return loader


def _accumulation_dtype(device: torch.device) -> torch.dtype:
    # float64 sums wherever the device has them (Apple's MPS has not)
    return torch.float32 if device.type == "mps" else torch.float64


def predict(
    module,
    store: SampleStore,
    data,
    *,
    batch_size: int | None = None,
    weights=None,
    likelihood: str = "categorical",
    noise_precision: float | None = None,
) -> Predictions:
    r"""Bayesian model average of a model's predictions over the stored samples.

    Each sample is loaded into ``module`` (:meth:`SampleStore.load_into`) and evaluated on every
    batch of ``data`` in ``eval()`` mode without gradients; the model average is accumulated as
    the batches go (the per-sample outputs are never all kept), in float64:

    - ``likelihood="categorical"``: the module returns logits ``(batch, K)``;
      ``log p_bar = logsumexp_s(log w_s + log_softmax(f_s))`` (:func:`~sgsim.torch.store.bma_log_probs`, one
      ``logaddexp`` per sample), and per sample ``test_nll`` ``= -mean_i log p_s(y_i | x_i)``
      and ``test_error``, of that sample's own prediction.
    - ``likelihood="gaussian"``: the module returns the mean ``mu_s(x)``, ``(batch, ...)`` (an
      output ``(batch, 1)`` for targets ``(batch,)`` is read as ``(batch,)``); the mixture
      mean and variance (:func:`~sgsim.torch.store.gaussian_mixture`, by a weighted running mean and sum of
      squared deviations), the test log-likelihood of each input (a log-mean-exp over the
      samples, :func:`~sgsim.torch.store.gaussian_log_likelihood`), and per sample ``test_log_likelihood`` and
      ``test_rmse``.

    The module's parameters and train/eval mode are restored afterwards (its parameters are
    saved in one copy on their device meanwhile); its buffers (e.g. batch-norm statistics) are
    not part of a sample and stay as they are.

    Parameters
    ----------
    module : ``torch.nn.Module``
        The model whose parameters have the store's shapes.
    store : SampleStore
        At least one sample.
    data : ``torch.Tensor``, tuple of tensors, or iterable
        Inputs ``x``; a tuple ``(x, y)`` of inputs and targets (split in batches of
        ``batch_size``); or a loader (any other iterable, e.g. a ``torch.utils.data.DataLoader``
        or a list of batches) yielding ``x`` or ``(x, y, ...)``. It is iterated once
        per sample, so a loader must yield the same batches each time (no shuffling: a change of
        targets between passes is an error).
    batch_size : int, optional
        ``>= 1``: the batch size for tensors (all at once by default); not for a loader.
    weights : array_like, optional
        ``S`` non-negative model-averaging weights (normalised); None uses the store's
        (:attr:`SampleStore.weights`, equal unless given to :meth:`~sgsim.torch.SampleStore.add`).
    likelihood : {"categorical", "gaussian"}
        Classification (softmax of logits) or regression with Gaussian noise.
    noise_precision : float, optional
        ``tau > 0``, the noise precision; required for, and only for, ``"gaussian"``.

    Returns
    -------
    Predictions
        The averaged predictive, the targets, and per-sample scalars (:class:`~sgsim.torch.Predictions`).

    Raises
    ------
    ParameterError
        If an argument is out of range or of the wrong shape (the message names it), the store
        is empty, or a loader's batches change between passes.
    ParameterTypeError
        If an argument has the wrong type.
    """
    if not isinstance(module, torch.nn.Module):
        raise ParameterTypeError("module", f"module must be a torch.nn.Module, got {type(module).__name__}")
    if not isinstance(store, SampleStore):
        raise ParameterTypeError("store", f"store must be a SampleStore, got {type(store).__name__}")
    if len(store) == 0:
        raise ParameterError("store", "the store holds no sample")
    if likelihood not in ("categorical", "gaussian"):
        raise ParameterError("likelihood", f"likelihood must be 'categorical' or 'gaussian', got {likelihood!r}")
    gaussian = likelihood == "gaussian"
    if gaussian:
        tau = positive_float("noise_precision", noise_precision)
    elif noise_precision is not None:
        raise ParameterError("noise_precision", "noise_precision is for likelihood='gaussian' only")
    params = store._check_shapes(module, "module")
    device = params[0].device
    acc = _accumulation_dtype(device)
    w = _normalised_weights(store.weights if weights is None else weights, len(store), torch.float64)
    batches = _batches(data, batch_size)
    state = _PassState()
    saved = [p.detach().clone() for p in params]
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            for s in range(len(store)):
                store.load_into(params, s)
                ws = float(w[s])
                sums = torch.zeros(2, dtype=acc, device=device)
                b = -1
                for b, (x, y) in enumerate(batches()):
                    out = module(x.to(device, non_blocking=True))
                    yd = state.check_batch(s, b, out, y, gaussian, device, acc)
                    if gaussian:
                        _gaussian_batch(state, b, out.to(acc), yd, tau, ws, sums)
                    else:
                        _categorical_batch(state, b, out.to(acc), yd, ws, sums)
                state.end_pass(s, b + 1)
                if gaussian and ws > 0:
                    state.weight_sum += ws
                if state.n_targets:
                    a, c = (float(v) / state.n_targets for v in sums.cpu())
                    if gaussian:
                        state.per_sample.setdefault("test_log_likelihood", []).append(a)
                        state.per_sample.setdefault("test_rmse", []).append(math.sqrt(c))
                    else:
                        state.per_sample.setdefault("test_nll", []).append(a)
                        state.per_sample.setdefault("test_error", []).append(c)
    finally:
        with torch.no_grad():
            for p, v in zip(params, saved, strict=True):
                p.copy_(v)
        module.train(was_training)
    return state.result(likelihood, w.numpy(), tau if gaussian else None)


class _PassState:
    """The accumulators of :func:`~sgsim.torch.predict`, one per batch, and the checks that the batches repeat."""

    def __init__(self):
        self.n_batches: int | None = None
        self.sizes: list[int] = []
        self.targets: list[torch.Tensor | None] = []
        self.n_targets = 0
        self.main: list[torch.Tensor] = []  # log p_bar (categorical) or the running mean (gaussian)
        self.m2: list[torch.Tensor] = []  # gaussian: weighted sum of squared deviations
        self.ll: list[torch.Tensor] = []  # gaussian: log p_bar(y_i | x_i)
        self.weight_sum = 0.0
        self.per_sample: dict[str, list[float]] = {}

    def check_batch(self, s, b, out, y, gaussian, device, acc) -> torch.Tensor | None:
        if out.dim() == 0:
            raise ParameterError("module", "module must return one row of outputs per input")
        if s == 0:
            if not gaussian and out.dim() != 2:
                raise ParameterError(
                    "module", f"module must return logits of shape (batch, classes), got {tuple(out.shape)}"
                )
            if y is not None and not gaussian:
                try:
                    _class_targets(out, y.to(out.device))  # shape, dtype, range
                except (ParameterError, ParameterTypeError) as exc:
                    raise type(exc)("data", f"the targets of data: {exc}") from exc
            if y is not None and gaussian:
                y = y.to(device=device, dtype=acc)
                if out.shape != y.shape and not (out.shape == y.shape + (1,)):
                    raise ParameterError(
                        "data", f"targets of shape {tuple(y.shape)} for outputs of shape {tuple(out.shape)}"
                    )
            if b > 0 and (y is None) != (self.targets[0] is None):
                raise ParameterError("data", "every batch must have targets, or none")
            self.sizes.append(out.shape[0])
            self.targets.append(None if y is None else y.detach().cpu())
            self.n_targets += 0 if y is None else out.shape[0]
            shape = out.shape if y is None or not gaussian else y.shape
            fill = -math.inf if not gaussian else 0.0
            self.main.append(torch.full(shape, fill, dtype=acc, device=device))
            if gaussian:
                self.m2.append(torch.zeros(shape, dtype=acc, device=device))
                if y is not None:
                    self.ll.append(torch.full(shape[:1], -math.inf, dtype=acc, device=device))
        else:
            ok = b < len(self.sizes) and out.shape[0] == self.sizes[b]
            first = self.targets[b] if ok else None
            ok = ok and (y is None) == (first is None)
            if ok and y is not None and first is not None:
                ok = torch.equal(y.detach().cpu(), first.to(y.dtype))
            if not ok:
                raise ParameterError(
                    "data", "data must yield the same batches at each pass over it (a loader without shuffling)"
                )
        if y is None:
            return None
        return y.to(device=device, dtype=acc if gaussian else torch.long, non_blocking=True)

    def end_pass(self, s, n) -> None:
        if n == 0:
            raise ParameterError("data", "data yielded no batch")
        if self.n_batches is None:
            self.n_batches = n
        elif n != self.n_batches:
            raise ParameterError(
                "data", f"data yielded {self.n_batches} batches at the first pass and {n} at pass {s + 1}"
            )

    def result(self, likelihood: str, weights: np.ndarray, tau: float | None) -> Predictions:
        has_targets = self.targets[0] is not None
        targets = torch.cat([t for t in self.targets if t is not None]) if has_targets else None
        per_sample = {k: np.array(v, dtype=np.float64) for k, v in self.per_sample.items()}
        if likelihood == "categorical":
            log_probs = torch.cat(self.main).cpu()
            ll = log_probs.gather(1, targets.long()[:, None])[:, 0] if targets is not None else None
            return Predictions(likelihood, weights, log_probs=log_probs, targets=targets, log_likelihood=ll,
                               per_sample=per_sample)  # fmt: skip
        assert tau is not None
        mean = torch.cat(self.main).cpu()
        variance = torch.cat(self.m2).cpu() / self.weight_sum + 1.0 / tau
        ll = torch.cat(self.ll).cpu() if self.ll else None
        return Predictions(likelihood, weights, mean=mean, variance=variance, targets=targets, log_likelihood=ll,
                           per_sample=per_sample, noise_precision=tau)  # fmt: skip


def _categorical_batch(state: _PassState, b: int, logits, y, ws: float, sums: torch.Tensor) -> None:
    lp = torch.log_softmax(logits, dim=-1)
    if ws > 0:
        torch.logaddexp(state.main[b], lp + math.log(ws), out=state.main[b])
    if y is not None:
        sums[0] -= lp.gather(1, y[:, None]).sum()
        sums[1] += (lp.argmax(dim=1) != y).sum()


def _gaussian_batch(state: _PassState, b: int, mu, y, tau: float, ws: float, sums: torch.Tensor) -> None:
    if y is not None:
        mu = mu.reshape(y.shape)
    if ws > 0:
        # West's weighted running mean and sum of squared deviations ("Updating mean and variance
        # estimates: an improved method", 1979): no cancellation, whatever the weights' order
        total = state.weight_sum + ws
        mean, m2 = state.main[b], state.m2[b]
        delta = mu - mean
        mean.add_(delta, alpha=ws / total)
        m2.add_(ws * delta * (mu - mean))
    if y is not None:
        log_density = _input_sum(_gaussian_log_density(y, mu, tau))
        if ws > 0:
            torch.logaddexp(state.ll[b], log_density + math.log(ws), out=state.ll[b])
        sums[0] += log_density.sum()
        sums[1] += ((y - mu) ** 2).sum()


# --------------------------------------------------------------------------- results


def to_inference_data(store: SampleStore, metrics=None):
    """An ``arviz.InferenceData`` of the store's per-sample scalars, built by :func:`sgsim.results.to_inference_data`.

    One chain (``chain = 1``), one draw per kept sample (``draw = 0 .. S - 1``, in the order
    they were offered). The network weights are not stored. Groups:

    ``sample_stats``
        ``(chain, draw)``: ``step``, ``cycle``, ``bma_weight`` (the weight given to
        :meth:`~sgsim.torch.SampleStore.add`, not normalised), every scalar recorded with the samples (e.g.
        ``train_loss``), and every entry of ``metrics`` (e.g. ``test_nll``, ``test_error``).
    ``posterior``
        ``theta`` with an empty ``dim`` (``(1, S, 0)``): the results module builds a
        posterior group with each set of draws, and the parameters are deliberately absent.
    ``constant_data``
        ``init``, empty likewise.

    Attributes (of every group): ``method`` (``"torch_sample_store"``), ``storage``
    (``"draws"``), ``seed`` (the store's), ``n_seen``, ``max_samples`` (``0`` for unbounded),
    ``n_parameters``, the versions, and, when ``metrics`` is a :class:`~sgsim.torch.Predictions` with
    targets, its model average's metrics prefixed ``bma_`` (e.g. ``bma_test_nll``).

    Parameters
    ----------
    store : SampleStore
        At least one sample.
    metrics : Predictions or mapping, optional
        Per-sample scalars: a :class:`~sgsim.torch.Predictions` (its ``per_sample``) or a mapping of names to
        arrays of shape ``(S,)``.

    Returns
    -------
    arviz.InferenceData

    Raises
    ------
    ParameterError
        If the store is empty, a metric does not have one value per sample, or a name is
        used twice.
    """
    if not isinstance(store, SampleStore):
        raise ParameterTypeError("store", f"store must be a SampleStore, got {type(store).__name__}")
    n = len(store)
    if n == 0:
        raise ParameterError("store", "the store holds no sample")
    attrs: dict[str, Any] = {
        "method": "torch_sample_store",
        "storage": "draws",
        "seed": store.seed,
        "n_seen": store.n_seen,
        "max_samples": store.max_samples or 0,
        "n_parameters": store.n_parameters,
        "sgsim_version": __version__,
        "torch_version": str(torch.__version__),  # a str subclass that h5py cannot write
        "rng": "torch.Generator (make_generator) from SeedSequence(seed, spawn_key=(0, 3)); Algorithm R",
    }
    if metrics is None:
        values: Mapping = {}
    elif isinstance(metrics, Predictions):
        values = metrics.per_sample
        attrs.update({f"bma_{k}": v for k, v in metrics.metrics().items()})
    elif isinstance(metrics, Mapping):
        values = metrics
    else:
        raise ParameterTypeError("metrics", f"metrics must be Predictions or a mapping, got {type(metrics).__name__}")
    stats: dict[str, np.ndarray] = {"step": store.steps, "cycle": store.cycles, "bma_weight": store.weights}
    stats.update(store.scalars)
    for name, value in values.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ParameterError("metrics", f"metric names must be identifiers, got {name!r}")
        if name in stats:
            raise ParameterError("metrics", f"metric {name!r} is already a per-sample variable of the store")
        arr = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        if arr.shape != (n,):
            raise ParameterError("metrics", f"metric {name!r} must have shape ({n},), one per sample, got {arr.shape}")
        stats[name] = arr
    out = RunOutput(
        storage="draws",
        theta=np.zeros((1, n, 0)),
        draw_stats={},
        chain_stats={name: np.ascontiguousarray(v)[None, :] for name, v in stats.items()},
        constants={"init": np.zeros((1, 0))},
        moments=None,
        attrs=attrs,
    )
    return _results_to_inference_data(out)
