"""Figure 1 of [cSG] ("Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning").

The cyclical step-size schedule (eq. 2) against a decreasing one (eq. 1).

The paper's Figure 1 is an illustration without axes values; it is drawn here with the
25-Gaussian settings of §5.1 (``K = 50 000``, ``M = 30``, ``alpha_0 = 0.09``, ``beta = 1/4``;
SGLD ``0.05 k^-0.55``): the exploration stage dashed, the sampling stage solid, as in the
paper. The report compares the schedule's sums with the paper's closed forms (§4, App. C
eq. 17; THEORY A3, erratum H2).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from sgsim.experiments.cyclical_synthetic import ScheduleCurves, schedule_curves

from ._common import DEFAULT_SEED, Section, budget, md_table, new_figure, save, script_main

NAME = "cyclical_fig1_schedules"
TITLE = "Figure 1: cyclical and decreasing step-size schedules"
RED, BLUE = "#d62728", "#1f77b4"


def _draw_cyclical(ax, c: ScheduleCurves, stop: int) -> None:
    k, a, explore, cycle = c.step[:stop], c.cyclical[:stop], c.exploration[:stop], c.cycle[:stop]
    # one line per stage segment, so that the dashed and solid parts do not join across
    # stages; a segment reaches into the next one inside a cycle, never across a restart
    change = np.flatnonzero(np.diff(explore.astype(np.int8)) | np.diff(cycle)) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [k.size]])
    labelled = set()
    for s, e in zip(starts, ends, strict=True):
        stage = bool(explore[s])
        label = None
        if stage not in labelled:
            label = "cyclical, exploration ($T = 0$)" if stage else "cyclical, sampling ($T = 1$)"
            labelled.add(stage)
        e2 = e + 1 if e < k.size and cycle[e] == cycle[s] else e
        ax.plot(k[s:e2], a[s:e2], color=RED, ls="--" if stage else "-", lw=1.4, label=label)


def draw(c: ScheduleCurves):
    """The figure: the whole run (log scale), and the first three cycles (linear scale)."""
    fig = new_figure(figsize=(11, 3.8))
    axes = fig.subplots(1, 2)
    zoom = min(c.n_steps, 3 * c.cycle_length)
    for ax, stop in zip(axes, (c.n_steps, zoom), strict=True):
        ax.plot(c.step[:stop], c.decreasing[:stop], color=BLUE, lw=1.4, label=f"decreasing (eq. 1): {c.sgld}")
        _draw_cyclical(ax, c, stop)
        ax.set_xlabel("iteration $k$")
        ax.set_ylabel(r"step size $\alpha_k$")
        ax.set_xlim(0, stop)
    axes[0].set_yscale("log")
    axes[1].set_ylim(0, 1.05 * max(c.cyclical.max(), c.decreasing.max()))
    axes[0].set_title(
        f"$K$ = {c.n_steps:,}, $M$ = {c.n_cycles} cycles of $L$ = {c.cycle_length} (log scale)", fontsize=10
    )
    axes[1].set_title("first three cycles (linear scale)", fontsize=10)
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=9, frameon=False)
    fig.suptitle(f"[cSG] Figure 1: cyclical schedule (eq. 2; {c.csgld}) and decreasing schedule", fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def report(c: ScheduleCurves, figure: str) -> str:
    """The section's Markdown."""
    rows = [
        ("cSGLD step size at the start of each cycle", f"alpha_0 = {c.step_size:g}", f"{c.cyclical[0]:g}", "eq. 2"),
        (
            "cycle length L = ceil(K/M)",
            "ceil(K/M) (eq. 2)",
            f"{c.cycle_length} (last cycle {c.last_cycle_length})",
            f"K mod M = {c.n_steps % c.n_cycles}: the last cycle is cut short (THEORY A3, H8)",
        ),
        (
            "exploration / sampling steps per cycle",
            f"r(k) < beta = {c.explore_fraction:g} explores",
            f"{c.n_explore} / {c.n_sample}",
            "stage decided in integer arithmetic: r(k) >= beta samples (THEORY A3)",
        ),
        (
            "sum of cSGLD step sizes (diffusion time)",
            f"K alpha_0 / 2 = {c.paper_sum_cyclical:g} (§4)",
            f"{c.sum_cyclical:.4f}",
            f"exact alpha_0 (K' + M)/2 = {c.full_sum_cyclical:.4f} for K' = M L = {c.n_cycles * c.cycle_length} "
            "(THEORY A3, erratum H2); the cut cycle loses only tiny steps",
        ),
        (
            "sum of squared cSGLD step sizes",
            f"3 alpha_0^2 K / 8 = {c.paper_sum_sq_cyclical:.4f} (eq. 17)",
            f"{c.sum_sq_cyclical:.4f}",
            f"exact alpha_0^2 (3K'/8 + M/2) = {c.full_sum_sq_cyclical:.4f} for K' = M L (erratum H2)",
        ),
        (
            "sum of SGLD step sizes",
            "O(h_0 log K), much less than K alpha_0 / 2 (§4)",
            f"{c.sum_decreasing:.4f}",
            f"cSGLD's diffusion time is {c.sum_cyclical / c.sum_decreasing:.0f} times SGLD's",
        ),
    ]
    return (
        f"The cosine schedule of eq. 2 against the decreasing schedule of eq. 1, with the 25-Gaussian "
        f"settings of §5.1 (the paper's Figure 1 is an unlabelled illustration). Dashed red: exploration "
        f"stage (T = 0, plain SGD); solid red: sampling stage.\n\n"
        f"![Figure 1]({figure})\n\n" + md_table(rows)
    )


def run(out_dir: Path, full: bool = False, progress: bool = True, seed: int = DEFAULT_SEED) -> Section:
    """Figure 1 of [cSG]: cyclical and decreasing step-size schedules.

    Deterministic: ``full``, ``progress`` and ``seed`` change nothing (kept for the common
    signature).
    """
    curves = schedule_curves("paper", budget(full).n_steps)
    fig = draw(curves)
    figure = save(fig, out_dir, f"{NAME}.png")
    return Section(NAME, TITLE, report(curves, figure), [figure])


if __name__ == "__main__":
    sys.exit(script_main(run))
