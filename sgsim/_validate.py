"""Small input checks shared by the public functions. Each error names the parameter.

Every error raised here is a :class:`ParameterError` (a ``ValueError``) or a
:class:`ParameterTypeError` (a ``TypeError``) whose ``parameter`` attribute is the name of the
offending argument, so that a caller (the ``sgsim`` command) can say which flag is at fault
without reading the message.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import re

import numpy as np

__all__ = [
    "ParameterError",
    "ParameterTypeError",
    "positive_float",
    "real",
    "integer",
    "count",
    "boolean",
    "choice",
    "interval",
    "finite_array",
    "finite_values",
    "spd_matrix",
    "mask",
    "fits_in_memory",
    "memory_bytes",
    "renamed",
    "noise_covariance",
    "integer_array",
]


class ParameterError(ValueError):
    """A value outside its allowed range; ``parameter`` names the argument."""

    def __init__(self, parameter: str, message: str):
        super().__init__(message)
        self.parameter = parameter


class ParameterTypeError(TypeError):
    """An argument of the wrong type; ``parameter`` names it."""

    def __init__(self, parameter: str, message: str):
        super().__init__(message)
        self.parameter = parameter


def positive_float(name: str, value) -> float:
    """Return ``value`` as a float, requiring a finite number > 0."""
    value = real(name, value)
    if not value > 0:
        raise ParameterError(name, f"{name} must be > 0, got {value}")
    return value


def real(name: str, value, low=-np.inf, high=np.inf, *, low_open=False, high_open=False) -> float:
    """Return ``value`` as a finite float in the interval [low, high] (ends open if asked)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterTypeError(name, f"{name} must be a real number, got {type(value).__name__}")
    try:
        value = float(value)
    except OverflowError:  # an int beyond the floats
        raise ParameterError(name, f"{name} must be finite, got an integer of {int(value).bit_length()} bits") from None
    if not np.isfinite(value):
        raise ParameterError(name, f"{name} must be finite, got {value}")
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if too_low or too_high:
        lo = "(" if low_open else "["
        hi = ")" if high_open else "]"
        raise ParameterError(name, f"{name} must lie in {lo}{low}, {high}{hi}, got {value}")
    return value


def integer(name: str, value, low: int = 0, high: int | None = None) -> int:
    """Return ``value`` as an int in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterTypeError(name, f"{name} must be an int, got {type(value).__name__}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ParameterError(name, f"{name} must be an int {bound}, got {value}")
    return value


def interval(name: str, value) -> tuple[float, float]:
    """Return ``value``, a pair ``(low, high)`` of finite real numbers with ``low < high``, as floats."""
    try:
        shape = np.shape(value)
    except ValueError:  # ragged
        shape = None
    if isinstance(value, str | bytes) or shape != (2,):
        raise ParameterError(name, f"{name} must be a pair (low, high) of finite numbers, got {value!r:.60}")
    low, high = (real(name, v) for v in value)
    if not low < high:
        raise ParameterError(name, f"{name} must have low < high, got ({low}, {high})")
    return low, high


def count(name: str, value, low: int = 1) -> int:
    """Return ``value``, a count such as a batch size or a number of data, as an int ``>= low``.

    Unlike :func:`integer`, a float that holds an integer (``40.0``) is accepted, since the
    formulas that take counts treat them as reals; a fraction (``1.5``), a bool or a string is
    refused.
    """
    if isinstance(value, numbers.Real) and not isinstance(value, bool | numbers.Integral):
        x = float(value)
        if not (math.isfinite(x) and x == math.floor(x)):
            raise ParameterError(name, f"{name} must be a whole number >= {low}, got {value}")
        value = int(x)
    return integer(name, value, low=low)


def boolean(name: str, value) -> bool:
    """Return ``value`` as a bool, accepting ``bool`` and ``numpy.bool_`` only."""
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterTypeError(name, f"{name} must be a bool, got {type(value).__name__}")
    return bool(value)


def choice(name: str, value, allowed: tuple[str, ...]) -> str:
    """Return ``value`` when it is one of the strings ``allowed``, else a ParameterError listing them."""
    if not isinstance(value, str) or value not in allowed:
        raise ParameterError(name, f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    return value


def finite_array(name: str, value, shape: tuple | None = None, *, allow_bool: bool = False) -> np.ndarray:
    """Return ``value`` as a float64 array, requiring real finite entries and a given shape.

    Strings (even numeric ones such as ``"0.5"``), ``None`` and other objects that are not
    real numbers are refused, though NumPy would convert some of them; so are booleans (a
    ``True`` is not a number) unless ``allow_bool`` (for labels and masks).
    """
    if _has_complex(value):
        raise ParameterTypeError(name, f"{name} must hold real numbers, got complex values")
    if isinstance(value, str | bytes):
        raise ParameterTypeError(name, f"{name} must be an array of real numbers, got a string {value!r:.40}")
    try:
        probe = np.asarray(value)
    except (TypeError, ValueError) as exc:  # ragged nesting
        raise ParameterTypeError(name, f"{name} must be an array of real numbers (a regular nesting)") from exc
    kind = probe.dtype.kind
    if kind == "O" and all(_is_real(v) for v in probe.flat):
        kind = "f"  # Python ints beyond int64, fractions: real numbers
    if not allow_bool and (kind == "b" or _holds_bool(value)):
        raise ParameterTypeError(name, f"{name} must hold real numbers, got booleans")
    if kind not in "biuf":
        what = _KINDS.get(kind, probe.dtype.name)
        raise ParameterTypeError(name, f"{name} must be an array of real numbers, got {what}")
    try:
        arr = np.array(probe, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ParameterTypeError(name, f"{name} must be an array of real numbers") from exc
    if shape is not None and arr.shape != tuple(shape):
        raise ParameterError(name, f"{name} must have shape {tuple(shape)}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ParameterError(name, f"{name} must contain only finite values")
    return arr


_KINDS = {
    "U": "strings",
    "S": "bytes",
    "O": "objects that are not real numbers",
    "f": "fractions",
    "c": "complex numbers",
}


def _is_real(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool | np.bool_)


def mask(name: str, value, n: int) -> np.ndarray:
    """Return ``value`` as a boolean array of shape ``(n,)``: booleans, or integers 0 and 1 only.

    Strings (``"no"`` is a non-empty string, hence true to NumPy), fractions and ``None`` are
    refused rather than read as truth values.
    """
    if isinstance(value, str | bytes):
        raise ParameterTypeError(name, f"{name} must be booleans, got a string {value!r:.40}")
    try:
        probe = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise ParameterTypeError(name, f"{name} must be an array of booleans") from exc
    if probe.dtype.kind in "iu":
        if not np.all((probe == 0) | (probe == 1)):
            raise ParameterError(name, f"{name} must be booleans (or integers 0 and 1)")
    elif probe.dtype.kind != "b":
        raise ParameterTypeError(name, f"{name} must be booleans, got {_KINDS.get(probe.dtype.kind, probe.dtype.name)}")
    if probe.ndim == 0:
        probe = np.full(n, bool(probe))
    if probe.shape != (n,):
        raise ParameterError(name, f"{name} must have shape ({n},), got {probe.shape}")
    return np.ascontiguousarray(probe.astype(bool))


def memory_bytes() -> float:
    """The physical memory in bytes (infinite where the system does not say)."""
    try:
        return float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return float("inf")


def fits_in_memory(name: str, n_bytes: float, what: str, advice: str = "") -> None:
    """Refuse, before allocating, ``n_bytes`` for ``what`` beyond 80% of the physical memory.

    The error names the parameter that sets the size, the memory it would take and the
    memory this machine has.
    """
    total = memory_bytes()
    if not n_bytes <= 0.8 * total:
        raise ParameterError(
            name,
            f"{what} would need {n_bytes / 2**30:,.1f} GiB, and this machine has {total / 2**30:,.1f} GiB"
            + (f": {advice}" if advice else ""),
        )


def _has_complex(value) -> bool:
    # complex numbers anywhere in value (a NumPy array, a nested list, a scalar)
    try:
        return bool(np.iscomplexobj(value))
    except (TypeError, ValueError):  # ragged: the float conversion reports it
        return False


def _holds_bool(value) -> bool:
    # a bool inside a Python list or tuple ([True, 1.0]), which NumPy converts to 1.0 silently
    if isinstance(value, bool | np.bool_):
        return True
    if isinstance(value, list | tuple):
        return any(_holds_bool(v) for v in value)
    return False


def finite_values(name: str, *values, hint: str = "", what: str = "the target's parameters") -> None:
    """Raise unless every value derived from ``name`` is finite (extreme finite inputs can overflow)."""
    for v in values:
        if not np.all(np.isfinite(np.asarray(v, dtype=np.float64))):
            raise ParameterError(name, f"{name} makes {what} overflow or underflow to non-finite values{hint}")


def spd_matrix(name: str, value, dim: int, *, allow_singular: bool = False) -> np.ndarray:
    """Return a symmetric positive (semi)definite ``dim x dim`` matrix, or raise."""
    arr = finite_array(name, value, (dim, dim))
    if not np.allclose(arr, arr.T, rtol=1e-12, atol=1e-14):
        raise ParameterError(name, f"{name} must be symmetric")
    with np.errstate(over="ignore"):
        arr = 0.5 * (arr + arr.T)
    if not np.all(np.isfinite(arr)):
        raise ParameterError(name, f"{name} has entries too large to symmetrise (beyond 8.9e307)")
    lam_min = np.linalg.eigvalsh(arr)[0] if dim else 0.0
    scale = max(1.0, float(np.max(np.abs(arr)))) if dim else 1.0
    if allow_singular:
        if lam_min < -1e-12 * scale:
            raise ParameterError(name, f"{name} must be positive semidefinite (smallest eigenvalue {lam_min:.3g})")
    elif lam_min <= 0:
        raise ParameterError(name, f"{name} must be positive definite (smallest eigenvalue {lam_min:.3g})")
    return arr


def noise_covariance(name: str, value, dim: int) -> np.ndarray:
    """A noise covariance: ``None`` -> 0, a number ``s2 >= 0`` -> ``s2 I``, else a symmetric PSD ``(dim, dim)`` matrix.

    Strings, booleans, complex values and ragged nestings are refused by name.
    """
    if value is None:
        return np.zeros((dim, dim))
    arr = finite_array(name, value)
    if arr.ndim == 0:
        return real(name, float(arr), 0.0) * np.eye(dim)
    return spd_matrix(name, arr, dim, allow_singular=True)


@contextlib.contextmanager
def renamed(**names: str):
    """Re-raise a parameter error of an inner call under the caller's name for that argument.

    A function that passes its ``init_cov`` on as another function's ``cov`` wraps the call in
    ``with renamed(cov="init_cov"):``, so that its caller reads the name it passed. Errors
    about other parameters pass unchanged.
    """
    try:
        yield
    except (ParameterError, ParameterTypeError) as exc:
        new = names.get(exc.parameter)
        if new is None:
            raise
        message = re.sub(rf"\b{re.escape(exc.parameter)}\b", new, str(exc))
        raise type(exc)(new, message) from exc


def integer_array(name: str, value, low: int | None = None) -> np.ndarray:
    """Return ``value`` as an int64 array of whole numbers (``>= low`` if given).

    Strings, booleans and fractions (``0.5``) are refused by name, as :func:`finite_array`
    refuses them for real arrays; floats that hold integers (``2.0``) are accepted.
    """
    arr = finite_array(name, value)
    if not np.all(arr == np.floor(arr)):
        raise ParameterError(name, f"{name} must hold whole numbers")
    if np.any(np.abs(arr) >= 2.0**63):
        raise ParameterError(name, f"{name} must lie within the int64 range")
    if low is not None and np.any(arr < low):
        raise ParameterError(name, f"{name} must be >= {low}")
    return arr.astype(np.int64)
