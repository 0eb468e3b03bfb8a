"""Small input checks shared by the public functions. Each error names the parameter.

Every error raised here is a :class:`ParameterError` (a ``ValueError``) or a
:class:`ParameterTypeError` (a ``TypeError``) whose ``parameter`` attribute is the name of the
offending argument, so that a caller (the ``sgsim`` command) can say which flag is at fault
without reading the message.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "ParameterError",
    "ParameterTypeError",
    "positive_float",
    "real",
    "integer",
    "boolean",
    "finite_array",
    "finite_values",
    "spd_matrix",
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
    value = float(value)
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


def finite_array(name: str, value, shape: tuple | None = None) -> np.ndarray:
    """Return ``value`` as a float64 array, requiring real finite entries and a given shape."""
    if _has_complex(value):
        raise ParameterTypeError(name, f"{name} must hold real numbers, got complex values")
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterTypeError(name, f"{name} must be an array of real numbers") from exc
    if shape is not None and arr.shape != tuple(shape):
        raise ParameterError(name, f"{name} must have shape {tuple(shape)}, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ParameterError(name, f"{name} must contain only finite values")
    return arr


def _has_complex(value) -> bool:
    # complex numbers anywhere in value (a NumPy array, a nested list, a scalar)
    try:
        return bool(np.iscomplexobj(value))
    except (TypeError, ValueError):  # ragged: the float conversion reports it
        return False


def finite_values(name: str, *values, hint: str = "") -> None:
    """Raise unless every value derived from ``name`` is finite (extreme finite inputs can overflow)."""
    for v in values:
        if not np.all(np.isfinite(np.asarray(v, dtype=np.float64))):
            raise ParameterError(
                name, f"{name} makes the target's parameters overflow or underflow to non-finite values{hint}"
            )


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
