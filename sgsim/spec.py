"""Runs as data: the small description of a run that every result records, and its encoding.

A :class:`RunSpec` says everything :func:`sgsim.sample` needs to run again: the target (its
factory and arguments, or a shipped data set's name), the method, its options, the schedule,
the seed, the number of chains and particles, burn-in, thinning, storage and the initial
state. A result stores it as JSON in the attribute ``sgsim_config``, with every array
replaced by a reference into the result's ``run_spec`` group, where the arrays are stored as
arrays (a preconditioner matrix, a data set given as arrays, explicit initial points).
:func:`sgsim.replay` reads it back and reruns the run, bit for bit.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

import numpy as np

from .targets import TargetSpec

__all__ = ["RunSpec", "encode", "decode"]

_ARRAY = "__array__"
_TUPLE = "__tuple__"


@dataclass(frozen=True)
class RunSpec:
    """The description of one call of :func:`sgsim.sample`.

    Attributes
    ----------
    target : TargetSpec or None
        How the target was built; None for a target built by hand (not replayable).
    target_name : str
        The target's name.
    target_fingerprint : str
        :meth:`sgsim.targets.Target.fingerprint` of the sampled target.
    method : str
        The method's registered name.
    method_module : str or None
        The module whose import registers the method (``"sgsim.integrators"`` for sgsim's own;
        None in results written before it was recorded).
    options : dict
        The algorithm's options after validation, with ``noise_correction``.
    schedule : dict
        The schedule's description.
    schedule_arrays : dict or None
        The per-step arrays of a schedule built from arrays (None for a formula schedule).
    seed : int
        The seed used.
    n_chains : int
        Replicas: chains, or ensembles of ``n_particles``.
    n_particles : int or None
        Particles per ensemble (interacting methods), else None.
    burn_in, thin : int
        Draws discarded at the start; every ``thin``-th collected draw kept.
    storage : str
        ``"draws"``, ``"final"`` or ``"moments"``.
    init, init_velocity : ndarray or None
        Initial state given by the caller (None: drawn from the streams, or zero velocity).
    log_density : bool
        Whether the log density of each draw was recorded.
    grad_noise_cov : list
        The target's emulated gradient-noise covariance, for the reader (not needed to replay).
    stochastic_gradient : str or None
        The target's stochastic gradient in words (None for exact gradients), for the reader.
    divergence_bound : float or None
        The bound on ``max_i |theta_i|`` beyond which a chain was stopped as diverged (None:
        only non-finite states; also what results written before bounds existed hold).
    backend : str
        Where the chains ran: ``"cpu"`` (the compiled CPU kernels; also what results written
        before the GPU path existed hold), ``"gpu"`` or ``"gpu-host"`` (:mod:`sgsim.gpu`).
    precision : str
        The chains' floating-point type: ``"float64"``, or ``"float32"`` on the GPU path.
    stream : str
        The scheme of the steps' random streams: ``"philox"`` or ``"pcg64"`` (what results written
        before the counter-based streams hold, and replay with).
    """

    target: TargetSpec | None
    target_name: str
    target_fingerprint: str
    method: str
    options: dict
    schedule: dict
    schedule_arrays: dict | None
    seed: int
    n_chains: int
    n_particles: int | None
    burn_in: int
    thin: int
    storage: str
    init: np.ndarray | None = None
    init_velocity: np.ndarray | None = None
    log_density: bool = False
    grad_noise_cov: list = field(default_factory=list)
    stochastic_gradient: str | None = None
    divergence_bound: float | None = None
    backend: str = "cpu"
    precision: str = "float64"
    method_module: str | None = None
    stream: str = "pcg64"

    def to_dict(self) -> dict:
        """The spec as nested plain data (arrays stay arrays)."""
        out = asdict(self)
        out["target"] = None if self.target is None else asdict(self.target)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> RunSpec:
        """The inverse of :meth:`to_dict`.

        Raises
        ------
        ValueError
            If ``data`` is not a run spec of this version: not a mapping, fields missing (a
            record written before run specs) or unknown (a record of a later version), or a
            target recorded otherwise than as a constructor and its arguments.
        """
        if not isinstance(data, dict):
            raise ValueError(f"not a run spec: a {type(data).__name__}, not a mapping of its fields")
        names = {f.name for f in fields(cls)}
        required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
        missing, unknown = sorted(required - set(data)), sorted(set(data) - names)
        if missing:
            raise ValueError(
                f"not a run spec of this version: it lacks {', '.join(missing)} (a record written before "
                "run specs were recorded?)"
            )
        if unknown:
            raise ValueError(f"a run spec with fields this version does not know: {', '.join(unknown)}")
        data = dict(data)
        tgt = data.get("target")
        if tgt is not None:
            built = isinstance(tgt, dict) and isinstance(tgt.get("factory"), str)
            if not (built and isinstance(tgt.get("kwargs"), dict)):
                raise ValueError(f"the run spec records its target as {tgt!r}, not as a constructor and its arguments")
            mods = tuple((name, dict(kw)) for name, kw in tgt.get("modifiers", ()))
            data["target"] = TargetSpec(tgt["factory"], dict(tgt["kwargs"]), mods)
        return cls(**data)


def _encode(value: Any, path: str, arrays: dict) -> Any:
    if isinstance(value, np.ndarray):
        # the record's own copy, unless the array is one nobody writes to: read-only and owning its
        # data (a schedule's arrays), so that a long schedule is not copied again for each result
        frozen = not value.flags.writeable and value.flags.owndata
        arrays[path] = value if frozen else np.array(value)
        return {_ARRAY: path}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _encode(v, f"{path}.{k}", arrays) for k, v in value.items()}
    if isinstance(value, tuple):
        return {_TUPLE: [_encode(v, f"{path}.{i}", arrays) for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [_encode(v, f"{path}.{i}", arrays) for i, v in enumerate(value)]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"{path}: cannot record a {type(value).__name__} in a run spec")


def _decode(value: Any, arrays: dict) -> Any:
    if isinstance(value, dict):
        if set(value) == {_ARRAY}:
            return np.asarray(arrays[value[_ARRAY]])
        if set(value) == {_TUPLE}:
            return tuple(_decode(v, arrays) for v in value[_TUPLE])
        return {k: _decode(v, arrays) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v, arrays) for v in value]
    return value


def encode(spec: RunSpec) -> tuple[str, dict[str, np.ndarray]]:
    """``(JSON text, arrays)``: the spec with each array replaced by a reference to ``arrays``."""
    arrays: dict[str, np.ndarray] = {}
    # the fields as they are (what to_dict gives, without its deep copy: _encode builds new
    # containers and copies the arrays, at half the cost)
    plain = {f.name: getattr(spec, f.name) for f in fields(spec)}
    if spec.target is not None:
        plain["target"] = {f.name: getattr(spec.target, f.name) for f in fields(spec.target)}
    text = json.dumps(_encode(plain, "spec", arrays), sort_keys=True)
    return text, arrays


def decode(text: str, arrays: dict | None = None) -> RunSpec:
    """The inverse of :func:`encode`.

    Raises
    ------
    ValueError
        If ``text`` is not the JSON of a run spec of this version (see :meth:`RunSpec.from_dict`),
        or refers to an array that ``arrays`` lacks.
    """
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not a run spec: not JSON ({exc})") from None
    try:
        decoded = _decode(data, arrays or {})
    except KeyError as exc:
        raise ValueError(f"the run spec refers to the array {exc.args[0]!r}, which the result lacks") from None
    return RunSpec.from_dict(decoded)
