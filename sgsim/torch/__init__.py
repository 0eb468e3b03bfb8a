"""SG-MCMC for PyTorch models, in the papers' units (optional: ``pip install "sgsim[torch]"``).

:class:`SGLD` and :class:`SGHMC` are ``torch.optim.Optimizer`` subclasses that take the same
steps as sgsim's compiled kernels (:func:`sgsim.dynamics.sgld_noise`,
:func:`sgsim.dynamics.sghmc_noise`): drift ``lr * grad U`` and injected noise variance
``2 lr T`` on the potential ``U = -log density`` ("Cyclical Stochastic Gradient MCMC for Bayesian
Deep Learning", §2; :ref:`theory-step-units`). ``num_data = N`` declares the loss a mean over
``N`` data points (``U = N * loss``). The temperature is explicit, per parameter group: 1
samples the posterior, 0 is ``torch.optim.SGD`` bit for bit (SGLD) or SGD with momentum to
rounding (SGHMC), the arguments given by :func:`sgd_arguments`. All randomness
comes from one ``torch.Generator``, given or made from an sgsim seed (:func:`make_generator`).
:class:`ScheduleDriver` steps either sampler through an sgsim :class:`~sgsim.schedules.Schedule`, e.g.
the cosine cycles of :func:`sgsim.schedules.cyclical` (cSGLD, cSGHMC). :class:`SampleStore` keeps
the samples off the accelerator (all, or a uniform reservoir), :func:`predict` averages their
predictions (Bayesian model averaging) and scores them, and :func:`to_inference_data` makes
the per-sample scalars an ``arviz.InferenceData``. :class:`ConstantSGD` and
:class:`PreconditionedSGD` are constant SGD as approximate Bayesian inference ("Stochastic
Gradient Descent as Approximate Bayesian Inference", eqs. 15, 18-21): the KL-optimal rate or
diagonal preconditioner from an online, bias-corrected estimate of the gradient noise.
:class:`SGLDRepulsive` and :class:`SVGD` move an ensemble of networks together ("Stochastic
Gradient MCMC with Repulsive Forces"), with the kernel on the flattened parameters.
:class:`BAOAB`, :class:`OBABO`, :class:`SGNHT`, :class:`PSGLD` and :class:`PSGLDGamma` are
the underdamped and adaptive peers of SGLD in the same units, each the compiled kernel's step
of the method of the same name (:ref:`theory-langevin-peers`).

``MIRRORS`` says which registered method each optimizer mirrors, and :func:`check_mirror`
checks that it takes the compiled kernel's steps given the same normals.

Nothing else in sgsim imports this package. The papers' network experiments built on it live
in :mod:`sgsim.torch.experiments`; the backend imports nothing from them.
"""

try:
    import torch as _torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        'sgsim.torch needs PyTorch, an optional dependency: pip install "sgsim[torch]" (or install torch>=2.1)'
    ) from exc

from ._trust import Divergence, DivergenceError
from .constant_sgd import ConstantSGD, PreconditionedSGD
from .mirror import MIRRORS, check_mirror
from .optim import BAOAB, OBABO, PSGLD, SGHMC, SGLD, SGNHT, PSGLDGamma, make_generator, sgd_arguments
from .particles import SVGD, SGLDRepulsive
from .schedule import ScheduleDriver, ScheduledStep
from .store import Predictions, SampleStore, predict, to_inference_data

__all__ = [
    "SGLD",
    "SGHMC",
    "BAOAB",
    "OBABO",
    "SGNHT",
    "PSGLD",
    "PSGLDGamma",
    "ScheduleDriver",
    "ScheduledStep",
    "make_generator",
    "sgd_arguments",
    "Divergence",
    "DivergenceError",
    "ConstantSGD",
    "PreconditionedSGD",
    "SGLDRepulsive",
    "SVGD",
    "SampleStore",
    "Predictions",
    "predict",
    "to_inference_data",
    "MIRRORS",
    "check_mirror",
]
