"""Drawing, captioning and reporting the density figures of [cSG] (Figures 2 and 5), shared by both scripts."""

from __future__ import annotations

import numpy as np

from sgsim.experiments.cyclical_synthetic import (
    N_STEPS,
    RADIUS,
    SETTINGS,
    THRESHOLD,
    DensityComparison,
    MethodRun,
    Setting,
)

from ._common import md_table, new_figure
from ._style import COLOURS, density_colorbar, density_norm, legend_below, styled

LABELS = {"sgld": "SGLD", "csgld": "cSGLD"}


def _schedules(s: Setting) -> str:
    """Both schedules of a setting, in Markdown mathematics."""
    csgld = f"$\\alpha_0 = {s.step_size:g}$, $M = {s.n_cycles}$ cycles, $\\beta = {s.explore_fraction:g}$"
    if s.skip_per_cycle:
        csgld += f", the first {s.skip_per_cycle} steps of each cycle not collected"
    decay = f"{s.sgld_scale:g}\\,k^{{-{s.sgld_gamma:g}}}"
    if s.sgld_hold:
        a, h = f"{s.sgld_scale:g}", s.sgld_hold
        decay = f"{a}\\,(k - {h})^{{-{s.sgld_gamma:g}}}$ after {h} steps at ${a}"
    return f"cSGLD {csgld}; SGLD $\\alpha_k = {decay}$"


def caption(figure_number: int, setting: str, n_chains: int) -> str:
    """The caption of Figure 2 or 5 in one setting (static: nothing in it depends on a run)."""
    s = SETTINGS[setting]
    chains = f"{n_chains} parallel chains" if n_chains > 1 else "a single chain"
    where = "the paper's setting" if setting == "paper" else "the setting of the authors' reference code"
    return (
        f"[cSG] Figure {figure_number} in {where}: (a) the density of the 25-Gaussian mixture (§5.1); (b) and (c) "
        f"the histograms of the draws of SGLD and cSGLD from {chains} of {N_STEPS:,} iterations "
        f"({_schedules(s)}; exact gradients plus $\\mathcal{{N}}(0, I)$ noise). Each panel has its own colour "
        f"bar on a power scale ($\\gamma = 0.4$) that keeps faint modes visible; crosses mark the initial points "
        f"that lie inside the frame. A panel title counts the modes covered by Table 4's metric (more than "
        f"{THRESHOLD} draws within $r = {RADIUS:g}$ of a centre); compare it with the 25 modes of panel (a)."
    )


@styled
def draw(dc: DensityComparison, figure_number: int):
    """Target density, SGLD and cSGLD side by side, as in the paper's Figures 2 and 5."""
    fig = new_figure(figsize=(12, 4.6))
    axes = fig.subplots(1, 3)
    lo, hi = dc.edges[0], dc.edges[-1]
    chains = f"{dc.n_chains} chains" if dc.n_chains > 1 else "1 chain"
    panels = [("(a) target density", dc.target_density, None)]
    for key, letter in (("sgld", "b"), ("csgld", "c")):
        run = dc.runs[key]
        title = f"({letter}) {LABELS[key]}, {chains}: {run.coverage}/25 covered"
        panels.append((title, run.histogram, run))
    for ax, (title, image, run) in zip(axes, panels, strict=True):
        im = ax.imshow(
            image.T, origin="lower", extent=(lo, hi, lo, hi), norm=density_norm(image.max()), interpolation="nearest"
        )
        density_colorbar(fig, im, ax)
        if run is not None:
            inside = np.all((run.init > lo) & (run.init < hi), axis=1)
            ax.scatter(
                *run.init[inside].T,
                marker="x",
                s=40,
                c=COLOURS["vermillion"],
                lw=1.5,
                label="initial points inside the frame",
            )
        ax.set_title(title)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        ax.set_xticks(np.arange(-6, 7, 2))
        ax.set_yticks(np.arange(-6, 7, 2))
        ax.set_xlabel(r"$\theta_1$")
        ax.set_ylabel(r"$\theta_2$")
    legend_below(fig, *axes[1].get_legend_handles_labels())
    s = dc.setting
    fig.suptitle(
        f"[cSG] Figure {figure_number}, {s.name} setting: {dc.n_steps:,} iterations × {chains}\n"
        f"cSGLD: {s.describe_csgld()}\nSGLD: {s.describe_sgld()}; {s.describe_noise()}"
    )
    return fig


def _ours(run: MethodRun) -> str:
    return f"{run.coverage} covered, {run.visited} visited"


def _note(dc: DensityComparison, key: str) -> str:
    run = dc.runs[key]
    mean, _ = dc.oracle[key]
    return (
        f"{run.n_draws:,} pooled draws; {run.n_draws:,} exact iid draws would cover {mean:.1f}; "
        f"{run.outside:.1%} of the draws outside the frame"
    )


def rows(dc: DensityComparison, paper: dict) -> list[tuple]:
    """Report rows for one setting: ``paper`` maps method -> the caption's claim."""
    chains = f"{dc.n_chains} chains" if dc.n_chains > 1 else "1 chain"
    return [
        (f"{LABELS[k]} modes found, {chains}, {dc.setting.name} setting", paper[k], _ours(dc.runs[k]), _note(dc, k))
        for k in ("sgld", "csgld")
    ]


def preamble(dc_list: list[DensityComparison]) -> str:
    """Text before the table: settings, metric words, seeds."""
    lines = [
        f"Run 0 of Table 4's runs with {dc_list[0].n_chains} chain(s) per method, "
        f"{dc_list[0].n_steps:,} iterations per chain. Colour: density estimate from a "
        f"{dc_list[0].edges.size - 1}^2 histogram on [{dc_list[0].edges[0]:g}, {dc_list[0].edges[-1]:g}]^2 "
        "(power scale, gamma 0.4); crosses: initial points inside the frame (they are drawn from "
        "U([-10, 10]^2)). 'Covered' is Table 4's metric (more than "
        f"{dc_list[0].threshold} draws within r = {dc_list[0].radius:g} of a centre); 'visited' counts modes "
        "with at least one draw within r. The paper counts 'discovered' modes by eye.",
        "",
    ]
    for dc in dc_list:
        s = dc.setting
        lines.append(
            f"- **{s.name}** setting (seed {dc.run_seed}): cSGLD {s.describe_csgld()}; SGLD {s.describe_sgld()}; "
            f"{s.describe_noise()}. {s.provenance[0].upper()}{s.provenance[1:]}."
        )
    return "\n".join(lines)


def table(dc_list: list[DensityComparison], paper: dict) -> str:
    """The section's table over settings."""
    out = []
    for dc in dc_list:
        out += rows(dc, paper)
    return md_table(out)
