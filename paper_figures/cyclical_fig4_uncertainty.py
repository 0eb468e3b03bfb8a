"""Figure 4 of [cSG] ("Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning", §5.4).

The empirical CDF of the predictive entropy, on images out of distribution (OOD), of a
three-layer MLP trained on MNIST digits by SGD, SGDM, Snapshot-SGD, Snapshot-SGDM, SGLD, SGHMC,
cSGLD and cSGHMC. The paper finds that cSGLD and cSGHMC put the least probability on
low-entropy (over-confident) OOD predictions. The experiment, its settings and its seeds are
stated in :mod:`sgsim.torch.experiments.uncertainty`; it needs PyTorch (the ``torch`` extra), and without
it this section is reported as skipped rather than failed.

The data differ from the paper's: 4,000 of the 5,000 shipped MNIST digits for training (the
paper: MNIST's 60,000) and, for OOD, Fashion-MNIST when Debian's files are installed, else
the letters A-J rendered in matplotlib's fonts, a re-creation of the paper's notMNIST.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from . import get_entry
from ._common import DEFAULT_SEED, Section, md_table, missing_extra, new_figure, save, script_main
from ._style import COLOURS, legend_below, styled

NAME = "cyclical_fig4_uncertainty"
TITLE = get_entry(NAME).title
#: Epochs per method in quick and full mode, and the MLP (the experiment's QUICK and FULL
#: configurations; a test checks that these match them).
EPOCHS = {False: 20, True: 200}
ARCHITECTURE = "784-100-100-10"
#: The entropy (nats) below which an OOD prediction counts as over-confident in the report.
LOW_ENTROPY = 0.5
MAX_ENTROPY = math.log(10)
#: Colour by family, line style by order: first-order methods solid, momentum methods dashed.
FAMILY_COLOURS = {
    "sgd": COLOURS["blue"],
    "snapshot": COLOURS["green"],
    "sgld": COLOURS["purple"],
    "csgld": COLOURS["vermillion"],
}
CAPTIONS = {
    f"{NAME}.png": (
        "(a) Empirical CDF of the predictive entropy $H$ (nats) of the model average of each method on the "
        "out-of-distribution images (the letters A-J re-created from matplotlib's fonts in place of notMNIST, or "
        f"Fashion-MNIST when installed), for a {ARCHITECTURE} MLP trained on 4,000 MNIST digits for "
        f"{EPOCHS[False]} epochs per method in quick mode and {EPOCHS[True]} in full mode. Colour gives the "
        "family (SGD, Snapshot, SG-MCMC, cyclical SG-MCMC) and a dashed line the momentum variant; a curve lower "
        f"and further right means fewer over-confident predictions, and the dotted line marks $\\log 10$, the "
        "entropy of a uniform prediction. (b) The test error of each model average on 1,000 held-out MNIST "
        "digits, with its negative log-likelihood (NLL, nats per image)."
    )
}


def _family(key: str) -> str:
    if key.startswith("snapshot"):
        return "snapshot"
    return {"sgd": "sgd", "sgdm": "sgd", "sgld": "sgld", "sghmc": "sgld", "csgld": "csgld", "csghmc": "csgld"}[key]


def _momentum(method: Any) -> bool:
    return method.sampler == "sghmc"


def ood_name(ood: str, short: bool = False) -> str:
    """The OOD set in words."""
    if ood == "letters":
        if short:
            return "letters A-J (notMNIST re-created)"
        return "letters A-J rendered in matplotlib's fonts (a re-creation of notMNIST, not notMNIST itself)"
    return "Fashion-MNIST images" if short else "Fashion-MNIST test images"


@styled
def draw(res: Any):
    """(a) the CDF of the OOD entropy per method; (b) the test error per method."""
    fig = new_figure(figsize=(11, 4.8))
    ax, bx = fig.subplots(1, 2, width_ratios=[1.6, 1])
    from sgsim.torch.experiments.uncertainty import empirical_cdf

    for key, r in res.methods.items():
        m = r.method
        # the exact step function: it jumps at each entropy, drawn from 0 to log 10
        grid = np.concatenate([[0.0], np.sort(r.ood_entropy), [MAX_ENTROPY]])
        models = f"{r.n_samples} model{'s' * (r.n_samples > 1)}"
        ax.step(grid, empirical_cdf(r.ood_entropy, grid), where="post", color=FAMILY_COLOURS[_family(key)],
                ls="--" if _momentum(m) else "-", label=f"{m.label} ({models})")  # fmt: skip
    ax.axvline(MAX_ENTROPY, color=COLOURS["grey"], ls=":", lw=1.0, label=r"$\log 10$: uniform prediction")
    ax.axvline(
        LOW_ENTROPY,
        color=COLOURS["black"],
        ls="-.",
        lw=0.8,
        label=f"$H$ = {LOW_ENTROPY:g} nats: threshold of the report",
    )
    ax.set_xlim(0, MAX_ENTROPY * 1.04)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("predictive entropy $H$ (nats)")
    ax.set_ylabel(r"fraction of OOD images with entropy $\leq H$")
    n_ood = len(next(iter(res.methods.values())).ood_entropy)
    ax.set_title(f"(a) out of distribution: {n_ood:,} {ood_name(res.ood, short=True)}")

    keys = list(res.methods)
    y = np.arange(len(keys))[::-1]
    errors = np.array([100 * res.methods[k].test_error for k in keys])
    for yi, key, err in zip(y, keys, errors, strict=True):
        r = res.methods[key]
        bx.barh(yi, err, color=FAMILY_COLOURS[_family(key)], hatch="//" if _momentum(r.method) else None,
                edgecolor="white", height=0.7)  # fmt: skip
        bx.text(err + 0.15, yi, f"{err:.1f}% (NLL {r.test_nll:.2f})", va="center", fontsize=8)
    bx.set_yticks(y)
    bx.set_yticklabels([res.methods[k].method.label for k in keys])
    bx.set_xlim(0, errors.max() * 1.6)
    bx.set_xlabel("MNIST test error of the model average (%)")
    bx.set_ylabel("method")
    bx.set_title(f"(b) in distribution: {res.config.n_test:,} test digits")
    handles, labels = ax.get_legend_handles_labels()
    legend_below(fig, handles, labels, ncol=5)
    fig.suptitle(
        f"[cSG] Figure 4: predictive entropy out of distribution, {ARCHITECTURE} MLP on MNIST "
        f"({res.config.n_epochs} epochs per method)"
    )
    return fig


def _fraction(p: float, n: int) -> str:
    """``p`` with its binomial standard error over ``n`` images."""
    return f"{p:.3f} ± {math.sqrt(p * (1 - p) / n):.3f}"


def _paired(res: Any, a: str, b: str) -> tuple[float, float]:
    """``P_a - P_b`` of ``P(H <= LOW_ENTROPY)`` and its standard error, paired over the same OOD images."""
    d = (res.methods[a].ood_entropy <= LOW_ENTROPY).astype(float) - (res.methods[b].ood_entropy <= LOW_ENTROPY)
    return float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size))


def _verdict(diff: float, se: float) -> str:
    """Whether ``diff < 0`` (the claim's direction) is resolved: beyond 2 SE either way, or not."""
    if diff < -2 * se:
        return "holds"
    if diff > 2 * se:
        return "does not hold"
    return "not resolved"


def _claims(res: Any) -> list[tuple]:
    """Rows comparing the paper's qualitative claims with ours."""
    frac = res.fractions_below(LOW_ENTROPY)
    label = {k: r.method.label for k, r in res.methods.items()}
    ranking = " < ".join(f"{label[k]} {frac[k]:.3f}" for k in sorted(frac, key=frac.__getitem__))
    cyclic = [k for k in ("csgld", "csghmc") if k in frac]
    others = [k for k in frac if k not in cyclic]
    rows = []
    if cyclic and others:
        best = min(others, key=frac.__getitem__)
        worst = max(cyclic, key=frac.__getitem__)
        diff, se = _paired(res, worst, best)
        rows.append((
            f"cSGLD and cSGHMC have the lowest P(H <= {LOW_ENTROPY:g}) on OOD images",
            "yes (Figure 4: 'lower probability for the low entropy estimate')",
            f"{_verdict(diff, se)}: {ranking}",
            f"{label[worst]} minus {label[best]} (the lowest of the others): {diff:+.3f} ± {se:.3f}",
        ))  # fmt: skip
    for a, b, claim in (
        ("csgld", "snapshot_sgd", "§5.4: Snapshot 'achieves less entropy than cSG-MCMC'"),
        ("csghmc", "snapshot_sgdm", "§5.4: Snapshot 'achieves less entropy than cSG-MCMC'"),
        ("sgld", "sgd", "§5.4: SG-MCMC beats its optimisation counterpart"),
        ("sghmc", "sgdm", "§5.4: SG-MCMC beats its optimisation counterpart"),
    ):
        if a in frac and b in frac:
            diff, se = _paired(res, a, b)
            rows.append((
                f"{label[a]} less over-confident than {label[b]}",
                f"yes ({claim})",
                f"{_verdict(diff, se)}: {frac[a]:.3f} vs {frac[b]:.3f}",
                f"difference {diff:+.3f} ± {se:.3f}",
            ))  # fmt: skip
    return rows


def report(res: Any, figure: str, full: bool = False) -> str:
    """The section's Markdown (``full``: the mode it ran in)."""
    cfg = res.config
    n_ood = len(next(iter(res.methods.values())).ood_entropy)
    quick = not full
    metrics = [
        (
            r.method.label,
            r.method.description,
            r.n_samples,
            f"{100 * r.test_error:.1f}",
            f"{r.test_nll:.3f}",
            f"{r.test_entropy.mean():.3f}",
            f"{r.ood_entropy.mean():.3f}",
            _fraction(r.fraction_below(LOW_ENTROPY), n_ood),
            f"{r.fraction_below(1.0):.3f}",
        )
        for r in res.methods.values()
    ]
    header = (
        "method", "schedule and samples", "models averaged", "test error (%)", "test NLL (nats)",
        "mean test entropy (nats)", "mean OOD entropy (nats)", f"P(H <= {LOW_ENTROPY:g}) ± SE", "P(H <= 1)",
    )  # fmt: skip
    lines = [
        f"A {ARCHITECTURE} MLP (two hidden ReLU layers) trained on {cfg.n_train:,} MNIST digits (the paper: "
        f"MNIST's 60,000), tested on {cfg.n_test:,} others, and scored out of distribution (OOD) on {n_ood:,} "
        f"{ood_name(res.ood)}. The paper's notMNIST is not available offline"
        + (", so these letters re-create it: fewer and cleaner fonts than notMNIST's." if res.ood == "letters" else ".")
        + " Each method's samples are averaged with equal weights (Bayesian model averaging), and H is the "
        "entropy of that average, at most log 10 = 2.303 nats.",
        "",
        f"- **Budget ({'quick' if quick else 'full'} mode)**: every method runs {cfg.n_epochs} epochs of "
        f"{cfg.steps_per_epoch} minibatches of {cfg.batch_size} ({cfg.n_steps:,} steps), from the same initial "
        f"weights and through the same minibatches. Full mode runs {EPOCHS[True]} epochs, the paper's budget "
        "for its networks (§5.2, CIFAR: 200 epochs, 4 cycles); the paper states none for the MLP ('until "
        "convergence').",
        f"- **Posterior**: a Gaussian prior of precision {cfg.prior_precision:g} on every weight and bias, "
        f"U = N x mean cross-entropy + {cfg.prior_precision:g}/2 |theta|^2 with N = {cfg.n_train:,} (a weight "
        f"decay of {cfg.prior_precision / cfg.n_train:.2g} on the mean loss; the reference code's networks use "
        f"5e-4), sampled at temperature T = {cfg.temperature:g} on U"
        + (
            " (the Bayesian posterior). The reference code runs its networks at T = 1/N (a cold posterior); "
            "that is the option `temperature=1/N` of the experiment's configuration, not used here."
            if cfg.temperature == 1
            else "."
        ),
        f"- **Steps** (learning rate on the mean loss): {cfg.learning_rate:g} for SGD, Snapshot-SGD, SGLD "
        f"and cSGLD; {cfg.momentum_lr:g} with friction {cfg.friction:g} (momentum {1 - cfg.friction:g}) for "
        "the momentum methods. SGD and SGDM are sgsim's SGLD and SGHMC at T = 0, which is exactly SGD and "
        "heavy-ball SGD. SGD, SGDM, SGLD, SGHMC: decreasing steps a (b + k)^-0.55 (eq. 1), from the "
        f"learning rate at the first step to {cfg.final_fraction:g} of it at the last; SGLD and SGHMC add "
        f"noise only in the last {cfg.sampling_fraction:g} of the steps and keep {cfg.n_samples} samples "
        "there, as the paper runs its SG-MCMC baselines (§5.2). Snapshot and cSG-MCMC: "
        f"{cfg.n_cycles} cosine cycles (eq. 2); Snapshot at T = 0 keeps the end of each cycle; cSGLD and "
        f"cSGHMC explore for beta = {cfg.explore_fraction:g} of each cycle at T = 0 and keep "
        f"{cfg.samples_per_cycle} samples per cycle from the rest.",
        f"- **Seed** {res.seed}: the split, the OOD images, the initial weights, the minibatch order and each "
        f"method's noise come from it; {res.n_threads} PyTorch thread(s).",
        "",
        f"![Figure 4]({figure})",
        "",
        md_table(metrics, header),
        "",
        f"P(H <= h) is the fraction of the {n_ood:,} OOD images whose predictive entropy is at most h nats (the "
        "CDF of panel (a) at h); the mean test entropy is that of the MNIST test digits, where low is right. "
        "A method that is less sure of everything, in distribution too, also has a higher OOD entropy: read the "
        "two together. Below, a claim 'holds' when our difference of P(H <= 0.5) is in the paper's direction by "
        "more than 2 standard errors, 'does not hold' beyond 2 SE the other way, and is 'not resolved' in "
        "between. The SEs (binomial above, paired over the same images below) count only the finite set of OOD "
        "images, not the variation of the training from run to run, which one run per method does not measure.",
        "",
        md_table(_claims(res)),
    ]
    if quick and {"csgld", "snapshot_sgd"} <= set(res.methods):
        diff, se = _paired(res, "csgld", "snapshot_sgd")
        sampling = round((1 - cfg.explore_fraction) * cfg.n_epochs / cfg.n_cycles, 2)
        lines += [
            "",
            f"Quick mode is small: {cfg.n_epochs} epochs, so each cycle of the cyclical methods lasts "
            f"{cfg.n_epochs / cfg.n_cycles:g} epochs and its sampling stage {sampling:g} "
            f"epoch{'s' * (sampling != 1)}, at the small step sizes of "
            "the end of the cosine, where the injected noise (variance 2 alpha T) is small too. cSGLD's samples "
            "then stay near the snapshot that Snapshot-SGD keeps at the end of the same cycle (the two share "
            f"every step before the first sampling stage): here their P(H <= 0.5) differ by {diff:+.3f} ± {se:.3f}. "
            "Full mode (`--full`, about 10 times longer) is the one to judge the claims by.",
        ]
    return "\n".join(lines)


def run(out_dir: Path, full: bool = False, progress: bool = True, seed: int = DEFAULT_SEED) -> Section:
    """Figure 4 of [cSG]: predictive entropy out of distribution of an MLP trained on MNIST."""
    if (note := missing_extra(NAME, TITLE)) is not None:
        return note
    from sgsim.torch.experiments.uncertainty import config, run_uncertainty

    res = run_uncertainty(config(full), seed=seed, progress=progress)
    figure = save(draw(res), out_dir, f"{NAME}.png")
    return Section(NAME, TITLE, report(res, figure, full), [figure], CAPTIONS)


if __name__ == "__main__":
    sys.exit(script_main(run))
