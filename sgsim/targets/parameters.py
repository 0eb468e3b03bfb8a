r"""Named, shaped parameters and the transforms that map them to an unconstrained vector.

A sampler moves one flat vector ``u`` in ``R^d``. A model names its parameters and their
shapes (``mu``, ``tau``, ``theta[8]``); those with a constrained support (a positive scale, a
probability, an increasing vector) get a *transform* ``x = T(u)`` from the real line onto
their support. The density the sampler sees is then the model's density on ``x`` times the
Jacobian of ``T``:

.. math:: \log \tilde p(u) = \log p(T(u)) + \log |\det \partial T / \partial u| ,

so that draws of ``u`` mapped through ``T`` follow ``p``. The transforms are the usual ones of
probabilistic programming (and those of the Stan models the reference posteriors are ported
from, so that a port has the same unconstrained scale):

==============  =======================================  ==========================================
transform       ``x = T(u)``                             ``log |dT/du|`` (per element)
==============  =======================================  ==========================================
``real``        ``u``                                    ``0``
``lower(a)``    ``a + exp(u)`` (``positive``: a = 0)     ``u``
``upper(b)``    ``b - exp(u)``                           ``u``
``interval``    ``a + (b - a) sigmoid(u)``               ``log(b - a) - softplus(u) - softplus(-u)``
``ordered``     ``x_0 = u_0, x_k = x_{k-1} + e^{u_k}``   ``sum_{k >= 1} u_k`` (a triangular map)
==============  =======================================  ==========================================

Each transform is written once against a small table of array operations (:class:`Ops`), so
that the same code runs on NumPy arrays (results, the NumPy gradient path), on JAX arrays
and on PyTorch tensors (the automatic-gradient paths). The NumPy path also has each
transform's vector-Jacobian product, for users who bring their own gradient.
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validate import ParameterError, ParameterTypeError

__all__ = [
    "Transform",
    "real",
    "positive",
    "lower",
    "upper",
    "interval",
    "ordered",
    "Ops",
    "NUMPY_OPS",
    "Parameters",
]


# ----------------------------------------------------------------------------- array operations


@dataclass(frozen=True)
class Ops:
    """The few array operations the transforms use, for one array library.

    Every function acts elementwise or along the last axis, on arrays with any leading axes.
    """

    exp: Callable
    log: Callable
    sigmoid: Callable
    softplus: Callable
    cumsum: Callable  # along the last axis
    sum: Callable  # over the last axis
    concat: Callable  # a list of arrays along the last axis


def _np_softplus(x):
    return np.logaddexp(0.0, x)


def _np_sigmoid(x):
    # exp(-softplus(-x)), accurate in both tails
    return np.exp(-np.logaddexp(0.0, -x))


NUMPY_OPS = Ops(
    exp=np.exp,
    log=np.log,
    sigmoid=_np_sigmoid,
    softplus=_np_softplus,
    cumsum=lambda x: np.cumsum(x, axis=-1),
    sum=lambda x: np.sum(x, axis=-1),
    concat=lambda xs: np.concatenate(xs, axis=-1),
)


# ----------------------------------------------------------------------------- transforms


@dataclass(frozen=True)
class Transform:
    """A map from the real line (or ``R^k``) onto a parameter's support.

    Attributes
    ----------
    kind : str
        ``"real"``, ``"lower"``, ``"upper"``, ``"interval"`` or ``"ordered"``.
    low, high : float
        The bounds, where the kind has them (NaN otherwise).
    """

    kind: str
    low: float = math.nan
    high: float = math.nan

    def __str__(self) -> str:
        if self.kind == "lower":
            return "positive" if self.low == 0.0 else f"lower({self.low:g})"
        if self.kind == "upper":
            return f"upper({self.high:g})"
        if self.kind == "interval":
            return f"interval({self.low:g}, {self.high:g})"
        return self.kind

    def forward(self, u, ops: Ops):
        """``(x, log_jac)``: the constrained values (shape of ``u``) and the log-Jacobian summed over
        the last axis of ``u`` (shape ``u.shape[:-1]``).
        """
        k = self.kind
        if k == "real":
            return u, ops.sum(u * 0.0)
        if k == "lower":
            return self.low + ops.exp(u), ops.sum(u)
        if k == "upper":
            return self.high - ops.exp(u), ops.sum(u)
        if k == "interval":
            width = self.high - self.low
            x = self.low + width * ops.sigmoid(u)
            return x, ops.sum(math.log(width) - ops.softplus(u) - ops.softplus(-u))
        # ordered: a cumulative sum of the first value and positive increments
        steps = ops.concat([u[..., :1], ops.exp(u[..., 1:])])
        return ops.cumsum(steps), ops.sum(u[..., 1:])

    def inverse(self, x: np.ndarray) -> np.ndarray:
        """``u = T^{-1}(x)`` in NumPy (NaN where ``x`` is outside the support)."""
        x = np.asarray(x, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            k = self.kind
            if k == "real":
                return x.copy()
            if k == "lower":
                return np.log(x - self.low)
            if k == "upper":
                return np.log(self.high - x)
            if k == "interval":
                p = (x - self.low) / (self.high - self.low)
                return np.log(p) - np.log1p(-p)
            return np.concatenate([x[..., :1], np.log(np.diff(x, axis=-1))], axis=-1)

    def pullback(self, u: np.ndarray, gx: np.ndarray) -> np.ndarray:
        """NumPy: ``d/du [f(T(u)) + log_jac(u)]`` given ``gx = df/dx`` at ``x = T(u)``."""
        k = self.kind
        if k == "real":
            return gx
        if k == "lower":
            return gx * np.exp(u) + 1.0
        if k == "upper":
            return -gx * np.exp(u) + 1.0
        if k == "interval":
            s = _np_sigmoid(u)
            return gx * (self.high - self.low) * s * (1.0 - s) + (1.0 - 2.0 * s)
        # ordered: x_j depends on u_k (k <= j) through exp(u_k) (k >= 1) or 1 (k = 0)
        tail = np.flip(np.cumsum(np.flip(gx, axis=-1), axis=-1), axis=-1)  # sum_{j >= k} gx_j
        out = tail * np.concatenate([np.ones_like(u[..., :1]), np.exp(u[..., 1:])], axis=-1)
        out[..., 1:] += 1.0
        return out


real = Transform("real")
positive = Transform("lower", low=0.0)
ordered = Transform("ordered")


def lower(low: float) -> Transform:
    """Support ``(low, inf)``: ``x = low + exp(u)``."""
    return Transform("lower", low=_bound("low", low))


def upper(high: float) -> Transform:
    """Support ``(-inf, high)``: ``x = high - exp(u)``."""
    return Transform("upper", high=_bound("high", high))


def interval(low: float, high: float) -> Transform:
    """Support ``(low, high)``: ``x = low + (high - low) sigmoid(u)``."""
    low, high = _bound("low", low), _bound("high", high)
    if not low < high:
        raise ParameterError("high", f"an interval needs low < high, got ({low}, {high})")
    return Transform("interval", low=low, high=high)


def _bound(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ParameterTypeError(name, f"{name} must be a finite number, got {value!r}")
    if not math.isfinite(float(value)):
        raise ParameterError(name, f"{name} must be finite, got {value}")
    return float(value)


_NAMED = {"real": real, "positive": positive, "ordered": ordered}


def _transform(name: str, value) -> Transform:
    if isinstance(value, Transform):
        return value
    if isinstance(value, str) and value in _NAMED:
        return _NAMED[value]
    raise ParameterTypeError(
        "transforms",
        f"transform of {name!r} must be 'real', 'positive', 'ordered' or one of sgsim.targets.lower(a), "
        f"upper(b), interval(a, b); got {value!r}",
    )


# ----------------------------------------------------------------------------- the layout


def _shape(name: str, value) -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (int(value),)
    if not isinstance(value, tuple) or not all(
        isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in value
    ):
        raise ParameterTypeError(
            "parameters", f"the shape of parameter {name!r} must be an int or a tuple of ints, got {value!r}"
        )
    if any(n < 1 for n in value):
        raise ParameterError("parameters", f"the shape of parameter {name!r} must have sizes >= 1, got {value}")
    return tuple(int(n) for n in value)


def _check_name(name, where: str) -> str:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ParameterError(where, f"{where} names must be Python identifiers, got {name!r}")
    if name.startswith("_") or name in _RESERVED:
        raise ParameterError(
            where, f"{where} name {name!r} is reserved (names starting with '_', and {sorted(_RESERVED)})"
        )
    return name


# names the result's groups or ArviZ use for their own axes
_RESERVED = frozenset({"chain", "draw", "particle", "dim", "dim_b", "lp"})


@dataclass(frozen=True, eq=False)
class Parameters:
    """How a flat unconstrained vector is split into named, shaped, transformed parameters.

    Parameters
    ----------
    shapes : mapping
        ``name -> shape`` (``()`` for a scalar, an int ``n`` for a vector of ``n``, a tuple),
        in the order the flat vector holds them (each row-major).
    transforms : mapping, optional
        ``name -> transform`` for the constrained parameters: ``"positive"``, ``"ordered"``,
        or :func:`lower`, :func:`upper`, :func:`interval`. Others are real.
    derived : callable, optional
        ``derived(values) -> dict``: quantities computed from the constrained values of one
        draw (e.g. a non-centred model's centred effects), stored with the draws under their
        own names; see :meth:`named`.

    Attributes
    ----------
    dim : int
        Length of the flat vector.
    """

    shapes: Mapping[str, tuple[int, ...]]
    transforms: Mapping[str, Transform] = field(default_factory=dict)
    derived: Callable | None = None
    dim: int = field(init=False)
    slices: dict = field(init=False, repr=False)

    def __post_init__(self):
        if not isinstance(self.shapes, Mapping) or not self.shapes:
            raise ParameterTypeError(
                "parameters", f"parameters must be a non-empty dict name -> shape, got {self.shapes!r}"
            )
        shapes = {_check_name(k, "parameter"): _shape(k, v) for k, v in self.shapes.items()}
        transforms = dict(self.transforms or {})
        for name in transforms:
            if name not in shapes:
                raise ParameterError(
                    "transforms",
                    f"a transform is given for {name!r}, which is not a declared parameter ({', '.join(shapes)})",
                )
        transforms = {k: _transform(k, v) for k, v in transforms.items()}
        for name, t in transforms.items():
            if t.kind == "ordered" and (len(shapes[name]) != 1 or shapes[name][0] < 2):
                raise ParameterError(
                    "transforms", f"'ordered' needs a vector of 2 or more values; {name!r} has shape {shapes[name]}"
                )
        if self.derived is not None and not callable(self.derived):
            raise ParameterTypeError(
                "derived", f"derived must be a function of the parameter values, got {self.derived!r}"
            )
        slices, start = {}, 0
        for name, shape in shapes.items():
            size = int(np.prod(shape, dtype=np.int64))
            slices[name] = slice(start, start + size)
            start += size
        object.__setattr__(self, "shapes", shapes)
        object.__setattr__(self, "transforms", transforms)
        object.__setattr__(self, "dim", start)
        object.__setattr__(self, "slices", slices)

    @property
    def names(self) -> tuple[str, ...]:
        """The parameters' names, in the flat vector's order."""
        return tuple(self.shapes)

    def describe(self) -> str:
        """One line per parameter: name, shape, transform, position in the flat vector."""
        lines = []
        for name, shape in self.shapes.items():
            sl = self.slices[name]
            t = self.transforms.get(name, real)
            lines.append(f"{name}{list(shape) if shape else ''}: {t}, theta[{sl.start}:{sl.stop}]")
        return "\n".join(lines)

    def coordinate(self, i: int) -> str:
        """The name of flat coordinate ``i`` (``"tau"``, ``"theta[3]"``, ``"beta[1, 0]"``)."""
        for name, sl in self.slices.items():
            if sl.start <= i < sl.stop:
                shape = self.shapes[name]
                if not shape:
                    return name
                index = np.unravel_index(i - sl.start, shape)
                return f"{name}[{', '.join(str(int(j)) for j in index)}]"
        raise IndexError(i)

    def constrain(self, u, ops: Ops) -> tuple[dict[str, Any], Any]:
        """``(values, log_jac)`` at flat vectors ``u`` (shape ``(..., d)``), in ``ops``' arrays.

        ``values[name]`` has shape ``u.shape[:-1] + shape``; ``log_jac`` has shape
        ``u.shape[:-1]``.
        """
        values: dict[str, Any] = {}
        log_jac = None
        lead = tuple(u.shape[:-1])
        for name, shape in self.shapes.items():
            sl = self.slices[name]
            piece = u[..., sl]
            t = self.transforms.get(name)
            if t is not None:
                piece, lj = t.forward(piece, ops)
                log_jac = lj if log_jac is None else log_jac + lj
            values[name] = piece.reshape(lead + shape)
        if log_jac is None:
            log_jac = ops.sum(u * 0.0)
        return values, log_jac

    def pullback(self, u: np.ndarray, grads: Mapping[str, np.ndarray]) -> np.ndarray:
        """NumPy: the gradient in ``u`` of ``f(T(u)) + log_jac(u)`` given ``df/dx`` per parameter."""
        u = np.asarray(u, dtype=np.float64)
        lead = u.shape[:-1]
        out = np.empty_like(u)
        for name in self.shapes:
            sl = self.slices[name]
            g = np.asarray(grads[name], dtype=np.float64).reshape(lead + (sl.stop - sl.start,))
            t = self.transforms.get(name)
            out[..., sl] = g if t is None else t.pullback(u[..., sl], g)
        return out

    def unconstrain(self, values: Mapping[str, Any]) -> np.ndarray:
        """NumPy: the flat vectors of constrained ``values`` (each ``lead + shape``)."""
        pieces = []
        lead = None
        for name, shape in self.shapes.items():
            if name not in values:
                raise ParameterError("values", f"values has no parameter {name!r}")
            x = np.asarray(values[name], dtype=np.float64)
            if shape and x.shape[x.ndim - len(shape) :] != shape:
                raise ParameterError("values", f"{name} must end in shape {shape}, got {x.shape}")
            this = x.shape[: x.ndim - len(shape)]
            lead = this if lead is None else lead
            if this != lead:
                raise ParameterError("values", f"{name} has leading shape {this}, others {lead}")
            flat = x.reshape(this + (-1,))
            t = self.transforms.get(name)
            pieces.append(flat if t is None else t.inverse(flat))
        return np.concatenate(pieces, axis=-1)

    def named(self, u: np.ndarray, derive: Callable | None = None) -> dict[str, np.ndarray]:
        """NumPy: each parameter on its constrained scale, then the derived quantities.

        ``u`` has shape ``(..., d)``; every value has shape ``u.shape[:-1] + shape``.
        ``derive`` maps the constrained values of all draws at once to the derived ones (the
        model's backend maps ``derived`` over the draws; by default it is called as is).
        """
        u = np.asarray(u, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            values, _ = self.constrain(u, NUMPY_OPS)
        values = {k: np.asarray(v, dtype=np.float64) for k, v in values.items()}
        if self.derived is not None:
            flat = {k: v.reshape((-1,) + self.shapes[k]) for k, v in values.items()}
            extra = (derive or self.derived)(flat)
            for name, value in extra.items():
                arr = np.asarray(value, dtype=np.float64)
                values[name] = arr.reshape(u.shape[:-1] + arr.shape[1:])
        return values

    def check_derived(self, names: Mapping[str, Any]) -> None:
        """Refuse derived names that clash with the parameters' or are not identifiers."""
        for name in names:
            _check_name(name, "derived")
            if name in self.shapes:
                raise ParameterError("derived", f"derived quantity {name!r} has the name of a parameter")
