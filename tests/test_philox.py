"""sgsim.philox: the GPU path's Philox4x32-10 normals on the CPU.

docs: guide-gpu, theory-tolerances.

* Philox4x32-10 to the bit: Random123's known-answer vectors, and a NumPy reference written
  here over thousands of counters and keys;
* the normals against a NumPy reference of the Box-Muller step with the C library's log, sin
  and cos, and against the GPU kernel's host build (double precision), both within a few ulps
  (the transcendental functions differ by up to 1 ulp);
* the law: moments and lag correlations of 10^7 normals within 5 standard errors, with a
  negative control that the same check rejects;
* counting: a range equals the concatenation of its sub-ranges, from odd or even starts; a
  chain's normals do not depend on which other chains are computed;
* the fill loop vectorises, and bad input is refused naming its parameter.
"""

from __future__ import annotations

import math

import llvmlite.binding as llvm
import numpy as np
import pytest
from stats import assert_within_se

from sgsim import philox, targets
from sgsim._jit import jit
from sgsim._validate import ParameterError, ParameterTypeError
from sgsim.gpu import host, kernels, runner
from sgsim.rng import STATE_WORDS
from sgsim.sampling import prepare

# distance in ulps allowed between fill_normals and a Box-Muller with the C library's log, sin
# and cos. The budget: log within 1 ulp (tests/test_vmath.py), halved by the square root, plus the
# root's rounding; sin or cos within 1 ulp; the product's rounding: under 3 ulps of relative error,
# and a count of ulps can be twice a relative error near a power of two. Measured: 3, over
# 2 x 10^6 normals (88 % equal, 11 % at 1 ulp, 0.6 % at 2, 0.01 % at 3).
NORMAL_ULPS = 6

_M32 = np.uint64(0xFFFFFFFF)


# ----------------------------------------------------------------------------- references


def _philox_ref(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 over arrays of uint64 words (each below 2^32), in NumPy."""
    c0, c1, c2, c3, k0, k1 = (np.asarray(w, np.uint64) & _M32 for w in (c0, c1, c2, c3, k0, k1))
    for r in range(10):
        if r:
            k0 = (k0 + np.uint64(0x9E3779B9)) & _M32
            k1 = (k1 + np.uint64(0xBB67AE85)) & _M32
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = (p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & _M32, (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & _M32
    return c0, c1, c2, c3


def _normals_ref(seed, chain, t0, n):
    """Normals t0 .. t0 + n - 1 of a chain: Philox blocks, 53-bit uniforms, Box-Muller with libm."""
    k0, k1 = philox.key(seed)
    t = np.arange(t0, t0 + n, dtype=np.uint64)
    b = t >> np.uint64(1)
    c = np.uint64(chain)
    w0, w1, w2, w3 = _philox_ref(b & _M32, b >> np.uint64(32), c & _M32, c >> np.uint64(32), k0, k1)
    hu = ((w0 << np.uint64(32)) | w1) >> np.uint64(11)
    hv = ((w2 << np.uint64(32)) | w3) >> np.uint64(11)
    u = (hu.astype(np.float64) + 0.5) * 2.0**-53  # hu < 2^53: converted exactly
    v = hv.astype(np.float64) * 2.0**-53
    radius = np.sqrt(-2.0 * np.fromiter(map(math.log, u.tolist()), np.float64, n))
    phi = (2.0 * math.pi) * (v - 0.5)
    cos = np.fromiter(map(math.cos, phi.tolist()), np.float64, n)
    sin = np.fromiter(map(math.sin, phi.tolist()), np.float64, n)
    return np.where(t % np.uint64(2) == 0, radius * cos, radius * sin)


def _ulps(a, b):
    ia, ib = (np.asarray(x, np.float64).view(np.int64) for x in (a, b))
    ia, ib = (np.where(i < 0, np.int64(-(2**63)) - i, i) for i in (ia, ib))
    return np.abs(ia - ib)


# ----------------------------------------------------------------------------- Philox words

# Random123's known-answer vectors for philox4x32 10: counter, key, output
KAT = [
    ("00000000 00000000 00000000 00000000", "00000000 00000000", "6627e8d5 e169c58d bc57ac4c 9b00dbd8"),
    ("ffffffff ffffffff ffffffff ffffffff", "ffffffff ffffffff", "408f276d 41c83b0e a20bc7c6 6d5451fd"),
    ("243f6a88 85a308d3 13198a2e 03707344", "a4093822 299f31d0", "d16cfe09 94fdcceb 5001e420 24126ea1"),
]


@pytest.mark.parametrize(("counter", "key", "expected"), KAT)
def test_philox_meets_the_known_answers(counter, key, expected):
    words = [int(w, 16) for w in (counter + " " + key).split()]
    want = [int(w, 16) for w in expected.split()]
    assert [int(w) for w in philox.philox4x32(*words)] == want
    assert [int(w[0]) for w in _philox_ref(*([v] for v in words))] == want  # the reference too


def test_philox_equals_the_reference_over_many_counters_and_keys():
    rng = np.random.default_rng(5)
    words = rng.integers(0, 2**32, (6, 3000), dtype=np.uint64)
    # and counters at the 32-bit boundaries of the block and chain words
    edge = np.array([0, 1, 2**32 - 1], np.uint64)
    grid = np.array(np.meshgrid(edge, edge, edge, edge, [0, 2**32 - 1], [7], indexing="ij")).reshape(6, -1)
    words = np.concatenate([words, grid], axis=1)
    ref = np.array(_philox_ref(*words))
    got = np.array([[int(w) for w in philox.philox4x32(*col)] for col in words.T.tolist()], np.uint64).T
    assert np.array_equal(got, ref)


def test_keys_and_stream_rows():
    k0, k1 = philox.key(2024)
    assert philox.key(2024) == (k0, k1) != philox.key(2025) and max(k0, k1) < 2**32
    assert (k0, k1) == tuple(int(w) for w in np.random.SeedSequence(2024).generate_state(2, np.uint32))
    assert philox.key_word(2024) == k0 | (k1 << 32)
    rows = philox.states(2024, np.array([0, 3, 2**40]))
    assert rows.dtype == np.uint64 and rows.shape == (3, STATE_WORDS)
    assert rows[:, 0].tolist() == [philox.key_word(2024)] * 3 and rows[:, 1].tolist() == [0, 3, 2**40]
    assert not rows[:, 2:].any()
    # the GPU path keys its kernels with the same function
    assert runner.philox_key(2024) == (k0, k1)


# ----------------------------------------------------------------------------- normals


def test_normals_equal_the_reference_within_a_few_ulps():
    worst = 0
    # even and odd starts, a chain and a block index beyond 32 bits (the counters' high words)
    for seed, chain, t0, n in ((1, 0, 0, 100_000), (7, 3, 12_345, 100_001), (9, 2**33 + 5, 2**34 + 1, 100_000)):
        got = philox.normals(seed, chain, t0, n)
        ref = _normals_ref(seed, chain, t0, n)
        d = _ulps(got, ref)
        worst = max(worst, int(d.max()))
        assert d.max() <= NORMAL_ULPS, (seed, chain, t0, int(d.max()))
        assert np.median(d) == 0  # most are the same bits
    # negative control: the reference one normal later (the other element of each pair) is far off
    shifted = _normals_ref(1, 0, 1, 1000)
    assert _ulps(philox.normals(1, 0, 0, 1000), shifted).max() > NORMAL_ULPS


needs_cxx = pytest.mark.skipif(
    host.compiler() is None, reason="no C++ compiler: the GPU kernel's host build cannot be made"
)


@needs_cxx
def test_normals_equal_the_gpu_host_build():
    # the run of tests/test_gpu.py, whose compiled host build is then reused (it is cached by source)
    target = targets.linear_gaussian([[2.0, 0.5], [0.5, 1.0]], [0.3, -0.2], [[0.5, 0.2], [0.2, 0.3]])
    run, _ = prepare(target, "sgld", 10, step_size=0.1)
    source = kernels.render(run, "float64", device=False)
    assert kernels.normals_per_block("float64") == 2
    lib = host.build(source)
    seed, n_chains = 31, 4
    rows = philox.states(seed, np.arange(n_chains))
    for t0, n in ((0, 20_000), (7, 5_001)):
        gpu = host.HostExecutor().normals(lib, source, n_chains, t0, n, philox.key(seed))
        for c in range(n_chains):
            cpu = np.empty(n)
            philox.fill_normals(rows[c], t0, cpu)
            assert _ulps(cpu, gpu[c]).max() <= NORMAL_ULPS, (t0, c)
    # the host build calls the C library as the reference here does: the same bits
    assert np.array_equal(gpu[1], _normals_ref(seed, 1, 7, 5_001))
    # negative control: another seed's normals are not these
    other = host.HostExecutor().normals(lib, source, 1, 0, 100, philox.key(seed + 1))[0]
    assert _ulps(philox.normals(seed, 0, 0, 100), other).max() > NORMAL_ULPS


# ----------------------------------------------------------------------------- the law


def _check_standard_normal(z):
    """Moments and lag-1, lag-2 and cross-chain correlations of rows of iid N(0, 1) draws, within 5 SE.

    ``z`` has shape (chains, draws). Standard errors for ``n`` iid standard normals: the mean,
    sqrt(1/n); the variance, sqrt(2/n); the sample skewness and excess kurtosis,
    sqrt(6/n) and sqrt(24/n) (their asymptotic variances under normality); a lag correlation
    over ``m`` pairs, sqrt(1/m); the correlation of neighbouring chains at the same index,
    sqrt(1/pairs).
    """
    n = z.size
    mean = z.mean()
    c = z - mean
    c2 = c * c
    flat, flat2 = c.ravel(), c2.ravel()
    m2 = flat2.sum() / n
    m3 = np.dot(flat2, flat) / n
    m4 = np.dot(flat2, flat2) / n
    estimates = [mean, m2, m3 / m2**1.5, m4 / m2**2 - 3.0]
    se = [math.sqrt(1 / n), math.sqrt(2 / n), math.sqrt(6 / n), math.sqrt(24 / n)]
    for lag in (1, 2):
        pairs = sum(np.dot(row[lag:], row[:-lag]) for row in c)
        count = c.shape[0] * (c.shape[1] - lag)
        estimates.append(pairs / count / m2)
        se.append(math.sqrt(1 / count))
    cross = sum(np.dot(c[i], c[i + 1]) for i in range(c.shape[0] - 1))
    count = (c.shape[0] - 1) * c.shape[1]
    estimates.append(cross / count / m2)
    se.append(math.sqrt(1 / count))
    what = "mean, variance, skewness, excess kurtosis, lag-1, lag-2, cross-chain correlations"
    return assert_within_se(estimates, [0, 1, 0, 0, 0, 0, 0], se, z=5.0, what=what)


def test_ten_million_normals_follow_the_standard_normal_law():
    rows = philox.states(2026, np.arange(10))
    z = np.empty((10, 10**6))
    for c in range(10):
        philox.fill_normals(rows[c], 3, z[c])  # an odd start: every block split across calls
    _check_standard_normal(z)
    # negative controls, through the same check: a scale 1 % too large (variance z ~ 45), and
    # a lag-one dependence of 0.01 (lag-1 correlation z ~ 32)
    with pytest.raises(AssertionError, match=r"at \[\(1,\)\]"):
        _check_standard_normal(z * 1.01)
    lagged = z * (1 / math.sqrt(1.0001))
    lagged[:, 1:] += (0.01 / math.sqrt(1.0001)) * z[:, :-1]
    with pytest.raises(AssertionError, match=r"at \[\(4,\)\]"):
        _check_standard_normal(lagged)


# ----------------------------------------------------------------------------- counting


def test_a_range_is_the_concatenation_of_its_sub_ranges():
    row = philox.states(77, np.array([12]))[0]
    whole = np.empty(1000)
    philox.fill_normals(row, 101, whole)
    rng = np.random.default_rng(6)
    for _ in range(20):
        cuts = np.sort(rng.choice(np.arange(1, 1000), 12, replace=False))
        parts = []
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, 1000], strict=True):
            part = np.empty(hi - lo)
            philox.fill_normals(row, 101 + lo, part)  # starts odd and even, lengths 1 and up
            parts.append(part)
        assert np.array_equal(np.concatenate(parts), whole)
    # one normal at a time, from t0 = 100, 101, ...
    assert np.array_equal(np.concatenate([philox.normals(77, 12, 101 + i, 1) for i in range(40)]), whole[:40])
    # an empty range writes nothing
    philox.fill_normals(row, 5, np.empty(0))


def test_a_chains_normals_do_not_depend_on_the_other_chains():
    rows = philox.states(3, np.arange(50))
    alone = philox.states(3, np.array([37]))[0]
    a = np.empty(333)
    b = np.empty(333)
    philox.fill_normals(rows[37], 9, a)
    philox.fill_normals(alone, 9, b)
    assert np.array_equal(a, b) and np.array_equal(a, philox.normals(3, 37, 9, 333))
    others = np.empty(333)
    philox.fill_normals(rows[36], 9, others)
    assert not np.any(a == others)


# ----------------------------------------------------------------------------- code and inputs


@pytest.mark.skipif(not llvm.get_host_cpu_features().get("avx2", False), reason="this CPU lacks AVX2")
def test_the_fill_loop_vectorises():
    # the loop over whole blocks, compiled afresh (numba shows no IR of code loaded from its cache)
    fill = jit(cache=False)(philox._fill_blocks.py_func)
    out = np.empty(64)
    k0, k1 = philox.key(1)
    fill(out, np.uint64(0), 32, np.uint64(0), np.uint64(0), np.uint64(k0), np.uint64(k1))
    assert np.array_equal(out, philox.normals(1, 0, 0, 64))
    ir = fill.inspect_llvm(fill.signatures[0])
    assert "<4 x double>" in ir or "<8 x double>" in ir
    assert "<4 x i64>" in ir or "<8 x i64>" in ir  # the Philox rounds too


@pytest.mark.parametrize(
    ("args", "name", "error"),
    [
        ((-1, 0, 0, 3), "seed", ParameterError),
        ((1.5, 0, 0, 3), "seed", ParameterTypeError),
        ((1, -1, 0, 3), "chain", ParameterError),
        ((1, 2**64, 0, 3), "chain", ParameterError),
        ((1, 0, -1, 3), "t0", ParameterError),
        ((1, 0, 2**63 - 2, 3), "t0", ParameterError),
        ((1, 0, 0, -1), "n", ParameterError),
        ((1, 0, 0, 2.0), "n", ParameterTypeError),
    ],
)
def test_bad_input_is_refused_naming_the_parameter(args, name, error):
    with pytest.raises(error) as info:
        philox.normals(*args)
    assert info.value.parameter == name


def test_bad_chains_are_refused():
    for chains in (np.array([[0, 1]]), np.array([-1, 2]), np.array([0.5])):
        with pytest.raises(ParameterError) as info:
            philox.states(1, chains)
        assert info.value.parameter == "chains"
    assert philox.states(1, np.array([], np.int64)).shape == (0, STATE_WORDS)
