"""Shared test configuration: make ``tests/`` importable (``import reference``, ``import stats``),
and draw the same property-based examples on every run."""

import sys
import warnings
from pathlib import Path

from hypothesis import settings

sys.path.insert(0, str(Path(__file__).resolve().parent))

# every property-based test draws the same examples on every run (as a fixed seed would): a
# failure is reproducible and the suite cannot fail at random; a test's own @settings keeps this
# unless it says otherwise
settings.register_profile("sgsim", derandomize=True)
settings.load_profile("sgsim")

# ArviZ 0.2x announces its 1.0 refactor with a FutureWarning at its first import of the day. Were
# that import to happen inside a test's pytest.warns block, the block would re-raise the
# announcement as an error (pyproject's filter names arviz's module, the re-raised warning the
# test's): import it here, once, before any test
with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz  # noqa: F401
