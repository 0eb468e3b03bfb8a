"""Figure 1 of [cSG] ("Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning").

The cyclical step-size schedule (eq. 2) against a decreasing one (eq. 1).

The paper's Figure 1 is an illustration without axes values; it is drawn here with the
25-Gaussian settings of §5.1 (``K = 50 000``, ``M = 30``, ``alpha_0 = 0.09``, ``beta = 1/4``;
SGLD ``0.05 k^-0.55``): the exploration stage dashed, the sampling stage solid, as in the
paper. The report compares the schedule's sums with the paper's closed forms (§4, App. C
eq. 17; docs: theory-schedules, erratum-step-sums).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

from sgsim.experiments.cyclical_synthetic import N_STEPS, SETTINGS, ScheduleCurves, schedule_curves

from . import get_entry
from ._common import DEFAULT_SEED, Section, budget, md_table, new_figure, save, script_main
from ._style import COLOURS, legend_below, styled

NAME = "cyclical_fig1_schedules"
TITLE = get_entry(NAME).title
CYCLICAL, DECREASING = COLOURS["vermillion"], COLOURS["blue"]
_S = SETTINGS["paper"]
CAPTIONS = {
    f"{NAME}.png": (
        f"Step size $\\alpha_k$ against iteration $k$ for cSGLD's cyclical schedule ([cSG] eq. 2: "
        f"$\\alpha_0 = {_S.step_size:g}$, $M = {_S.n_cycles}$ cycles, $\\beta = {_S.explore_fraction:g}$; dashed: "
        f"exploration stage, solid: sampling stage) and SGLD's decreasing schedule "
        f"$\\alpha_k = {_S.sgld_scale:g}\\,k^{{-{_S.sgld_gamma:g}}}$ (eq. 1), with the 25-Gaussian settings of §5.1 "
        f"over $K = {N_STEPS:,}$ iterations. Left: the whole run, step size on a logarithmic axis; right: the first "
        "three cycles on a linear axis. Every cycle restarts at $\\alpha_0$ and decays to nearly zero along a "
        "cosine, while the decreasing schedule stays far below $\\alpha_0$ after its first steps."
    )
}


def _math(formula: str) -> str:
    """``0.05 k^-0.55`` as mathtext."""
    return re.sub(r"k\^-([\d.]+)", r"$k^{-\1}$", formula)


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
            label = "cSGLD (eq. 2), exploration stage" if stage else "cSGLD (eq. 2), sampling stage"
            labelled.add(stage)
        e2 = e + 1 if e < k.size and cycle[e] == cycle[s] else e
        ax.plot(k[s:e2], a[s:e2], color=CYCLICAL, ls="--" if stage else "-", label=label)


@styled
def draw(c: ScheduleCurves):
    """The figure: the whole run (log scale), and the first three cycles (linear scale)."""
    fig = new_figure(figsize=(10, 4))
    axes = fig.subplots(1, 2)
    zoom = min(c.n_steps, 3 * c.cycle_length)
    for ax, stop in zip(axes, (c.n_steps, zoom), strict=True):
        ax.plot(c.step[:stop], c.decreasing[:stop], color=DECREASING, label=f"SGLD (eq. 1): {_math(c.sgld)}")
        _draw_cyclical(ax, c, stop)
        ax.set_xlabel("iteration $k$")
        ax.set_ylabel(r"step size $\alpha_k$")
        ax.set_xlim(0, stop)
    axes[0].set_yscale("log")
    axes[1].set_ylim(0, 1.05 * max(c.cyclical.max(), c.decreasing.max()))
    axes[0].set_title(f"(a) the whole run: $K$ = {c.n_steps:,}, {c.n_cycles} cycles of {c.cycle_length}")
    axes[1].set_title("(b) the first three cycles")
    legend_below(fig, *axes[1].get_legend_handles_labels())
    fig.suptitle(
        f"[cSG] Figure 1: cyclical schedule ($\\alpha_0$ = {c.step_size:g}, $\\beta$ = {c.explore_fraction:g}) "
        "and decreasing schedule"
    )
    return fig


def report(c: ScheduleCurves, figure: str) -> str:
    """The section's Markdown."""
    rows = [
        ("cSGLD step size at the start of each cycle", f"alpha_0 = {c.step_size:g}", f"{c.cyclical[0]:g}", "eq. 2"),
        (
            "cycle length L = ceil(K/M)",
            "ceil(K/M) (eq. 2)",
            f"{c.cycle_length} (last cycle {c.last_cycle_length})",
            f"K mod M = {c.n_steps % c.n_cycles}: the last cycle is cut short (documentation: `theory-schedules`, "
            "`erratum-mixture25-recipe`)",
        ),
        (
            "exploration / sampling steps per cycle",
            f"r(k) < beta = {c.explore_fraction:g} explores",
            f"{c.n_explore} / {c.n_sample}",
            "stage decided in integer arithmetic: r(k) >= beta samples (documentation: `theory-schedules`)",
        ),
        (
            "sum of cSGLD step sizes (diffusion time)",
            f"K alpha_0 / 2 = {c.paper_sum_cyclical:g} (§4)",
            f"{c.sum_cyclical:.4f}",
            f"exact alpha_0 (K' + M)/2 = {c.full_sum_cyclical:.4f} for K' = M L = {c.n_cycles * c.cycle_length} "
            "(documentation: `theory-schedules`, `erratum-step-sums`); the cut cycle loses only tiny steps",
        ),
        (
            "sum of squared cSGLD step sizes",
            f"3 alpha_0^2 K / 8 = {c.paper_sum_sq_cyclical:.4f} (eq. 17)",
            f"{c.sum_sq_cyclical:.4f}",
            f"exact alpha_0^2 (3K'/8 + M/2) = {c.full_sum_sq_cyclical:.4f} for K' = M L "
            "(documentation: `erratum-step-sums`)",
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
        f"settings of §5.1 (the paper's Figure 1 is an unlabelled illustration). Dashed: cSGLD's exploration "
        f"stage (T = 0, plain SGD); solid: its sampling stage.\n\n"
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
    return Section(NAME, TITLE, report(curves, figure), [figure], CAPTIONS)


if __name__ == "__main__":
    sys.exit(script_main(run))
