r"""SGLD and SGHMC as ``torch.optim.Optimizer`` subclasses, in the cyclical paper's units.

State, init and update, in that order:

- state: SGLD keeps nothing per parameter; SGHMC keeps the velocity ``v`` (``state[p]["velocity"]``,
  zero before the first step). Each optimizer holds its ``torch.Generator`` (``generator``) and the
  sgsim seed it was made from (``seed``; None when the generator was given).
- init: ``SGLD(params, lr, ...)``, ``SGHMC(params, lr, friction, ...)``; every number is checked
  before any work, per parameter group.
- update (:meth:`SGLD.step`, :meth:`SGHMC.step`), on the potential ``U`` whose gradient is
  ``N`` times the gradient of the loss when ``num_data = N`` is given (the loss is then a mean over
  ``N`` data points), else the gradient of the loss itself:

.. math::

    \text{SGLD:}\quad \theta_k = \theta_{k-1} - \alpha_k \nabla\tilde U(\theta_{k-1})
        + \sqrt{2 \alpha_k T_k}\, \xi_k,

    \text{SGHMC:}\quad \theta_k = \theta_{k-1} + v_{k-1}, \qquad
        v_k = (1 - \eta) v_{k-1} - \alpha_k \nabla\tilde U(\theta_k)
        + \sqrt{2 (\eta - \hat\gamma) \alpha_k T_k}\, \xi_k,

with ``xi_k`` standard normal ("Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning",
§2; :ref:`theory-sgld`, :ref:`theory-sghmc`). These are the updates of the compiled kernels
(:mod:`sgsim.integrators.sgld`, :mod:`sgsim.integrators.sghmc`), in the units of
:func:`sgsim.dynamics.sgld_noise` and :func:`sgsim.dynamics.sghmc_noise`: drift
``lr * grad U``, injected variance ``2 lr T`` (times ``eta - gamma_hat`` for SGHMC).

The noise of a step is drawn only where its variance is positive: a step at ``T = 0`` (or with
``gamma_hat = friction``) draws nothing and leaves the generator where it was, as the compiled
kernels leave their streams; it is then exactly SGD (SGLD) or heavy-ball SGD with momentum
``1 - eta`` (SGHMC). A noisy step draws the normals of all the parameters of a group (of one
device and dtype) in one ``torch.randn`` call into a flat buffer, laid out in each parameter's
memory order, and applies the update as a few multi-tensor (``torch._foreach_*``) operations.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from .. import rng as _rng
from .._validate import ParameterError, ParameterTypeError, integer, positive_float, real

__all__ = ["SGLD", "SGHMC", "make_generator"]

# the key of the stream that seeds a torch generator: chain 0, a third kind of stream after
# sgsim.rng.STEP_STREAM and INIT_STREAM, so that it never coincides with a sampler's stream
_TORCH_STREAM_KEY = (0, 2)

# one parameter group's work: the group, its parameters with a gradient, their gradients, injected normals
_Work = tuple[dict, list[torch.Tensor], list[torch.Tensor], list | None]


def make_generator(seed: int, device=None) -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded from an sgsim seed.

    The generator is seeded (``manual_seed``) with the first 64-bit word of
    ``numpy.random.SeedSequence(seed, spawn_key=(0, 2))``, so that any non-negative int, even
    one of 128 bits such as the fresh entropy ``sgsim.rng.resolve_seed`` draws for
    ``seed=None``, gives a full 64-bit torch seed.

    Parameters
    ----------
    seed : int
        Non-negative seed.
    device : str or device, optional
        Where the generator lives (the device of the parameters it will serve); CPU by default.

    Returns
    -------
    torch.Generator
    """
    if seed is None:
        raise ParameterTypeError("seed", "seed must be a non-negative int (sgsim.rng.resolve_seed(None) draws one)")
    resolved = _rng.resolve_seed(seed)
    word = np.random.SeedSequence(resolved, spawn_key=_TORCH_STREAM_KEY).generate_state(1, np.uint64)[0]
    gen = torch.Generator(device=torch.device("cpu") if device is None else torch.device(device))
    gen.manual_seed(int(word))
    return gen


def _same_device(a: torch.device, b: torch.device) -> bool:
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


def _dense_strides(t: torch.Tensor) -> bool:
    """Whether ``t`` covers its memory exactly once (contiguous in some order, e.g. channels-last)."""
    dims = sorted((s, n) for s, n in zip(t.stride(), t.shape, strict=True) if n != 1)
    expected = 1
    for stride, size in dims:
        if stride != expected:
            return False
        expected *= size
    return True


def _normal_views(flat: torch.Tensor, params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Split ``flat`` into one view per parameter, in each parameter's own memory layout."""
    views = []
    for chunk, p in zip(flat.split([p.numel() for p in params]), params, strict=True):
        if p.is_contiguous() or not _dense_strides(p):
            views.append(chunk.view(p.shape))
        else:
            views.append(chunk.as_strided(p.shape, p.stride()))
    return views


class _CheckedOptimizer(torch.optim.Optimizer):
    """An optimizer whose every parameter group is checked (``_check_group``) when it is added."""

    def _check_group(self, group: dict) -> None:
        raise NotImplementedError

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a parameter group, checking its values (as torch's ``add_param_group``)."""
        if not isinstance(param_group, dict):
            raise ParameterTypeError("params", f"a parameter group must be a dict, got {type(param_group).__name__}")
        merged = {**self.defaults, **param_group}
        self._check_group(merged)
        for key in self.defaults:
            param_group[key] = merged[key]
        super().add_param_group(param_group)


class _Langevin(_CheckedOptimizer):
    """What SGLD and SGHMC share: validation, the generator, gradients and their noise."""

    # the factor of 2 lr T in the injected variance: 1 for SGLD, eta - gamma_hat for SGHMC
    _uses_friction = False

    def __init__(self, params, defaults: dict, generator, seed):
        if isinstance(params, torch.Tensor):
            raise ParameterTypeError(
                "params", "params must be an iterable of tensors or of parameter groups (dicts), not one tensor"
            )
        params = list(params)
        if not params:
            raise ParameterError("params", "params must hold at least one tensor or parameter group, got none")
        self._check_group(defaults)
        if generator is not None and seed is not None:
            raise ParameterError("seed", "give generator or seed, not both")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise ParameterTypeError(
                "generator", f"generator must be a torch.Generator, got {type(generator).__name__}"
            )
        super().__init__(params, defaults)
        if generator is None:
            self.seed: int | None = _rng.resolve_seed(seed)
            generator = make_generator(self.seed, self.param_groups[0]["params"][0].device)
        else:
            self.seed = None
        self.generator: torch.Generator = generator

    def _check_group(self, group: dict) -> None:
        # each error names the parameter and its allowed range; group values may be overridden
        group["lr"] = positive_float("lr", group["lr"])
        group["temperature"] = real("temperature", group["temperature"], 0.0)
        if group["num_data"] is not None:
            group["num_data"] = integer("num_data", group["num_data"], low=1)
        if self._uses_friction:
            group["friction"] = real("friction", group["friction"], 0.0, 1.0, low_open=True)
            group["gamma_hat"] = real("gamma_hat", group["gamma_hat"], 0.0, group["friction"])

    def _noise_sd(self, group: dict) -> float:
        factor = group["friction"] - group["gamma_hat"] if self._uses_friction else 1.0
        # (2 factor) lr T, in the order of sgsim.dynamics' coefficients
        return math.sqrt(2.0 * factor * group["lr"] * group["temperature"])

    def _gradients(self, noise) -> list[_Work]:
        """Per group: the parameters with a gradient, their gradients, and their injected normals."""
        out: list[_Work] = []
        for group in self.param_groups:
            self._check_group(group)
            params = [p for p in group["params"] if p.grad is not None]
            grads = [p.grad for p in params if p.grad is not None]
            if any(g.is_sparse for g in grads):
                raise ParameterTypeError("params", "sparse gradients are not supported")
            out.append((group, params, grads, None))
        if noise is None:
            return out
        if isinstance(noise, torch.Tensor) or not isinstance(noise, Sequence):
            raise ParameterTypeError("noise", "noise must be a list of tensors, one per parameter with a gradient")
        n = sum(len(params) for _, params, _, _ in out)
        if len(noise) != n:
            raise ParameterError(
                "noise", f"noise must hold one tensor per parameter with a gradient ({n}), got {len(noise)}"
            )
        start = 0
        with_noise: list[_Work] = []
        for group, params, grads, _ in out:
            xi = list(noise[start : start + len(params)])
            start += len(params)
            for p, z in zip(params, xi, strict=True):
                if not isinstance(z, torch.Tensor) or z.shape != p.shape:
                    raise ParameterError("noise", f"each noise tensor must have its parameter's shape {tuple(p.shape)}")
            with_noise.append((group, params, grads, xi))
        return with_noise

    def _normals(self, params: list[torch.Tensor]) -> list[torch.Tensor]:
        """Standard normals for ``params``: one ``torch.randn`` per device and dtype, split into views."""
        buckets: dict[tuple[torch.device, torch.dtype], list[int]] = {}
        for i, p in enumerate(params):
            buckets.setdefault((p.device, p.dtype), []).append(i)
        out: list[torch.Tensor] = [params[0]] * len(params)
        for (device, dtype), idx in buckets.items():
            if not _same_device(self.generator.device, device):
                raise ParameterError(
                    "generator",
                    f"the generator lives on {self.generator.device}, a parameter on {device}: "
                    "give a generator on the parameters' device",
                )
            members = [params[i] for i in idx]
            flat = torch.randn(sum(p.numel() for p in members), generator=self.generator, device=device, dtype=dtype)
            for i, view in zip(idx, _normal_views(flat, members), strict=True):
                out[i] = view
        return out

    def _update(self, group: dict, params: list, grads: list, normals: list | None, sd: float) -> None:
        raise NotImplementedError

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None, *, noise=None):
        """One update of every parameter that has a gradient.

        Parameters
        ----------
        closure : callable, optional
            Re-evaluates the loss (with gradients enabled) and returns it, as for any
            ``torch.optim`` optimizer.
        noise : list of tensors, optional
            Standard normals that replace the drawn ones: one tensor per parameter with a
            gradient, in the order of the parameter groups and of their parameters, each of its
            parameter's shape. Steps whose noise variance is zero ignore it. This is how the
            tests feed the compiled kernels' normals.

        Returns
        -------
        float or None
            The closure's loss, if a closure was given.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group, params, grads, xi in self._gradients(noise):
            if not params:
                continue
            sd = self._noise_sd(group)
            normals = None
            if sd > 0:
                normals = xi if xi is not None else self._normals(params)
            self._update(group, params, grads, normals, sd)
        return loss


class SGLD(_Langevin):
    r"""Stochastic gradient Langevin dynamics in the cyclical paper's units.

    .. math::

        \theta_k = \theta_{k-1} - \alpha_k \nabla\tilde U(\theta_{k-1}) + \sqrt{2 \alpha_k T_k}\, \xi_k

    ("Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning", §2; :ref:`theory-sgld`),
    with ``alpha_k = lr``, ``T_k = temperature`` (both per parameter group) and
    ``grad U~ = num_data * grad loss`` (or ``grad loss`` when ``num_data`` is None). At
    ``temperature = 0`` it is ``torch.optim.SGD`` bit for bit, and draws no noise.

    Units. The loss is the potential ``U = -log density`` (up to a constant) when ``num_data``
    is None; ``num_data = N`` declares that the loss is a *mean* over ``N`` data points (mean
    negative log-likelihood minus the log prior divided by ``N``), so that ``U = N * loss``. The
    cyclical paper's reference code runs SGLD on the mean loss with learning rate ``epsilon``
    and noise ``sqrt(2 epsilon T / N)``, i.e. temperature ``T / N`` on the mean loss. Both of

    - ``SGLD(params, lr=epsilon / N, num_data=N, temperature=T)``, and
    - ``SGLD(params, lr=epsilon, temperature=T / N)`` (no ``num_data``), on the same mean loss,

    take the step ``theta - epsilon grad loss + sqrt(2 epsilon T / N) xi`` (equal to rounding),
    and sample ``exp(-U / T)``; ``T = 1`` is the Bayesian posterior.

    Parameters
    ----------
    params : iterable
        Tensors or parameter groups (dicts), as for any ``torch.optim`` optimizer; groups may
        override ``lr``, ``temperature`` and ``num_data``.
    lr : float
        ``alpha > 0``, the step size on ``U``.
    temperature : float
        ``T >= 0``; 0 is plain gradient descent (the exploration stage of cSGLD).
    num_data : int, optional
        ``N >= 1``: the loss is a mean over ``N`` data points and its gradient is multiplied
        by ``N``.
    generator : torch.Generator, optional
        The source of every normal, on the parameters' device. Give it, or ``seed``.
    seed : int, optional
        Non-negative seed of a new generator (:func:`make_generator`); None draws fresh
        entropy, recorded in ``seed``.

    Attributes
    ----------
    generator : torch.Generator
        The generator the noise is drawn from (to checkpoint: ``generator.get_state()``).
    seed : int or None
        The sgsim seed of the generator, None when it was given.

    Raises
    ------
    ParameterError
        If a number is out of range (the message names the parameter and its range), or
        ``params`` is empty.
    ParameterTypeError
        If an argument has the wrong type.

    Examples
    --------
    Sampling ``N(0, 1)`` in each of 1000 independent coordinates (``U = |theta|^2 / 2``):

    >>> import torch
    >>> from sgsim.torch import SGLD
    >>> theta = torch.zeros(1000, requires_grad=True)
    >>> opt = SGLD([theta], lr=0.05, seed=1)
    >>> for _ in range(500):
    ...     opt.zero_grad()
    ...     (0.5 * theta.pow(2).sum()).backward()
    ...     _ = opt.step()
    >>> 0.8 < float(theta.detach().var()) < 1.25  # stationary variance 2 / (2 - alpha) = 1.026
    True
    """

    def __init__(self, params, lr: float, temperature: float = 1.0, num_data: int | None = None, generator=None,
                 seed=None):  # fmt: skip
        defaults = dict(lr=lr, temperature=temperature, num_data=num_data)
        super().__init__(params, defaults, generator, seed)

    step = _Langevin.step  # documented here

    def _update(self, group, params, grads, normals, sd):
        scale = group["num_data"] or 1
        torch._foreach_add_(params, grads, alpha=-group["lr"] * scale)
        if normals is not None:
            torch._foreach_add_(params, normals, alpha=sd)


class SGHMC(_Langevin):
    r"""Stochastic gradient HMC in the cyclical paper's parametrisation and order.

    .. math::

        \theta_k = \theta_{k-1} + v_{k-1}, \qquad
        v_k = (1 - \eta) v_{k-1} - \alpha_k \nabla\tilde U(\theta_k)
            + \sqrt{2 (\eta - \hat\gamma) \alpha_k T_k}\, \xi_k

    ("Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning", §2; :ref:`theory-sghmc`),
    with ``alpha_k = lr``, ``eta = friction``, ``gamma_hat``, ``T_k = temperature`` per group
    and ``grad U~`` as in :class:`SGLD` (``num_data``). The position moves first and the
    gradient is taken at the moved position. A ``torch.optim`` step receives the gradient at
    the parameters as they stand, so :meth:`step` ``k`` computes ``v_k`` from the gradient at
    ``theta_k`` and then moves the parameters on to ``theta_{k+1} = theta_k + v_k``, where the
    next gradient is taken: after step ``k`` the parameters hold ``theta_{k+1}`` and
    ``state[p]["velocity"]`` holds ``v_k``. ``v_0 = 0`` (so ``theta_1 = theta_0``). At
    ``temperature = 0`` it is heavy-ball SGD with momentum ``1 - eta`` and draws no noise.

    Units. With ``num_data = N`` on a mean loss, the reference code of the cyclical paper
    (``v <- (1 - eta) v - epsilon grad loss + sqrt(2 eta epsilon T / N) xi``,
    ``theta <- theta + v``) is ``SGHMC(params, lr=epsilon / N, friction=eta, num_data=N,
    temperature=T)``, or ``lr=epsilon, temperature=T / N`` without ``num_data``. In Chen, Fox
    and Guestrin's unit-mass notation ``lr = epsilon^2`` and ``friction = epsilon C``.

    Parameters
    ----------
    params : iterable
        Tensors or parameter groups (dicts); groups may override every number below.
    lr : float
        ``alpha > 0``.
    friction : float
        ``eta`` in (0, 1]: the velocity keeps ``1 - eta`` per step.
    gamma_hat : float
        Estimate of the gradient noise in [0, friction], subtracted from the injected noise.
    temperature : float
        ``T >= 0``; 0 is SGD with momentum (the exploration stage of cSGHMC).
    num_data : int, optional
        ``N >= 1``: the loss is a mean over ``N`` data points.
    generator : torch.Generator, optional
        The source of every normal, on the parameters' device. Give it, or ``seed``.
    seed : int, optional
        Non-negative seed of a new generator (:func:`make_generator`); None draws fresh
        entropy, recorded in ``seed``.

    Attributes
    ----------
    generator : torch.Generator
        The generator the noise is drawn from.
    seed : int or None
        The sgsim seed of the generator, None when it was given.

    Raises
    ------
    ParameterError
        If a number is out of range, or ``params`` is empty.
    ParameterTypeError
        If an argument has the wrong type.
    """

    _uses_friction = True

    def __init__(self, params, lr: float, friction: float = 0.1, gamma_hat: float = 0.0, temperature: float = 1.0,
                 num_data: int | None = None, generator=None, seed=None):  # fmt: skip
        defaults = dict(lr=lr, friction=friction, gamma_hat=gamma_hat, temperature=temperature, num_data=num_data)
        super().__init__(params, defaults, generator, seed)

    step = _Langevin.step  # documented here

    def _update(self, group, params, grads, normals, sd):
        velocity = []
        for p in params:
            state = self.state[p]
            if "velocity" not in state:
                state["velocity"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            velocity.append(state["velocity"])
        scale = group["num_data"] or 1
        # v <- (1 - eta) v - lr grad U + sd xi, in the compiled kernel's order, then theta <- theta + v
        torch._foreach_mul_(velocity, 1.0 - group["friction"])
        torch._foreach_add_(velocity, grads, alpha=-group["lr"] * scale)
        if normals is not None:
            torch._foreach_add_(velocity, normals, alpha=sd)
        torch._foreach_add_(params, velocity)
