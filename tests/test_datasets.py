"""sgsim.datasets: the shipped files, their checksums, shapes, labels and encoding."""

import fnmatch
import gzip
import hashlib
import struct
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
    "boston": (506, 13),
    "concrete": (1030, 8),
    "mnist_5k": (5000, 784),
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
    "boston": "BSD-3-Clause",
    "concrete": "MIT",
    "mnist_5k": "BSD-3-Clause",
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
    # the shipped data stay small (the wheel carries them): 2.5 MB today, MNIST's 5,000 digits 1.1 MB of it
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


@pytest.mark.parametrize("name", ["boston", "concrete"])
def test_bnn_regression_loaders(name):
    info = datasets.DATASETS[name]
    X, y = datasets.load(name)
    assert X.shape == SHAPES[name] == (info.n_examples, info.n_features) and y.shape == (info.n_examples,)
    assert X.dtype == np.float64 and y.dtype == np.float64 and X.flags.c_contiguous
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(X.std(axis=0), 1.0, rtol=1e-12)
    raw, y_raw = datasets.load(name, standardise=False)
    assert np.array_equal(y, y_raw) and np.all(np.isfinite(raw))
    np.testing.assert_allclose((raw - raw.mean(axis=0)) / raw.std(axis=0), X, rtol=1e-12, atol=1e-12)
    assert info.task == "regression" and info.n_classes == 0 and info.response


def test_boston_values_are_those_of_uci():
    X, y = datasets.load_boston(standardise=False)
    # UCI's first tract: CRIM 0.00632, ZN 18, INDUS 2.31, CHAS 0, NOX 0.538, RM 6.575, AGE 65.2, DIS 4.09,
    # RAD 1, TAX 296, PTRATIO 15.3, B 396.9, LSTAT 4.98; MEDV 24
    np.testing.assert_array_equal(X[0], [0.00632, 18, 2.31, 0, 0.538, 6.575, 65.2, 4.09, 1, 296, 15.3, 396.9, 4.98])
    assert y[0] == 24.0 and round(y.mean(), 2) == 22.53 and y.min() == 5.0 and int(np.sum(y == 50.0)) == 16
    assert np.unique(X[:, 3]).tolist() == [0.0, 1.0] and np.unique(X[:, 8]).tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 24]
    # the B column (index 11) is kept, and the docstring says why
    assert X[:, 11].max() == 396.9
    doc = datasets.load_boston.__doc__
    assert "ethically problematic" in doc and "only for faithfulness" in doc


def test_concrete_values_are_those_of_uci():
    X, y = datasets.load_concrete(standardise=False)
    # UCI's first mixture: 540 cement, 0 slag, 0 ash, 162 water, 2.5 superplasticizer, 1040 coarse, 676 fine,
    # 28 days; 79.99 MPa
    np.testing.assert_array_equal(X[0], [540, 0, 0, 162, 2.5, 1040, 676, 28])
    assert y[0] == 79.99 and y.min() == 2.33 and y.max() == 82.6 and round(y.mean(), 3) == 35.818
    assert X[:, 7].min() == 1 and X[:, 7].max() == 365
    # the 25 exact repeats of UCI's file are kept
    assert len(np.unique(np.column_stack([X, y]), axis=0)) == 1005


def test_mnist_5k():
    info = datasets.DATASETS["mnist_5k"]
    raw, y = datasets.load_mnist_5k(standardise=False)
    X, y01 = datasets.load("mnist_5k")
    assert raw.shape == X.shape == SHAPES["mnist_5k"] == (info.n_examples, info.n_features)
    assert X.dtype == raw.dtype == y.dtype == np.float64 and X.flags.c_contiguous and y.shape == (5000,)
    assert np.array_equal(y, y01) and np.array_equal(y, np.round(y))
    # 500 of each digit, sorted by digit
    assert np.bincount(y.astype(int)).tolist() == [500] * 10 and np.all(np.diff(y) >= 0)
    # integer intensities 0-255; standardise=True divides by 255 (121 pixels are blank in every image)
    assert np.array_equal(raw, np.round(raw)) and raw.min() == 0 and raw.max() == 255
    assert np.array_equal(X, raw / 255.0) and int(np.sum(raw.max(axis=0) == 0)) == 121
    # the first image, a zero: ink from pixel 127 (row 4) on, total intensity 31,095
    assert y[0] == 0 and np.flatnonzero(raw[0])[0] == 127 and raw[0].sum() == 31095
    assert raw[0, 127:132].tolist() == [51, 159, 253, 159, 50]
    assert raw.sum() == 131267102


def _idx(array: np.ndarray, code: int) -> bytes:
    return struct.pack(">BBBB", 0, 0, code, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def test_read_idx():
    images = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    assert np.array_equal(datasets.read_idx(_idx(images, 0x08)), images)
    floats = np.linspace(-1, 1, 6).astype(">f8").reshape(3, 2)
    assert np.array_equal(datasets.read_idx(_idx(floats, 0x0E)), floats)
    with pytest.raises(ValueError, match="magic"):
        datasets.read_idx(b"\x01\x00\x08\x01" + bytes(8))
    with pytest.raises(ValueError, match="should hold"):
        datasets.read_idx(_idx(images, 0x08)[:-1])


def test_fashion_mnist_absent_says_how_to_install_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="apt-get install dataset-fashion-mnist"):
        datasets.load_fashion_mnist(tmp_path)
    # one of the two files is not enough
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(_idx(np.zeros(3, dtype=np.uint8), 0x08))
    with pytest.raises(FileNotFoundError, match="apt-get install dataset-fashion-mnist"):
        datasets.load_fashion_mnist(tmp_path)
    with pytest.raises(ValueError, match="split"):
        datasets.load_fashion_mnist(tmp_path, split="validation")


def test_fashion_mnist_reads_idx_files(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(5, 28, 28)).astype(np.uint8)
    labels = np.array([9, 0, 0, 3, 1], dtype=np.uint8)
    (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(_idx(images, 0x08)))
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(_idx(labels, 0x08))
    X, y = datasets.load_fashion_mnist(tmp_path, split="train")
    assert X.shape == (5, 784) and X.dtype == y.dtype == np.float64 and X.flags.c_contiguous
    assert np.array_equal(X, images.reshape(5, 784) / 255.0) and y.tolist() == [9, 0, 0, 3, 1]
    raw, _ = datasets.load_fashion_mnist(tmp_path, split="train", standardise=False)
    assert np.array_equal(raw[1].reshape(28, 28), images[1])
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(_idx(np.array([1, 2, 3, 4, 10], dtype=np.uint8), 0x08))
    with pytest.raises(OSError, match="classes 0-9"):
        datasets.load_fashion_mnist(tmp_path, split="train")


def test_fashion_mnist_installed():
    root = Path(datasets.FASHION_MNIST_DIR)
    if not (root / "t10k-images-idx3-ubyte.gz").is_file():
        pytest.skip(f"Fashion-MNIST is not installed in {root} (apt-get install dataset-fashion-mnist)")
    X, y = datasets.load_fashion_mnist()
    assert X.shape == (10000, 784) and X.min() == 0 and X.max() == 1
    assert np.bincount(y.astype(int)).tolist() == [1000] * 10
    assert len(datasets.FASHION_MNIST_CLASSES) == 10


def test_render_letters_is_reproducible_and_mnist_like():
    X, y = datasets.render_letters(20, seed=3)
    assert X.shape == (200, 784) and X.dtype == y.dtype == np.float64 and X.flags.c_contiguous
    assert y.tolist() == np.repeat(np.arange(10.0), 20).tolist() and datasets.LETTERS == "ABCDEFGHIJ"
    assert X.min() == 0 and X.max() == 1
    X2, y2 = datasets.render_letters(20, seed=3)
    assert np.array_equal(X, X2) and np.array_equal(y, y2)
    assert not np.array_equal(X, datasets.render_letters(20, seed=4)[0])
    # every image has ink, inside the frame and off its outer row and column (shifts of at most 2 pixels)
    images = X.reshape(-1, 28, 28)
    assert np.all(images.sum(axis=(1, 2)) > 10)
    assert np.all(images[:, [0, -1], :] == 0) and np.all(images[:, :, [0, -1]] == 0)
    # as much ink as MNIST's digits on average (0.13 of the frame); no image is blank or a full box
    assert 0.08 < X.mean() < 0.2 and np.all(X.mean(axis=1) < 0.5)


def test_render_letters_differ_between_classes():
    train, y_train = datasets.render_letters(30, seed=1)
    test, y_test = datasets.render_letters(30, seed=2)
    means = np.stack([train[y_train == k].mean(axis=0) for k in range(10)])
    # every class mean differs from every other
    gaps = np.sqrt(((means[:, None] - means[None]) ** 2).sum(axis=-1))
    assert np.all(gaps[~np.eye(10, dtype=bool)] > 1.0)
    # a nearest-class-mean classifier fitted on one seed recognises the letters of another well above chance (0.1)
    predicted = np.argmin(((test[:, None, :] - means[None]) ** 2).sum(axis=-1), axis=1)
    assert np.mean(predicted == y_test) > 0.35


def test_render_letters_checks_its_arguments():
    with pytest.raises(ValueError, match="n_per_class"):
        datasets.render_letters(0, seed=0)
    with pytest.raises(TypeError, match="seed"):
        datasets.render_letters(2, seed=None)
