"""The public entry point: :func:`sample` runs any registered method on any target.

:func:`sample` checks its arguments, prepares the run (:func:`sgsim.driver.prepare`), draws the
initial state, lets the run driver (:mod:`sgsim.driver`) advance the replicas on the CPU or the
GPU, and builds the result; :func:`replay` reruns the run a result records.

Every result records its :class:`~sgsim.spec.RunSpec`; :func:`replay` reruns it.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
import warnings

import numba
import numpy as np

from . import philox
from . import rng as _rng
from . import spec as _spec
from . import targets as _targets
from ._validate import ParameterError, ParameterTypeError, boolean, finite_array, integer
from .driver import (
    PARALLEL_PARTICLES,
    Run,
    _allocate,
    _check_memory,
    _Keeper,
    _prepare,
    execute,
    prepare,
    run_chain,
    stream_scheme,
)
from .integrators import METHODS
from .integrators import ORIGINS as METHOD_ORIGINS
from .results import RunOutput, groups_of, to_inference_data
from .schedules import from_description

__all__ = [
    "sample",
    "replay",
    "DivergenceError",
    "ReplayMismatchError",
    "Run",
    "prepare",
    "run_chain",
    "PARALLEL_PARTICLES",
]


class DivergenceError(FloatingPointError):
    """Chains diverged: a state became non-finite, or ``theta`` left the divergence bound.

    The message's first advice depends on where the run's largest step stood against the
    method's stability limit on the target (``step_ratio``, the largest step over the limit):
    at half the limit or more, a smaller step; well inside it, the likelier causes are a bound
    too tight for the target, a gradient wrong where the chain went, or large gradient noise;
    with no known limit, both.

    Attributes
    ----------
    chains : dict
        Chain index -> the 1-based step at which it diverged.
    reasons : dict
        Chain index -> what was seen (``"non-finite state"`` or ``"|theta_i| = ... > bound"``).
    step_ratio : float or None
        The run's largest step over the method's stability limit on the target; None where
        no limit is known.
    """

    def __init__(
        self,
        chains: dict[int, int],
        method: str,
        target: str,
        reasons: dict[int, str] | None = None,
        step_ratio: float | None = None,
    ):
        self.chains = dict(chains)
        self.reasons = dict(reasons or {})
        self.step_ratio = step_ratio
        where = ", ".join(
            f"chain {c} at step {k}" + (f" ({self.reasons[c]})" if c in self.reasons else "")
            for c, k in sorted(chains.items())
        )
        super().__init__(f"{method} on {target} diverged: {where}. {_divergence_advice(step_ratio)}")


def _divergence_advice(step_ratio: float | None) -> str:
    bound = (
        "if the draws were healthy, the divergence bound is too tight for this target: declare its scale "
        "(extras['scale'] = (location, spread)) or pass divergence_bound (a number, or None for non-finite states "
        "only)"
    )
    mark = "; on_divergence='mark' keeps the other chains."
    if step_ratio is None:
        return f"No stability limit is known for this target: reduce the step size, or, {bound}{mark}"
    if step_ratio >= 0.5:
        return (
            f"The largest step is {step_ratio:.0%} of the method's stability limit on this target: reduce the step "
            f"size{mark}"
        )
    return (
        f"The largest step is only {step_ratio:.0%} of the method's stability limit on this target, so the step "
        f"alone is an unlikely cause: {bound}; or the gradient may be wrong where the chain went (check_gradient), "
        f"or its noise large{mark}"
    )


# ----------------------------------------------------------------------------- the public call


def _initial(name, value, lead: tuple[int, ...], member: tuple[int, ...], default):
    if value is None:
        return default()
    arr = finite_array(name, value)
    if arr.shape == member:
        return np.ascontiguousarray(np.broadcast_to(arr, lead + member))
    if arr.shape != lead + member:
        raise ParameterError(
            name, f"{name} must have shape {member} or (n_chains,) + {member} = {lead + member}, got {arr.shape}"
        )
    return np.ascontiguousarray(arr)


def sample(
    target,
    method,
    n_steps=None,
    *,
    n_chains=1,
    n_particles=None,
    seed=None,
    init=None,
    init_velocity=None,
    burn_in=0,
    thin=1,
    storage="draws",
    schedule=None,
    noise_correction=False,
    on_divergence="raise",
    divergence_bound="auto",
    n_threads=None,
    progress=False,
    log_density=False,
    backend="cpu",
    precision=None,
    check_gradient=0,
    stream=None,
    **options,
):
    """Run ``n_chains`` replicas of ``method`` on ``target``.

    Parameters
    ----------
    target : Target or str
        A :class:`sgsim.targets.Target` or a registered name (``"mixture_25"``, ...).
    method : str
        A registered method (``sgsim.METHODS``): ``"sgld"``, ``"sghmc"``, ``"csgld"``,
        ``"csghmc"``, ``"svgd"``, ``"sgld_repulsive"``, the constant-SGD family ``"sgd"``,
        ``"momentum_sgd"``, ``"sgld_wt"``, ``"sgfs"``, ``"iasg"`` (learning rate on the
        averaged loss ``U / N``; see :ref:`theory-sgdvi-samplers`), ...
    n_steps : int
        Number of steps ``K``; may be omitted when ``schedule`` is given.
    n_chains : int
        Number of independent replicas, >= 1: chains, or ensembles of ``n_particles``.
    n_particles : int, optional
        Interacting methods (SVGD): particles per ensemble, >= 2. Required for them, refused
        by the others.
    seed : int or None
        Non-negative seed; ``None`` draws fresh entropy. The seed used is recorded in
        ``result.attrs["seed"]``. Chain ``c`` gives the same bits whatever ``n_chains`` and
        ``n_threads`` are (see ``stream``).
    init : array_like, optional
        Initial positions: shape ``(d,)`` or ``(n_chains, d)`` for chains, ``(n_particles, d)``
        or ``(n_chains, n_particles, d)`` for ensembles; finite. By default each chain (or
        particle) draws uniformly from the target's initial box with its own stream.
    init_velocity : array_like, optional
        SGHMC only: initial ``v_0`` (zero by default), shaped like ``init``.
    burn_in : int
        Steps at the start whose draws are discarded, >= 0.
    thin : int
        Keep every ``thin``-th collected draw, >= 1.
    storage : {"draws", "final", "moments"}
        Keep every kept draw (default), only the final state, or per chain the running mean
        and covariance of the kept draws (``result.moments``).
    schedule : Schedule, optional
        An explicit schedule (e.g. :func:`sgsim.schedules.polynomial_decay`); replaces the
        method's schedule options.
    noise_correction : bool
        Reduce the injected noise by the target's emulated gradient-noise covariance
        ``grad_noise_cov`` so the total noise is exact (:mod:`sgsim.dynamics`). It does not
        see the noise of a genuine minibatch gradient (``target.stochastic_grad_u``).
    on_divergence : {"raise", "mark"}
        A chain that diverges (see ``divergence_bound``) stops. ``"raise"`` (default) raises
        :class:`DivergenceError` naming each such chain, the step and what was seen;
        ``"mark"`` warns, keeps the other chains, fills the diverged chain's remaining draws
        with NaN and records ``sample_stats["diverged"]``.
    divergence_bound : "auto", float or None
        A chain diverges when its state becomes non-finite or some ``|theta_i|`` exceeds this
        bound. ``"auto"`` (default) takes the target's, on its own scale
        (:meth:`sgsim.targets.Target.divergence_bound`: 20 of its known standard deviations
        beyond its known locations, scaled by the square root of the run's largest temperature
        above 1, and at least four times the distance from the initial box to the mass; five
        times that for a method whose stationary law is not the target's, the constant-SGD
        family; ``10^4`` times the box for a target that declares nothing of its scale); a
        number > 0 sets it; None checks only for non-finite states. Recorded in the result.

        Before any work the schedule is also checked against the method's stability limit on
        the target (from :meth:`sgsim.targets.Target.curvature_bound`, where one is known): a run
        whose every step is beyond it is refused (a ``ParameterError`` naming ``step_size`` and
        the limit), one beyond it on at least half of its steps warns
        (:class:`sgsim.algorithms.StepSizeWarning`), one beyond it on fewer steps (a cyclical
        schedule's first steps of each cycle) runs. The keyword ``step_check="warn"`` turns the
        refusal into a warning, ``step_check="ignore"`` skips the check.
    n_threads : int, optional
        Threads that run replicas (or, for large ensembles, particle loops); numba's thread
        count by default. Never changes the result. Independent chains of fewer than
        ``sgsim.driver.THREAD_MIN_WORK`` chain-steps in all (20,000) run on one thread, which
        is quicker than handing their few blocks to others.
    progress : bool
        Show a tqdm progress bar.
    log_density : bool
        Also record ``sample_stats["lp"]``, the target's log density at every draw (off by
        default: on the 25-Gaussian mixture it costs more than the sampling itself).
    check_gradient : int
        After the run, check the target's gradient against finite differences of its log
        density (:func:`sgsim.targets.check_gradient`) at this many kept draws (the final
        states for ``storage="final"`` or ``"moments"``), spread over the healthy chains: a
        gradient that is wrong only where the chains went is named, with the parameter and
        the point. 0 (default): no check.
    backend : {"cpu", "gpu", "gpu-host"}
        Where the chains run: the compiled CPU kernels (default); ``"gpu"``, one CUDA thread
        per chain (:mod:`sgsim.gpu`; needs ``pip install "sgsim[gpu]"`` and a CUDA device), for
        the independent-chain methods on the synthetic targets; ``"gpu-host"``, the GPU kernel
        built for this CPU, to check it without a GPU. The GPU path's chains draw Philox
        normals: they agree with the CPU path's in law, not in bits.
    precision : {"float32", "float64"}, optional
        The GPU path's floating-point type: ``"float32"`` by default (the hardware's fast
        path), or ``"float64"``. The CPU path runs in ``"float64"`` only.
    stream : {"philox", "pcg64"}, optional
        Where the steps' normals come from. ``"philox"``, the default wherever it applies:
        counter-based Philox4x32-10 streams (:mod:`sgsim.philox`), normal ``k d + i`` of chain
        ``c`` a fixed function of ``(seed, c, k d + i)``, the same on the CPU and the GPU path
        (in float64, to the last bits of the logarithm and sine). ``"pcg64"``: a PCG64 stream
        per chain with NumPy's ziggurat (``sgsim.rng``), what every run used before, what
        interacting ensembles and targets that draw minibatches or gradient noise use (the
        default for them), and what a result file without a recorded scheme replays with.
        Initial points are drawn from PCG64 streams under either. Recorded in
        ``result.attrs["stream"]``.
    **options
        Method options: ``step_size`` (``alpha`` or ``alpha_0``), ``temperature``; cyclical
        methods: ``n_cycles``, ``explore_fraction``, ``skip_per_cycle``; SGHMC: ``friction``
        (``eta``), ``gamma_hat``; SVGD: ``bandwidth``, ``normalise``; ``sgd``/``sgfs``:
        ``preconditioner`` (and ``injected_cov``); ``momentum_sgd``: ``damping``; ``iasg``:
        ``window``, ``warmup``.

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
        An ``arviz.InferenceData`` under ArviZ 0.x (Python 3.10 and 3.11), an
        ``xarray.DataTree`` under ArviZ 1.x (Python >= 3.12): the same groups, read alike
        (``result.posterior["theta"]``, ``result["moments"]``, ``result.attrs``); list them
        with :func:`sgsim.results.groups_of`. See :mod:`sgsim.results` for the groups.
        ``attrs["sgsim_config"]`` holds the run's spec (enough to :func:`replay` it), with its
        arrays in the ``run_spec`` group.

    Examples
    --------
    Four chains of SGLD on the two-dimensional standard Gaussian, the first 500 of 2000
    steps discarded:

    >>> import numpy as np
    >>> import sgsim
    >>> result = sgsim.sample("standard_gaussian", "sgld", 2000, n_chains=4, step_size=0.05, burn_in=500, seed=1)
    >>> result.posterior["theta"].shape  # (chain, draw, dim)
    (4, 1500, 2)
    >>> print(result.attrs["method"], result.attrs["seed"])
    sgld 1
    >>> theta = result.posterior["theta"].values
    >>> bool(np.all(np.abs(theta.mean(axis=(0, 1))) < 0.3))
    True

    A cyclical method takes its schedule's options as keywords. ``storage="moments"`` keeps,
    per chain, only the running mean and covariance of the draws it would have kept (here
    the sampling stages' 3750 steps of each chain):

    >>> result = sgsim.sample(
    ...     "mixture_25", "csgld", 5000, n_chains=2, step_size=0.09, n_cycles=5, explore_fraction=0.25,
    ...     storage="moments", seed=0,
    ... )
    >>> from sgsim.results import groups_of
    >>> sorted(groups_of(result))  # the groups, under either ArviZ
    ['constant_data', 'moments']
    >>> result["moments"]["theta_cov"].shape  # (chain, dim, dim)
    (2, 2, 2)
    >>> print(result["moments"]["n_draws"].values)
    [3750 3750]
    """
    run = _prepare(
        target,
        method,
        n_steps,
        schedule=schedule,
        burn_in=burn_in,
        thin=thin,
        noise_correction=noise_correction,
        storage=storage,
        n_particles=n_particles,
        divergence_bound=divergence_bound,
        **options,
    )
    n_chains = integer("n_chains", n_chains, low=1)
    backend, precision = _check_backend(run, backend, precision)
    run = dataclasses.replace(run, stream=stream_scheme(run, stream, backend))
    executor = None
    if backend != "cpu":
        from .gpu import runner

        executor = runner.executor(backend)
        runner.check_device_memory(run, n_chains, precision, executor)
    seed = _rng.resolve_seed(seed)
    if on_divergence not in ("raise", "mark"):
        raise ParameterError("on_divergence", f"on_divergence must be 'raise' or 'mark', got {on_divergence!r}")
    n_threads = numba.get_num_threads() if n_threads is None else integer("n_threads", n_threads, low=1)
    log_density = boolean("log_density", log_density)
    check_gradient = integer("check_gradient", check_gradient, low=0)
    # sizes before any allocation: the initial states, streams, buffers and result
    _check_memory(run, n_chains, n_threads, log_density)
    tgt, alg = run.target, run.method.algorithm
    member = run.member_shape
    lead = (n_chains,)

    def default_init():
        if run.interacting:
            states = _rng.particle_states(seed, n_chains, run.n_particles or 1, _rng.INIT_STREAM).reshape(
                -1, _rng.STATE_WORDS
            )
        else:
            states = _rng.chain_states(seed, n_chains, _rng.INIT_STREAM)
        return _rng.uniform_rows(states, tgt.init_low, tgt.init_high).reshape(lead + member)

    theta0 = _initial("init", init, lead, member, default_init)
    if run.divergence_bound is not None and np.max(np.abs(theta0)) > run.divergence_bound:
        if init is None:  # drawn from the target's box: the bound is what is wrong
            raise ParameterError(
                "divergence_bound",
                f"divergence_bound {run.divergence_bound:.4g} lies inside the target's initial box (chains start at "
                f"|theta_i| up to {np.max(np.abs(theta0)):.4g}): raise it, give init, or turn it off (None)",
            )
        raise ParameterError(
            "init",
            f"init has |theta_i| = {np.max(np.abs(theta0)):.4g} beyond divergence_bound {run.divergence_bound:.4g}: "
            "move it, or raise or turn off (None) the bound",
        )
    if init_velocity is not None and "velocity" not in alg.state:
        raise ParameterTypeError(
            "init_velocity", f"init_velocity applies to SGHMC methods only, not {run.method.name!r}"
        )
    given = {}
    if init_velocity is not None:
        given["velocity"] = _initial("init_velocity", init_velocity, lead, member, lambda: None)
    state0 = list(alg.initial_state(theta0, given, run.options))
    if run.interacting and run.options.get("bandwidth") == "median":
        spread = np.ptp(theta0, axis=1).max(axis=-1)
        if np.any(spread == 0):
            raise ParameterError("init", "the particles of an ensemble coincide: the median bandwidth would be 0")
    if executor is not None:  # the GPU path's streams are counters: no state to hold
        rngs = np.zeros((n_chains, 0), np.uint64)
    elif run.interacting:
        rngs = _rng.particle_states(seed, n_chains, run.n_particles or 1)
    elif run.stream == "philox":
        rngs = philox.states(seed, np.arange(n_chains))
    else:
        rngs = _rng.chain_states(seed, n_chains)
    buf = _allocate(run, n_chains, state0, rngs)
    keeper = _Keeper(run)

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=run.schedule.n_steps * n_chains, desc=f"{run.method.name} on {tgt.name}", unit="step")
    t0 = time.perf_counter()
    try:
        device = execute(run, buf, keeper, n_threads, bar, backend, executor, seed, precision)
    finally:
        if bar is not None:
            bar.close()
    elapsed = time.perf_counter() - t0

    # only the failed chains are visited: a Python loop over 10^7 chains would cost a second
    failed = {int(c): int(buf.failed[c]) + 1 for c in np.flatnonzero(buf.failed >= 0)}
    reasons = {c: _divergence_reason(buf.state[c], run.divergence_bound) for c in failed}
    if failed and on_divergence == "raise":
        raise DivergenceError(failed, run.method.name, tgt.name, reasons, run.step_ratio)
    if check_gradient:
        _check_gradient_at_draws(run, buf, check_gradient)
    if failed:
        warnings.warn(
            str(DivergenceError(failed, run.method.name, tgt.name, reasons, run.step_ratio)),
            RuntimeWarning,
            stacklevel=2,
        )
    if alg.report is not None:
        note = alg.report({name: buf.stats_now[:, q] for q, name in enumerate(alg.stats)})
        if note:
            warnings.warn(note, RuntimeWarning, stacklevel=2)
    where = (backend, precision, device)
    return _result(run, buf, keeper, seed, n_chains, theta0, failed, elapsed, log_density, init, init_velocity, where)


def _check_gradient_at_draws(run: Run, buf, n: int) -> None:
    """The gradient check at ``n`` kept draws (or final states) of the healthy chains."""
    from .targets import check_gradient

    healthy = buf.failed < 0
    kept = buf.out if run.storage == "draws" else buf.state[:, run.method.algorithm.kept_row][:, None]
    points = kept[healthy].reshape(-1, run.target.dim)
    points = points[np.all(np.isfinite(points), axis=1)]
    if points.shape[0]:
        which = np.unique(np.linspace(0, points.shape[0] - 1, min(n, points.shape[0])).astype(np.int64))
        check_gradient(run.target, points[which], coords=run.target.dim)


def _check_backend(run: Run, backend, precision) -> tuple[str, str]:
    """Validate ``backend`` and ``precision`` for ``run`` before any work; return them resolved."""
    from .gpu.kernels import PRECISIONS, supported
    from .gpu.runner import BACKENDS

    if backend not in BACKENDS:
        raise ParameterError("backend", f"backend must be one of {BACKENDS}, got {backend!r}")
    if precision is None:
        precision = "float64" if backend == "cpu" else "float32"
    if precision not in PRECISIONS:
        raise ParameterError("precision", f"precision must be one of {PRECISIONS}, got {precision!r}")
    if backend == "cpu":
        if precision != "float64":
            raise ParameterError(
                "precision", f"the CPU kernels run in float64: precision={precision!r} needs backend='gpu'"
            )
        return backend, precision
    why = supported(run)
    if why is not None:
        raise ParameterError("backend", f"backend={backend!r}: {why}; use backend='cpu'")
    return backend, precision


def _divergence_reason(state: np.ndarray, bound: float | None) -> str:
    # the replica's state as the loop left it: the step that diverged
    if not np.all(np.isfinite(state)):
        return "non-finite state"
    return f"|theta_i| reached {np.max(np.abs(state[0])):.3g} > divergence_bound {bound:.4g}"


def _result(run, buf, keeper, seed, n_chains, theta0, failed, elapsed, log_density, init, init_velocity, where):
    from . import __version__

    backend, precision, device = where

    tgt, alg = run.target, run.method.algorithm
    # per draw for the storage modes that keep draws; moments keep diverged_at per chain only
    n_draws = 0 if run.storage == "moments" else run.n_draws
    diverged = np.zeros((n_chains, n_draws), bool)
    if run.storage == "draws":
        theta = buf.out
    elif run.storage == "final":
        theta = buf.state[:, alg.kept_row][:, None].copy()
    else:
        theta = None
    for c, k in failed.items():
        diverged[c] = keeper.kept_steps + 1 >= k
        if theta is not None and run.storage == "draws":
            theta[c, diverged[c]] = np.nan  # never written by the kernel
        if n_draws and not diverged[c].any():
            # diverged after its last kept draw: that draw stands, and is marked all the same
            diverged[c, -1] = True
    chain_stats: dict = {"diverged": diverged}
    if run.interacting:
        for q, name in enumerate(alg.stats):
            values = buf.stats_out[..., q] if run.storage == "draws" else np.full((n_chains, n_draws), np.nan)
            chain_stats[name] = values
    if log_density and theta is not None:
        finite = np.all(np.isfinite(theta), axis=-1)
        lp = tgt.log_density(np.where(finite[..., None], theta, 0.0))
        chain_stats["lp"] = np.where(finite, lp, np.nan)
    constants = {"init": theta0}
    for i, name in enumerate(alg.state):
        constants[f"final_{name}"] = buf.state[:, i]
    diverged_at = np.zeros(n_chains, np.int64)
    for c, k in failed.items():
        diverged_at[c] = k
    constants["diverged_at"] = diverged_at
    if run.interacting:
        for q, name in enumerate(alg.stats):
            constants[f"final_{name}"] = buf.stats_now[:, q]
    moments = None
    if run.storage == "moments":
        shape = (n_chains, run.n_particles) if run.interacting else (n_chains,)
        count = buf.count.reshape(shape)
        with np.errstate(invalid="ignore", divide="ignore"):
            cov = buf.m2 / np.maximum(buf.count - 1, 1)[:, None, None]
        member = run.member_shape
        moments = {
            "theta_mean": buf.mean.reshape((n_chains,) + member),
            "theta_cov": cov.reshape((n_chains,) + member + (tgt.dim,)),
            "n_draws": count.reshape(n_chains, -1)[:, 0],
        }
    # the target as given: where the algorithm's gradient estimator replaced it, replay rebuilds this one
    given = run.given_target or tgt
    spec = _spec.RunSpec(
        target=given.spec,
        target_name=tgt.name,
        target_fingerprint=given.fingerprint(),
        method=run.method.name,
        method_module=METHOD_ORIGINS.get(run.method.name),
        options={k: v for k, v in run.options.items() if k != "n_particles"},
        schedule=run.schedule.description,
        schedule_arrays=None if run.schedule.is_formula else dict(run.schedule.arrays()),
        seed=seed,
        n_chains=n_chains,
        n_particles=run.n_particles,
        burn_in=run.burn_in,
        thin=run.thin,
        storage=run.storage,
        init=None if init is None else np.asarray(theta0),
        init_velocity=None
        if init_velocity is None
        else np.array(np.broadcast_to(np.asarray(init_velocity, float), theta0.shape)),
        log_density=log_density,
        grad_noise_cov=tgt.grad_noise_cov.tolist(),
        stochastic_gradient=(
            tgt.extras.get("stochastic_gradient", "stochastic_grad_u")
            if tgt.stochastic_grad_u is not None or (tgt.batched is not None and tgt.batched.stochastic)
            else None
        ),
        divergence_bound=run.divergence_bound,
        backend=backend,
        precision=precision,
        stream=run.stream,
    )
    text, arrays = _spec.encode(spec)
    attrs = {
        "seed": seed,
        "sgsim_version": __version__,
        "numba_version": numba.__version__,
        "numpy_version": np.__version__,
        "sampling_time_s": elapsed,
        "sgsim_config": text,
        "method": run.method.name,
        "target": tgt.name,
        "storage": run.storage,
        "coupling": alg.coupling,
        "divergence_bound": "none" if run.divergence_bound is None else run.divergence_bound,
        "stream": run.stream,
        "rng": (
            "PCG64 per chain from SeedSequence(seed, spawn_key=(chain, 0)); per particle (chain, 0, particle); "
            "NumPy's ziggurat normals"
            if run.stream == "pcg64"
            else "Philox4x32-10 per chain, counter (normal block, chain), key from SeedSequence(seed); Box-Muller "
            "normals; initial points from PCG64 streams SeedSequence(seed, spawn_key=(chain, 1))"
        ),
        "backend": backend,
        "precision": precision,
    }
    if device is not None:
        attrs["device"] = device
    output = RunOutput(
        storage=run.storage,
        theta=theta,
        draw_stats=keeper.stats,
        chain_stats=chain_stats,
        constants=constants,
        moments=moments,
        attrs=attrs,
        spec_arrays=arrays,
        named=None if theta is None or tgt.parameters is None else tgt.named(theta),
    )
    return to_inference_data(output)


# ----------------------------------------------------------------------------- replay


def _allowed(module: str, allow) -> bool:
    """Whether ``module`` is sgsim's own or within one of the packages or modules named in ``allow``."""
    names = ("sgsim", *allow)
    return any(module == name or module.startswith(name + ".") for name in names)


def _check_allow(allow) -> tuple[str, ...]:
    if isinstance(allow, str):
        allow = (allow,)
    try:
        names = tuple(allow)
    except TypeError:
        raise ParameterTypeError("allow", f"allow must be a list of module names, got {allow!r}") from None
    for name in names:
        if not isinstance(name, str) or not all(part.isidentifier() for part in name.split(".")):
            raise ParameterError("allow", f"allow must hold module names such as 'mypackage.samplers', got {name!r}")
    return names


def _replay_method(spec: _spec.RunSpec, allow: tuple[str, ...]) -> str:
    """The recorded method's name, once it is registered here: imported only where ``allow`` permits."""
    name, module = spec.method, spec.method_module
    if name in METHODS:
        here = METHOD_ORIGINS.get(name)
        if module is not None and here is not None and here != module:
            raise ParameterError(
                "method",
                f"the result was made by method {name!r} registered by {module!r}, but in this process {name!r} "
                f"is registered by {here!r}: not the same sampler",
            )
        return name
    if module is None or module == "__main__":
        raise ParameterError(
            "method",
            f"the result was made by method {name!r}, which is not registered here and was defined in a script "
            "or notebook: register the same method first (define it in an importable module to replay it anywhere)",
        )
    if not _allowed(module, allow):
        raise ParameterError(
            "method",
            f"the result was made by method {name!r}, registered by module {module!r}, which this process has not "
            f"imported. Importing a module runs its code, so replay does so only when asked: import {module} "
            f"first, or pass replay(..., allow=[{module.split('.')[0]!r}])",
        )
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ParameterError(
            "method", f"method {name!r} is registered by module {module!r}, which cannot be imported here: {exc}"
        ) from None
    if name not in METHODS:
        raise ParameterError("method", f"importing {module!r} did not register a method named {name!r}")
    return name


def replay(source, *, target=None, allow=(), on_mismatch="raise", n_threads=None, progress=False):
    """Run again the run that produced ``source``, bit for bit.

    Parameters
    ----------
    source : str, path-like, arviz.InferenceData or xarray.DataTree
        A result file written by :func:`sgsim.io.write_result` (or ``sgsim run``), or a result.
    target : Target, optional
        The target to use instead of rebuilding it from the recorded spec: needed for a
        target built by hand (``sgsim.targets.Target(...)``), which has no spec. It must be
        the target that was sampled (its fingerprint is checked).
    allow : sequence of str
        Modules (or packages) outside sgsim that replay may import: the module that registers
        a sampler of one's own, or that holds a ``"module:function"`` target factory. A result
        file names these itself, and importing or calling them runs their code, so replay
        imports nothing outside sgsim unless it is named here (or, for a sampler, already
        registered in this process); otherwise it says what the file asks for.
    on_mismatch : {"raise", "warn"}
        What to do when the replayed draws differ from the recorded ones (see Notes):
        raise :class:`~sgsim.sampling.ReplayMismatchError` (which holds the new result), or warn and
        return it.
    n_threads : int, optional
        Threads; never changes the result.
    progress : bool
        Show a progress bar.

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
        The new result (as :func:`sample` returns it), whose draws equal the recorded ones bit for bit.

    Raises
    ------
    ValueError
        If the target cannot be rebuilt (built by hand and not given), or the rebuilt or given
        target differs from the one sampled.
    sgsim.io.ResultFileError
        If the file is not an intact result (:func:`sgsim.io.read_result`), records no run spec
        that this version can read (a file written before run specs, or by a later version),
        or was written by another sgsim version and cannot be rerun here; the message names
        the version that wrote it.
    sgsim.sampling.ReplayMismatchError
        If the replayed draws differ from the recorded ones (``on_mismatch="raise"``).

    Warns
    -----
    UserWarning
        If the result was written by another sgsim version than the one running (both named).

    Notes
    -----
    Every array of the result (draws, sampler statistics, initial points, moments) is compared
    with the recorded one after the run. A CPU result must come back bit for bit. A GPU result
    (``backend="gpu"`` or ``"gpu-host"``) comes back bit for bit on the same device and
    compiler, and elsewhere to the rounding of the device's exponential, logarithm and sine,
    which a chain carries forward: there each value may differ from the recorded one by
    ``1e-9`` (float64 chains) or ``1e-4`` (float32 chains) times ``max(1, |value|)``. A
    difference beyond that is reported with where it first occurs (group, variable, chain,
    draw, coordinate), the largest absolute difference and the versions that wrote and
    replayed the result.

    The step size is not checked again against the method's stability limit (``sample``'s
    ``step_check``): a run recorded with a step beyond it, under ``step_check="ignore"`` or
    ``"warn"``, replays as it ran.

    Examples
    --------
    >>> import numpy as np
    >>> import sgsim
    >>> first = sgsim.sample("standard_gaussian", "sgld", 200, n_chains=2, step_size=0.05, seed=3)
    >>> again = sgsim.replay(first)
    >>> bool(np.array_equal(again.posterior["theta"].values, first.posterior["theta"].values))
    True

    A result file works the same way: ``sgsim.replay("run.nc")`` reads it with
    :func:`sgsim.io.read_result` and reruns it.
    """
    from . import __version__
    from .io import ResultFileError, read_result

    if on_mismatch not in ("raise", "warn"):
        raise ParameterError("on_mismatch", f"on_mismatch must be 'raise' or 'warn', got {on_mismatch!r}")
    allow = _check_allow(allow)
    path = None
    if hasattr(source, "attrs") and hasattr(source, "groups"):
        idata = source
    else:
        path = source
        idata = read_result(source)
    spec, written_by = _recorded_spec(idata, path)
    try:
        again = _rerun(spec, target, allow, n_threads, progress)
    except (ValueError, TypeError) as exc:
        if written_by == __version__:
            raise
        by = written_by or "(version not recorded)"
        raise ResultFileError(path, f"written by sgsim {by}, cannot be replayed by sgsim {__version__}: {exc}") from exc
    _compare_replay(idata, again, spec, path, written_by, on_mismatch)
    return again


def _recorded_spec(idata, path) -> tuple[_spec.RunSpec, str | None]:
    """The run spec a result records, and the sgsim version that wrote it (warned of if not this one)."""
    from . import __version__
    from .io import ResultFileError

    written_by = idata.attrs.get("sgsim_version")
    written_by = None if written_by is None else str(written_by)
    by = f"sgsim {written_by}" if written_by else "a version of sgsim that did not record itself"
    config = idata.attrs.get("sgsim_config")
    if config is None:
        raise ResultFileError(
            path, f"records no run spec (attribute sgsim_config), so it cannot be replayed; written by {by}"
        )
    arrays = {}
    if "run_spec" in groups_of(idata):
        arrays = {name: idata["run_spec"][name].values for name in idata["run_spec"].data_vars}
    try:
        spec = _spec.decode(config, arrays)
    except ValueError as exc:
        raise ResultFileError(
            path, f"cannot be replayed by sgsim {__version__}: {exc}; the file was written by {by}"
        ) from None
    if written_by != __version__:
        where = "the result" if path is None else f"result file {path}"
        warnings.warn(
            f"{where} was written by {by} and is replayed by sgsim {__version__}: the draws may differ where the "
            "versions' samplers differ",
            UserWarning,
            stacklevel=3,
        )
    return spec, written_by


def _rerun(spec: _spec.RunSpec, target, allow: tuple[str, ...], n_threads, progress):
    """Run ``spec`` again, on its target rebuilt (imports only as ``allow`` permits) or on ``target``."""
    method = _replay_method(spec, allow)
    rebuilt = target is None
    if target is None:
        if spec.target is None:
            raise ParameterError(
                "target",
                f"target {spec.target_name!r} was built by hand (sgsim.targets.Target), so the result cannot "
                "rebuild it: pass the same target as replay(..., target=...)",
            )
        factory = spec.target.factory
        if ":" in factory and not _allowed(factory.split(":")[0], allow):
            module = factory.split(":")[0]
            raise ParameterError(
                "allow",
                f"the result's target comes from the factory {factory!r}, code outside sgsim that replay would "
                f"import and call: pass replay(..., allow=[{module.split('.')[0]!r}]) if you trust it, or the "
                "target itself (replay(..., target=...))",
            )
        target = _targets.build(spec.target)
    if target.fingerprint() != spec.target_fingerprint:
        raise ParameterError(
            "target",
            f"the target {'rebuilt from the result' if rebuilt else 'given'} is not the one sampled "
            f"({spec.target_name!r}): its parameters, noise or initial box differ",
        )
    schedule = from_description(spec.schedule, spec.schedule_arrays)
    options = dict(spec.options)
    noise_correction = options.pop("noise_correction", False)
    return sample(
        target,
        method,
        schedule=schedule,
        n_chains=spec.n_chains,
        n_particles=spec.n_particles,
        seed=spec.seed,
        init=spec.init,
        init_velocity=spec.init_velocity,
        burn_in=spec.burn_in,
        thin=spec.thin,
        storage=spec.storage,
        noise_correction=noise_correction,
        log_density=spec.log_density,
        divergence_bound=spec.divergence_bound,
        backend=spec.backend,
        precision=spec.precision,
        # the GPU path has one scheme (results written before schemes were recorded say "pcg64")
        stream=spec.stream if spec.backend == "cpu" else None,
        n_threads=n_threads,
        progress=progress,
        on_divergence="mark",
        # the stability check was the recorded call's to make: a run recorded with a step beyond the
        # limit (step_check="ignore" or "warn", or written before limits were checked) reruns as it ran
        step_check="ignore",
        **options,
    )


class ReplayMismatchError(ValueError):
    """A replay whose draws differ from the recorded ones.

    Attributes
    ----------
    result : arviz.InferenceData or xarray.DataTree
        The new result.
    group, variable : str
        Where the first difference lies.
    index : dict
        The position of the first difference, by dimension (``{"chain": 1, "draw": 37, "dim": 0}``).
    max_abs_diff : float
        The largest absolute difference in that variable (inf where one value is not finite
        and the other differs).
    """

    def __init__(self, message: str, result, group: str, variable: str, index: dict, max_abs_diff: float):
        super().__init__(message)
        self.result = result
        self.group = group
        self.variable = variable
        self.index = index
        self.max_abs_diff = max_abs_diff


def _replay_tolerance(spec: _spec.RunSpec) -> float:
    # relative to max(1, |value|): see replay's Notes (the CPU kernels are deterministic to the bit)
    if spec.backend == "cpu":
        return 0.0
    return 1e-4 if spec.precision == "float32" else 1e-9


def _differ(old: np.ndarray, new: np.ndarray, tol: float) -> np.ndarray:
    """Where ``new`` differs from ``old``: bitwise (NaN equal to NaN), or beyond ``tol`` relative."""
    if old.dtype.kind not in "fc" and new.dtype.kind not in "fc":
        return old != new
    both_nan = np.isnan(old) & np.isnan(new)
    if tol == 0.0:
        return (old != new) & ~both_nan
    with np.errstate(invalid="ignore"):
        far = ~(np.abs(new - old) <= tol * np.maximum(1.0, np.abs(old)))
    return far & ~both_nan


def _compare_replay(recorded, again, spec: _spec.RunSpec, path, written_by, on_mismatch: str) -> None:
    """Compare every recorded array with the replay's; raise or warn at the first that differs."""
    from . import __version__

    tol = _replay_tolerance(spec)
    new_groups = set(groups_of(again))
    problem: tuple[str, str, dict, float, str] | None = None
    for group in groups_of(recorded):
        if group == "run_spec":
            continue
        for name, var in recorded[group].data_vars.items():
            if group not in new_groups or name not in again[group].data_vars:
                problem = (group, name, {}, np.inf, "the replay has no such variable")
                break
            old, new = np.asarray(var.values), np.asarray(again[group][name].values)
            if old.shape != new.shape:
                problem = (group, name, {}, np.inf, f"shape {new.shape} replayed, {old.shape} recorded")
                break
            bad = _differ(old, new, tol)
            if not bad.any():
                continue
            first = np.unravel_index(int(np.argmax(bad)), old.shape)
            index = {str(d): int(i) for d, i in zip(var.dims, first, strict=True)}
            with np.errstate(invalid="ignore"):
                diff = np.abs(new.astype(float) - old.astype(float))[bad]
            worst = float(np.max(np.where(np.isnan(diff), np.inf, diff)))
            where = ", ".join(f"{d} {i}" for d, i in index.items())
            problem = (
                group,
                name,
                index,
                worst,
                f"{int(bad.sum()):,} of {bad.size:,} values differ, the first at ({where}): "
                f"{old[first].item()!r} recorded, {new[first].item()!r} replayed; largest difference {worst:.3g}",
            )
            break
        if problem is not None:
            break
    if problem is None:
        return
    group, name, index, worst, detail = problem
    what = "the result" if path is None else f"result file {path}"
    expected = "bit for bit" if tol == 0.0 else f"within {tol:g} x max(1, |value|) ({spec.backend}, {spec.precision})"
    versions = f"written by sgsim {written_by or '(version not recorded)'}, replayed by sgsim {__version__}"
    message = (
        f"the replay of {what} differs from the recording ({expected} expected) in {group}.{name}: {detail} "
        f"({versions})"
    )
    if on_mismatch == "warn":
        warnings.warn(message, UserWarning, stacklevel=3)
        return
    raise ReplayMismatchError(message, again, group, name, index, worst)
