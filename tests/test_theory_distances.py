"""Gaussian W2, KL and the W2-optimal map (docs: theory-gaussian-distances) against closed forms and known cases."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import sqrtm

from sgsim.theory import gaussian_kl, gaussian_w2, sqrtm_psd, w2_optimal_map


def rotation(rng, d):
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def spd(rng, d, cond, q=None):
    """Random SPD matrix with eigenvalues log-spaced over [1, cond], randomly rotated."""
    q = rotation(rng, d) if q is None else q
    lam = np.geomspace(1.0, cond, d)
    rng.shuffle(lam)
    return (q * lam) @ q.T


def trace_formula_w2(m1, s1, m2, s2):
    """W2 as written in docs: theory-gaussian-distances, with an independent (scipy) matrix square root."""
    r = sqrtm(s2).real
    w2sq = np.sum((m1 - m2) ** 2) + np.trace(s1 + s2 - 2 * sqrtm(r @ s1 @ r).real)
    return np.sqrt(w2sq)


def rel(x, y):
    return np.linalg.norm(x - y) / np.linalg.norm(y)


# ----------------------------------------------------------------------------- closed forms and known cases


def test_one_dimensional_w2_and_kl():
    m0, s0, m1, s1 = 0.3, 1.7, -1.2, 0.4
    assert gaussian_w2([m0], [[s0**2]], [m1], [[s1**2]]) == pytest.approx(np.hypot(m0 - m1, s0 - s1), rel=1e-12)
    kl = np.log(s1 / s0) + (s0**2 + (m0 - m1) ** 2) / (2 * s1**2) - 0.5
    assert gaussian_kl([m0], [[s0**2]], [m1], [[s1**2]]) == pytest.approx(kl, rel=1e-12)


def test_commuting_covariances_reduce_to_the_frobenius_distance_of_square_roots():
    rng = np.random.default_rng(1)
    q = rotation(rng, 5)
    a, b = rng.uniform(0.1, 4, 5), rng.uniform(0.1, 4, 5)
    s1, s2 = (q * a) @ q.T, (q * b) @ q.T
    m1, m2 = rng.standard_normal(5), rng.standard_normal(5)
    expected = np.sum((m1 - m2) ** 2) + np.sum((np.sqrt(a) - np.sqrt(b)) ** 2)
    assert gaussian_w2(m1, s1, m2, s2) ** 2 == pytest.approx(expected, rel=1e-10)
    assert np.sum((sqrtm_psd(s1) - sqrtm_psd(s2)) ** 2) == pytest.approx(expected - np.sum((m1 - m2) ** 2), rel=1e-10)
    # KL of commuting pairs: (1/2) sum (a/b - 1 - log(a/b)) + Mahalanobis term
    maha = np.sum((q.T @ (m2 - m1)) ** 2 / b)
    kl = 0.5 * (np.sum(a / b - 1 - np.log(a / b)) + maha)
    assert gaussian_kl(m1, s1, m2, s2) == pytest.approx(kl, rel=1e-10)


def test_known_kl_pair():
    # KL(N(0, I_d) || N(m, 2 I_d)) = (1/2) [d/2 + |m|^2/2 - d + d log 2]
    d, m = 4, np.array([1.0, -2.0, 0.5, 0.0])
    expected = 0.5 * (d / 2 + m @ m / 2 - d + d * np.log(2))
    assert gaussian_kl(np.zeros(d), np.eye(d), m, 2 * np.eye(d)) == pytest.approx(expected, rel=1e-13)


def test_identical_laws_give_zero():
    rng = np.random.default_rng(2)
    m, s = rng.standard_normal(4), spd(rng, 4, 1e3)
    assert gaussian_w2(m, s, m, s) < 1e-10
    assert gaussian_kl(m, s, m, s) < 1e-12
    assert gaussian_w2(m, np.zeros((4, 4)), m, np.zeros((4, 4))) == 0.0  # two point masses


def test_general_w2_equals_the_printed_formula_and_the_transport_cost_of_the_optimal_map():
    rng = np.random.default_rng(3)
    for _ in range(5):
        s1, s2 = spd(rng, 4, 50.0), spd(rng, 4, 50.0)
        m1, m2 = rng.standard_normal(4), rng.standard_normal(4)
        w = gaussian_w2(m1, s1, m2, s2)
        assert w == pytest.approx(trace_formula_w2(m1, s1, m2, s2), rel=1e-10)
        t = w2_optimal_map(s1, s2)
        assert rel(t @ s1 @ t, s2) < 1e-10
        assert np.linalg.eigvalsh(t)[0] > 0 and np.array_equal(t, t.T)
        # E |x - T x|^2 over x ~ N(0, S1) is Tr S1 + Tr S2 - 2 Tr(T S1)
        cost = np.sum((m1 - m2) ** 2) + np.trace(s1) + np.trace(s2) - 2 * np.trace(t @ s1)
        assert w**2 == pytest.approx(cost, rel=1e-10)


def test_batched_calls_equal_single_calls():
    rng = np.random.default_rng(4)
    s1 = np.stack([spd(rng, 3, 10.0) for _ in range(6)]).reshape(2, 3, 3, 3)
    s2 = spd(rng, 3, 10.0)
    m1 = rng.standard_normal((2, 3, 3))
    m2 = np.zeros(3)
    w = gaussian_w2(m1, s1, m2, s2)
    kl = gaussian_kl(m1, s1, m2, s2)
    t = w2_optimal_map(s1, s2)
    assert w.shape == kl.shape == (2, 3) and t.shape == (2, 3, 3, 3)
    for i in range(2):
        for j in range(3):
            assert w[i, j] == pytest.approx(gaussian_w2(m1[i, j], s1[i, j], m2, s2), rel=1e-13)
            assert kl[i, j] == pytest.approx(gaussian_kl(m1[i, j], s1[i, j], m2, s2), rel=1e-13)
            np.testing.assert_allclose(t[i, j], w2_optimal_map(s1[i, j], s2), rtol=1e-12, atol=1e-14)
    assert isinstance(gaussian_w2(m2, s2, m2, s2), float)


# ----------------------------------------------------------------------------- nearly singular covariances


def test_nearly_singular_covariances_give_accurate_w2():
    # eigenvalues 1e-14 and 0 against 2, 0.5, 1e-14; diagonal: exact
    a = np.array([1.0, 1e-14, 2.0, 0.0])
    b = np.array([3.0, 1e-14, 1e-14, 0.5])
    expected = np.sum((np.sqrt(a) - np.sqrt(b)) ** 2)
    assert gaussian_w2(np.zeros(4), np.diag(a), np.zeros(4), np.diag(b)) ** 2 == pytest.approx(expected, rel=1e-14)
    # rotated: each eigenvalue of the stored matrices is itself known only to ~eps |S| = 7e-16,
    # so sqrt(lambda) to ~3e-8 near 0 (the square root is not Lipschitz there); pairing 1e-14
    # with 2 then moves W2^2 by up to 2 sqrt(2) 3e-8 ~ 1e-7: the attainable accuracy
    rng = np.random.default_rng(5)
    q = rotation(rng, 4)
    s1, s2 = (q * a) @ q.T, (q * b) @ q.T
    w = gaussian_w2(np.zeros(4), s1, np.zeros(4), s2)
    assert np.isfinite(w) and w**2 == pytest.approx(expected, abs=1e-7)
    # a law against itself: the rotation of the Procrustes residual is ill-determined only in
    # the near-null subspace, where S^(1/2) is ~1e-7, so W2 stays far below sqrt(eps) = 1.5e-8
    assert gaussian_w2(np.zeros(4), s1, np.zeros(4), s1) < 1e-8
    root = sqrtm_psd(s1)
    assert np.all(np.isfinite(root)) and rel(root @ root, s1) < 1e-12


def test_nearly_singular_covariances_give_accurate_kl_and_map():
    # exact in the eigenbasis: KL of commuting pairs with eigenvalues down to 1e-14
    a = np.array([1.0, 1e-14, 2.0])
    b = np.array([2.0, 3e-14, 1.0])
    kl = 0.5 * np.sum(a / b - 1 - np.log(a / b))
    assert gaussian_kl(np.zeros(3), np.diag(a), np.zeros(3), np.diag(b)) == pytest.approx(kl, rel=1e-12)
    # rotated, with a well-conditioned S1: the 1e-14 eigenvalue of S0 is itself known only to
    # about eps |S0| / 1e-14 = 1e-2 relative, which moves log det S0 by ~1e-2; KL ~ 16
    rng = np.random.default_rng(6)
    q = rotation(rng, 3)
    kl_rot = gaussian_kl(np.zeros(3), (q * a) @ q.T, np.zeros(3), (q * [2.0, 1.0, 1.0]) @ q.T)
    expected = 0.5 * np.sum(a / [2.0, 1.0, 1.0] - 1 - np.log(a / [2.0, 1.0, 1.0]))
    assert np.isfinite(kl_rot) and kl_rot == pytest.approx(expected, abs=2e-2)
    # the map into a nearly singular covariance still pushes S1 onto it
    s1 = spd(rng, 3, 10.0)
    s2 = (q * a) @ q.T
    t = w2_optimal_map(s1, s2)
    assert np.all(np.isfinite(t)) and np.abs(t @ s1 @ t - s2).max() < 1e-10 * np.abs(s2).max()


# ----------------------------------------------------------------------------- properties


matrices = st.tuples(
    st.integers(0, 2**32 - 1), st.integers(1, 5), st.floats(0.0, 6.0), st.floats(0.0, 6.0), st.floats(0.0, 6.0)
)


@settings(max_examples=60, deadline=None)
@given(case=matrices)
def test_w2_is_a_metric_and_kl_is_nonnegative(case):
    seed, d, c1, c2, c3 = case
    rng = np.random.default_rng(seed)
    laws = [(rng.standard_normal(d), spd(rng, d, 10.0**c) * rng.uniform(0.1, 10)) for c in (c1, c2, c3)]
    (ma, sa), (mb, sb), (mc, sc) = laws
    ab, ba = gaussian_w2(ma, sa, mb, sb), gaussian_w2(mb, sb, ma, sa)
    assert ab == pytest.approx(ba, rel=1e-10, abs=1e-12)
    scale = max(np.abs(s).max() for _, s in laws) ** 0.5
    assert gaussian_w2(ma, sa, mc, sc) <= ab + gaussian_w2(mb, sb, mc, sc) + 1e-10 * scale
    assert gaussian_kl(ma, sa, mb, sb) >= 0
    assert gaussian_kl(ma, sa, ma, sa) < 1e-10 * max(1.0, 10.0**c1)
    assert gaussian_w2(ma, sa, ma, sa) < 1e-7 * scale


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), d=st.integers(1, 5), c1=st.floats(0.0, 3.0), c2=st.floats(0.0, 6.0))
def test_optimal_map_pushes_s1_to_s2(seed, d, c1, c2):
    # relative accuracy of T S1 T degrades like cond(S1) eps: cond(S1) <= 1e3 here
    rng = np.random.default_rng(seed)
    s1, s2 = spd(rng, d, 10.0**c1), spd(rng, d, 10.0**c2)
    t = w2_optimal_map(s1, s2)
    assert rel(t @ s1 @ t, s2) < 1e-10
    # the map of S2 back to S1 is T^{-1}
    assert rel(w2_optimal_map(s2, s1) @ t, np.eye(d)) < 1e-8


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: gaussian_w2(np.zeros(2), -np.eye(2), np.zeros(2), np.eye(2)), "S1 must be positive semidefinite"),
        (lambda: gaussian_w2(np.zeros(2), np.eye(2), np.zeros(2), [[1.0, 2.0], [0.0, 1.0]]), "S2 must be symmetric"),
        (lambda: gaussian_w2(np.zeros(2), np.eye(2), np.zeros(3), np.eye(3)), "same dimension"),
        (lambda: gaussian_w2(np.zeros(3), np.eye(2), np.zeros(2), np.eye(2)), "m1 must have last axis 2"),
        (lambda: gaussian_w2(np.zeros(2), np.ones(2), np.zeros(2), np.eye(2)), "S1 must be a"),
        (lambda: gaussian_kl(np.zeros(2), np.diag([1.0, 0.0]), np.zeros(2), np.eye(2)), "S0 must be positive definite"),
        (
            lambda: gaussian_kl(np.zeros(2), np.eye(2), np.zeros(2), np.diag([1.0, -1.0])),
            "S1 must be positive definite",
        ),
        (lambda: gaussian_kl(np.zeros(2), np.eye(2), [np.nan, 0.0], np.eye(2)), "m1 must contain only finite"),
        (lambda: w2_optimal_map(np.diag([1.0, 0.0]), np.eye(2)), "S1 must be positive definite"),
        (lambda: w2_optimal_map(np.eye(2), -np.eye(2)), "S2 must be positive semidefinite"),
        (lambda: sqrtm_psd(np.diag([1.0, -1e-3])), "S must be positive semidefinite"),
    ],
)
def test_bad_input_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
