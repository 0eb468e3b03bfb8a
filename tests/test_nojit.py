"""The kernels run as plain Python under NUMBA_DISABLE_JIT=1 (so coverage sees them) and give
the same bits as the compiled ones: both draw from the same NumPy generators in the same order."""

import os
import subprocess
import sys
import textwrap

import numpy as np

import sgsim
from sgsim import targets

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import sgsim
    from sgsim import targets
    from sgsim._jit import JIT_DISABLED

    assert JIT_DISABLED
    noisy = targets.linear_gaussian([[2.0, 0.5], [0.5, 1.0]], [0.3, -0.2], [[0.5, 0.2], [0.2, 0.3]])
    a = sgsim.sample("mixture_25", "csghmc", 50, n_chains=2, seed=3, step_size=0.02, n_cycles=2, explore_fraction=0.2)
    b = sgsim.sample(noisy, "sgld", 50, n_chains=2, seed=3, step_size=0.1, noise_correction=True)
    np.savez(sys.argv[1], a=a.posterior["theta"].values, b=b.posterior["theta"].values)
    """
)


def test_pure_python_kernels_give_the_compiled_bits(tmp_path):
    path = tmp_path / "nojit.npz"
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(path)], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    nojit = np.load(path)
    noisy = targets.linear_gaussian([[2.0, 0.5], [0.5, 1.0]], [0.3, -0.2], [[0.5, 0.2], [0.2, 0.3]])
    a = sgsim.sample("mixture_25", "csghmc", 50, n_chains=2, seed=3, step_size=0.02, n_cycles=2, explore_fraction=0.2)
    b = sgsim.sample(noisy, "sgld", 50, n_chains=2, seed=3, step_size=0.1, noise_correction=True)
    assert nojit["a"].shape == (2, 40, 2) and nojit["b"].shape == (2, 50, 2)
    assert np.all(np.isfinite(nojit["a"])) and np.all(np.isfinite(nojit["b"]))
    assert np.array_equal(nojit["a"], a.posterior["theta"].values)
    assert np.array_equal(nojit["b"], b.posterior["theta"].values)
