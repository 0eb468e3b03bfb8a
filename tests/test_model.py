"""Targets from log densities (sgsim.targets.model, sgsim.targets.autodiff): JAX, PyTorch and NumPy gradients.

Statistical comparisons between two implementations of one target run the same sampler with
different seeds on independent chains; each chain's time average of a statistic is one iid
replica, so the SE of the difference of the two pooled means is
``sqrt(var_1 / C_1 + var_2 / C_2)`` over the chains' averages, and a difference beyond 5 of
them fails (two-sided false alarm 6e-7). The negative control is a log density with one term
dropped, which the same check rejects.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sgsim
from sgsim.targets import interval, model, ordered, positive
from sgsim.targets.parameters import NUMPY_OPS, Parameters

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import user_models  # noqa: E402
from user_banana import banana as numba_banana  # noqa: E402

HERE = Path(__file__).parent


@sgsim.jit
def _funnel_grad_u(theta, params, out):
    y = theta[0]
    s = 0.0
    for i in range(1, theta.shape[0]):
        s += theta[i] ** 2
        out[i] = theta[i] * np.exp(-y)
    out[0] = y / 9.0 - 0.5 * s * np.exp(-y) + 0.5 * (theta.shape[0] - 1)


@sgsim.jit
def _funnel_log_density(theta, params):
    y = theta[0]
    s = 0.0
    for i in range(1, theta.shape[0]):
        s += theta[i] ** 2
    return -(y**2) / 18.0 - 0.5 * s * np.exp(-y) - 0.5 * (theta.shape[0] - 1) * y


def numba_funnel(dim=1):
    # E y = 0, E y^2 = 9, E x_i^2 = E e^y = e^{9/2}
    m2 = np.diag([9.0] + [np.exp(4.5)] * dim)
    return sgsim.targets.Target(
        "funnel", dim + 1, _funnel_grad_u, _funnel_log_density, (), init_low=-2.0, init_high=2.0,
        mean=np.zeros(dim + 1), second_moment=m2,
    )  # fmt: skip


def _chain_means(result, stats):
    theta = sgsim.results.flat_draws(result)
    return np.stack([f(theta).mean(axis=1) for f in stats], axis=-1)  # (chains, n_stats)


def _same_law(one, two, what, z=5.0):
    # one, two: (chains, n_stats) per-chain averages of independent runs
    diff = one.mean(0) - two.mean(0)
    se = np.sqrt(one.var(0, ddof=1) / one.shape[0] + two.var(0, ddof=1) / two.shape[0])
    bad = np.abs(diff) > z * se
    assert not bad.any(), f"{what}: differences {diff} exceed {z} SE {se}"


FUNNEL_STATS = (lambda t: t[..., 0], lambda t: t[..., 0] ** 2, lambda t: t[..., 1] ** 2)
BANANA_STATS = (lambda t: t[..., 0] ** 2, lambda t: t[..., 1], lambda t: t[..., 1] ** 2)
# the funnel's neck (y < -6) needs steps below 2 e^y: 0.004 keeps the chains stable there
CSGLD = dict(method="csgld", n_steps=6000, step_size=0.004, n_cycles=3, n_chains=64, burn_in=1000, thin=5)


def _run(target, seed, **kw):
    kw = {**CSGLD, **kw}
    return sgsim.sample(target, kw.pop("method"), kw.pop("n_steps"), seed=seed, **kw)


def test_funnel_jax_matches_numba_by_hand_and_rejects_a_dropped_term():
    hand = _chain_means(_run(numba_funnel(), 1), FUNNEL_STATS)
    auto = _chain_means(_run(user_models.funnel_jax(), 2), FUNNEL_STATS)
    _same_law(auto, hand, "funnel, JAX against numba")
    wrong = _chain_means(_run(user_models.funnel_jax(wrong=True), 2), FUNNEL_STATS)
    with pytest.raises(AssertionError, match="exceed"):
        _same_law(wrong, hand, "funnel without its normaliser term")


def test_banana_jax_matches_numba_by_hand():
    hand = _chain_means(_run(numba_banana(), 3, step_size=0.05), BANANA_STATS)
    auto = _chain_means(_run(user_models.banana_jax(), 4, step_size=0.05), BANANA_STATS)
    _same_law(auto, hand, "banana, JAX against numba")
    # E[y] = b and E[y^2] = 1 + 3 b^2: curvature 1.2 moves them 7 SE at this run length (0.8 only 5,
    # at the threshold: a control must be rejected with margin, whatever the streams)
    wrong = _chain_means(_run(user_models.banana_jax(b=1.2), 4, step_size=0.05), BANANA_STATS)
    with pytest.raises(AssertionError, match="exceed"):
        _same_law(wrong, hand, "banana with another curvature")


def test_funnel_torch_matches_numba_and_reruns_bit_for_bit():
    pytest.importorskip("torch")
    target = user_models.funnel_torch()
    hand = _chain_means(_run(numba_funnel(), 5), FUNNEL_STATS)
    first = _run(target, 6)
    _same_law(_chain_means(first, FUNNEL_STATS), hand, "funnel, PyTorch against numba")
    again = _run(target, 6)
    assert np.array_equal(first.posterior["y"].values, again.posterior["y"].values)


def test_same_seed_same_bits_and_a_chain_does_not_depend_on_the_others():
    target = user_models.funnel_jax(dim=3)
    one = sgsim.sample(target, "sghmc", 300, step_size=0.01, n_chains=5, seed=7)
    two = sgsim.sample(target, "sghmc", 300, step_size=0.01, n_chains=5, seed=7)
    three = sgsim.sample(target, "sghmc", 300, step_size=0.01, n_chains=2, seed=7)
    a, b, c = (sgsim.results.flat_draws(r) for r in (one, two, three))
    assert np.array_equal(a, b)
    assert np.array_equal(a[:2], c)


def test_a_log_density_follows_the_compiled_path_step_for_step():
    # the same target through JAX and through numba, the same seed: the streams are drawn in
    # the same order, so the chains agree up to the gradients' rounding
    hand = sgsim.sample(numba_funnel(), "sghmc", 200, step_size=0.01, n_chains=3, seed=11)
    auto = sgsim.sample(user_models.funnel_jax(), "sghmc", 200, step_size=0.01, n_chains=3, seed=11)
    np.testing.assert_allclose(sgsim.results.flat_draws(auto), hand.posterior["theta"].values, rtol=0, atol=1e-9)


def test_data_of_ones_own_minibatches_as_the_built_in_regression():
    # logistic regression written as a per-example log likelihood, minibatched without and
    # with replacement: the same minibatches as the compiled target's, hence the same chain
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = (rng.uniform(size=60) < 1 / (1 + np.exp(-X @ np.array([1.0, -1.0, 0.5])))).astype(float)
    for replace in (False, True):
        compiled = sgsim.targets.logistic_regression(
            X, y, batch_size=7, replace=replace, standardise=False, intercept=False, prior_scale=2.0
        )

        def log_lik(v, row):
            z = jnp.dot(row["x"], v["w"])
            return row["y"] * z - jnp.logaddexp(0.0, z)

        mine = model(
            log_lik=log_lik,
            log_prior=lambda v: -0.5 * jnp.sum(v["w"] ** 2) / 4.0,
            parameters={"w": 3},
            data={"x": X, "y": y},
            batch_size=7,
            replace_batches=replace,
        )
        a = sgsim.sample(compiled, "sgld", 300, step_size=1e-3, n_chains=3, seed=5)
        b = sgsim.sample(mine, "sgld", 300, step_size=1e-3, n_chains=3, seed=5, init=a.constant_data["init"].values)
        np.testing.assert_allclose(sgsim.results.flat_draws(b), a.posterior["theta"].values, rtol=0, atol=1e-9)
        # a wrong N/n scaling is seen at once
        if not replace:
            half = model(
                log_lik=lambda v, row: 0.5 * log_lik(v, row),
                log_prior=lambda v: -0.5 * jnp.sum(v["w"] ** 2) / 4.0,
                parameters={"w": 3},
                data={"x": X, "y": y},
                batch_size=7,
            )
            c = sgsim.sample(half, "sgld", 300, step_size=1e-3, n_chains=3, seed=5, init=a.constant_data["init"].values)
            assert np.max(np.abs(sgsim.results.flat_draws(c) - a.posterior["theta"].values)) > 1e-3


def test_eight_schools_reads_by_name_in_arviz_and_replays_in_a_fresh_process(tmp_path):
    az = pytest.importorskip("arviz")
    target = sgsim.targets.get("user_models:eight_schools")
    result = sgsim.sample(target, "sghmc", 600, step_size=1e-3, n_chains=2, seed=3, burn_in=100)
    summary = az.summary(result, kind="stats")
    assert list(summary.index) == ["theta_trans[0]", *[f"theta_trans[{i}]" for i in range(1, 8)], "mu", "tau"] + [
        f"theta[{i}]" for i in range(8)
    ]
    assert (result.posterior["tau"].values > 0).all()
    flat = sgsim.results.flat_draws(result)
    np.testing.assert_allclose(result.posterior["tau"].values, np.exp(flat[..., 9]))
    np.testing.assert_allclose(
        result.posterior["theta"].values,
        flat[..., 8:9] + np.exp(flat[..., 9:10]) * flat[..., :8],
    )
    path = tmp_path / "eight.nc"
    sgsim.io.write_result(result, path)
    code = (
        "import sys, numpy as np, sgsim; r = sgsim.replay(sys.argv[1], allow=['user_models']); "
        "old = sgsim.io.read_result(sys.argv[1]); "
        "print(np.array_equal(r.posterior['tau'].values, old.posterior['tau'].values))"
    )
    env = {**os.environ, "PYTHONPATH": str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("True")


@pytest.mark.parametrize("method", ["svgd", "sgld_repulsive"])
def test_ensembles_run_on_a_log_density(method):
    target = user_models.banana_jax()
    result = sgsim.sample(target, method, 50, step_size=0.05, n_chains=2, n_particles=8, seed=1)
    assert result.posterior["x"].dims == ("chain", "draw", "particle")
    again = sgsim.sample(target, method, 50, step_size=0.05, n_chains=1, n_particles=8, seed=1)
    assert np.array_equal(result.posterior["x"].values[:1], again.posterior["x"].values)


def test_storage_modes_and_divergence_on_a_log_density():
    target = user_models.banana_jax()
    draws = sgsim.sample(target, "sgld", 200, step_size=0.01, n_chains=3, seed=2)
    final = sgsim.sample(target, "sgld", 200, step_size=0.01, n_chains=3, seed=2, storage="final")
    moments = sgsim.sample(target, "sgld", 200, step_size=0.01, n_chains=3, seed=2, storage="moments")
    flat = sgsim.results.flat_draws(draws)
    assert np.array_equal(sgsim.results.flat_draws(final)[:, 0], flat[:, -1])
    np.testing.assert_allclose(moments.moments["theta_mean"].values, flat.mean(axis=1), rtol=1e-12)
    with pytest.raises(sgsim.DivergenceError):
        sgsim.sample(target, "sgld", 200, step_size=5.0, n_chains=2, seed=2, on_divergence="raise")


# ----------------------------------------------------------------------------- parameters


@pytest.mark.parametrize(
    "transform, shape",
    [(positive, (3,)), (interval(-1.0, 2.0), (2,)), (sgsim.targets.lower(1.5), ()), (sgsim.targets.upper(-2.0), ()),
     (ordered, (4,))],
)  # fmt: skip
def test_transforms_invert_and_their_jacobians_are_the_log_determinants(transform, shape):
    layout = Parameters({"a": shape}, {"a": transform})
    rng = np.random.default_rng(1)
    u = rng.normal(size=(5, layout.dim))
    values, log_jac = layout.constrain(u, NUMPY_OPS)
    np.testing.assert_allclose(layout.unconstrain(values), u, atol=1e-10)
    for row, lj in zip(u, log_jac, strict=True):
        jac = np.empty((layout.dim, layout.dim))
        for i in range(layout.dim):
            h = np.zeros(layout.dim)
            h[i] = 1e-6
            up = layout.constrain((row + h)[None], NUMPY_OPS)[0]["a"].ravel()
            down = layout.constrain((row - h)[None], NUMPY_OPS)[0]["a"].ravel()
            jac[:, i] = (up - down) / 2e-6
        assert abs(np.linalg.slogdet(jac)[1] - lj) < 1e-6
    # the NumPy pullback is the gradient of f(T(u)) + log_jac(u), here with f = sum of x^2 / 2
    g = layout.pullback(u, {"a": values["a"]})
    for i in range(layout.dim):
        h = np.zeros(layout.dim)
        h[i] = 1e-6

        def f(z):
            vals, lj = layout.constrain(z, NUMPY_OPS)
            return 0.5 * np.sum(vals["a"].reshape(z.shape[0], -1) ** 2, axis=1) + lj

        np.testing.assert_allclose(g[:, i], (f(u + h) - f(u - h)) / 2e-6, atol=1e-5)


def test_the_numpy_backend_takes_a_vectorised_gradient_and_applies_the_transforms():
    # a Gamma(3, 2) scale through its log: the sampler's density on u = log s is s^3 e^{-2 s}
    def log_p(v):
        return 2.0 * np.log(v["s"]) - 2.0 * v["s"]

    def grad_log_p(v):
        return {"s": 2.0 / v["s"] - 2.0}

    target = model(log_p, parameters={"s": ()}, transforms={"s": "positive"}, backend="numpy",
                   grad_log_density=grad_log_p)  # fmt: skip
    u = np.array([[0.3], [-1.0]])
    s = np.exp(u[:, 0])
    np.testing.assert_allclose(target.gradient(u)[:, 0], -((2.0 / s - 2.0) * s + 1.0))
    np.testing.assert_allclose(target.log_density(u), 3.0 * u[:, 0] - 2.0 * s)


def test_bad_models_are_named_before_any_work():
    ParameterError = sgsim._validate.ParameterError
    base = dict(parameters={"a": 2})
    with pytest.raises(ParameterError, match="scalar"):
        model(lambda v: v["a"] ** 2, **base)
    with pytest.raises(ParameterError, match="nan"):
        model(lambda v: jnp.sum(v["a"]) * jnp.nan, **base)
    with pytest.raises(TypeError, match="complex"):
        model(lambda v: jnp.sum(v["a"]) + 1j, **base, backend="numpy", grad_log_density=lambda v: {"a": v["a"]})
    with pytest.raises(ParameterError, match="derived quantity 'a'"):
        model(lambda v: -jnp.sum(v["a"] ** 2), **base, derived=lambda v: {"a": v["a"]})
    with pytest.raises(ParameterError, match="also the name of a parameter"):
        model(lambda v, d: -jnp.sum(v["a"] ** 2), **base, data={"a": np.ones(2)})
    with pytest.raises(ParameterError, match="not a declared parameter"):
        model(lambda v: -jnp.sum(v["a"] ** 2), **base, transforms={"b": "positive"})
    with pytest.raises(ParameterError, match="non-finite"):
        model(lambda v, d: -jnp.sum(v["a"] ** 2), **base, data={"x": np.array([1.0, np.inf])})
    with pytest.raises(ParameterError, match="same number of rows"):
        model(log_lik=lambda v, r: -jnp.sum(v["a"] ** 2), **base, data={"x": np.ones(3), "y": np.ones(4)})
    with pytest.raises(ParameterError, match="shape"):
        model(lambda v: -np.sum(v["a"] ** 2, axis=-1), **base, backend="numpy",
              grad_log_density=lambda v: {"a": v["a"][..., :1]})  # fmt: skip
    with pytest.raises(ParameterError, match="identifiers"):
        model(lambda v: 0.0, parameters={"a b": ()})
    with pytest.raises(ParameterError, match="backend"):
        model(lambda v: 0.0, parameters={"a": ()}, backend="stan")


def test_a_numpy_gradient_wrong_beyond_the_initial_box_is_named_with_its_parameter():
    def log_p(v):
        return -0.5 * np.sum(v["a"] ** 2, axis=-1) - 0.5 * v["b"] ** 2

    def grad_log_p(v):
        # right inside the initial box [-2, 2], a factor 2 off beyond it
        b = v["b"]
        return {"a": -v["a"], "b": np.where(np.abs(b) < 2.0, -b, -2.0 * b)}

    with pytest.raises(sgsim._validate.ParameterError, match=r"in b \(coordinate 2\) at theta"):
        model(log_p, parameters={"a": 2, "b": ()}, backend="numpy", grad_log_density=grad_log_p)


def test_the_gradient_is_checked_at_kept_draws_when_asked():
    # a banana whose numba gradient is right near the origin only: the draws go where it is not
    from user_banana import banana, log_density

    @sgsim.jit
    def near_only(theta, params, out):
        b = params[0]
        r = theta[1] - b * theta[0] ** 2
        out[0] = theta[0] - 2.0 * b * theta[0] * r
        out[1] = r if theta[1] < 4.0 else 1.5 * r

    sgsim.targets.Target  # noqa: B018  (built through the user's constructor below)
    target = banana(grad=near_only, init_low=[-1.0, -1.0], init_high=[1.0, 1.0], mean=None, second_moment=None)
    del log_density
    result = sgsim.sample(target, "sgld", 3000, step_size=0.05, n_chains=4, seed=1, check_gradient=0)
    assert np.nanmax(result.posterior["theta"].values[..., 1]) > 4.0
    with pytest.raises(sgsim._validate.ParameterError, match=r"theta\[1\] \(coordinate 1\)"):
        sgsim.sample(target, "sgld", 3000, step_size=0.05, n_chains=4, seed=1, check_gradient=200)


def test_the_readme_first_example_is_a_log_density_and_runs_as_printed():
    text = (HERE.parent / "README.md").read_text()
    section = text[text.index("## Use") :]
    start = section.index("```python") + len("```python")
    code = section[start : section.index("```", start)]
    assert "sgsim.model(" in code and "@sgsim.jit" not in code
    scope: dict = {}
    exec(compile(code, "<README>", "exec"), scope)  # noqa: S102  (the README's own example)
    assert list(scope["az"].summary(scope["idata"], kind="stats").index) == ["y", "x[0]", "x[1]"]


def test_a_compiled_target_can_declare_names_and_transforms():
    # the numba banana, its coordinates named; and the funnel with y's scale as positive
    named = numba_banana(parameters=Parameters({"x": (), "y": ()}))
    result = sgsim.sample(named, "sgld", 200, step_size=0.05, n_chains=2, seed=1)
    assert set(result.posterior.data_vars) == {"x", "y"}
    np.testing.assert_array_equal(result.posterior["y"].values, sgsim.results.flat_draws(result)[..., 1])
    with pytest.raises(sgsim._validate.ParameterError, match="parameters hold 3 values"):
        numba_banana(parameters=Parameters({"x": (), "y": 2}))
