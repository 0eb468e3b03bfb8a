"""sgsim.datasets: the shipped Statlog files, their checksums, shapes, labels and encoding."""

import gzip
import hashlib
from importlib import resources

import numpy as np
import pytest

from sgsim import datasets

SHAPES = {"australian": (690, 14), "heart": (270, 13), "german": (1000, 48)}
POSITIVES = {"australian": 307, "heart": 120, "german": 300}


@pytest.mark.parametrize("name", list(SHAPES))
def test_shipped_files_match_their_recorded_checksums(name):
    info = datasets.DATASETS[name]
    raw = gzip.decompress(resources.files("sgsim.data").joinpath(info.file).read_bytes())
    assert hashlib.sha256(raw).hexdigest() == info.sha256
    provenance = resources.files("sgsim.data").joinpath("PROVENANCE.md").read_text()
    assert info.sha256 in provenance and "CC BY 4.0" in provenance


@pytest.mark.parametrize("name", list(SHAPES))
def test_loaders_give_the_documented_shapes_and_labels(name):
    X, y = datasets.load(name)
    info = datasets.DATASETS[name]
    assert X.shape == SHAPES[name] == (info.n_examples, info.n_features)
    assert X.dtype == np.float64 and X.flags.c_contiguous and y.shape == (SHAPES[name][0],)
    assert set(np.unique(y)) == {0.0, 1.0} and int(y.sum()) == POSITIVES[name]
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(X.std(axis=0), 1.0, rtol=1e-12)
    raw, y_raw = datasets.load(name, standardise=False)
    assert np.array_equal(y, y_raw) and np.all(np.isfinite(raw))
    np.testing.assert_allclose((raw - raw.mean(axis=0)) / raw.std(axis=0), X, rtol=0, atol=1e-12)


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
