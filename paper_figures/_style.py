"""The look of every report figure, and the checker of its rules.

One set of matplotlib settings (:data:`RC`: font sizes, mathtext, constrained layout, resolution,
a colour cycle that colour-blind readers can tell apart) that each script's ``draw`` functions
apply with :func:`styled` and that ``_common.save`` applies when it writes a PNG.

:func:`check_figure` states the rules a figure must follow and returns what breaks them; ``save``
refuses a figure that breaks one, so every PNG of ``sgsim reproduce`` follows them:

- every axes has an x label, a y label and a title (panel label);
- every label given to a line, marker or band appears in a legend, and every reference line
  (``axhline``, ``axvline``) is explained by a legend entry of its colour and line style;
- an axes with lines or markers of several styles has a legend (its own or the figure's);
- every image or colour-mapped collection has a labelled colour bar (or shares the norm of one
  that has), and a colour bar whose label says "density" sits on a power norm of exponent
  :data:`DENSITY_GAMMA` that the label states;
- no two drawn texts overlap, and no text leaves the figure;
- the figure uses constrained layout (that is, it was drawn under :func:`paper_style`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import combinations
from typing import Any

from cycler import cycler

__all__ = [
    "COLOURS",
    "DENSITY_GAMMA",
    "RC",
    "check_figure",
    "density_colorbar",
    "density_label",
    "density_norm",
    "legend_below",
    "paper_style",
    "styled",
]

#: The Okabe-Ito palette (Okabe and Ito, "Color Universal Design", 2008), distinguishable with
#: the common forms of colour blindness; ``grey`` is for reference lines and guides.
COLOURS = {
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "green": "#009E73",
    "orange": "#E69F00",
    "purple": "#CC79A7",
    "sky": "#56B4E9",
    "yellow": "#F0E442",
    "black": "#000000",
    "grey": "#7F7F7F",
}

#: Exponent of the power norm of every density image: faint modes stay visible beside heavily
#: sampled ones.
DENSITY_GAMMA = 0.4

#: The shared matplotlib settings.
RC: dict[str, Any] = {
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.05,
    "figure.constrained_layout.use": True,
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 8.5,
    "legend.frameon": False,
    "figure.titlesize": 11,
    "mathtext.fontset": "dejavusans",
    "image.cmap": "viridis",
    "lines.linewidth": 1.4,
    "lines.markersize": 6,
    # the palette, in an order where neighbours contrast
    "axes.prop_cycle": cycler(
        color=[COLOURS[c] for c in ("blue", "vermillion", "green", "orange", "purple", "sky", "black", "yellow")]
    ),
}


@contextmanager
def paper_style() -> Iterator[None]:
    """Apply :data:`RC` for the duration of the block (drawing and saving a figure)."""
    import matplotlib

    with matplotlib.rc_context(RC):
        yield


def styled(draw: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a ``draw`` function so that it builds its figure under :func:`paper_style`."""

    @functools.wraps(draw)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with paper_style():
            return draw(*args, **kwargs)

    return wrapper


def density_norm(vmax: float):
    """The colour norm of a density image: a power norm of exponent :data:`DENSITY_GAMMA` from 0."""
    from matplotlib.colors import PowerNorm

    return PowerNorm(gamma=DENSITY_GAMMA, vmin=0.0, vmax=max(float(vmax), 1e-12))


def density_label(what: str) -> str:
    """Colour bar label of a density image, stating the power scale."""
    return f"{what} (power scale, $\\gamma = {DENSITY_GAMMA:g}$)"


def density_colorbar(fig, mappable, ax, what: str = "density"):
    """A colour bar for a density image drawn with :func:`density_norm`, labelled by :func:`density_label`."""
    from matplotlib.ticker import MaxNLocator

    bar = fig.colorbar(mappable, ax=ax, shrink=0.85, label=density_label(what))
    bar.locator = MaxNLocator(5)
    return bar


def legend_below(fig, handles=None, labels=None, ncol: int = 3):
    """One legend for the whole figure, centred below its axes (constrained layout makes room)."""
    if handles is None:
        handles, labels = fig.axes[0].get_legend_handles_labels()
    return fig.legend(handles, labels, loc="outside lower center", ncol=ncol)


# --------------------------------------------------------------------------- the rules


def _is_colorbar(ax) -> bool:
    return getattr(ax, "_colorbar", None) is not None


def _needs_colorbar(artist) -> bool:
    from matplotlib.collections import Collection
    from matplotlib.contour import ContourSet
    from matplotlib.image import AxesImage

    if isinstance(artist, AxesImage):
        return True
    if isinstance(artist, ContourSet):
        return artist.colors is None  # contour lines of one fixed colour are outlines
    return isinstance(artist, Collection) and artist.get_array() is not None


def _style_key(artist) -> tuple:
    from matplotlib.colors import to_rgba

    return (to_rgba(artist.get_color()), artist.get_linestyle(), str(artist.get_marker()))


def _explained(line, handles) -> bool:
    from matplotlib.colors import same_color
    from matplotlib.lines import Line2D

    return any(
        isinstance(h, Line2D)
        and same_color(h.get_color(), line.get_color())
        and h.get_linestyle() == line.get_linestyle()
        for h in handles
    )


def _drawn_texts(fig) -> tuple[list, Any]:
    """Draw ``fig`` once; return the texts the renderer actually drew (non-empty), and the renderer."""
    renderer = fig.canvas.get_renderer()
    drawn: dict[int, Any] = {}
    original = renderer.draw_text

    def record(gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if mtext is not None and s.strip():
            drawn[id(mtext)] = mtext
        return original(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    renderer.draw_text = record
    try:
        fig.draw(renderer)
    finally:
        del renderer.draw_text
    return list(drawn.values()), renderer


def _axes_name(i: int, ax) -> str:
    title = ax.get_title() or ax.get_title("left") or ax.get_title("right")
    return f"axes {i}" + (f" ({title[:40]!r})" if title else "")


def check_figure(fig) -> list[str]:
    """The rules of the module docstring that ``fig`` breaks, one line each (empty: it follows them).

    Draws the figure (constrained layout runs during the draw).
    """
    from matplotlib.colors import PowerNorm
    from matplotlib.layout_engine import ConstrainedLayoutEngine
    from matplotlib.lines import Line2D

    problems = []
    if not isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine):
        problems.append("the figure does not use constrained layout (draw it under paper_style())")
    texts, renderer = _drawn_texts(fig)

    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    legend_texts = {t.get_text() for lg in legends for t in lg.get_texts()}
    handles = [h for lg in legends for h in lg.legend_handles if h is not None]
    for lg in legends:
        if any(not t.get_text().strip() for t in lg.get_texts()):
            problems.append("a legend entry has no text")

    plots = [ax for ax in fig.axes if ax.get_visible() and not _is_colorbar(ax)]
    mappables = []
    for i, ax in enumerate(plots):
        name = _axes_name(i, ax)
        if not ax.get_xlabel().strip():
            problems.append(f"{name}: no x label")
        if not ax.get_ylabel().strip():
            problems.append(f"{name}: no y label")
        if not any(ax.get_title(loc).strip() for loc in ("left", "center", "right")):
            problems.append(f"{name}: no title or panel label")
        for label in ax.get_legend_handles_labels()[1]:
            if label not in legend_texts:
                problems.append(f"{name}: {label!r} is labelled but in no legend")
        reference = (ax.get_xaxis_transform(), ax.get_yaxis_transform())
        for line in ax.lines:
            if line.get_visible() and line.get_transform() in reference and not _explained(line, handles):
                problems.append(
                    f"{name}: a reference line ({line.get_color()}, {line.get_linestyle()!r}) is in no legend"
                )
        styles = {_style_key(line) for line in ax.lines if line.get_visible() and isinstance(line, Line2D)}
        if len(styles) > 1 and not legends:
            problems.append(f"{name}: lines of {len(styles)} styles and no legend")
        mappables += [(name, a) for a in list(ax.images) + list(ax.collections) if _needs_colorbar(a)]

    with_bar = [a for _, a in mappables if a.colorbar is not None]
    for name, artist in mappables:
        bar = artist.colorbar or next((b.colorbar for b in with_bar if b.norm is artist.norm), None)
        if bar is None:
            problems.append(f"{name}: a {type(artist).__name__} without a colour bar")
            continue
        label = bar.ax.get_ylabel() or bar.ax.get_xlabel()
        if not label.strip():
            problems.append(f"{name}: its colour bar has no label")
        elif "density" in label.lower():
            norm = artist.norm
            if not (isinstance(norm, PowerNorm) and norm.gamma == DENSITY_GAMMA and f"{DENSITY_GAMMA:g}" in label):
                problems.append(f"{name}: a density image must use and state a power norm of gamma {DENSITY_GAMMA:g}")

    box = fig.bbox
    extents = [(t, t.get_window_extent(renderer)) for t in texts]
    for t, e in extents:
        if e.x0 < box.x0 - 1 or e.y0 < box.y0 - 1 or e.x1 > box.x1 + 1 or e.y1 > box.y1 + 1:
            problems.append(f"text {t.get_text()[:40]!r} leaves the figure")
    for (a, ea), (b, eb) in combinations(extents, 2):
        w = min(ea.x1, eb.x1) - max(ea.x0, eb.x0)
        h = min(ea.y1, eb.y1) - max(ea.y0, eb.y0)
        if w > 1 and h > 1:
            problems.append(f"texts {a.get_text()[:40]!r} and {b.get_text()[:40]!r} overlap")
    return problems
