r"""Reference posteriors of the posterior database: their data, gold-standard draws, and a test against them.

Eleven posteriors of the posterior database (posteriordb, Magnusson et al.) ship in
``sgsim/data/posteriordb`` (BSD-3; provenance, licence and checksums in its
``PROVENANCE.md``): for each, the Stan model, its data, and gold-standard reference draws,
10 chains of 1,000 draws from long Stan runs that passed the database's checks (R-hat below
1.01, effective sample sizes near 10,000, no divergences).

The data part of this module:

* :data:`POSTERIORS`: the names;
* :func:`load_data`: the data of a posterior, as the Stan model reads it;
* :func:`gold_draws`: the reference draws as ``(chain, draw, *shape)`` arrays, one per
  parameter (Stan's ``theta[1]``, ..., ``theta[8]`` become ``theta``, shape ``(10, 1000, 8)``);
* :func:`gold_summary`: their means and standard deviations with Monte Carlo standard
  errors (ArviZ);
* :func:`compare`: a test of one's own draws against the gold ones, mean and standard
  deviation of every scalar parameter.

The gold draws are on the constrained scale of the Stan model (``sigma > 0`` as ``sigma``,
not ``log sigma``), and hold what Stan writes: the parameters and the transformed parameters
(``theta`` of the non-centred eight schools, ``f`` of the Poisson GP regression), not the
generated quantities.
"""

from __future__ import annotations

import functools
import json
import math
import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from .._validate import ParameterError, ParameterTypeError, real
from ._base import Target, factory

__all__ = [
    "POSTERIORS",
    "reference_posterior",
    "gold_parameters",
    "exchangeable_examples",
    "load_data",
    "gold_draws",
    "gold_summary",
    "compare",
    "Comparison",
]

#: The posteriors shipped, by their posterior-database names ``DATA-MODEL``.
POSTERIORS: tuple[str, ...] = (
    "eight_schools-eight_schools_noncentered",
    "sblrc-blr",
    "kidiq-kidscore_momiq",
    "earnings-logearn_height",
    "mesquite-logmesquite_logvolume",
    "arK-arK",
    "garch-garch11",
    "low_dim_gauss_mix-low_dim_gauss_mix",
    "diamonds-diamonds",
    "gp_pois_regr-gp_pois_regr",
    "nes2000-nes",
)

#: the statistics of :func:`gold_summary`, in the order :meth:`Comparison.table` prints them
_STATISTICS = ("mean", "sd", "mcse_mean", "mcse_sd")

# a Stan output column: a name, then optionally 1-based indices in brackets ("Sigma[2,1]")
_STAN_NAME = re.compile(r"^([A-Za-z]\w*)(?:\[(\d+(?:,\d+)*)\])?$")


def _check_name(name: str) -> str:
    if not isinstance(name, str):
        raise ParameterTypeError("name", f"name must be a str, got {type(name).__name__}")
    if name not in POSTERIORS:
        raise ParameterError("name", f"unknown posterior {name!r}; known posteriors: {', '.join(POSTERIORS)}")
    return name


def _folder():
    return resources.files("sgsim.data").joinpath("posteriordb")


def _posterior_info(name: str) -> dict[str, Any]:
    # posteriors/NAME.json: which model and data make the posterior, and its parameter sizes
    return json.loads(_folder().joinpath("posteriors", f"{_check_name(name)}.json").read_text())


def _read_zipped_json(*parts: str) -> Any:
    with _folder().joinpath(*parts).open("rb") as handle, zipfile.ZipFile(handle) as archive:
        members = archive.namelist()
        if len(members) != 1:
            raise ValueError(f"{'/'.join(parts)} must hold one JSON file, holds {members}")
        return json.loads(archive.read(members[0]))


def _data_value(name: str, key: str, value: Any) -> np.ndarray | int | float:
    # JSON keeps Stan's int/real distinction only in how a number is written (5 against 5.0),
    # so an array of ints stays int64 and anything with a real in it becomes float64
    if isinstance(value, bool):
        raise ValueError(f"{name}: data {key!r} is a boolean, which Stan data cannot be")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{name}: data {key!r} is not finite ({value})")
        return value
    try:
        arr = np.asarray(value)
    except ValueError:  # ragged nested lists
        arr = np.asarray(None)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f" or arr.size == 0:
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name}: data {key!r} has non-finite entries")
        return arr
    raise ValueError(f"{name}: data {key!r} is not a (rectangular) array of numbers")


def load_data(name: str) -> dict[str, np.ndarray | int | float]:
    """Return the data of posterior ``name``, as the Stan model's ``data`` block reads it.

    Parameters
    ----------
    name : str
        One of :data:`POSTERIORS`.

    Returns
    -------
    dict
        Each data variable by its Stan name: an ``int`` or a ``float`` for a scalar, an int64
        array for an array written with integers only, a float64 array otherwise (matrices as
        row-major arrays of shape ``(rows, columns)``). Fresh arrays at every call. The file
        may hold variables that the model does not read (``kidiq``'s ``mom_hs``); a Stan
        ``vector`` or ``real`` array whose values happen to be whole numbers comes back as
        int64 (``gp_pois_regr``'s ``x``): cast it where the model needs reals.

    Raises
    ------
    ValueError
        If a value is not finite (never for the shipped files; a check on corruption).
    """
    info = _posterior_info(name)
    raw = _read_zipped_json("data", f"{info['data_name']}.json.zip")
    return {key: _data_value(name, key, value) for key, value in raw.items()}


def _group_stan_names(name: str, chain: Mapping[str, list]) -> dict[str, tuple[tuple[int, ...], list]]:
    # {base: (shape, [(0-based index, column name), ...])}, bases in the order Stan writes them
    groups: dict[str, list[tuple[tuple[int, ...], str]]] = {}
    for column in chain:
        match = _STAN_NAME.match(column)
        if match is None:
            raise ValueError(f"{name}: unexpected column {column!r} in the reference draws")
        base, indices = match.groups()
        index = tuple(int(i) - 1 for i in indices.split(",")) if indices else ()
        groups.setdefault(base, []).append((index, column))
    out = {}
    for base, entries in groups.items():
        ranks = {len(index) for index, _ in entries}
        if len(ranks) != 1:
            raise ValueError(f"{name}: {base} appears with different numbers of indices")
        shape = tuple(max(index[k] for index, _ in entries) + 1 for k in range(ranks.pop()))
        if min((min(index, default=0) for index, _ in entries), default=0) < 0 or len(entries) != math.prod(shape):
            raise ValueError(f"{name}: the columns of {base} do not fill a {shape} array")
        out[base] = (shape, entries)
    return out


@functools.cache
def _gold_draws(name: str) -> dict[str, np.ndarray]:
    chains = _read_zipped_json("reference_draws", f"{name}.json.zip")
    if not chains or any(set(c) != set(chains[0]) for c in chains):
        raise ValueError(f"{name}: the reference chains do not all hold the same parameters")
    n_draws = len(next(iter(chains[0].values())))
    if any(len(v) != n_draws for c in chains for v in c.values()):
        raise ValueError(f"{name}: the reference chains do not all have the same length")
    dimensions = _posterior_info(name)["dimensions"]
    draws = {}
    for base, (shape, entries) in _group_stan_names(name, chains[0]).items():
        arr = np.empty((len(chains), n_draws, *shape))
        for index, column in entries:
            # each Stan column goes where its indices say, whatever order the file lists them in
            arr[(slice(None), slice(None), *index)] = [c[column] for c in chains]
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name}: non-finite reference draws of {base}")
        if dimensions.get(base) != math.prod(shape):
            raise ValueError(
                f"{name}: {base} has {math.prod(shape)} entries, the posterior says {dimensions.get(base)}"
            )
        arr.setflags(write=False)
        draws[base] = arr
    return draws


def gold_draws(name: str) -> dict[str, np.ndarray]:
    """Return the gold-standard draws of posterior ``name``, one array per parameter.

    Parameters
    ----------
    name : str
        One of :data:`POSTERIORS`.

    Returns
    -------
    dict of str to ndarray
        Each parameter (and transformed parameter) of the Stan model by its name, float64 of
        shape ``(chain, draw, *shape)`` = ``(10, 1000, *shape)``, on the constrained scale:
        a scalar has shape ``(10, 1000)``; Stan's ``theta[1]``, ..., ``theta[8]`` make
        ``theta`` of shape ``(10, 1000, 8)`` with ``theta[k]`` at index ``k - 1`` (and
        ``S[i,j]`` at ``[..., i - 1, j - 1]``). Parameters in the order of the file. The arrays
        are read once per process and shared, hence read-only; the dict is a fresh one.

    Examples
    --------
    >>> from sgsim.targets.posteriordb import gold_draws
    >>> draws = gold_draws("eight_schools-eight_schools_noncentered")
    >>> {k: v.shape for k, v in draws.items()}
    {'theta': (10, 1000, 8), 'mu': (10, 1000), 'tau': (10, 1000)}
    >>> draws["tau"].flags.writeable
    False
    """
    return dict(_gold_draws(_check_name(name)))


def _summary(draws: Mapping[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    # mean and sd over all chains and draws; their Monte Carlo standard errors from ArviZ's ESS
    import xarray as xr

    from ..results import mcse

    dataset = xr.Dataset(
        {
            k: (("chain", "draw") + tuple(f"{k}_dim_{i}" for i in range(np.ndim(v) - 2)), np.asarray(v))
            for k, v in draws.items()
        }
    )
    # ArviZ 0.2x's numba branch of mcse(method="sd") calls float() on a 1-element array, a
    # TypeError under NumPy >= 2.4; sgsim.results.mcse takes its plain-NumPy branch, which
    # computes the same numbers. A parameter that never moved has no MCSE: NaN, which
    # compare() reports as a failure
    with np.errstate(divide="ignore", invalid="ignore"):
        mcse_mean = mcse(dataset, method="mean")
        mcse_sd = mcse(dataset, method="sd")
    out = {}
    for key, value in draws.items():
        flat = np.asarray(value).reshape(-1, *np.shape(value)[2:])
        stats = {
            "mean": flat.mean(axis=0),
            "sd": flat.std(axis=0, ddof=1),
            "mcse_mean": np.asarray(mcse_mean[key].values, dtype=np.float64),
            "mcse_sd": np.asarray(mcse_sd[key].values, dtype=np.float64),
        }
        for arr in stats.values():
            arr.setflags(write=False)
        out[key] = stats
    return out


@functools.cache
def _gold_summary(name: str) -> dict[str, dict[str, np.ndarray]]:
    return _summary(_gold_draws(name))


def gold_summary(name: str) -> dict[str, dict[str, np.ndarray]]:
    """Return the posterior means and standard deviations of the gold draws, with their MCSEs.

    Parameters
    ----------
    name : str
        One of :data:`POSTERIORS`.

    Returns
    -------
    dict
        For each parameter of :func:`gold_draws`, a dict with ``"mean"``, ``"sd"`` (over all
        10,000 draws, ``ddof=1``), ``"mcse_mean"`` and ``"mcse_sd"`` (ArviZ's ``mcse`` with
        ``method="mean"`` and ``method="sd"``), each an array of the parameter's shape
        (0-d for a scalar), read-only.
    """
    return {k: dict(v) for k, v in _gold_summary(_check_name(name)).items()}


def _label(name: str, index: tuple[int, ...]) -> str:
    return f"{name}[{','.join(str(i + 1) for i in index)}]" if index else name


@dataclass(frozen=True)
class Comparison:
    """One sampler's draws against the gold draws of a reference posterior (:func:`compare`).

    Attributes
    ----------
    name : str
        The posterior.
    tolerance : float
        The largest ``|z|`` accepted.
    z_mean, z_sd : dict of str to ndarray
        For each parameter, ``(ours - gold) / sqrt(mcse_ours^2 + mcse_gold^2)`` of the mean
        and of the standard deviation, arrays of the parameter's shape.
    ours, gold : dict
        The summaries compared, as :func:`gold_summary` gives them.
    worst : tuple of (str, str, float)
        The entry of largest ``|z|``: its Stan name (``"theta[3]"``), ``"mean"`` or ``"sd"``,
        and its z (NaN counts as the worst).
    ok : bool
        Whether every ``|z| <= tolerance``.
    """

    name: str
    tolerance: float
    z_mean: dict[str, np.ndarray]
    z_sd: dict[str, np.ndarray]
    ours: dict[str, dict[str, np.ndarray]]
    gold: dict[str, dict[str, np.ndarray]]
    worst: tuple[str, str, float]
    ok: bool

    def table(self) -> str:
        """Return a plain-text table: one row per scalar parameter, gold and ours, z-scores.

        Rows whose ``|z|`` exceeds the tolerance are marked with ``*``.
        """
        head = f"{'parameter':<14} {'gold mean':>11} {'mean':>11} {'z':>7}  {'gold sd':>10} {'sd':>10} {'z':>7}"
        lines = [f"{self.name}: {'ok' if self.ok else 'REJECTED'} at |z| <= {self.tolerance:g}", head]
        for key, z_mean in self.z_mean.items():
            z_sd = self.z_sd[key]
            for index in np.ndindex(z_mean.shape):
                g, o = self.gold[key], self.ours[key]
                bad = not (abs(z_mean[index]) <= self.tolerance and abs(z_sd[index]) <= self.tolerance)
                lines.append(
                    f"{_label(key, index):<14} {g['mean'][index]:>11.4g} {o['mean'][index]:>11.4g} "
                    f"{z_mean[index]:>7.2f}  {g['sd'][index]:>10.4g} {o['sd'][index]:>10.4g} {z_sd[index]:>7.2f}"
                    + (" *" if bad else "")
                )
        label, stat, z = self.worst
        lines.append(f"worst: {stat} of {label}, z = {z:.2f}")
        return "\n".join(lines)


def _z_scores(ours: np.ndarray, gold: np.ndarray, se_ours: np.ndarray, se_gold: np.ndarray) -> np.ndarray:
    diff = ours - gold
    with np.errstate(divide="ignore", invalid="ignore"):
        z = diff / np.sqrt(se_ours**2 + se_gold**2)
    # equal estimates agree whatever their errors (the gold draws against themselves: z = 0)
    return np.where(diff == 0, 0.0, z)


def compare(draws: Mapping[str, np.ndarray], name: str, z: float = 5.0) -> Comparison:
    r"""Test draws of posterior ``name`` against its gold draws, mean and sd of every parameter.

    For each scalar parameter the posterior mean and standard deviation of ``draws`` are set
    against those of the gold draws (:func:`gold_summary`) as

    .. math::

        z = \frac{\hat m_\text{ours} - \hat m_\text{gold}}
                 {\sqrt{\mathrm{mcse}_\text{ours}^2 + \mathrm{mcse}_\text{gold}^2}},

    and the draws pass when every ``|z| <= z``.

    **The tolerance.** By the Markov chain central limit theorem each estimate is nearly
    normal around the posterior's value, with standard deviation its Monte Carlo standard
    error (MCSE, ArviZ: the sd over the square root of the effective sample size; for the sd,
    through the ESS of the squared deviations). The two runs are independent, so if ``draws``
    come from the same posterior, ``z`` is nearly standard normal and ``|z| > 5`` has
    probability ``5.7e-7``: at most ``3e-5`` over the 52 entries of the largest posterior
    here (diamonds, 26 parameters), a false alarm that a fixed seed makes a repeatable
    failure rather than a flaky one. A bias is flagged reliably once it exceeds about 6
    combined MCSEs: with the gold ESS near 10,000 and our own as large, ``6 sqrt(2) / 100``,
    near 0.08 posterior sd. The MCSEs are themselves estimated, and the sd's needs a finite fourth
    moment: on a heavy-tailed marginal (the eight schools' ``tau``) it is noisier than the
    normal approximation says, so run long enough that our ESS is in the thousands. See
    also :ref:`theory-tolerances`.

    Parameters
    ----------
    draws : mapping of str to array_like
        At least every parameter of :func:`gold_draws` (other keys are ignored), each of
        shape ``(chain, draw, *shape)`` with the gold shape, on the constrained scale, finite;
        at least 4 draws per chain, the same numbers of chains and draws for all parameters.
    name : str
        One of :data:`POSTERIORS`.
    z : float, default 5.0
        The largest ``|z|`` accepted, ``>= 0``.

    Returns
    -------
    Comparison
        The z-scores, the summaries, the worst entry and the verdict ``ok``;
        ``print(result.table())`` shows them.
    """
    tolerance = real("z", z, 0.0)
    gold = _gold_summary(_check_name(name))
    gold_shapes = {k: v.shape[2:] for k, v in _gold_draws(name).items()}
    if not isinstance(draws, Mapping):
        raise ParameterTypeError("draws", f"draws must be a mapping of parameter names to arrays, got {type(draws)}")
    missing = [k for k in gold if k not in draws]
    if missing:
        raise ParameterError("draws", f"draws lack the parameters {missing} of {name}")
    ours_draws = {}
    for key, shape in gold_shapes.items():
        arr = np.asarray(draws[key], dtype=np.float64)
        if arr.ndim != 2 + len(shape) or arr.shape[2:] != shape:
            raise ParameterError("draws", f"draws[{key!r}] must have shape (chain, draw, *{shape}), got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ParameterError("draws", f"draws[{key!r}] has non-finite values")
        ours_draws[key] = arr
    sizes = {v.shape[:2] for v in ours_draws.values()}
    if len(sizes) != 1 or next(iter(sizes))[0] < 1 or next(iter(sizes))[1] < 4:
        raise ParameterError("draws", f"every parameter needs the same (chain, draw) sizes, >= (1, 4); got {sizes}")
    ours = _summary(ours_draws)
    z_mean, z_sd = {}, {}
    entries: list[tuple[str, str, float]] = []
    for key in gold:
        g, o = gold[key], ours[key]
        z_mean[key] = _z_scores(o["mean"], g["mean"], o["mcse_mean"], g["mcse_mean"])
        z_sd[key] = _z_scores(o["sd"], g["sd"], o["mcse_sd"], g["mcse_sd"])
        for stat, zs in (("mean", z_mean[key]), ("sd", z_sd[key])):
            entries.extend((_label(key, index), stat, float(zs[index])) for index in np.ndindex(zs.shape))
    # NaN (an MCSE that ArviZ could not estimate) ranks above every number
    worst = max(entries, key=lambda e: math.inf if math.isnan(e[2]) else abs(e[2]))
    ok = all(np.all(np.abs(zs) <= tolerance) for zs in (*z_mean.values(), *z_sd.values()))
    return Comparison(name, tolerance, z_mean, z_sd, ours, {k: dict(v) for k, v in gold.items()}, worst, bool(ok))


# ----------------------------------------------------------------------------- the targets


@factory("reference_posterior")
def reference_posterior(name: str, batch_size: int | None = None) -> Target:
    """Reference posterior ``name`` as a target: its Stan model ported to a JAX log density.

    The parameters are the Stan model's, by the same names and in the same order, on Stan's
    unconstrained scale (a positive scale as its log, a probability as its logit, an ordered
    vector as its first value and the logs of its increments); a result holds them by name on
    the constrained scale, with the transformed parameters the gold draws hold (eight
    schools' ``theta``, the Poisson GP's ``f``, garch's ``beta1``). Needs JAX (``pip install
    'sgsim[jax]'``). Registered as the factory ``"reference_posterior"``, so a run on it
    replays by name.

    Parameters
    ----------
    name : str
        One of :data:`POSTERIORS`.
    batch_size : int, optional
        Minibatches of ``batch_size`` examples per step (without replacement, scaled by
        ``N / n``), for the posteriors whose likelihood is a sum over exchangeable examples
        (:func:`exchangeable_examples` > 0); None: the exact gradient.

    Examples
    --------
    >>> from sgsim.targets import posteriordb
    >>> target = posteriordb.reference_posterior("kidiq-kidscore_momiq")
    >>> target.parameters.names, target.dim
    (('beta', 'sigma'), 3)
    """
    from . import _posteriordb_models

    return _posteriordb_models.build(_check_name(name), batch_size=batch_size)


def gold_parameters(name: str) -> dict[str, np.ndarray]:
    """The gold draws as :func:`reference_posterior`'s parameters, ``(chain, draw, *shape)``, constrained.

    Where the port samples another parameter than Stan's output holds (eight schools'
    ``theta_trans``, garch's ``beta1_unit``, the Poisson GP's ``f_tilde``) it is computed from
    the gold draws; ``target.parameters.unconstrain`` maps the result to the sampler's scale.
    """
    from . import _posteriordb_models

    return _posteriordb_models.gold_parameters(_check_name(name))


def exchangeable_examples(name: str) -> int:
    """``N``, the examples of posterior ``name``'s likelihood that minibatches draw from (0: none)."""
    from . import _posteriordb_models

    return _posteriordb_models.exchangeable_examples(_check_name(name))
