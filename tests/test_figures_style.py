"""The figure scripts' style rules and captions, checked without running their experiments.

``check_figure`` (``paper_figures/_style.py``) states the rules, and ``save`` refuses a figure
that breaks one, so every run of a script checks its own figures; here the rules are checked on
the cheapest real figure (Figure 1, deterministic) and each rule on a figure that breaks it
(negative controls). Captions are static (``CAPTIONS`` of each script), so that every file a
script can write is seen to have one without running it; a ``Section`` refuses a figure
without a caption at run time.
"""

from __future__ import annotations

import importlib
import re

import numpy as np
import pytest

from sgsim.cli import _paper_figures
from sgsim.experiments.cyclical_synthetic import N_STEPS, schedule_curves

paper_figures = _paper_figures()
PACKAGE = paper_figures.__name__
style = importlib.import_module(f"{PACKAGE}._style")
common = importlib.import_module(f"{PACKAGE}._common")
fig1 = importlib.import_module(f"{PACKAGE}.cyclical_fig1_schedules")


def _module(name: str):
    return importlib.import_module(f"{PACKAGE}.{name}")


# ----------------------------------------------------------------------------- a real figure


def test_the_schedule_figure_follows_every_rule(tmp_path):
    fig = fig1.draw(schedule_curves("paper", N_STEPS))
    assert style.check_figure(fig) == []
    section = fig1.run(tmp_path, progress=False)
    assert section.figures == [f"{fig1.NAME}.png"]
    assert (tmp_path / section.figures[0]).read_bytes()[:4] == b"\x89PNG"
    assert section.captions == fig1.CAPTIONS


# ----------------------------------------------------------------------------- negative controls


def _labelled(ax, title="panel"):
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_title(title)


def _bare(fig, ax):
    ax.plot([0, 1], [0, 1])


def _line_without_legend(fig, ax):
    _labelled(ax)
    ax.plot([0, 1], [0, 1], label="a line")


def _unexplained_reference(fig, ax):
    _labelled(ax)
    ax.plot([0, 1], [0, 1], label="a line")
    ax.axhline(0.5, color="grey", ls=":")
    ax.legend()


def _styles_without_legend(fig, ax):
    _labelled(ax)
    ax.plot([0, 1], [0, 1], color="C0")
    ax.plot([0, 1], [1, 0], color="C1", ls="--")


def _image_without_bar(fig, ax):
    _labelled(ax)
    ax.imshow(np.eye(3))


def _bar_without_label(fig, ax):
    _labelled(ax)
    fig.colorbar(ax.imshow(np.eye(3)), ax=ax)


def _linear_density(fig, ax):
    _labelled(ax)
    fig.colorbar(ax.imshow(np.eye(3)), ax=ax, label="density")


def _overlapping_texts(fig, ax):
    _labelled(ax)
    ax.text(0.5, 0.5, "first text")
    ax.text(0.5, 0.5, "second text")


def _text_outside(fig, ax):
    _labelled(ax)
    fig.text(1.5, 0.5, "far away")


BROKEN = {
    "no labels": (_bare, ["no x label", "no y label", "no title"]),
    "labelled line, no legend": (_line_without_legend, ["'a line' is labelled but in no legend"]),
    "reference line not in the legend": (_unexplained_reference, ["a reference line"]),
    "several styles, no legend": (_styles_without_legend, ["lines of 2 styles and no legend"]),
    "image without colour bar": (_image_without_bar, ["without a colour bar"]),
    "colour bar without label": (_bar_without_label, ["colour bar has no label"]),
    "density on a linear scale": (_linear_density, ["power norm"]),
    "overlapping texts": (_overlapping_texts, ["'first text' and 'second text' overlap"]),
    "text outside the figure": (_text_outside, ["'far away' leaves the figure"]),
}


def _figure(build, styled: bool = True):
    def make():
        fig = common.new_figure(figsize=(4, 3))
        build(fig, fig.subplots())
        return fig

    return style.styled(make)() if styled else make()


@pytest.mark.parametrize("case", BROKEN)
def test_each_rule_rejects_a_figure_that_breaks_it(case):
    build, expected = BROKEN[case]
    problems = style.check_figure(_figure(build))
    for text in expected:
        assert any(text in p for p in problems), (text, problems)


def test_the_repaired_figures_pass():
    def legend(fig, ax):
        _labelled(ax)
        ax.plot([0, 1], [0, 1], label="a line")
        ax.axhline(0.5, color="grey", ls=":", label="a reference")
        ax.legend()

    def density(fig, ax):
        _labelled(ax)
        im = ax.imshow(np.eye(3), norm=style.density_norm(1.0))
        style.density_colorbar(fig, im, ax)

    def shared_norm(fig, ax):
        ax.remove()
        left, right = fig.subplots(1, 2)
        _labelled(left, "left")
        _labelled(right, "right")
        norm = style.density_norm(1.0)  # one norm, one colour bar for both images
        left.imshow(np.eye(3), norm=norm)
        fig.colorbar(right.imshow(np.eye(3), norm=norm), ax=right, label=style.density_label("density"))

    for build in (legend, density, shared_norm):
        assert style.check_figure(_figure(build)) == [], build.__name__


def test_a_figure_drawn_outside_the_style_is_rejected():
    problems = style.check_figure(_figure(lambda fig, ax: _labelled(ax), styled=False))
    assert "the figure does not use constrained layout (draw it under paper_style())" in problems


def test_save_refuses_a_broken_figure(tmp_path):
    with pytest.raises(ValueError, match="breaks the figure style rules"):
        common.save(_figure(_bare), tmp_path, "broken.png")
    assert not (tmp_path / "broken.png").exists()


# ----------------------------------------------------------------------------- every script, statically


ENTRIES = {entry.name: entry for entry in paper_figures.FIGURES}
SENTENCE_END = re.compile(r"[.!?](?=\s+[A-Z(]|\s*$)")


@pytest.mark.parametrize("name", ENTRIES)
def test_every_file_a_script_writes_has_a_caption(name):
    mod = _module(name)
    assert mod.NAME == name and mod.TITLE == ENTRIES[name].title
    assert mod.CAPTIONS
    for file, caption in mod.CAPTIONS.items():
        assert re.fullmatch(rf"{name}(_\w+)?\.png", file), file
        assert 2 <= len(SENTENCE_END.findall(caption)) <= 4, (file, caption)
        assert caption.count("$") % 2 == 0, file  # Markdown mathematics is closed
        assert not re.search(r"\{ref\}|erratum H\d", caption), file  # plain text: no roles, no private codes


@pytest.mark.parametrize("name", ENTRIES)
def test_every_draw_function_applies_the_shared_style(name):
    mod = _module(name)
    draws = [f for n, f in vars(mod).items() if n.startswith("draw") and callable(f)]
    if not draws:  # Figures 2 and 5 draw with the shared density figure
        draws = [mod._density.draw]
    assert all(getattr(f, "__wrapped__", None) is not None for f in draws), name


def test_a_section_refuses_a_figure_without_a_caption():
    with pytest.raises(ValueError, match="figures without a caption: x.png"):
        paper_figures.Section("x", "X", "", ["x.png"])
    section = paper_figures.Section("x", "X", "", ["x.png"], {"x.png": "A figure. Read it.", "y.png": "Other."})
    assert section.captions == {"x.png": "A figure. Read it."}


def test_a_section_writes_references_as_plain_labels():
    # the report is read outside the documentation too, where a MyST role would show raw
    section = paper_figures.Section("x", "X", "corrected as in {ref}`theory-sgld`.")
    assert section.markdown == "corrected as in `theory-sgld` (documentation)."


def test_section_titles_are_distinct_in_the_progress_lines():
    # `sgsim reproduce` prints "[i/n] TITLE: seconds"; the part before the colon names the figure
    titles = [e.title for e in paper_figures.FIGURES]
    heads = [t.split(":")[0] for t in titles]
    assert len(set(heads)) == len(heads), heads
