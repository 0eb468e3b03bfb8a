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

from ._common import DEFAULT_SEED, Section, md_table, new_figure, save, script_main

NAME = "cyclical_table1_frontier"
TITLE = "Table 1 as a frontier: ESS against accuracy on Bayesian logistic regression"
COLOURS = dict(zip(METHODS, ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=True))
MARKERS = dict(zip(PROTOCOLS, ("o", "s", "^", "D", "*"), strict=True))


def draw(res: Frontier) -> object:
    """Per data set (columns): mean error (top) and spread ratio (bottom) against median ESS."""
    datasets = list(res.references)
    fig = new_figure(figsize=(4.2 * len(datasets), 7))
    axes = np.atleast_2d(fig.subplots(2, len(datasets), sharex="col", squeeze=False))
    for col, d in enumerate(datasets):
        top, bottom = axes[0, col], axes[1, col]
        for p in (q for q in res.points if q.dataset == d):
            x = float(np.mean(p.ess_median))
            kw = dict(color=COLOURS[p.method], marker=MARKERS[p.protocol], ms=7, ls="none")
            top.plot([x], [float(np.mean(p.mean_error))], **kw)
            bottom.plot([x], [float(np.mean(p.sd_ratio))], **kw)
        for m in METHODS:
            for ax in (top, bottom):
                ax.axvline(PAPER_TABLE1[(d, m)], color=COLOURS[m], ls=":", lw=1)
        bottom.axhline(1.0, color="grey", lw=0.8)
        for ax in (top, bottom):
            ax.set_xscale("log")
            ax.set_yscale("log")
        top.set_title(f"{d} (dotted: the paper's ESS per method)", fontsize=9)
        top.set_ylabel("max |mean - exact| / exact sd")
        bottom.set_ylabel("median sd / exact sd")
        bottom.set_xlabel(f"median ESS of {res.n_samples} draws")
    handles = [axes[0, 0].plot([], [], color=c, ls="-", label=m)[0] for m, c in COLOURS.items()]
    handles += [axes[0, 0].plot([], [], color="black", marker=mk, ls="none", label=p)[0] for p, mk in MARKERS.items()]
    fig.legend(handles=handles, loc="lower center", ncol=5, fontsize=8, bbox_to_anchor=(0.5, -0.04))
    fig.tight_layout(rect=(0, 0.05, 1, 1))
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
    res = frontier(n_seeds=5 if full else 1, reference_steps=40_000 if full else 10_000, seed=seed, progress=progress)
    figure = save(draw(res), out_dir, f"{NAME}.png")
    return Section(NAME, TITLE, report(res, figure), [figure])


if __name__ == "__main__":
    sys.exit(script_main(run))
