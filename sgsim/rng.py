"""Random streams: one user seed, one independent stream per chain.

How it works
------------
A user ``seed`` (a non-negative integer) is the entropy of a
:class:`numpy.random.SeedSequence`. Chain ``c`` owns the sequence with spawn key
``(c,)``, which is exactly ``SeedSequence(seed).spawn(n)[c]`` for any ``n > c``. From it
two children are derived by key:

* ``(c, 0)`` drives the chain's steps: the Gaussian noise and, for targets with a
  stochastic gradient, the minibatch indices (drawn at each step before its noise);
* ``(c, 1)`` draws the chain's initial point when the user gives none.

Each child seeds a PCG64 :class:`numpy.random.Generator`, which is passed into the
compiled kernel; numba draws from it with NumPy's ziggurat. Because a chain's stream
depends only on ``(seed, c)``, chain ``c`` gives the same bits whatever ``n_chains`` is
and whatever the number of threads: chains never share a generator and streams are
never derived from a thread index.

``seed=None`` draws fresh entropy from the operating system; the entropy actually used
is returned and recorded in every result, so any run can be replayed.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["resolve_seed", "chain_generator", "init_generator"]

_STEP_STREAM = 0
_INIT_STREAM = 1


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
        raise TypeError(f"seed must be a non-negative int or None, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed}")
    return int(seed)


def _stream(seed: int, chain: int, which: int) -> np.random.Generator:
    ss = np.random.SeedSequence(entropy=seed, spawn_key=(int(chain), which))
    return np.random.Generator(np.random.PCG64(ss))


def chain_generator(seed: int, chain: int) -> np.random.Generator:
    """Generator that drives the steps of chain ``chain`` (spawn key ``(chain, 0)``)."""
    return _stream(seed, chain, _STEP_STREAM)


def init_generator(seed: int, chain: int) -> np.random.Generator:
    """Generator that draws the initial point of chain ``chain`` (key ``(chain, 1)``)."""
    return _stream(seed, chain, _INIT_STREAM)
