r"""SGLD with repulsive forces (SGLD+R) and SVGD over an ensemble of ``L`` copies of a PyTorch module.

State, init and update, in that order:

- state: the ``L`` particles, the trainable parameters of ``L`` copies of one module, stacked
  (``torch.func.stack_module_state``) and held as one ``(L, P)`` tensor ``flat`` (row ``i``:
  particle ``i``'s parameters, flattened in the order of ``named_parameters`` and each in C
  order); ``params`` holds ``(L, *shape)`` views of it by name, ``buffers`` the stacked buffers
  and frozen parameters. :class:`~sgsim.torch.SGLDRepulsive` also holds its ``torch.Generator``.
- init: ``SGLDRepulsive(models, lr, ...)``, ``SVGD(models, lr, ...)`` with ``models`` ``L >= 2``
  modules of one class, initialised independently; every number is checked before any work.
- update (:meth:`~sgsim.torch.SGLDRepulsive.step`, :meth:`~sgsim.torch.SVGD.step`): the loss of every particle is
  evaluated at once (``torch.func.functional_call`` under ``torch.vmap``), with its gradient
  (``torch.func.grad_and_value``), and the ensemble moves by

.. math::

    Z \leftarrow Z + \frac{\epsilon}{L}\Big(-K\,\nabla\tilde U(Z) + c_T\,\Gamma\Big)
        + \sqrt{\frac{2 \epsilon T}{L}}\; C_K\, \Xi,
    \qquad \Gamma = \frac{2}{h}\big(\operatorname{diag}(K\mathbf 1)\, Z - K Z\big),
    \quad C_K C_K^\top = K,

with ``K_ij = exp(-|z_i - z_j|^2 / h)`` the RBF kernel of the flattened parameters, ``grad U~``
row-wise, ``Xi`` an ``(L, P)`` matrix of independent standard normals (so the noise has
covariance ``(2 epsilon T / L) K (x) I_P``: correlated between particles through ``K``,
independent across coordinates), ``c_T = T`` when ``T > 0`` and ``c_T = 1`` at ``T = 0``
("Stochastic Gradient MCMC with Repulsive Forces", eqs. 5, 7 and 8, with the sign of ``Gamma``
and of the kernel term corrected to repulsion: :ref:`erratum-rep-gamma-sign`,
:ref:`erratum-rep-svgd-sign`; :ref:`theory-repulsive-samplers`). SVGD is the same drift with
``c_T = 1`` and no noise (Liu and Wang, 2016; the paper's eqs. 4 and 6).

These are the steps of sgsim's compiled kernels :mod:`sgsim.integrators.sgld_repulsive` and
:mod:`sgsim.integrators.svgd`, on the definitions of :func:`sgsim.dynamics.svgd_velocity` and
:func:`sgsim.dynamics.repulsive_noise_cov`, and they share every convention:

- Units: the repulsive paper's, with ``lr = epsilon`` the step on the potential ``U = -log
  density`` (:ref:`theory-step-units`): a lone particle would take the gradient step
  ``epsilon grad U``. ``num_data = N`` declares the loss a mean over ``N`` data points
  (``U = N * loss``), as for :class:`sgsim.torch.SGLD`. ``normalise=False`` drops the ``1/L`` of
  drift and noise alike (time runs ``L`` times faster; the paper's authors' code runs this way).
- Temperature: ``T`` multiplies the repulsion as well as the noise variance, so the step samples
  ``pi^(1/T)``; at ``T = 0`` the step is SVGD's, with the repulsion at full strength, and draws
  no noise (the exploration stage of cyclical SGLD+R: :class:`sgsim.torch.ScheduleDriver` drives
  an :class:`~sgsim.torch.SGLDRepulsive` through :func:`sgsim.schedules.cyclical`).
- Bandwidth: a fixed ``h > 0``, or ``"median"`` (the default): ``h = median_{i<j} |z_i - z_j|^2 /
  log L`` at every step (the median of ``numpy.median``: the mean of the two middle values). With
  the median, ``h`` depends on the particles and SGLD+R's ``Gamma`` gains the part
  ``(T / (h^2 log L)) sum_(p,q) (K_ip r_ip - K_iq r_iq)(z_p - z_q)`` over the middle pair(s)
  ``(p, q)`` of squared distances ``r`` (a pair counted twice when their number is odd);
  ``median_correction=False`` leaves it out (a biased step, for comparison). SVGD has no such
  part, as in the compiled kernel.
- Noise factor: ``C_K`` is the Cholesky factor of ``K``, or of ``K + delta I`` with the smallest
  ``delta`` of ``1e-10, 1e-9, ..., 1e-4`` that works when ``K`` is numerically singular (the rule
  of :func:`sgsim.integrators.sgld_repulsive.cholesky_with_jitter`, which adds independent noise
  of variance ``2 epsilon T delta / L`` per coordinate); the largest ``delta`` used is kept in
  ``jitter``, and a ``RuntimeWarning`` is issued the first time it exceeds ``1e-8``.

Squared distances come from the Gram matrix of the particles centred on their mean,
``|z_i|^2 + |z_j|^2 - 2 z_i . z_j``, so that a step costs ``O(L^2 P)`` in matrix products (plus
``O(L^3)`` for the Cholesky factor) and no ``(L, L, P)`` array; centring keeps the rounding error
of a distance relative to the particles' spread rather than to their distance from the origin.
The normals of a step are one ``torch.randn`` call of shape ``(L, P)`` from the sampler's
generator; the compiled kernels draw each particle's normals from its own stream instead, so
the two agree given the same normals (``step(..., noise=...)``), not the same seed.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable

import torch
from torch import nn

from .. import rng as _rng
from .._validate import ParameterError, ParameterTypeError, boolean, integer, positive_float, real
from ..integrators.sgld_repulsive import JITTERS, QUIET_JITTER
from ..integrators.svgd import check_bandwidth
from ._trust import (
    Divergence,
    DivergenceCheck,
    divergence_from,
    divergence_record,
    generator_record,
    restore_generator,
    split_extras,
)
from .optim import _same_device, make_generator

__all__ = ["SGLDRepulsive", "SVGD"]


class _Particle:
    """One particle's module inside the vectorised loss: call it as the module itself.

    Attributes
    ----------
    params : dict of str to Tensor
        The particle's trainable parameters by name (for a prior term in the loss).
    """

    __slots__ = ("_base", "_tensors", "params")

    def __init__(self, base: nn.Module, params: dict, rest: dict):
        self._base = base
        self._tensors = (params, rest)
        self.params = params

    def __call__(self, *args, **kwargs):
        return torch.func.functional_call(self._base, self._tensors, args, kwargs)


def _check_models(models) -> list[nn.Module]:
    if isinstance(models, torch.Tensor) or (isinstance(models, nn.Module) and not isinstance(models, nn.ModuleList)):
        raise ParameterTypeError("models", "models must be a sequence of L >= 2 modules (one per particle), not one")
    try:
        models = list(models)
    except TypeError:
        raise ParameterTypeError(
            "models", f"models must be a sequence of modules, got {type(models).__name__}"
        ) from None
    if len(models) < 2:
        raise ParameterError("models", f"an ensemble needs at least 2 particles (models), got {len(models)}")
    for m in models:
        if not isinstance(m, nn.Module):
            raise ParameterTypeError("models", f"models must hold torch.nn.Module instances, got {type(m).__name__}")
    first = models[0]
    if any(type(m) is not type(first) for m in models):
        raise ParameterError("models", "the models must all be of one class")
    if any(m.training != first.training for m in models):
        raise ParameterError("models", "the models must all be in the same mode (train or eval)")
    layout = [(n, p.shape, p.dtype, p.device, p.requires_grad) for n, p in first.named_parameters()]
    buffers = [(n, b.shape) for n, b in first.named_buffers()]
    for m in models[1:]:
        if [(n, p.shape, p.dtype, p.device, p.requires_grad) for n, p in m.named_parameters()] != layout:
            raise ParameterError(
                "models", "the models' parameters differ in name, shape, dtype, device or requires_grad"
            )
        if [(n, b.shape) for n, b in m.named_buffers()] != buffers:
            raise ParameterError("models", "the models' buffers differ in name or shape")
    trainable = [(n, dtype, device) for n, _, dtype, device, grad in layout if grad]
    if not trainable:
        raise ParameterError("models", "the models have no parameter that requires a gradient")
    if len({(dtype, device) for _, dtype, device in trainable}) > 1:
        raise ParameterError("models", "the trainable parameters must share one dtype and one device")
    dtype = trainable[0][1]
    if not dtype.is_floating_point:
        raise ParameterTypeError("models", f"the parameters must be floating point, got {dtype}")
    return models


class _Ensemble:
    """What SGLD+R and SVGD share: the stacked particles, their gradients, the kernel and the drift."""

    _noisy = False  # SVGD; SGLDRepulsive injects noise at T > 0

    generator: torch.Generator | None = None  # SVGD draws nothing

    def __init__(self, models, lr, temperature, num_data, bandwidth, normalise, median_correction,
                 on_divergence="raise", check_every=1, divergence_bound=None):  # fmt: skip
        models = _check_models(models)
        group = {"lr": lr, "num_data": num_data}
        if self._noisy:
            group["temperature"] = temperature
        self._check_group(group)
        self._check = DivergenceCheck(on_divergence, check_every, divergence_bound)
        self._steps = 0
        self.divergence: Divergence | None = None
        self._fixed_h = None if check_bandwidth("bandwidth", bandwidth) == "median" else float(bandwidth)
        self.normalise: bool = boolean("normalise", normalise)
        self.median_correction: bool = boolean("median_correction", median_correction)
        self.param_groups: list[dict] = [group]

        self.n_particles: int = len(models)
        stacked, buffers = torch.func.stack_module_state(models)
        names = [n for n, p in models[0].named_parameters() if p.requires_grad]
        shapes = [stacked[n].shape[1:] for n in names]
        self.flat: torch.Tensor = torch.cat([stacked[n].detach().reshape(self.n_particles, -1) for n in names], dim=1)
        self.params: dict[str, torch.Tensor] = {}
        start = 0
        for name, shape in zip(names, shapes, strict=True):
            size = math.prod(shape)
            self.params[name] = self.flat[:, start : start + size].unflatten(1, shape)
            start += size
        frozen = {n: p.detach() for n, p in stacked.items() if n not in self.params}
        self.buffers: dict[str, torch.Tensor] = {**frozen, **{n: b.detach() for n, b in buffers.items()}}
        self._base = copy.deepcopy(models[0]).to("meta")
        self._upper = torch.triu_indices(self.n_particles, self.n_particles, 1, device=self.flat.device)
        self.bandwidth: float | None = None
        if self._fixed_h is None:
            self._median_bandwidth(self._sq_distances(self.flat - self.flat.mean(0))[1], "models")

    def _check_group(self, group: dict) -> None:
        group["lr"] = positive_float("lr", group["lr"])
        if self._noisy:
            group["temperature"] = real("temperature", group["temperature"], 0.0)
        if group["num_data"] is not None:
            group["num_data"] = integer("num_data", group["num_data"], low=1)

    @property
    def device(self) -> torch.device:
        """The device of the particles."""
        return self.flat.device

    @property
    def steps_taken(self) -> int:
        """The number of steps taken, counted across a resume (kept in ``state_dict()``)."""
        return self._steps

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict:
        """Everything a checkpoint needs to continue the run bit for bit.

        Returns
        -------
        dict
            ``"particles"`` (a copy of ``flat``), ``"buffers"``, ``"param_groups"`` (the numbers
            of the one group), ``"bandwidth"``, ``"jitter"``, ``"steps"``, ``"divergence"`` and,
            for :class:`SGLDRepulsive`, ``"generator"`` (its device and ``get_state()``).
        """
        out = {
            "particles": self.flat.detach().clone(),
            "buffers": {n: b.clone() for n, b in self.buffers.items()},
            "param_groups": [dict(self.param_groups[0])],
            "bandwidth": self.bandwidth,
            "jitter": getattr(self, "jitter", 0.0),
            "steps": self._steps,
            "divergence": divergence_record(self.divergence),
        }
        if self.generator is not None:
            out["generator"] = generator_record(self.generator)
        return out

    def load_state_dict(self, state_dict: dict) -> None:
        """Continue a saved run: the particles, buffers, numbers, generator and step count of :meth:`state_dict`.

        A ``state_dict`` without a generator state loads with a ``RuntimeWarning`` (the noise
        continues from this sampler's generator as it stands).

        Parameters
        ----------
        state_dict : dict
            As :meth:`state_dict` returns it, from an ensemble of the same shape.
        """
        name = type(self).__name__
        rest, extras = split_extras(state_dict, name)
        particles = rest.get("particles")
        if not isinstance(particles, torch.Tensor) or tuple(particles.shape) != tuple(self.flat.shape):
            raise ParameterError(
                "state_dict", f"{name}.load_state_dict: 'particles' must be a tensor of shape {tuple(self.flat.shape)}"
            )
        buffers = rest.get("buffers", {})
        if not isinstance(buffers, dict) or set(buffers) != set(self.buffers):
            raise ParameterError("state_dict", f"{name}.load_state_dict: 'buffers' must name {sorted(self.buffers)}")
        groups = rest.get("param_groups")
        if not isinstance(groups, list) or len(groups) != 1 or not isinstance(groups[0], dict):
            raise ParameterError("state_dict", f"{name}.load_state_dict: 'param_groups' must hold one dict")
        group = {**self.param_groups[0], **groups[0]}
        self._check_group(group)
        for key, value in buffers.items():
            if not isinstance(value, torch.Tensor) or value.shape != self.buffers[key].shape:
                raise ParameterError("state_dict", f"{name}.load_state_dict: buffer {key!r} has the wrong shape")
        if self.generator is not None:
            restore_generator(self.generator, extras.get("generator"), name)
        with torch.no_grad():
            self.flat.copy_(particles)
            for key, value in buffers.items():
                self.buffers[key].copy_(value)
        self.param_groups[0].update(group)
        bandwidth = rest.get("bandwidth")
        self.bandwidth = None if bandwidth is None else float(bandwidth)
        if hasattr(self, "jitter"):
            self.jitter = float(rest.get("jitter", 0.0))
        self._steps = extras.get("steps", self._steps)
        self._check.checked = self._steps
        self.divergence = divergence_from(extras.get("divergence"))

    # ------------------------------------------------------------------ the divergence check

    def _check_divergence(self) -> None:
        """The divergence check after a step (:class:`~sgsim.torch.Divergence`): one reduction and one read-back."""
        check, z = self._check, self.flat
        if check.healthy([z]):
            check.checked = self._steps
            return
        # the kernel mixes every particle's gradient into every drift: no gradient is named
        for i in range(self.n_particles):
            for pname, view in self.params.items():
                reason = check.reason(view[i], None)
                if reason is not None:
                    where = f"particle {i}'s parameter {pname!r} (shape {tuple(view.shape[1:])})"
                    self.divergence = check.found(type(self).__name__, self._steps, where, reason)
                    return

    # ------------------------------------------------------------------ the loss of every particle

    def _gradients(self, loss_fn, args) -> tuple[torch.Tensor, torch.Tensor]:
        """The per-particle losses, shape ``(L,)``, and their gradients, ``(L, P)`` (of the loss, not of ``U``)."""
        if not callable(loss_fn):
            raise ParameterTypeError("loss_fn", f"loss_fn must be callable, got {type(loss_fn).__name__}")
        base = self._base

        def one(params, rest):
            loss = loss_fn(_Particle(base, params, rest), *args)
            if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
                raise ParameterError("loss_fn", "loss_fn must return a tensor with one element per particle")
            return loss.reshape(())

        grads, losses = torch.vmap(torch.func.grad_and_value(one))(self.params, self.buffers)
        flat = torch.cat([grads[n].reshape(self.n_particles, -1) for n in self.params], dim=1)
        return losses.detach(), flat

    @torch.no_grad()
    def predict(self, *inputs, **kwargs):
        """Every particle's output on the same inputs, stacked along a new first axis of length ``L``.

        Parameters
        ----------
        *inputs, **kwargs
            The module's ``forward`` arguments, shared by all particles.

        Returns
        -------
        Tensor or pytree of tensors
            The outputs, with a leading axis of length ``L``.
        """
        base = self._base

        def one(params, rest):
            return torch.func.functional_call(base, (params, rest), inputs, kwargs)

        return torch.vmap(one)(self.params, self.buffers)

    def particle(self, i: int) -> dict[str, torch.Tensor]:
        """Particle ``i``'s parameters and buffers by name, for ``module.load_state_dict``.

        Parameters
        ----------
        i : int
            Index in ``[0, L)``.

        Returns
        -------
        dict of str to Tensor
            Copies of its tensors.
        """
        i = integer("i", i, low=0, high=self.n_particles - 1)
        return {n: t[i].clone() for n, t in (*self.params.items(), *self.buffers.items())}

    # ------------------------------------------------------------------ kernel and drift

    def _sq_distances(self, centred: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``|z_i - z_j|^2`` from the Gram matrix of the centred particles, and its strict upper triangle."""
        gram = centred @ centred.T
        sq = gram.diagonal()
        d2 = (sq[:, None] + sq[None, :] - 2.0 * gram).clamp_min_(0.0)
        d2 = 0.5 * (d2 + d2.T)
        d2.fill_diagonal_(0.0)
        iu = self._upper
        return d2, d2[iu[0], iu[1]]

    def _median_bandwidth(self, upper: torch.Tensor, name: str) -> tuple[float, torch.Tensor]:
        """The median heuristic ``h`` and the order of the pair distances (``numpy.median``'s middle)."""
        values, order = torch.sort(upper, stable=True)
        n = upper.numel()
        med = 0.5 * (values[(n - 1) // 2] + values[n // 2])
        h = float(med) / math.log(self.n_particles)
        if not h > 0 or not math.isfinite(h):
            what = "the particles coincide" if h == 0 else f"it is {h}: the particles are not finite"
            hint = " (initialise the models independently)" if name == "models" else ""
            raise ParameterError(name, f"the median heuristic gives no bandwidth > 0: {what}{hint}")
        return h, order

    def _step(self, loss_fn, args, noise, noisy: bool) -> torch.Tensor:
        group = self.param_groups[0]
        self._check_group(group)
        if self.divergence is not None:  # marked: the ensemble has stopped
            return torch.full((self.n_particles,), math.nan, dtype=self.flat.dtype, device=self.device)
        losses = self._move(loss_fn, args, noise, noisy, group)
        self._steps += 1
        if self._check.due(self._steps):
            self._check_divergence()
        return losses

    def _move(self, loss_fn, args, noise, noisy: bool, group: dict) -> torch.Tensor:
        lr, temp = group["lr"], group.get("temperature", 0.0)
        n = self.n_particles
        if noisy and noise is not None:
            if not isinstance(noise, torch.Tensor) or tuple(noise.shape) != tuple(self.flat.shape):
                raise ParameterError("noise", f"noise must be a tensor of shape (L, P) = {tuple(self.flat.shape)}")
        losses, grad = self._gradients(loss_fn, args)
        if group["num_data"] is not None:
            grad.mul_(group["num_data"])
        z = self.flat
        centred = z - z.mean(0)
        d2, upper = self._sq_distances(centred)
        if self._fixed_h is None:
            h, order = self._median_bandwidth(upper, "bandwidth")
        else:
            h, order = self._fixed_h, None
        self.bandwidth = h
        kern = torch.exp(d2 / -h)
        coef = temp if noisy else 1.0
        push = coef * (2.0 / h)
        # -K G + push (diag(K 1) Z - K Z) = push diag(K 1) Z - K (G + push Z), on the centred Z
        drift = centred.mul(kern.sum(1, keepdim=True) * push)
        drift.sub_(kern @ grad.add_(centred, alpha=push))
        if noisy and order is not None and self.median_correction:
            self._add_median_part(drift, centred, d2, kern, h, coef, order)
        scale = 1.0 / n if self.normalise else 1.0
        if not noisy:
            z.add_(drift, alpha=lr * scale)
            return losses
        factor = self._cholesky(kern)
        xi = noise.to(z) if noise is not None else self._normals()
        z.add_(drift, alpha=lr * scale)
        # sqrt(2 lr T) sqrt(1 / L), in the compiled kernel's order
        z.addmm_(factor, xi, alpha=math.sqrt(2.0 * lr * temp) * math.sqrt(scale))
        return losses

    def _add_median_part(self, drift, centred, d2, kern, h, coef, order) -> None:
        """The part of ``Gamma`` that comes from the median bandwidth's dependence on the particles."""
        n = self.n_particles
        m = order.numel()
        iu = self._upper
        pairs = order[[(m - 1) // 2, m // 2]]
        scale = coef / (h * h * math.log(n))
        # d h / d z_p = (z_p - z_q) / log L per middle pair (each carries half of the median), and
        # d K_ij / d h = K_ij r_ij / h^2
        weighted = kern * d2
        for p, q in zip(iu[0][pairs].tolist(), iu[1][pairs].tolist(), strict=True):
            w = weighted[:, p] - weighted[:, q]
            drift.add_(w[:, None] * (centred[p] - centred[q]), alpha=scale)

    def _cholesky(self, kern: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _normals(self) -> torch.Tensor:
        raise NotImplementedError


class SGLDRepulsive(_Ensemble):
    r"""SGLD with repulsive forces over ``L`` copies of a module: SVGD's drift plus kernel-correlated noise.

    .. math::

        Z \leftarrow Z + \frac{\epsilon}{L}\Big(-K\,\nabla\tilde U(Z) + T\,\Gamma\Big)
            + \sqrt{\frac{2 \epsilon T}{L}}\; C_K\, \Xi

    ("Stochastic Gradient MCMC with Repulsive Forces", eqs. 5, 7 and 8, signs corrected;
    :ref:`theory-repulsive-samplers`; see :mod:`sgsim.torch.particles` for ``K``, ``Gamma``,
    ``C_K``, the median bandwidth's part of ``Gamma`` and the jitter). The Ma-Chen-Fox recipe with diffusion
    ``K / L`` per coordinate: the product of the target over the particles is stationary
    (:ref:`theory-fp-equation`). At ``temperature = 0`` the step is :class:`SVGD`'s and draws
    nothing. The steps are those of ``sgsim.sample(target, "sgld_repulsive", ...)`` (and of
    ``"csgld_repulsive"`` through :class:`~sgsim.torch.ScheduleDriver`) given the same normals.

    Units: ``lr = epsilon`` on the potential ``U`` (the ``step_size`` of :func:`sgsim.sample`);
    with ``num_data = N`` the loss is a mean over ``N`` data points and ``U = N * loss``. Each
    particle's own gradient enters its drift as ``epsilon / L`` times ``grad U`` (``K_ii = 1``), and
    its noise has variance ``2 epsilon T / L`` per coordinate; ``normalise=False`` drops the ``1/L``.

    Parameters
    ----------
    models : sequence of ``torch.nn.Module``
        ``L >= 2`` modules of one class, in one mode, initialised independently: their
        parameters that require a gradient (one dtype, one device) are the particles, the other
        parameters and the buffers are stacked and held fixed. The modules themselves are not
        used again (their tensors are copied).
    lr : float
        ``epsilon > 0``, the step on ``U``.
    temperature : float
        ``T >= 0``; 0 is SVGD.
    num_data : int, optional
        ``N >= 1``: the loss is a mean over ``N`` data points (its gradient is multiplied by ``N``).
    bandwidth : float or ``"median"``
        The RBF bandwidth ``h > 0``, or the median heuristic at every step.
    normalise : bool
        Divide drift and noise by ``L``.
    median_correction : bool
        Add the median bandwidth's part of ``Gamma`` (False: the uncorrected, biased step).
    generator : ``torch.Generator``, optional
        The source of every normal, on the particles' device. Give it, or ``seed``.
    seed : int, optional
        Non-negative seed of a new generator (:func:`~sgsim.torch.make_generator`); None draws
        fresh entropy, recorded in ``seed``.
    on_divergence, check_every, divergence_bound
        The divergence check (:class:`~sgsim.torch.Divergence`), as for :class:`~sgsim.torch.SGLD`;
        ``"mark"`` stops the ensemble (later steps return NaN losses and move nothing).

    Attributes
    ----------
    flat : ``torch.Tensor``
        The particles, shape ``(L, P)``; writing into it moves them.
    params : dict of str to ``torch.Tensor``
        Views of ``flat`` by parameter name, each of shape ``(L, *shape)``.
    buffers : dict of str to ``torch.Tensor``
        The stacked buffers and frozen parameters, ``(L, *shape)`` each.
    param_groups : list of dict
        One group holding ``lr``, ``temperature`` and ``num_data`` (changed between steps by
        hand or by :class:`~sgsim.torch.ScheduleDriver`).
    bandwidth : float or None
        The ``h`` of the last step (None before the first).
    jitter : float
        The largest ``delta`` added to ``K``'s diagonal so far (0 when none was needed).
    generator : ``torch.Generator``
        The generator the noise is drawn from.
    seed : int or None
        The sgsim seed of the generator, None when it was given.
    divergence : :class:`~sgsim.torch.Divergence` or None
        Where the ensemble diverged, with ``on_divergence="mark"`` (None while it has not).

    Raises
    ------
    ParameterError
        If a number is out of range, ``models`` holds fewer than 2 modules or modules that
        differ in structure, or the median heuristic finds the particles coinciding.
    ParameterTypeError
        If an argument has the wrong type.

    Examples
    --------
    Ten particles of a two-parameter "network" whose loss is ``U = |theta|^2 / 2``, i.e. ``N(0, I_2)``:

    >>> import torch
    >>> from sgsim.torch.particles import SGLDRepulsive
    >>> class Position(torch.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.theta = torch.nn.Parameter(torch.randn(2, dtype=torch.float64))
    ...     def forward(self):
    ...         return 0.5 * self.theta.pow(2).sum()
    >>> _ = torch.manual_seed(0)
    >>> sampler = SGLDRepulsive([Position() for _ in range(10)], lr=0.5, seed=1)
    >>> for _ in range(200):
    ...     losses = sampler.step(lambda model: model())
    >>> sampler.params["theta"].shape, losses.shape
    (torch.Size([10, 2]), torch.Size([10]))
    >>> sampler.predict().shape  # every particle's forward() at once
    torch.Size([10])
    """

    _noisy = True

    def __init__(self, models, lr: float, temperature: float = 1.0, num_data: int | None = None,
                 bandwidth: float | str = "median", normalise: bool = True, median_correction: bool = True,
                 generator: torch.Generator | None = None, seed: int | None = None, *,
                 on_divergence: str = "raise", check_every: int = 1,
                 divergence_bound: float | None = None):  # fmt: skip
        if generator is not None and seed is not None:
            raise ParameterError("seed", "give generator or seed, not both")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise ParameterTypeError(
                "generator", f"generator must be a torch.Generator, got {type(generator).__name__}"
            )
        if seed is not None:
            seed = _rng.resolve_seed(seed)
        super().__init__(models, lr, temperature, num_data, bandwidth, normalise, median_correction,
                         on_divergence, check_every, divergence_bound)  # fmt: skip
        if generator is None:
            self.seed: int | None = _rng.resolve_seed(seed)
            generator = make_generator(self.seed, self.device)
        else:
            self.seed = None
        if not _same_device(generator.device, self.device):
            raise ParameterError(
                "generator",
                f"the generator lives on {generator.device}, the particles on {self.device}: "
                "give a generator on the particles' device",
            )
        self.generator: torch.Generator = generator
        self.jitter: float = 0.0

    def step(self, loss_fn: Callable, *args, noise: torch.Tensor | None = None) -> torch.Tensor:
        """One SGLD+R step of the whole ensemble.

        Parameters
        ----------
        loss_fn : callable
            ``loss_fn(model, *args)`` returns one particle's loss as a tensor of one element:
            ``model(...)`` runs the module with that particle's parameters (and buffers), and
            ``model.params`` holds them by name (for a prior term). It is evaluated for all
            particles at once under ``torch.vmap``, so it must not draw random numbers (use
            ``eval`` mode for dropout) or change buffers in place (batch norm in training mode).
        *args
            Passed to ``loss_fn`` after ``model``, shared by all particles (e.g. a minibatch).
        noise : ``torch.Tensor``, optional
            Standard normals of shape ``(L, P)`` that replace the drawn ones (ignored at ``T = 0``).

        Returns
        -------
        ``torch.Tensor``
            The ``L`` losses at the particles before the step.
        """
        return self._step(loss_fn, args, noise, self.param_groups[0]["temperature"] > 0)

    def _normals(self) -> torch.Tensor:
        return torch.randn(self.flat.shape, generator=self.generator, device=self.device, dtype=self.flat.dtype)

    def _cholesky(self, kern: torch.Tensor) -> torch.Tensor:
        try:
            return torch.linalg.cholesky(kern)
        except torch.linalg.LinAlgError:
            pass
        eye = torch.eye(kern.shape[0], dtype=kern.dtype, device=kern.device)
        if bool(torch.isfinite(kern).all()):
            for delta in JITTERS:
                try:
                    factor = torch.linalg.cholesky(kern + delta * eye)
                except torch.linalg.LinAlgError:
                    continue
                if delta > QUIET_JITTER >= self.jitter:
                    warnings.warn(
                        f"the kernel matrix was numerically singular: a jitter of {delta:.0e} was added to its "
                        "diagonal (extra independent noise of that relative size; see the sampler's jitter). "
                        "A smaller bandwidth or fewer coinciding particles avoids it.",
                        RuntimeWarning,
                        stacklevel=4,
                    )
                self.jitter = max(self.jitter, delta)
                return factor
        raise FloatingPointError(
            "the kernel matrix cannot be factored even with a jitter of 1e-4: the particles are not finite "
            "(the ensemble diverged; a smaller lr helps)"
        )


class SVGD(_Ensemble):
    r"""Stein variational gradient descent over ``L`` copies of a module (no noise).

    .. math::

        z_i \leftarrow z_i + \frac{\epsilon}{L} \sum_{j=1}^L
            \Big[ -K_{ij} \nabla\tilde U(z_j) + \frac{2}{h} (z_i - z_j) K_{ij} \Big]

    (Liu and Wang, 2016; "Stochastic Gradient MCMC with Repulsive Forces", eqs. 4 and 6, kernel
    term's sign corrected: :ref:`erratum-rep-svgd-sign`; :func:`sgsim.dynamics.svgd_velocity`).
    The steps of ``sgsim.sample(target, "svgd", ...)``. SVGD is deterministic and not an exact
    sampler at finite ``L``: its ensembles underestimate the target's spread
    (:ref:`theory-svgd-not-sampler`); :class:`SGLDRepulsive` adds the noise that makes it one.

    Parameters
    ----------
    models : sequence of ``torch.nn.Module``
        ``L >= 2`` modules of one class, initialised independently (as for :class:`SGLDRepulsive`).
    lr : float
        ``epsilon > 0``, the step on ``U`` (a lone particle: gradient descent with step ``epsilon``).
    num_data : int, optional
        ``N >= 1``: the loss is a mean over ``N`` data points.
    bandwidth : float or ``"median"``
        The RBF bandwidth ``h > 0``, or the median heuristic at every step.
    normalise : bool
        Divide the kernel sums by ``L``.
    on_divergence, check_every, divergence_bound
        The divergence check, as for :class:`SGLDRepulsive`.

    Attributes
    ----------
    flat, params, buffers, bandwidth
        As for :class:`SGLDRepulsive`.
    param_groups : list of dict
        One group holding ``lr`` and ``num_data`` (no temperature: SVGD has none).

    Raises
    ------
    ParameterError
        If a number is out of range or ``models`` is not an ensemble of ``L >= 2`` alike modules.
    ParameterTypeError
        If an argument has the wrong type.
    """

    def __init__(self, models, lr: float, num_data: int | None = None, bandwidth: float | str = "median",
                 normalise: bool = True, *, on_divergence: str = "raise", check_every: int = 1,
                 divergence_bound: float | None = None):  # fmt: skip
        super().__init__(models, lr, 0.0, num_data, bandwidth, normalise, False,
                         on_divergence, check_every, divergence_bound)  # fmt: skip

    def step(self, loss_fn: Callable, *args) -> torch.Tensor:
        """One SVGD step of the whole ensemble.

        Parameters
        ----------
        loss_fn : callable
            ``loss_fn(model, *args)``, as for :meth:`SGLDRepulsive.step`.
        *args
            Passed to ``loss_fn`` after ``model``.

        Returns
        -------
        ``torch.Tensor``
            The ``L`` losses at the particles before the step.
        """
        return self._step(loss_fn, args, None, False)
