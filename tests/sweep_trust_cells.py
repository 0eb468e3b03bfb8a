"""Cell functions for tests/test_sweep_trust.py, importable by worker processes and by driver
scripts (tests/ is on their path)."""

import os
import time


def logged(a: float, seed: int, log: str, pause: float = 0.0) -> dict:
    """Append ``pid a seed`` to ``log`` (one write with O_APPEND: lines never interleave), after
    ``pause`` seconds; return ``a + seed``."""
    time.sleep(pause)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{os.getpid()} {a} {seed}\n".encode())
    finally:
        os.close(fd)
    return {"x": a + seed}


def report_pid_and_sleep(a: float, seed: int, folder: str, pause: float) -> dict:
    """Leave a file named after this worker's pid in ``folder``, then sleep ``pause`` seconds."""
    open(os.path.join(folder, str(os.getpid())), "w").close()
    time.sleep(pause)
    return {"x": a + seed}


def dies_for(a: float, seed: int, bad: float) -> dict:
    """Kill the worker process running it (``os._exit``) for ``a == bad`` and seed 0."""
    if a == bad and seed == 0:
        os._exit(3)
    time.sleep(0.05)
    return {"x": a + seed}
