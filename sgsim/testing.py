r"""The conformance kit: everything that can be checked of a registered sampler, in one call.

:func:`check_sampler` takes any registered method, sgsim's own or one's own
(:mod:`sgsim.algorithms`), and checks

``exact_law``
    its step is affine on a linear-Gaussian target and its exact law can be read off the
    compiled code (:func:`sgsim.algorithms.affine_steps`); skipped, saying why, for steps that
    are not affine (interacting particles);
``consistency``
    for an ``asymptotically_exact`` algorithm, the stationary law of its step at a small step
    size is the target's, within 2% (a consistent sampler is within ``O(step)``, here about
    0.1%; a noise scale off by 5% is 10% off at every step size);
``monte_carlo``
    the law of the whole state after ``n_steps`` steps of :func:`sgsim.sample` (many chains,
    from a fixed point) against that exact law, mean and covariance, with both error rates
    controlled (:func:`sample_size`, :func:`gaussian_test`);
``oracle``
    the compiled step equals the record's NumPy ``oracle`` (or one given to the kit), step
    for step to 1e-12, given the same normals; skipped when there is none;
``gpu_host``
    where the GPU path has a kernel for the method, its host build (``backend="gpu-host"``, the
    same C text the GPU compiles) against the same exact law as ``monte_carlo``; skipped
    without a C++ compiler or a kernel;
``threads``, ``replicas``
    the same bits with 1 or 2 threads, and for the first chains of runs of 3 and 5 chains;
``storage``
    the three storage modes agree (the final draw is the final state, the running moments are
    the draws' mean and covariance);
``replay``
    a result written to disk replays bit for bit (:func:`sgsim.replay`).

sgsim's own test suite runs the kit over every registered method, so that a newly registered
method is checked without editing a test; a user runs it on theirs. Each statistical check has
a negative control in that suite: the same sampler with its noise scale off by 5%, which the
same check rejects.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats

from . import schedules
from . import targets as _targets
from ._validate import ParameterError, positive_float, real
from .algorithms import NotAffineError, affine_steps
from .dynamics import Noise
from .integrators._base import INTERACTING, ORIGINS, Method, get_method, register, unregister
from .results import flat_draws

__all__ = [
    "CHECKS",
    "CheckResult",
    "Report",
    "kit_target",
    "sample_size",
    "gaussian_test",
    "check_sampler",
    "check_registry",
    "noise_scaled",
    "registered",
]

#: the kit's checks, in the order they run
CHECKS = ("exact_law", "consistency", "monte_carlo", "oracle", "gpu_host", "threads", "replicas", "storage", "replay")
PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check: its name, ``"passed"``, ``"failed"`` or ``"skipped"``, and what was compared."""

    name: str
    status: str
    detail: str


@dataclass
class Report:
    """What :func:`check_sampler` found for one method."""

    method: str
    results: list[CheckResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No check failed."""
        return not self.failed

    @property
    def failed(self) -> list[CheckResult]:
        """The checks that failed."""
        return [r for r in self.results if r.status == FAILED]

    def status(self, name: str) -> str:
        """The status of check ``name``."""
        return next(r.status for r in self.results if r.name == name)

    def raise_for_failure(self) -> Report:
        """Raise an AssertionError listing every failed check (with what it compared); else return self."""
        if self.failed:
            raise AssertionError(str(self))
        return self

    def __str__(self) -> str:
        lines = [f"conformance of {self.method!r}:"]
        lines += [f"  {r.name:<12} {r.status:<8} {r.detail}" for r in self.results]
        return "\n".join(lines)


def kit_target(gradient_noise: bool = True) -> _targets.Target:
    """The kit's default target: a correlated 2-D linear-Gaussian with emulated gradient noise.

    ``U = theta^T P theta / 2 - b^T theta`` with ``P = [[2, 0.3], [0.3, 0.5]]``,
    ``b = (0.2, -0.1)`` and gradient noise ``V = [[0.4, 0.1], [0.1, 0.2]]``: no axis, scale or
    noise direction is special, so a step that mixes up coordinates, scales or the noise shows.
    ``gradient_noise=False`` drops ``V``, for samplers whose gradient noise cannot be emulated by
    one Gaussian per step (a splitting scheme's kicks, an adaptive preconditioner).
    """
    p = np.array([[2.0, 0.3], [0.3, 0.5]])
    if not gradient_noise:
        return _targets.linear_gaussian(p, [0.2, -0.1], name="kit_gaussian_exact")
    v = np.array([[0.4, 0.1], [0.1, 0.2]])
    return _targets.linear_gaussian(p, [0.2, -0.1], grad_noise_cov=v, name="kit_gaussian")


def sample_size(n_stats: int, false_fail: float = 1e-6, min_error: float = 0.1, miss: float = 1e-3) -> int:
    """Independent draws needed for :func:`gaussian_test` to meet both of its error rates.

    The test compares ``n_stats`` standardised statistics with a two-sided threshold
    ``z* = Phi^-1(1 - false_fail / (2 n_stats))`` (Bonferroni: the chance that a correct
    sampler fails is at most ``false_fail``). A variance wrong by the relative error
    ``min_error`` moves its statistic by ``min_error / sqrt(2 / n)`` standard errors, so it is
    detected with probability at least ``1 - miss`` once
    ``n >= 2 ((z* + z_miss) / min_error)^2``, ``z_miss = Phi^-1(1 - miss)``; a mean off by
    ``min_error`` standard deviations needs half as many.

    Examples
    --------
    >>> from sgsim.testing import sample_size
    >>> sample_size(5)  # 2-D mean and covariance, 1e-6 false fails, 10% error seen 999 times in 1000
    13736
    """
    n_stats = int(n_stats)
    if n_stats < 1:
        raise ParameterError("n_stats", f"n_stats must be >= 1, got {n_stats}")
    false_fail = real("false_fail", false_fail, 0.0, 1.0, low_open=True, high_open=True)
    miss = real("miss", miss, 0.0, 1.0, low_open=True, high_open=True)
    min_error = positive_float("min_error", min_error)
    z_star = stats.norm.isf(false_fail / (2 * n_stats))
    z_miss = stats.norm.isf(miss)
    return int(math.ceil(2.0 * ((z_star + z_miss) / min_error) ** 2))


def gaussian_test(samples, mean, cov, false_fail: float = 1e-6) -> tuple[bool, str]:
    """Whether independent ``samples`` (shape ``(n, m)``) are consistent with ``N(mean, cov)``.

    Standardises each sample mean (standard error ``sqrt(S_ii / n)``) and each sample
    covariance entry (standard error ``sqrt((S_ij^2 + S_ii S_jj) / n)``, exact for Gaussian
    draws) by its truth, and rejects when any exceeds the Bonferroni threshold of
    :func:`sample_size`. Coordinates without variance (a deterministic part of the state) must
    match to rounding instead. Returns ``(passed, message)``; the message names the worst
    statistic, its value and its truth.
    """
    x = np.asarray(samples, float)
    n, m = x.shape
    mean = np.asarray(mean, float)
    cov = np.asarray(cov, float)
    var = np.diag(cov)
    scale = max(1.0, float(np.abs(cov).max()), float(np.abs(mean).max()))
    live = var > 1e-12 * scale
    n_stats = int(live.sum() + live.sum() * (live.sum() + 1) // 2)
    z_star = stats.norm.isf(false_fail / (2 * max(n_stats, 1)))
    emp_mean = x.mean(axis=0)
    emp_cov = np.cov(x, rowvar=False).reshape(m, m)
    worst = (0.0, "")
    dead = ~live
    if np.any(dead):
        off = np.abs(x[:, dead] - mean[dead]).max()
        if off > 1e-9 * scale:
            return False, f"a coordinate with zero variance in the law is off by {off:.3g} in the draws"
    idx = np.flatnonzero(live)
    for i in idx:
        z = (emp_mean[i] - mean[i]) / math.sqrt(var[i] / n)
        if abs(z) > abs(worst[0]):
            worst = (z, f"mean[{i}] = {emp_mean[i]:.6g} against {mean[i]:.6g}")
    for a, i in enumerate(idx):
        for j in idx[a:]:
            se = math.sqrt((cov[i, j] ** 2 + var[i] * var[j]) / n)
            z = (emp_cov[i, j] - cov[i, j]) / se
            if abs(z) > abs(worst[0]):
                worst = (z, f"cov[{i}, {j}] = {emp_cov[i, j]:.6g} against {cov[i, j]:.6g}")
    passed = abs(worst[0]) <= z_star
    what = f"{n_stats} statistics of {n} draws, threshold {z_star:.2f} SE; worst: {worst[1]} ({worst[0]:+.2f} SE)"
    return bool(passed), what


def _case(method: Method, target, options: dict) -> tuple:
    example = dict(method.example)
    given = example.pop("target", None)
    if target is None:
        target = given if given is not None else kit_target
    if callable(target) and not isinstance(target, _targets.Target):
        target = target()
    elif isinstance(target, str):
        target = _targets.get(target)
    opts = {**example, **options}
    opts.setdefault("step_size", 0.05)
    return target, opts


def _run(method, target, n_steps, **kw):
    from .sampling import sample  # the kit sits above the run driver

    return sample(target, method, n_steps, **kw)


def _final_state(idata, state: tuple[str, ...]) -> np.ndarray:
    """The final state of each chain, rows of ``state`` one after the other: shape ``(chains, n)``."""
    cd = idata["constant_data"]
    return np.concatenate([cd[f"final_{name}"].values.reshape(cd[f"final_{name}"].shape[0], -1) for name in state], 1)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def check_sampler(
    method,
    *,
    target=None,
    n_steps: int | None = None,
    checks=CHECKS,
    law_of=None,
    oracle=None,
    false_fail: float = 1e-6,
    min_error: float = 0.1,
    miss: float = 1e-3,
    seed: int = 2026,
    **options,
) -> Report:
    """Run the conformance kit on ``method``; return a :class:`Report` (see the module's list of checks).

    Parameters
    ----------
    method : str or Method
        A registered method (the kit replays results, so it must be registered).
    target : Target, str or callable, optional
        Where to run; default the method's ``example`` target, else :func:`kit_target`. The law
        checks need a linear-Gaussian target.
    n_steps : int, optional
        Steps per chain (default 100 for chains, 30 for ensembles).
    checks : sequence of str
        Which of ``CHECKS`` to run.
    law_of : str or Method, optional
        Take the exact law from this method instead (a negative control: simulate one sampler,
        compare with another's law).
    oracle : callable, optional
        A NumPy version of the step (see ``Algorithm.oracle``), used instead of the record's.
    false_fail, min_error, miss : float
        The Monte Carlo check's error rates (:func:`sample_size`): its chance of failing a
        correct sampler, and the relative variance error it detects with probability ``1 - miss``.
    seed : int
        The runs' seed.
    **options
        The method's options (default: its ``example``, with ``step_size=0.05``).

    Returns
    -------
    Report

    Examples
    --------
    >>> from sgsim.testing import check_sampler
    >>> report = check_sampler("sgld", checks=("exact_law", "consistency", "threads"))
    >>> report.ok, [r.status for r in report.results]
    (True, ['passed', 'passed', 'passed'])
    """
    method = get_method(method)
    unknown = set(checks) - set(CHECKS)
    if unknown:
        raise ParameterError("checks", f"unknown checks {sorted(unknown)}; the kit has {CHECKS}")
    target, opts = _case(method, target, options)
    alg = method.algorithm
    interacting = alg.coupling == INTERACTING
    n_steps = int(n_steps or (30 if interacting else 100))
    extra = {"n_particles": 4} if interacting else {}
    report = Report(method.name)
    add = report.results.append
    d = target.dim
    x0 = np.ones(d)

    law = maps = None
    why_no_law = ""
    if interacting:
        why_no_law = "interacting particles: the step is not affine in the particles"
    elif target.stochastic_grad_u is not None or (target.batched is not None and target.batched.stochastic):
        # the minibatch noise depends on the state: no Gaussian law to read off the step
        why_no_law = f"target {target.name!r} draws minibatches: the exact law needs an exact gradient"
    else:
        try:
            maps = affine_steps(method, target, n_steps, **opts)
            reference = maps if law_of is None else affine_steps(law_of, target, n_steps, **opts)
            law = reference.law(init_mean=x0)
        except NotAffineError as exc:
            why_no_law = f"not affine on {target.name!r}: {exc}"
    if "exact_law" in checks:
        if law is None:
            add(CheckResult("exact_law", SKIPPED, why_no_law))
        else:
            add(CheckResult("exact_law", PASSED, f"affine on {target.name!r}: law of {n_steps} steps derived"))

    if "consistency" in checks:
        add(_consistency(method, target, opts, maps, why_no_law))

    if "monte_carlo" in checks:
        if law is None:
            add(CheckResult("monte_carlo", SKIPPED, why_no_law))
        else:
            ok, what = _against_law(method, target, n_steps, opts, law, x0, seed, (false_fail, min_error, miss))
            source = "its own" if law_of is None else f"{get_method(law_of).name!r}'s"
            add(CheckResult("monte_carlo", PASSED if ok else FAILED, f"final state against {source} exact law: {what}"))

    if "oracle" in checks:
        add(_oracle(method, target, n_steps, opts, oracle or alg.oracle, x0, seed))

    if "gpu_host" in checks:
        add(_gpu_host(method, target, n_steps, opts, law, why_no_law, x0, seed, (false_fail, min_error, miss)))

    small = dict(n_chains=3, seed=seed, **extra, **opts)
    if "threads" in checks:
        one = _run(method, target, n_steps, n_threads=1, **{**small, "n_chains": 4})
        two = _run(method, target, n_steps, n_threads=2, **{**small, "n_chains": 4})
        same = _same(_final_state(one, alg.state), _final_state(two, alg.state))
        same = same and _same(flat_draws(one), flat_draws(two))
        add(CheckResult("threads", PASSED if same else FAILED, "4 chains with 1 and with 2 threads: same bits"))

    if "replicas" in checks:
        three = _run(method, target, n_steps, **small)
        five = _run(method, target, n_steps, **{**small, "n_chains": 5})
        same = _same(flat_draws(three), flat_draws(five)[:3])
        add(CheckResult("replicas", PASSED if same else FAILED, "the first 3 chains of runs of 3 and of 5: same bits"))

    if "storage" in checks:
        add(_storage(method, target, n_steps, small, alg.state))

    if "replay" in checks:
        add(_replay(method, target, n_steps, small))
    return report


def _oracle(method: Method, target, n_steps: int, opts: dict, oracle, x0, seed: int) -> CheckResult:
    from .driver import prepare, run_chain

    if oracle is None:
        return CheckResult("oracle", SKIPPED, "the record declares no NumPy oracle")
    if method.algorithm.coupling == INTERACTING:
        return CheckResult("oracle", SKIPPED, "oracles are compared for independent chains only")
    run, _ = prepare(target, method, n_steps, storage="final", divergence_bound=None, **opts)
    if target.stochastic_grad_u is not None:
        return CheckResult("oracle", SKIPPED, f"target {target.name!r} draws minibatches: no injected gradient")
    d = target.dim
    xi = np.random.default_rng(seed).standard_normal((n_steps, d))
    state0 = [np.asarray(s, float)[0] for s in method.algorithm.initial_state(x0[None], {}, run.options)]
    state = tuple(s.copy() for s in state0)
    if run_chain(run, state, None, None, injected=xi) != -1:
        return CheckResult("oracle", FAILED, "the compiled chain diverged on the kit's target")
    block = run.schedule.block(0, n_steps)
    sd, rows, rotate, noisy, temps = run.noise(block)
    takes_t = len(inspect.signature(oracle).parameters) == 7
    x = np.stack(state0)
    for k in range(n_steps):
        z = None
        if noisy[k]:
            e = sd[k] * xi[k]
            z = rows.T @ e if rotate else e
        args = (x.copy(), target.gradient, z, float(block.step_size[k]), k, run.options)
        # an oracle of an update that reads the step's temperature takes it last
        x = np.asarray(oracle(*args, float(temps[k])) if takes_t else oracle(*args), float)
    compiled = np.stack(state)
    err = float(np.abs(compiled - x).max() / max(1.0, float(np.abs(x).max())))
    ok = err <= 1e-12
    what = f"{n_steps} steps from the same normals: largest difference {err:.2g} of the state's scale (tolerance 1e-12)"
    return CheckResult("oracle", PASSED if ok else FAILED, what)


def _against_law(method, target, n_steps, opts, law, x0, seed, rates, backend="cpu") -> tuple[bool, str]:
    """Final states of many chains from ``x0`` against the law's last step (:func:`gaussian_test`)."""
    false_fail, min_error, miss = rates
    mean, cov = law.mean[-1], law.cov[-1]
    live = int(np.count_nonzero(np.diag(cov) > 1e-12 * max(1.0, float(np.abs(cov).max()))))
    n_chains = sample_size(live + live * (live + 1) // 2, false_fail, min_error, miss)
    kw = dict(n_chains=n_chains, seed=seed, storage="final", init=x0, backend=backend)
    r = _run(method, target, n_steps, **kw, **opts)
    return gaussian_test(_final_state(r, method.algorithm.state), mean, cov, false_fail)


def _gpu_host(method, target, n_steps, opts, law, why_no_law, x0, seed, rates) -> CheckResult:
    from .driver import prepare
    from .gpu.host import compiler
    from .gpu.kernels import supported

    if law is None:
        return CheckResult("gpu_host", SKIPPED, why_no_law)
    if method.algorithm.coupling == INTERACTING:
        return CheckResult("gpu_host", SKIPPED, "the GPU path runs independent chains")
    why = supported(prepare(target, method, n_steps, storage="final", **opts)[0])
    if why is not None:
        return CheckResult("gpu_host", SKIPPED, why)
    if compiler() is None:
        return CheckResult("gpu_host", SKIPPED, "no C++ compiler for the GPU kernel's host build")
    ok, what = _against_law(method, target, n_steps, opts, law, x0, seed, rates, backend="gpu-host")
    return CheckResult("gpu_host", PASSED if ok else FAILED, f"the GPU kernel's host build, against the law: {what}")


def _consistency(method: Method, target, opts: dict, maps, why_no_law: str) -> CheckResult:
    name = "consistency"
    if not method.algorithm.asymptotically_exact:
        return CheckResult(name, SKIPPED, "the algorithm does not claim to sample exp(-U/T) as the step goes to 0")
    if maps is None:
        return CheckResult(name, SKIPPED, why_no_law)
    if target.mean is None or target.second_moment is None:
        return CheckResult(name, SKIPPED, f"target {target.name!r} has no known moments")
    # one step at 1% of the example's step size, at T = 1, repeated forever: the second step of
    # a run, since a scheme's first step may differ (a splitting's opening half kick)
    step = 0.01 * float(opts["step_size"])
    dynamics_only = {k: v for k, v in opts.items() if k in method.algorithm.options}
    d = target.dim
    one = affine_steps(method, target, schedule=schedules.constant(step, 2, temperature=1.0), **dynamics_only)
    try:
        mean, cov = one.stationary()
    except ValueError as exc:
        return CheckResult(name, FAILED, f"no stationary law at step_size={step:.3g}: {exc}")
    want = target.second_moment - np.outer(target.mean, target.mean)
    # relative error in the target's own metric: the eigenvalues of W^-1/2 Sigma W^-1/2 against 1
    w_vals, w_vecs = np.linalg.eigh(want)
    root = w_vecs @ np.diag(w_vals**-0.5) @ w_vecs.T
    rel = np.linalg.eigvalsh(root @ cov[:d, :d] @ root) - 1.0
    shift = float(np.sqrt((mean[:d] - target.mean) @ np.linalg.solve(want, mean[:d] - target.mean)))
    worst = float(np.abs(rel).max())
    ok = worst <= 0.02 and shift <= 0.02
    what = (
        f"stationary law at step_size={step:.3g} against the target: covariance off by "
        f"{100 * worst:.3f}%, mean by {shift:.4f} sd (tolerance 2%)"
    )
    return CheckResult(name, PASSED if ok else FAILED, what)


def _storage(method, target, n_steps, small, state) -> CheckResult:
    draws = _run(method, target, n_steps, **small)
    final = _run(method, target, n_steps, storage="final", **small)
    moments = _run(method, target, n_steps, storage="moments", **small)
    theta = flat_draws(draws)
    problems = []
    if not _same(flat_draws(final), theta[:, -1:]):
        problems.append("the 'final' draw is not the last draw")
    if not _same(_final_state(final, state), _final_state(draws, state)):
        problems.append("the final states differ between storage modes")
    flat = theta.reshape(theta.shape[0], theta.shape[1], -1)
    mean = moments["moments"]["theta_mean"].values.reshape(theta.shape[0], -1)
    if not np.allclose(mean, flat.mean(axis=1), rtol=1e-10, atol=1e-12):
        problems.append("the running means are not the draws' means")
    if flat.shape[1] > 1 and flat.shape[2] == moments["moments"]["theta_cov"].shape[-1]:
        cov = moments["moments"]["theta_cov"].values
        emp = np.stack([np.cov(c, rowvar=False).reshape(cov.shape[1:]) for c in flat])
        if not np.allclose(cov, emp, rtol=1e-8, atol=1e-12):
            problems.append("the running covariances are not the draws' covariances")
    detail = "; ".join(problems) or "final = last draw, running moments = the draws' mean and covariance"
    return CheckResult("storage", FAILED if problems else PASSED, detail)


def _replay(method: Method, target, n_steps, small) -> CheckResult:
    from .io import write_result
    from .sampling import ReplayMismatchError, replay

    if target.spec is None:
        return CheckResult("replay", SKIPPED, f"target {target.name!r} was built by hand: it has no recipe to replay")
    first = _run(method, target, n_steps, **small)
    module = ORIGINS.get(method.name, "")
    allow = [module.split(".")[0]] if module and module != "__main__" else []
    with tempfile.TemporaryDirectory() as tmp:
        path = write_result(first, Path(tmp) / "run.nc")
        try:
            again = replay(path, allow=allow)
        except ReplayMismatchError as exc:
            return CheckResult("replay", FAILED, str(exc))
    same = _same(flat_draws(first), flat_draws(again))
    return CheckResult("replay", PASSED if same else FAILED, "a result written to disk replays with the same bits")


def check_registry(
    methods=None, *, checks=CHECKS, on_report: Callable[[Report], None] | None = None, **kwargs
) -> dict[str, Report]:
    """:func:`check_sampler` on every registered method (or those named); returns the reports by name."""
    from .integrators._base import METHODS

    names = sorted(METHODS) if methods is None else [get_method(m).name for m in methods]
    out = {}
    for name in names:
        out[name] = check_sampler(name, checks=checks, **kwargs)
        if on_report is not None:
            on_report(out[name])
    return out


def noise_scaled(method, scale: float = 1.05, name: str | None = None) -> Method:
    """A copy of ``method`` whose noise standard deviation is multiplied by ``scale``: a negative control.

    The copy draws its noise with covariance ``scale^2`` times the declared one and is
    otherwise the same sampler; register it (:func:`registered`) and the kit's ``consistency``
    check, and its ``monte_carlo`` check against the original's law (``law_of=``), must fail.

    Examples
    --------
    >>> from sgsim.testing import check_sampler, noise_scaled, registered
    >>> with registered(noise_scaled("sgld", 1.05)) as wrong:
    ...     print(check_sampler(wrong, checks=("consistency",)).ok)
    False
    """
    method = get_method(method)
    scale = positive_float("scale", scale)
    noise = method.algorithm.noise

    def scaled(block, target, options):
        cov = noise(block, target, options)
        if cov is None:
            return None
        return Noise(tuple(scale**2 * np.asarray(c) for c in cov.coef), cov.mats)

    name = name or f"{method.name}_noise_x{scale:g}".replace(".", "_")
    alg = dataclasses.replace(method.algorithm, name=name, noise=scaled)
    return dataclasses.replace(method, name=name, algorithm=alg)


@contextlib.contextmanager
def registered(method: Method) -> Iterator[Method]:
    """Register ``method`` for the duration of a ``with`` block (for tests and negative controls)."""
    register(method, module=__name__)
    try:
        yield method
    finally:
        unregister(method.name)
