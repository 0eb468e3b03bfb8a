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
kernels leave their streams; it is then ``torch.optim.SGD`` bit for bit (SGLD) or SGD with
momentum ``1 - eta`` to rounding (SGHMC): :func:`sgd_arguments` states the mapping and which
bits agree. A noisy step draws the normals of all the parameters of a group (of one
device and dtype) in one ``torch.randn`` call into a flat buffer, laid out in each parameter's
memory order, and applies the update as a few multi-tensor (``torch._foreach_*``) operations.

Beside them, in the same units and on the same machinery (generator, one draw per step, checked
arguments), the peers of :ref:`theory-langevin-peers`: :class:`BAOAB` and :class:`OBABO` (the
Leimkuhler-Matthews splittings, ``lr = h^2``, momentum and step count per parameter),
:class:`SGNHT` (one thermostat for the whole optimizer, kept in ``state["thermostat"]``) and
:class:`PSGLD` / :class:`PSGLDGamma` (the RMSprop preconditioner's second moment per parameter).
Each takes the steps of its compiled kernel, one gradient per step, as the module docstrings of
:mod:`sgsim.integrators.splitting`, :mod:`sgsim.integrators.sgnht` and
:mod:`sgsim.integrators.psgld` define them, and keeps all its state in ``state_dict()``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from .. import rng as _rng
from .._validate import ParameterError, ParameterTypeError, choice, integer, positive_float, real
from ..integrators.sgnht import FRICTION_STEPS
from ._trust import Watched, generator_record, restore_generator, split_extras

__all__ = ["SGLD", "SGHMC", "BAOAB", "OBABO", "SGNHT", "PSGLD", "PSGLDGamma", "make_generator", "sgd_arguments"]

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


class _Langevin(Watched, _CheckedOptimizer):
    """What SGLD and SGHMC share: validation, the generator, gradients and their noise."""

    # the factor of 2 lr T in the injected variance: 1 for SGLD, eta - gamma_hat for SGHMC
    _uses_friction = False

    def __init__(self, params, defaults: dict, generator, seed, on_divergence="raise", check_every=1,
                 divergence_bound=None):  # fmt: skip
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
        if seed is not None:
            seed = _rng.resolve_seed(seed)
        self._watch(on_divergence, check_every, divergence_bound)
        self._noise_cache: dict[tuple, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        super().__init__(params, defaults)
        if generator is None:
            self.seed: int | None = _rng.resolve_seed(seed)
            generator = make_generator(self.seed, self.param_groups[0]["params"][0].device)
        else:
            self.seed = None
            for group in self.param_groups:
                for p in group["params"]:
                    if not _same_device(generator.device, p.device):
                        raise ParameterError(
                            "generator",
                            f"the generator lives on {generator.device}, a parameter on {p.device}: "
                            "give a generator on the parameters' device",
                        )
        self.generator: torch.Generator = generator

    def state_dict(self) -> dict[str, Any]:
        """The ``state_dict`` of ``torch.optim`` (``"state"``, ``"param_groups"``), the generator's state and the steps.

        ``"generator"`` holds the generator's device and ``get_state()``, ``"steps"`` the steps
        taken and ``"divergence"`` the record of a marked divergence (None): with them
        :meth:`load_state_dict` continues the saved run bit for bit.

        Returns
        -------
        dict
        """
        out = super().state_dict()
        out["generator"] = generator_record(self.generator)
        return self._watched_state(out)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a ``state_dict``: torch's part, then the generator's state and the step count.

        A ``state_dict`` without a generator state (written before sgsim kept it) loads with a
        ``RuntimeWarning``: the noise then continues from this optimizer's generator as it
        stands, which for a new optimizer replays the saved run's first normals.

        Parameters
        ----------
        state_dict : dict
            As :meth:`state_dict` returns it.
        """
        name = type(self).__name__
        torch_part, extras = split_extras(state_dict, name)
        super().load_state_dict(torch_part)
        restore_generator(self.generator, extras.get("generator"), name)
        self._load_watched(extras)

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
        """Standard normals for ``params``: one draw per device and dtype into a flat buffer, split into views.

        The buffers and their views are made once per layout of ``params`` (which tensors, their
        shapes and strides) and refilled in place at every step: ``normal_`` on a buffer of ``n``
        values draws what ``torch.randn(n)`` would, and a step then costs one draw and no views.
        """
        layout = tuple((id(p), p.shape, p.stride()) for p in params)
        cached = self._noise_cache.get(layout)
        if cached is None:
            cached = self._noise_cache[layout] = self._noise_buffers(params)
            if len(self._noise_cache) > 8:  # layouts that come and go (parameters without gradients)
                del self._noise_cache[next(iter(self._noise_cache))]
        flats, out = cached
        for flat in flats:
            flat.normal_(generator=self.generator)
        return out

    def _noise_buffers(self, params: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The flat buffers (one per device and dtype, in order of first appearance) and one view per parameter."""
        buckets: dict[tuple[torch.device, torch.dtype], list[int]] = {}
        for i, p in enumerate(params):
            buckets.setdefault((p.device, p.dtype), []).append(i)
        out: list[torch.Tensor] = [params[0]] * len(params)
        flats = []
        for (device, dtype), idx in buckets.items():
            if not _same_device(self.generator.device, device):
                raise ParameterError(
                    "generator",
                    f"the generator lives on {self.generator.device}, a parameter on {device}: "
                    "give a generator on the parameters' device",
                )
            members = [params[i] for i in idx]
            flats.append(torch.empty(sum(p.numel() for p in members), device=device, dtype=dtype))
            for i, view in zip(idx, _normal_views(flats[-1], members), strict=True):
                out[i] = view
        return flats, out

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

        Raises
        ------
        DivergenceError
            With ``on_divergence="raise"``, when the step's check finds a parameter not finite
            or beyond ``divergence_bound`` (:class:`~sgsim.torch.Divergence`). With ``"mark"``
            the chain stops instead: this and later steps move nothing.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self.divergence is not None:  # marked: the chain has stopped
            return loss
        moved: list[torch.Tensor] = []
        for group, params, grads, xi in self._gradients(noise):
            if not params:
                continue
            sd = self._noise_sd(group)
            normals = None
            if sd > 0:
                normals = xi if xi is not None else self._normals(params)
            self._update(group, params, grads, normals, sd)
            moved += params
        self._end_step()
        self._count_step(moved)
        return loss

    def _end_step(self) -> None:
        """What a step does after every group's update (SGNHT's thermostat); nothing by default."""


class SGLD(_Langevin):
    r"""Stochastic gradient Langevin dynamics in the cyclical paper's units.

    .. math::

        \theta_k = \theta_{k-1} - \alpha_k \nabla\tilde U(\theta_{k-1}) + \sqrt{2 \alpha_k T_k}\, \xi_k

    ("Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning", §2; :ref:`theory-sgld`),
    with ``alpha_k = lr``, ``T_k = temperature`` (both per parameter group) and
    ``grad U~ = num_data * grad loss`` (or ``grad loss`` when ``num_data`` is None). At
    ``temperature = 0`` it is ``torch.optim.SGD(lr=lr * num_data)`` bit for bit
    (:func:`sgd_arguments`), and draws no noise.

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
    on_divergence, check_every, divergence_bound
        The divergence check (:class:`~sgsim.torch.Divergence`): ``"raise"`` (default) or
        ``"mark"``; check after every ``check_every``-th step (int >= 1, default 1); a bound
        ``> 0`` on every ``|theta_i|``, or None (default: only non-finite values diverge).

    Attributes
    ----------
    generator : torch.Generator
        The generator the noise is drawn from; its state is in ``state_dict()``, so that a
        checkpoint resumes the noise where it stopped.
    seed : int or None
        The sgsim seed of the generator, None when it was given.
    divergence : Divergence or None
        Where the chain diverged, with ``on_divergence="mark"`` (None while it has not).

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
                 seed=None, *, on_divergence: str = "raise", check_every: int = 1,
                 divergence_bound: float | None = None):  # fmt: skip
        defaults = dict(lr=lr, temperature=temperature, num_data=num_data)
        super().__init__(params, defaults, generator, seed, on_divergence, check_every, divergence_bound)

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
    ``temperature = 0`` it is ``torch.optim.SGD`` with momentum ``1 - eta`` and draws no noise,
    equal to rounding, not bit for bit (:func:`sgd_arguments` gives the arguments and why).

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
    on_divergence, check_every, divergence_bound
        The divergence check (:class:`~sgsim.torch.Divergence`): ``"raise"`` (default) or
        ``"mark"``; check after every ``check_every``-th step (int >= 1, default 1); a bound
        ``> 0`` on every ``|theta_i|``, or None (default: only non-finite values diverge).

    Attributes
    ----------
    generator : torch.Generator
        The generator the noise is drawn from.
    seed : int or None
        The sgsim seed of the generator, None when it was given.
    divergence : Divergence or None
        Where the chain diverged, with ``on_divergence="mark"`` (None while it has not).

    Raises
    ------
    ParameterError
        If a number is out of range, or ``params`` is empty.
    ParameterTypeError
        If an argument has the wrong type.
    """

    _uses_friction = True

    def __init__(self, params, lr: float, friction: float = 0.1, gamma_hat: float = 0.0, temperature: float = 1.0,
                 num_data: int | None = None, generator=None, seed=None, *, on_divergence: str = "raise",
                 check_every: int = 1, divergence_bound: float | None = None):  # fmt: skip
        defaults = dict(lr=lr, friction=friction, gamma_hat=gamma_hat, temperature=temperature, num_data=num_data)
        super().__init__(params, defaults, generator, seed, on_divergence, check_every, divergence_bound)

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


def sgd_arguments(lr: float, friction: float | None = None, num_data: int | None = None) -> dict[str, Any]:
    r"""The ``torch.optim.SGD`` arguments whose steps :class:`SGLD` or :class:`SGHMC` takes at temperature 0.

    The one statement of the mapping between sgsim's samplers at ``T = 0`` and torch's SGD
    (the docstrings and pages that mention it refer here). torch's SGD with momentum ``mu``,
    dampening 0 and ``nesterov=False`` keeps the buffer ``b_1 = g_1``,
    ``b_k = mu b_{k-1} + g_k`` and steps ``theta <- theta - lr_torch b_k``; SGHMC keeps
    ``v_0 = 0``, ``v_k = (1 - eta) v_{k-1} - alpha N g_k`` and steps ``theta <- theta + v_k``
    (``N = num_data``, 1 when None). So ``v_k = -alpha N b_k`` exactly when

    ===================================  ==========================================================  ===============
    sgsim at ``temperature=0``           ``torch.optim.SGD``                                          agreement
    ===================================  ==========================================================  ===============
    ``SGLD(lr=alpha, num_data=N)``       ``SGD(lr=alpha * N)``                                        bit for bit
    ``SGHMC(lr=alpha, friction=eta,``    ``SGD(lr=alpha * N, momentum=1 - eta, dampening=0,``         to rounding
    ``num_data=N)``                      ``nesterov=False)``
    ===================================  ==========================================================  ===============

    and back: ``SGD(lr=l, momentum=mu)`` is ``SGHMC(lr=l / N, friction=1 - mu, temperature=0,
    num_data=N)`` (``lr=l`` without ``num_data``), and ``SGD(lr=l)`` is ``SGLD(lr=l / N, ...)``.
    "Bit for bit": SGLD applies the same single multi-tensor operation as SGD
    (``theta + (-alpha N) g``, with ``alpha * N`` the same Python float), in its loop or its
    foreach form, in float32 and float64. "To rounding": SGHMC scales the velocity
    (``(1 - eta) v - alpha N g``, then ``theta + v``) where SGD scales the buffer
    (``mu b + g``, then ``theta - lr b``); the two round different products, so a step differs
    by a few units in the last place of the velocity and the position, and the paths by the
    sum of those differences as the dynamics carry them (the tests bound it so). This holds at
    ``friction=1`` too (``SGD(momentum=0)``). ``dampening > 0`` has no SGHMC equivalent
    (torch's first step takes the gradient undamped), nor has ``nesterov=True``.

    Parameters
    ----------
    lr : float
        ``alpha > 0``, the sampler's step on ``U``.
    friction : float, optional
        ``eta`` in (0, 1] for :class:`SGHMC`; None for :class:`SGLD` (no momentum).
    num_data : int, optional
        ``N >= 1`` when the sampler is given ``num_data``.

    Returns
    -------
    dict
        ``lr``, ``momentum``, ``dampening`` and ``nesterov`` for ``torch.optim.SGD(params, **...)``.

    Raises
    ------
    ParameterError
        If a number is out of range.
    ParameterTypeError
        If an argument has the wrong type.

    Examples
    --------
    >>> from sgsim.torch import sgd_arguments
    >>> sgd_arguments(0.001, friction=0.1, num_data=50)
    {'lr': 0.05, 'momentum': 0.9, 'dampening': 0.0, 'nesterov': False}
    """
    lr = positive_float("lr", lr)
    scale = 1 if num_data is None else integer("num_data", num_data, low=1)
    momentum = 0.0 if friction is None else 1.0 - real("friction", friction, 0.0, 1.0, low_open=True)
    # lr * scale as SGLD's step computes it (-(lr * N) is -lr * N, the same float)
    return {"lr": lr * scale, "momentum": momentum, "dampening": 0.0, "nesterov": False}


def _scaled_gradients(grads: list[torch.Tensor], group: dict) -> list[torch.Tensor]:
    """``grad U~``: the gradients times ``num_data`` (the gradients themselves when it is None)."""
    scale = group["num_data"]
    return grads if scale is None else list(torch._foreach_mul(grads, float(scale)))


def _split_by_step(state, params: list[torch.Tensor]) -> tuple[list[int], list[int]]:
    """Indices of the parameters at their first step and of the others (``state[p]["step"]``)."""
    first = [i for i, p in enumerate(params) if state[p]["step"] == 0]
    return first, [i for i, p in enumerate(params) if state[p]["step"] > 0]


def _pick(items: list, idx: list[int]) -> list:
    return [items[i] for i in idx]


class _Underdamped(_Langevin):
    """What BAOAB, OBABO and SGNHT share: a momentum per parameter, zero before the first step."""

    def _momenta(self, params: list[torch.Tensor]) -> list[torch.Tensor]:
        out = []
        for p in params:
            state = self.state[p]
            if "momentum" not in state:
                state["momentum"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] = 0
            out.append(state["momentum"])
        return out

    def _count(self, params: list[torch.Tensor]) -> None:
        for p in params:
            self.state[p]["step"] += 1


class _Splitting(_Underdamped):
    """BAOAB and OBABO: time step ``h = sqrt(lr)``, the ``O`` part keeps ``c = exp(-friction h)``."""

    def __init__(self, params, lr: float, friction: float = 1.0, temperature: float = 1.0,
                 num_data: int | None = None, generator=None, seed=None, *, on_divergence: str = "raise",
                 check_every: int = 1, divergence_bound: float | None = None):  # fmt: skip
        defaults = dict(lr=lr, friction=friction, temperature=temperature, num_data=num_data)
        super().__init__(params, defaults, generator, seed, on_divergence, check_every, divergence_bound)

    def _check_group(self, group: dict) -> None:
        super()._check_group(group)
        group["friction"] = real("friction", group["friction"], 0.0, low_open=True)

    @staticmethod
    def _parts(group: dict) -> tuple[float, float]:
        h = math.sqrt(group["lr"])
        return h, math.exp(-group["friction"] * h)


class BAOAB(_Splitting):
    r"""The BAOAB splitting of underdamped Langevin dynamics, one gradient per step.

    Underdamped Langevin dynamics with unit mass, friction ``gamma`` and temperature ``T``,
    ``d theta = p dt``, ``dp = -grad U dt - gamma p dt + sqrt(2 gamma T) dW``, split into the
    kick ``B`` (``p -= (h/2) grad U``), the drift ``A`` (``theta += (h/2) p``) and the exact
    Ornstein-Uhlenbeck part ``O`` (``p <- c p + sqrt((1 - c^2) T) xi``, ``c = exp(-gamma h)``),
    composed as ``B A O A B`` (Leimkuhler and Matthews (2013), "Rational construction of
    stochastic numerical methods for molecular sampling";
    :ref:`theory-langevin-peers`). The closing half kick of a step and the opening half kick of
    the next use the same gradient, so :meth:`step` ``k`` runs from one gradient to the next:

    .. math::

        p \leftarrow p - \kappa_k h \nabla\tilde U(\theta_k), \quad
        \theta \leftarrow \theta + \tfrac h2 p, \quad
        p \leftarrow c\,p + \sqrt{(1 - c^2) T_k}\,\xi_k, \quad
        \theta_{k+1} = \theta + \tfrac h2 p,

    with ``kappa_0 = 1/2`` (the opening half kick) and ``kappa_k = 1`` after, ``h = sqrt(lr)``
    and ``grad U~`` as in :class:`SGLD` (``num_data``). These are the steps of the compiled
    :mod:`sgsim.integrators.splitting` kernel (methods ``baoab``, ``cbaoab``), in its units:
    ``lr`` is ``alpha = h^2``, the cyclical paper's SGHMC step, and ``friction`` is ``gamma``
    per unit of time. The parameters after step ``k`` are BAOAB's ``theta_{k+1}`` exactly;
    ``state[p]["momentum"]`` is the momentum before the closing half kick,
    ``p_{k+1} + (h/2) grad U~(theta_{k+1})`` (the record's ``velocity`` row), and
    ``state[p]["step"]`` counts the parameter's steps (0: the next step opens with a half kick).
    Both are in ``state_dict()``. At ``temperature = 0`` the ``O`` part only damps
    (``p <- c p``): deterministic damped dynamics, drawing no noise.

    With an exact gradient the positions' stationary law is the target's at every stable step
    on a Gaussian target (``lr * lambda_max(Hessian) < 4``); a minibatch gradient's noise enters
    the kicks.

    Parameters
    ----------
    params : iterable
        Tensors or parameter groups (dicts); groups may override every number below.
    lr : float
        ``alpha = h^2 > 0``.
    friction : float
        ``gamma > 0`` per unit time: the ``O`` part keeps ``c = exp(-gamma sqrt(lr))``.
    temperature : float
        ``T >= 0``; 0 is damped deterministic dynamics.
    num_data : int, optional
        ``N >= 1``: the loss is a mean over ``N`` data points.
    generator : torch.Generator, optional
        The source of every normal, on the parameters' device. Give it, or ``seed``.
    seed : int, optional
        Non-negative seed of a new generator (:func:`make_generator`); None draws fresh
        entropy, recorded in ``seed``.
    on_divergence, check_every, divergence_bound
        The divergence check (:class:`~sgsim.torch.Divergence`): ``"raise"`` (default) or
        ``"mark"``; check after every ``check_every``-th step (int >= 1, default 1); a bound
        ``> 0`` on every ``|theta_i|``, or None (default: only non-finite values diverge).

    Attributes
    ----------
    generator : torch.Generator
        The generator the noise is drawn from.
    seed : int or None
        The sgsim seed of the generator, None when it was given.
    divergence : Divergence or None
        Where the chain diverged, with ``on_divergence="mark"`` (None while it has not).

    Raises
    ------
    ParameterError
        If a number is out of range, or ``params`` is empty.
    ParameterTypeError
        If an argument has the wrong type.
    """

    step = _Langevin.step  # documented in _Langevin.step

    def _noise_sd(self, group):
        _, c = self._parts(group)
        return math.sqrt((1.0 - c * c) * group["temperature"])

    def _update(self, group, params, grads, normals, sd):
        h, c = self._parts(group)
        half = 0.5 * h
        momenta, grads = self._momenta(params), _scaled_gradients(grads, group)
        for idx, kick in zip(_split_by_step(self.state, params), (half, h), strict=True):
            if idx:
                torch._foreach_add_(_pick(momenta, idx), _pick(grads, idx), alpha=-kick)
        torch._foreach_add_(params, momenta, alpha=half)
        torch._foreach_mul_(momenta, c)
        if normals is not None:
            torch._foreach_add_(momenta, normals, alpha=sd)
        torch._foreach_add_(params, momenta, alpha=half)
        self._count(params)


class OBABO(_Splitting):
    r"""The OBABO splitting of underdamped Langevin dynamics: velocity Verlet between two half O steps.

    The parts of :class:`BAOAB` composed as ``O B A B O`` (Leimkuhler and Matthews (2013),
    "Rational construction of stochastic numerical methods for molecular sampling",
    :ref:`theory-langevin-peers`). A step runs from one gradient to the next: the
    closing ``B O`` of the last step and the opening ``O B A`` of this one, the two ``O`` parts
    merged into one,

    .. math::

        p \leftarrow p - \tfrac h2 \nabla\tilde U(\theta_k), \quad
        p \leftarrow c^2 p + \sqrt{(1 - c^4) T_k}\,\xi_k, \quad
        p \leftarrow p - \tfrac h2 \nabla\tilde U(\theta_k), \quad
        \theta_{k+1} = \theta_k + h\,p,

    and ``O B A`` alone at the first step (``p <- c p + sqrt((1 - c^2) T) xi``,
    ``p -= (h/2) grad U~``, ``theta += h p``). These are the steps of the compiled
    :mod:`sgsim.integrators.splitting` kernel (methods ``obabo``, ``cobabo``) in its units
    (those of :class:`BAOAB`). ``state[p]["momentum"]`` is the momentum between the step's
    kicks (the record's ``velocity`` row) and ``state[p]["step"]`` counts the parameter's steps
    (0: the next step is the opening ``O B A``); both are in ``state_dict()``. At
    ``temperature = 0`` the ``O`` parts only damp and no noise is drawn.

    Parameters
    ----------
    params : iterable
        Tensors or parameter groups (dicts); groups may override every number below.
    lr : float
        ``alpha = h^2 > 0``.
    friction : float
        ``gamma > 0`` per unit time: an ``O`` part keeps ``c = exp(-gamma sqrt(lr))``.
    temperature : float
        ``T >= 0``; 0 is damped deterministic dynamics.
    num_data : int, optional
        ``N >= 1``: the loss is a mean over ``N`` data points.
    generator : torch.Generator, optional
        The source of every normal, on the parameters' device. Give it, or ``seed``.
    seed : int, optional
        Non-negative seed of a new generator (:func:`make_generator`); None draws fresh
        entropy, recorded in ``seed``.
    on_divergence, check_every, divergence_bound
        The divergence check (:class:`~sgsim.torch.Divergence`): ``"raise"`` (default) or
        ``"mark"``; check after every ``check_every``-th step (int >= 1, default 1); a bound
        ``> 0`` on every ``|theta_i|``, or None (default: only non-finite values diverge).

    Attributes
    ----------
    generator : torch.Generator
        The generator the noise is drawn from.
    seed : int or None
        The sgsim seed of the generator, None when it was given.
    divergence : Divergence or None
        Where the chain diverged, with ``on_divergence="mark"`` (None while it has not).

    Raises
    ------
    ParameterError
        If a number is out of range, or ``params`` is empty.
    ParameterTypeError
        If an argument has the wrong type.
    """

    step = _Langevin.step  # documented in _Langevin.step

    def _noise_sd(self, group):
        # whether the step draws: (1 - c^2) T and (1 - c^4) T are zero together
        _, c = self._parts(group)
        return math.sqrt((1.0 - c * c) * group["temperature"])

    def _update(self, group, params, grads, normals, sd):
        h, c = self._parts(group)
        half, c2, temperature = 0.5 * h, c * c, group["temperature"]
        momenta, grads = self._momenta(params), _scaled_gradients(grads, group)
        first, later = _split_by_step(self.state, params)
        if first:  # O B: the opening half O, then the kick
            m = _pick(momenta, first)
            torch._foreach_mul_(m, c)
            if normals is not None:
                torch._foreach_add_(m, _pick(normals, first), alpha=math.sqrt((1.0 - c2) * temperature))
            torch._foreach_add_(m, _pick(grads, first), alpha=-half)
        if later:  # B O O B: the last step's closing B O and this step's opening O B, the O parts merged
            m, g = _pick(momenta, later), _pick(grads, later)
            torch._foreach_add_(m, g, alpha=-half)
            torch._foreach_mul_(m, c2)
            if normals is not None:
                torch._foreach_add_(m, _pick(normals, later), alpha=math.sqrt((1.0 - c2 * c2) * temperature))
            torch._foreach_add_(m, g, alpha=-half)
        torch._foreach_add_(params, momenta, alpha=h)  # A
        self._count(params)


class SGNHT(_Underdamped):
    r"""The stochastic gradient Nosé-Hoover thermostat: one adaptive friction over all the parameters.

    Ding, Fang, Babbush, Chen, Skeel and Neven (2014), "Bayesian sampling using stochastic
    gradient thermostats", Algorithm 1 (:ref:`theory-langevin-peers`), with time step
    ``h = sqrt(lr)`` over the ``d`` coordinates of all the parameters stepped together:

    .. math::

        p_{k+1} = (1 - h\,\xi_k)\, p_k - h \nabla\tilde U(\theta_k) + \sqrt{2 A T_k h}\,\zeta_k, \qquad
        \theta_{k+1} = \theta_k + h\,p_{k+1}, \qquad
        \xi_{k+1} = \xi_k + h\Big(\frac{|p_{k+1}|^2}{d} - T_k\Big),

    ``zeta_k`` standard normal, ``grad U~`` as in :class:`SGLD` (``num_data``), ``xi_0 = A``
    (``diffusion``) and ``p_0 = 0``. These are the steps of the compiled
    :mod:`sgsim.integrators.sgnht` kernel (methods ``sgnht``, ``csgnht``) in its units: ``lr``
    is ``alpha = h^2``, ``diffusion`` is ``A`` per unit of time (``eta / h`` for the cyclical
    paper's SGHMC friction ``eta``), the momentum's stationary law is ``N(0, T I)``.

    One chain has one thermostat over all its coordinates, so the thermostat is the optimizer's,
    not a parameter group's: every group must have the same ``lr``, ``temperature`` and
    ``diffusion`` (:class:`ScheduleDriver` sets the first two alike), and ``d`` counts the
    coordinates of the parameters that have a gradient in the step. ``state[p]["momentum"]``
    holds ``p`` and ``state["thermostat"]["xi"]`` holds ``xi`` (a 0-d tensor, float64 for
    float64 parameters and float32 otherwise, on the first parameter's device); both are in
    ``state_dict()``. The thermostat's set point is the step's temperature ``T_k``, as in the
    compiled step: 1 samples the posterior, and at 0 (the exploration stage of ``csgnht``) the
    thermostat drains the kinetic energy: momentum descent with an adaptive friction.

    Parameters
    ----------
    params : iterable
        Tensors or parameter groups (dicts).
    lr : float
        ``alpha = h^2 > 0``.
    diffusion : float
        ``A > 0``: injected diffusion per unit time, and the thermostat's start.
    temperature : float
        ``T >= 0``, the thermostat's set point.
    friction_step : {"euler", "exponential"}
        How the friction acts on the momentum: ``1 - h xi`` as printed, or ``exp(-h xi)``, the
        friction's exact flow, stable for any ``xi >= 0`` (as the compiled step's option).
    num_data : int, optional
        ``N >= 1``: the loss is a mean over ``N`` data points.
    generator : torch.Generator, optional
        The source of every normal, on the parameters' device. Give it, or ``seed``.
    seed : int, optional
        Non-negative seed of a new generator (:func:`make_generator`); None draws fresh
        entropy, recorded in ``seed``.
    on_divergence, check_every, divergence_bound
        The divergence check (:class:`~sgsim.torch.Divergence`): ``"raise"`` (default) or
        ``"mark"``; check after every ``check_every``-th step (int >= 1, default 1); a bound
        ``> 0`` on every ``|theta_i|``, or None (default: only non-finite values diverge).

    Attributes
    ----------
    generator : torch.Generator
        The generator the noise is drawn from.
    seed : int or None
        The sgsim seed of the generator, None when it was given.
    divergence : Divergence or None
        Where the chain diverged, with ``on_divergence="mark"`` (None while it has not).

    Raises
    ------
    ParameterError
        If a number is out of range, the parameter groups
        disagree on ``lr``, ``temperature`` or ``diffusion``, or ``params`` is empty.
    ParameterTypeError
        If an argument has the wrong type.
    """

    def __init__(self, params, lr: float, diffusion: float = 1.0, temperature: float = 1.0,
                 num_data: int | None = None, generator=None, seed=None, friction_step: str = "euler", *,
                 on_divergence: str = "raise", check_every: int = 1,
                 divergence_bound: float | None = None):  # fmt: skip
        self._kinetic: list[torch.Tensor] = []
        self._coordinates = 0
        defaults = dict(
            lr=lr, diffusion=diffusion, temperature=temperature, num_data=num_data, friction_step=friction_step
        )
        super().__init__(params, defaults, generator, seed, on_divergence, check_every, divergence_bound)

    step = _Langevin.step  # documented in _Langevin.step

    def _check_group(self, group: dict) -> None:
        super()._check_group(group)
        group["diffusion"] = real("diffusion", group["diffusion"], 0.0, low_open=True)
        group["friction_step"] = choice("friction_step", group["friction_step"], FRICTION_STEPS)

    def _gradients(self, noise):
        work = super()._gradients(noise)
        first = self.param_groups[0]
        for name in ("lr", "temperature", "diffusion", "friction_step"):
            if any(g[name] != first[name] for g in self.param_groups):
                raise ParameterError(
                    name, f"SGNHT has one thermostat for all its parameters: every parameter group needs one {name}"
                )
        return work

    def _noise_sd(self, group):
        h = math.sqrt(group["lr"])
        return math.sqrt(2.0 * group["diffusion"] * h * group["temperature"])

    def _shared(self) -> dict[Any, Any]:
        # the optimizer's state beside the parameters' (torch's state_dict keeps a key that is not a
        # parameter as it is, and load_state_dict restores it)
        return self.state

    def _xi(self) -> torch.Tensor:
        shared = self._shared()
        if "thermostat" not in shared:
            p = self.param_groups[0]["params"][0]
            dtype = torch.promote_types(p.dtype, torch.float32)
            shared["thermostat"] = {"xi": torch.tensor(self.param_groups[0]["diffusion"], dtype=dtype, device=p.device)}
        return shared["thermostat"]["xi"]

    def _update(self, group, params, grads, normals, sd):
        h, xi = math.sqrt(group["lr"]), self._xi()
        momenta = self._momenta(params)
        keep = torch.exp(-h * xi) if group["friction_step"] == "exponential" else 1.0 - h * xi
        for device in {m.device for m in momenta}:
            torch._foreach_mul_([m for m in momenta if m.device == device], keep.to(device))
        torch._foreach_add_(momenta, _scaled_gradients(grads, group), alpha=-h)
        if normals is not None:
            torch._foreach_add_(momenta, normals, alpha=sd)
        torch._foreach_add_(params, momenta, alpha=h)
        self._count(params)
        self._kinetic += [m.to(xi.dtype).square().sum().to(xi.device) for m in momenta]
        self._coordinates += sum(m.numel() for m in momenta)

    def _end_step(self) -> None:
        if not self._coordinates:
            return
        group = self.param_groups[0]
        set_point = group["temperature"]
        # a new tensor, never an update in place: a state_dict taken earlier keeps its value
        kinetic = torch.stack(self._kinetic).sum()
        xi = self._xi()
        self._shared()["thermostat"] = {"xi": xi + math.sqrt(group["lr"]) * (kinetic / self._coordinates - set_point)}
        self._kinetic, self._coordinates = [], 0


class PSGLD(_Langevin):
    r"""Preconditioned SGLD with RMSprop's preconditioner (pSGLD), in the cyclical paper's units.

    Li, Chen, Carlson and Carin (2016), "Preconditioned stochastic gradient Langevin dynamics
    for deep neural networks", Algorithm 1 (:ref:`theory-langevin-peers`):

    .. math::

        V_k = \beta V_{k-1} + (1 - \beta)\, g_k \odot g_k, \qquad
        G_k = \operatorname{diag}\big(1 / (\lambda + \sqrt{V_k})\big),

        \theta_k = \theta_{k-1} - \alpha_k G_k g_k + \sqrt{2 \alpha_k T_k}\; G_k^{1/2} \xi_k,

    ``g_k = grad U~(theta_{k-1})`` as in :class:`SGLD` (``num_data``), ``V_0 = 0``,
    ``alpha_k = lr``, ``beta = rms_decay``, ``lambda = floor``. These are the steps of the
    compiled :mod:`sgsim.integrators.psgld` kernel (methods ``psgld``, ``cpsgld``), in its
    units; the paper's learning rate ``epsilon`` on the mean log-likelihood gradient is
    ``alpha = epsilon N / 2`` and its ``lambda`` is ``floor / N``. ``state[p]["second_moment"]``
    holds ``V`` (in ``state_dict()``). At ``temperature = 0`` the step is RMSprop and draws no
    noise: with ``num_data`` None it is ``torch.optim.RMSprop(params, lr, alpha=rms_decay,
    eps=floor)`` bit for bit (its foreach implementation, the same operations in the same
    order); with ``num_data = N`` it is RMSprop on ``N`` times the loss.

    This form leaves out the Gamma term of the position-dependent preconditioner, as the paper
    recommends; :class:`PSGLDGamma` includes it.

    Parameters
    ----------
    params : iterable
        Tensors or parameter groups (dicts); groups may override every number below.
    lr : float
        ``alpha > 0``.
    rms_decay : float
        ``beta`` in (0, 1): the moving average of ``g^2`` keeps ``beta`` per step.
    floor : float
        ``lambda > 0``: ``G = 1 / (lambda + sqrt(V))``.
    temperature : float
        ``T >= 0``; 0 is RMSprop.
    num_data : int, optional
        ``N >= 1``: the loss is a mean over ``N`` data points.
    generator : torch.Generator, optional
        The source of every normal, on the parameters' device. Give it, or ``seed``.
    seed : int, optional
        Non-negative seed of a new generator (:func:`make_generator`); None draws fresh
        entropy, recorded in ``seed``.
    on_divergence, check_every, divergence_bound
        The divergence check (:class:`~sgsim.torch.Divergence`): ``"raise"`` (default) or
        ``"mark"``; check after every ``check_every``-th step (int >= 1, default 1); a bound
        ``> 0`` on every ``|theta_i|``, or None (default: only non-finite values diverge).

    Attributes
    ----------
    generator : torch.Generator
        The generator the noise is drawn from.
    seed : int or None
        The sgsim seed of the generator, None when it was given.
    divergence : Divergence or None
        Where the chain diverged, with ``on_divergence="mark"`` (None while it has not).

    Raises
    ------
    ParameterError
        If a number is out of range, or ``params`` is empty.
    ParameterTypeError
        If an argument has the wrong type.
    """

    _gamma_term = False

    def __init__(self, params, lr: float, rms_decay: float = 0.99, floor: float = 1e-5, temperature: float = 1.0,
                 num_data: int | None = None, generator=None, seed=None, *, on_divergence: str = "raise",
                 check_every: int = 1, divergence_bound: float | None = None):  # fmt: skip
        defaults = dict(lr=lr, rms_decay=rms_decay, floor=floor, temperature=temperature, num_data=num_data)
        super().__init__(params, defaults, generator, seed, on_divergence, check_every, divergence_bound)

    step = _Langevin.step  # documented in _Langevin.step

    def _check_group(self, group: dict) -> None:
        super()._check_group(group)
        group["rms_decay"] = real("rms_decay", group["rms_decay"], 0.0, 1.0, low_open=True, high_open=True)
        group["floor"] = real("floor", group["floor"], 0.0, low_open=True)

    def _moments(self, params: list[torch.Tensor]) -> list[torch.Tensor]:
        out = []
        for p in params:
            state = self.state[p]
            if "second_moment" not in state:
                state["second_moment"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                if self._gamma_term:
                    state["step"] = 0
            out.append(state["second_moment"])
        return out

    def _update(self, group, params, grads, normals, sd):
        beta, lr = group["rms_decay"], group["lr"]
        moments, grads = self._moments(params), _scaled_gradients(grads, group)
        # RMSprop's own operations (torch.optim.RMSprop, foreach), so that T = 0 is RMSprop bit for bit
        torch._foreach_mul_(moments, beta)
        torch._foreach_addcmul_(moments, grads, grads, value=1.0 - beta)
        denominators = torch._foreach_sqrt(moments)
        temperature = group["temperature"]
        gamma = self._gamma_drift(params, grads, denominators, temperature > 0) if self._gamma_term else None
        torch._foreach_add_(denominators, group["floor"])
        torch._foreach_addcdiv_(params, grads, denominators, value=-lr)
        if gamma is not None:
            # - lr T g dg/dtheta / (sqrt(V) (lambda + sqrt(V))^2) = lr T Gamma
            gamma_term = torch._foreach_div(torch._foreach_div(gamma, denominators), denominators)
            torch._foreach_add_(params, gamma_term, alpha=-lr * temperature)
        if normals is not None:
            # G^(1/2) xi = xi / sqrt(lambda + sqrt(V))
            torch._foreach_addcdiv_(params, normals, torch._foreach_sqrt(denominators), value=sd)

    def _gamma_drift(self, params, grads, roots, hot: bool) -> list[torch.Tensor] | None:
        """``g dg/dtheta / sqrt(V)`` per coordinate (``-Gamma (lambda + sqrt(V))^2``); keeps the last move."""
        out, any_term = [], False
        for p, g, root in zip(params, grads, roots, strict=True):
            state = self.state[p]
            if state["step"] > 0 and hot:
                any_term = True
                moved = p - state["last_theta"]
                use = (moved != 0) & (root > 0)
                # the secant of the gradient along the last move, coordinate by coordinate
                curvature = (g - state["last_gradient"]) / torch.where(use, moved, 1)
                out.append(torch.where(use, g * curvature / torch.where(use, root, 1), 0))
            else:
                out.append(torch.zeros_like(p))
            if "last_theta" not in state:
                state["last_theta"] = p.detach().clone(memory_format=torch.preserve_format)
                state["last_gradient"] = g.detach().clone(memory_format=torch.preserve_format)
            else:
                state["last_theta"].copy_(p)
                state["last_gradient"].copy_(g)
            state["step"] += 1
        return out if any_term else None


class PSGLDGamma(PSGLD):
    r"""pSGLD with the Gamma term of its position-dependent preconditioner.

    :class:`PSGLD`'s step plus the drift ``alpha T Gamma`` that keeps ``exp(-U / T)``
    invariant under the position-dependent preconditioner (Li, Chen, Carlson and Carin (2016),
    "Preconditioned stochastic gradient Langevin dynamics for deep neural networks", eq. 4;
    the form of ``Gamma`` for the moving average is derived in :ref:`theory-langevin-peers`):

    .. math::

        \Gamma_i = -\frac{g_i\, \partial_i g_i}{\sqrt{V_i}\,(\lambda + \sqrt{V_i})^2},

    with the curvature ``partial_i g_i`` the secant of the gradient along the chain's last move,
    ``(g_{k,i} - g_{k-1,i}) / (theta_{k-1,i} - theta_{k-2,i})`` (zero at the first step and
    where a coordinate did not move or ``V_i = 0``). These are the steps of the compiled
    ``psgld_gamma`` method (:mod:`sgsim.integrators.psgld`). Beside ``V`` the state keeps
    ``last_theta``, ``last_gradient`` (the record's rows of the same names) and ``step`` per
    parameter, all in ``state_dict()``. The Gamma term scales with the step's temperature, as
    in the compiled step, so that at ``temperature = 0`` the step is RMSprop.

    Parameters
    ----------
    params, lr, rms_decay, floor, temperature, num_data, generator, seed, on_divergence, check_every, divergence_bound
        As for :class:`PSGLD`.

    Raises
    ------
    ParameterError
        If a number is out of range, or ``params`` is empty.
    ParameterTypeError
        If an argument has the wrong type.
    """

    _gamma_term = True
