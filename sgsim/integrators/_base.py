"""What every integrator module provides, and the registry of methods by name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import schedules
from ..schedules import Schedule

__all__ = ["Method", "NoiseModel", "register", "get_method", "METHODS"]


@dataclass(frozen=True)
class NoiseModel:
    """Per-step noise of one run, in the eigenbasis of the gradient-noise covariance ``V``.

    The variance along eigen-direction ``i`` at step ``k`` is
    ``a[k] * lam[i] + c[k]`` (see :mod:`sgsim.integrators._kernels`).
    """

    a: np.ndarray
    c: np.ndarray
    lam: np.ndarray
    rotate: bool
    basis: np.ndarray


@dataclass(frozen=True)
class Method:
    """A sampler registered under ``name``.

    Attributes
    ----------
    name : str
        The name given to :func:`sgsim.sample`.
    summary : str
        One line for listings.
    default_schedule : callable
        ``default_schedule(n_steps, **schedule_options) -> Schedule``, used when the caller
        gives no explicit schedule.
    schedule_options : tuple of str
        Options consumed by ``default_schedule``.
    dynamics_options : dict
        Options of the dynamics with their defaults (e.g. ``friction``).
    validate : callable
        ``validate(options) -> options`` checks and normalises ``dynamics_options``.
    injection : callable
        ``injection(options) -> (factor, corrected_factor)``: the injected variance is
        ``2 * factor * alpha_k * T_k``; with the gradient-noise correction the total
        variance is ``2 * corrected_factor * alpha_k * T_k``.
    run_chain : callable
        ``run_chain(state, gen, work, target, k0, k1, schedule, options, noise, store, out,
        injected) -> int`` runs one chain over steps ``[k0, k1)`` in place (``state``: the
        chain's arrays named by ``state_names``; ``gen``: its generator; ``work``: its copy of
        ``target.workspace``) and returns the first non-finite step or -1: see
        :mod:`sgsim.sampling`.
    state_names : tuple of str
        Names of the per-chain state arrays (``("theta",)`` or ``("theta", "velocity")``).
    """

    name: str
    summary: str
    default_schedule: Callable[..., Schedule]
    schedule_options: tuple[str, ...]
    dynamics_options: dict
    validate: Callable[[dict], dict]
    injection: Callable[[dict], tuple[float, float]]
    run_chain: Callable
    state_names: tuple[str, ...] = ("theta",)
    references: str = ""


METHODS: dict[str, Method] = {}


def register(method: Method) -> Method:
    """Add ``method`` to the registry; its name must be new."""
    if method.name in METHODS:
        raise ValueError(f"a method named {method.name!r} is already registered")
    METHODS[method.name] = method
    return method


def get_method(name) -> Method:
    """The registered method ``name``, or a ValueError listing the known ones."""
    if isinstance(name, Method):
        return name
    try:
        return METHODS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown method {name!r}; known methods: {', '.join(sorted(METHODS))}") from None


def constant_schedule(n_steps, step_size, temperature=1.0) -> Schedule:
    """Default schedule of the non-cyclical methods: constant step size."""
    return schedules.constant(step_size, n_steps, temperature)


def cyclical_schedule(
    n_steps, step_size, n_cycles, explore_fraction=0.0, temperature=1.0, skip_per_cycle=0
) -> Schedule:
    """Default schedule of the cyclical methods ([cSG] eq. 2 and Algorithm 1)."""
    return schedules.cyclical(step_size, n_cycles, n_steps, explore_fraction, temperature, skip_per_cycle)


CONSTANT_OPTIONS = ("step_size", "temperature")
CYCLICAL_OPTIONS = ("step_size", "n_cycles", "explore_fraction", "temperature", "skip_per_cycle")
