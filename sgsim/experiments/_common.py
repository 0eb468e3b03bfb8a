"""Helpers shared by the experiments: run summaries and progress bars."""

from __future__ import annotations

import math

import numpy as np


def mean_sd_se(values) -> tuple[float, float, float]:
    """Mean, sample standard deviation (ddof 1) and standard error ``sd / sqrt(n)`` of runs.

    The standard deviation and error are NaN for a single run.
    """
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    sd = float(np.std(x, ddof=1)) if n > 1 else float("nan")
    return float(np.mean(x)), sd, sd / math.sqrt(n)


def progress_bar(total: int, desc: str, enabled: bool, unit: str = "run"):
    """A tqdm progress bar over an experiment's runs (a no-op bar when ``enabled`` is False)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled)
