"""Shared test configuration: make ``tests/`` importable (``import reference``, ``import stats``),
and draw the same property-based examples on every run."""

import sys
from pathlib import Path

from hypothesis import settings

sys.path.insert(0, str(Path(__file__).resolve().parent))

# every property-based test draws the same examples on every run (as a fixed seed would): a
# failure is reproducible and the suite cannot fail at random; a test's own @settings keeps this
# unless it says otherwise
settings.register_profile("sgsim", derandomize=True)
settings.load_profile("sgsim")
