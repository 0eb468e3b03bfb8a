r"""Constant SGD and diagonally preconditioned SGD as ``torch.optim.Optimizer`` subclasses, with the
online noise estimate of "Stochastic Gradient Descent as Approximate Bayesian Inference".

Units are that paper's (:ref:`theory-constant-sgd`): the loss is the *mean* minibatch loss
``L_S = (1/S) sum_i ell_i``, an estimate of the averaged loss ``L = U / N`` (``N = num_data``
data points, ``U`` the negative log posterior), and ``lr`` is the learning rate ``epsilon`` on
it, as for ``torch.optim.SGD``. ``C`` is the covariance of one example's gradient
``grad ell_n`` of the averaged loss, ``S = batch_size``, ``D`` the number of parameter entries.

State, init and update, in that order:

- state: per parameter, the number of noise pairs seen (``state[p]["pairs"]``) and the running
  mean of eq. 21 before its bias is fixed: :class:`ConstantSGD` keeps ``|g_1 - g_S|^2`` of the
  parameter (``state[p]["noise_sq"]``, a 0-dimensional tensor), :class:`PreconditionedSGD`
  keeps ``(g_1 - g_S)^2`` entry by entry (``state[p]["noise_var"]``) and its preconditioner
  (``state[p]["preconditioner"]``). All of it lives in ``state_dict``.
- init: ``ConstantSGD(params, lr, num_data, batch_size, ...)``,
  ``PreconditionedSGD(params, lr, preconditioner, num_data, batch_size, ...)``; every number is
  checked before any work.
- update (``step(closure=None, *, first_example_grads=None)``), with ``g_S`` the gradient of
  the mean minibatch loss (the parameters' ``.grad``):

.. math::

    \text{ConstantSGD:}\quad \theta_t = \theta_{t-1} - \varepsilon_t\, \hat g_S(\theta_{t-1}),
    \qquad \varepsilon_t = \min\Big(\varepsilon_{\max},
        \frac{2 S D}{N f \operatorname{Tr}\hat C_t}\Big) \text{ after warm-up},

    \text{PreconditionedSGD:}\quad \theta_t = \theta_{t-1} - \varepsilon\, H_t\, \hat g_S(\theta_{t-1}),
    \qquad (H_t)_{kk} = \min\Big(h_{\max}, \frac{2 S}{N f (\hat C_t)_{kk}}\Big) \text{ after warm-up},

the rate of Theorem 1 (eq. 15; :func:`sgsim.theory.kl.optimal_lr`, :ref:`theory-optimal-rate`)
and the diagonal preconditioner of Corollary 3 (:func:`sgsim.theory.kl.diagonal_preconditioner`,
:ref:`theory-diagonal-preconditioner`; eqs. 18-19 for the preconditioned update,
:ref:`theory-preconditioned-sgd`), from the running estimate of eq. 21 with its bias fixed
(:ref:`theory-vem`):

.. math::

    \hat C_t = \frac{1}{b\, n_t} \sum_{\tau} (g_{1,\tau} - g_{S,\tau})(g_{1,\tau} - g_{S,\tau})^\top,
    \qquad b = \Big(1 - \frac1S\Big) \times \begin{cases} 1 & \text{with replacement} \\
        N / (N - 1) & \text{without} \end{cases}

over the ``n_t`` steps ``tau <= t`` that were given a pair (``b`` is
:func:`sgsim.estimators.bias_factor`; ``unbias=False`` keeps the paper's form, ``b = 1``, which
underestimates ``C`` by ``1 - 1/S``). Only the trace (``ConstantSGD``) or the diagonal
(``PreconditionedSGD``) of ``C_hat`` is kept: ``D`` numbers at most, never a ``D x D`` matrix.
``f`` is the finite-population factor of the minibatch noise
(:func:`sgsim.targets.regression.noise_factor`: 1 with replacement, ``(N - S) / (N - 1)``
without), since ``Cov g_S = f C / S`` and the paper's formulas, written for ``C / S``, then take
``f C`` (:ref:`theory-noise-model`).

The first example's gradient. Eq. 21 pairs the minibatch mean ``g_S`` (the ``.grad`` that the
step uses) with ``g_1``, the gradient of the first example's term ``ell_1`` of the same mean
loss, at the same parameters. It is passed to ``step`` as ``first_example_grads``: one tensor
per parameter of the optimizer, in the order of the parameter groups and of their parameters
(None, or a missing gradient, counts as zero). With per-example losses (``reduction="none"``)
it is one more backward pass through the same graph::

    losses = loss_fn(model(x), y, reduction="none")  # ell_i, i = 1..S
    g1 = torch.autograd.grad(losses[0], params, retain_graph=True, allow_unused=True)
    optimizer.zero_grad()
    losses.mean().backward()
    optimizer.step(first_example_grads=g1)

A term common to all examples (a prior, an explicit weight-decay term) must be in both losses or
in neither: it cancels in ``g_1 - g_S`` only then. A step without ``first_example_grads`` uses
the estimate as it stands, so the extra backward pass may be paid every few steps only. ``C``
is the noise near the optimum (the paper's assumption A2), and the running mean never forgets:
pairs from a transient far from the optimum inflate it, so give them after a burn-in (until
the estimate holds ``warmup`` pairs, the steps run at ``warmup_lr``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from .._validate import ParameterError, ParameterTypeError, boolean, integer, positive_float
from ..estimators import bias_factor
from ..targets.regression import noise_factor
from ..theory.kl import diagonal_preconditioner, optimal_lr
from ._trust import Watched, split_extras
from .optim import _CheckedOptimizer

__all__ = ["ConstantSGD", "PreconditionedSGD"]

# one parameter group's work: the group, its parameters with a gradient, their gradients
_Work = tuple[dict, list[torch.Tensor], list[torch.Tensor]]


def _optional_positive(name: str, value) -> float | None:
    return None if value is None else positive_float(name, value)


class _NoiseEstimating(Watched, _CheckedOptimizer):
    """What both optimizers share: the checks, and the running estimate of eq. 21."""

    # the state key of the running mean, and whether it is kept entry by entry
    _key = "noise_sq"
    _per_entry = False

    def __init__(self, params, defaults: dict, num_data, batch_size, replace, unbias, estimating: str | None,
                 watch: tuple = ("raise", 1, None)):  # fmt: skip
        if isinstance(params, torch.Tensor):
            raise ParameterTypeError(
                "params", "params must be an iterable of tensors or of parameter groups (dicts), not one tensor"
            )
        params = list(params)
        if not params:
            raise ParameterError("params", "params must hold at least one tensor or parameter group, got none")
        self._check_group(defaults)
        self._watch(*watch)
        self.replace = boolean("replace", replace)
        self.unbias = boolean("unbias", unbias)
        if (num_data is None) != (batch_size is None):
            missing = "batch_size" if batch_size is None else "num_data"
            raise ParameterTypeError(missing, "give num_data and batch_size together (N and S of the paper)")
        self.num_data: int | None = None if num_data is None else integer("num_data", num_data, low=1)
        self.batch_size: int | None = None if batch_size is None else integer("batch_size", batch_size, low=1)
        self._cache: float | None = None  # a rate computed from the estimate, None once a pair is added
        self._bias: float | None = None  # b of eq. 21, None where no estimate can be made
        self._noise = 1.0  # f of Cov g_S = f C / S
        if self.num_data is not None and self.batch_size is not None:
            n, s = self.num_data, self.batch_size
            if s > n:
                raise ParameterError("batch_size", f"batch_size must be <= num_data ({n}), got {s}")
            self._noise = noise_factor(n, s, self.replace)
            if s >= 2:
                self._bias = bias_factor(s, n, self.replace)
        if estimating is not None:
            if self.num_data is None:
                raise ParameterTypeError(
                    "num_data", f"{estimating} needs num_data and batch_size (N and S of Theorem 1 and eq. 21)"
                )
            if self._bias is None:
                raise ParameterError(
                    "batch_size",
                    f"{estimating} needs batch_size >= 2: with one example, the first example's gradient is the "
                    "minibatch mean and eq. 21 learns nothing",
                )
            if self._noise == 0.0:
                raise ParameterError(
                    "batch_size",
                    f"{estimating} needs gradient noise: batch_size = num_data without replacement is the full batch",
                )
        super().__init__(params, defaults)

    def _check_group(self, group: dict) -> None:
        group["lr"] = positive_float("lr", group["lr"])

    # ------------------------------------------------------------------ gradients and pairs

    def _begin_step(self, closure, first_example_grads):
        """Run the closure, collect the gradients and add the step's noise pair, in that order.

        A chain whose divergence was marked has stopped: its work is None, and no pair is added.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self.divergence is not None:
            return loss, None
        work = self._gradients()
        if first_example_grads is not None:
            self._observe(first_example_grads)
        return loss, work

    def _gradients(self) -> list[_Work]:
        out: list[_Work] = []
        for group in self.param_groups:
            self._check_group(group)
            params = [p for p in group["params"] if p.grad is not None]
            grads = [p.grad for p in params if p.grad is not None]
            if any(g.is_sparse for g in grads):
                raise ParameterTypeError("params", "sparse gradients are not supported")
            out.append((group, params, grads))
        return out

    def _observe(self, first_example_grads) -> None:
        """Add one pair ``(g_1, g_S)`` of eq. 21 for every parameter with a gradient."""
        if self._bias is None:
            if self.num_data is None:
                raise ParameterTypeError(
                    "num_data", "first_example_grads need num_data and batch_size: the bias of eq. 21 depends on them"
                )
            raise ParameterError("batch_size", "first_example_grads need batch_size >= 2 (eq. 21)")
        if isinstance(first_example_grads, torch.Tensor) or not isinstance(first_example_grads, Sequence):
            raise ParameterTypeError(
                "first_example_grads", "first_example_grads must be a list of tensors, one per parameter"
            )
        every = [p for group in self.param_groups for p in group["params"]]
        if len(first_example_grads) != len(every):
            raise ParameterError(
                "first_example_grads",
                f"first_example_grads must hold one tensor (or None) per parameter ({len(every)}), "
                f"got {len(first_example_grads)}",
            )
        pairs = []
        for p, g1 in zip(every, first_example_grads, strict=True):
            if p.grad is None:
                continue
            if g1 is None:
                g1 = torch.zeros_like(p.grad)
            elif not isinstance(g1, torch.Tensor):
                raise ParameterTypeError("first_example_grads", "each entry must be a tensor or None")
            elif g1.shape != p.shape or g1.dtype != p.grad.dtype or g1.device != p.grad.device:
                raise ParameterError(
                    "first_example_grads",
                    f"each gradient must have its parameter's shape {tuple(p.shape)}, dtype {p.grad.dtype} "
                    f"and device {p.grad.device}, got {tuple(g1.shape)}, {g1.dtype}, {g1.device}",
                )
            pairs.append((p, g1.detach()))
        # parameters grouped by their count after this pair, so that each group is one foreach call
        buckets: dict[int, tuple[list, list, list]] = {}
        for p, g1 in pairs:
            state = self.state[p]
            if self._key not in state:
                state["pairs"] = 0
                state[self._key] = (
                    torch.zeros_like(p, memory_format=torch.preserve_format)
                    if self._per_entry
                    else torch.zeros((), dtype=p.dtype, device=p.device)
                )
            state["pairs"] += 1
            firsts, means, accs = buckets.setdefault(state["pairs"], ([], [], []))
            firsts.append(g1)
            means.append(p.grad)
            accs.append(state[self._key])
        for count, (firsts, means, accs) in buckets.items():
            dev = torch._foreach_sub(firsts, means)
            if self._per_entry:
                sq = torch._foreach_mul(dev, dev)
            else:
                norms = torch._foreach_norm(dev)
                sq = torch._foreach_mul(norms, norms)
            # the running mean of eq. 21 with kappa_t = 1 / t
            torch._foreach_lerp_(accs, sq, 1.0 / count)
        self._cache = None

    def state_dict(self) -> dict[str, Any]:
        """The ``state_dict`` of ``torch.optim`` (the estimate included), the steps taken and a divergence's record."""
        return self._watched_state(super().state_dict())

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a ``state_dict`` (as torch's), the estimate, the step count and the divergence record included."""
        torch_part, extras = split_extras(state_dict, type(self).__name__)
        super().load_state_dict(torch_part)
        self._load_watched(extras)
        self._cache = None

    @property
    def pairs(self) -> int:
        """Pairs ``(g_1, g_S)`` in the estimate so far (the fewest over the parameters that have one)."""
        counts = [s["pairs"] for s in self.state.values() if "pairs" in s]
        return min(counts) if counts else 0

    def _scale(self) -> float:
        # 1 / b with the bias fixed, else the paper's form
        assert self._bias is not None
        return 1.0 / self._bias if self.unbias else 1.0

    def _raw_trace(self) -> tuple[float, int]:
        """``sum`` of the running means over all entries, and the number ``D`` of entries."""
        buckets: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
        size = 0
        for p, state in self.state.items():
            if isinstance(p, torch.Tensor) and self._key in state:
                acc = state[self._key]
                buckets.setdefault((acc.device, acc.dtype), []).append(acc.sum() if self._per_entry else acc)
                size += p.numel()
        total = sum(float(torch.stack(accs).sum()) for accs in buckets.values())
        return total, size

    @property
    def trace_c(self) -> float | None:
        """The estimate of ``Tr C`` (bias fixed unless ``unbias=False``); None before the first pair."""
        if self._bias is None or self.pairs == 0:
            return None
        return self._raw_trace()[0] * self._scale()

    def _no_noise(self) -> ParameterError:
        return ParameterError(
            "first_example_grads",
            "the estimated gradient noise is zero: the first example's gradient equalled the minibatch mean at "
            "every observed step (are the examples identical, or g_1 not the first example's gradient?)",
        )


class ConstantSGD(_NoiseEstimating):
    r"""Constant SGD on the mean minibatch loss, optionally at Theorem 1's KL-optimal rate.

    .. math::

        \theta_t = \theta_{t-1} - \varepsilon_t\, \hat g_S(\theta_{t-1})

    ("Stochastic Gradient Descent as Approximate Bayesian Inference", eq. 5;
    :ref:`theory-sgd-stationary`), ``g_S`` the gradient of the mean loss. With a number as
    ``lr`` it is ``torch.optim.SGD`` without momentum, bit for bit. With ``lr="kl_optimal"``
    the steps use each group's ``lr`` (``warmup_lr`` unless a group sets its own) until the
    estimate holds ``warmup`` pairs, then every group steps at

    .. math::

        \varepsilon^* = \frac{2 S D}{N f \operatorname{Tr}\hat C}

    (Theorem 1, eq. 15), computed by :func:`sgsim.theory.kl.optimal_lr` on the ``1 x 1`` matrix
    ``[[f Tr C_hat / D]]``, which has the ratio ``D / Tr C`` of the full ``C`` (only ``Tr C``
    enters Theorem 1), capped at ``max_lr``. ``D`` counts the entries of the parameters in the
    estimate; ``Tr C_hat`` is eq. 21's running estimate with its bias fixed (module notes). The
    rate is recomputed after every step that adds a pair and written into every group's
    ``lr``.

    Theorem 1's rate is the optimum of the Ornstein-Uhlenbeck approximation: nothing keeps it
    below the stability limit ``2 / lambda_max(A)`` of the recursion (``A`` the Hessian of the
    averaged loss), which ``max_lr`` can enforce (:ref:`theory-optimal-rate`).

    Parameters
    ----------
    params : iterable
        Tensors or parameter groups (dicts); groups may set their own ``lr`` (with
        ``lr="kl_optimal"``: their warm-up rate).
    lr : float or "kl_optimal"
        ``epsilon > 0``, the learning rate on the mean loss, or ``"kl_optimal"``.
    num_data : int, optional
        ``N >= 1``, the number of data points; needed with ``lr="kl_optimal"`` and for
        ``first_example_grads``.
    batch_size : int, optional
        ``S``, in ``[1, num_data]`` (at least 2 for the estimate).
    warmup_lr : float, optional
        The rate of the warm-up steps; required with ``lr="kl_optimal"`` and only then.
    warmup : int
        Pairs the estimate needs before Theorem 1's rate is used (>= 1).
    max_lr : float, optional
        A cap on Theorem 1's rate (only with ``lr="kl_optimal"``).
    replace : bool
        Whether minibatches are drawn with replacement (sets ``b`` and ``f``; a shuffled
        ``DataLoader`` draws without).
    unbias : bool
        Divide eq. 21 by its bias factor ``b`` (default); False is the paper's form.
    on_divergence, check_every, divergence_bound
        The divergence check (:class:`~sgsim.torch.Divergence`), as for :class:`~sgsim.torch.SGLD`:
        ``"raise"`` (default) or ``"mark"``; check after every ``check_every``-th step; a bound
        ``> 0`` on every ``|theta_i|``, or None (default: only non-finite values diverge). A
        rate beyond the recursion's stability limit makes the iterates grow geometrically until
        they overflow: the check names the step and the parameter.

    Attributes
    ----------
    divergence : Divergence or None
        Where the chain diverged, with ``on_divergence="mark"`` (None while it has not).
    kl_optimal : bool
        Whether the rate is Theorem 1's.
    num_data, batch_size : int or None
        ``N`` and ``S``.
    warmup : int
        The pairs needed before the switch.
    max_lr : float or None
        The cap of Theorem 1's rate.
    trace_c : float or None
        The estimate of ``Tr C`` (bias fixed unless ``unbias=False``); None before the first pair.
    pairs : int
        The pairs ``(g_1, g_S)`` in the estimate (the fewest over the parameters).

    Raises
    ------
    ParameterError
        If a number is out of range (the message names the parameter), or ``params`` is empty.
    ParameterTypeError
        If an argument has the wrong type or a needed one is missing.

    Examples
    --------
    Linear regression on 1000 points, the pairs given after a burn-in of 200 steps, and the
    estimate against ``Tr C`` of the data at the least-squares solution (about 3: unit noise,
    standard normal inputs), and the rate against Theorem 1's ``2 S D / (N Tr C)``:

    >>> import torch
    >>> from sgsim.torch.constant_sgd import ConstantSGD
    >>> gen = torch.Generator().manual_seed(0)
    >>> x = torch.randn(1000, 3, generator=gen)
    >>> y = x @ torch.tensor([1.0, -2.0, 0.5]) + torch.randn(1000, generator=gen)
    >>> w = torch.zeros(3, requires_grad=True)
    >>> opt = ConstantSGD([w], lr="kl_optimal", num_data=1000, batch_size=10, warmup_lr=0.05, warmup=100)
    >>> for t in range(1500):
    ...     idx = torch.randint(0, 1000, (10,), generator=gen)
    ...     losses = 0.5 * (x[idx] @ w - y[idx]) ** 2  # the per-example terms of the mean loss
    ...     g1 = torch.autograd.grad(losses[0], [w], retain_graph=True) if t >= 200 else None
    ...     opt.zero_grad()
    ...     losses.mean().backward()
    ...     _ = opt.step(first_example_grads=g1)
    >>> w_hat = torch.linalg.lstsq(x, y).solution
    >>> g = (x @ w_hat - y)[:, None] * x  # every example's gradient at the optimum
    >>> trace_c = float(((g - g.mean(0)) ** 2).sum(1).mean())
    >>> print(f"{trace_c:.1f}")
    3.0
    >>> bool(abs(opt.trace_c / trace_c - 1) < 0.2 and abs(opt.current_lr * 1000 * trace_c / 60 - 1) < 0.2)
    True
    """

    def __init__(self, params, lr, num_data: int | None = None, batch_size: int | None = None, *,
                 warmup_lr: float | None = None, warmup: int = 100, max_lr: float | None = None,
                 replace: bool = True, unbias: bool = True, on_divergence: str = "raise", check_every: int = 1,
                 divergence_bound: float | None = None):  # fmt: skip
        if isinstance(lr, str):
            if lr != "kl_optimal":
                raise ParameterError("lr", f"lr must be a number > 0 or 'kl_optimal', got {lr!r}")
            if warmup_lr is None:
                raise ParameterTypeError("warmup_lr", "lr='kl_optimal' needs warmup_lr, the rate of the warm-up steps")
        else:
            for name, value in (("warmup_lr", warmup_lr), ("max_lr", max_lr)):
                if value is not None:
                    raise ParameterError(name, f"{name} goes with lr='kl_optimal' only")
        self.kl_optimal = lr == "kl_optimal"
        self.warmup = integer("warmup", warmup, low=1)
        self.max_lr = _optional_positive("max_lr", max_lr)
        defaults = dict(lr=positive_float("warmup_lr", warmup_lr) if self.kl_optimal else lr)
        super().__init__(params, defaults, num_data, batch_size, replace, unbias,
                         "lr='kl_optimal'" if self.kl_optimal else None,
                         (on_divergence, check_every, divergence_bound))  # fmt: skip

    pairs = _NoiseEstimating.pairs  # documented here
    trace_c = _NoiseEstimating.trace_c

    @property
    def current_lr(self) -> float:
        """The rate of the last step (the next one's before any step), of the first group."""
        return self.param_groups[0]["lr"]

    def _kl_rate(self) -> float:
        if self._cache is None:
            total, size = self._raw_trace()
            trace = total * self._scale()
            if not trace > 0:
                raise self._no_noise()
            assert self.num_data is not None and self.batch_size is not None
            rate = float(optimal_lr(np.array([[self._noise * trace / size]]), self.num_data, self.batch_size))
            self._cache = rate if self.max_lr is None else min(rate, self.max_lr)
        return self._cache

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None, *, first_example_grads=None):
        """One update of every parameter that has a gradient.

        Parameters
        ----------
        closure : callable, optional
            Re-evaluates the loss (with gradients enabled) and returns it.
        first_example_grads : sequence of tensors, optional
            ``g_1``, the gradient of the first example's term of the mean loss at the current
            parameters: one tensor (or None, read as zero) per parameter, in the order of the
            parameter groups and of their parameters. Adds the pair ``(g_1, .grad)`` to the
            estimate before the step.

        Returns
        -------
        float or None
            The closure's loss, if a closure was given.
        """
        loss, work = self._begin_step(closure, first_example_grads)
        if work is None:  # marked: the chain has stopped
            return loss
        if self.kl_optimal and self.pairs >= self.warmup:
            rate = self._kl_rate()
            for group in self.param_groups:
                group["lr"] = rate
        moved: list[torch.Tensor] = []
        for group, params, grads in work:
            if params:
                # torch.optim.SGD's own operation, so that a fixed rate is SGD bit for bit
                torch._foreach_add_(params, grads, alpha=-group["lr"])
                moved += params
        self._count_step(moved)
        return loss


class PreconditionedSGD(_NoiseEstimating):
    r"""SGD with a diagonal preconditioner: fixed, or Corollary 3's from the online estimate.

    .. math::

        \theta_t = \theta_{t-1} - \varepsilon\, H\, \hat g_S(\theta_{t-1})

    ("Stochastic Gradient Descent as Approximate Bayesian Inference", §4.1, eqs. 18-19;
    :ref:`theory-preconditioned-sgd`), ``H`` diagonal and positive, ``epsilon = lr`` per
    group; the paper's form, where ``H`` absorbs the rate, is ``lr = 1``. With
    ``preconditioner="diagonal"`` a parameter takes plain SGD steps at ``warmup_lr`` until its
    estimate holds ``warmup`` pairs, then

    .. math::

        H_{kk} = \min\Big(h_{\max}, \frac{2 S}{N f \hat C_{kk}}\Big)

    (Corollary 3), with ``C_hat_kk`` eq. 21's running estimate with its bias fixed and ``f``
    the finite-population factor (module notes). The constant ``2 S / N`` is that of
    :func:`sgsim.theory.kl.diagonal_preconditioner` (called once, on ``C = [[1]]``; the rule is
    ``1 / C_kk`` times it). Corollary 3 minimises a surrogate of the KL divergence: it is the
    KL-optimal diagonal only when ``C`` is diagonal, and then it makes the Ornstein-Uhlenbeck
    law the posterior (:ref:`theory-diagonal-preconditioner`). An entry whose estimate is 0
    (its per-example gradients all agree) gets ``max_preconditioner``, or 0 (it stays put)
    when no cap is given. ``H`` is recomputed at every step after warm-up and kept in
    ``state[p]["preconditioner"]``.

    Parameters
    ----------
    params : iterable
        Tensors or parameter groups (dicts); groups may set their own ``lr``.
    lr : float
        ``epsilon > 0`` (1 for Corollary 3 as printed).
    preconditioner : float, sequence of tensors, or "diagonal"
        A positive number (``H = h I``), one tensor of positive entries per parameter (its
        diagonal ``H``, in the order of the parameter groups and of their parameters, each of
        its parameter's shape), or ``"diagonal"`` for Corollary 3 from the online estimate.
    num_data : int, optional
        ``N``; needed with ``"diagonal"`` and for ``first_example_grads``.
    batch_size : int, optional
        ``S``, in ``[1, num_data]`` (at least 2 for the estimate).
    warmup_lr : float, optional
        The rate of the warm-up steps; required with ``"diagonal"`` and only then.
    warmup : int
        Pairs a parameter's estimate needs before its ``H`` is used (>= 1).
    max_preconditioner : float, optional
        ``h_max``, a cap on every ``H_kk`` of Corollary 3 (only with ``"diagonal"``).
    replace : bool
        Whether minibatches are drawn with replacement.
    unbias : bool
        Divide eq. 21 by its bias factor (default); False is the paper's form.
    on_divergence, check_every, divergence_bound
        The divergence check, as for :class:`ConstantSGD`.

    Attributes
    ----------
    divergence : Divergence or None
        Where the chain diverged, with ``on_divergence="mark"`` (None while it has not).
    adaptive : bool
        Whether ``H`` is Corollary 3's from the estimate.
    num_data, batch_size : int or None
        ``N`` and ``S``.
    warmup : int
        The pairs needed before the switch.
    trace_c : float or None
        The estimate of ``Tr C``, the sum of the estimated diagonal (:meth:`c_diagonal`).
    pairs : int
        The pairs ``(g_1, g_S)`` in the estimate (the fewest over the parameters).

    Raises
    ------
    ParameterError
        If a number is out of range, a preconditioner has the wrong shape or an entry <= 0, or
        ``params`` is empty.
    ParameterTypeError
        If an argument has the wrong type or a needed one is missing.
    """

    _key = "noise_var"
    _per_entry = True

    def __init__(self, params, lr: float, preconditioner, num_data: int | None = None, batch_size: int | None = None,
                 *, warmup_lr: float | None = None, warmup: int = 100, max_preconditioner: float | None = None,
                 replace: bool = True, unbias: bool = True, on_divergence: str = "raise", check_every: int = 1,
                 divergence_bound: float | None = None):  # fmt: skip
        self.adaptive = isinstance(preconditioner, str)
        if self.adaptive and preconditioner != "diagonal":
            raise ParameterError(
                "preconditioner", f"preconditioner must be a number, tensors or 'diagonal', got {preconditioner!r}"
            )
        if self.adaptive and warmup_lr is None:
            raise ParameterTypeError(
                "warmup_lr", "preconditioner='diagonal' needs warmup_lr, the rate of the warm-up steps"
            )
        if not self.adaptive:
            for name, value in (("warmup_lr", warmup_lr), ("max_preconditioner", max_preconditioner)):
                if value is not None:
                    raise ParameterError(name, f"{name} goes with preconditioner='diagonal' only")
        self.warmup = integer("warmup", warmup, low=1)
        self.warmup_lr = _optional_positive("warmup_lr", warmup_lr)
        self.max_preconditioner = _optional_positive("max_preconditioner", max_preconditioner)
        self._scalar: float | None = None
        if not self.adaptive and not isinstance(preconditioner, Sequence | torch.Tensor):
            self._scalar = positive_float("preconditioner", preconditioner)
        super().__init__(params, dict(lr=lr), num_data, batch_size, replace, unbias,
                         "preconditioner='diagonal'" if self.adaptive else None,
                         (on_divergence, check_every, divergence_bound))  # fmt: skip
        if self.adaptive:
            assert self.num_data is not None and self.batch_size is not None
            # H_kk = (2 S / N) / (f C_kk), C_kk = scale * noise_var: H = numerator / noise_var
            two_s_over_n = float(diagonal_preconditioner(np.eye(1), self.num_data, self.batch_size)[0, 0])
            self._numerator = two_s_over_n / (self._noise * self._scale())
        elif self._scalar is None:
            self._set_fixed(preconditioner)

    def _set_fixed(self, preconditioner) -> None:
        if isinstance(preconditioner, torch.Tensor):
            raise ParameterTypeError(
                "preconditioner", "preconditioner must be a list of tensors, one per parameter, not one tensor"
            )
        every = [p for group in self.param_groups for p in group["params"]]
        if len(preconditioner) != len(every):
            raise ParameterError(
                "preconditioner",
                f"preconditioner must hold one tensor per parameter ({len(every)}), got {len(preconditioner)}",
            )
        for p, h in zip(every, preconditioner, strict=True):
            try:
                h = torch.as_tensor(h, dtype=p.dtype, device=p.device)
            except (TypeError, ValueError, RuntimeError) as exc:
                raise ParameterTypeError("preconditioner", "each preconditioner must be a tensor") from exc
            if h.shape != p.shape:
                raise ParameterError(
                    "preconditioner", f"each preconditioner must have its parameter's shape {tuple(p.shape)}"
                )
            if not bool(torch.all(torch.isfinite(h) & (h > 0))):
                raise ParameterError("preconditioner", "every preconditioner entry must be finite and > 0")
            self.state[p]["preconditioner"] = h.detach().clone()

    pairs = _NoiseEstimating.pairs  # documented here
    trace_c = _NoiseEstimating.trace_c

    def c_diagonal(self) -> list[torch.Tensor | None]:
        """The estimate of ``C_kk`` (bias fixed unless ``unbias=False``), per parameter.

        Returns
        -------
        list of tensors or None
            One per parameter, in the order of the parameter groups, of its parameter's shape;
            None for a parameter without a pair yet.
        """
        if self._bias is None:
            raise ParameterTypeError("num_data", "the estimate needs num_data and batch_size >= 2")
        scale = self._scale()
        out: list[torch.Tensor | None] = []
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state.get(p, {})
                out.append(state[self._key] * scale if self._key in state else None)
        return out

    def _corollary3(self, noise_var: list[torch.Tensor]) -> list[torch.Tensor]:
        h = list(torch._foreach_reciprocal(noise_var))
        torch._foreach_mul_(h, self._numerator)
        if self.max_preconditioner is not None:
            torch._foreach_clamp_max_(h, self.max_preconditioner)  # 1 / 0 = inf becomes the cap
        else:
            for t in h:
                t.nan_to_num_(nan=0.0, posinf=0.0)  # no noise seen: the entry stays put
        return h

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None, *, first_example_grads=None):
        """One update of every parameter that has a gradient.

        Parameters
        ----------
        closure : callable, optional
            Re-evaluates the loss (with gradients enabled) and returns it.
        first_example_grads : sequence of tensors, optional
            ``g_1`` as for :meth:`ConstantSGD.step`: one tensor (or None) per parameter. Adds
            the pair ``(g_1, .grad)`` to the estimate before the step.

        Returns
        -------
        float or None
            The closure's loss, if a closure was given.
        """
        loss, work = self._begin_step(closure, first_example_grads)
        if work is None:  # marked: the chain has stopped
            return loss
        moved: list[torch.Tensor] = []
        for group, params, grads in work:
            if not params:
                continue
            moved += params
            lr = group["lr"]
            if self._scalar is not None:
                torch._foreach_add_(params, grads, alpha=-lr * self._scalar)
                continue
            if not self.adaptive:
                missing = [p for p in params if "preconditioner" not in self.state[p]]
                if missing:
                    raise ParameterError("preconditioner", "a parameter added after construction has no preconditioner")
                torch._foreach_addcmul_(params, [self.state[p]["preconditioner"] for p in params], grads, value=-lr)
                continue
            ready = [self.state[p].get("pairs", 0) >= self.warmup for p in params]
            warm = [i for i, r in enumerate(ready) if not r]
            if warm:
                assert self.warmup_lr is not None
                torch._foreach_add_([params[i] for i in warm], [grads[i] for i in warm], alpha=-self.warmup_lr)
            done = [i for i, r in enumerate(ready) if r]
            if done:
                h = self._corollary3([self.state[params[i]][self._key] for i in done])
                for i, hi in zip(done, h, strict=True):
                    self.state[params[i]]["preconditioner"] = hi
                torch._foreach_addcmul_([params[i] for i in done], h, [grads[i] for i in done], value=-lr)
        self._count_step(moved)
        return loss
