"""Sphinx configuration of the sgsim documentation.

Build (from the repository root, with the ``docs`` extra installed)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The build runs ``sgsim reproduce`` in quick mode for the gallery (a few minutes on two cores)
and executes the notebooks of ``notebooks/``. Two environment variables shorten it while
writing pages: ``SGSIM_DOCS_FIGURES=DIR`` takes the figures of an earlier ``sgsim reproduce
--out DIR`` instead of running it, and ``SGSIM_DOCS_EXECUTE=off`` renders the notebooks
without running them. Both are for drafts: the built site of record runs everything.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

import sgsim  # noqa: E402

project = "sgsim"
author = "the sgsim developers"
copyright = "2026, the sgsim developers"
release = sgsim.__version__
version = release

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinx.ext.doctest",
    "sphinx_copybutton",
    "sphinx_design",
    "sphinx-mathjax-offline",
    "sgsim_docs",
]

# Broken references of any kind fail the build (run with -W).
nitpicky = True
nitpick_ignore_regex = [
    # types in docstrings are plain words; these are the outside names that roles may still meet
    (r"py:.*", r"(numpy|np|scipy|xarray|arviz|az|matplotlib|numba|dask|distributed|pathlib|collections)\..*"),
]

exclude_patterns = ["_build", "conf.py", "_ext", "Thumbs.db", ".DS_Store"]
templates_path = ["_templates"]
html_static_path = ["_static"]
html_css_files = ["sgsim.css"]

# --------------------------------------------------------------------------- MyST and notebooks
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
# notebooks/ holds jupytext percent scripts; the build copies them to notebooks
nb_custom_formats = {".py": ["jupytext.reads", {"fmt": "py:percent"}]}
# executed pages show their figures inline (CI builds with MPLBACKEND=Agg, which the kernels would
# inherit and then draw nothing; the gallery's `sgsim reproduce` sets Agg for itself)
os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
nb_execution_mode = "off" if os.environ.get("SGSIM_DOCS_EXECUTE", "").lower() == "off" else "force"
nb_execution_timeout = 600
# a failing cell: MyST-NB warns with the cell's traceback (show_tb), and sgsim_docs then fails the
# build naming the page and repeating the traceback; raise_on_error would stop at an ExecutionError
# that names only the page and leaves the traceback in a temporary log
nb_execution_raise_on_error = False
nb_execution_show_tb = True
nb_merge_streams = True

# --------------------------------------------------------------------------- API reference
try:  # the Torch backend's page documents an optional extra: without torch, autodoc mocks it
    import torch  # noqa: F401
except ImportError:
    autodoc_mock_imports = ["torch"]
autodoc_typehints = "none"
autodoc_member_order = "bysource"
autosummary_generate = False
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
numpydoc_validation_checks: set[str] = set()

# --------------------------------------------------------------------------- HTML
html_theme = "pydata_sphinx_theme"
html_title = f"sgsim {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 6,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
    "secondary_sidebar_items": ["page-toc"],
}
html_sidebars: dict[str, list[str]] = {"index": [], "gallery": []}
html_show_sourcelink = False
html_last_updated_fmt = None
