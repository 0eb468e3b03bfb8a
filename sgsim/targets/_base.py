"""The target record shared by every target family, and how targets are described as data."""

from __future__ import annotations

import contextvars
import functools
import hashlib
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

import numpy as np

from .. import rng as _rng
from .._jit import is_compiled, jit
from .._validate import (
    ParameterError,
    ParameterTypeError,
    finite_array,
    integer,
    noise_covariance,
    positive_float,
    spd_matrix,
)

__all__ = [
    "Target",
    "TargetSpec",
    "TargetExtras",
    "Batched",
    "FACTORIES",
    "factory",
    "build",
    "check_block_gradient",
    "check_functions",
    "check_gradient",
    "check_points",
    "from_reference",
]


class TargetExtras(TypedDict, total=False):
    """What a target family knows beyond the common fields (every key optional).

    Gaussian mixtures: ``weights``, ``variance``. Mixture of exponentials: ``rates``,
    ``weights``, ``raw_moment_z`` (``n -> E[z^n]``). Linear-Gaussian: ``precision``, ``shift``,
    ``covariance``. Data-backed targets: ``family`` (the ``Likelihood`` of ``sgsim.targets.regression``),
    ``likelihood``, ``X``, ``y``, ``n_data``, ``batch_size``, ``replace``, ``noise_factor``,
    ``prior_mean``, ``prior_precision``, ``lik_params``, ``stochastic_gradient`` (in words);
    the regression factories add ``standardised``, ``intercept``, ``prior_scale``, ``feature_mean``,
    ``feature_scale`` and, when built from a shipped data set, ``dataset``; linear regression
    adds ``noise_precision`` and its exact posterior's ``precision``, ``shift`` and
    ``covariance`` (those of the linear-Gaussian target it equals); softmax regression adds
    ``n_classes``. Any target may declare ``curvature_bound`` (a bound on the largest
    eigenvalue of ``U``'s Hessian, :meth:`Target.curvature_bound`) and ``scale``, a pair
    ``(location, spread)`` saying where its mass lies (:meth:`Target.divergence_bound`).
    """

    weights: np.ndarray
    variance: np.ndarray
    rates: np.ndarray
    raw_moment_z: Callable[[int], float]
    precision: np.ndarray
    shift: np.ndarray
    covariance: np.ndarray
    family: Any
    likelihood: str
    X: np.ndarray
    y: np.ndarray
    n_data: int
    batch_size: int
    replace: bool
    noise_factor: float
    prior_mean: np.ndarray
    prior_precision: np.ndarray
    lik_params: np.ndarray
    stochastic_gradient: str
    standardised: bool
    intercept: bool
    prior_scale: float
    feature_mean: np.ndarray
    feature_scale: np.ndarray
    dataset: str
    noise_precision: float
    n_classes: int
    curvature_bound: float
    scale: tuple


@dataclass(frozen=True)
class TargetSpec:
    """How a target was built: a registered factory, its arguments, and what was applied after.

    Attributes
    ----------
    factory : str
        A key of :data:`~sgsim.targets.FACTORIES` (``"mixture_25"``, ``"logistic_regression"``, ...).
    kwargs : dict
        The factory's arguments, all of them (defaults filled in); arrays stay arrays.
    modifiers : tuple
        ``(method name, kwargs)`` pairs applied in order (``("with_gradient_noise", {"cov": V})``).
    """

    factory: str
    kwargs: dict
    modifiers: tuple = ()


@jit(cache=False)
def _log_density_rows(log_density, params, x, out):
    for n in range(x.shape[0]):
        out[n] = log_density(x[n], params)


@jit(cache=False)
def _grad_u_rows(grad_u, params, x, out):
    for n in range(x.shape[0]):
        grad_u(x[n], params, out[n])


@jit(cache=False)
def _stochastic_grad_u_draws(stochastic_grad_u, params, theta, state, work, out):
    for r in range(out.shape[0]):
        stochastic_grad_u(theta, params, out[r], state, work)


# the default divergence bound (Target.divergence_bound): SCALE_SDS of the target's known spreads
# beyond its known locations, at least BOX_FACTOR times the distance from the box to them; FALLBACK_FACTOR
# times the box's reach (at least 1) for a target that knows nothing of its scale
_SCALE_SDS = 20.0
_BOX_FACTOR = 4.0
_FALLBACK_FACTOR = 1e4

_NO_WORKSPACE = np.zeros(0, dtype=np.int64)
_NO_WORKSPACE.flags.writeable = False

# the shipped per-point gradients and their block forms (Target.grad_u_block), filled by the
# modules that define them: a target that pairs them hashes as before block gradients
# existed, so that results written then still replay; any other pairing is refused or hashed
_BLOCK_OF: dict[Callable, Callable] = {}


def _ship_block(grad_u: Callable, grad_u_block: Callable) -> None:
    """Declare ``grad_u_block`` the block form of the shipped ``grad_u``."""
    _BLOCK_OF[grad_u] = grad_u_block


# the shipped block gradients' one-lane forms, for runs of a few chains a thread: (function, size of
# its working row from the target's params)
_LANE_OF: dict[Callable, tuple[Callable, Callable]] = {}


def _ship_lane(grad_u_block: Callable, lane: Callable, work: Callable) -> None:
    """Declare ``lane(x, params, out, work)`` the one-point form of the shipped ``grad_u_block``.

    It gives each point the bits ``grad_u_block`` gives its lane, and is a plain statement
    sequence (no early return) that a loop can have written into its step; ``work(params)`` is
    the length of the working row it takes.
    """
    _LANE_OF[grad_u_block] = (lane, work)


def lane_form(grad_u_block: Callable | None) -> tuple[Callable, Callable] | None:
    """The one-point form of a shipped block gradient and its working row's size, or None."""
    return None if grad_u_block is None else _LANE_OF.get(grad_u_block)


@dataclass(frozen=True, eq=False)
class Batched:
    """A target's functions of all chains at once, for targets whose gradient is not compiled.

    Log densities differentiated by JAX or PyTorch, or a vectorised NumPy gradient
    (:func:`sgsim.targets.model`), are evaluated for every chain (or particle) in one call per
    step: the run driver advances the chains' steps in a compiled loop between the calls.

    Attributes
    ----------
    grad_u : callable
        ``grad_u(theta, batch) -> ndarray (C, d)``: the gradient of ``U`` at each row of
        ``theta`` (float64, shape ``(C, d)``). ``batch`` is None for the exact gradient, or an
        int64 array ``(C, n)`` of each chain's minibatch (indices into the data), for the
        minibatch estimate ``grad U_prior + (N / n) sum_{i in batch} grad U_i``.
    log_density : callable
        ``log_density(theta) -> ndarray (C,)``, the log density (up to a constant).
    n_data : int
        ``N``, the number of examples of the data likelihood (0: no data likelihood).
    batch_size : int
        ``n``, the minibatch of each step (0: the exact gradient at every step).
    replace : bool
        Whether minibatches are drawn with replacement.
    backend : str
        ``"jax"``, ``"torch"`` or ``"numpy"``.
    named : callable or None
        ``named(u) -> dict``: the parameters and derived quantities of draws ``u``
        (shape ``(..., d)``) by name, on their constrained scale.
    key : tuple
        What identifies the functions and their data, for :meth:`Target.fingerprint`.
    example_gradients : callable or None
        With a data likelihood: ``example_gradients(theta) -> ndarray (N, d)``, the gradient
        in ``theta`` (shape ``(d,)``) of each example's log likelihood, on the sampler's scale
        (for the minibatch noise covariance,
        :func:`sgsim.targets.regression.minibatch_gradient_covariance`).
    """

    grad_u: Callable
    log_density: Callable
    n_data: int = 0
    batch_size: int = 0
    replace: bool = False
    backend: str = "numpy"
    named: Callable | None = None
    key: tuple = ()
    example_gradients: Callable | None = None

    @property
    def stochastic(self) -> bool:
        """Whether each step draws a minibatch."""
        return self.batch_size > 0


@dataclass(frozen=True, eq=False)
class Target:
    """A target density ``p(theta) ∝ exp(-U(theta))`` with what is known about it exactly.

    Attributes
    ----------
    name : str
        Short name, as used by :func:`sgsim.targets.get`.
    dim : int
        Dimension ``d`` of ``theta``.
    grad_u : numba-compiled function
        ``grad_u(theta, params, out)`` writes the gradient of ``U`` at ``theta`` (shape
        ``(d,)``) into ``out``. It must not allocate.
    log_density_fn : numba-compiled function
        ``log_density_fn(theta, params) -> float``, the log density (normalised where the
        normaliser is known; ``-U`` up to a constant otherwise).
    params : tuple
        The arrays and numbers that ``grad_u`` and ``log_density_fn`` read.
    grad_noise_cov : ndarray, shape (d, d)
        Covariance ``V`` of the additive Gaussian noise that emulates a stochastic gradient,
        ``grad_u(theta) + zeta`` with ``zeta ~ N(0, V)``; zero for exact gradients (the
        default).
    init_low, init_high : ndarray, shape (d,)
        Box from which initial points are drawn uniformly when none are given; ``[-1, 1]^d``
        by default.
    mean, second_moment : ndarray or None
        Exact ``E[theta]`` and ``E[theta theta^T]`` where known.
    mode_centres : ndarray or None
        Centres of the modes, shape ``(n_modes, d)``, for mode-coverage metrics.
    mode_sd : ndarray or None
        Standard deviation of each mode (isotropic), shape ``(n_modes,)``.
    exact_sampler : callable or None
        ``exact_sampler(rng, n) -> ndarray (n, d)`` of exact iid draws (see :meth:`exact_draws`).
    extras : TargetExtras
        Family-specific exact quantities (e.g. raw moments of ``z`` for the mixture of
        exponentials).
    stochastic_grad_u : numba-compiled function or None
        A genuinely stochastic gradient (e.g. a minibatch gradient),
        ``stochastic_grad_u(theta, params, out, rng, work)``: writes an unbiased estimate of
        ``grad U(theta)`` into ``out``, drawing its random numbers from ``rng`` (the chain's
        stream state, drawn from with ``sgsim.rng``'s compiled functions such as
        ``sgsim.rng.integers(rng, 0, n)``) and keeping per-chain state in ``work``. It must not
        allocate.
        When set, the samplers call it instead of ``grad_u`` at every step; ``grad_u`` stays
        the exact gradient. None (the default) for targets with exact gradients.
    workspace : ndarray of int64, shape (w,)
        Initial value of the per-chain buffer ``work`` (each chain gets its own copy, which
        persists from step to step, e.g. the permutation of the data shuffled in place by
        sampling without replacement). Empty for exact gradients.
    spec : TargetSpec or None
        How the target was built, so that a run can be replayed from its result file; set by
        every constructor of :mod:`sgsim.targets`, None for a target built by hand.
    batched : Batched or None
        For a target whose gradient is computed for all chains at once (a log density with
        automatic gradients, :func:`sgsim.targets.model`); ``grad_u`` and ``log_density_fn``
        are then None.
    parameters : Parameters or None
        The names, shapes and transforms of the parameters that ``theta`` holds
        (:class:`sgsim.targets.Parameters`): a run's result then holds each by its name, on
        its constrained scale.
    grad_u_block : numba-compiled function or None
        ``grad_u(theta, params, out)`` for ``W`` points at once, written so that a run can
        advance ``W`` chains together: ``grad_u_block(theta, params, out, scratch)`` with
        ``theta`` and ``out`` C-contiguous float64 arrays of shape ``(d, W)`` (column ``l``
        is lane ``l``'s point: coordinates outer, lanes inner), ``scratch`` a float64 array
        of shape ``(8, S)``, ``S >= W``, it may overwrite (the samplers give ``S >= 256``), and
        the same ``params``. It writes ``grad U``
        of every column into ``out``, allocates nothing, and keeps the lanes as the
        innermost, branch-free loop, so that the compiler turns it into SIMD instructions.
        It gives ``grad_u``'s values to rounding (the shipped ones are tested to 1e-14 of
        the gradient's scale), at any finite point (unused lanes hold 0). Like ``grad_u``
        it is the exact gradient: ``stochastic_grad_u`` and ``grad_noise_cov`` apply to it as
        they do to ``grad_u``. The Gaussian mixtures, the linear-Gaussian targets and the
        mixture of exponentials set it; None (the default) where there is none, and then
        the samplers call ``grad_u`` point by point.
    """

    name: str
    dim: int
    grad_u: Callable | None
    log_density_fn: Callable | None
    params: tuple
    grad_noise_cov: np.ndarray = None  # type: ignore[assignment]  # None: zeros, set in __post_init__
    init_low: np.ndarray = None  # type: ignore[assignment]  # None: -1 in every coordinate
    init_high: np.ndarray = None  # type: ignore[assignment]  # None: +1 in every coordinate
    mean: np.ndarray | None = None
    second_moment: np.ndarray | None = None
    mode_centres: np.ndarray | None = None
    mode_sd: np.ndarray | None = None
    exact_sampler: Callable | None = None
    extras: TargetExtras = field(default_factory=lambda: TargetExtras())
    stochastic_grad_u: Callable | None = None
    workspace: np.ndarray = field(default_factory=lambda: _NO_WORKSPACE)
    spec: TargetSpec | None = None
    batched: Batched | None = None
    parameters: Any = None
    grad_u_block: Callable | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ParameterTypeError("name", f"name must be a non-empty string, got {self.name!r}")
        d = integer("dim", self.dim, low=1)
        object.__setattr__(self, "dim", d)
        if self.parameters is not None and getattr(self.parameters, "dim", None) != d:
            raise ParameterError(
                "parameters", f"the parameters hold {getattr(self.parameters, 'dim', '?')} values, and dim = {d}"
            )
        for attr in ("grad_u", "log_density_fn", "stochastic_grad_u"):
            value = getattr(self, attr)
            if value is None and (attr == "stochastic_grad_u" or self.batched is not None):
                continue
            if not is_compiled(value):
                raise ParameterTypeError(
                    attr,
                    f"Target.{attr} must be a compiled function (decorate it with sgsim.jit); "
                    f"got a plain {type(value).__name__}",
                )
        block = self.grad_u_block
        if block is not None:
            if self.grad_u is None:
                raise ParameterError(
                    "grad_u_block", "grad_u_block is the block form of grad_u: a target without grad_u has none"
                )
            if not is_compiled(block):
                raise ParameterTypeError(
                    "grad_u_block",
                    "Target.grad_u_block must be a compiled function (decorate it with sgsim.jit); "
                    f"got a plain {type(block).__name__}",
                )
            shipped = [g for g, b in _BLOCK_OF.items() if b is block]
            if shipped and self.grad_u not in shipped:
                raise ParameterError(
                    "grad_u_block",
                    f"grad_u_block is the block form of {_qualname(shipped[0])}, not of this target's grad_u "
                    f"({_qualname(self.grad_u)}): a target whose gradient changes must set grad_u_block=None "
                    "(or its own block form of the new gradient)",
                )
        if not isinstance(self.params, tuple):
            raise ParameterTypeError("params", f"params must be a tuple, got {type(self.params).__name__}")
        cov = np.zeros((d, d)) if self.grad_noise_cov is None else self.grad_noise_cov
        object.__setattr__(self, "grad_noise_cov", spd_matrix("grad_noise_cov", cov, d, allow_singular=True))
        for attr, default in (("init_low", -1.0), ("init_high", 1.0)):
            value = getattr(self, attr)
            value = np.full(d, default) if value is None else finite_array(attr, value)
            if value.shape != (d,):
                if value.ndim != 0:
                    raise ParameterError(
                        attr, f"{attr} must be a number or have shape ({d},) (dim = {d}), got {value.shape}"
                    )
                value = np.full(d, float(value))
            object.__setattr__(self, attr, value)
        if not np.all(self.init_low < self.init_high):
            raise ParameterError("init_high", "init_high must exceed init_low in every coordinate")
        for attr, shape in (("mean", (d,)), ("second_moment", (d, d))):
            if getattr(self, attr) is not None:
                object.__setattr__(self, attr, finite_array(attr, getattr(self, attr), shape))
        if self.mode_centres is not None:
            centres = finite_array("mode_centres", self.mode_centres)
            if centres.ndim != 2 or centres.shape[1] != d:
                raise ParameterError(
                    "mode_centres", f"mode_centres must have shape (n_modes, {d}), got {centres.shape}"
                )
            object.__setattr__(self, "mode_centres", centres)
            if self.mode_sd is not None:
                object.__setattr__(self, "mode_sd", finite_array("mode_sd", self.mode_sd, (centres.shape[0],)))
        work = self.workspace
        if not (isinstance(work, np.ndarray) and work.dtype == np.int64 and work.ndim == 1):
            raise ParameterTypeError("workspace", f"Target.workspace must be a 1-D int64 array, got {work!r:.60}")
        if work.flags.writeable:
            # the template is never run on: chains get copies (new_workspace)
            work = work.copy()
            work.flags.writeable = False
            object.__setattr__(self, "workspace", work)
        if not _TRUSTED.get() and self.batched is None:
            check_functions(self)

    def named(self, theta) -> dict[str, np.ndarray]:
        """The parameters (and derived quantities) at ``theta`` (shape ``(..., d)``) by name.

        Each on its constrained scale, of shape ``theta.shape[:-1] + shape``; a target that
        declares no names gives ``{"theta": theta}``.
        """
        theta = np.asarray(theta, dtype=np.float64)
        if self.batched is not None and self.batched.named is not None:
            return self.batched.named(theta)
        if self.parameters is not None:
            return self.parameters.named(theta)
        return {"theta": theta}

    def new_workspace(self) -> np.ndarray:
        """A fresh copy of ``workspace``: the per-chain buffer of ``stochastic_grad_u``."""
        return self.workspace.copy()

    def check_workspace(self, work) -> np.ndarray:
        """Return ``work`` if it can serve as this target's per-chain buffer; raise otherwise.

        The compiled gradient indexes it without bounds checks, so its type and shape are
        checked here, once per call from Python.
        """
        ok = (
            isinstance(work, np.ndarray)
            and work.dtype == np.int64
            and work.shape == self.workspace.shape
            and work.flags.c_contiguous
            and work.flags.writeable
        )
        if not ok:
            raise ParameterError(
                "work",
                f"work must be a writeable contiguous int64 array of shape {self.workspace.shape} "
                "(use Target.new_workspace())",
            )
        return work

    def with_gradient_noise(self, cov) -> Target:
        """Return a copy whose stochastic gradient carries additive noise ``N(0, cov)``.

        Parameters
        ----------
        cov : float or array_like
            A non-negative scalar ``s2`` (meaning ``s2 * I``) or a symmetric positive
            semidefinite ``(d, d)`` matrix.
        """
        if cov is None:
            raise ParameterTypeError("cov", "cov must be a number >= 0 or a (d, d) matrix, got None")
        cov = noise_covariance("cov", cov, self.dim)
        return replace(self, grad_noise_cov=cov, spec=self._modified("with_gradient_noise", cov=cov))

    def with_init_box(self, low, high) -> Target:
        """Return a copy whose default initial points are uniform on the box ``[low, high]``.

        Parameters
        ----------
        low, high : float or array_like, shape (d,)
            Bounds, finite, with ``low < high`` in every coordinate.
        """
        lo = np.broadcast_to(np.asarray(low, dtype=np.float64), (self.dim,)).copy()
        hi = np.broadcast_to(np.asarray(high, dtype=np.float64), (self.dim,)).copy()
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo < hi)):
            raise ParameterError("init_box", "init box bounds must be finite with low < high in every coordinate")
        return replace(self, init_low=lo, init_high=hi, spec=self._modified("with_init_box", low=lo, high=hi))

    def curvature_bound(self) -> float | None:
        r"""An upper bound ``L`` on the largest eigenvalue of ``U``'s Hessian over every ``theta``, or None.

        The samplers' stability limits are read from it (``step_size * L < 2`` for SGLD,
        :ref:`guide-stability`). What is known, by family:

        - declared: ``extras["curvature_bound"]`` (a number > 0), for a target of one's own;
        - Gaussian and quadratic targets (``extras["precision"]``: ``linear_gaussian``,
          ``standard_gaussian``, ``ou_quadratic``, ``linear_regression``): the Hessian's largest
          eigenvalue, exactly;
        - Gaussian mixtures (isotropic components of variance ``s_k^2``): ``max_k 1 / s_k^2``.
          ``U``'s Hessian is ``sum_k r_k P_k - Cov_r[P_k (theta - mu_k)]`` (``r`` the
          responsibilities at ``theta``, ``P_k`` the precisions), the mean of the ``P_k`` less a
          covariance, so it never exceeds ``max_k lambda_max(P_k)``; at a mode centre far from
          the others it is that mode's ``P_k``, so the bound is reached;
        - logistic regression: ``lambda_max(X^T X / 4 + Lambda)`` (``Lambda`` the prior precision),
          the Hessian at ``theta = 0``, where every ``p_i (1 - p_i)`` takes its largest value 1/4;
        - softmax regression: ``lambda_max(X^T X) / 2 + max Lambda``. Each example's Hessian in
          the logits, ``diag(p) - p p^T``, is below ``(I - 1 1^T / K) / 2`` (Böhning (1992),
          "Multinomial logistic regression algorithm", Lemma), whose largest eigenvalue is 1/2;
          for two classes this is the logistic bound, for more it is approached only where the
          probabilities of two classes tend to 1/2 and the others to 0;
        - None otherwise: the mixture of exponentials in ``log z`` (its curvature grows as
          ``e^y``), the posteriordb ports, a data target with a likelihood of one's own, a
          log density with automatic gradients.

        The bound is on ``U`` itself. A minibatch gradient ``(N / n) sum_B grad U_i`` has, on
        average over minibatches, this Hessian; a limit from it is one of the mean recursion.
        """
        declared = self.extras.get("curvature_bound") if self.extras else None
        if declared is not None:
            return positive_float("curvature_bound", declared)
        ex = self.extras or {}
        if ex.get("precision") is not None:
            prec = np.asarray(ex["precision"], float)
            return float(np.linalg.eigvalsh(prec)[-1]) if prec.ndim == 2 else float(np.max(prec))
        if ex.get("variance") is not None and ex.get("weights") is not None:
            return float(1.0 / np.min(np.asarray(ex["variance"], float)))
        likelihood = ex.get("likelihood")
        if likelihood in ("logistic", "softmax") and ex.get("X") is not None:
            X = np.asarray(ex["X"], float)
            prior = np.broadcast_to(np.asarray(ex.get("prior_precision", 0.0), float), (self.dim,))
            if likelihood == "logistic":
                return float(np.linalg.eigvalsh(X.T @ X / 4.0 + np.diag(prior))[-1])
            return float(np.linalg.eigvalsh(X.T @ X)[-1] / 2.0 + np.max(prior))
        return None

    def scale_sources(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The locations and spreads the target knows, as ``(location, spread)`` pairs of shape ``(d,)``.

        In order: a declared ``extras["scale"] = (location, spread)`` (numbers or ``(d,)``
        arrays, spreads > 0: a target of one's own says where its mass is and how wide it is);
        the mode centres with their standard deviations; the exact mean with the exact marginal
        standard deviations; for the mixture of exponentials (in ``y = log z``) each component's
        mean ``-gamma_E - log lambda_i`` with its standard deviation ``pi / sqrt(6)``; a Gaussian
        prior's mean with its standard deviations (the regression targets). Empty when nothing is
        known (:meth:`divergence_bound` then falls back).
        """
        loc, sd = self._scale_arrays()
        return [(m.copy(), v.copy()) for m, v in zip(loc, sd, strict=True)]

    def _scale_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`scale_sources` as two arrays of shape ``(n, d)``, in the same order (one
        concatenation, not a pair of arrays per mode: a short run's set-up reads it).
        """
        d = self.dim
        locs: list[np.ndarray] = []
        sds: list[np.ndarray] = []
        ex = self.extras or {}

        def add(loc, sd):
            loc = np.broadcast_to(np.asarray(loc, float), (d,))
            sd = np.broadcast_to(np.asarray(sd, float), (d,))
            if np.all(np.isfinite(loc)) and np.all(np.isfinite(sd)):
                locs.append(loc[None])
                sds.append(sd[None])

        declared = ex.get("scale")
        if declared is not None:
            if not (isinstance(declared, tuple | list) and len(declared) == 2):
                raise ParameterError("scale", f"extras['scale'] must be (location, spread), got {declared!r:.80}")
            loc = finite_array("scale", np.broadcast_to(np.asarray(declared[0], float), (d,)))
            sd = finite_array("scale", np.broadcast_to(np.asarray(declared[1], float), (d,)))
            if np.any(sd <= 0):
                raise ParameterError("scale", "extras['scale']: every spread must be > 0")
            add(loc, sd)
        if self.mode_centres is not None and self.mode_sd is not None:
            # every mode at once (a loop of add() over 25 modes took most of a short run's set-up)
            centres = np.asarray(self.mode_centres, float).reshape(-1, d)
            spreads = np.asarray(self.mode_sd, float)
            spreads = np.broadcast_to(spreads.reshape(centres.shape[0], -1), centres.shape)
            finite = np.all(np.isfinite(centres), axis=1) & np.all(np.isfinite(spreads), axis=1)
            locs.append(centres[finite])
            sds.append(spreads[finite])
        if self.mean is not None and self.second_moment is not None:
            var = np.diag(np.asarray(self.second_moment, float)) - np.asarray(self.mean, float) ** 2
            add(self.mean, np.sqrt(np.clip(var, 0.0, None)))
        if ex.get("rates") is not None and d == 1:
            for rate in np.asarray(ex["rates"], float):
                add(-np.euler_gamma - np.log(rate), np.pi / np.sqrt(6.0))
        if ex.get("prior_precision") is not None:
            prec = np.asarray(ex["prior_precision"], float)
            diag = np.diag(prec) if prec.ndim == 2 else prec
            if np.all(diag > 0):
                add(ex.get("prior_mean", 0.0), 1.0 / np.sqrt(diag))
        if not locs:
            return np.empty((0, d)), np.empty((0, d))
        return np.concatenate(locs), np.concatenate(sds)

    def divergence_bound(self, temperature: float = 1.0) -> float:
        r"""The default bound ``B`` of a healthy chain: a chain with ``max_i |theta_i| > B`` has diverged.

        On the target's own scale: with the known locations ``m`` and spreads ``s``
        (:meth:`scale_sources`: a declared scale, the modes, the exact moments, a prior),

        ``B = max_{m, s} max_i |m_i| + max(20 sqrt(max(1, T)) s_i, 4 (b_i + |m_i|))``,

        ``b_i`` the largest magnitude of the initial box in coordinate ``i`` and ``T`` the run's
        largest temperature. Why a healthy chain never crosses it: 20 standard deviations of the target
        (of its widest known part: a mixture's overall spread, a regression's prior) are still
        10 of a chain whose discretisation doubles its spread (SGLD at three quarters of its
        stability limit); a Gaussian tail puts ``1e-23`` of its mass beyond 10 standard
        deviations, an exponential one ``e^{-20}``. A chain drawn from the box starts within
        ``b_i + |m_i|`` of the mass, and its transient may swing past the mass (SGHMC's damped
        oscillation): by 1.1 times that distance at most in the shipped targets' healthy runs
        (cSGHMC from the box on posteriordb's mesquite, whose mass lies 80 standard deviations
        outside it), which ``4 (b_i + |m_i|)`` covers with a margin. What it catches: unstable
        runs that wander 18 to 60 standard deviations out (SGLD beyond its limit on a Gaussian,
        cSGHMC's excursions on ``mixture_25`` at step 0.1), which a bound at ten times the initial
        box's reach would let through.

        A target that knows nothing of its scale gets ``B = 10^4 max(1, R_box)``: no false
        alarm on a heavy tail or on mass far from the box (Student-t with 3 degrees of freedom
        puts ``2e-12`` of its mass beyond ``10^4`` scales), while an unstable step, which grows
        geometrically, still crosses it within tens of steps. Declare ``extras["scale"]`` to get
        the tighter rule; for a heavy-tailed target declare a spread wide enough for its tail.
        """
        temperature = float(temperature)
        if not (np.isfinite(temperature) and temperature >= 0):
            raise ParameterError("temperature", f"temperature must be finite and >= 0, got {temperature}")
        box = np.maximum(np.abs(self.init_low), np.abs(self.init_high))
        loc, sd = self._scale_arrays()
        if loc.shape[0] == 0:
            return _FALLBACK_FACTOR * max(1.0, float(np.max(box)))
        k = _SCALE_SDS * np.sqrt(max(1.0, temperature))
        loc = np.abs(loc)
        return float(np.max(loc + np.maximum(k * sd, _BOX_FACTOR * (box + loc))))

    def _modified(self, method: str, **kwargs) -> TargetSpec | None:
        if self.spec is None:
            return None
        return replace(self.spec, modifiers=self.spec.modifiers + ((method, kwargs),))

    def fingerprint(self) -> str:
        """A hash of everything that drives sampling: functions, parameters, noise, init box.

        A run records it, so that a replay can tell whether the rebuilt target is the one
        that was sampled (a target changed after construction, e.g. with
        ``dataclasses.replace``, no longer matches its spec).
        """
        h = hashlib.sha256()

        def feed(x):
            if isinstance(x, tuple):
                for item in x:
                    feed(item)
            elif isinstance(x, np.ndarray):
                h.update(str((x.dtype.str, x.shape)).encode())
                h.update(np.ascontiguousarray(x).tobytes())
            else:
                h.update(repr(x).encode())

        for fn in (self.grad_u, self.log_density_fn, self.stochastic_grad_u):
            feed(getattr(getattr(fn, "py_func", fn), "__qualname__", repr(fn)))
        block = self.grad_u_block
        if block is not None and (self.grad_u is None or _BLOCK_OF.get(self.grad_u) is not block):
            feed(("grad_u_block", _qualname(block)))
        if self.batched is not None:
            b = self.batched
            feed((b.backend, b.n_data, b.batch_size, b.replace, b.key))
        feed((self.dim, self.params, self.grad_noise_cov, self.init_low, self.init_high, self.workspace))
        return h.hexdigest()[:32]

    def log_density(self, x) -> np.ndarray:
        """Log density at each row of ``x`` (shape ``(n, d)`` or ``(d,)``)."""
        x = np.asarray(x, dtype=np.float64)
        flat = np.ascontiguousarray(x.reshape(-1, self.dim))
        if self.batched is not None:
            out = np.asarray(self.batched.log_density(flat), dtype=np.float64)
            return out.reshape(x.shape[:-1]) if x.ndim > 1 else out[0]
        out = np.empty(flat.shape[0])
        _log_density_rows(self.log_density_fn, self.params, flat, out)
        return out.reshape(x.shape[:-1]) if x.ndim > 1 else out[0]

    def gradient(self, x) -> np.ndarray:
        """Exact gradient of ``U`` at each row of ``x`` (shape ``(n, d)`` or ``(d,)``)."""
        x = np.asarray(x, dtype=np.float64)
        flat = np.ascontiguousarray(x.reshape(-1, self.dim))
        if self.batched is not None:
            return np.asarray(self.batched.grad_u(flat, None), dtype=np.float64).reshape(x.shape)
        out = np.empty_like(flat)
        _grad_u_rows(self.grad_u, self.params, flat, out)
        return out.reshape(x.shape)

    def stochastic_gradient(self, theta, rng: np.random.Generator, n_draws: int, work=None) -> np.ndarray:
        """``n_draws`` successive draws of ``stochastic_grad_u`` at one point ``theta``.

        Parameters
        ----------
        theta : array_like, shape (d,)
            The point.
        rng : numpy.random.Generator
            A PCG64 generator that drives the draws, advanced in place exactly as a chain's
            stream would be.
        n_draws : int
            Number of draws.
        work : ndarray, optional
            The per-chain buffer, updated in place; a fresh :meth:`new_workspace` if omitted.

        Returns
        -------
        ndarray, shape (n_draws, d)
            The draws, without the emulated additive noise of ``grad_noise_cov``.
        """
        if self.stochastic_grad_u is None:
            raise NotImplementedError(f"target {self.name!r} has an exact gradient only (no stochastic_grad_u)")
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        if theta.shape != (self.dim,):
            raise ParameterError("theta", f"theta must have shape ({self.dim},), got {theta.shape}")
        if not isinstance(rng, np.random.Generator) or not isinstance(rng.bit_generator, np.random.PCG64):
            raise ParameterTypeError(
                "rng", f"rng must be a numpy.random.Generator with a PCG64 bit generator, got {rng!r:.80}"
            )
        work = self.new_workspace() if work is None else self.check_workspace(work)
        out = np.empty((int(n_draws), self.dim))
        state = _rng.state_of(rng)
        _stochastic_grad_u_draws(self.stochastic_grad_u, self.params, theta, state, work, out)
        _rng.set_state(rng, state)
        return out

    def exact_draws(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Exact iid draws from the target, shape ``(n, d)``; raises if no exact sampler is known."""
        if self.exact_sampler is None:
            raise NotImplementedError(f"target {self.name!r} has no exact sampler")
        return self.exact_sampler(rng, int(n))


# ----------------------------------------------------------------------------- targets as data

#: The registered target constructors, by name: what a :class:`TargetSpec` can name.
FACTORIES: dict[str, Callable[..., Target]] = {}


_TRUSTED: contextvars.ContextVar[bool] = contextvars.ContextVar("sgsim_trusted_target", default=False)
_CHECK_SEED = 20_201  # the points at which a hand-built target's functions are checked
_CHECK_POINTS = 3
_CHECK_COORDS = 8


def _qualname(fn) -> str:
    return str(getattr(getattr(fn, "py_func", fn), "__qualname__", repr(fn)))


def _typing_error(name: str, signature: str, target: Target, exc: Exception) -> ParameterTypeError:
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return ParameterTypeError(
        name,
        f"{name} must accept {signature} with theta and out float64 arrays of shape ({target.dim},) and this "
        f"target's params ({len(target.params)} items); calling it failed: {first[:300]}",
    )


def check_points(target: Target, n: int = _CHECK_POINTS, seed: int = _CHECK_SEED) -> np.ndarray:
    """Points at which a target's gradient is checked: in its initial box and where its mass is.

    ``n`` points uniform in the initial box; ``n`` more uniform in the box widened to four times
    its half-width about its centre; and, where the target declares where its mass lies,
    ``n`` points at three of its standard deviations from its mean (``mean`` and
    ``second_moment``), from random mode centres at three mode standard deviations, or from a
    Gaussian prior at three prior standard deviations. A gradient that is wrong only outside
    the initial box is seen at those.
    """
    d = target.dim
    rng = np.random.default_rng(seed)
    lo, hi = target.init_low, target.init_high
    centre, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
    points = [rng.uniform(lo, hi, size=(n, d)), centre + 4.0 * half * rng.uniform(-1.0, 1.0, size=(n, d))]
    if target.mean is not None and target.second_moment is not None:
        sd = np.sqrt(np.clip(np.diag(target.second_moment) - target.mean**2, 0.0, None))
        points.append(target.mean + 3.0 * sd * rng.choice([-1.0, 1.0], size=(n, d)) * rng.uniform(0.5, 1.0, (n, d)))
    elif target.mode_centres is not None:
        k = target.mode_centres.shape[0]
        sd = np.ones(k) if target.mode_sd is None else target.mode_sd
        which = rng.integers(0, k, size=n)
        points.append(target.mode_centres[which] + 3.0 * sd[which, None] * rng.uniform(-1.0, 1.0, size=(n, d)))
    elif target.extras.get("prior_precision") is not None:
        prec = np.asarray(target.extras["prior_precision"], float)
        sd = 1.0 / np.sqrt(np.diag(prec) if prec.ndim == 2 else prec)
        loc = np.broadcast_to(np.asarray(target.extras.get("prior_mean", 0.0), float), (d,))
        points.append(loc + 3.0 * sd * rng.uniform(-1.0, 1.0, size=(n, d)))
    out = np.concatenate(points)
    return out[np.all(np.isfinite(out), axis=1)]


def _coordinate(target: Target, i: int) -> str:
    return target.parameters.coordinate(int(i)) if target.parameters is not None else f"theta[{int(i)}]"


def check_gradient(target: Target, points=None, *, coords: int = _CHECK_COORDS, seed: int = _CHECK_SEED) -> None:
    """Check the target's gradient against finite differences of its log density at ``points``.

    Parameters
    ----------
    target : Target
        A compiled target, or one with batched functions (:func:`sgsim.targets.model`).
    points : array_like, shape (n, d), optional
        Where to look (e.g. kept draws of a run); :func:`check_points` by default.
    coords : int
        Coordinates checked per point (chosen at random with ``seed``; all when ``d`` is
        smaller).

    Raises
    ------
    ParameterError
        Naming the function, the coordinate (by the parameter's name where the target
        declares names) and the point. The tolerance is ten times the difference quotient's
        own error, estimated from the quotients at steps ``h`` and ``h/2`` (their difference
        is three times the truncation error of the second) plus its rounding error
        ``8 eps (|U| + 1) / h``, plus ``1e-7 (1 + |g|)``: a correct gradient passes, a sign
        error, a wrong factor or a gradient of ``log p`` instead of ``U = -log p`` does not.
    """
    d = target.dim
    pts = check_points(target) if points is None else np.asarray(points, dtype=np.float64).reshape(-1, d)
    rng = np.random.default_rng(seed)
    eps = np.finfo(np.float64).eps
    what = "grad_u" if target.batched is None else "the gradient"
    for x in pts:
        if not np.all(np.isfinite(x)):
            continue
        out = np.asarray(target.gradient(x), dtype=np.float64)
        where = f"theta = {np.array2string(x, precision=4)}"
        if not np.all(np.isfinite(out)):
            bad = int(np.argwhere(~np.isfinite(out))[0, 0])
            raise ParameterError(what, f"{what} is not finite in {_coordinate(target, bad)} at {where}")

        def u(z):
            value = float(target.log_density(z))
            if not np.isfinite(value):
                raise ParameterError(
                    "log_density_fn", f"the log density is not finite at {np.array2string(z, precision=4)}"
                )
            return -value

        u0 = u(x.copy())
        for i in rng.choice(d, size=min(d, coords), replace=False):
            h = 1e-4 * max(1.0, abs(x[i]))

            def quotient(step, i=i, x=x):
                up, down = x.copy(), x.copy()
                up[i] += step
                down[i] -= step
                return (u(up) - u(down)) / (2.0 * step)

            coarse, fine = quotient(h), quotient(h / 2)
            tol = 10.0 * (abs(coarse - fine) / 3.0 + 8.0 * eps * (abs(u0) + 1.0) / h) + 1e-7 * (1.0 + abs(out[i]))
            if not abs(out[i] - fine) <= tol:
                raise ParameterError(
                    what,
                    f"{what} disagrees with the finite differences of the log density in {_coordinate(target, i)} "
                    f"(coordinate {i}) at {where}: it gives dU/d{_coordinate(target, i)} = {out[i]:.6g}, the "
                    f"differences {fine:.6g} (tolerance {tol:.2g}). It must be the gradient of U = -log p",
                )


def check_block_gradient(target: Target, points=None) -> None:
    """Check ``target.grad_u_block`` against ``target.grad_u``, column by column.

    The block holds ``points`` (:func:`check_points` by default) and one lane at the
    origin, as the unused lanes of a run's last block are held. Each column must be written
    and agree with ``grad_u`` at that point to ``1e-10 (1 + |grad_u|)``: a block form
    differs from the per-point one by rounding only.

    Raises
    ------
    ParameterTypeError
        When ``grad_u_block(theta, params, out, scratch)`` cannot be called.
    ParameterError
        Naming the column's point and the coordinate where they disagree.
    """
    block = target.grad_u_block
    if block is None:
        return
    d = target.dim
    pts = check_points(target) if points is None else np.asarray(points, dtype=np.float64).reshape(-1, d)
    pts = np.concatenate([pts, np.zeros((1, d))])
    theta = np.ascontiguousarray(pts.T)
    out = np.full(theta.shape, np.nan)
    scratch = np.full((8, theta.shape[1]), np.nan)
    try:
        block(theta.copy(), target.params, out, scratch)
    except Exception as exc:  # a numba typing error, or any error of the user's function
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise ParameterTypeError(
            "grad_u_block",
            f"grad_u_block must accept (theta, params, out, scratch) with theta and out float64 arrays of shape "
            f"({d}, W), scratch of shape (8, W) and this target's params ({len(target.params)} items); calling it "
            f"failed: {first[:300]}",
        ) from None
    expected = target.gradient(pts)
    for lane, (x, g) in enumerate(zip(pts, expected, strict=True)):
        tol = 1e-10 * (1.0 + float(np.max(np.abs(g))))
        bad = np.flatnonzero(~(np.abs(out[:, lane] - g) <= tol))
        if bad.size:
            i = int(bad[0])
            raise ParameterError(
                "grad_u_block",
                f"grad_u_block disagrees with grad_u in {_coordinate(target, i)} (coordinate {i}) at theta = "
                f"{np.array2string(x, precision=4)} (column {lane} of {theta.shape[1]}): {out[i, lane]:.17g} "
                f"against {g[i]:.17g}. It must write grad U of each column of theta (shape (d, W)) into out",
            )


def check_functions(target: Target) -> None:
    """Check a target's compiled functions against each other; raise naming what is wrong.

    Run when a target is built by hand (:class:`Target`):

    1. ``grad_u(theta, params, out)`` and ``log_density_fn(theta, params)`` can be called with
       float64 arrays of shape ``(d,)`` (a wrong signature or ``dim`` names the function);
    2. ``grad_u`` writes a finite value into every entry of ``out`` (one that returns its
       result instead of writing it leaves ``out`` untouched) and ``log_density_fn`` returns
       a finite number;
    3. ``grad_u`` agrees with central differences of ``-log_density_fn``
       (:func:`check_gradient`) at the points of :func:`check_points`: in the initial box,
       in a box four times as wide, and at three standard deviations of the target's
       declared spread, where it declares one;
    4. a ``stochastic_grad_u`` can be called and writes a finite value;
    5. a ``grad_u_block`` can be called and agrees with ``grad_u``, column by column.
    """
    if target.grad_u is None or target.log_density_fn is None:
        check_gradient(target)
        return
    d = target.dim
    points = check_points(target)
    for x in points[:_CHECK_POINTS]:
        out = np.full(d, np.nan)
        try:
            returned = target.grad_u(x.copy(), target.params, out)
        except Exception as exc:  # a numba typing error, or any error of the user's function
            raise _typing_error("grad_u", "(theta, params, out)", target, exc) from None
        if not np.all(np.isfinite(out)):
            said = " (it returned a value: it must write into out instead)" if returned is not None else ""
            raise ParameterError(
                "grad_u",
                "grad_u(theta, params, out) left out without a finite gradient at theta = "
                f"{np.array2string(x, precision=4)}"
                f"{said}",
            )
        try:
            value = target.log_density_fn(x.copy(), target.params)
        except Exception as exc:
            raise _typing_error("log_density_fn", "(theta, params) -> float", target, exc) from None
        if not isinstance(value, (float, int, np.floating, np.integer)) or not np.isfinite(value):
            raise ParameterError(
                "log_density_fn",
                f"log_density_fn(theta, params) must return a finite number, got {value!r} "
                f"at theta = {np.array2string(x, precision=4)}",
            )
    try:
        check_gradient(target, points)
    except ParameterError as exc:
        raise ParameterError("grad_u", str(exc).replace("the gradient", "grad_u")) from None
    if target.grad_u_block is not None:
        check_block_gradient(target, points)
    if target.stochastic_grad_u is not None:
        from .. import rng as _rng

        out = np.full(d, np.nan)
        try:
            target.stochastic_grad_u(
                points[0].copy(), target.params, out, _rng.chain_states(_CHECK_SEED, 1)[0], target.new_workspace()
            )
        except Exception as exc:
            raise _typing_error("stochastic_grad_u", "(theta, params, out, rng, work)", target, exc) from None
        if not np.all(np.isfinite(out)):
            raise ParameterError("stochastic_grad_u", "stochastic_grad_u left out without a finite gradient")


def _plain(value):
    # arguments are recorded as plain data: arrays stay arrays, numpy scalars become Python's
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list | tuple) and value and all(isinstance(v, int | float) for v in value):
        return tuple(value)
    return value


def factory(name: str):
    """Register a target constructor under ``name`` and make it record its arguments.

    The decorated constructor returns its target with ``spec = TargetSpec(name, arguments)``,
    every argument bound (defaults filled in), so that :func:`build` can rebuild it in another
    process from a result file.
    """

    def decorate(func):
        sig = inspect.signature(func)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            # a registered constructor's functions are tested by the test-suite, not at each call
            token = _TRUSTED.set(True)
            try:
                target = func(*args, **kwargs)
            finally:
                _TRUSTED.reset(token)
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            spec = TargetSpec(name, {k: _plain(v) for k, v in bound.arguments.items()})
            token = _TRUSTED.set(True)
            try:
                return replace(target, spec=spec)
            finally:
                _TRUSTED.reset(token)

        if name in FACTORIES:
            raise ValueError(f"a target factory named {name!r} is already registered")
        FACTORIES[name] = wrapper
        return wrapper

    return decorate


def from_reference(ref: str, **kwargs) -> Target:
    """Build a target from a registered factory's name or a ``"package.module:function"`` reference.

    The function is called with ``kwargs`` and must return a :class:`Target`; the result
    records ``TargetSpec(ref, kwargs)``, so that a run on it can be replayed wherever the
    module can be imported.
    """
    if not isinstance(ref, str):
        raise ParameterTypeError("target", f"target must be a name or 'module:function', got {type(ref).__name__}")
    if ":" not in ref:
        if ref not in FACTORIES:
            raise ParameterError(
                "target",
                f"unknown target factory {ref!r}; known: {', '.join(sorted(FACTORIES))}, or 'package.module:function'",
            )
        return FACTORIES[ref](**kwargs)
    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ParameterError("target", f"cannot import {module_name!r} (from target {ref!r}): {exc}") from None
    make = getattr(module, attr, None)
    if not callable(make):
        raise ParameterError("target", f"{module_name!r} has no function {attr!r} (from target {ref!r})")
    target = make(**kwargs)
    if not isinstance(target, Target):
        raise ParameterTypeError("target", f"{ref} returned {type(target).__name__}, not a sgsim Target")
    token = _TRUSTED.set(True)  # checked when make built it
    try:
        return replace(target, spec=TargetSpec(ref, {k: _plain(v) for k, v in kwargs.items()}))
    finally:
        _TRUSTED.reset(token)


def build(spec: TargetSpec) -> Target:
    """Rebuild the target that ``spec`` describes (its factory, then its modifiers in order)."""
    if not isinstance(spec, TargetSpec):
        raise ParameterTypeError("spec", f"spec must be a TargetSpec, got {type(spec).__name__}")
    if ":" in spec.factory:
        target = from_reference(spec.factory, **spec.kwargs)
    else:
        try:
            make = FACTORIES[spec.factory]
        except KeyError:
            raise ParameterError(
                "spec", f"unknown target factory {spec.factory!r}; known: {', '.join(sorted(FACTORIES))}"
            ) from None
        target = make(**spec.kwargs)
    for method, kwargs in spec.modifiers:
        if method not in ("with_gradient_noise", "with_init_box"):
            raise ParameterError("spec", f"unknown target modifier {method!r}")
        target = getattr(target, method)(**kwargs)
    return target
