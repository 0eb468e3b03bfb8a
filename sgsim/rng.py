"""Random streams: one user seed, one independent stream per chain or particle, in bulk.

How it works
------------
A user ``seed`` (a non-negative integer) is the entropy of a
:class:`numpy.random.SeedSequence`. A stream is named by a spawn key: chain ``c`` of a run
of independent chains owns the sequence with key ``(c,)``, which is exactly
``SeedSequence(seed).spawn(n)[c]`` for any ``n > c``, and draws

* its steps (the Gaussian noise and, for targets with a stochastic gradient, the minibatch
  indices, drawn at each step before its noise) from the child with key ``(c, 0)``;
* its initial point, when the user gives none, from the child with key ``(c, 1)``.

Particle ``p`` of ensemble ``r`` (interacting particles, e.g. SVGD) draws its steps from key
``(r, 0, p)`` and its initial point from key ``(r, 1, p)``. Each key seeds a PCG64 bit
generator, and normals are drawn with NumPy's ziggurat. Because a stream depends only on
``(seed, key)``, a chain or a particle gives the same bits whatever the number of chains,
particles or threads: streams are never shared and never derived from a thread index.

Streams in bulk
---------------
Creating a :class:`numpy.random.Generator` costs 13-19 microseconds, more than a short chain
costs to run. So sgsim does not create them: :func:`stream_states` computes the
SeedSequence hashing and the PCG64 seeding of a million keys at once in compiled code, and
the kernels draw from the states, six 64-bit words per stream (the 128-bit PCG64 state and
increment, and NumPy's buffered 32-bit half), with compiled copies of NumPy's algorithms:
:func:`next_uint64`, :func:`standard_normal` (the ziggurat of ``Generator.standard_normal``),
:func:`integers` (Lemire's method of ``Generator.integers``), :func:`uniform`. They give
NumPy's bits exactly, which the tests check against NumPy itself; a state converts to and
from a :class:`numpy.random.Generator` (:func:`to_generator`, :func:`state_of`) without loss.

``seed=None`` draws fresh entropy from the operating system; the entropy actually used
is returned and recorded in every result, so any run can be replayed.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from numba.np.random._constants import fi_double, ki_double, wi_double, ziggurat_nor_inv_r, ziggurat_nor_r

from ._jit import jit
from ._validate import ParameterError, ParameterTypeError

__all__ = [
    "resolve_seed",
    "stream_states",
    "chain_states",
    "particle_states",
    "chain_generator",
    "init_generator",
    "to_generator",
    "state_of",
    "STATE_WORDS",
    "STEP_STREAM",
    "INIT_STREAM",
    "next_uint64",
    "next_uint32",
    "next_double",
    "standard_normal",
    "integers",
    "uniform",
    "uniform_rows",
    "set_state",
]

STEP_STREAM = 0
INIT_STREAM = 1
#: 64-bit words of one stream's state: PCG64 state (high, low), increment (high, low),
#: whether a buffered 32-bit half is held, and that half.
STATE_WORDS = 6

# every constant is a uint64: numba turns uint64 mixed with int64 into float64
_u = np.uint64
_M32 = _u(0xFFFFFFFF)
_MULT_HI = _u(2549297995355413924)  # PCG64's 128-bit multiplier
_MULT_LO = _u(4865540595714422341)
_S8, _S11, _S16, _S32, _S58, _S63, _S64 = _u(8), _u(11), _u(16), _u(32), _u(58), _u(63), _u(64)
_ZERO, _ONE, _FF = _u(0), _u(1), _u(0xFF)
_MANTISSA = _u(0x000FFFFFFFFFFFFF)
_UINT32_MAX = _u(0xFFFFFFFF)
# SeedSequence's hashing constants (pool of 4 uint32 words)
_INIT_A, _MULT_A = _u(0x43B0D7E5), _u(0x931E8875)
_INIT_B, _MULT_B = _u(0x8B51F9DD), _u(0x58F38DED)
_MIX_L, _MIX_R = _u(0xCA01F9DD), _u(0x4973F715)
_POOL = 4
# the ziggurat tables of NumPy's standard_normal, as numba ships them
_KI = np.ascontiguousarray(ki_double, dtype=np.uint64)
_WI = np.ascontiguousarray(wi_double, dtype=np.float64)
_FI = np.ascontiguousarray(fi_double, dtype=np.float64)
_R = float(ziggurat_nor_r)
_INV_R = float(ziggurat_nor_inv_r)


# ----------------------------------------------------------------------------- compiled draws


@jit(inline=True)
def _mul_hi(a, b):
    # the high 64 bits of the 128-bit product a * b
    a0 = a & _M32
    a1 = a >> _S32
    b0 = b & _M32
    b1 = b >> _S32
    p00 = a0 * b0
    p01 = a0 * b1
    p10 = a1 * b0
    mid = (p00 >> _S32) + (p01 & _M32) + (p10 & _M32)
    return a1 * b1 + (p01 >> _S32) + (p10 >> _S32) + (mid >> _S32)


@jit(inline=True)
def _step(st):
    # state <- state * multiplier + increment (mod 2^128)
    s_hi = st[0]
    s_lo = st[1]
    lo = s_lo * _MULT_LO
    hi = _mul_hi(s_lo, _MULT_LO) + s_hi * _MULT_LO + s_lo * _MULT_HI
    new_lo = lo + st[3]
    st[0] = hi + st[2] + (_ONE if new_lo < lo else _ZERO)
    st[1] = new_lo


@jit(inline=True)
def next_uint64(st):
    """The next 64-bit output of the PCG64 stream ``st`` (XSL-RR output function)."""
    _step(st)
    hi = st[0]
    x = hi ^ st[1]
    r = hi >> _S58
    return (x >> r) | (x << ((_S64 - r) & _S63))


@jit(inline=True)
def next_uint32(st):
    """The next 32-bit output: halves of one 64-bit output, low half first (as NumPy)."""
    if st[4] != _ZERO:
        st[4] = _ZERO
        return st[5]
    x = next_uint64(st)
    st[4] = _ONE
    st[5] = x >> _S32
    return x & _M32


@jit(inline=True)
def next_double(st):
    """A uniform double in [0, 1) from the top 53 bits of one output."""
    return np.float64(next_uint64(st) >> _S11) * (1.0 / 9007199254740992.0)


@jit(inline=True)
def standard_normal(st):
    """A standard normal draw, bit for bit ``numpy.random.Generator.standard_normal``."""
    while True:
        r = next_uint64(st)
        idx = r & _FF
        r = r >> _S8
        rabs = (r >> _ONE) & _MANTISSA
        x = np.float64(rabs) * _WI[idx]
        if r & _ONE:
            x = -x
        if rabs < _KI[idx]:
            return x
        if idx == _ZERO:
            # the tail beyond the last rectangle
            while True:
                xx = -_INV_R * math.log1p(-next_double(st))
                yy = -math.log1p(-next_double(st))
                if yy + yy > xx * xx:
                    if (rabs >> _S8) & _ONE:
                        return -(_R + xx)
                    return _R + xx
        elif (_FI[idx - _ONE] - _FI[idx]) * next_double(st) + _FI[idx] < math.exp(-0.5 * x * x):
            return x


@jit(inline=True)
def _lemire32(st, rng):
    # uniform on [0, rng] by Lemire's multiply-and-reject, rng < 2^32 - 1
    excl = rng + _ONE
    m = next_uint32(st) * excl
    leftover = m & _M32
    if leftover < excl:
        threshold = (_UINT32_MAX - rng) % excl
        while leftover < threshold:
            m = next_uint32(st) * excl
            leftover = m & _M32
    return m >> _S32


@jit(inline=True)
def _lemire64(st, rng):
    # uniform on [0, rng] for rng >= 2^32
    excl = rng + _ONE
    x = next_uint64(st)
    leftover = x * excl
    if leftover < excl:
        threshold = (_u(0xFFFFFFFFFFFFFFFF) - rng) % excl
        while leftover < threshold:
            x = next_uint64(st)
            leftover = x * excl
    return _mul_hi(x, excl)


@jit(inline=True)
def integers(st, low, high):
    """An int64 uniform on ``[low, high)``, bit for bit ``Generator.integers(low, high)``."""
    span = _u(high - 1 - low)
    if span == _ZERO:
        return low
    if span < _UINT32_MAX:
        return low + np.int64(_lemire32(st, span))
    if span == _UINT32_MAX:
        return low + np.int64(next_uint32(st))
    return low + np.int64(_lemire64(st, span))


@jit(inline=True)
def uniform(st, low, high):
    """A double uniform on ``[low, high)``: ``low + (high - low) * next_double``, as NumPy."""
    return low + (high - low) * next_double(st)


# ----------------------------------------------------------------------------- seeding in bulk


@jit(inline=True)
def _hashmix(value, hc):
    value = (value ^ hc) & _M32
    hc = (hc * _MULT_A) & _M32
    value = (value * hc) & _M32
    value ^= value >> _S16
    return value, hc


@jit(inline=True)
def _mix(x, y):
    r = (_MIX_L * x - _MIX_R * y) & _M32
    return r ^ (r >> _S16)


@jit
def _seed_states(entropy, keys, out):
    """PCG64 states of ``SeedSequence(entropy, spawn_key=keys[i])`` for every row ``i``.

    ``entropy`` holds the run entropy as uint32 words, already padded to the pool size;
    ``keys`` the spawn keys as uint32 words (one row per stream).
    """
    n_ent = entropy.shape[0]
    n_words = n_ent + keys.shape[1]
    pool = np.empty(_POOL, np.uint64)
    words = np.empty(n_words, np.uint64)
    state = np.empty(2 * _POOL, np.uint64)
    for i in range(n_ent):
        words[i] = entropy[i]
    for s in range(keys.shape[0]):
        for i in range(keys.shape[1]):
            words[n_ent + i] = keys[s, i]
        # SeedSequence.mix_entropy
        hc = _INIT_A
        for i in range(_POOL):
            pool[i], hc = _hashmix(words[i] if i < n_words else _ZERO, hc)
        for i_src in range(_POOL):
            for i_dst in range(_POOL):
                if i_src != i_dst:
                    h, hc = _hashmix(pool[i_src], hc)
                    pool[i_dst] = _mix(pool[i_dst], h)
        for i_src in range(_POOL, n_words):
            for i_dst in range(_POOL):
                h, hc = _hashmix(words[i_src], hc)
                pool[i_dst] = _mix(pool[i_dst], h)
        # SeedSequence.generate_state(4, uint64): 8 words, paired little-endian
        hb = _INIT_B
        for i in range(2 * _POOL):
            v = pool[i % _POOL] ^ hb
            hb = (hb * _MULT_B) & _M32
            v = (v * hb) & _M32
            state[i] = v ^ (v >> _S16)
        seed_hi = state[0] | (state[1] << _S32)
        seed_lo = state[2] | (state[3] << _S32)
        inc_hi = state[4] | (state[5] << _S32)
        inc_lo = state[6] | (state[7] << _S32)
        # PCG64 seeding: inc = (initseq << 1) | 1; state = 0; step; state += initstate; step
        st = out[s]
        st[2] = (inc_hi << _ONE) | (inc_lo >> _S63)
        st[3] = (inc_lo << _ONE) | _ONE
        st[0] = _ZERO
        st[1] = _ZERO
        _step(st)
        lo = st[1] + seed_lo
        st[0] = st[0] + seed_hi + (_ONE if lo < st[1] else _ZERO)
        st[1] = lo
        _step(st)
        st[4] = _ZERO
        st[5] = _ZERO


@jit
def _uniform_rows(states, low, high, out):
    for r in range(out.shape[0]):
        st = states[r]
        for i in range(out.shape[1]):
            out[r, i] = uniform(st, low[i], high[i])


def uniform_rows(states, low, high) -> np.ndarray:
    """One draw per stream of a point uniform on the box ``[low, high]`` (shape ``(n, d)``).

    Row ``r`` is ``to_generator(states[r]).uniform(low, high)`` bit for bit; ``states`` is
    advanced in place.
    """
    low = np.ascontiguousarray(low, dtype=np.float64)
    high = np.ascontiguousarray(high, dtype=np.float64)
    out = np.empty((states.shape[0], low.shape[0]))
    _uniform_rows(states, low, high, out)
    return out


def _words(value: int) -> list[int]:
    # SeedSequence's coercion of a non-negative int: 32-bit words, least significant first
    out = []
    while True:
        out.append(value & 0xFFFFFFFF)
        value >>= 32
        if not value:
            return out


def resolve_seed(seed) -> int:
    """Return the integer seed to use, drawing fresh entropy when ``seed`` is None.

    Raises
    ------
    TypeError
        If ``seed`` is not an integer or None.
    ValueError
        If ``seed`` is negative.
    """
    if seed is None:
        entropy = np.random.SeedSequence().entropy
        assert isinstance(entropy, int)  # fresh entropy is a single 128-bit int
        return entropy
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ParameterTypeError("seed", f"seed must be a non-negative int or None, got {type(seed).__name__}")
    if seed < 0:
        raise ParameterError("seed", f"seed must be a non-negative int, got {seed}")
    return int(seed)


def stream_states(seed: int, keys) -> np.ndarray:
    """PCG64 states of the streams ``SeedSequence(seed, spawn_key=key)``, one row per key.

    Parameters
    ----------
    seed : int
        A resolved seed (:func:`resolve_seed`).
    keys : array_like of int, shape (n, m)
        Spawn keys, each a tuple of ``m >= 1`` non-negative integers below ``2**32``.

    Returns
    -------
    ndarray of uint64, shape (n, STATE_WORDS)
        Row ``i`` is the state of ``numpy.random.PCG64(SeedSequence(seed, spawn_key=keys[i]))``.
    """
    keys = np.asarray(keys)
    if keys.ndim != 2 or keys.shape[1] < 1:
        raise ValueError(f"keys must have shape (n, m) with m >= 1, got {keys.shape}")
    if keys.size and (keys.min() < 0 or keys.max() > 0xFFFFFFFF):
        raise ValueError("spawn keys must lie in [0, 2**32)")
    entropy = _words(int(seed))
    entropy += [0] * max(0, _POOL - len(entropy))  # SeedSequence pads the entropy when a key follows
    out = np.empty((keys.shape[0], STATE_WORDS), np.uint64)
    _seed_states(np.array(entropy, np.uint64), np.ascontiguousarray(keys, dtype=np.uint64), out)
    return out


def chain_states(seed: int, n: int, which: int = STEP_STREAM, first: int = 0) -> np.ndarray:
    """States of chains ``first .. first + n - 1`` for their step (key ``(c, 0)``) or init (``(c, 1)``) streams."""
    c = np.arange(first, first + n, dtype=np.uint64)
    return stream_states(seed, np.stack([c, np.full(n, which, np.uint64)], axis=1))


def particle_states(seed: int, n_replicas: int, n_particles: int, which: int = STEP_STREAM) -> np.ndarray:
    """States of every particle of ``n_replicas`` ensembles: shape ``(n_replicas, n_particles, STATE_WORDS)``.

    Particle ``p`` of replica ``r`` has key ``(r, which, p)``.
    """
    r, p = np.meshgrid(np.arange(n_replicas, dtype=np.uint64), np.arange(n_particles, dtype=np.uint64), indexing="ij")
    keys = np.stack([r.ravel(), np.full(r.size, which, np.uint64), p.ravel()], axis=1)
    return stream_states(seed, keys).reshape(n_replicas, n_particles, STATE_WORDS)


# ----------------------------------------------------------------------------- NumPy interoperability

_MASK64 = (1 << 64) - 1


def to_generator(state) -> np.random.Generator:
    """A :class:`numpy.random.Generator` (PCG64) that continues the stream ``state``."""
    st = [int(w) for w in np.asarray(state, dtype=np.uint64)]
    bg = np.random.PCG64()
    bg.state = {
        "bit_generator": "PCG64",
        "state": {"state": (st[0] << 64) | st[1], "inc": (st[2] << 64) | st[3]},
        "has_uint32": st[4],
        "uinteger": st[5],
    }
    return np.random.Generator(bg)


def state_of(gen: np.random.Generator) -> np.ndarray:
    """The stream state (``STATE_WORDS`` uint64) of a PCG64 :class:`numpy.random.Generator`."""
    if not isinstance(gen, np.random.Generator) or not isinstance(gen.bit_generator, np.random.PCG64):
        raise TypeError("expected a numpy.random.Generator with a PCG64 bit generator")
    s = gen.bit_generator.state
    st, inc = s["state"]["state"], s["state"]["inc"]
    words = [st >> 64, st & _MASK64, inc >> 64, inc & _MASK64, s["has_uint32"], s["uinteger"]]
    return np.array(words, dtype=np.uint64)


def set_state(gen: np.random.Generator, state) -> None:
    """Move ``gen`` (PCG64) to the stream state ``state``, e.g. after compiled draws from it."""
    gen.bit_generator.state = to_generator(state).bit_generator.state


def chain_generator(seed: int, chain: int) -> np.random.Generator:
    """Generator that drives the steps of chain ``chain`` (spawn key ``(chain, 0)``)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(int(chain), STEP_STREAM))))


def init_generator(seed: int, chain: int) -> np.random.Generator:
    """Generator that draws the initial point of chain ``chain`` (key ``(chain, 1)``)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(int(chain), INIT_STREAM))))
