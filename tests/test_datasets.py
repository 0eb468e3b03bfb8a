"""sgsim.datasets: the shipped files, their checksums, shapes, labels and encoding."""

import fnmatch
import gzip
import hashlib
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from sgsim import datasets

SHAPES = {
    "australian": (690, 14),
    "heart": (270, 13),
    "german": (1000, 48),
    "fertility": (254654, 7),
    "fair": (6366, 8),
    "diamonds": (53940, 9),
    "optdigits": (5620, 62),
}
POSITIVES = {"australian": 307, "heart": 120, "german": 300, "fertility": 96912}
LICENCES = {
    "australian": "CC BY 4.0",
    "heart": "CC BY 4.0",
    "german": "CC BY 4.0",
    "optdigits": "CC BY 4.0",
    "fair": "BSD-3-Clause",
    "diamonds": "MIT",
    "fertility": "GPL-2 or GPL-3",
}


def test_every_data_set_is_tested():
    assert set(SHAPES) == set(datasets.DATASETS) == set(LICENCES)


@pytest.mark.parametrize("name", list(SHAPES))
def test_shipped_files_match_their_recorded_checksums(name):
    info = datasets.DATASETS[name]
    raw = gzip.decompress(resources.files("sgsim.data").joinpath(info.file).read_bytes())
    assert hashlib.sha256(raw).hexdigest() == info.sha256
    provenance = resources.files("sgsim.data").joinpath("PROVENANCE.md").read_text()
    row = next(line for line in provenance.splitlines() if line.startswith(f"| `{info.file}`"))
    assert info.sha256 in row and LICENCES[name] in row


def test_shipped_files_are_package_data():
    tomllib = pytest.importorskip("tomllib")
    root = Path(__file__).resolve().parents[1]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["sgsim.data"]
    for info in datasets.DATASETS.values():
        assert any(fnmatch.fnmatch(info.file, g) for g in globs), info.file
    assert "PROVENANCE.md" in globs
    # the shipped data stay small (the wheel carries them): 1.4 MB today
    assert sum((root / "sgsim" / "data" / i.file).stat().st_size for i in datasets.DATASETS.values()) < 3e6


@pytest.mark.parametrize("name", list(POSITIVES))
def test_loaders_give_the_documented_shapes_and_labels(name):
    X, y = datasets.load(name)
    info = datasets.DATASETS[name]
    assert X.shape == SHAPES[name] == (info.n_examples, info.n_features)
    assert X.dtype == np.float64 and X.flags.c_contiguous and y.shape == (SHAPES[name][0],)
    assert set(np.unique(y)) == {0.0, 1.0} and int(y.sum()) == POSITIVES[name]
    # sums over N rows round at about N eps relative: 1e-12 for the Statlog sets, 1e-11 for fertility
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(X.std(axis=0), 1.0, rtol=1e-10)
    raw, y_raw = datasets.load(name, standardise=False)
    assert np.array_equal(y, y_raw) and np.all(np.isfinite(raw))
    np.testing.assert_allclose((raw - raw.mean(axis=0)) / raw.std(axis=0), X, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["fair", "diamonds", "optdigits"])
def test_regression_and_multiclass_loaders(name):
    info = datasets.DATASETS[name]
    X, y = datasets.load(name)
    assert X.shape == SHAPES[name] == (info.n_examples, info.n_features)
    assert X.dtype == np.float64 and y.dtype == np.float64 and X.flags.c_contiguous and y.shape == (info.n_examples,)
    assert np.all(np.isfinite(X)) and np.all(np.isfinite(y))
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(X.std(axis=0), 1.0, rtol=1e-12)
    raw, y_raw = datasets.load(name, standardise=False)
    assert np.array_equal(y, y_raw)  # the response is never standardised
    # rare pixels of optdigits standardise to values near 50: a relative tolerance too
    np.testing.assert_allclose((raw - raw.mean(axis=0)) / raw.std(axis=0), X, rtol=1e-12, atol=1e-12)
    if info.task == "multiclass":
        assert np.array_equal(np.unique(y), np.arange(info.n_classes))
    else:
        assert info.task == "regression" and info.n_classes == 0 and not np.all(y == np.round(y))
    assert info.substitutes and info.response and info.paper_covariates is None


def test_new_raw_values_are_those_of_the_sources():
    X, y = datasets.load_fair(standardise=False)
    # first row of statsmodels' fair.csv: 3,32,9,3,3,17,2,5,0.1111111
    np.testing.assert_array_equal(X[0], [3, 32, 9, 3, 3, 17, 2, 5])
    assert y[0] == 0.1111111 and int(np.sum(y == 0)) == 4313
    X, y = datasets.load_diamonds(standardise=False)
    # ggplot2's first diamond: 0.23 carat, Ideal, E, SI2, depth 61.5, table 55, $326, 3.95 x 3.98 x 2.43
    np.testing.assert_array_equal(X[0], [0.23, 4, 5, 1, 61.5, 55.0, 3.95, 3.98, 2.43])
    assert y[0] == np.log(326.0) and np.exp(y).min() == pytest.approx(326) and np.exp(y).max() == pytest.approx(18823)
    assert [np.unique(X[:, j]).tolist() for j in (1, 2, 3)] == [list(range(5)), list(range(7)), list(range(8))]
    X, y = datasets.load_fertility(standardise=False)
    # first row of AER's Fertility: morekids no, gender1 male, gender2 female, age 27, no, no, no, work 0
    np.testing.assert_array_equal(X[0], [1, 0, 27, 0, 0, 0, 0])
    assert y[0] == 0.0 and X[:, 2].min() == 21 and X[:, 2].max() == 35 and X[:, 6].max() == 52
    X, y = datasets.load_optdigits(standardise=False)
    assert np.bincount(y.astype(int)).tolist() == [554, 571, 557, 572, 568, 558, 558, 566, 554, 562]
    assert X.min() == 0 and X.max() == 16
    # the two dropped pixels are 0 in every image of the file, and the rest are what remain
    info = datasets.DATASETS["optdigits"]
    rows = np.array(datasets.read_keel(gzip.decompress(
        resources.files("sgsim.data").joinpath(info.file).read_bytes()).decode()), dtype=float)  # fmt: skip
    assert np.all(rows[:, [0, 39]] == 0) and np.array_equal(np.delete(rows[:, :64], [0, 39], axis=1), X)


def test_raw_values_are_those_of_the_files():
    X, y = datasets.load_australian(standardise=False)
    # first row of australian.dat: 1,2208.0,1146.0,2,4,4,1585.0,0,0,0,1,2,100,1213,0
    np.testing.assert_array_equal(X[0], [1, 2208.0, 1146.0, 2, 4, 4, 1585.0, 0, 0, 0, 1, 2, 100, 1213])
    assert y[0] == 0.0
    X, y = datasets.load_heart(standardise=False)
    np.testing.assert_array_equal(X[0], [70, 1, 4, 130, 322, 0, 2, 109, 0, 24.0, 2, 3, 3])
    assert y[0] == 1.0  # file label 2: presence


def test_german_one_hot_drops_the_first_level_of_each_categorical_attribute():
    X, y = datasets.load_german(standardise=False)
    # 13 categorical attributes with these numbers of levels present, then 7 numeric ones
    levels = [4, 5, 10, 5, 5, 4, 3, 4, 3, 3, 4, 2, 2]
    assert sum(n - 1 for n in levels) + 7 == 48
    numeric = [3, 17, 26, 32, 36, 41, 45]  # duration, amount, rate, residence, age, credits, liable
    assert X[0, numeric].tolist() == [6, 1169, 4, 4, 67, 2, 1]
    indicator = np.setdiff1d(np.arange(48), numeric)
    assert np.all((X[:, indicator] == 0) | (X[:, indicator] == 1))
    # first row A11, A34, A43, A65, A75, A93, A101, A121, A143, A152, A173, A192, A201: its
    # indicators are those of the levels other than the first (A11, A101, A121, A201 are first)
    first = X[0, indicator]
    assert first.sum() == 9
    assert y[0] == 0.0 and y[1] == 1.0  # labels 1 (good), 2 (bad)


def test_read_keel_skips_headers_and_checks_widths():
    text = "@relation x\n@attribute a real\n@data\n1, 2,0\n\n3,4 , 1\n"
    assert datasets.read_keel(text) == [["1", "2", "0"], ["3", "4", "1"]]
    with pytest.raises(ValueError, match="different numbers of fields"):
        datasets.read_keel("1,2\n3\n")
    with pytest.raises(ValueError, match="no data rows"):
        datasets.read_keel("@data\n")


def test_unknown_data_set():
    with pytest.raises(ValueError, match="unknown data set"):
        datasets.load("iris")
