"""Scripts that regenerate the papers' figures and tables, and their registry.

Each module draws one figure or table of "Cyclical Stochastic Gradient MCMC for Bayesian
Deep Learning", "Stochastic Gradient MCMC with Repulsive Forces" or "Stochastic Gradient
Descent as Approximate Bayesian Inference" ([SGDVI]) from an experiment in
:mod:`sgsim.experiments`. It writes PNGs atomically
and returns a :class:`Section`: Markdown with a ``quantity | paper value | ours | note``
table. ``sgsim reproduce`` runs :data:`FIGURES` in order; each module also runs on its
own, e.g. ``python -m sgsim._paper_figures.cyclical_table4_coverage --out DIR``.

This directory is not installed as a top-level package: pyproject.toml ships it inside sgsim
as the private subpackage ``sgsim._paper_figures`` (an editable install maps it there too), so
its modules import each other relatively and sgsim absolutely.

The modules are imported only when an entry runs, so that listing the registry (and
``python -m`` on one module) does not import all of them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from ._common import DEFAULT_SEED, Section, budget, describe_mode

__all__ = ["FIGURES", "FigureEntry", "Section", "get_entry", "budget", "describe_mode", "DEFAULT_SEED"]


@dataclass(frozen=True)
class FigureEntry:
    """One registered figure or table.

    Attributes
    ----------
    name : str
        Module name in ``sgsim._paper_figures`` and the name ``sgsim reproduce --only`` takes.
    title : str
        Section title in the report and in the progress lines of ``sgsim reproduce``; every
        script's ``TITLE`` is read from here, and titles are distinct.
    """

    name: str
    title: str

    def run(self, out_dir: str | Path, full: bool = False, progress: bool = True, seed: int = DEFAULT_SEED) -> Section:
        """Run the script: compute, draw, write its PNGs into ``out_dir``, return its section."""
        module = importlib.import_module(f"{__name__}.{self.name}")
        return module.run(Path(out_dir), full=full, progress=progress, seed=seed)


#: The registry, in the order ``sgsim reproduce`` runs it.
FIGURES: tuple[FigureEntry, ...] = (
    FigureEntry("cyclical_fig1_schedules", "Figure 1: cyclical and decreasing step-size schedules"),
    FigureEntry("cyclical_fig2_parallel", "Figure 2: 25-Gaussian mixture, 4 parallel chains"),
    FigureEntry("cyclical_fig5_single", "Figure 5: 25-Gaussian mixture, a single chain"),
    FigureEntry("cyclical_table4_coverage", "Table 4: mode coverage on the 25-Gaussian mixture"),
    FigureEntry("cyclical_table1_ess", "Table 1: median ESS, Bayesian logistic regression (Australian, German, Heart)"),
    FigureEntry(
        "cyclical_table1_frontier",
        "Frontier behind Table 1: median ESS against accuracy on Bayesian logistic regression",
    ),
    FigureEntry("cyclical_fig4_uncertainty", "[cSG] Figure 4: predictive entropy out of distribution, MLP on MNIST"),
    FigureEntry(
        "repulsive_table1_gaussian", "[Rep] Figure 2 and Table 1: six particles on a Gaussian, SVGD and SGLD+R"
    ),
    FigureEntry(
        "repulsive_tables23_synthetic",
        "[Rep] Tables 2 and 3: ESS and error of E[X], SGLD vs SGLD+R on two synthetic targets",
    ),
    FigureEntry(
        "repulsive_figs345",
        "[Rep] Figures 3-5: running moments on the exponential mixture; particles on the 3x3 mixture",
    ),
    FigureEntry("sgdvi_fig6_vem", "[SGDVI] Figure 6: the prior precision chosen by variational EM with constant SGD"),
    FigureEntry("sgdvi_figs12_covariances", "[SGDVI] Figures 1 and 2: constant SGD's covariance against the OU model"),
    FigureEntry("sgdvi_table1_kl", "[SGDVI] Table 1: KL divergence to the posterior of constant SGD, SGLD and SGFS"),
    FigureEntry(
        "sgdvi_figs345_iasg",
        "[SGDVI] Figures 3-5: iterate averaging (IASG) against SGLD on synthetic linear regression",
    ),
    FigureEntry("repulsive_tables45_bnn", "[Rep] Tables 4 and 5: Bayesian neural network regression, SGLD vs SGLD+R"),
    FigureEntry(
        "reference_bias", "Reference posteriors: the bias of SG-MCMC against gold-standard draws, beside the theory"
    ),
    FigureEntry("splitting_accuracy", "Splitting accuracy: BAOAB's stationary law against SGLD's Euler-Maruyama bias"),
    FigureEntry("peer_comparison", "The peer samplers side by side at equal gradient evaluations"),
)


def get_entry(name: str) -> FigureEntry:
    """The registered entry ``name``, or a ValueError listing the names."""
    for entry in FIGURES:
        if entry.name == name:
            return entry
    raise ValueError(f"unknown figure {name!r}; known: {', '.join(e.name for e in FIGURES)}")
