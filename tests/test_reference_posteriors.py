"""The reference posteriors' data and gold draws, the comparison against them, and the exact MALA sampler.

Layers (STYLE.md): deterministic identities first (the vectorised MALA step equals a naive
textbook one given the same random numbers; files match their checksums; the gold draws
against themselves give z = 0), then statistical tests with tolerances from ArviZ's Monte
Carlo standard errors, each with a negative control that the same check must reject.
"""

from __future__ import annotations

import doctest
import fnmatch
import hashlib
import json
import math
import re
import zipfile
from importlib import resources
from pathlib import Path

import arviz as az
import numpy as np
import pytest
from scipy import special
from stats import assert_within_se

from sgsim._validate import ParameterError
from sgsim.experiments import reference_posteriors
from sgsim.experiments.reference_posteriors import mala
from sgsim.targets import posteriordb
from sgsim.targets.posteriordb import POSTERIORS, compare, gold_draws, gold_summary, load_data

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "sgsim" / "data" / "posteriordb"
EIGHT_SCHOOLS = "eight_schools-eight_schools_noncentered"


# --- the shipped files ---------------------------------------------------------------------


def test_every_shipped_file_matches_its_checksum_in_the_provenance_note():
    text = (FOLDER / "PROVENANCE.md").read_text()
    listed = dict(
        (path, digest) for digest, path in re.findall(r"^([0-9a-f]{64})  (\S+)$", text, flags=re.M)
    )  # fmt: skip
    on_disk = {str(p.relative_to(FOLDER)) for p in FOLDER.rglob("*") if p.is_file() and p.name != "PROVENANCE.md"}
    assert set(listed) == on_disk
    for path, digest in listed.items():
        assert hashlib.sha256((FOLDER / path).read_bytes()).hexdigest() == digest, path
    # each posterior brings its own description, model, data and draws
    for name in POSTERIORS:
        info = json.loads((FOLDER / "posteriors" / f"{name}.json").read_text())
        assert info["name"] == name
        for path in (
            f"models/{info['model_name']}.stan",
            f"data/{info['data_name']}.json.zip",
            f"data/{info['data_name']}.info.json",
            f"reference_draws/{name}.json.zip",
            f"reference_draws/{name}.info.json",
        ):
            assert path in on_disk
    assert "LICENCE.txt" in on_disk and "BSD 3-Clause" in (FOLDER / "LICENCE.txt").read_text()


def test_every_shipped_file_is_package_data():
    tomllib = pytest.importorskip("tomllib")
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["sgsim.data"]
    for path in FOLDER.rglob("*"):
        if path.is_file():
            relative = str(path.relative_to(FOLDER.parent))
            assert any(fnmatch.fnmatch(relative, g) for g in globs), relative
    # a data folder, not a package: tests/test_cli.py's list of subpackages stays as it is
    assert not (FOLDER / "__init__.py").exists()


def test_the_module_reads_the_files_as_package_resources():
    assert resources.files("sgsim.data").joinpath("posteriordb", "LICENCE.txt").is_file()
    assert len(POSTERIORS) == len(set(POSTERIORS)) == 11
    assert sorted(POSTERIORS) == sorted(p.stem for p in (FOLDER / "posteriors").glob("*.json"))


# --- load_data ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", POSTERIORS)
def test_load_data_gives_ints_and_finite_arrays(name):
    data = load_data(name)
    assert data
    for key, value in data.items():
        if isinstance(value, np.ndarray):
            assert value.dtype in (np.int64, np.float64), key
            assert np.all(np.isfinite(value)), key
        else:
            assert type(value) in (int, float), key
    # sizes declared in the data agree with the arrays
    for size, arrays in (("N", ("y", "Y", "kid_score", "earn", "weight", "k")), ("T", ("y",)), ("J", ("y", "sigma"))):
        for key in arrays:
            if size in data and key in data:
                assert data[key].shape[0] == data[size], (size, key)


def test_load_data_keeps_the_numbers_and_their_kind():
    data = load_data(EIGHT_SCHOOLS)
    assert data["J"] == 8 and type(data["J"]) is int
    np.testing.assert_array_equal(data["y"], [28, 8, -3, 7, -1, 1, 18, 12])
    assert data["y"].dtype == np.int64
    garch = load_data("garch-garch11")
    assert type(garch["sigma1"]) is float and garch["y"].dtype == np.float64
    diamonds = load_data("diamonds-diamonds")
    assert diamonds["X"].shape == (diamonds["N"], diamonds["K"])
    np.testing.assert_array_equal(diamonds["X"][:, 0], 1.0)  # brms's design matrix holds the intercept column
    # fresh arrays: a caller may change them without changing the next caller's
    diamonds["X"][0, 0] = 5.0
    assert load_data("diamonds-diamonds")["X"][0, 0] == 1.0


def test_load_data_rejects_non_finite_and_non_numeric_values():
    with pytest.raises(ValueError, match="not finite"):
        posteriordb._data_value("p", "a", math.nan)
    with pytest.raises(ValueError, match="non-finite"):
        posteriordb._data_value("p", "a", [1.0, math.inf])
    with pytest.raises(ValueError, match="boolean"):
        posteriordb._data_value("p", "a", True)
    with pytest.raises(ValueError, match="rectangular"):
        posteriordb._data_value("p", "a", [[1.0], [1.0, 2.0]])


@pytest.mark.parametrize("function", [load_data, gold_draws, gold_summary])
def test_unknown_posterior_is_named(function):
    with pytest.raises(ParameterError, match="unknown posterior 'nope'") as info:
        function("nope")
    assert info.value.parameter == "name"


# --- gold_draws and gold_summary ---------------------------------------------------------


@pytest.mark.parametrize("name", POSTERIORS)
def test_gold_draws_have_the_declared_parameters_and_shapes(name):
    draws = gold_draws(name)
    dims = json.loads((FOLDER / "posteriors" / f"{name}.json").read_text())["dimensions"]
    assert set(draws) == set(dims)
    for key, arr in draws.items():
        assert arr.shape[:2] == (10, 1000) and math.prod(arr.shape[2:]) == dims[key]
        assert arr.dtype == np.float64 and not arr.flags.writeable
        assert np.all(np.isfinite(arr))


def test_gold_draws_put_each_stan_column_at_its_index():
    with zipfile.ZipFile(FOLDER / "reference_draws" / f"{EIGHT_SCHOOLS}.json.zip") as archive:
        raw = json.loads(archive.read(archive.namelist()[0]))
    draws = gold_draws(EIGHT_SCHOOLS)
    assert list(draws) == ["theta", "mu", "tau"]  # the file's order
    for chain in (0, 9):
        np.testing.assert_array_equal(draws["theta"][chain, :, 2], raw[chain]["theta[3]"])
        np.testing.assert_array_equal(draws["tau"][chain], raw[chain]["tau"])


def test_stan_names_are_grouped_by_their_indices_whatever_the_order():
    # a matrix written column-major, as Stan writes it, lands at [i - 1, j - 1]
    columns = {f"S[{i},{j}]": [] for j in (1, 2, 3) for i in (1, 2)} | {"b": []}
    groups = posteriordb._group_stan_names("p", columns)
    shape, entries = groups["S"]
    assert shape == (2, 3) and groups["b"][0] == ()
    assert dict(entries)[(1, 2)] == "S[2,3]"
    with pytest.raises(ValueError, match="do not fill"):
        posteriordb._group_stan_names("p", {"v[1]": [], "v[3]": []})
    with pytest.raises(ValueError, match="different numbers of indices"):
        posteriordb._group_stan_names("p", {"v[1]": [], "v[1,2]": []})
    with pytest.raises(ValueError, match="unexpected column"):
        posteriordb._group_stan_names("p", {"lp__ x": []})


def test_gold_draws_are_cached_and_read_only():
    first, second = gold_draws(EIGHT_SCHOOLS), gold_draws(EIGHT_SCHOOLS)
    assert first is not second and first["tau"] is second["tau"]
    first.pop("tau")  # the caller's dict is its own
    assert "tau" in gold_draws(EIGHT_SCHOOLS)
    with pytest.raises(ValueError, match="read-only"):
        second["mu"][0, 0] = 0.0


def test_gold_summary_is_arviz_on_the_gold_draws():
    draws = gold_draws("arK-arK")
    summary = gold_summary("arK-arK")
    assert set(summary) == set(draws)
    beta = summary["beta"]
    assert set(beta) == {"mean", "sd", "mcse_mean", "mcse_sd"}
    assert all(v.shape == (5,) for v in beta.values()) and summary["sigma"]["mean"].shape == ()
    flat = draws["beta"].reshape(-1, 5)
    np.testing.assert_allclose(beta["mean"], flat.mean(0), rtol=1e-14)
    np.testing.assert_allclose(beta["sd"], flat.std(0, ddof=1), rtol=1e-14)
    # the MCSE of the mean is the sd over the square root of ArviZ's (non-rank) ESS of the mean
    ess = az.ess(draws["beta"][..., 1], method="mean")
    assert beta["mcse_mean"][1] == pytest.approx(flat[:, 1].std(ddof=1) / math.sqrt(ess), rel=1e-10)
    # thinned Stan draws are nearly independent: MCSE about sd / 100
    np.testing.assert_allclose(beta["mcse_mean"] / beta["sd"], 0.01, rtol=0.2)
    assert np.all(beta["mcse_sd"] > 0)


# --- compare -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", POSTERIORS)
def test_the_gold_draws_pass_against_themselves_with_z_zero(name):
    result = compare(gold_draws(name), name, z=0.0)
    assert result.ok
    assert all(np.all(z == 0) for z in (*result.z_mean.values(), *result.z_sd.values()))
    assert result.worst[2] == 0.0
    assert result.table().splitlines()[0] == f"{name}: ok at |z| <= 0"


def test_a_shift_of_ten_gold_mcse_in_one_parameter_is_rejected():
    draws = dict(gold_draws(EIGHT_SCHOOLS))
    mcse = gold_summary(EIGHT_SCHOOLS)["theta"]["mcse_mean"][4]
    theta = draws["theta"].copy()
    theta[..., 4] += 10 * mcse
    draws["theta"] = theta
    result = compare(draws, EIGHT_SCHOOLS)
    # the same draws, moved: both MCSEs are the gold one, z = 10 / sqrt(2)
    assert not result.ok
    assert result.worst[:2] == ("theta[5]", "mean")
    assert result.worst[2] == pytest.approx(10 / math.sqrt(2), rel=1e-6)
    assert np.count_nonzero(result.z_mean["theta"]) == 1 and np.all(result.z_sd["theta"] == 0)
    assert result.z_mean["mu"] == 0
    table = result.table()
    assert "REJECTED" in table and re.search(r"^theta\[5\] .* \*$", table, flags=re.M)
    assert compare(draws, EIGHT_SCHOOLS, z=7.5).ok  # within a looser tolerance


def test_a_wider_spread_is_rejected_on_the_sd():
    draws = dict(gold_draws("kidiq-kidscore_momiq"))
    sigma = draws["sigma"]
    draws["sigma"] = sigma.mean() + 1.1 * (sigma - sigma.mean())  # the same mean, 10% wider
    result = compare(draws, "kidiq-kidscore_momiq")
    assert not result.ok and result.worst[:2] == ("sigma", "sd") and result.worst[2] > 5
    assert result.z_mean["sigma"] == pytest.approx(0.0, abs=1e-6)


def test_compare_validates_the_draws():
    draws = dict(gold_draws(EIGHT_SCHOOLS))
    with pytest.raises(ParameterError, match=r"lack the parameters \['tau'\]"):
        compare({k: v for k, v in draws.items() if k != "tau"}, EIGHT_SCHOOLS)
    with pytest.raises(ParameterError, match="shape"):
        compare(draws | {"theta": draws["theta"][..., :7]}, EIGHT_SCHOOLS)
    with pytest.raises(ParameterError, match="non-finite"):
        compare(draws | {"mu": np.where(draws["mu"] > 0, draws["mu"], np.nan)}, EIGHT_SCHOOLS)
    with pytest.raises(ParameterError, match="same"):
        compare(draws | {"mu": draws["mu"][:, :500]}, EIGHT_SCHOOLS)
    with pytest.raises(ParameterError) as info:
        compare(draws, EIGHT_SCHOOLS, z=-1.0)
    assert info.value.parameter == "z"
    # extra keys (the unconstrained theta_trans, say) are ignored
    assert compare(draws | {"theta_trans": draws["theta"]}, EIGHT_SCHOOLS, z=0).ok


def test_a_nan_mcse_is_the_worst_and_fails():
    # a parameter that never moves has no MCSE of its sd (ArviZ: NaN): its z is NaN, which
    # fails at any tolerance and ranks as the worst, above the mean's z of -12
    draws = dict(gold_draws(EIGHT_SCHOOLS))
    draws["mu"] = np.full_like(draws["mu"], 4.0)
    result = compare(draws, EIGHT_SCHOOLS, z=1e6)
    assert not result.ok
    assert result.worst[:2] == ("mu", "sd") and math.isnan(result.worst[2])
    assert result.z_mean["mu"] < -10 and result.z_mean["tau"] == 0.0


# --- MALA: the step itself ---------------------------------------------------------------


def _banana(x):
    # log p = -x1^2 / 2 - (x2 - x1^2)^2 / 2: not Gaussian, so the gradient terms of the ratio matter
    a = x[:, 1] - x[:, 0] ** 2
    grad = np.stack([-x[:, 0] + 2 * a * x[:, 0], -a], axis=1)
    return -0.5 * x[:, 0] ** 2 - 0.5 * a**2, grad


def _naive_mala(logp_grad, x0, n_steps, seed, h, metric):
    # the textbook MH step, chain by chain: Gaussian proposal densities with M^{-1} and log det
    # M, drawing the random numbers in mala's order (all chains' xi, then all chains' u)
    rng = np.random.default_rng(seed)
    m = np.diag(metric) if metric.ndim == 1 else metric
    m_inv, (_, log_det) = np.linalg.inv(m), np.linalg.slogdet(m)
    chol = np.linalg.cholesky(m)

    def log_q(to, frm, g):
        r = to - frm - 0.5 * h * m @ g
        return -0.5 * r @ m_inv @ r / h - 0.5 * log_det

    x = np.array(x0, dtype=float)
    out = []
    for _ in range(n_steps):
        xi, u = rng.standard_normal(x.shape), rng.random(x.shape[0])
        for c in range(x.shape[0]):
            lp_x, g_x = (v[0] for v in logp_grad(x[c : c + 1]))
            y = x[c] + 0.5 * h * m @ g_x + math.sqrt(h) * chol @ xi[c]
            lp_y, g_y = (v[0] for v in logp_grad(y[None]))
            log_alpha = lp_y - lp_x + log_q(x[c], y, g_y) - log_q(y, x[c], g_x)
            if np.log(u[c]) < log_alpha:
                x[c] = y
        out.append(x.copy())
    return np.stack(out, axis=1)


@pytest.mark.parametrize("metric", [np.array([[1.0, 0.3], [0.3, 0.5]]), np.array([0.8, 0.4])], ids=["dense", "diag"])
def test_the_vectorised_step_is_the_textbook_metropolis_hastings_step(metric):
    x0 = np.array([[0.1, 0.2], [-1.0, 1.5], [0.5, -0.3]])
    result = mala(_banana, x0, n_warmup=0, n_draws=300, seed=7, step_size=0.6, metric=metric)
    naive = _naive_mala(_banana, x0, 300, seed=7, h=0.6, metric=metric)
    np.testing.assert_allclose(result.draws, naive, rtol=0, atol=1e-12)
    assert 0.2 < result.acceptance_rate < 0.95  # both accepted and rejected proposals were checked
    np.testing.assert_allclose(result.log_density, _banana(result.draws.reshape(-1, 2))[0].reshape(3, 300))
    assert result.step_size == 0.6 and np.array_equal(result.metric, metric)


def test_the_same_seed_gives_the_same_bits_and_another_seed_other_bits():
    x0 = np.zeros((4, 2))
    a, b = (mala(_banana, x0, 200, 100, seed=3, thin=2) for _ in range(2))
    np.testing.assert_array_equal(a.draws, b.draws)
    assert a.step_size == b.step_size and np.array_equal(a.metric, b.metric)
    assert not np.array_equal(a.draws, mala(_banana, x0, 200, 100, seed=4, thin=2).draws)


def test_thin_keeps_every_thin_th_state():
    x0 = np.zeros((2, 2))
    full = mala(_banana, x0, 0, 60, seed=5, step_size=0.5, metric=np.ones(2))
    thinned = mala(_banana, x0, 0, 20, seed=5, step_size=0.5, metric=np.ones(2), thin=3)
    np.testing.assert_array_equal(thinned.draws, full.draws[:, 2::3])


def test_mala_validates_its_inputs():
    def check(parameter, **kwargs):
        args = {"logp_grad": _banana, "x0": np.zeros((2, 2)), "n_warmup": 10, "n_draws": 10, "seed": 0} | kwargs
        with pytest.raises((ParameterError, TypeError)) as info:
            mala(**args)
        assert info.value.parameter == parameter  # type: ignore[union-attr]

    check("x0", x0=np.zeros(2))
    check("x0", x0=np.array([[0.0, np.nan]]))
    check("x0", logp_grad=lambda x: (np.full(len(x), -np.inf), np.zeros_like(x)))
    check("logp_grad", logp_grad=lambda x: (np.zeros(len(x)), np.zeros(len(x))))
    check("logp_grad", logp_grad=None)
    check("n_draws", n_draws=0)
    check("thin", thin=0)
    check("target_accept", target_accept=1.0)
    check("step_size", step_size=0.0)
    check("metric", metric=np.array([[1.0, 2.0], [2.0, 1.0]]))
    check("metric", metric=np.array([1.0, 0.0]))
    check("metric", metric=np.ones(3))
    check("adjust", adjust=1)


# --- MALA: statistical tests -------------------------------------------------------------


def _mcse_mean(f):
    # through a Dataset: ArviZ 0.2x's mcse of a bare ndarray fails under NumPy >= 2.4 with numba
    return np.asarray(az.mcse(az.convert_to_dataset(np.asarray(f)), method="mean")["x"].values)


def _moment_z(draws, mean, cov, what):
    """Assert the chains' means and second central moments match the truth within 5 SE.

    Each moment is the average over all draws of one function ``f``: ``x_i`` for the mean,
    ``(x_i - m_i)(x_j - m_j)`` with the true mean ``m`` for the covariance (its expectation is
    exactly ``cov_ij``, no estimated mean). The SE of that average is ArviZ's MCSE of ``f``:
    ``sd(f) / sqrt(ESS(f))``, the ESS from the chains' autocorrelations (``method="mean"``).
    The failure message names "mean" or "covariance" for the negative controls.
    """
    d = draws.shape[-1]
    mean_f = draws
    iu = np.triu_indices(d)
    centred = draws - mean
    cov_f = centred[..., iu[0]] * centred[..., iu[1]]
    for f, truth, label in ((mean_f, mean, "mean"), (cov_f, cov[iu], "covariance")):
        se = _mcse_mean(f)
        assert_within_se(f.mean(axis=(0, 1)), truth, se, z=5.0, what=f"{what}: {label}")


def _gaussian(mean, cov):
    precision = np.linalg.inv(cov)

    def logp_grad(x):
        r = x - mean
        pr = r @ precision
        return -0.5 * np.einsum("cd,cd->c", r, pr), -pr

    return logp_grad


CORRELATED_2D = (np.array([1.0, -2.0]), np.array([[1.0, 2.7], [2.7, 9.0]]))  # sds 1 and 3, correlation 0.9


def test_mala_on_a_correlated_2d_gaussian():
    mean, cov = CORRELATED_2D
    x0 = np.random.default_rng(0).normal(size=(8, 2)) * 3
    result = mala(_gaussian(mean, cov), x0, n_warmup=1000, n_draws=2000, seed=11)
    assert 0.45 < result.acceptance_rate < 0.7
    assert result.metric.shape == (2, 2)  # dense below 50 dimensions
    _moment_z(result.draws, mean, cov, "2-D")


def test_mala_on_a_10d_gaussian_with_condition_number_10_000():
    rng = np.random.default_rng(1)
    q, _ = np.linalg.qr(rng.normal(size=(10, 10)))
    cov = q @ np.diag(np.logspace(-2, 2, 10)) @ q.T
    mean = np.linspace(-5, 5, 10)
    result = mala(_gaussian(mean, cov), rng.normal(size=(8, 10)), n_warmup=2000, n_draws=2000, seed=12)
    _moment_z(result.draws, mean, cov, "10-D")
    # the adapted metric has the covariance's shape: the steps no longer see the conditioning
    ratio = np.linalg.eigvals(np.linalg.solve(result.metric, cov)).real
    assert ratio.max() / ratio.min() < 5


def test_mala_on_a_60d_gaussian_uses_a_diagonal_metric():
    scales = np.logspace(-1, 1, 60)
    rng = np.random.default_rng(2)
    result = mala(_gaussian(np.zeros(60), np.diag(scales**2)), rng.normal(size=(8, 60)), 1000, 1000, seed=13)
    assert result.metric.shape == (60,)
    # from the last window's 8 x 250 autocorrelated draws: right to within a factor 2
    np.testing.assert_allclose(result.metric / scales**2, 1.0, rtol=0.5)
    draws = result.draws
    for i in range(0, 60, 6):  # a tenth of the coordinates keeps the test short; all would pass
        _moment_z(draws[..., i : i + 1], np.zeros(1), np.array([[scales[i] ** 2]]), f"60-D, coordinate {i}")


def _log_gamma(shape):
    # x = log y with y ~ Gamma(shape, 1): log p(x) = shape x - exp(x), skewed to the left
    def logp_grad(x):
        return shape * x[:, 0] - np.exp(x[:, 0]), shape - np.exp(x)

    return logp_grad


def test_mala_on_the_log_of_a_gamma_variable():
    shape = 2.0
    result = mala(_log_gamma(shape), np.zeros((8, 1)), n_warmup=1000, n_draws=3000, seed=14)
    # E log y = digamma(k), Var log y = trigamma(k), and E y = k
    mean, var = special.digamma(shape), special.polygamma(1, shape)
    _moment_z(result.draws, np.array([mean]), np.array([[var]]), "log-gamma")
    y = np.exp(result.draws[..., 0])
    se = _mcse_mean(y)
    assert_within_se(y.mean(), shape, se, what="log-gamma: E y")


def test_a_proposal_outside_the_support_is_rejected():
    # a half-normal on x > 0 without a transform: proposals below 0 have log p = -inf (and a
    # NaN gradient there, which must not leak into the chain)
    def logp_grad(x):
        inside = x[:, 0] > 0
        return np.where(inside, -0.5 * x[:, 0] ** 2, -np.inf), np.where(inside[:, None], -x, np.nan)

    result = mala(logp_grad, np.full((8, 1), 0.5), n_warmup=500, n_draws=3000, seed=15)
    assert result.n_nonfinite > 0 and np.all(result.draws > 0)
    mean = math.sqrt(2 / math.pi)
    _moment_z(result.draws, np.array([mean]), np.array([[1 - 2 / math.pi]]), "half-normal")


def test_negative_control_the_unadjusted_chain_is_rejected():
    # without the accept step (ULA) at h = 1 and M = cov, the chain is the exact AR(1)
    # x' = x/2 + cov^(1/2) xi up to the mean, whose stationary covariance is cov / (1 - 1/4):
    # 33% too wide, which the same check rejects, while MALA with the same h and M passes
    mean, cov = CORRELATED_2D
    x0 = np.random.default_rng(3).normal(size=(8, 2)) + mean
    kwargs = {"n_warmup": 200, "n_draws": 2000, "seed": 16, "step_size": 1.0, "metric": cov}
    exact = mala(_gaussian(mean, cov), x0, **kwargs)
    _moment_z(exact.draws, mean, cov, "MALA, h = 1")
    unadjusted = mala(_gaussian(mean, cov), x0, adjust=False, **kwargs)
    assert unadjusted.acceptance_rate == 1.0
    with pytest.raises(AssertionError, match="covariance"):
        _moment_z(unadjusted.draws, mean, cov, "ULA, h = 1")
    np.testing.assert_allclose(np.cov(unadjusted.draws.reshape(-1, 2).T) / cov, 4 / 3, rtol=0.1)


def test_negative_control_a_wrong_density_is_rejected():
    # a log density off by a scale factor (variance 1.21 times the truth) is sampled exactly,
    # and the check against the true moments must see it
    mean, cov = CORRELATED_2D
    x0 = np.random.default_rng(4).normal(size=(8, 2)) + mean
    result = mala(_gaussian(mean, 1.21 * cov), x0, n_warmup=1000, n_draws=2000, seed=17)
    with pytest.raises(AssertionError, match="covariance"):
        _moment_z(result.draws, mean, cov, "wrong density")


# --- end to end: MALA and compare on a real reference posterior --------------------------


def _eight_schools(jacobian=True):
    # the non-centred eight schools on Stan's unconstrained scale (theta_trans, mu, log tau),
    # written here as the test's own oracle: log tau + the Jacobian log tau
    data = load_data(EIGHT_SCHOOLS)
    y, sigma = data["y"].astype(float), data["sigma"].astype(float)

    def logp_grad(x):
        z, mu, log_tau = x[:, :8], x[:, 8], x[:, 9]
        tau = np.exp(log_tau)
        r = (y - (mu[:, None] + tau[:, None] * z)) / sigma
        jac = 1.0 if jacobian else 0.0
        lp = -0.5 * (z**2).sum(1) - 0.5 * (r**2).sum(1) - 0.5 * (mu / 5) ** 2 - np.log1p((tau / 5) ** 2)
        grad = np.empty_like(x)
        grad[:, :8] = -z + (r / sigma) * tau[:, None]
        grad[:, 8] = (r / sigma).sum(1) - mu / 25
        grad[:, 9] = ((r / sigma) * z).sum(1) * tau - 2 * (tau / 5) ** 2 / (1 + (tau / 5) ** 2) + jac
        return lp + jac * log_tau, grad

    return logp_grad


def _constrained(draws):
    z, mu, tau = draws[..., :8], draws[..., 8], np.exp(draws[..., 9])
    return {"theta": mu[..., None] + tau[..., None] * z, "mu": mu, "tau": tau}


def test_mala_matches_the_gold_eight_schools_and_a_forgotten_jacobian_does_not():
    x0 = np.random.default_rng(5).normal(size=(16, 10))
    kwargs = {"n_warmup": 1000, "n_draws": 2000, "seed": 19, "thin": 2}
    good = compare(_constrained(mala(_eight_schools(), x0, **kwargs).draws), EIGHT_SCHOOLS)
    assert good.ok, good.table()
    # negative control: without the Jacobian of log tau the density of tau is wrong by 1/tau
    bad = compare(_constrained(mala(_eight_schools(jacobian=False), x0, **kwargs).draws), EIGHT_SCHOOLS)
    assert not bad.ok and bad.worst[0] == "tau" and abs(bad.worst[2]) > 20


# --- the docstring examples -------------------------------------------------------------


@pytest.mark.parametrize("module", [posteriordb, reference_posteriors], ids=lambda m: m.__name__)
def test_docstring_examples_pass(module):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = doctest.DocTestFinder(exclude_empty=True).find(module, module.__name__, globs={})
    for test in tests:
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.attempted > 0 and results.failed == 0
