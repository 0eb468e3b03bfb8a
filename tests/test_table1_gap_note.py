"""The note beside [cSG] Table 1's ESS (paper_figures/cyclical_table1_ess.py): generated from the run's numbers."""

from dataclasses import replace

import numpy as np
import pytest

from sgsim.experiments import cyclical_logistic as cl


def _table(n_steps, means, n_runs=4):
    rows = {}
    for (dataset, method), mean in zip([("heart", "sgld"), ("german", "csgld")], means, strict=True):
        rows[(dataset, method)] = cl.ESSResult(
            dataset=dataset, method=method, label=method, step_size=0.01, n_steps=n_steps, burn_in=1000,
            n_draws=5000, median_ess=np.full(n_runs, mean), mean=mean, sd=0.0, se=0.0,
            sd_ratio=np.ones(n_runs), mean_error=np.zeros(n_runs), elapsed_s=0.0,
        )  # fmt: skip
    datasets = {
        name: cl.DatasetSummary(
            name=name,
            title=name,
            n_examples=100,
            dim=2,
            paper_covariates=None,
            note="",
            hessian_eigenvalues=np.array([1.0, 2.0]),
            noise_eigenvalues=np.array([1.0, 2.0]),
        )  # fmt: skip
        for name, _ in rows
    }
    return cl.ESSTable(settings=cl.DEFAULT, n_runs=n_runs, seed=0, datasets=datasets, rows=rows)


def test_gap_note_reads_the_runs_numbers():
    from paper_figures import cyclical_table1_ess as fig
    from paper_figures import get_entry

    note = fig.gap_note(_table(6000, [50.0, 10.0]))
    # paper: heart sgld 2199, german csgld 978; ours 50 and 10: ratios 44 and 98
    assert "quick mode: 4 runs per cell, 20 in full mode" in note
    assert "each run takes 6,000 iterations, the paper's 6,000" in note and "not the run length" in note
    assert "10-50 of 5,000 draws" in note and "978-2199" in note and "44 to 98 times" in note
    assert "100-500 iterations here and 2.3-5.1 in the paper" in note
    assert f"'{get_entry('cyclical_table1_frontier').title}'" in note
    # negative control: runs shorter than the paper's change the note; it is not typed
    short = fig.gap_note(_table(600, [50.0, 10.0]))
    assert "not the run length" not in short and "10.0 times more" in short
    assert fig.gap_note(replace(_table(6000, [50.0, 10.0]), n_runs=20)).startswith(
        "**These ESS against the paper's** (full mode"
    )


def test_gap_note_is_in_the_report():
    from paper_figures import cyclical_table1_ess as fig

    table = _table(6000, [50.0, 10.0])
    text = fig.report(table, table, "t.png")
    assert fig.gap_note(table) in text
    assert text.index("These ESS against the paper's") < text.index("| quantity | paper value | ours | note |")


@pytest.mark.parametrize("bad", [{}])
def test_gap_note_of_an_empty_table_is_empty(bad):
    from paper_figures import cyclical_table1_ess as fig

    assert fig.gap_note(cl.ESSTable(settings=cl.DEFAULT, n_runs=1, seed=0, rows=bad)) == ""
