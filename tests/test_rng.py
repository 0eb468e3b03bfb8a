"""Streams in bulk (sgsim.rng): NumPy's SeedSequence, PCG64, ziggurat, Lemire integers and
uniforms, compiled, must give NumPy's bits exactly; a wrong key or a shifted stream must not."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgsim import rng as R
from sgsim._jit import jit


@jit
def _normals(state, out):
    for i in range(out.shape[0]):
        out[i] = R.standard_normal(state)


@jit
def _integers(state, low, high, out):
    for i in range(out.shape[0]):
        out[i] = R.integers(state, low, high)


@jit
def _mixed(state, out):
    for i in range(out.shape[0]):
        out[i, 0] = R.integers(state, 0, 7)
        out[i, 1] = R.standard_normal(state)
        out[i, 2] = R.uniform(state, -2.0, 3.0)
        out[i, 3] = R.next_uint32(state)


def numpy_generator(seed, key):
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))


@settings(max_examples=60, deadline=None)
@given(
    seed=st.one_of(st.integers(0, 2**32 - 1), st.integers(0, 2**200)),
    key=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=4),
)
def test_bulk_seeding_is_numpys_seed_sequence(seed, key):
    mine = R.stream_states(seed, np.array([key]))[0]
    assert np.array_equal(mine, R.state_of(numpy_generator(seed, tuple(key))))


def test_bulk_seeding_of_many_chains_and_particles():
    states = R.chain_states(123, 5000, R.INIT_STREAM)
    for c in (0, 1, 2, 4999):
        assert np.array_equal(states[c], R.state_of(R.init_generator(123, c)))
    parts = R.particle_states(7, 3, 4)
    assert np.array_equal(parts[2, 3], R.state_of(numpy_generator(7, (2, 0, 3))))
    # negative control: a neighbouring key gives another stream
    assert not np.array_equal(parts[2, 3], R.state_of(numpy_generator(7, (2, 0, 2))))
    assert not np.array_equal(states[1], R.state_of(R.chain_generator(123, 1)))


def test_standard_normals_are_numpys_bit_for_bit():
    gen = numpy_generator(99, (1, 0))
    state = R.state_of(gen)
    out = np.empty(500_000)  # enough draws to pass through the ziggurat's tail and wedges
    _normals(state, out)
    assert np.array_equal(out, gen.standard_normal(out.size))
    assert np.array_equal(state, R.state_of(gen))  # both streams end in the same place


@pytest.mark.parametrize("low, high", [(0, 1), (0, 2), (0, 690), (-5, 1000), (0, 2**32 - 1), (0, 2**32), (3, 2**40)])
def test_integers_are_numpys_bit_for_bit(low, high):
    gen = np.random.default_rng(11)
    state = R.state_of(gen)
    out = np.empty(5000, np.int64)
    _integers(state, low, high, out)
    assert np.array_equal(out, [gen.integers(low, high) for _ in range(out.size)])
    assert np.array_equal(state, R.state_of(gen))


def test_mixed_draws_keep_numpys_buffered_half_word():
    gen = np.random.default_rng(5)
    state = R.state_of(gen)
    out = np.empty((3000, 4))
    _mixed(state, out)
    ref = []
    for _ in range(3000):
        a, b, c = gen.integers(0, 7), gen.standard_normal(), gen.uniform(-2.0, 3.0)
        ref.append([a, b, c, gen.integers(0, 2**32, dtype=np.uint64)])  # one 32-bit output
    assert np.array_equal(out, np.array(ref, dtype=float))
    assert np.array_equal(state, R.state_of(gen))


def test_uniform_rows_are_numpys_uniform_on_a_box():
    low, high = np.array([-1.0, 0.5, 3.0]), np.array([2.0, 0.75, 9.0])
    states = R.chain_states(4, 6, R.INIT_STREAM)
    rows = R.uniform_rows(states, low, high)
    for c in range(6):
        assert np.array_equal(rows[c], R.init_generator(4, c).uniform(low, high))


def test_generators_round_trip_through_states():
    gen = numpy_generator(3, (0, 0))
    gen.integers(0, 5)  # leaves a buffered 32-bit half
    copy = R.to_generator(R.state_of(gen))
    assert np.array_equal(copy.integers(0, 2**31, 100), gen.integers(0, 2**31, 100))
    with pytest.raises(TypeError, match="PCG64"):
        R.state_of(np.random.Generator(np.random.MT19937(1)))


def test_seed_validation_names_the_parameter():
    assert R.resolve_seed(np.int64(5)) == 5
    for bad, exc in [(-1, ValueError), (1.5, TypeError), ("1", TypeError), (True, TypeError)]:
        with pytest.raises(exc, match="seed") as info:
            R.resolve_seed(bad)
        assert info.value.parameter == "seed"
    assert R.resolve_seed(None) >= 0
