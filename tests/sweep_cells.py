"""Cell functions for tests/test_sweep.py, importable by worker processes (tests/ is on their
path: spawned workers inherit the parent's sys.path)."""

import os
import time

import numpy as np


def noisy_sum(a: float, b: int, seed: int) -> dict:
    """A deterministic function of the seed: a few normals from it, shifted."""
    x = np.random.default_rng(seed).standard_normal(3)
    return {"total": a + b + x.sum(), "draws": x}


def slow(a: float, seed: int, pause: float = 0.3) -> dict:
    """``noisy_sum`` after a pause, so that a driver can be killed mid-sweep."""
    time.sleep(pause)
    return noisy_sum(a, 0, seed)


def crash_once(a: float, seed: int, marker: str) -> dict:
    """Kill the worker process the first time any cell runs (``marker`` records it)."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return noisy_sum(a, 0, seed)
    os.close(fd)
    os._exit(1)


def fails_for(a: float, seed: int, bad: float) -> dict:
    """Raise for one parameter value."""
    if a == bad:
        raise ValueError(f"a = {a} is refused")
    return noisy_sum(a, 0, seed)
