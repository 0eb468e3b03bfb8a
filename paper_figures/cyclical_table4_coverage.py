"""Table 4 of [cSG] ("Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning"), App. A.1.

Mode coverage on the mixture of 25 Gaussians: a mode counts as covered when more than
``n-bar = 100`` draws lie within ``r = 0.25`` of its centre. The paper reports mean ± standard
error over 10 runs: SGLD 1.8 ± 0.13, cSGLD 6.7 ± 0.52, parallel SGLD 18 ± 0.47, parallel cSGLD
24.4 ± 0.22. Computed here for the paper's and the reference code's settings
(docs: theory-mixture-25), with the binomial coverage of as many exact iid draws for context.
Nothing is tuned toward the published numbers; the differences are explained in the report
(docs: theory-mixture-25, erratum-mixture25-recipe).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from sgsim.experiments.cyclical_synthetic import (
    ALGORITHMS,
    N_PARALLEL,
    N_STEPS,
    PAPER_TABLE4,
    RADIUS,
    SETTINGS,
    THRESHOLD,
    CoverageTable,
    mode_coverage_table,
)

from . import get_entry
from ._common import DEFAULT_SEED, Section, budget, md_table, new_figure, save, script_main
from ._style import COLOURS, legend_below, styled

NAME = "cyclical_table4_coverage"
TITLE = get_entry(NAME).title
SETTING_COLOURS = {"paper": COLOURS["vermillion"], "reference": COLOURS["blue"]}
CAPTIONS = {
    f"{NAME}.png": (
        f"Modes of the 25-Gaussian mixture covered (more than {THRESHOLD} draws within $r = {RADIUS:g}$ of the "
        f"mode's centre) by SGLD, cSGLD and their versions with {N_PARALLEL} parallel chains, each chain "
        f"{N_STEPS:,} iterations, with all draws of a run pooled. Small dots are single runs ({budget(False).n_runs} "
        f"per row in quick mode, {budget(True).n_runs} in full mode) and circles with bars their mean ± standard "
        "error, in the paper's setting (vermillion) and the reference code's (blue); black squares with bars are "
        "the paper's Table 4. The dotted line marks all 25 modes."
    )
}


@styled
def draw(tables: list[CoverageTable]):
    """Coverage of every run (dots), our mean ± SE (bars) and the paper's (black)."""
    fig = new_figure(figsize=(8, 4.4))
    ax = fig.subplots()
    keys = [a[0] for a in ALGORITHMS]
    rng = np.random.default_rng(0)  # jitter of the dots only
    width = 0.22
    for j, t in enumerate(tables):
        offset = (j - (len(tables) - 1) / 2) * width
        colour = SETTING_COLOURS.get(t.setting.name, COLOURS["grey"])
        for i, key in enumerate(keys):
            row = t.rows[key]
            x = i + offset
            jitter = rng.uniform(-0.05, 0.05, row.coverage.size)
            ax.scatter(x + jitter, row.coverage, s=12, color=colour, alpha=0.6, lw=0,
                       label=f"ours, single runs, {t.setting.name} setting" if i == 0 else None)  # fmt: skip
            ax.errorbar(x, row.mean, yerr=row.se, fmt="o", ms=6, color=colour, capsize=3,
                        label=f"ours, mean ± SE, {t.setting.name} setting" if i == 0 else None)  # fmt: skip
    for i, key in enumerate(keys):
        mean, se = PAPER_TABLE4[key]
        ax.errorbar(i + (len(tables) + 1) / 2 * width, mean, yerr=se, fmt="s", ms=6, color=COLOURS["black"],
                    capsize=3, label="paper, Table 4 (mean ± SE)" if i == 0 else None)  # fmt: skip
    ax.axhline(25, color=COLOURS["grey"], lw=0.8, ls=":", label="all 25 modes")
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([a[1] for a in ALGORITHMS])
    ax.set_xlabel("sampler (parallel: 4 chains pooled)")
    ax.set_ylabel(f"modes covered ($r$ = {tables[0].radius:g}, more than {tables[0].threshold} draws)")
    ax.set_ylim(0, 26.5)
    t0 = tables[0]
    ax.set_title(f"[cSG] Table 4: mode coverage, {t0.n_runs} runs per row, {t0.n_steps:,} iterations per chain")
    legend_below(fig, *ax.get_legend_handles_labels())
    return fig


def _fmt(mean: float, se: float) -> str:
    return f"{mean:.1f} ± {se:.2f}" if np.isfinite(se) else f"{mean:.1f}"


def rows(t: CoverageTable) -> list[tuple]:
    """Report rows of one setting."""
    out = []
    for key, label, _, _ in ALGORITHMS:
        r = t.rows[key]
        mean, se = PAPER_TABLE4[key]
        chains = f"{r.n_chains} chains pooled" if r.n_chains > 1 else "1 chain"
        out.append(
            (
                f"{label}, {t.setting.name} setting",
                f"{mean:g} ± {se:g}",
                f"{_fmt(r.mean, r.se)} (runs: {', '.join(map(str, r.coverage))})",
                f"{chains}; {int(r.n_draws[0]):,} draws per run; "
                f"exact iid draws: {r.oracle_mean:.2f} ± {r.oracle_sd:.2f}",
            )
        )
    return out


def report(tables: list[CoverageTable], figure: str) -> str:
    """The section's Markdown."""
    t0 = tables[0]
    lines = [
        f"Mean ± standard error (sample sd / sqrt(n)) over {t0.n_runs} independent runs per row, "
        f"{t0.n_steps:,} iterations per chain. The metric is [cSG] App. A.1's: a mode is covered when more than "
        f"{t0.threshold} draws lie within r = {t0.radius:g} of its centre. Draws used: {t0.draws_used}. "
        f"'exact iid draws' gives the mean ± sd of the coverage of as many exact draws (binomial oracle, "
        f"documentation: `theory-mixture-25`; P(ball) = {t0.ball_probability:.5f} per component).",
        "",
    ]
    for t in tables:
        s = t.setting
        lines.append(
            f"- **{s.name}** setting: cSGLD {s.describe_csgld()}; SGLD {s.describe_sgld()}; {s.describe_noise()}; "
            f"initial points U([-10, 10]^2). {s.provenance[0].upper()}{s.provenance[1:]}."
        )
    lines += ["", f"![Table 4]({figure})", ""]
    table_rows = []
    for t in tables:
        table_rows += rows(t)
    lines.append(md_table(table_rows))
    by_setting = {t.setting.name: t for t in tables}

    def ours(key: str) -> str:
        return ", ".join(f"{_fmt(t.rows[key].mean, t.rows[key].se)} ({name} setting)" for name, t in by_setting.items())

    oracle_min = min(r.oracle_mean for t in tables for r in t.rows.values())
    lines += [
        "",
        "**Why the numbers differ from the paper.** "
        f"(1) Single-chain cSGLD: ours {ours('csgld')}, against the paper's 6.7 ± 0.52. The checks recorded in "
        "the documentation (`theory-mixture-25`, `erratum-mixture25-recipe`) found 14-18 modes with the reference "
        "code's recipe (5 seeds). The paper does not say which "
        "draws feed the metric. Thinning, or counting only some cycles, would lower every count, but we do "
        "not guess which was used. "
        f"(2) Parallel SGLD: ours {ours('parallel_sgld')}. The paper's Figure 2 caption says that 4 SGLD chains "
        "discover 4 of the 25 modes, but its Table 4 reports 18 ± 0.47 for parallel SGLD. A run with 4 modes "
        "is about 9 standard deviations below that mean, so the two are hard to reconcile. The table does not "
        "state its parallel configuration (number of chains, initialisation). "
        f"(3) Single-chain SGLD: ours {ours('sgld')} (paper 1.8 ± 0.13). A chain with decreasing steps stays "
        "near the mode it reaches first, which depends on where it starts, and a second mode seldom gets "
        "past the 100-draw threshold. "
        f"The binomial oracle is at least {oracle_min:.2f} modes for every row, so as many exact draws would "
        "cover all modes: the gaps come from mixing, not from the resolution of the metric.",
        "",
        "Seeds: run i of a row with c chains uses `run_seeds(seed, n_runs, c)[i]`. SGLD and cSGLD share "
        "these seeds, so they start from the same points in both settings.",
        "",
    ]
    for c in sorted({r.n_chains for r in t0.rows.values()}):
        seeds = next(r.seeds for r in t0.rows.values() if r.n_chains == c)
        lines.append(f"- {c} chain(s): {', '.join(map(str, seeds))}")
    return "\n".join(lines)


def run(out_dir: Path, full: bool = False, progress: bool = True, seed: int = DEFAULT_SEED) -> Section:
    """Table 4 of [cSG]: mode coverage of SGLD, cSGLD and their 4-chain versions."""
    b = budget(full)
    tables = [
        mode_coverage_table(name, n_runs=b.n_runs, n_steps=b.n_steps, seed=seed, progress=progress) for name in SETTINGS
    ]
    figure = save(draw(tables), out_dir, f"{NAME}.png")
    return Section(NAME, TITLE, report(tables, figure), [figure], CAPTIONS)


if __name__ == "__main__":
    sys.exit(script_main(run))
