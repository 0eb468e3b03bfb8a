"""Table 1 of "Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning" as a frontier: median
ESS against the draws' accuracy relative to an exact (MALA) reference, over protocols. The
experiment, the protocols, the friction rule and the reference are stated in
:mod:`sgsim.experiments.ess_frontier`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from sgsim.experiments.ess_frontier import METHODS, PAPER_TABLE1, PROTOCOLS, Frontier, frontier

from . import get_entry
from ._common import DEFAULT_SEED, Section, md_table, new_figure, save, script_main
from ._style import COLOURS, legend_below, styled

NAME = "cyclical_table1_frontier"
TITLE = get_entry(NAME).title
METHOD_COLOURS = dict(zip(METHODS, (COLOURS[c] for c in ("blue", "orange", "green", "vermillion")), strict=True))
METHOD_LABELS = {"sgld": "SGLD", "sghmc": "SGHMC", "csgld": "cSGLD", "csghmc": "cSGHMC"}
MARKERS = dict(zip(PROTOCOLS, ("o", "s", "^", "D", "*"), strict=True))
#: Draws kept per run, as in the paper's Table 1.
N_SAMPLES = 5000
#: Seeds per point and MALA steps of the reference, quick and full mode.
N_SEEDS = {False: 1, True: 5}
REFERENCE_STEPS = {False: 10_000, True: 40_000}
CAPTIONS = {
    f"{NAME}.png": (
        "Each point is one sampler (colour) run with one protocol (marker: minibatch size, step-size rule, "
        f"friction, thinning) on one data set (columns): its median ESS of {N_SAMPLES:,} draws (x) against the "
        "accuracy of its draws relative to an exact reference from preconditioned MALA (y): the largest error of a "
        "posterior mean in units of the exact posterior standard deviation (top) and the median ratio of sampled "
        "to exact standard deviation (bottom). Values are means over "
        f"{N_SEEDS[False]} seed in quick mode and {N_SEEDS[True]} in full mode. Dotted vertical lines mark each "
        "sampler's ESS in the paper's Table 1, in its colour, and the grey line in the bottom row a ratio of 1 "
        "(the exact spread); both axes are logarithmic."
    )
}


@styled
def draw(res: Frontier) -> object:
    """Per data set (columns): mean error (top) and spread ratio (bottom) against median ESS."""
    from matplotlib.lines import Line2D

    datasets = list(res.references)
    methods = [m for m in METHODS if any(p.method == m for p in res.points)]
    fig = new_figure(figsize=(max(3.8 * len(datasets) + 0.6, 9.0), 7.4))  # the legend needs 9 inches
    axes = np.atleast_2d(fig.subplots(2, len(datasets), squeeze=False))
    for col, d in enumerate(datasets):
        top, bottom = axes[0, col], axes[1, col]
        for p in (q for q in res.points if q.dataset == d):
            x = float(np.mean(p.ess_median))
            kw = dict(color=METHOD_COLOURS[p.method], marker=MARKERS[p.protocol], ms=7, ls="none")
            top.plot([x], [float(np.mean(p.mean_error))], **kw)
            bottom.plot([x], [float(np.mean(p.sd_ratio))], **kw)
        for m in methods:
            for ax in (top, bottom):
                ax.axvline(PAPER_TABLE1[(d, m)], color=METHOD_COLOURS[m], ls=":", lw=1.2)
        bottom.axhline(1.0, color=COLOURS["grey"], lw=0.8)
        for ax in (top, bottom):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(f"median ESS of {res.n_samples:,} draws")
        top.set_title(f"{d}: error of the means")
        bottom.set_title(f"{d}: spread of the draws")
        top.set_ylabel("max |mean - exact| / exact sd")
        bottom.set_ylabel("median sd / exact sd")
    handles = [Line2D([], [], color=c, ls=":", lw=1.2, label=f"{METHOD_LABELS[m]} (dotted: the paper's ESS)")
               for m, c in METHOD_COLOURS.items() if m in methods]  # fmt: skip
    handles += [Line2D([], [], color=COLOURS["black"], marker=mk, ls="none", label=p) for p, mk in MARKERS.items()]
    handles.append(Line2D([], [], color=COLOURS["grey"], lw=0.8, label="sd ratio 1: the exact spread"))
    legend_below(fig, handles, [h.get_label() for h in handles], ncol=4 if len(datasets) > 2 else 3)
    fig.suptitle("Table 1 of [cSG] as a frontier: ESS against accuracy, per sampler and protocol")
    return fig


def _accuracy(p) -> str:
    return (
        f"mean error {np.mean(p.mean_error):.2f}, sd ratio {np.mean(p.sd_ratio):.2f}, {p.examples:,} example gradients"
    )


def _reach(res: Frontier, d: str, m: str) -> tuple[str, str]:
    points = [p for p in res.points if p.dataset == d and p.method == m]
    paper = PAPER_TABLE1[(d, m)]
    reached = [p for p in points if np.mean(p.ess_median) >= paper]
    if reached:
        p = min(reached, key=lambda q: q.examples)
        return f"{p.protocol}: {np.mean(p.ess_median):.0f}", _accuracy(p)
    best = max(points, key=lambda p: float(np.mean(p.ess_median)))
    return f"none; best {best.protocol}: {np.mean(best.ess_median):.0f}", _accuracy(best)


def report(res: Frontier, figure: str) -> str:
    """The section's Markdown."""
    refs = "; ".join(
        f"{d}: {r.n_draws} draws, R-hat max {r.rhat_max:.4f}, ESS min {r.ess_min:.0f}, acceptance {r.acceptance:.2f}"
        for d, r in res.references.items()
    )
    rows = []
    methods = [m for m in METHODS if any(p.method == m for p in res.points)]
    for d in res.references:
        for m in methods:
            reach, cost = _reach(res, d, m)
            rows.append((f"{d} {m}: protocol reaching the paper's median ESS", PAPER_TABLE1[(d, m)], reach, cost))
    detail = [
        (f"{p.dataset} {p.method}, {p.protocol}", "", f"ESS {np.mean(p.ess_median):.0f} (min {np.mean(p.ess_min):.0f})",
         f"mean err {np.mean(p.mean_error):.2f}, sd ratio {np.mean(p.sd_ratio):.2f}; alpha {p.step_size:.3g}, "
         f"eta {p.friction:.3g}, burn-in {p.burn_in} (relaxation {p.relaxation:.0f}), {p.examples:,} example gradients")
        for p in res.points
    ]  # fmt: skip
    return "\n".join(
        [
            f"Every (data set, method, protocol) run {res.n_seeds} time(s) as sweep cells, {res.n_samples} draws each; "
            f"accuracy against an exact reference (preconditioned MALA, exact gradients; {refs}).",
            "",
            "**Reading it**: the mean error includes each run's own Monte Carlo error (about 1/sqrt(ESS) per "
            "parameter, its maximum over parameters is larger), so it falls as ESS grows; the spread ratio is the "
            "bias the minibatch noise and the discretisation leave (1 is exact). Thinning buys ESS with gradients, "
            "larger minibatches and steps at the stability bound buy it with spread, exact gradients with cost per "
            "step. SGHMC with friction 0.1 under the noise rule moves like SGLD (same ESS); with the critical "
            "friction it separates from SGLD.",
            "",
            md_table(rows),
            "",
            md_table(detail),
            "",
            f"![ESS against accuracy]({figure})",
            "",
            "*What to look at* (both axes logarithmic): in each column, points further right have more ESS; "
            "the top row should fall as they move right, the bottom row's distance from 1 is the bias; dotted "
            "lines are the paper's ESS, which a protocol reaches only where its point lies right of the line of "
            "its colour.",
        ]
    )


def run(out_dir: Path, full: bool = False, progress: bool = True, seed: int = DEFAULT_SEED) -> Section:
    """Compute the frontier; draw it; return the report section."""
    res = frontier(n_seeds=N_SEEDS[full], n_samples=N_SAMPLES, reference_steps=REFERENCE_STEPS[full], seed=seed,
                   progress=progress)  # fmt: skip
    figure = save(draw(res), out_dir, f"{NAME}.png")
    return Section(NAME, TITLE, report(res, figure), [figure], CAPTIONS)


if __name__ == "__main__":
    sys.exit(script_main(run))
