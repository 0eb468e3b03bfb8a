"""Figure 2 and Table 1 of "Stochastic Gradient MCMC with Repulsive Forces" (§3.1): six particles
on a Gaussian under SVGD and SGLD with repulsive forces, by the recipe that gives the paper's
numbers and with the target the paper names, and a stationary comparison the table does not make.
The experiment and both recipes are stated in :mod:`sgsim.experiments.repulsive_gaussian`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from sgsim.experiments.repulsive_gaussian import (
    BANDWIDTH,
    N_PARTICLES,
    N_STEPS,
    PAPER_TABLE1,
    RECIPES,
    STEP_SIZE,
    GaussianExample,
    run_recipe,
    stationary_sd,
)

from . import get_entry
from ._common import DEFAULT_SEED, Section, md_table, new_figure, save, script_main
from ._style import COLOURS, legend_below, styled

NAME = "repulsive_table1_gaussian"
TITLE = get_entry(NAME).title
METHODS = (("svgd", "SVGD"), ("sgld_repulsive", "SGLD+R"))
CAPTIONS = {
    f"{NAME}.png": (
        f"Paths of {N_PARTICLES} particles started at $(3, 3) + 0.25\\,\\xi$ ($\\xi$ standard normal) over "
        f"{N_STEPS} steps of size {STEP_SIZE} (one run), for SVGD (left) and SGLD with repulsive forces (SGLD+R, "
        "right), both with kernel bandwidth "
        f"{BANDWIDTH:g} and no $1/L$ factor. Top: the recipe of the paper's code, whose target is "
        "$\\mathcal{N}(0, I/2)$; bottom: the target the paper names, $\\mathcal{N}(0, I)$. Grey circles mark 1 "
        "(solid) and 2 (dashed) target standard deviations and black dots the final positions; SVGD moves the "
        "particles deterministically, so its paths are smooth, while SGLD+R's carry injected noise."
    )
}


@styled
def draw(results: dict) -> object:
    """Paths of the first seed's particles, per recipe (rows) and sampler (columns)."""
    from matplotlib.lines import Line2D

    fig = new_figure(figsize=(8.5, 9))
    axes = fig.subplots(len(RECIPES), len(METHODS), sharex=True, sharey=True)
    angle = np.linspace(0, 2 * np.pi, 200)
    for row, recipe in enumerate(RECIPES):
        for col, (method, label) in enumerate(METHODS):
            ax = axes[row, col]
            res: GaussianExample = results[recipe, method]
            for k, ls in ((1, "-"), (2, "--")):
                r = k * res.target_sd
                ax.plot(r * np.cos(angle), r * np.sin(angle), color=COLOURS["grey"], lw=0.9, ls=ls)
            for p in range(res.paths.shape[1]):
                ax.plot(res.paths[:, p, 0], res.paths[:, p, 1], lw=0.7)
            ax.plot(res.paths[-1, :, 0], res.paths[-1, :, 1], "o", ms=4, color=COLOURS["black"])
            ax.set_aspect("equal")
            ax.tick_params(labelbottom=True, labelleft=True)  # shared limits, but every panel readable alone
            ax.set_title(f"{label}, {recipe} (target sd {res.target_sd:.3g})")
            ax.set_xlabel("$x_1$")
            ax.set_ylabel("$x_2$")
    handles = [
        Line2D([], [], color=COLOURS["blue"], lw=0.7, label="path of one particle (one colour each)"),
        Line2D([], [], color=COLOURS["black"], marker="o", ms=4, ls="none", label=f"positions after {N_STEPS} steps"),
        Line2D([], [], color=COLOURS["grey"], lw=0.9, label="1 target sd"),
        Line2D([], [], color=COLOURS["grey"], lw=0.9, ls="--", label="2 target sd"),
    ]
    legend_below(fig, handles, [h.get_label() for h in handles], ncol=2)
    fig.suptitle(f"[Rep] Figure 2: {N_PARTICLES} particles, {N_STEPS} steps of {STEP_SIZE} from near (3, 3)")
    return fig


def _ms(values: np.ndarray) -> str:
    return f"{np.mean(values):.3f} ± {np.std(values, ddof=1):.3f}"


def report(results: dict, stationary: dict, n_seeds: int, seed: int, figure: str) -> str:
    """The section's Markdown."""
    rows = []
    for recipe in RECIPES:
        for method, label in METHODS:
            res = results[recipe, method]
            paper = PAPER_TABLE1[method]
            note = "reproduces the table's recipe" if recipe == "paper code" else "the target the paper names"
            for name, value, ref in (("mu", res.mu, paper[0]), ("sigma_x", res.sigma_x, paper[1]),
                                     ("sigma_y", res.sigma_y, paper[2])):  # fmt: skip
                rows.append((f"{label} {name}, {recipe}", ref, _ms(value), note))
    for method, label in METHODS:
        rows.append((f"{label} stationary sd on N(0, I)", "not given", _ms(stationary[method]), "target 1"))
    return "\n".join(
        [
            f"Mean ± standard deviation over {n_seeds} independent runs (seed {seed}); the paper gives one run. "
            f"Recipe: {N_PARTICLES} particles from 3 + 0.25 xi, step {STEP_SIZE}, bandwidth {BANDWIDTH}, no 1/L, "
            f"{N_STEPS} iterations, statistics over all {N_STEPS + 1} snapshots (the start included), pooled "
            "over particles and time.",
            "",
            "**What the table is**: with the paper's own recipe (target log pi = -|x|^2, i.e. N(0, I/2), sd "
            "0.707) the numbers come back; they measure a transient from (3, 3), not a stationary law, and the "
            "'target' column's sigma = 1 is not that recipe's target. With the stated N(0, I) both samplers are "
            "further from their target after 200 steps. **What the table does not show** is the stationary "
            "difference: after burn-in (5,000 steps of 0.05, the first 2,000 dropped, N(0, I)), SGLD+R's "
            "particles have the target's spread and SVGD's six particles settle at fixed points inside it.",
            "",
            md_table(rows),
            "",
            f"![particle paths]({figure})",
            "",
            "*What to look at*: in each panel the six paths from (3, 3); SVGD's slow down towards a "
            "deterministic configuration, SGLD+R's keep moving and spread out to the target's scale; the top "
            "row's target is narrower (sd 0.707) than the bottom row's (sd 1), and after 200 steps both samplers "
            "still carry the start's offset towards (3, 3) (the table's positive means).",
        ]
    )


def run(out_dir: Path, full: bool = False, progress: bool = True, seed: int = DEFAULT_SEED) -> Section:
    """Run both recipes and the stationary comparison; draw the paths; return the report section."""
    n_seeds = 400 if full else 100
    results = {(recipe, m): run_recipe(recipe, m, n_seeds, seed) for recipe in RECIPES for m, _ in METHODS}
    stationary = {m: stationary_sd(m, n_seeds // 2, seed + 1) for m, _ in METHODS}
    figure = save(draw(results), out_dir, f"{NAME}.png")
    return Section(NAME, TITLE, report(results, stationary, n_seeds, seed, figure), [figure], CAPTIONS)


if __name__ == "__main__":
    sys.exit(script_main(run))
