"""Targets from a log density of one's own, differentiated by JAX or PyTorch (or a NumPy gradient).

:func:`sgsim.targets.model` (also ``sgsim.model``) turns a log density written over named parameters into a
:class:`~sgsim.targets.Target` that every sampler of sgsim runs on: the parameters are
declared by name and shape, the constrained ones get a transform
(:mod:`sgsim.targets.parameters`), and the samplers move the flat unconstrained vector.

How a step is computed
----------------------
The gradient of every chain (or particle) is one call per step: the backend's vectorised
gradient (``jax.jit(jax.vmap(jax.grad(...)))`` or ``torch.func.vmap(torch.func.grad(...))``)
at the ``(C, d)`` matrix of the chains' points, with each chain's minibatch where the model
has a data likelihood. The rest of the step (noise, update, divergence check, storage) runs
in a compiled loop over the chains between the calls, with the same streams, in the same
order, as a compiled target's run. A Python call per chain per step (as emcee's
``log_prob_fn``) costs the call's overhead ``C`` times; one vectorised call pays it once
(``benchmarks/bench_model.py`` measures both).

Data of one's own
-----------------
With ``log_lik`` and ``data``, the log density is ``log_prior(x) + sum_i log_lik(x, data_i)``
over the ``N`` rows of the data arrays, and with ``batch_size = n`` each step's gradient is
the minibatch estimate ``grad log_prior + (N / n) sum_{i in B} grad log_lik(x, data_i)``, the
rows ``B`` drawn from the chain's own stream (with or without replacement) as for the
built-in regression targets. The minibatch noise is that of a genuine minibatch; the noise
correction of the samplers sees it as it sees a compiled minibatch target's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from .._jit import _CACHE, cache_dir
from .._validate import ParameterError, ParameterTypeError, boolean, integer
from ._base import Batched, Target, check_gradient
from .parameters import NUMPY_OPS, Ops, Parameters

__all__ = ["model", "BACKENDS", "jax_ops", "torch_ops"]

#: The array libraries a log density can be written in.
BACKENDS = ("jax", "torch", "numpy")

_CHECK_SEED = 20_227


def _need(module: str, extra: str):
    try:
        return __import__(module)
    except ImportError:
        raise ImportError(f"a model with backend={extra!r} needs {module}: pip install 'sgsim[{extra}]'") from None


def jax_ops() -> Ops:
    """The transforms' array operations in JAX (and JAX's 64-bit mode turned on)."""
    jax = _need("jax", "jax")
    import jax.numpy as jnp

    # the samplers run in float64; a log density traced in float32 would lose the small steps
    jax.config.update("jax_enable_x64", True)
    _persistent_jax_cache(jax)
    return Ops(
        exp=jnp.exp,
        log=jnp.log,
        sigmoid=jax.nn.sigmoid,
        softplus=jax.nn.softplus,
        cumsum=lambda x: jnp.cumsum(x, axis=-1),
        sum=lambda x: jnp.sum(x, axis=-1),
        concat=lambda xs: jnp.concatenate(xs, axis=-1),
    )


def _persistent_jax_cache(jax) -> None:
    """Keep JAX's compiled gradients on disk, beside sgsim's loops, unless the user chose otherwise.

    A model's gradient is compiled by XLA in every process (a second or two per model and
    number of chains); with JAX's persistent compilation cache a later process loads it. Set
    only when JAX has no cache directory yet and ``SGSIM_JIT_CACHE`` is not ``0``; every
    compilation is then kept (JAX's default keeps only those over a second), which applies
    to the process's other JAX programs too.
    """
    if not _CACHE or jax.config.jax_compilation_cache_dir:
        return
    jax.config.update("jax_compilation_cache_dir", str(cache_dir() / "jax"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def torch_ops() -> Ops:
    """The transforms' array operations in PyTorch."""
    torch = _need("torch", "torch")
    return Ops(
        exp=torch.exp,
        log=torch.log,
        sigmoid=torch.sigmoid,
        softplus=torch.nn.functional.softplus,
        cumsum=lambda x: torch.cumsum(x, dim=-1),
        sum=lambda x: torch.sum(x, dim=-1),
        concat=lambda xs: torch.cat(xs, dim=-1),
    )


# ----------------------------------------------------------------------------- checks


def _check_data(data) -> dict[str, np.ndarray]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ParameterTypeError("data", f"data must be a dict of arrays, got {type(data).__name__}")
    out = {}
    for name, value in data.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ParameterError("data", f"data names must be identifiers, got {name!r}")
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise ParameterTypeError("data", f"data[{name!r}] must hold real numbers, got dtype {arr.dtype}")
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            bad = np.argwhere(~np.isfinite(arr))[0]
            raise ParameterError(
                "data", f"data[{name!r}] holds a non-finite value at index {tuple(int(i) for i in bad)}"
            )
        # a copy that keeps the shape (ascontiguousarray would make a scalar a vector of one)
        out[name] = np.array(arr, dtype=np.float64 if arr.dtype.kind in "bf" else np.int64, order="C")
    return out


def _rows(data: dict[str, np.ndarray]) -> int:
    lengths = {name: (arr.shape[0] if arr.ndim else None) for name, arr in data.items()}
    if not data or any(n is None for n in lengths.values()):
        raise ParameterError(
            "data",
            f"a per-example log_lik needs data arrays with a leading axis of examples, got shapes "
            f"{ {k: v.shape for k, v in data.items()} }",
        )
    if len(set(lengths.values())) != 1:
        raise ParameterError("data", f"the data arrays must have the same number of rows (examples), got {lengths}")
    return int(next(iter(data.values())).shape[0])


def _at(point: np.ndarray, layout: Parameters) -> str:
    values = layout.named(point[None])
    parts = [f"{k}={np.array2string(np.asarray(v[0]), precision=4)}" for k, v in values.items()]
    return ", ".join(parts)


# ----------------------------------------------------------------------------- backends


class _Backend:
    """The functions a backend makes of a model: on one point, and vectorised over chains."""

    probe: Callable  # u (d,) -> (shape, dtype kind) of the log density at one point
    grad_u: Callable
    log_density: Callable
    derive: Callable | None
    examples: Callable | None  # u (d,) -> (N, d): each example's log-likelihood gradient


def _jax_backend(layout, log_density, log_prior, log_lik, data, n_data, batch_size, derived):
    ops = jax_ops()
    import jax
    import jax.numpy as jnp

    arrays = {k: jnp.asarray(v) for k, v in data.items()}

    def full(u, arrays):
        values, lj = layout.constrain(u, ops)
        if log_lik is None:
            return (log_density(values, arrays) if data else log_density(values)) + lj
        per = jax.vmap(lambda row: log_lik(values, row))(arrays)
        prior = 0.0 if log_prior is None else log_prior(values)
        return prior + jnp.sum(per) + lj

    def minibatch(u, idx, arrays):
        values, lj = layout.constrain(u, ops)
        rows = {k: v[idx] for k, v in arrays.items()}
        per = jax.vmap(lambda row: log_lik(values, row))(rows)
        prior = 0.0 if log_prior is None else log_prior(values)
        return prior + (n_data / batch_size) * jnp.sum(per) + lj

    def example(u, row):
        values, _ = layout.constrain(u, ops)
        return log_lik(values, row)

    per_example = jax.jit(jax.vmap(jax.grad(example), in_axes=(None, 0)))
    grad_full = jax.jit(jax.vmap(jax.grad(lambda u, a: -full(u, a)), in_axes=(0, None)))
    grad_mini = jax.jit(jax.vmap(jax.grad(lambda u, i, a: -minibatch(u, i, a)), in_axes=(0, 0, None)))
    lp = jax.jit(jax.vmap(full, in_axes=(0, None)))

    def grad_u(theta, batch):
        if batch is None:
            return np.asarray(grad_full(theta, arrays))
        return np.asarray(grad_mini(theta, batch, arrays))

    b = _Backend()
    b.examples = None if log_lik is None else (lambda u: np.asarray(per_example(jnp.asarray(u), arrays)))

    def probe(u):
        # the shape and kind of one point's value, traced without compiling it
        out = jax.eval_shape(full, jnp.asarray(u), arrays)
        return out.shape, np.dtype(out.dtype).kind

    b.probe = probe
    b.grad_u = grad_u
    b.log_density = lambda theta: np.asarray(lp(theta, arrays))
    if derived is not None:
        mapped = jax.jit(jax.vmap(derived))
        b.derive = lambda values: {
            k: np.asarray(v) for k, v in mapped({k: jnp.asarray(v) for k, v in values.items()}).items()
        }
    else:
        b.derive = None
    return b


def _torch_backend(layout, log_density, log_prior, log_lik, data, n_data, batch_size, derived):
    ops = torch_ops()
    import torch
    from torch.func import grad, vmap

    arrays = {k: torch.from_numpy(v) for k, v in data.items()}

    def full(u):
        values, lj = layout.constrain(u, ops)
        if log_lik is None:
            return (log_density(values, arrays) if data else log_density(values)) + lj
        per = vmap(lambda row: log_lik(values, row))(arrays)
        prior = 0.0 if log_prior is None else log_prior(values)
        return prior + torch.sum(per) + lj

    def minibatch(u, idx):
        values, lj = layout.constrain(u, ops)
        rows = {k: torch.index_select(v, 0, idx) for k, v in arrays.items()}
        per = vmap(lambda row: log_lik(values, row))(rows)
        prior = 0.0 if log_prior is None else log_prior(values)
        return prior + (n_data / batch_size) * torch.sum(per) + lj

    def example(u, row):
        values, _ = layout.constrain(u, ops)
        return log_lik(values, row)

    per_example = vmap(grad(example), in_dims=(None, 0))
    grad_full = vmap(grad(lambda u: -full(u)))
    grad_mini = vmap(grad(lambda u, i: -minibatch(u, i)))
    lp = vmap(full)

    def grad_u(theta, batch):
        with torch.no_grad():
            t = torch.from_numpy(np.ascontiguousarray(theta))
            if batch is None:
                return grad_full(t).numpy()
            return grad_mini(t, torch.from_numpy(np.ascontiguousarray(batch))).numpy()

    def log_density_rows(theta):
        with torch.no_grad():
            return lp(torch.from_numpy(np.ascontiguousarray(theta))).numpy()

    def examples(u):
        with torch.no_grad():
            return per_example(torch.from_numpy(np.asarray(u, dtype=np.float64)), arrays).numpy()

    b = _Backend()
    b.examples = None if log_lik is None else examples
    b.probe = lambda u: _kind(full(torch.from_numpy(np.asarray(u, dtype=np.float64))).detach().numpy())
    b.grad_u = grad_u
    b.log_density = log_density_rows
    if derived is not None:
        mapped = vmap(derived)

        def derive(values):
            with torch.no_grad():
                out = mapped({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in values.items()})
            return {k: v.numpy() for k, v in out.items()}

        b.derive = derive
    else:
        b.derive = None
    return b


def _numpy_backend(layout, log_density, grad_log_density, data, derived):
    if grad_log_density is None:
        raise ParameterTypeError(
            "grad_log_density", "backend='numpy' needs grad_log_density (the gradient of log_density)"
        )

    def call(fn, values):
        return fn(values, data) if data else fn(values)

    def lp(theta):
        values, lj = layout.constrain(theta, NUMPY_OPS)
        out = np.asarray(call(log_density, values))
        if out.dtype.kind == "c":
            raise ParameterTypeError("log_density", f"log_density returned complex values ({out.ravel()[:3]})")
        return out.astype(np.float64) + lj

    def grad_u(theta, batch):
        values, _ = layout.constrain(theta, NUMPY_OPS)
        grads = call(grad_log_density, values)
        if not isinstance(grads, Mapping) or set(grads) != set(layout.names):
            raise ParameterError(
                "grad_log_density",
                f"grad_log_density must return a dict with the keys {list(layout.names)}, "
                f"got {type(grads).__name__}{'' if not isinstance(grads, Mapping) else ' ' + str(list(grads))}",
            )
        for name, shape in layout.shapes.items():
            got = np.shape(grads[name])
            if got != theta.shape[:-1] + shape:
                raise ParameterError(
                    "grad_log_density",
                    f"grad_log_density()[{name!r}] has shape {got}, expected {theta.shape[:-1] + shape}",
                )
        return -layout.pullback(theta, grads)

    b = _Backend()
    b.examples = None
    b.probe = lambda u: _kind(_numpy_one(lp, u))
    b.grad_u = grad_u
    b.log_density = lp
    b.derive = derived
    return b


def _kind(value) -> tuple[tuple, str]:
    arr = np.asarray(value)
    return arr.shape, arr.dtype.kind


def _numpy_one(lp, u):
    out = np.asarray(lp(np.asarray(u, dtype=np.float64)[None]))
    return out[0] if out.shape == (1,) else out


# ----------------------------------------------------------------------------- the builder


def model(
    log_density: Callable | None = None,
    *,
    parameters: Mapping[str, Any],
    transforms: Mapping[str, Any] | None = None,
    backend: str = "jax",
    log_prior: Callable | None = None,
    log_lik: Callable | None = None,
    data: Mapping[str, Any] | None = None,
    batch_size: int | None = None,
    replace_batches: bool = False,
    grad_log_density: Callable | None = None,
    derived: Callable | None = None,
    name: str = "model",
    init_box: tuple[float, float] = (-2.0, 2.0),
    mean=None,
    sd=None,
) -> Target:
    """A target from a log density over named parameters, with automatic gradients.

    Parameters
    ----------
    log_density : callable, optional
        ``log_density(values)`` (or ``log_density(values, data)`` when ``data`` is given):
        the log density, up to a constant, at one point; ``values`` maps each parameter's
        name to its value (an array of its declared shape, on its constrained scale), in the
        backend's arrays. The log-Jacobian of the transforms is added by sgsim.
    parameters : dict
        ``name -> shape``: ``()`` for a scalar, ``n`` for a vector, a tuple for an array. The
        flat vector the samplers move holds them in this order (each row-major).
    transforms : dict, optional
        ``name -> transform`` for constrained parameters: ``"positive"``, ``"ordered"``,
        :func:`~sgsim.targets.lower`, :func:`~sgsim.targets.upper`,
        :func:`~sgsim.targets.interval`. Every name must be declared in ``parameters``.
    backend : {"jax", "torch", "numpy"}
        The array library ``log_density`` is written in: JAX (extra ``sgsim[jax]``) or
        PyTorch (extra ``sgsim[torch]``) differentiate it. ``"numpy"`` takes the gradient
        from ``grad_log_density``, and both functions then take every chain at once: each
        value has a leading axis of chains.
    log_prior, log_lik : callable, optional
        Instead of ``log_density``: the log prior ``log_prior(values)`` and the log
        likelihood of one example ``log_lik(values, row)``, ``row`` a dict of one row of
        each data array. JAX and PyTorch only.
    data : dict of arrays, optional
        The data, checked finite. With ``log_lik``, every array has a leading axis of the
        ``N`` examples.
    batch_size : int, optional
        With ``log_lik``: each step's gradient uses ``batch_size`` examples drawn from the
        chain's stream, scaled by ``N / batch_size``. None: every example at every step.
    replace_batches : bool
        Draw minibatches with replacement (default: without, a fresh subset at each step).
    grad_log_density : callable, optional
        For ``backend="numpy"``: the gradient of ``log_density`` in the constrained values,
        a dict of arrays shaped like ``values``.
    derived : callable, optional
        ``derived(values) -> dict`` of quantities computed from one draw (in the backend's
        arrays; vectorised for NumPy), stored with the draws under their own names.
    name : str
        The target's name.
    init_box : (float, float)
        Initial points are uniform on this box of the unconstrained scale.
    mean, sd : array_like, optional
        A known location and spread of the unconstrained vector (e.g. from a pilot run):
        they set the divergence bound (:meth:`Target.divergence_bound`). Without them, a chain
        counts as diverged when a coordinate leaves ``[-1e4, 1e4]``.

    Returns
    -------
    Target
        With ``batched`` (the vectorised functions) and ``parameters`` (the layout) set: a
        run's result holds each parameter by name on its constrained scale.

    Examples
    --------
    A banana-shaped density through NumPy with its own gradient (JAX or PyTorch need none):

    >>> import numpy as np
    >>> from sgsim.targets import model
    >>> def log_p(v):
    ...     x, y = v["x"], v["y"]
    ...     return -0.5 * x**2 - 0.5 * (y - x**2) ** 2
    >>> def grad_log_p(v):
    ...     x, y = v["x"], v["y"]
    ...     return {"x": -x + 2 * x * (y - x**2), "y": -(y - x**2)}
    >>> banana = model(log_p, parameters={"x": (), "y": ()}, backend="numpy", grad_log_density=grad_log_p)
    >>> banana.dim, banana.parameters.names
    (2, ('x', 'y'))
    >>> banana.gradient(np.array([1.0, 0.0]))  # grad U = -grad log p
    array([3., 1.])
    """
    if backend not in BACKENDS:
        raise ParameterError("backend", f"backend must be one of {BACKENDS}, got {backend!r}")
    if not isinstance(name, str) or not name:
        raise ParameterTypeError("name", f"name must be a non-empty string, got {name!r}")
    layout = Parameters(parameters, transforms or {}, derived)
    arrays = _check_data(data)
    for key in arrays:
        if key in layout.shapes:
            raise ParameterError("data", f"data name {key!r} is also the name of a parameter")
    if (log_density is None) == (log_lik is None):
        raise ParameterTypeError(
            "log_density", "give log_density, or log_lik (with data, and log_prior if any), not both"
        )
    for fn, what in ((log_density, "log_density"), (log_prior, "log_prior"), (log_lik, "log_lik")):
        if fn is not None and not callable(fn):
            raise ParameterTypeError(what, f"{what} must be a function, got {type(fn).__name__}")
    n_data = 0
    n = 0
    replace_batches = boolean("replace_batches", replace_batches)
    if log_lik is not None:
        if backend == "numpy":
            raise ParameterTypeError(
                "log_lik", "a per-example log_lik needs automatic gradients: backend 'jax' or 'torch'"
            )
        n_data = _rows(arrays)
        if batch_size is not None:
            n = integer("batch_size", batch_size, low=1, high=n_data)
    elif log_prior is not None:
        raise ParameterTypeError("log_prior", "log_prior goes with log_lik; a log_density holds the prior itself")
    elif batch_size is not None:
        raise ParameterTypeError("batch_size", "minibatches need a per-example log_lik (and data)")
    lo, hi = (float(v) for v in init_box)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ParameterError("init_box", f"init_box must be finite with low < high, got {init_box}")

    if backend == "jax":
        b = _jax_backend(layout, log_density, log_prior, log_lik, arrays, n_data, n, derived)
    elif backend == "torch":
        b = _torch_backend(layout, log_density, log_prior, log_lik, arrays, n_data, n, derived)
    else:
        b = _numpy_backend(layout, log_density, grad_log_density, arrays, derived)

    d = layout.dim
    points = np.random.default_rng(_CHECK_SEED).uniform(lo, hi, size=(3, d))
    where = "log_density" if log_lik is None else "log_lik"
    shape, kind = b.probe(points[0])
    if kind == "c":
        raise ParameterTypeError(where, f"{where} returned a complex value at {_at(points[0], layout)}")
    if shape != ():
        raise ParameterError(
            where, f"{where} must return a scalar (one log density), got shape {shape} at {_at(points[0], layout)}"
        )
    for x, value in zip(points, np.asarray(b.log_density(points), dtype=np.float64), strict=True):
        if not math.isfinite(value):
            raise ParameterError(where, f"{where} returned {value} at the initial point {_at(x, layout)}")
    grads = b.grad_u(points, None)
    if np.shape(grads) != (3, d) or not np.all(np.isfinite(grads)):
        bad = 0 if np.shape(grads) != (3, d) else int(np.argwhere(~np.isfinite(grads))[0, 0])
        raise ParameterError(
            "log_density", f"the gradient is not finite at the initial point {_at(points[bad], layout)}"
        )
    if backend == "numpy":
        # a gradient of one's own is checked against the log density, in the box and beyond
        probe = Target(name, d, None, None, (), init_low=np.full(d, lo), init_high=np.full(d, hi),
                       batched=Batched(b.grad_u, b.log_density), parameters=layout)  # fmt: skip
        check_gradient(probe)
    if derived is not None:
        values, _ = layout.constrain(points, NUMPY_OPS)
        extra = (b.derive or derived)(values)
        if not isinstance(extra, Mapping):
            raise ParameterTypeError("derived", f"derived must return a dict name -> value, got {type(extra).__name__}")
        layout.check_derived(extra)

    def named(u):
        return layout.named(u, b.derive)

    fns = Batched(
        grad_u=b.grad_u,
        log_density=b.log_density,
        n_data=n_data,
        batch_size=n,
        replace=replace_batches,
        backend=backend,
        named=named,
        example_gradients=b.examples,
        key=(
            tuple(_qualname(f) for f in (log_density, log_prior, log_lik, grad_log_density, derived)),
            layout.describe(),
            tuple((k, v) for k, v in sorted(arrays.items())),
        ),
    )
    work = np.arange(n_data if (n and not replace_batches) else 0, dtype=np.int64)
    target = Target(
        name=name,
        dim=d,
        grad_u=None,
        log_density_fn=None,
        params=(),
        init_low=np.full(d, lo),
        init_high=np.full(d, hi),
        workspace=work,
        batched=fns,
        parameters=layout,
        extras={"stochastic_gradient": f"minibatches of {n} of {n_data} examples"} if n else {},
    )
    if mean is not None:
        m = np.asarray(mean, dtype=np.float64)
        s = np.zeros(d) if sd is None else np.broadcast_to(np.asarray(sd, dtype=np.float64), (d,))
        target = replace(target, mean=m, second_moment=np.diag(s**2) + np.outer(m, m))
    return target


def _qualname(fn) -> str:
    if fn is None:
        return ""
    return f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}"
