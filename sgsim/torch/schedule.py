"""Drive a Torch sampler with an sgsim :class:`~sgsim.schedules.Schedule` (cSGLD, cSGHMC).

Before step ``k`` the driver sets every parameter group's ``lr`` and ``temperature`` to the
schedule's ``alpha_k`` and ``T_k``, steps the optimizer, and returns what the schedule says of
that step: its stage, its cycle, and whether the iterate after it belongs to the sample
(``collect``). The values are read block by block (:meth:`sgsim.schedules.Schedule.block`), so a
schedule of any length costs a few kilobytes; nothing here evaluates a schedule's formula.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._validate import ParameterError, ParameterTypeError, integer
from ..schedules import SAMPLING, Schedule, ScheduleBlock

__all__ = ["ScheduleDriver", "ScheduledStep"]


@dataclass(frozen=True)
class ScheduledStep:
    """What the schedule says of one step, as :meth:`ScheduleDriver.step` returns it.

    Attributes
    ----------
    index : int
        0-based index ``k - 1`` of the step in the schedule.
    step_size : float
        ``alpha_k``, the ``lr`` the step ran with.
    temperature : float
        ``T_k`` (0 in an exploration stage).
    stage : int
        ``sgsim.schedules.EXPLORATION`` (0) or ``SAMPLING`` (1).
    cycle : int
        0-based cycle index (0 for schedules without cycles).
    collect : bool
        Whether the parameters after this step are a sample.
    """

    index: int
    step_size: float
    temperature: float
    stage: int
    cycle: int
    collect: bool

    @property
    def sampling(self) -> bool:
        """Whether the step belongs to a sampling stage."""
        return self.stage == SAMPLING


class ScheduleDriver:
    """Step an :class:`~sgsim.torch.SGLD` or :class:`~sgsim.torch.SGHMC` through a schedule.

    cSGLD (or cSGHMC) with :func:`sgsim.schedules.cyclical` is then one call per iteration,
    the samples being the parameters after the steps whose ``collect`` is true::

        optimizer = SGLD(model.parameters(), lr=schedule.step_size[0], num_data=n, seed=0)
        driver = ScheduleDriver(optimizer, schedule)
        for x, y in batches:  # schedule.n_steps of them
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            if driver.step().collect:
                keep(model)

    Exploration steps run at ``T = 0`` (plain SGD, or SGD with momentum) and draw no noise, so
    the generator advances only on sampling steps, like the streams of :func:`sgsim.sample`.
    An optimizer made with ``on_divergence="mark"`` stops moving once it has diverged while the
    driver goes on through the schedule: read ``optimizer.divergence`` before keeping a sample.

    Parameters
    ----------
    optimizer : SGLD or SGHMC
        Every one of its parameter groups gets the schedule's ``lr`` and ``temperature``.
    schedule : Schedule
        E.g. :func:`sgsim.schedules.cyclical` or :func:`sgsim.schedules.constant`, in the
        cyclical paper's units (those of the optimizer).
    start : int
        Index of the first step to run, in ``[0, n_steps]``: to resume a run whose optimizer
        was restored from its ``state_dict`` (generator included, so the noise continues bit for
        bit), ``optimizer.steps_taken`` when the driver took all its steps.
    block_size : int
        Steps of the schedule read at a time, >= 1.

    Attributes
    ----------
    optimizer, schedule
        As given.
    """

    def __init__(self, optimizer, schedule: Schedule, *, start: int = 0, block_size: int = 4096):
        if not isinstance(schedule, Schedule):
            raise ParameterTypeError("schedule", f"schedule must be an sgsim Schedule, got {type(schedule).__name__}")
        groups = getattr(optimizer, "param_groups", None)
        if not groups or not all("temperature" in g for g in groups):
            raise ParameterTypeError(
                "optimizer", "optimizer must be an sgsim.torch sampler (its parameter groups hold a temperature)"
            )
        self.optimizer = optimizer
        self.schedule = schedule
        self._k = integer("start", start, low=0, high=schedule.n_steps)
        self._block_size = integer("block_size", block_size, low=1)
        self._block: ScheduleBlock | None = None

    @property
    def steps_done(self) -> int:
        """Number of the schedule's steps run (the index of the next step)."""
        return self._k

    @property
    def finished(self) -> bool:
        """Whether every step of the schedule has run."""
        return self._k >= self.schedule.n_steps

    def peek(self) -> ScheduledStep:
        """The values of the next step, without running it."""
        if self.finished:
            raise ParameterError("schedule", f"the schedule's {self.schedule.n_steps} steps have all run")
        k = self._k
        b = self._block
        if b is None or not b.k0 <= k < b.k1:
            b = self._block = self.schedule.block(k, min(self.schedule.n_steps, k + self._block_size))
        j = k - b.k0
        return ScheduledStep(
            k, float(b.step_size[j]), float(b.temperature[j]), int(b.stage[j]), int(b.cycle[j]), bool(b.collect[j])
        )

    def step(self, closure=None, *, noise=None) -> ScheduledStep:
        """Set every group's ``lr`` and ``temperature`` to the next step's values and step.

        Parameters
        ----------
        closure : callable, optional
            Passed to the optimizer's ``step``.
        noise : list of tensors, optional
            Passed to the optimizer's ``step`` (injected standard normals).

        Returns
        -------
        ScheduledStep
            The step's index, step size, temperature, stage, cycle and ``collect``.

        Raises
        ------
        ParameterError
            If every step of the schedule has already run.
        """
        now = self.peek()
        for group in self.optimizer.param_groups:
            group["lr"] = now.step_size
            group["temperature"] = now.temperature
        self.optimizer.step(closure, noise=noise)
        self._k += 1
        return now
