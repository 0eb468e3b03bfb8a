"""Which registered sgsim method each Torch optimizer mirrors, and the check that it takes the same steps.

``MIRRORS`` is the one declaration that ties the Torch backend to sgsim's records: for each
method that an optimizer of this package implements, the optimizer, the method's options it
takes under the same names, and how its iterates line up with the compiled kernel's.
:func:`check_mirror` runs both on a linear-Gaussian target along the method's own schedule
(every step collected), the optimizer fed the very standard normals the kernel's chain draws,
and compares every iterate to 1e-12. sgsim's test suite runs it for every entry, so a mirror
declared here is checked without a list of its own in a test file; ``noise_scale`` gives the
negative control (the normals scaled), which the same check rejects.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import philox
from .. import targets as _targets
from .._validate import ParameterError, positive_float
from ..algorithms import METHODS
from ..schedules import Schedule
from .optim import BAOAB, OBABO, PSGLD, SGHMC, SGLD, SGNHT, PSGLDGamma
from .schedule import ScheduleDriver

__all__ = ["Mirror", "MIRRORS", "check_mirror"]


@dataclass(frozen=True)
class Mirror:
    """How a Torch optimizer mirrors a registered method.

    Attributes
    ----------
    optimizer : type
        The ``torch.optim.Optimizer`` subclass.
    options : tuple of str
        The method's dynamics options the optimizer takes, under the same names.
    lag : int
        0 when the parameters after Torch step ``k`` hold the kernel's ``theta_k``; 1 when they
        already hold the next position (SGHMC moves ``theta`` first: after step ``k`` the
        parameters are ``theta_k + v_k``, where the next gradient is taken).
    separable : bool
        True when :func:`check_mirror` runs on the separable target (the diagonal of the
        default precision) instead of the correlated one. A step that estimates each
        coordinate's curvature by a secant along the last move (``psgld_gamma``) reads
        ``P_ii + P_ij dtheta_j / dtheta_i`` on a correlated target, unbounded as a coordinate's
        move shrinks, so two correct implementations drift apart by their rounding (by up to
        1e-4 of the path over 120 steps, measured); on a separable target the secant is
        ``P_ii`` and they agree to rounding.
    step_size : float
        The constant step the check runs at where neither the method's ``example`` nor the
        caller gives one.
    """

    optimizer: type
    options: tuple[str, ...] = ()
    lag: int = 0
    separable: bool = False
    step_size: float = 0.2


#: method name -> its Torch mirror
MIRRORS: dict[str, Mirror] = {
    "sgld": Mirror(SGLD),
    "csgld": Mirror(SGLD),
    "sghmc": Mirror(SGHMC, ("friction", "gamma_hat"), lag=1),
    "csghmc": Mirror(SGHMC, ("friction", "gamma_hat"), lag=1),
    "baoab": Mirror(BAOAB, ("friction",)),
    "cbaoab": Mirror(BAOAB, ("friction",)),
    "obabo": Mirror(OBABO, ("friction",)),
    "cobabo": Mirror(OBABO, ("friction",)),
    # at 0.2 (h = 0.45) the thermostat's friction overshoots and the compiled chain itself diverges
    "sgnht": Mirror(SGNHT, ("diffusion", "friction_step"), step_size=0.05),
    "csgnht": Mirror(SGNHT, ("diffusion", "friction_step")),
    "psgld": Mirror(PSGLD, ("rms_decay", "floor")),
    "cpsgld": Mirror(PSGLD, ("rms_decay", "floor")),
    "psgld_gamma": Mirror(PSGLDGamma, ("rms_decay", "floor"), separable=True),
}


def check_mirror(method: str, *, n_steps: int = 120, seed: int = 4, noise_scale: float = 1.0, **options):
    """Whether the Torch mirror of ``method`` takes the compiled kernel's steps, given the same normals.

    Parameters
    ----------
    method : str
        A key of ``MIRRORS``.
    n_steps : int
        Steps compared.
    seed : int
        The kernel's seed; its chain 0's stream gives the normals fed to the optimizer.
    noise_scale : float
        Multiplies the normals fed to the optimizer (1: the check; anything else: a negative
        control that must fail).
    **options
        The method's options (default: its ``example``, with the mirror's ``step_size``).

    Returns
    -------
    sgsim.testing.CheckResult
        ``"passed"`` when every iterate agrees to 1e-12 of the path's scale.
    """
    from ..testing import FAILED, PASSED, CheckResult

    if method not in MIRRORS:
        raise ParameterError("method", f"no Torch mirror of {method!r}; mirrors: {', '.join(sorted(MIRRORS))}")
    noise_scale = positive_float("noise_scale", noise_scale)
    mirror, record = MIRRORS[method], METHODS[method]
    p, b = np.array([[2.0, 0.5], [0.5, 1.0]]), np.array([0.3, -0.2])
    if mirror.separable:
        p = np.diag(np.diag(p))
    target = _targets.linear_gaussian(p, b)
    opts = {k: v for k, v in record.example.items() if k != "target"}
    opts.update(options)
    opts.setdefault("step_size", mirror.step_size)
    sched_kw = {k: v for k, v in opts.items() if k in record.schedule_options}
    dyn_kw = {k: v for k, v in opts.items() if k in record.algorithm.options}
    made = record.schedule(n_steps, **sched_kw)
    # every step collected, so that every iterate is compared
    schedule = Schedule(made.step_size, made.temperature, made.stage, made.cycle)
    theta0 = np.array([1.0, 2.0])
    kernel = _run(target, method, schedule, seed, theta0, dyn_kw)
    # chain 0's normals under the run's default (Philox) streams: step k's are numbers 2k, 2k + 1
    normals = philox.normals(seed, 0, 0, 2 * schedule.n_steps).reshape(-1, 2)
    theta = torch.tensor(theta0, dtype=torch.float64, requires_grad=True)
    opt = mirror.optimizer([theta], lr=1.0, seed=0, **{k: dyn_kw[k] for k in mirror.options if k in dyn_kw})
    driver = ScheduleDriver(opt, schedule)
    p_t, b_t = torch.tensor(p), torch.tensor(b)
    path = []
    for k, temperature in enumerate(schedule.temperature):
        opt.zero_grad()
        (0.5 * theta @ p_t @ theta - theta @ b_t).backward()
        xi = normals[k] if temperature > 0 else None
        driver.step(noise=None if xi is None else [torch.tensor(noise_scale * xi)])
        path.append(theta.detach().clone().numpy())
    got = np.array(path)
    want = kernel[mirror.lag :]
    got = got[: len(want)]
    err = float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))
    ok = err <= 1e-12
    what = (
        f"{mirror.optimizer.__name__} against the compiled {method} over {len(want)} steps of its schedule, "
        f"same normals: largest difference {err:.2g} (tolerance 1e-12)"
    )
    return CheckResult("torch_mirror", PASSED if ok else FAILED, what)


def _run(target, method, schedule, seed, theta0, options) -> np.ndarray:
    from ..sampling import sample

    r = sample(target, method, schedule=schedule, seed=seed, init=theta0, **options)
    return r.posterior["theta"].values[0]
