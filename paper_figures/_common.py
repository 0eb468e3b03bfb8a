"""What the figure scripts share: the report section, the budgets, Markdown and plotting helpers."""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sgsim.experiments.cyclical_synthetic import N_RUNS, N_STEPS

from ._style import check_figure, paper_style

__all__ = [
    "DEFAULT_SEED",
    "Section",
    "Budget",
    "budget",
    "describe_mode",
    "md_table",
    "missing_extra",
    "plain_refs",
    "new_figure",
    "save",
    "script_main",
]

#: Seed of ``sgsim reproduce`` unless ``--seed`` is given (fixed once; never tuned).
DEFAULT_SEED = 2020

TABLE_HEADER = ("quantity", "paper value", "ours", "note")


@dataclass
class Section:
    """A finished figure or table, as it enters the report.

    Attributes
    ----------
    name, title : str
        The registry name and the section title.
    markdown : str
        The body: text and a ``quantity | paper value | ours | note`` table. MyST references
        that it takes from the experiments' descriptions are written as plain labels
        (:func:`plain_refs`), because the report is read outside the documentation too.
    figures : list of str
        PNG file names, relative to the output directory.
    captions : dict of str to str
        A caption for each file of ``figures``: what is drawn, its settings and how to read it,
        in two to four sentences of Markdown (``$...$`` for mathematics). The documentation's
        gallery shows each figure with its caption and refuses a figure without one, so a
        section refuses it too (ValueError); keys of other files are dropped, so that a script
        can pass its whole static ``CAPTIONS``.
    elapsed_s : float
        Wall time of the script, compilation included.
    """

    name: str
    title: str
    markdown: str
    figures: list[str] = field(default_factory=list)
    captions: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0

    def __post_init__(self) -> None:
        missing = [f for f in self.figures if not self.captions.get(f, "").strip()]
        if missing:
            raise ValueError(f"section {self.name}: figures without a caption: {', '.join(missing)}")
        self.captions = {f: self.captions[f] for f in self.figures}
        self.markdown = plain_refs(self.markdown)


@dataclass(frozen=True)
class Budget:
    """Iterations per chain and independent runs per Table 4 row; runs per Table 1 cell."""

    n_steps: int
    n_runs: int
    ess_runs: int


#: The papers' budgets: 50k iterations per chain, 10 runs per row ([cSG] §5.1, Table 4); Table 1
#: does not say how many runs it averaged, 20 are used.
FULL = Budget(n_steps=N_STEPS, n_runs=N_RUNS, ess_runs=20)
#: Quick mode keeps 50k iterations, because the mode-coverage threshold (100 draws in a ball)
#: means something only at the paper's run length, and cuts the runs per row.
QUICK = Budget(n_steps=N_STEPS, n_runs=5, ess_runs=4)


def budget(full: bool) -> Budget:
    """The budget of full or quick mode."""
    return FULL if full else QUICK


def describe_mode(full: bool) -> str:
    """One line describing the mode and its budget."""
    b = budget(full)
    name = "full" if full else "quick"
    runs = f"Table 4: {b.n_runs} runs per row; Table 1: {b.ess_runs} runs per cell"
    return f"{name} ({b.n_steps:,} iterations per chain; {runs})"


def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


_REF = re.compile(r"\{ref\}`(?:[^`<]*<)?([\w-]+)>?`")


def plain_refs(text: str) -> str:
    """``text`` with each MyST ``ref`` role written as its label in backquotes and "(documentation)"."""
    return _REF.sub(r"`\1` (documentation)", text)


def missing_extra(name: str, title: str, module: str = "torch", extra: str = "torch") -> Section | None:
    """The section of an entry whose optional dependency ``module`` is not installed, else None.

    The section is a note naming the extra to install, with no figure, so that ``sgsim
    reproduce`` goes on with the other entries (its main job installs no extra).
    """
    if importlib.util.find_spec(module) is not None:
        return None
    return Section(
        name,
        title,
        f"**Skipped**: this experiment needs `{module}`, an optional dependency, which is not installed. "
        f'Install it with `pip install "sgsim[{extra}]"` and run `sgsim reproduce --only {name}` again.',
    )


def md_table(rows: Sequence[Sequence], header: Sequence[str] = TABLE_HEADER) -> str:
    """A Markdown table; ``|`` in cells is escaped."""
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def new_figure(*args, **kwargs):
    """A matplotlib figure drawn by the Agg canvas, outside pyplot's global state.

    Call it inside a ``draw`` function decorated with ``_style.styled``, so that the figure
    takes the shared settings (constrained layout among them).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(*args, **kwargs)
    FigureCanvasAgg(fig)
    return fig


def save(fig, out_dir: Path, name: str) -> str:
    """Write ``fig`` to ``out_dir/name`` atomically, in the shared style; return ``name``.

    Raises
    ------
    ValueError
        When the figure breaks a rule of ``_style.check_figure`` (nothing is written).
    """
    from sgsim.io import atomic_savefig

    with paper_style():
        problems = check_figure(fig)
        if problems:
            raise ValueError(f"figure {name} breaks the figure style rules:\n- " + "\n- ".join(problems))
        atomic_savefig(fig, Path(out_dir) / name)
    return name


def script_main(run: Callable[..., Section], argv: Sequence[str] | None = None) -> int:
    """Command line of one figure script: ``python -m sgsim._paper_figures.NAME --out DIR [--full]``.

    Writes the figures and ``DIR/NAME.md`` (atomically) and prints the Markdown.
    """
    from sgsim.io import atomic_write_text

    parser = argparse.ArgumentParser(description=(run.__doc__ or "").strip().splitlines()[0])
    parser.add_argument("--out", default="sgsim-output", help="output directory (default: %(default)s)")
    parser.add_argument("--full", action="store_true", help="the paper's budget (default: quick)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="experiment seed (default: %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    if args.seed < 0:
        parser.error(f"argument --seed: must be >= 0, got {args.seed}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    section = run(out, full=args.full, progress=not args.quiet, seed=args.seed)
    section.elapsed_s = time.perf_counter() - t0
    text = (
        f"# {section.title}\n\nMode: {describe_mode(args.full)}; seed {args.seed}; "
        f"{section.elapsed_s:.1f} s.\n\n{section.markdown}\n"
    )
    atomic_write_text(out / f"{section.name}.md", text)
    sys.stdout.write(text)
    return 0
