"""sgsim.results: the groups built from cached templates equal those xarray's constructor builds."""

import numpy as np
import pytest
import xarray as xr

from sgsim import results
from sgsim.results import RunOutput, group, groups_of, to_inference_data

if results.arviz_major() >= 1:
    import arviz_base as az
else:
    import arviz as az


def _direct(out: RunOutput) -> dict:
    # the plain construction, one xr.Dataset call per group: the oracle for the templates
    origin = az.rcParams["data.index_origin"]
    some = out.theta if out.theta is not None else out.constants["init"]
    n_chains, d = some.shape[0], some.shape[-1]
    ensemble = out.constants["init"].ndim == 3
    chain = np.arange(origin, origin + n_chains)
    coords = {"chain": chain, "dim": np.arange(d)}
    member = ("particle", "dim") if ensemble else ("dim",)
    if ensemble:
        coords["particle"] = np.arange(out.constants["init"].shape[1])
    groups = {}
    if out.theta is not None:
        draw = np.arange(origin, origin + out.theta.shape[1])
        dims = ("chain", "draw") + member
        flat = xr.Dataset({"theta": (dims, out.theta)}, coords={**coords, "draw": draw})
        if out.named is None:
            groups["posterior"] = flat
        else:
            lead = dims[:-1]
            named, named_coords = {}, {k: v for k, v in coords.items() if k != "dim"}
            for name, value in out.named.items():
                axes = tuple(f"{name}_dim_{i}" for i in range(value.ndim - len(lead)))
                named[name] = (lead + axes, value)
                named_coords.update({a: np.arange(n) for a, n in zip(axes, value.shape[len(lead) :], strict=True)})
            groups["posterior"] = xr.Dataset(named, coords={**named_coords, "draw": draw})
            groups["unconstrained_posterior"] = flat
        stats = {k: (("chain", "draw"), np.broadcast_to(v, (n_chains, v.shape[0]))) for k, v in out.draw_stats.items()}
        for name, value in out.chain_stats.items():
            stats[name] = (("chain", "draw") + (("particle",) if value.ndim == 3 else ()), value)
        stat_coords = {"chain": chain, "draw": draw}
        if ensemble:
            stat_coords["particle"] = coords["particle"]
        groups["sample_stats"] = xr.Dataset(stats, coords=stat_coords)
    const = {k: (("chain",) + member[: v.ndim - 1], v) for k, v in out.constants.items()}
    const_coords = {"chain": np.arange(n_chains), "dim": coords["dim"]}
    if ensemble:
        const_coords["particle"] = coords["particle"]
    groups["constant_data"] = xr.Dataset(const, coords=const_coords)
    if out.moments is not None:
        m = out.moments
        groups["moments"] = xr.Dataset(
            {
                "theta_mean": (("chain",) + member, m["theta_mean"]),
                "theta_cov": (("chain",) + member + ("dim_b",), m["theta_cov"]),
                "n_draws": (("chain",), m["n_draws"]),
            },
            coords={**const_coords, "dim_b": coords["dim"]},
        )
    if out.spec_arrays:
        arrays = {k: np.asarray(v) for k, v in out.spec_arrays.items()}
        groups["run_spec"] = xr.Dataset({k: (tuple(f"{k}_{i}" for i in range(v.ndim)), v) for k, v in arrays.items()})
    return groups


def _bare(ds: xr.Dataset) -> xr.Dataset:
    bare = ds.copy()
    bare.attrs = {}
    return bare


def _output(kind: str, rng: np.random.Generator, n_chains=3, n_draws=5, d=2) -> RunOutput:
    lead = (n_chains, 4) if kind == "ensemble" else (n_chains,)
    theta = rng.standard_normal((n_chains, n_draws) + lead[1:] + (d,))
    stats = {
        "step_size": rng.random(n_draws),
        "stage": np.zeros(n_draws, np.int8),
        "step": np.arange(1, n_draws + 1, dtype=np.int64),
    }
    chain_stats = {"diverged": rng.random((n_chains, n_draws)) < 0.2}
    if kind == "ensemble":
        chain_stats["bandwidth"] = rng.random((n_chains, n_draws))
    constants = {
        "init": rng.standard_normal(lead + (d,)),
        "final_theta": theta[:, -1],
        "diverged_at": np.arange(n_chains, dtype=np.int64),
    }
    out = RunOutput(
        storage="moments" if kind == "moments" else "draws",
        theta=None if kind == "moments" else theta,
        draw_stats=stats,
        chain_stats=chain_stats,
        constants=constants,
        moments=None,
        attrs={"method": "sgld", "seed": 7, "kind": kind},
        spec_arrays={"schedule_step_size": rng.random(n_draws), "init": rng.random((n_chains, d))},
    )
    if kind == "moments":
        out.moments = {
            "theta_mean": rng.standard_normal((n_chains, d)),
            "theta_cov": rng.standard_normal((n_chains, d, d)),
            "n_draws": np.full(n_chains, n_draws, np.int64),
        }
    if kind == "named":
        out.named = {"mu": theta[..., 0], "scale": np.exp(theta), "corr": rng.random((n_chains, n_draws, d, d))}
    return out


@pytest.mark.parametrize("kind", ["draws", "ensemble", "named", "moments"])
def test_groups_equal_the_direct_construction(kind):
    rng = np.random.default_rng(0)
    results._TEMPLATES.clear()
    for _ in range(2):  # the first builds the templates, the second reuses them
        out = _output(kind, rng)
        idata = to_inference_data(out)
        expected = _direct(out)
        assert sorted(groups_of(idata)) == sorted(expected)
        for name, ds in expected.items():
            got = group(idata, name)
            # identical(): values, dims, coordinates, attributes; then the orders xarray keeps
            assert _bare(got).identical(ds), name
            assert list(got.dims) == list(ds.dims) and list(got.coords) == list(ds.coords), name
            assert list(got.data_vars) == list(ds.data_vars), name
        # the run's arrays are not copied
        if out.theta is not None:
            assert np.shares_memory(results.flat_draws(idata), out.theta)
        assert idata["constant_data"].attrs == out.attrs
        assert set(idata["constant_data"].attrs) == set(out.attrs)
        if "posterior" in groups_of(idata):
            assert {"created_at", "arviz_version"} <= set(idata["posterior"].attrs)


def test_the_comparison_sees_a_wrong_group():
    # negative control: the oracle comparison above rejects a changed value or coordinate
    rng = np.random.default_rng(1)
    out = _output("draws", rng)
    idata = to_inference_data(out)
    expected = _direct(out)["posterior"]
    changed = expected.copy(deep=True)
    changed["theta"][0, 0, 0] += 1e-12
    assert not _bare(group(idata, "posterior")).identical(changed)
    shifted = expected.assign_coords(draw=expected["draw"] + 1)
    assert not _bare(group(idata, "posterior")).identical(shifted)


def test_templates_hold_no_run_data_and_results_are_independent():
    rng = np.random.default_rng(2)
    results._TEMPLATES.clear()
    first, second = _output("draws", rng), _output("draws", rng)
    a, b = to_inference_data(first), to_inference_data(second)
    np.testing.assert_array_equal(a.posterior["theta"].values, first.theta)
    np.testing.assert_array_equal(b.posterior["theta"].values, second.theta)
    a.posterior.attrs["note"] = "mine"
    a.posterior["theta"].attrs["units"] = "m"
    assert "note" not in b.posterior.attrs and "units" not in b.posterior["theta"].attrs
    # the coordinates shared with the template cannot be written through
    with pytest.raises(ValueError, match="read-only"):
        a.posterior["draw"].values[0] = 99
    for template in results._TEMPLATES.values():
        for var in template.data_vars.values():
            assert all(s == 0 for s in var.data.strides), "a template keeps a run's array"
    # one template per layout, a bounded number of layouts
    for n in range(results._TEMPLATES_MAX + 5):
        to_inference_data(_output("draws", rng, n_draws=n + 1))
    assert len(results._TEMPLATES) == results._TEMPLATES_MAX
    # a layout of many draws is built all the same, and not kept
    results._TEMPLATES.clear()
    many = _output("draws", rng, n_chains=1, n_draws=results._TEMPLATE_MAX_COORDS + 1)
    idata = to_inference_data(many)
    assert _bare(group(idata, "posterior")).identical(_direct(many)["posterior"])
    assert all(n <= results._TEMPLATE_MAX_COORDS for key in results._TEMPLATES for _, (_, n) in key[1])
    assert not any(dict(key[1]).get("draw") for key in results._TEMPLATES)


def test_index_origin_is_followed():
    rng = np.random.default_rng(3)
    out = _output("draws", rng)
    with az.rc_context({"data.index_origin": 1}):
        idata = to_inference_data(out)
        expected = _direct(out)
    assert idata.posterior["chain"].values[0] == 1
    assert _bare(group(idata, "posterior")).identical(expected["posterior"])


def test_a_group_is_put_together_directly_and_shares_no_container_with_its_template(monkeypatch):
    rng = np.random.default_rng(4)
    results._TEMPLATES.clear()
    out = _output("draws", rng)
    to_inference_data(out)
    (template,) = [t for t in results._TEMPLATES.values() if "theta" in t]
    data = {"theta": rng.standard_normal(out.theta.shape)}

    def copied(*args, **kwargs):
        raise AssertionError("the template was copied: xarray's direct constructor was not used")

    # with this xarray the group is made by the direct constructor, not by the copy
    with monkeypatch.context() as m:
        m.setattr(xr.Dataset, "copy", copied)
        fast = results._from_template(template, data, {"a": 1})

    # the copy (what an xarray without those internals gets: here a template that shows only its
    # public copy) makes the identical group
    class Public:
        def copy(self, deep, data):
            return template.copy(deep=deep, data=data)

    slow = results._from_template(Public(), data, {"a": 1})
    assert fast.identical(slow) and fast.attrs == {"a": 1}
    assert np.shares_memory(fast["theta"].values, data["theta"])
    # what a caller adds to one group reaches neither the template nor another group made from it
    fast["extra"] = (("chain",), np.zeros(out.theta.shape[0]))
    fast.coords["label"] = ("chain", [f"c{i}" for i in range(out.theta.shape[0])])
    other = results._from_template(template, data, {})
    for ds in (template, other):
        assert "extra" not in ds and "label" not in ds.coords
    # negative control: the comparison sees a group made from other values
    assert not fast.identical(results._from_template(template, {"theta": data["theta"] + 1.0}, {"a": 1}))
