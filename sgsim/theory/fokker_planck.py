r"""Fokker-Planck operators on grids: which dynamics leave a density stationary, checked numerically.

For the Ito diffusion ``dz = mu(z) dt + sqrt(2 D(z)) dW`` the density ``q_t`` of ``z_t`` obeys

.. math::

    \partial_t q = \mathcal L q = -\sum_i \partial_i(\mu_i q) + \sum_{i,j} \partial_i\partial_j(D_{ij} q),

and ``pi`` is stationary when ``L pi = 0`` ("Stochastic Gradient MCMC with Repulsive Forces",
§2.3). With ``H = -log pi`` and the drift ``mu = -D grad H + Gamma``,
``Gamma_i = sum_j d_j D_ij``, the operator takes the gradient-flow form
``L q = div[D (grad q + q grad H)] = div[D pi grad(q / pi)]``, which vanishes at ``q = pi``
whatever ``D``: the argument of that paper's Proposition 2 for SGLD with repulsive forces.
Dropping the noise (SVGD, Proposition 3) or flipping the sign of ``Gamma`` (as the paper's
printed updates do) leaves a residual that does not vanish.

This module makes those statements numerical:

- :func:`operator`: ``L`` as a sparse matrix on a regular 1-D or 2-D grid, second-order
  central differences (first derivatives ``(f_{+} - f_{-}) / 2h``, second ``(f_{+} - 2f +
  f_{-}) / h^2``, mixed as the product of two first differences);
- :func:`stationarity_residual`: ``max |L pi| / max pi`` over the interior nodes, which falls
  like ``h^2`` for a sampler that leaves ``pi`` stationary and stays of order one otherwise;
- drift and diffusion of SGLD (:func:`sgld_generator`) and of two interacting particles in one
  dimension, whose joint density lives on a 2-D grid (:func:`two_particle_generator`: SGLD
  with repulsive forces, its ``-Gamma`` variant, and SVGD's noise-free flow), or with their
  momenta on a 4-D grid (:func:`two_particle_hamiltonian_generator`: Hamiltonian SGLD with
  repulsive forces and two broken variants);
- :func:`evolve`: the gradient-flow form stepped in time with fluxes through cell faces, so
  that mass is conserved to rounding, ``pi`` is stationary to rounding where ``D`` is
  diagonal, and the density approaches ``pi`` from any start it can reach;
- :func:`svgd_two_particle_fixed_point`: the closed-form fixed point of two SVGD particles on a
  Gaussian, which shows SVGD's variance underestimation; :func:`svgd_fixed_point` and
  :func:`svgd_variance_shortfall`: the same for ``L`` particles, any bandwidth or the median,
  solved numerically;
- the median bandwidth, a function of the particles: :func:`median_fields` (drift and diffusion
  of ``L`` particles in ``d`` dimensions at any states, with the median's derivative in
  ``Gamma``), :func:`median_generator` (on a grid), :func:`median_regular` (where the median is
  smooth) and :func:`local_residual` (the operator's stencil around given states only, for
  state spaces too large for a grid).

Units follow the paper: ``dz = -D grad H dt + ...`` at temperature 1 with time ``t``; a sampler
with step ``epsilon`` in that paper's convention advances time by ``epsilon`` per step (the
cyclical paper's SGLD with step ``alpha`` advances it by ``alpha``).

Everything here is NumPy and SciPy (sparse matrices); nothing imports an integrator.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._validate import ParameterError, finite_array, fits_in_memory, positive_float

__all__ = [
    "Grid",
    "grid",
    "operator",
    "residual",
    "stationarity_residual",
    "sgld_generator",
    "two_particle_generator",
    "two_particle_hamiltonian_generator",
    "evolve",
    "svgd_two_particle_fixed_point",
    "svgd_fixed_point",
    "svgd_variance_shortfall",
    "median_fields",
    "median_generator",
    "median_regular",
    "local_residual",
    "MEDIAN_KINDS",
    "TWO_PARTICLE_KINDS",
    "HAMILTONIAN_KINDS",
]

TWO_PARTICLE_KINDS = ("sgld_repulsive", "minus_gamma", "svgd")
HAMILTONIAN_KINDS = ("sghmc_repulsive", "no_gamma", "independent_noise")


@dataclass(frozen=True)
class Grid:
    """A regular grid of nodes on a box in one to four dimensions.

    Attributes
    ----------
    axes : tuple of ndarray
        The node coordinates along each dimension (each of length >= 3).
    """

    axes: tuple[np.ndarray, ...]

    @property
    def dim(self) -> int:
        """Number of dimensions (1 to 4)."""
        return len(self.axes)

    @property
    def shape(self) -> tuple[int, ...]:
        """Nodes per dimension."""
        return tuple(a.size for a in self.axes)

    @property
    def spacing(self) -> tuple[float, ...]:
        """Node spacing ``h`` per dimension."""
        return tuple(float(a[1] - a[0]) for a in self.axes)

    @property
    def cell(self) -> float:
        """Volume of one cell (the weight of a node in a sum that approximates an integral)."""
        return float(np.prod(self.spacing))

    def points(self) -> np.ndarray:
        """The nodes as an ``(n_nodes, dim)`` array, the first axis slowest (C order)."""
        mesh = np.meshgrid(*self.axes, indexing="ij")
        return np.stack([m.ravel() for m in mesh], axis=1)

    def interior(self) -> np.ndarray:
        """Boolean array of ``shape``: the nodes where every stencil has its neighbours."""
        mask = np.ones(self.shape, bool)
        for axis in range(self.dim):
            index = [slice(None)] * self.dim
            index[axis] = [0, -1]  # type: ignore[call-overload]
            mask[tuple(index)] = False
        return mask

    def normalise(self, density: np.ndarray) -> np.ndarray:
        """``density`` scaled so that its sum times the cell volume is 1."""
        density = np.asarray(density, float)
        return density / (density.sum() * self.cell)


def grid(low, high, n: int | Sequence[int]) -> Grid:
    """A regular grid on the box ``[low, high]`` with ``n`` nodes per dimension (ends included).

    Parameters
    ----------
    low, high : float or sequence of float
        Corners of the box, one value per dimension (1 to 4 of them); a scalar for 1-D.
    n : int or sequence of int
        Nodes per dimension, >= 3.
    """
    low_a = np.atleast_1d(finite_array("low", low))
    high_a = np.atleast_1d(finite_array("high", high))
    n_a = np.atleast_1d(np.asarray(n))
    dim = max(low_a.size, high_a.size, n_a.size)
    if not 1 <= dim <= 4:
        raise ParameterError("low", f"grids have 1 to 4 dimensions, got {dim}")
    low_a, high_a, n_a = (np.broadcast_to(x, (dim,)) for x in (low_a, high_a, n_a))
    if not (np.all(np.isfinite(low_a)) and np.all(np.isfinite(high_a)) and np.all(high_a > low_a)):
        raise ParameterError("high", f"the box needs finite low < high in every dimension, got {low_a} and {high_a}")
    if not np.issubdtype(n_a.dtype, np.integer) or np.any(n_a < 3):
        raise ParameterError("n", f"n must be integers >= 3 (nodes per dimension), got {n}")
    # a computation on the grid holds, per node, the fields (dim + dim^2 floats) and the
    # operator's sparse rows (up to (2 dim + 1)^2 entries of 12 bytes): checked before linspace
    nodes = float(np.prod(n_a.astype(np.float64)))
    per_node = 8.0 * (1 + dim + dim * dim) + 12.0 * (2 * dim + 1) ** 2
    fits_in_memory("n", nodes * per_node, f"a grid of {nodes:,.0f} nodes, its fields and its operator")
    return Grid(tuple(np.linspace(lo, hi, int(k)) for lo, hi, k in zip(low_a, high_a, n_a, strict=True)))


def _first(n: int, h: float) -> sp.csr_matrix:
    """Central first difference on ``n`` nodes, boundary rows zero."""
    main = np.zeros(n)
    up = np.full(n - 1, 1.0 / (2 * h))
    down = np.full(n - 1, -1.0 / (2 * h))
    up[0] = 0.0  # row 0 (boundary)
    down[-1] = 0.0  # row n-1 (boundary)
    return sp.diags([down, main, up], [-1, 0, 1], format="csr")


def _second(n: int, h: float) -> sp.csr_matrix:
    """Central second difference on ``n`` nodes, boundary rows zero."""
    main = np.full(n, -2.0 / h**2)
    up = np.full(n - 1, 1.0 / h**2)
    down = np.full(n - 1, 1.0 / h**2)
    main[[0, -1]] = 0.0
    up[0] = 0.0
    down[-1] = 0.0
    return sp.diags([down, main, up], [-1, 0, 1], format="csr")


def _along(g: Grid, axis: int, m: sp.csr_matrix) -> sp.csr_matrix:
    """The 1-D matrix ``m`` acting along ``axis`` of the flattened (C order) grid."""
    mats = [sp.identity(k, format="csr") for k in g.shape]
    mats[axis] = m
    out = mats[0]
    for nxt in mats[1:]:
        out = sp.kron(out, nxt, format="csr")
    return out


def _fields(g: Grid, drift, diffusion) -> tuple[np.ndarray, np.ndarray]:
    mu = np.asarray(drift, float)
    dd = np.asarray(diffusion, float)
    if mu.shape != (g.dim,) + g.shape:
        raise ParameterError("drift", f"drift must have shape {(g.dim,) + g.shape} (dim, *grid.shape), got {mu.shape}")
    if dd.shape != (g.dim, g.dim) + g.shape:
        raise ParameterError(
            "diffusion", f"diffusion must have shape {(g.dim, g.dim) + g.shape} (dim, dim, *grid.shape), got {dd.shape}"
        )
    if not (np.all(np.isfinite(mu)) and np.all(np.isfinite(dd))):
        raise ParameterError("drift", "drift and diffusion must be finite at every node")
    return mu, dd


def operator(g: Grid, drift, diffusion) -> sp.csr_matrix:
    """The Fokker-Planck operator ``q -> -sum_i d_i(mu_i q) + sum_ij d_i d_j(D_ij q)`` as a sparse matrix.

    Parameters
    ----------
    g : Grid
        The grid; ``q`` is a flattened (C order) array of its nodes' values.
    drift : array_like, shape ``(dim, *g.shape)``
        ``mu_i`` at every node.
    diffusion : array_like, shape ``(dim, dim, *g.shape)``
        ``D_ij`` at every node (symmetric positive semidefinite; zero for a deterministic flow).

    Returns
    -------
    scipy.sparse.csr_matrix
        Of shape ``(n_nodes, n_nodes)``. Rows of boundary nodes are zero: use the interior.
    """
    mu, dd = _fields(g, drift, diffusion)
    first = [_along(g, a, _first(g.shape[a], g.spacing[a])) for a in range(g.dim)]
    second = [_along(g, a, _second(g.shape[a], g.spacing[a])) for a in range(g.dim)]
    n = int(np.prod(g.shape))
    out = sp.csr_matrix((n, n))
    for i in range(g.dim):
        out = out - first[i] @ sp.diags(mu[i].ravel())
        out = out + second[i] @ sp.diags(dd[i, i].ravel())
        for j in range(g.dim):
            if j != i:
                out = out + first[i] @ first[j] @ sp.diags(dd[i, j].ravel())
    return out.tocsr()


def residual(g: Grid, drift, diffusion, density) -> np.ndarray:
    """``L q`` at the interior nodes (NaN on the boundary), for ``q = density`` on the grid."""
    q = np.asarray(density, float)
    if q.shape != g.shape:
        raise ParameterError("density", f"density must have the grid's shape {g.shape}, got {q.shape}")
    out = (operator(g, drift, diffusion) @ q.ravel()).reshape(g.shape)
    return np.where(g.interior(), out, np.nan)


def stationarity_residual(g: Grid, drift, diffusion, density, where=None) -> float:
    """``max |L pi| / max pi`` over the interior nodes: 0 in the continuum for a stationary ``pi``.

    With central differences it falls like ``h^2`` (by 4 per halving of ``h``) when ``pi``
    is stationary for the dynamics, and tends to a nonzero limit when it is not. ``where``
    (a boolean array of the grid's shape, optional) restricts the maximum to those interior
    nodes, for fields that are smooth only there (see :func:`median_regular`).

    Examples
    --------
    The Langevin diffusion of ``U(x) = x^2 / 2`` leaves ``N(0, 1)`` stationary at temperature
    1, and not at temperature 2:

    >>> import numpy as np
    >>> from sgsim.theory import fokker_planck as fp
    >>> def residual(n, temperature=1.0):
    ...     g = fp.grid(-5.0, 5.0, n)
    ...     drift, diffusion = fp.sgld_generator(g, lambda x: x, temperature)
    ...     return fp.stationarity_residual(g, drift, diffusion, np.exp(-0.5 * g.axes[0] ** 2))
    >>> print(round(residual(101) / residual(201), 1))  # second order: h halved, residual / 4
    4.0
    >>> print(round(residual(201, temperature=2.0), 2))  # of order one, whatever h
    1.0
    """
    r = residual(g, drift, diffusion, density)
    if where is not None:
        mask = np.asarray(where, bool)
        if mask.shape != g.shape or not np.any(mask & g.interior()):
            raise ParameterError("where", f"where must be a boolean array of shape {g.shape} with interior nodes")
        r = np.where(mask, r, np.nan)
    return float(np.nanmax(np.abs(r)) / np.max(np.asarray(density, float)))


def _gradient_on(g: Grid, grad_u: Callable) -> np.ndarray:
    pts = g.points()
    gu = np.asarray(grad_u(pts), float).reshape(pts.shape)
    return np.moveaxis(gu.reshape(g.shape + (g.dim,)), -1, 0)


def sgld_generator(g: Grid, grad_u: Callable, temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Drift and diffusion of the Langevin diffusion ``dz = -grad U dt + sqrt(2 T) dW``.

    SGLD with a small step ``alpha`` (the cyclical paper's convention) follows it with time
    ``t = k alpha``. ``grad_u`` maps an ``(n, dim)`` array of points to their gradients.
    Returns ``(drift, diffusion)`` for :func:`operator`.
    """
    temperature = positive_float("temperature", temperature)
    drift = -_gradient_on(g, grad_u)
    diffusion = np.zeros((g.dim, g.dim) + g.shape)
    for i in range(g.dim):
        diffusion[i, i] = temperature
    return drift, diffusion


def two_particle_generator(
    g: Grid, grad_u: Callable, bandwidth: float, kind: str = "sgld_repulsive", normalise: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Drift and diffusion of two interacting particles ``(z_1, z_2)`` in one dimension.

    With ``k = exp(-(z_1 - z_2)^2 / h)`` and ``c = 1/2`` (``normalise``) or 1, the diffusion is
    ``D = c [[1, k], [k, 1]]`` and ``Gamma = c (2/h) k (z_1 - z_2, z_2 - z_1)``, the repulsion;
    ``grad_u`` maps an ``(n,)`` array of positions to ``U'`` (one particle's potential).

    Parameters
    ----------
    g : Grid
        A 2-D grid over ``(z_1, z_2)``.
    grad_u : callable
        ``U'`` of the one-particle target, vectorised.
    bandwidth : float
        ``h > 0``.
    kind : str
        ``"sgld_repulsive"``: drift ``-D grad H + Gamma`` with diffusion ``D`` (leaves
        ``pi(z_1) pi(z_2)`` stationary); ``"minus_gamma"``: ``-D grad H - Gamma`` with ``D``
        (the printed sign, not stationary); ``"svgd"``: ``-D grad H + Gamma`` with no
        diffusion (not stationary).
    normalise : bool
        Use ``c = 1/L = 1/2``.
    """
    if g.dim != 2:
        raise ParameterError("g", f"two particles in one dimension need a 2-D grid, got {g.dim}-D")
    if kind not in TWO_PARTICLE_KINDS:
        raise ParameterError("kind", f"kind must be one of {TWO_PARTICLE_KINDS}, got {kind!r}")
    h = positive_float("bandwidth", bandwidth)
    c = 0.5 if normalise else 1.0
    z1, z2 = np.meshgrid(*g.axes, indexing="ij")
    k = np.exp(-((z1 - z2) ** 2) / h)
    g1 = np.asarray(grad_u(z1.ravel()), float).reshape(g.shape)
    g2 = np.asarray(grad_u(z2.ravel()), float).reshape(g.shape)
    gamma1 = c * (2.0 / h) * k * (z1 - z2)
    sign = -1.0 if kind == "minus_gamma" else 1.0
    drift = np.stack([-c * (g1 + k * g2) + sign * gamma1, -c * (k * g1 + g2) - sign * gamma1])
    diffusion = np.zeros((2, 2) + g.shape)
    if kind != "svgd":
        diffusion[0, 0] = diffusion[1, 1] = c
        diffusion[0, 1] = diffusion[1, 0] = c * k
    return drift, diffusion


def two_particle_hamiltonian_generator(
    g: Grid,
    grad_u: Callable,
    bandwidth: float,
    friction: float = 1.0,
    kind: str = "sghmc_repulsive",
    normalise: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Drift and diffusion of two interacting particles in one dimension with their momenta.

    The state is ``(z_1, z_2, p_1, p_2)`` and ``H = U(z_1) + U(z_2) + (p_1^2 + p_2^2) / 2``.
    With ``k = exp(-(z_1 - z_2)^2 / h)``, ``K = [[1, k], [k, 1]]``, ``c = 1/2`` (``normalise``)
    or 1 and the friction ``C``, the recipe of "Stochastic Gradient MCMC with Repulsive
    Forces", eq. 5, with the curl matrix ``Q = c [[0, -K], [K, 0]]`` and the diffusion
    ``D = c [[0, 0], [0, C K]]`` gives

    .. math::

        \dot z = c K p, \qquad
        \dot p = c\big(-K \nabla U(z) + \Gamma - C K p\big) + \text{noise of covariance } 2 c C K,

    with ``Gamma = (2/h) k (z_1 - z_2, z_2 - z_1)``, the divergence of ``Q``'s lower block
    (see :func:`two_particle_generator` for the overdamped version).

    Parameters
    ----------
    g : Grid
        A 4-D grid over ``(z_1, z_2, p_1, p_2)``.
    grad_u : callable
        ``U'`` of the one-particle target, vectorised.
    bandwidth : float
        ``h > 0``.
    friction : float
        ``C > 0``.
    kind : str
        ``"sghmc_repulsive"``: the drift and diffusion above (leave ``exp(-H)`` stationary);
        ``"no_gamma"``: ``Gamma`` dropped; ``"independent_noise"``: the noise's covariance
        ``2 c C I`` while the friction stays ``c C K p`` (the fluctuation-dissipation balance
        broken). Neither of the last two is stationary for ``exp(-H)``.
    normalise : bool
        Use ``c = 1/L = 1/2``.
    """
    if g.dim != 4:
        raise ParameterError("g", f"two particles in one dimension with momenta need a 4-D grid, got {g.dim}-D")
    if kind not in HAMILTONIAN_KINDS:
        raise ParameterError("kind", f"kind must be one of {HAMILTONIAN_KINDS}, got {kind!r}")
    h = positive_float("bandwidth", bandwidth)
    fric = positive_float("friction", friction)
    c = 0.5 if normalise else 1.0
    z1, z2, p1, p2 = np.meshgrid(*g.axes, indexing="ij")
    k = np.exp(-((z1 - z2) ** 2) / h)
    g1 = np.asarray(grad_u(z1.ravel()), float).reshape(g.shape)
    g2 = np.asarray(grad_u(z2.ravel()), float).reshape(g.shape)
    gamma1 = 0.0 if kind == "no_gamma" else (2.0 / h) * k * (z1 - z2)
    kp1, kp2 = p1 + k * p2, k * p1 + p2
    drift = c * np.stack([kp1, kp2, -(g1 + k * g2) + gamma1 - fric * kp1, -(k * g1 + g2) - gamma1 - fric * kp2])
    diffusion = np.zeros((4, 4) + g.shape)
    diffusion[2, 2] = diffusion[3, 3] = c * fric
    if kind != "independent_noise":
        diffusion[2, 3] = diffusion[3, 2] = c * fric * k
    return drift, diffusion


def evolve(g: Grid, diffusion, log_target, q0, times: Sequence[float], dt: float | None = None) -> np.ndarray:
    r"""Step ``dq/dt = div[D (grad q + q grad H)]`` (``H = -log pi``) and return ``q`` at ``times``.

    The gradient-flow form of the operator of a sampler that leaves ``pi`` stationary
    (see the module docs), discretised by fluxes through the faces between nodes, zero through
    the box's outer faces, explicit Euler in time. The flux along a dimension has a diagonal
    part, ``D_ii`` times ``(q_+ e^{(H_+ - H_-)/2} - q_- e^{-(H_+ - H_-)/2}) / h`` (exact for
    ``q`` proportional to ``pi``: it vanishes there), and, in 2-D, a cross part ``D_ij`` times
    the face average of ``d_j q + q d_j H`` by central differences. Mass (the sum of ``q``) is
    conserved to rounding.

    Parameters
    ----------
    g : Grid
        1-D or 2-D.
    diffusion : array_like, shape ``(dim, dim, *g.shape)``
        ``D`` at the nodes.
    log_target : array_like, shape g.shape
        ``log pi`` at the nodes, up to a constant.
    q0 : array_like, shape g.shape
        The initial density (nonnegative; normalised here).
    times : sequence of float
        Increasing times >= 0 at which to return ``q``.
    dt : float, optional
        Time step; default ``0.2 min(h)^2 / max(D)``, within the explicit scheme's stability limit.

    Returns
    -------
    ndarray, shape ``(len(times), *g.shape)``
        ``q`` at each time, each normalised (sum times cell volume = 1).
    """
    dd = np.asarray(diffusion, float)
    if dd.shape != (g.dim, g.dim) + g.shape:
        raise ParameterError("diffusion", f"diffusion must have shape {(g.dim, g.dim) + g.shape}, got {dd.shape}")
    hh = -np.asarray(log_target, float)
    hh = hh - hh.min()  # pi = exp(-hh) <= 1; q / pi = q exp(hh)
    q = np.asarray(q0, float).copy()
    for name, arr in (("log_target", hh), ("q0", q)):
        if arr.shape != g.shape or not np.all(np.isfinite(arr)):
            raise ParameterError(name, f"{name} must be finite with the grid's shape {g.shape}")
    if np.any(q < 0) or not q.sum() > 0:
        raise ParameterError("q0", "q0 must be a nonnegative density with positive mass")
    times = [float(t) for t in times]
    if any(t < 0 for t in times) or any(b < a for a, b in zip(times, times[1:], strict=False)):
        raise ParameterError("times", f"times must be increasing and >= 0, got {times}")
    scale = float(np.max(np.abs(dd)))
    if not scale > 0:
        raise ParameterError(
            "diffusion", "diffusion is zero everywhere: a deterministic flow has no gradient-flow form"
        )
    step = 0.2 * min(g.spacing) ** 2 / scale if dt is None else float(dt)
    if not step > 0:
        raise ParameterError("dt", f"dt must be > 0, got {dt}")
    q = g.normalise(q)
    out = np.empty((len(times),) + g.shape)
    t = 0.0
    for n_out, t_want in enumerate(times):
        while t < t_want - 1e-12 * max(1.0, t_want):
            tau = min(step, t_want - t)
            q = q + tau * _divergence(g, dd, hh, q)
            t += tau
        out[n_out] = g.normalise(q)
    return out


def _face(a: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """The values on either side of each face between neighbouring nodes along ``axis``."""
    lo = [slice(None)] * a.ndim
    hi = [slice(None)] * a.ndim
    lo[axis] = slice(None, -1)
    hi[axis] = slice(1, None)
    return a[tuple(lo)], a[tuple(hi)]


def _central(a: np.ndarray, axis: int, h: float) -> np.ndarray:
    """Central difference along ``axis``, one-sided at the ends."""
    return np.gradient(a, h, axis=axis)


def _divergence(g: Grid, dd: np.ndarray, hh: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``div[D (grad q + q grad H)]`` by fluxes through the faces (zero at the box's faces)."""
    out = np.zeros_like(q)
    for i in range(g.dim):
        h = g.spacing[i]
        q_lo, q_hi = _face(q, i)
        h_lo, h_hi = _face(hh, i)
        d_lo, d_hi = _face(dd[i, i], i)
        half = 0.5 * (h_hi - h_lo)
        flux = 0.5 * (d_lo + d_hi) * (q_hi * np.exp(half) - q_lo * np.exp(-half)) / h
        for j in range(g.dim):
            if j == i:
                continue
            # D_ij pi d_j (q / pi) at the nodes, averaged to the faces: zero where q = pi
            cross = dd[i, j] * np.exp(-hh) * _central(q * np.exp(hh), j, g.spacing[j])
            c_lo, c_hi = _face(cross, i)
            flux = flux + 0.5 * (c_lo + c_hi)
        # the flux through the face between nodes m and m+1 leaves m and enters m+1
        pad = [(0, 0)] * q.ndim
        pad[i] = (1, 1)
        full = np.pad(flux, pad)
        lo, hi = _face(full, i)
        out += (hi - lo) / h
    return out


def svgd_two_particle_fixed_point(variance: float, bandwidth: float) -> float:
    """``a^2`` of the symmetric fixed point ``(a, -a)`` of two SVGD particles on ``N(0, s^2)``.

    For the RBF kernel ``exp(-(z - z')^2 / h)`` the drift of the particle at ``a`` vanishes
    when the smoothed pull ``(a / s^2)(1 - k)`` equals the repulsion ``(2/h) 2a k``, with
    ``k = exp(-4 a^2 / h)``, i.e.
    ``a^2 = (h / 4) log(1 + 4 s^2 / h)``, which is below ``s^2`` for every ``h``: two
    particles' empirical variance underestimates the target's.
    """
    s2, h = positive_float("variance", variance), positive_float("bandwidth", bandwidth)
    # r = h / (4 s^2) from logarithms, so that no quotient overflows or underflows (h = 1e-320
    # included): a^2 = s^2 log1p(x) / x with x = 1/r <= 1 (-> s^2 as x underflows), and
    # a^2 = (h/4) (log1p(r) - log r) for r < 1, where both terms are positive
    log_r = math.log(h) - math.log(4.0) - math.log(s2)
    if log_r >= 0:
        x = math.exp(-log_r)
        return s2 * (math.log1p(x) / x if x > 0 else 1.0)
    return h / 4.0 * (math.log1p(math.exp(log_r)) - log_r)


# ----------------------------------------------------------------------------- the median bandwidth

MEDIAN_KINDS = ("sgld_repulsive", "uncorrected", "svgd")


def _pair_geometry(points, n_particles: int) -> tuple:
    """Particles, pair differences and squared distances, the middle pair(s) and the median.

    ``points`` is ``(n, L d)`` with the particles one after the other (particle-major). The middle
    pairs are the ones ``numpy.median`` averages over the ``M = L (L - 1) / 2`` squared
    distances: positions ``(M - 1) // 2`` and ``M // 2`` of the sorted values (one pair twice
    when ``M`` is odd); ties go to the lower pair index, as a stable sort breaks them.
    """
    pts = np.asarray(points, float)
    n, m = pts.shape
    z = pts.reshape(n, n_particles, m // n_particles)
    diff = z[:, :, None, :] - z[:, None, :, :]  # z_i - z_j
    sq = np.sum(diff**2, axis=-1)
    iu = np.triu_indices(n_particles, 1)
    pairs = sq[:, iu[0], iu[1]]
    order = np.argsort(pairs, axis=1, kind="stable")
    n_pairs = pairs.shape[1]
    middle = (order[:, (n_pairs - 1) // 2], order[:, n_pairs // 2])
    rows = np.arange(n)
    med = 0.5 * (pairs[rows, middle[0]] + pairs[rows, middle[1]])
    return z, diff, sq, iu, middle, med, np.sort(pairs, axis=1)


def _check_particles(m: int, n_particles) -> int:
    from .._validate import integer

    n_part = integer("n_particles", n_particles, low=2)
    if m % n_part:
        raise ParameterError(
            "n_particles", f"the state's {m} coordinates must split into n_particles = {n_part} particles"
        )
    return n_part


def median_fields(
    points,
    grad_u: Callable,
    n_particles: int,
    kind: str = "sgld_repulsive",
    normalise: bool = True,
    noise_scale: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Drift and diffusion of ``L`` particles with the median bandwidth, at given states.

    Each state ``z = (z_1, ..., z_L)`` (particle-major, ``L d`` coordinates) has the bandwidth
    ``h(z) = med_{i<j} |z_i - z_j|^2 / log L`` (``numpy.median``'s median), the kernel
    ``K_ij = exp(-|z_i - z_j|^2 / h(z))`` and, with ``c = 1/L`` (``normalise``) or 1, the
    diffusion ``D = c K (x) I_d``. Because ``h`` depends on the particles, the correction
    ``Gamma_i = sum_j d_{z_j} D_ij`` of the Ma-Chen-Fox recipe ("Stochastic Gradient MCMC with
    Repulsive Forces", eq. 2 with the sign of ``Gamma`` corrected, and Proposition 2) has two
    parts:

    .. math::

        \Gamma_i = c \sum_j K_{ij}\Big[\frac{2}{h}(z_i - z_j)
            + \frac{|z_i - z_j|^2}{h^2}\,\frac{\partial h}{\partial z_j}\Big],
        \qquad \frac{\partial h}{\partial z_p} = \frac{2 (z_p - z_q)}{\log L}

    for the middle pair ``(p, q)`` (``-`` that for ``z_q``; half each for the two middle pairs
    when ``M = L (L - 1) / 2`` is even). The first part is SVGD's repulsion; the second is what
    ``sgld_repulsive`` adds with ``median_correction=True``.

    Parameters
    ----------
    points : array_like, shape ``(n, L d)``
        The states.
    grad_u : callable
        ``U'`` of the one-particle target: maps ``(m, d)`` positions to ``(m, d)`` gradients.
    n_particles : int
        ``L >= 2``; it must divide the number of coordinates.
    kind : str
        ``"sgld_repulsive"``: drift ``-D grad H + Gamma`` and diffusion ``D`` (leaves the product
        target stationary); ``"uncorrected"``: the second part of ``Gamma`` dropped (the
        ``median_correction=False`` step); ``"svgd"``: SVGD as it runs, the uncorrected drift
        and no diffusion.
    normalise : bool
        ``c = 1/L``.
    noise_scale : float
        Multiplies the diffusion and nothing else (``>= 0``; 1 for the sampler): a wrong noise
        scale ``s`` leaves the residual ``(1 - s)`` times that of the noiseless drift.

    Returns
    -------
    drift : ndarray, shape ``(n, L d)``
    diffusion : ndarray, shape ``(n, L d, L d)``
        Both zero at states whose median distance is 0, where ``h`` is 0 and the kernel is
        undefined (:func:`median_regular` keeps away from them).
    """
    pts = np.asarray(points, float)
    if pts.ndim != 2 or not np.all(np.isfinite(pts)):
        raise ParameterError("points", f"points must be a finite (n, L d) array, got shape {pts.shape}")
    n_part = _check_particles(pts.shape[1], n_particles)
    if kind not in MEDIAN_KINDS:
        raise ParameterError("kind", f"kind must be one of {MEDIAN_KINDS}, got {kind!r}")
    if not (math.isfinite(noise_scale) and noise_scale >= 0):
        raise ParameterError("noise_scale", f"noise_scale must be finite and >= 0, got {noise_scale}")
    z, diff, sq, iu, middle, med, _ = _pair_geometry(pts, n_part)
    n, d = z.shape[0], z.shape[2]
    log_l = math.log(n_part)
    ok = med > 0
    h = np.where(ok, med, 1.0) / log_l
    kern = np.exp(-sq / h[:, None, None])
    grads = np.asarray(grad_u(z.reshape(n * n_part, d)), float).reshape(n, n_part, d)
    drift = -np.einsum("nij,nja->nia", kern, grads)
    drift += (2.0 / h)[:, None, None] * np.einsum("nij,nija->nia", kern, diff)
    if kind == "sgld_repulsive":
        weighted = kern * sq
        rows = np.arange(n)
        for sel in middle:  # each middle pair carries half of the median: d med / d z_p = z_p - z_q
            p, q = iu[0][sel], iu[1][sel]
            w = weighted[rows, :, p] - weighted[rows, :, q]  # (n, L)
            drift += (w / (h**2 * log_l)[:, None])[:, :, None] * (z[rows, p] - z[rows, q])[:, None, :]
    c = 1.0 / n_part if normalise else 1.0
    drift = c * drift.reshape(n, n_part * d)
    scale = 0.0 if kind == "svgd" else c * noise_scale
    diffusion = scale * np.einsum("nij,ab->niajb", kern, np.eye(d)).reshape(n, n_part * d, n_part * d)
    drift[~ok] = 0.0
    diffusion[~ok] = 0.0
    return drift, diffusion


def median_generator(
    g: Grid,
    grad_u: Callable,
    n_particles: int,
    kind: str = "sgld_repulsive",
    normalise: bool = True,
    noise_scale: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Drift and diffusion of ``L`` particles with the median bandwidth on a grid, for :func:`operator`.

    The grid has ``L d <= 4`` dimensions, particle-major; see :func:`median_fields` for the
    fields and ``kind``. :func:`median_regular` gives the nodes where they are smooth.
    """
    drift, diffusion = median_fields(g.points(), grad_u, n_particles, kind, normalise, noise_scale)
    return (
        np.moveaxis(drift, 0, -1).reshape((g.dim,) + g.shape),
        np.moveaxis(diffusion, 0, -1).reshape((g.dim, g.dim) + g.shape),
    )


def median_regular(points, n_particles: int, min_distance: float, min_gap: float = 0.0) -> np.ndarray:
    """Which states lie where the median bandwidth's fields are smooth, with a margin.

    The median is continuous but has kinks where its middle pair changes (two distances tie
    around the middle) and is 0 where the middle pair coincides. A state is kept when the
    middle pair's distance is at least ``min_distance`` and every sorted pair distance next to
    the middle one(s) differs from it by at least ``min_gap``. A finite-difference stencil of
    spacing ``Delta`` moves each pair distance by at most ``2 Delta``, so with
    ``min_gap >= 4 Delta`` it sees one smooth piece.

    Returns a boolean array of shape ``(n,)``.
    """
    pts = np.asarray(points, float)
    n_part = _check_particles(pts.shape[1], n_particles)
    rho = positive_float("min_distance", min_distance)
    if not (math.isfinite(min_gap) and min_gap >= 0):
        raise ParameterError("min_gap", f"min_gap must be finite and >= 0, got {min_gap}")
    dist = np.sqrt(_pair_geometry(pts, n_part)[-1])
    n_pairs = dist.shape[1]
    lo, hi = (n_pairs - 1) // 2, n_pairs // 2
    keep = np.sqrt(0.5 * (dist[:, lo] ** 2 + dist[:, hi] ** 2)) >= rho
    if lo > 0:
        keep &= dist[:, lo] - dist[:, lo - 1] >= min_gap
    if hi < n_pairs - 1:
        keep &= dist[:, hi + 1] - dist[:, hi] >= min_gap
    return keep


def local_residual(fields: Callable, log_density: Callable, points, spacing: float) -> np.ndarray:
    r"""``(L pi)(z) / pi(z)`` at each state by the central-difference stencil of :func:`operator`.

    At each state ``z`` the operator's stencils (first differences ``(f_+ - f_-) / 2 Delta``,
    second ``(f_+ - 2 f + f_-) / Delta^2``, mixed as the product of two first differences) are
    applied on the ``3^m`` nodes ``z + Delta {-1, 0, 1}^m`` only: the same value as
    :func:`residual` at the centre of ``grid(z - Delta, z + Delta, 3)``, without a grid over
    the whole box. A sampler that leaves ``pi`` stationary gives a value that falls like
    ``Delta^2`` at every state where its fields are smooth.

    Parameters
    ----------
    fields : callable
        Maps ``(n, m)`` states to ``(drift (n, m), diffusion (n, m, m))``, as :func:`median_fields`.
    log_density : callable
        Maps ``(n, m)`` states to ``log pi`` up to a constant, shape ``(n,)``.
    points : array_like, shape ``(n, m)``
        The states (``m <= 6``).
    spacing : float
        ``Delta > 0``.
    """
    pts = np.asarray(points, float)
    if pts.ndim != 2 or not 1 <= pts.shape[1] <= 6 or not np.all(np.isfinite(pts)):
        raise ParameterError("points", f"points must be a finite (n, m) array with 1 <= m <= 6, got {pts.shape}")
    step = positive_float("spacing", spacing)
    n, m = pts.shape
    offsets = np.stack(np.meshgrid(*([np.arange(-1, 2)] * m), indexing="ij"), axis=-1).reshape(-1, m)
    nodes = (pts[:, None, :] + step * offsets[None]).reshape(-1, m)
    drift, diffusion = fields(nodes)
    log_pi = np.asarray(log_density(nodes), float).reshape(n, -1)
    rel = np.exp(log_pi - log_pi[:, [offsets.shape[0] // 2]])  # pi / pi(z) at the nodes
    mu_q = np.asarray(drift, float).reshape(n, -1, m) * rel[:, :, None]
    d_q = np.asarray(diffusion, float).reshape(n, -1, m, m) * rel[:, :, None, None]
    index = {tuple(o): k for k, o in enumerate(offsets)}

    def at(*moves):
        off = [0] * m
        for axis, sign in moves:
            off[axis] += sign
        return index[tuple(off)]

    out = np.zeros(n)
    centre = at()
    for i in range(m):
        out -= (mu_q[:, at((i, 1)), i] - mu_q[:, at((i, -1)), i]) / (2 * step)
        out += (d_q[:, at((i, 1)), i, i] - 2 * d_q[:, centre, i, i] + d_q[:, at((i, -1)), i, i]) / step**2
        for j in range(m):
            if j != i:
                for a in (1, -1):
                    for b in (1, -1):
                        out += a * b * d_q[:, at((i, a), (j, b)), i, j] / (4 * step**2)
    return out


def _svgd_velocity_1d(z: np.ndarray, h: float | None, weight: np.ndarray | None = None) -> np.ndarray:
    """SVGD's velocity ``(1/L) sum_j [-K_ij z_j + (2/h)(z_i - z_j) K_ij]`` on ``N(0, 1)`` in one dimension.

    With ``weight``, ``z`` holds clusters of coinciding particles, ``weight[c]`` of them at
    ``z[c]``: the sum runs over clusters with those multiplicities, and the median bandwidth
    over the expanded particles.
    """
    w = np.ones(z.size) if weight is None else weight
    diff = z[:, None] - z[None, :]
    sq = diff**2
    if h is None:  # the median heuristic, evaluated at z as the sampler does (no derivative of h)
        full = np.repeat(z, w.astype(int))
        n = full.size
        h = float(np.median(((full[:, None] - full[None, :]) ** 2)[np.triu_indices(n, 1)])) / math.log(n)
        if not h > 0:
            raise RuntimeError("the median distance of the SVGD particles fell to 0")
    kern = np.exp(-sq / h) * w[None, :]
    return (-kern @ z + (2.0 / h) * np.sum(kern * diff, axis=1)) / w.sum()


def svgd_fixed_point(n_particles: int, variance: float = 1.0, bandwidth: float | str = "median") -> np.ndarray:
    r"""The positions at which ``L`` SVGD particles on ``N(0, s^2)`` in one dimension stand still.

    SVGD's update ("Stochastic Gradient MCMC with Repulsive Forces", eqs. 4 and 6, with the
    kernel term repelling) stops where, for every ``i``,

    .. math::

        \sum_j \Big[-K_{ij}\,\frac{z_j}{s^2} + \frac{2}{h}(z_i - z_j) K_{ij}\Big] = 0,
        \qquad K_{ij} = e^{-(z_i - z_j)^2 / h},

    solved here numerically (SciPy's ``root`` from the target's quantiles; the solution is
    symmetric about 0). Scaling ``z`` by ``s`` maps the problem with ``(s^2, h)`` to the one with
    ``(1, h / s^2)``, so the relative shortfall of the particles' variance depends on ``L``
    and ``h / s^2`` only, and on ``L`` alone with the median bandwidth
    ``h = median_{i<j} (z_i - z_j)^2 / log L`` (evaluated at the fixed point, as the sampler
    evaluates it at every step). For ``L = 2`` this is :func:`svgd_two_particle_fixed_point`
    (``a^2 = (h/4) log(1 + 4 s^2 / h)``), and ``a^2 = s^2 log 2`` with the median.

    Parameters
    ----------
    n_particles : int
        ``L >= 2``.
    variance : float
        ``s^2 > 0``.
    bandwidth : float or "median"
        ``h > 0``, or the median heuristic.

    Returns
    -------
    ndarray, shape ``(L,)``
        The positions, increasing.

    Raises
    ------
    RuntimeError
        If the solver does not bring ``L`` times the velocity below ``1e-10``.
    """
    from scipy import optimize, stats

    from .._validate import integer

    n = integer("n_particles", n_particles, low=2)
    # the flow holds about six (L, L) float arrays at a time
    fits_in_memory("n_particles", 48.0 * n * n, f"the pair terms of {n:,} particles")
    s2 = positive_float("variance", variance)
    if isinstance(bandwidth, str):
        if bandwidth != "median":
            raise ParameterError("bandwidth", f"bandwidth must be 'median' or a number > 0, got {bandwidth!r}")
        h = None
    else:
        h = positive_float("bandwidth", bandwidth) / s2
    z = stats.norm.ppf((np.arange(n) + 0.5) / n)
    # the flow itself (explicit Euler within its stability limit) brings z near the fixed
    # point from any start; Levenberg-Marquardt then solves the equations to rounding
    scale = 1.0 + 4.0 * n / (h if h is not None else 2.0 / math.log(n))
    for _ in range(100000):
        v = n * _svgd_velocity_1d(z, h)
        z = z + (0.5 / scale) * v
        if np.max(np.abs(v)) < 1e-8:
            break
    # particles that the flow brings together stay together (a wide kernel merges them in pairs
    # or more, slowly): solve for the clusters, each with its multiplicity
    spread = math.sqrt(h) if h is not None else float(np.std(z))
    cuts = np.flatnonzero(np.diff(np.sort(z)) > 0.05 * spread)
    groups = np.split(np.sort(z), cuts + 1)
    weight = np.array([len(g) for g in groups], float)
    centres = np.array([g.mean() for g in groups])

    def speed(x):
        return float(np.max(np.abs(n * _svgd_velocity_1d(x, h, weight))))

    best, message = centres, "flow"
    for method in ("hybr", "lm"):
        sol = optimize.root(lambda x: n * _svgd_velocity_1d(x, h, weight), best, method=method, tol=1e-15)
        if speed(sol.x) < speed(best):
            best, message = sol.x, sol.message
    if not speed(best) < 1e-10:
        raise RuntimeError(f"no SVGD fixed point found for L = {n}, h / s^2 = {h}: {message}")
    z = np.sort(np.repeat(best, weight.astype(int)))
    return math.sqrt(s2) * z


def svgd_variance_shortfall(n_particles: int, bandwidth: float | str = "median", variance: float = 1.0) -> float:
    """``1 - (1/L) sum_i z_i^2 / s^2`` at SVGD's fixed point on ``N(0, s^2)`` in one dimension.

    The fraction of the target's variance that ``L`` particles at rest miss (Proposition 3 of
    "Stochastic Gradient MCMC with Repulsive Forces" says the product target is not SVGD's
    stationary law; this is by how much the spread falls short). See :func:`svgd_fixed_point`.
    """
    z = svgd_fixed_point(n_particles, variance, bandwidth)
    return float(1.0 - np.mean(z**2) / variance)
