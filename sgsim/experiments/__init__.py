"""The papers' experiments as functions that return data (no plotting, no file I/O).

Each function takes its budget (``n_steps``, ``n_runs``), one experiment ``seed`` from which
every run's seed is derived deterministically (and recorded in the result), and
``progress``. The scripts in ``paper_figures/`` call them, draw, and write.

Modules
-------
cyclical_synthetic
    "Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning": Figure 1 (schedules),
    Figures 2 and 5 (densities on the 25-Gaussian mixture) and Table 4 (mode coverage).
cyclical_logistic
    The same paper's Table 1: median ESS of SGLD, cSGLD, SGHMC and cSGHMC on Bayesian
    logistic regression (Australian, German, Heart).
repulsive_gaussian, repulsive_synthetic
    "Stochastic Gradient MCMC with Repulsive Forces": Table 1 and Figure 2, Tables 2-3 and
    Figures 3-5.
constant_sgd_stationary, iterate_averaging, vem_hyperparameter
    "Stochastic Gradient Descent as Approximate Bayesian Inference": Figures 1-2 and Table 1
    (stationary laws against the posterior), Figures 3-5 (iterate averaging against SGLD),
    Figure 6 (the prior precision chosen by variational EM with constant SGD).
ess_frontier
    The cyclical paper's Table 1 as a frontier of ESS against accuracy, over protocols.
"""

from __future__ import annotations

from . import cyclical_logistic, cyclical_synthetic

__all__ = ["cyclical_logistic", "cyclical_synthetic"]
