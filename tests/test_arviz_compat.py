"""sgsim.results under either ArviZ: InferenceData (0.x, Python < 3.12) or xarray.DataTree (1.x, Python >= 3.12).

``.ci/run`` runs this file (with the results, io, diagnostics and sampling tests) once more on
Python 3.12 with ArviZ 1.x; the main run covers ArviZ 0.x.
"""

import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import sgsim
from sgsim import diagnostics, results
from sgsim.io import read_result, write_result
from sgsim.results import group, groups_of, make_result

ROOT = Path(__file__).resolve().parent.parent


def _result_type():
    if results.arviz_major() >= 1:
        return xr.DataTree
    import arviz as az

    return az.InferenceData


def _ar1(seed: int = 12345, n_chains: int = 4, n_draws: int = 500, d: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    e = rng.standard_normal((n_chains, n_draws, d))
    x = np.empty_like(e)
    x[:, 0] = e[:, 0]
    for t in range(1, n_draws):
        x[:, t] = 0.7 * x[:, t - 1] + e[:, t]
    return x


def test_sample_returns_the_result_of_the_installed_arviz():
    # regression: under ArviZ 1.x, sample ran the chains and then raised
    # "TypeError: DataTree.__init__() got an unexpected keyword argument 'posterior'"
    r = sgsim.sample("standard_gaussian", "sgld", 40, n_chains=2, step_size=0.1, seed=0, progress=False)
    assert isinstance(r, _result_type())
    assert groups_of(r)[:3] == ["posterior", "sample_stats", "constant_data"]
    posterior = group(r, "posterior")
    assert isinstance(posterior, xr.Dataset)
    assert posterior["theta"].dims == ("chain", "draw", "dim") and posterior["theta"].shape == (2, 40, 2)
    # read alike under both: attribute and item access, attrs
    np.testing.assert_array_equal(r.posterior["theta"].values, posterior["theta"].values)
    np.testing.assert_array_equal(r["constant_data"]["init"].values, group(r, "constant_data")["init"].values)
    assert r.attrs["method"] == "sgld" and r.posterior.attrs["arviz_version"].split(".")[0] == str(
        results.arviz_major()
    )
    with pytest.raises(KeyError, match="no group 'moments'"):
        group(r, "moments")


def test_make_result_keeps_arrays_order_and_attrs():
    x = _ar1(n_draws=20)
    posterior = xr.Dataset({"theta": (("chain", "draw", "dim"), x)})
    stats = xr.Dataset({"diverged": (("chain", "draw"), np.zeros(x.shape[:2], bool))})
    r = make_result({"sample_stats": stats, "posterior": posterior}, {"seed": 3})
    assert isinstance(r, _result_type())
    assert sorted(groups_of(r)) == ["posterior", "sample_stats"] and r.attrs == {"seed": 3}
    assert np.shares_memory(group(r, "posterior")["theta"].values, x)
    # a group taken from a result (a DataTree node under 1.x) builds a result too
    again = make_result({name: r[name] for name in groups_of(r)})
    np.testing.assert_array_equal(group(again, "posterior")["theta"].values, x)


@pytest.mark.skipif(not hasattr(xr, "DataTree"), reason="xarray without DataTree")
def test_groups_of_reads_a_datatree_whatever_arviz_is_installed():
    tree = xr.DataTree.from_dict({"posterior": xr.Dataset({"theta": (("chain", "draw"), np.ones((1, 2)))})})
    assert groups_of(tree) == ["posterior"] and results.is_result(tree)
    assert isinstance(group(tree, "posterior"), xr.Dataset)
    assert not results.is_result(np.ones((1, 2, 1))) and not results.is_result(group(tree, "posterior"))


# ESS, R-hat and MCSE of _ar1() under ArviZ 0.23.4; ArviZ 1.3 (arviz_stats 1.3.3) gives the same
# numbers to the last bits or two (the tail ESS once its quantiles are the 5% and 95% ones that
# sgsim.results.ess passes). Deterministic, so held to 1e-10 relative.
PINNED = {
    "bulk": [367.2655458961958, 426.40608222678156, 360.54106777449374],
    "tail": [589.4300453445246, 697.9536352822817, 709.3422594323566],
    "mean": [366.8561658970212, 424.11545114315476, 358.4644902795914],
    "sd": [770.3941536338818, 809.5070360570968, 719.0866335825324],
    "rhat": [1.0237303461779828, 1.006058470919173, 1.0154061952713107],
    "mcse_mean": [0.0754951444714093, 0.06902172633938249, 0.07167690860471942],
    "mcse_sd": [0.03549521125871635, 0.03625162626914583, 0.03587147791788108],
}


def _stats(x: np.ndarray) -> dict:
    ds = xr.Dataset({"theta": (("chain", "draw", "dim"), x)})
    out = {m: results.ess(ds, "theta", m) for m in ("bulk", "tail", "mean", "sd")}
    out["rhat"] = results.rhat(ds, "theta")
    out["mcse_mean"] = results.mcse(ds, "mean")["theta"].values
    out["mcse_sd"] = results.mcse(ds, "sd")["theta"].values
    return out


def test_ess_rhat_and_mcse_are_the_same_numbers_under_either_arviz():
    got = _stats(_ar1())
    for name, expected in PINNED.items():
        np.testing.assert_allclose(got[name], expected, rtol=1e-10, atol=0, err_msg=name)
    # the diagnostics users call go through the same functions
    np.testing.assert_allclose(diagnostics.ess(_ar1()), PINNED["bulk"], rtol=1e-10)
    np.testing.assert_allclose(diagnostics.rhat(_ar1()), PINNED["rhat"], rtol=1e-10)


def test_the_pinned_comparison_sees_a_changed_draw():
    # negative control: chain 0's lowest draw of its first half swapped with its highest of its
    # second half (both tails' indicators, the split chains' means and the autocorrelations
    # change) changes every statistic of that coordinate beyond the 1e-10 above
    x = _ar1()
    low, high = np.argmin(x[0, :250, 0]), 250 + np.argmax(x[0, 250:, 0])
    x[0, [low, high], 0] = x[0, [high, low], 0]
    got = _stats(x)
    for name, expected in PINNED.items():
        assert not np.allclose(got[name][0], expected[0], rtol=1e-10, atol=0), name


def test_diagnostics_leave_out_a_marked_chain_under_either_arviz():
    # regression: with a diverged chain, ess/rhat rebuilt a result with the 0.x-only
    # arviz.from_dict(posterior=...), a TypeError under ArviZ 1.x
    x = _ar1()
    diverged = np.zeros(x.shape[:2], bool)
    diverged[1, 400:] = True
    r = make_result(
        {
            "posterior": xr.Dataset({"theta": (("chain", "draw", "dim"), x)}),
            "sample_stats": xr.Dataset({"diverged": (("chain", "draw"), diverged)}),
        }
    )
    healthy = x[[0, 2, 3]]
    with pytest.warns(RuntimeWarning, match=r"chains \[1\] diverged"):
        ess = diagnostics.ess(r)
    np.testing.assert_array_equal(ess, diagnostics.ess(healthy))
    with pytest.warns(RuntimeWarning, match=r"chains \[1\] diverged"):
        np.testing.assert_array_equal(diagnostics.rhat(r), diagnostics.rhat(healthy))
    # control: the four chains give another ESS
    assert not np.array_equal(ess, diagnostics.ess(x))


def test_a_file_in_arviz_0x_layout_reads_under_the_installed_arviz(tmp_path):
    # ArviZ 0.x writes the root's attributes and one netCDF group per result group; a DataTree
    # writes the same layout. Written here with plain xarray, read with the installed ArviZ.
    path = tmp_path / "legacy.nc"
    x = _ar1(n_draws=30)
    xr.Dataset(attrs={"method": "sgld", "seed": 5}).to_netcdf(path, mode="w", engine="h5netcdf")
    xr.Dataset({"theta": (("chain", "draw", "dim"), x)}, attrs={"note": "p"}).to_netcdf(
        path, mode="a", group="posterior", engine="h5netcdf"
    )
    back = results.read_netcdf(path)
    assert isinstance(back, _result_type())
    assert groups_of(back) == ["posterior"] and back.attrs["seed"] == 5 and back.posterior.attrs["note"] == "p"
    np.testing.assert_array_equal(group(back, "posterior")["theta"].values, x)
    path.unlink()  # everything was read into memory
    np.testing.assert_array_equal(back.posterior["theta"].values, x)


def test_write_and_read_a_result_under_the_installed_arviz(tmp_path):
    r = sgsim.sample("standard_gaussian", "sgld", 40, n_chains=2, step_size=0.1, seed=1, progress=False)
    back = read_result(write_result(r, tmp_path / "run.nc"))
    assert isinstance(back, _result_type()) and groups_of(back) == groups_of(r)
    for name in groups_of(r):
        assert group(back, name).equals(group(r, name)), name
    assert back.attrs["seed"] == r.attrs["seed"]


def _arviz_requirements() -> list:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    from packaging.requirements import Requirement

    with open(ROOT / "pyproject.toml", "rb") as fh:
        deps = tomllib.load(fh)["project"]["dependencies"]
    return [Requirement(d) for d in deps if Requirement(d).name == "arviz"]


def test_pyproject_asks_for_the_arviz_this_python_has():
    import importlib.metadata

    reqs = _arviz_requirements()
    applies = [r for r in reqs if r.marker is None or r.marker.evaluate()]
    assert len(reqs) == 2 and len(applies) == 1, [str(r) for r in reqs]
    installed = importlib.metadata.version("arviz")
    assert applies[0].specifier.contains(installed), (str(applies[0]), installed)
    assert results.arviz_major() == (1 if sys.version_info >= (3, 12) else 0)
    # control: the other line's range excludes the installed ArviZ
    (other,) = [r for r in reqs if r is not applies[0]]
    assert not other.specifier.contains(installed)


def test_no_arviz_constructor_outside_the_results_module():
    # the version switch lives in sgsim/results.py alone: no other module of sgsim builds,
    # reads or lists a result through ArviZ 0.x's API, which ArviZ 1.x does not have
    banned = ("az.InferenceData", "az.from_dict", "az.from_netcdf", "az.convert_to_dataset", "az.Numba", ".groups()")
    found = []
    for path in sorted((ROOT / "sgsim").rglob("*.py")):
        if path.name == "results.py":
            continue
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if any(b in line for b in banned) and "match.groups()" not in line:
                found.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert not found, "\n".join(found)
    # control: the scan sees such a line
    assert any(b in "    return az.InferenceData(**kwargs)" for b in banned)
