"""The public entry point: :func:`sample` runs any registered method on any target.

Chains are independent: each runs in its own calls of the compiled kernel, with its own
generator (see :mod:`sgsim.rng`), on a pool of threads (the kernels release the GIL).
Each thread takes the next chain not yet started and runs all of it, with no barrier
between the threads. A chain's steps are processed in blocks so that a progress bar can
advance; its state is carried from block to block, so the blocking never changes a bit
of the result.

All chains write into one ``(n_chains, n_draws, d)`` array, which becomes the posterior
without a copy; the schedule's per-draw statistics, the same for every chain, are stored
as read-only broadcast views. See ``benchmarks/`` for what a call costs.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np

from . import rng as _rng
from . import targets as _targets
from ._validate import finite_array, integer
from .integrators import get_method
from .integrators._base import Method, NoiseModel
from .schedules import Schedule
from .theory.exact_law import noise_coefficients

__all__ = ["sample", "DivergenceError", "ChainRun"]

_BLOCK_STEPS = 10_000


class DivergenceError(FloatingPointError):
    """A chain's state became non-finite. ``.chains`` maps chain index to the 1-based step."""

    def __init__(self, chains: dict[int, int], method: str, target: str):
        self.chains = dict(chains)
        where = ", ".join(f"chain {c} at step {k}" for c, k in sorted(chains.items()))
        super().__init__(
            f"{method} on {target} diverged (non-finite state): {where}. Reduce the step size, "
            "or pass on_divergence='mark' to keep the other chains."
        )


@dataclass
class ChainRun:
    """Everything :func:`sample` prepared for one run; also used by the tests."""

    target: _targets.Target
    method: Method
    schedule: Schedule
    options: dict
    noise: NoiseModel
    store: np.ndarray
    n_draws: int


def _noise_model(target, method, schedule, options, noise_correction) -> NoiseModel:
    v = target.grad_noise_cov
    if np.count_nonzero(v - np.diag(np.diag(v))) == 0:
        lam, basis, rotate = np.diag(v).copy(), np.eye(target.dim), False
    else:
        lam, basis = np.linalg.eigh(v)
        lam, rotate = np.clip(lam, 0.0, None), True
    alpha, temp = schedule.step_size, schedule.temperature
    factor, corrected = method.injection(options)
    friction = "friction" if "friction" in options else None
    a, c = noise_coefficients(alpha, temp, v, factor, corrected, noise_correction, friction)
    if not lam.any():
        a = np.zeros_like(alpha)  # no gradient noise: exact-gradient T = 0 steps draw nothing
    a = np.ascontiguousarray(np.broadcast_to(a, alpha.shape), dtype=np.float64)
    return NoiseModel(a=a, c=np.ascontiguousarray(c), lam=np.ascontiguousarray(lam), rotate=rotate, basis=basis)


def _store_index(schedule: Schedule, burn_in: int, thin: int) -> tuple[np.ndarray, np.ndarray]:
    keep = schedule.collect.copy()
    keep[:burn_in] = False
    steps = np.flatnonzero(keep)[::thin]
    store = np.full(schedule.n_steps, -1, dtype=np.int64)
    store[steps] = np.arange(steps.size)
    return store, steps


def _initial(name, value, n_chains, dim, default):
    if value is None:
        return default()
    arr = finite_array(name, value)
    if arr.shape == (dim,):
        return np.tile(arr, (n_chains, 1))
    if arr.shape != (n_chains, dim):
        raise ValueError(f"{name} must have shape ({dim},) or (n_chains, {dim}) = ({n_chains}, {dim}), got {arr.shape}")
    return arr


def prepare(target, method, n_steps=None, *, schedule=None, burn_in=0, thin=1, noise_correction=False, **options):
    """Validate a run's configuration and precompute its schedule, noise and storage index."""
    target = _resolve_target(target)
    method = get_method(method)
    burn_in = integer("burn_in", burn_in, low=0)
    thin = integer("thin", thin, low=1)
    sched_kw = {k: options.pop(k) for k in list(options) if k in method.schedule_options}
    dyn_kw = dict(method.dynamics_options)
    for k in list(options):
        if k in dyn_kw:
            dyn_kw[k] = options.pop(k)
    if options:
        known = sorted(set(method.schedule_options) | set(method.dynamics_options))
        raise TypeError(f"unknown option(s) for method {method.name!r}: {sorted(options)}; accepted: {known}")
    if schedule is not None:
        if not isinstance(schedule, Schedule):
            raise TypeError(f"schedule must be a sgsim.schedules.Schedule, got {type(schedule).__name__}")
        if sched_kw:
            raise TypeError(f"give either schedule or {sorted(sched_kw)}, not both")
        if n_steps is not None and n_steps != schedule.n_steps:
            raise ValueError(f"n_steps ({n_steps}) differs from the schedule's length ({schedule.n_steps})")
    else:
        if n_steps is None:
            raise TypeError("n_steps is required when no schedule is given")
        if "step_size" not in sched_kw:
            raise TypeError(f"method {method.name!r} needs step_size (or an explicit schedule)")
        schedule = method.default_schedule(n_steps, **sched_kw)
    dyn_kw = method.validate(dyn_kw)
    if noise_correction and dyn_kw.get("gamma_hat", 0.0) > 0:
        raise ValueError(
            f"gamma_hat must be 0 with noise_correction=True (the correction sets it), got {dyn_kw['gamma_hat']}"
        )
    if burn_in >= schedule.n_steps:
        raise ValueError(f"burn_in must be < n_steps ({schedule.n_steps}), got {burn_in}")
    noise = _noise_model(target, method, schedule, dyn_kw, bool(noise_correction))
    store, steps = _store_index(schedule, burn_in, thin)
    if steps.size == 0:
        raise ValueError("no draw would be kept: check burn_in, thin and the schedule's sampling stages")
    dyn_kw["noise_correction"] = bool(noise_correction)
    return ChainRun(target, method, schedule, dyn_kw, noise, store, int(steps.size)), steps


def _resolve_target(target):
    if isinstance(target, str):
        return _targets.get(target)
    if not isinstance(target, _targets.Target):
        raise TypeError(
            f"target must be a sgsim Target or the name of one ({', '.join(sorted(_targets.TARGETS))}), "
            f"got {type(target).__name__}"
        )
    return target


def run_chain(run: ChainRun, state, gen, out, k0=0, k1=None, injected=None, work=None) -> int:
    """Advance one chain in place over steps ``[k0, k1)``; return the failing step or -1.

    ``injected`` (shape ``(n_steps, d)``) replaces the generator's standard normals; ``gen``
    may then be None unless the target's gradient is stochastic (it draws its minibatches
    from ``gen``). ``work`` is the chain's copy of ``target.workspace``, updated in place;
    pass the same buffer to every block of one chain (a fresh copy is used if omitted).
    """
    k1 = run.schedule.n_steps if k1 is None else k1
    tgt = run.target
    work = tgt.new_workspace() if work is None else tgt.check_workspace(work)
    if gen is None and tgt.stochastic_grad_u is not None:
        raise TypeError(f"target {tgt.name!r} draws minibatches from the chain's generator: gen must be given")
    if injected is None:
        injected = np.empty((0, run.target.dim))
    else:
        injected = np.ascontiguousarray(injected, dtype=np.float64)
        if injected.shape != (run.schedule.n_steps, run.target.dim):
            raise ValueError(f"injected must have shape ({run.schedule.n_steps}, {run.target.dim})")
    if gen is None:
        gen = np.random.default_rng(0)  # unused: same compiled signature as a real run
    return int(
        run.method.run_chain(
            state, gen, work, tgt, int(k0), int(k1), run.schedule, run.options, run.noise, run.store, out, injected
        )
    )


def sample(
    target,
    method,
    n_steps=None,
    *,
    n_chains=1,
    seed=None,
    init=None,
    init_velocity=None,
    burn_in=0,
    thin=1,
    schedule=None,
    noise_correction=False,
    on_divergence="raise",
    n_threads=None,
    progress=False,
    log_density=False,
    **options,
):
    """Run ``n_chains`` independent chains of ``method`` on ``target``.

    Parameters
    ----------
    target : Target or str
        A :class:`sgsim.targets.Target` or a registered name (``"mixture_25"``, ...).
    method : str
        ``"sgld"``, ``"sghmc"``, ``"csgld"`` or ``"csghmc"`` (see ``sgsim.integrators.METHODS``).
    n_steps : int
        Number of steps ``K``; may be omitted when ``schedule`` is given.
    n_chains : int
        Number of independent chains, >= 1.
    seed : int or None
        Non-negative seed; ``None`` draws fresh entropy. The seed used is recorded in
        ``result.attrs["seed"]``. Chain ``c`` gives the same bits whatever ``n_chains`` and
        ``n_threads`` are (see :mod:`sgsim.rng`).
    init : array_like, optional
        Initial positions, shape ``(d,)`` or ``(n_chains, d)``, finite. By default each
        chain draws uniformly from the target's initial box with its own stream.
    init_velocity : array_like, optional
        SGHMC only: initial ``v_0`` (zero by default).
    burn_in : int
        Steps at the start whose draws are discarded, >= 0.
    thin : int
        Keep every ``thin``-th collected draw, >= 1.
    schedule : Schedule, optional
        An explicit schedule (e.g. :func:`sgsim.schedules.polynomial_decay`); replaces the
        method's schedule options.
    noise_correction : bool
        Reduce the injected noise by the target's emulated gradient-noise covariance
        ``grad_noise_cov`` so the total noise is exact (THEORY A1, A2). It does not see the
        noise of a genuine minibatch gradient (``target.stochastic_grad_u``).
    on_divergence : {"raise", "mark"}
        A chain whose state becomes non-finite stops. ``"raise"`` (default) raises
        :class:`DivergenceError` naming each such chain and step; ``"mark"`` warns, keeps
        the other chains, fills the diverged chain's remaining draws with NaN and records
        ``sample_stats["diverged"]``.
    n_threads : int, optional
        Threads that run chains; numba's thread count by default. Never changes the result.
    progress : bool
        Show a tqdm progress bar.
    log_density : bool
        Also record ``sample_stats["lp"]``, the target's log density at every draw (off by
        default: on the 25-Gaussian mixture it costs more than the sampling itself).
    **options
        Method options: ``step_size`` (``alpha`` or ``alpha_0``), ``temperature``; cyclical
        methods: ``n_cycles``, ``explore_fraction``, ``skip_per_cycle``; SGHMC: ``friction``
        (``eta``), ``gamma_hat``.

    Returns
    -------
    arviz.InferenceData
        ``posterior["theta"]`` with dims ``(chain, draw, dim)``; ``sample_stats`` with
        ``step_size``, ``temperature``, ``stage``, ``cycle``, ``step`` (1-based iteration of
        each draw), ``diverged`` and, if asked, ``lp``; ``attrs`` with the seed, method,
        target, schedule and options, enough to replay the run.
    """
    run, steps = prepare(
        target,
        method,
        n_steps,
        schedule=schedule,
        burn_in=burn_in,
        thin=thin,
        noise_correction=noise_correction,
        **options,
    )
    n_chains = integer("n_chains", n_chains, low=1)
    seed = _rng.resolve_seed(seed)
    if on_divergence not in ("raise", "mark"):
        raise ValueError(f"on_divergence must be 'raise' or 'mark', got {on_divergence!r}")
    n_threads = numba.get_num_threads() if n_threads is None else integer("n_threads", n_threads, low=1)
    d = run.target.dim
    tgt = run.target

    def default_init():
        return np.stack([_rng.init_generator(seed, c).uniform(tgt.init_low, tgt.init_high) for c in range(n_chains)])

    theta0 = _initial("init", init, n_chains, d, default_init)
    if "velocity" in run.method.state_names:
        v0 = _initial("init_velocity", init_velocity, n_chains, d, lambda: np.zeros((n_chains, d)))
    elif init_velocity is not None:
        raise TypeError(f"init_velocity applies to SGHMC methods only, not {run.method.name!r}")

    # chain c owns row c of each array; the kernels keep their working state in buffers of
    # their own and write it back when they return, so two threads never write the same
    # cache line step after step
    states = [np.array(theta0, dtype=np.float64, order="C")]
    if "velocity" in run.method.state_names:
        states.append(np.array(v0, dtype=np.float64, order="C"))
    draws = np.empty((n_chains, run.n_draws, d))
    failed: dict[int, int] = {}

    n = run.schedule.n_steps
    bounds = list(range(0, n, _BLOCK_STEPS)) + [n]
    blocks = list(itertools.pairwise(bounds))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n * n_chains, desc=f"{run.method.name} on {run.target.name}", unit="step")
    # created here rather than in the workers: Python work there holds the GIL while the
    # other thread wants it back after each kernel call, which made short chains slower
    # on two threads than on one
    gens = [_rng.chain_generator(seed, c) for c in range(n_chains)]
    lock = threading.Lock()
    queue = iter(range(n_chains))

    def work():
        # take the next chain and run all its blocks: no barrier between the threads
        while True:
            with lock:
                c = next(queue, None)
            if c is None:
                return
            state = tuple(arr[c] for arr in states)
            work = run.target.new_workspace()  # the chain's minibatch state, carried across blocks
            for k0, k1 in blocks:
                k = run_chain(run, state, gens[c], draws[c], k0, k1, work=work)
                if bar is not None:
                    with lock:
                        bar.update((k1 if k < 0 else n) - k0)
                if k >= 0:
                    failed[c] = k + 1
                    break

    t0 = time.perf_counter()
    workers = max(1, min(n_threads, n_chains))
    if workers == 1:
        work()
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for future in [pool.submit(work) for _ in range(workers)]:
                future.result()
    elapsed = time.perf_counter() - t0
    if bar is not None:
        bar.close()
    if failed and on_divergence == "raise":
        raise DivergenceError(failed, run.method.name, run.target.name)
    diverged = np.zeros((n_chains, run.n_draws), bool)
    for c, k in failed.items():
        diverged[c] = steps + 1 >= k
        draws[c, diverged[c]] = np.nan  # never written by the kernel
    if failed:
        warnings.warn(str(DivergenceError(failed, run.method.name, run.target.name)), RuntimeWarning, stacklevel=2)

    config = {
        "seed": seed,
        "method": run.method.name,
        "target": run.target.name,
        "n_chains": n_chains,
        "burn_in": burn_in,
        "thin": thin,
        "schedule": run.schedule.description,
        "options": run.options,
        "grad_noise_cov": run.target.grad_noise_cov.tolist(),
    }
    if run.target.stochastic_grad_u is not None:
        config["stochastic_gradient"] = run.target.extras.get("stochastic_gradient", "stochastic_grad_u")
    final = dict(zip(run.method.state_names, states, strict=True))
    return _to_inference_data(run, steps, draws, diverged, theta0, final, seed, config, elapsed, log_density)


def _to_inference_data(run, steps, draws, diverged, theta0, final, seed, config, elapsed, log_density):
    # The datasets are built directly: what az.from_dict would build, without its copies,
    # its per-variable coordinate handling (most of the cost of a short run) or its
    # "more chains than draws" guess, which is spurious here.
    import datetime

    import arviz as az
    import xarray as xr

    from . import __version__

    n_chains = draws.shape[0]
    sched = run.schedule

    def per_draw(x):
        # the schedule is shared by all chains: a read-only broadcast view, not n_chains copies
        return np.broadcast_to(x[steps], (n_chains, steps.size))

    stats = {
        "step_size": per_draw(sched.step_size),
        "temperature": per_draw(sched.temperature),
        "stage": per_draw(sched.stage),
        "cycle": per_draw(sched.cycle),
        "step": per_draw(np.arange(1, sched.n_steps + 1)),
        "diverged": diverged,
    }
    if log_density:
        finite = np.all(np.isfinite(draws), axis=-1)
        lp = run.target.log_density(np.where(finite[..., None], draws, 0.0))
        stats["lp"] = np.where(finite, lp, np.nan)
    attrs = {
        "seed": seed,
        "sgsim_version": __version__,
        "numba_version": numba.__version__,
        "numpy_version": np.__version__,
        "sampling_time_s": elapsed,
        "sgsim_config": json.dumps(config, sort_keys=True),
        "method": run.method.name,
        "target": run.target.name,
        "rng": "SeedSequence(seed, spawn_key=(chain, 0)) -> PCG64 per chain (Gaussian noise and minibatches)",
    }
    origin = az.rcParams["data.index_origin"]
    chain = np.arange(origin, origin + n_chains)
    draw = np.arange(origin, origin + draws.shape[1])
    dim = np.arange(run.target.dim)

    def stamped():
        # the attributes az.from_dict gives the groups it creates
        created = datetime.datetime.now(datetime.timezone.utc).isoformat()
        return {"created_at": created, "arviz_version": az.__version__, **attrs}

    posterior = xr.Dataset(
        {"theta": (("chain", "draw", "dim"), draws)},
        coords={"chain": chain, "draw": draw, "dim": dim},
        attrs=stamped(),
    )
    sample_stats = xr.Dataset(
        {k: (("chain", "draw"), v) for k, v in stats.items()},
        coords={"chain": chain, "draw": draw},
        attrs=stamped(),
    )
    # per-chain quantities (no draw dimension) go to their own group
    constant = {"init": theta0, **{f"final_{name}": value for name, value in final.items()}}
    constant_data = xr.Dataset(
        {k: (("chain", "dim"), v) for k, v in constant.items()},
        coords={"chain": np.arange(n_chains), "dim": dim},
        attrs=attrs,
    )
    return az.InferenceData(posterior=posterior, sample_stats=sample_stats, constant_data=constant_data, attrs=attrs)
