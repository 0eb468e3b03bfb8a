"""The sgsim command: run, reproduce, --version; and one figure script run as a module."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sampler_modules import scaled_sgld

import sgsim
from sgsim.cli import _paper_figures, build_parser, main
from sgsim.integrators import INTERACTING, METHODS
from sgsim.io import read_result

# the figure scripts as the CLI finds them: paper_figures/, installed as sgsim._paper_figures
paper_figures = _paper_figures()
ROOT = Path(__file__).resolve().parents[1]
FIG1 = "cyclical_fig1_schedules"

RUN = [
    "run",
    "--target",
    "mixture_25",
    "--method",
    "csgld",
    "--n-steps",
    "600",
    "--n-chains",
    "2",
    "--seed",
    "5",
    "--step-size",
    "0.05",
    "--n-cycles",
    "3",
    "--explore-fraction",
    "0.25",
    "--quiet",
]


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"sgsim {sgsim.__version__}"


def test_run_writes_result_and_density(tmp_path, capsys):
    assert main([*RUN, "--out", str(tmp_path)]) == 0
    assert (tmp_path / "density.png").read_bytes()[:4] == b"\x89PNG"
    back = read_result(tmp_path / "result.nc")
    direct = sgsim.sample(
        "mixture_25", "csgld", 600, n_chains=2, seed=5, step_size=0.05, n_cycles=3, explore_fraction=0.25
    )
    np.testing.assert_array_equal(back.posterior["theta"].values, direct.posterior["theta"].values)
    assert back.attrs["seed"] == 5
    out = capsys.readouterr().out
    assert "seed 5" in out
    assert "mode coverage (r = 0.25, n-bar = 100)" in out
    assert "moments:" in out
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_run_decreasing_schedule_and_gradient_noise(tmp_path):
    argv = [
        "run",
        "--target",
        "mixture_25",
        "--method",
        "sgld",
        "--n-steps",
        "300",
        "--seed",
        "2",
        "--step-size",
        "0.043",
        "--decay",
        "0.55",
        "--hold",
        "50",
        "--grad-noise",
        "1",
        "--noise-correction",
        "--quiet",
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 0
    config = json.loads(read_result(tmp_path / "result.nc").attrs["sgsim_config"])
    assert config["schedule"]["schedule"] == "polynomial_decay"
    assert config["schedule"]["hold"] == 50
    assert config["grad_noise_cov"] == [[1.0, 0.0], [0.0, 1.0]]
    assert config["options"]["noise_correction"] is True


@pytest.mark.parametrize(
    ("change", "flag"),
    [
        ({"--step-size": "-1"}, "--step-size"),
        ({"--target": "no_such_target"}, "--target"),
        ({"--method": "sgld"}, "--explore-fraction"),  # a cyclical option given to plain SGLD
        ({"--n-cycles": None}, "--n-cycles"),  # csgld without its number of cycles
        ({"--explore-fraction": "1.5"}, "--explore-fraction"),
        ({"--n-chains": "0"}, "--n-chains"),
        ({"--seed": "-3"}, "--seed"),
        ({"--n-steps": "ten"}, "--n-steps"),
    ],
)
def test_bad_arguments_exit_2_and_name_the_flag(tmp_path, capsys, change, flag):
    argv = list(RUN)
    for key, value in change.items():
        i = argv.index(key)
        if value is None:
            del argv[i : i + 2]
        else:
            argv[i + 1] = value
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--out", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err
    assert not (tmp_path / "result.nc").exists()


@pytest.mark.parametrize(
    ("change", "flag"),
    [
        ({"--step-size": "-1"}, "--step-size"),
        ({"--method": "sghmc", "--friction": "2"}, "--friction"),
        ({"--method": "csghmc", "--friction": "0"}, "--friction"),
        ({"--n-cycles": "0"}, "--n-cycles"),
        ({"--n-cycles": "601"}, "--n-cycles"),  # more cycles than steps
        ({"--thin": "0"}, "--thin"),
        ({"--burn-in": "600"}, "--burn-in"),
        ({"--explore-fraction": "1"}, "--explore-fraction"),
        ({"--skip-per-cycle": "-1"}, "--skip-per-cycle"),
        ({"--temperature": "-1"}, "--temperature"),
        ({"--n-chains": "0"}, "--n-chains"),
        ({"--grad-noise": "-1"}, "--grad-noise"),
        ({"--method": "sgld", "--decay": "2"}, "--decay"),
        ({"--method": "sgld", "--decay": "0.55", "--step-size": "0"}, "--step-size"),
    ],
)
def test_bad_values_name_the_flag_of_the_parameter(tmp_path, capsys, change, flag):
    # the flag comes from the error's ``parameter`` attribute, not from its text
    argv = list(RUN)
    if change.get("--method") in ("sghmc", "sgld"):  # methods without cycles
        for key in ("--n-cycles", "--explore-fraction"):
            i = argv.index(key)
            del argv[i : i + 2]
    for key, value in change.items():
        if key in argv:
            argv[argv.index(key) + 1] = value
        else:
            argv += [key, value]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--out", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"sgsim run: error: argument {flag}: "), err
    assert err.count("argument --") == 1, err
    assert not (tmp_path / "result.nc").exists()


def test_error_message_uses_the_parameter_attribute():
    from sgsim._validate import ParameterError, ParameterTypeError
    from sgsim.cli import _flag_message

    # the text names other parameters; only ``parameter`` decides the flag
    assert _flag_message(ParameterError("thin", "step_size and 'n_chains' are fine")) == (
        "argument --thin: step_size and 'n_chains' are fine"
    )
    assert _flag_message(ParameterTypeError("friction", "friction must be a real number")).startswith(
        "argument --friction: "
    )
    # a parameter that no flag sets, and an error without the attribute: the bare message
    assert _flag_message(ParameterError("init", "the particles coincide")) == "the particles coincide"
    assert _flag_message(ValueError("step_size must be > 0")) == "step_size must be > 0"


def test_hold_needs_decay(tmp_path, capsys):
    argv = [
        "run",
        "--target",
        "mixture_25",
        "--method",
        "sgld",
        "--n-steps",
        "10",
        "--step-size",
        "0.01",
        "--hold",
        "5",
        "--out",
        str(tmp_path),
    ]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "--hold" in capsys.readouterr().err


def test_reproduce_figure1_writes_report_with_table(tmp_path):
    assert main(["reproduce", "--only", FIG1, "--out", str(tmp_path), "--quiet"]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "| quantity | paper value | ours | note |" in report
    assert "| mode | quick" in report
    assert f"| sgsim version | {sgsim.__version__} |" in report
    assert f"| seed | {paper_figures.DEFAULT_SEED} |" in report
    assert "complete (1 of 1 sections finished)" in report
    assert "## Figure 1" in report
    assert (tmp_path / f"{FIG1}.png").read_bytes()[:4] == b"\x89PNG"
    assert "](cyclical_fig1_schedules.png)" in report


def test_reproduce_keeps_finished_sections_when_interrupted(tmp_path, monkeypatch):
    class Interrupted:
        name, title = "interrupted_entry", "An entry interrupted by Ctrl-C"

        def run(self, *args, **kwargs):
            raise KeyboardInterrupt

    entries = (paper_figures.get_entry(FIG1), Interrupted())
    monkeypatch.setattr(paper_figures, "FIGURES", entries)
    assert main(["reproduce", "--out", str(tmp_path), "--quiet"]) == 130
    report = (tmp_path / "report.md").read_text()
    assert "interrupted (1 of 2 sections finished)" in report
    assert "| quantity | paper value | ours | note |" in report
    assert "An entry interrupted by Ctrl-C" in report.split("## Not finished")[1]


def test_reproduce_reports_a_failing_section_and_goes_on(tmp_path, monkeypatch):
    class Broken:
        name, title = "broken_entry", "An entry that raises"

        def run(self, *args, **kwargs):
            raise RuntimeError("boom")

    monkeypatch.setattr(paper_figures, "FIGURES", (Broken(), paper_figures.get_entry(FIG1)))
    assert main(["reproduce", "--out", str(tmp_path), "--quiet"]) == 1
    report = (tmp_path / "report.md").read_text()
    assert "failed: broken_entry (2 of 2 sections finished)" in report
    assert "`RuntimeError: boom`" in report
    assert "## Figure 1" in report


def test_reproduce_unknown_entry_and_list(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "--only", "fig99", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "argument --only" in capsys.readouterr().err
    assert main(["reproduce", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(entry.name in listed for entry in paper_figures.FIGURES)


def test_figure_script_runs_as_a_module(tmp_path):
    # -W error: importing the package must not pre-import the script run as __main__. Run outside
    # the checkout, so that the installed sgsim (not the repository root on sys.path) is imported.
    cmd = [sys.executable, "-W", "error", "-m", f"sgsim._paper_figures.{FIG1}", "--out", str(tmp_path), "--quiet"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "| quantity | paper value | ours | note |" in proc.stdout
    assert (tmp_path / f"{FIG1}.md").is_file()
    assert (tmp_path / f"{FIG1}.png").is_file()


def test_paper_figures_is_not_a_top_level_package(tmp_path):
    code = (
        "import importlib.util, sgsim._paper_figures as f; "
        "print(importlib.util.find_spec('paper_figures') is None, f.__name__, len(f.FIGURES))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "sgsim._paper_figures", str(len(paper_figures.FIGURES))]
    assert paper_figures.__name__ == "sgsim._paper_figures"


def test_wheel_lists_every_subpackage():
    # pyproject.toml lists the packages explicitly (a package-dir mapping cannot be discovered)
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "sgsim").rglob("__init__.py")} | {
        "sgsim._paper_figures"
    }
    assert set(config["packages"]) == on_disk
    assert config["package-dir"]["sgsim._paper_figures"] == "paper_figures"


def test_run_writes_a_manifest_last_and_never_leaves_an_old_figure_beside_a_new_result(tmp_path, monkeypatch):
    import json

    from sgsim import cli

    out = tmp_path / "run"
    args = ["run", "--target", "mixture_25", "--method", "sgld", "--n-steps", "300", "--step-size", "0.01",
            "--seed", "1", "--out", str(out), "--quiet"]  # fmt: skip
    assert cli.main(args) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] and set(manifest["files"]) == {"result.nc", "density.png"}

    # a second run into the same folder, killed after its result: the old figure is gone
    def killed(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr("sgsim.io.atomic_savefig", killed)
    assert cli.main([a if a != "1" else "2" for a in args]) == 130  # another seed
    assert (out / "result.nc").exists()
    assert not (out / "density.png").exists() and not (out / "manifest.json").exists()


def test_every_figure_script_is_registered():
    # a script in paper_figures/ that sgsim reproduce does not run is a figure nobody regenerates
    folder = Path(paper_figures.__file__).parent
    scripts = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")}
    assert scripts == {e.name for e in paper_figures.FIGURES}


# --------------------------------------------------------------------------- the methods' options as flags

# a target that says its number of data points N, for the methods on the averaged loss U / N
OU = ["--target", "ou_quadratic", "--target-arg", "hessian=[[1.0, 0.0], [0.0, 2.0]]", "--target-arg",
      "noise_cov=[[1.0, 0.0], [0.0, 1.0]]", "--target-arg", "batch_size=4", "--target-arg", "n_data=10"]  # fmt: skip
# a small linear regression in minibatches, for the methods with a gradient estimator of their own
# (Algorithm.gradient: SGLD-CV, SVRG-LD), which need a data target
DATA = ["--target", "linear_regression", "--target-arg", "X=[[0.5, 1.0], [1.5, -0.3], [-1.0, 0.2], [0.3, 0.8]]",
        "--target-arg", "y=[1.0, 0.5, -0.2, 0.3]", "--target-arg", "batch_size=2"]  # fmt: skip
# options a method cannot run without that its schedule's signature does not mark as required


def flag(option):
    return "--" + option.replace("_", "-")


def test_every_option_of_every_method_has_a_flag():
    # generated from the records: a newly registered method is covered without editing this test
    parser = build_parser()
    base = ["run", "--target", "standard_gaussian", "--n-steps", "10", "--out", "unused"]
    for name in sorted(METHODS):
        method = METHODS[name]
        for option in sorted({*method.schedule_options, *method.algorithm.options}):
            args, unknown = parser.parse_known_args([*base, "--method", name, flag(option), "1"])
            assert unknown == [], f"{name}: option {option!r} has no flag {flag(option)}"
            assert args.method_options == {option: 1}, f"{name}: {flag(option)} sets {args.method_options}"


def run_argv(name, out, needed=True):
    """``sgsim run`` of method ``name`` with the options of its record's ``example``: a tiny run into ``out``.

    ``needed=False`` leaves out the example's own options (those beyond the step size and cycles).
    """
    method = METHODS[name]
    argv = ["run", "--method", name, "--n-steps", "40", "--n-chains", "2", "--seed", "1", "--quiet", "--out", str(out)]
    if "n_data" in method.algorithm.options:
        argv += OU
    else:
        argv += DATA if method.algorithm.gradient is not None else ["--target", "standard_gaussian"]
    argv += ["--step-size", "0.05"]
    if "n_cycles" in method.schedule_options:
        argv += ["--n-cycles", "2"]
    if method.algorithm.coupling == INTERACTING:
        argv += ["--n-particles", "10"]
    if needed:
        for key, value in method.example.items():
            if key not in ("target", "step_size", "n_cycles"):
                argv += [flag(key), repr(value)]
    return argv


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_runs_from_the_shell(tmp_path, capsys, name):
    assert main(run_argv(name, tmp_path)) == 0
    assert (tmp_path / "result.nc").is_file() and (tmp_path / "manifest.json").is_file()
    assert f": {name} on " in capsys.readouterr().out


def test_option_values_reach_sample_as_literals(tmp_path):
    argv = [*run_argv("sgfs", tmp_path), "--preconditioner", "[[2, 0.5], [0.5, 1]]", "--injected-cov", "[0.1, 0.2]"]
    assert main(argv) == 0
    target = sgsim.targets.ou_quadratic([[1.0, 0.0], [0.0, 2.0]], [[1.0, 0.0], [0.0, 1.0]], 4, 10)
    direct = sgsim.sample(
        target,
        "sgfs",
        40,
        n_chains=2,
        seed=1,
        step_size=0.05,
        preconditioner=[[2, 0.5], [0.5, 1]],
        injected_cov=[0.1, 0.2],
    )
    back = read_result(tmp_path / "result.nc")
    np.testing.assert_array_equal(back.posterior["theta"].values, direct.posterior["theta"].values)
    # true/false in any case, none, and a word
    argv = [*run_argv("svgd", tmp_path), "--bandwidth", "median", "--normalise", "FALSE", "--temperature", "none"]
    with pytest.raises(SystemExit):  # svgd has no temperature
        main(argv)
    assert main(argv[:-2]) == 0
    options = json.loads(read_result(tmp_path / "result.nc").attrs["sgsim_config"])["options"]
    assert options["bandwidth"] == "median" and options["normalise"] is False


def test_method_help_lists_the_methods_options(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--method", "iasg", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: sgsim run")
    section = out.split("method iasg: ")[1]
    method = METHODS["iasg"]
    assert method.summary.split()[0] in section and "units:" in section
    listed = section.split("options of iasg")[1]
    for option in (*method.schedule_options, *method.algorithm.options):
        assert flag(option) in listed
    assert "--window" in listed and "--step-size  required" in listed and "--friction" not in listed
    with pytest.raises(SystemExit) as exc:
        main(["run", "--method=csgld", "-h"])
    assert "--n-cycles          required" in capsys.readouterr().out.split("options of csgld")[1]


def test_list_methods(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--list-methods"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name, method in METHODS.items():
        assert any(line.startswith(name + " ") and method.summary in line for line in out.splitlines()), name


@pytest.mark.parametrize(
    ("method", "extra", "flag", "words"),
    [
        ("sghmc", ["--friction", "2"], "--friction", ["(0.0, 1.0]"]),  # the record's check
        ("sghmc", ["--friction", "abc"], "--friction", ["real number"]),
        ("sgld", ["--friction", "0.5"], "--friction", ["'sgld'", "does not take"]),  # another method's option
        ("sgd", ["--window", "5"], "--window", ["'sgd'", "does not take"]),
        ("iasg", [], "--window", ["required for method 'iasg'"]),  # its schedule's signature requires it
        ("iasg", ["--window", "0"], "--window", [">= 1"]),
        ("csgld", [], "--n-cycles", ["required for method 'csgld'"]),
        ("svgd", ["--bandwidth", "-1"], "--bandwidth", []),
    ],
)
def test_a_bad_method_option_exits_2_and_names_the_flag(tmp_path, capsys, method, extra, flag, words):
    argv = run_argv(method, tmp_path / "out", needed=False) + extra
    if method == "csgld":
        i = argv.index("--n-cycles")
        del argv[i : i + 2]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"sgsim run: error: argument {flag}: "), err
    assert all(w in err for w in words), err
    assert not (tmp_path / "out" / "result.nc").exists()


def test_a_sampler_of_ones_own_runs_from_the_shell_with_import(tmp_path, monkeypatch, capsys):
    (tmp_path / "cli_own_samplers.py").write_text(scaled_sgld("cli_scaled_sgld"))
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["run", "--import", "cli_own_samplers", "--method", "cli_scaled_sgld", "--target", "standard_gaussian",
            "--n-steps", "50", "--n-chains", "2", "--seed", "3", "--step-size", "0.05", "--scale", "2",
            "--quiet", "--out", str(tmp_path / "out")]  # fmt: skip
    try:
        assert main(argv) == 0
        result = read_result(tmp_path / "out" / "result.nc")
        assert '"method_module": "cli_own_samplers"' in result.attrs["sgsim_config"]
        assert '"scale": 2.0' in result.attrs["sgsim_config"]
        # its option is a flag, listed by --help
        with pytest.raises(SystemExit):
            main(["run", "--import", "cli_own_samplers", "--method", "cli_scaled_sgld", "--help"])
        assert "--scale" in capsys.readouterr().out
    finally:
        sgsim.algorithms.unregister("cli_scaled_sgld")
        sys.modules.pop("cli_own_samplers", None)
    # a module that cannot be imported: named, exit status 2, nothing run
    assert main(["run", "--import", "no_such_samplers_here", "--method", "sgld"]) == 2
    assert "argument --import: cannot import 'no_such_samplers_here'" in capsys.readouterr().err
