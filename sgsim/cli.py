"""The ``sgsim`` command.

``sgsim run``
    One call of :func:`sgsim.sample` from the shell. Writes ``DIR/result.nc`` (the
    InferenceData, netCDF) and ``DIR/density.png``, each atomically, then
    ``DIR/manifest.json`` (the files of the complete run with their SHA-256; a previous run's
    manifest and figure are removed before the new result is written, so an interrupted
    write never leaves a new result beside an old figure), and prints a summary: draws,
    time, seed, mode coverage ([cSG] App. A.1) for targets with mode centres, moment errors
    for targets with exact moments. The output directory is created and checked writable
    before any sampling; Ctrl-C stops within one block of steps and exits with status 130.
    Every option of every registered method is a flag, generated from the method records
    (:data:`sgsim.integrators.METHODS`): ``--option-name VALUE``; ``sgsim run --method M --help``
    lists method M's options and ``sgsim run --list-methods`` the methods.
``sgsim reproduce``
    Runs the registered scripts of ``paper_figures/`` (installed as ``sgsim._paper_figures``)
    in order: the synthetic and logistic-regression results of the three papers ([cSG]
    Figures 1, 2, 5, Tables 1 and 4; [Rep] Figures 2-5, Tables 1-3; [SGDVI] Figures 1-6,
    Table 1; ``--list`` names them). Writes the figures, ``DIR/report.md`` and
    ``DIR/figures.json`` (every figure with its caption, for the documentation's gallery),
    both rewritten atomically after every section, so an interrupted run keeps the sections it
    finished. Quick by default; ``--full`` uses the papers' budgets.
``sgsim --version``
    Prints the version.

Bad arguments end with a message naming the parameter and exit status 2.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import json
import os
import platform
import shutil
import sys
import textwrap
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import __version__
from .results import flat_draws, groups_of

__all__ = ["main", "build_parser", "method_help"]

# sgsim's parameter names -> the flags that set them, to name the flag in error messages; the
# methods' options are not listed: each has the flag --option-name (see _option_flag)
_FLAGS = {
    "n_steps": "--n-steps",
    "n_chains": "--n-chains",
    "burn_in": "--burn-in",
    "thin": "--thin",
    "seed": "--seed",
    "noise_correction": "--noise-correction",
    "cov": "--grad-noise",
    "gamma": "--decay",
    "hold": "--hold",
    "a": "--step-size",
    "grad_noise_cov": "--grad-noise",
    "n_particles": "--n-particles",
    "storage": "--storage",
    "divergence_bound": "--divergence-bound",
    "step_check": "--step-check",
    "target": "--target",
}

# the help of each schedule option (schedules have no Option record); an option that the
# dynamics take too (IASG's window) has its Option.doc instead
_SCHEDULE_HELP = {
    "step_size": "step size alpha (alpha_0 if cyclical; the learning rate epsilon on U / N for the constant-SGD "
    "methods)",
    "n_cycles": "number of cycles M",
    "explore_fraction": "exploration fraction beta in [0, 1): the part of each cycle that keeps no draws",
    "temperature": "temperature T of the sampling steps",
    "skip_per_cycle": "sampling steps not kept at each cycle start",
}


def _flag_message(exc: Exception) -> str:
    """The error message of ``exc``, prefixed with the flag of the parameter it names.

    sgsim's validation errors (``ParameterError`` and
    ``ParameterTypeError``) carry the offending argument's name in ``exc.parameter``; a
    parameter that no flag sets, or an error without the attribute, prints the bare message.
    """
    message = str(exc)
    parameter = getattr(exc, "parameter", None) or ""
    flag = _FLAGS.get(parameter) or (_option_flag(parameter) if parameter in _all_method_options() else None)
    return f"argument {flag}: {message}" if flag else message


# --------------------------------------------------------------------------- the methods' options


_REQUIRED = object()  # the default of an option without one


def _option_flag(name: str) -> str:
    """The flag of the method option ``name``: ``--option-name``."""
    return "--" + name.replace("_", "-")


def _method_options(method) -> dict[str, tuple[Any, str]]:
    """Every option ``method`` takes, by name: ``(default, help)``, schedule options first.

    The default is the schedule function's (from its signature) or the ``Option``'s, or
    ``_REQUIRED`` for a schedule parameter without one; an option that the schedule and the
    dynamics both take (IASG's ``window``) is given once, required if the schedule requires it.
    """
    import inspect

    params = inspect.signature(method.schedule).parameters
    records = method.algorithm.options
    out: dict[str, tuple[Any, str]] = {}
    for name in method.schedule_options:
        param = params.get(name)
        if param is not None and param.default is inspect.Parameter.empty:
            default = _REQUIRED
        elif name in records:
            default = records[name].default
        else:
            default = param.default if param is not None else None
        doc = records[name].doc if name in records else _SCHEDULE_HELP.get(name, "an option of the method's schedule")
        out[name] = (default, doc)
    for name, record in records.items():
        out.setdefault(name, (record.default, record.doc))
    return out


def _all_method_options() -> dict[str, list[str]]:
    """Every option of every registered method, by name: the methods that take it, sorted.

    Options come in the order of their first appearance over the sorted method names.
    """
    from .integrators import METHODS

    out: dict[str, list[str]] = {}
    for name in sorted(METHODS):
        for option in _method_options(METHODS[name]):
            out.setdefault(option, []).append(name)
    return out


def _read_value(text: str) -> Any:
    """A method option's VALUE from the command line.

    ``true`` / ``false`` (any case) are bools and ``none`` is None; otherwise a Python literal
    (a number, a list such as ``[1, 0.5]``, nested lists for a matrix), or else the string
    itself (``median``). The option's own check validates and converts it.
    """
    word = text.strip()
    if word.lower() in ("true", "false"):
        return word.lower() == "true"
    if word.lower() == "none":
        return None
    try:
        return ast.literal_eval(word)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return text


def _show_default(value) -> str:
    """A default as it is written on the command line."""
    if value is _REQUIRED:
        return "required"
    if isinstance(value, bool) or value is None:
        return f"default {str(value).lower()}"
    return f"default {value}"


class _MethodOption(argparse.Action):
    """A method option's flag: stores ``VALUE``, read by :func:`_read_value`, in ``method_options``.

    ``namespace.method_options`` is a dict of the options given, by option name (not flag), in
    the order given.
    """

    def __init__(self, option_strings, dest, option, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.option = option

    def __call__(self, parser, namespace, values, option_string=None):
        given = dict(getattr(namespace, "method_options", None) or {})  # never the shared default
        given.pop(self.option, None)  # a repeated flag: the last one counts, in its place
        given[self.option] = _read_value(str(values))
        namespace.method_options = given


class _ListMethods(argparse.Action):
    """``--list-methods``: print every registered method with its summary, and exit."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from .integrators import INTERACTING, METHODS

        width = max(len(name) for name in METHODS)
        lines = []
        for name in sorted(METHODS):
            method = METHODS[name]
            ensembles = " [ensembles: --n-particles]" if method.algorithm.coupling == INTERACTING else ""
            lines.append(f"{name:{width}s}  {method.summary}{ensembles}")
        lines += ["", "the options of method M: sgsim run --method M --help"]
        print("\n".join(lines))
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose help ends with ``appendix``, printed as it is (not re-wrapped)."""

    appendix = ""

    def format_help(self) -> str:
        """The usual help, then ``appendix``."""
        text = super().format_help()
        return f"{text}\n{self.appendix}" if self.appendix else text


def method_help(name: str) -> str:
    """The help section of method ``name``: its summary, units and options.

    Parameters
    ----------
    name : str
        A registered method.

    Returns
    -------
    str
        Lines ending with a newline, as ``sgsim run --method NAME --help`` prints them after
        the usual help; an unknown name gets a line that says so.
    """
    from .integrators import INTERACTING, METHODS

    if name not in METHODS:
        return f"unknown method {name!r}: sgsim run --list-methods lists them\n"
    method = METHODS[name]
    alg = method.algorithm
    width = max(60, min(shutil.get_terminal_size().columns - 2, 100))

    def para(text: str, indent: str = "  ") -> list[str]:
        return textwrap.wrap(
            text, width, initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False
        )

    lines = para(f"method {name}: {method.summary}", "")
    lines += para(f"dynamics: {alg.name}, {alg.summary}")
    lines += para(f"units: {alg.units}")
    if alg.coupling == INTERACTING:
        lines += para("ensembles of particles that step together: --n-particles L (>= 2) is required")
    options = _method_options(method)
    rows = [(_option_flag(k), _show_default(default), doc) for k, (default, doc) in options.items()]
    w1 = max(len(r[0]) for r in rows) + 2
    w2 = max(len(r[1]) for r in rows) + 2
    lines += ["", f"options of {name} (--option VALUE):"]
    for flag, default, doc in rows:
        head = f"  {flag:{w1}s}{default:{w2}s}"
        lines += textwrap.wrap(
            doc, width, initial_indent=head, subsequent_indent=" " * len(head), break_on_hyphens=False
        ) or [head.rstrip()]
    return "\n".join(lines) + "\n"


def _imports(argv: list[str]) -> list[str]:
    """The modules named by ``--import MODULE`` (or ``--import=MODULE``) in ``sgsim run``'s arguments."""
    if not argv or argv[0] != "run":
        return []
    out = []
    for i, arg in enumerate(argv):
        if arg == "--import" and i + 1 < len(argv):
            out.append(argv[i + 1])
        elif arg.startswith("--import="):
            out.append(arg.partition("=")[2])
    return out


def _help_method(argv: list[str]) -> str | None:
    """The method named in ``sgsim run ... --help`` (``--method M`` or ``--method=M``), or None."""
    if not argv or argv[0] != "run" or not {"-h", "--help"} & set(argv):
        return None
    for i, arg in enumerate(argv):
        if arg == "--method" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--method="):
            return arg.partition("=")[2]
    return None


def _paper_figures():
    """The figure scripts of ``sgsim reproduce``, imported at run time.

    An installed sgsim (``pip install .`` or ``pip install -e .``) holds them as the private
    subpackage ``sgsim._paper_figures`` (pyproject.toml maps the checkout's ``paper_figures/``
    there). A checkout imported without installation (``PYTHONPATH=.``, or ``python -m sgsim.cli``
    from the repository root, where the local ``sgsim/`` shadows the installed one) has no such
    subpackage, so the directory beside ``sgsim/`` is loaded under the same name.
    """
    name = "sgsim._paper_figures"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        init = Path(__file__).resolve().parents[1] / "paper_figures" / "__init__.py"
        if exc.name != name or not init.is_file():
            raise
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(init.parent)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


# --------------------------------------------------------------------------- parser


def build_parser(method: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of the ``sgsim`` command.

    Parameters
    ----------
    method : str, optional
        A method whose options (:func:`method_help`) end the help of ``sgsim run``.

    Returns
    -------
    argparse.ArgumentParser
        The parser; ``sgsim run`` has one flag per option of every registered method, whose
        values land in the dict ``method_options``.
    """
    from .driver import STEP_CHECKS
    from .integrators import METHODS
    from .targets import FACTORIES, TARGETS

    parser = _Parser(
        prog="sgsim",
        description="Stochastic-gradient MCMC simulations: SGLD, SGHMC and their cyclical versions.",
    )
    parser.add_argument("--version", action="version", version=f"sgsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run one sampler and write result.nc and density.png",
        description=(
            "Run sgsim.sample and write DIR/result.nc (InferenceData, netCDF) and DIR/density.png. Step "
            "sizes follow the cyclical paper: drift step_size * grad U, injected noise variance "
            "2 * step_size * T."
        ),
    )
    run.add_argument(
        "--target",
        required=True,
        metavar="T",
        help=f"target density: {', '.join(sorted(set(TARGETS) | set(FACTORIES)))}, or package.module:function "
        "(a function returning a sgsim Target); arguments with --target-arg",
    )
    run.add_argument(
        "--target-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an argument of the target's factory (repeat); VALUE is read as a Python literal "
        "(numbers, lists, strings), e.g. --target-arg 'means=[[-1, 0], [1, 0]]' --target-arg variance=0.1",
    )
    run.add_argument(
        "--method",
        required=True,
        choices=sorted(METHODS),
        metavar="M",
        help="sampler: --list-methods lists them, --method M --help lists M's options",
    )
    run.add_argument("--list-methods", action=_ListMethods, help="list the methods with their summaries and exit")
    run.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first, so that the samplers it registers (sgsim.algorithms.register) are methods "
        "here, with their options as flags (repeat for several)",
    )
    run.add_argument("--n-steps", required=True, type=int, metavar="N", help="iterations K per chain")
    run.add_argument("--n-chains", type=int, default=1, metavar="C", help="independent chains (default: 1)")
    run.add_argument("--seed", type=int, default=None, metavar="S", help="seed (default: fresh entropy, recorded)")
    run.add_argument(
        "--decay",
        type=float,
        metavar="GAMMA",
        help="sgld/sghmc: decreasing steps alpha_k = A (k - hold)^-GAMMA ([cSG] eq. 1) instead of constant",
    )
    run.add_argument("--hold", type=int, metavar="H", help="with --decay: steps held at A first (default: 0)")
    run.add_argument(
        "--grad-noise", type=float, metavar="V", help="emulate stochastic gradients: add N(0, V I) noise to grad U"
    )
    run.add_argument(
        "--noise-correction",
        action="store_true",
        help="subtract the gradient noise from the injected noise so that their sum has the variance Langevin needs",
    )
    run.add_argument(
        "--n-particles",
        type=int,
        metavar="L",
        help="interacting methods (svgd, [c]sgld_repulsive): particles per ensemble, >= 2",
    )
    run.add_argument(
        "--storage",
        choices=["draws", "final", "moments"],
        default="draws",
        help="keep every kept draw (default), the final state only, or running means and covariances per chain",
    )
    run.add_argument(
        "--divergence-bound",
        default="auto",
        metavar="B",
        help="a chain with some |theta_i| > B has diverged: a number > 0, 'auto' (default: the target's) or 'none'",
    )
    run.add_argument(
        "--step-check",
        choices=list(STEP_CHECKS),
        default="raise",
        help="a step beyond the method's stability limit on the target: refused (default), run with a warning, or "
        "run silently (the divergence check stays on)",
    )
    run.add_argument(
        "--backend",
        choices=["cpu", "gpu", "gpu-host"],
        default="cpu",
        help="where the chains run: the CPU kernels (default), one CUDA thread per chain (needs sgsim[gpu]), or the "
        "GPU kernel built for this CPU",
    )
    run.add_argument(
        "--precision",
        choices=["float32", "float64"],
        help="the GPU path's floating-point type (default: float32 on the GPU, float64 on the CPU)",
    )
    run.add_argument(
        "--stream",
        choices=["philox", "pcg64"],
        help="the steps' random streams: counter-based Philox (default where it applies) or PCG64",
    )
    run.add_argument("--burn-in", type=int, default=0, metavar="B", help="initial steps whose draws are dropped")
    run.add_argument("--thin", type=int, default=1, metavar="T", help="keep every T-th collected draw")
    run.add_argument("--out", required=True, metavar="DIR", help="output directory")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_method_options(run)
    run.set_defaults(subparser=run)
    if method is not None:
        run.appendix = method_help(method)

    rep = sub.add_parser(
        "reproduce",
        help="regenerate the papers' figures and tables and write report.md",
        description=(
            "Run the registered paper_figures scripts in order (quick by default) and write their figures "
            "and DIR/report.md. The report is rewritten after every section."
        ),
    )
    rep.add_argument("--full", action="store_true", help="the papers' budgets (50k iterations, 10 runs per row)")
    rep.add_argument("--out", default="sgsim-output", metavar="DIR", help="output directory (default: %(default)s)")
    rep.add_argument("--only", nargs="+", action="extend", metavar="NAME", help="run only these entries (see --list)")
    rep.add_argument("--seed", type=int, default=None, metavar="S", help="experiment seed (default: 2020)")
    rep.add_argument("--quiet", action="store_true", help="no progress bars")
    rep.add_argument("--list", action="store_true", help="list the registered entries and exit")
    rep.add_argument(
        "--executor",
        choices=("serial", "processes", "dask"),
        default="serial",
        help="where the experiments' repeated runs go (Table 4's runs are sweep cells; default: %(default)s)",
    )
    rep.add_argument("--workers", type=int, metavar="N", help="worker processes (default 2)")
    rep.add_argument("--scheduler", metavar="ADDR", help="a running Dask scheduler, tcp://host:port (implies dask)")
    rep.set_defaults(subparser=rep)

    sw = sub.add_parser(
        "sweep",
        help="run a grid of cells (seeds x settings) into a resumable store",
        description=(
            "Run the cells a CONFIG file (JSON or TOML) describes: 'function' ('module:name', returning a dict of "
            "numbers), 'seeds' (a count or a list), 'grid' (one list of values per varied parameter), 'fixed' "
            "(shared parameters), optionally 'store', 'executor' and 'reuse'. Finished cells are skipped; the "
            "summary is written to STORE/summary.nc. Drivers started on one store share its cells; Ctrl-C stops the "
            "workers, says how many cells are saved and exits with status 130."
        ),
    )
    sw.add_argument("config", metavar="CONFIG", help="the sweep's JSON or TOML file")
    sw.add_argument("--store", metavar="DIR", help="result store (default: the config's 'store')")
    sw.add_argument("--executor", choices=("serial", "processes", "dask"), help="where cells run (default: config's)")
    sw.add_argument("--workers", type=int, metavar="N", help="worker processes (default 2)")
    sw.add_argument("--scheduler", metavar="ADDR", help="a running Dask scheduler, tcp://host:port")
    sw.add_argument(
        "--reuse",
        choices=("exact", "any"),
        help="stored results reused: 'exact' (same code and sgsim version, the default) or 'any' (same function, "
        "arguments and seed, whatever code wrote them)",
    )
    sw.add_argument("--quiet", action="store_true", help="no progress bar")
    sw.set_defaults(subparser=sw)
    return parser


def _add_method_options(run: argparse.ArgumentParser) -> None:
    """One flag per option of every registered method, in a group of ``run``'s help.

    The usage line names them together, as ``[--OPTION VALUE ...]``.
    """
    usage = run.format_usage().removeprefix("usage: ").rstrip()
    run.usage = f"{usage}\n{' ' * (len('usage: ') + len(run.prog) + 1)}[--OPTION VALUE ...]"
    group = run.add_argument_group(
        "method options",
        "Every option of every method, as --option-name VALUE; each method takes some of them (sgsim run --method M "
        "--help lists M's, with their defaults; a flag that the method does not take is an error). VALUE is true, "
        "false, none, a Python literal (a number, a list such as '[1, 0.5]', nested lists for a matrix) or else a "
        "word ('median').",
    )
    from .integrators import METHODS

    n_methods = len(METHODS)
    for option, methods in _all_method_options().items():
        _, doc = _method_options(METHODS[methods[0]])[option]
        which = "every method" if len(methods) == n_methods else ", ".join(methods)
        flag = _option_flag(option)
        try:
            group.add_argument(
                flag,
                action=_MethodOption,
                option=option,
                dest="method_options",
                default=argparse.SUPPRESS,
                metavar="VALUE",
                help=f"{doc} ({which})".replace("%", "%%"),
            )
        except argparse.ArgumentError:
            raise TypeError(
                f"the option {option!r} of method(s) {', '.join(methods)} would have the flag {flag}, which sgsim run "
                "already has for something else: rename the option"
            ) from None
    run.set_defaults(method_options={})


def _check_method_options(method, given: dict, parser) -> None:
    """Exit with a usage error (status 2) naming the flag if ``given`` does not suit ``method``.

    An option the method does not take, a required option left out, or a value that the
    option's own check rejects (the dynamics' options; the schedule checks its own when it is
    built, still before any sampling).
    """
    accepted = _method_options(method)
    foreign = sorted(k for k in given if k not in accepted)
    if foreign:
        flags = ", ".join(_option_flag(k) for k in foreign)
        parser.error(
            f"argument {_option_flag(foreign[0])}: method {method.name!r} does not take {flags}; its options: "
            f"{', '.join(_option_flag(k) for k in accepted)} (sgsim run --method {method.name} --help)"
        )
    for name, (default, _) in accepted.items():
        if default is _REQUIRED and name not in given:
            parser.error(f"argument {_option_flag(name)}: required for method {method.name!r}")
    records = method.algorithm.options
    for name, value in given.items():
        if name in records:
            try:
                records[name].check(name, value)
            except (ValueError, TypeError) as exc:
                message = _flag_message(exc)
                parser.error(
                    message if message.startswith("argument --") else f"argument {_option_flag(name)}: {message}"
                )


def _cmd_sweep(args, parser) -> int:
    import json

    from . import sweep
    from .io import atomic_write

    path = Path(args.config)
    try:
        text = path.read_text()
        if path.suffix == ".toml":
            import tomllib  # Python >= 3.11

            config = tomllib.loads(text)
        else:
            config = json.loads(text)
    except ImportError:
        parser.error("argument CONFIG: TOML needs Python >= 3.11; give the config as JSON")
    except (OSError, ValueError) as exc:
        parser.error(f"argument CONFIG: cannot read {path}: {exc}")
    unknown = set(config) - {"function", "seeds", "grid", "fixed", "store", "executor", "reuse"}
    if unknown or "function" not in config or "seeds" not in config:
        parser.error(f"argument CONFIG: needs 'function' and 'seeds'; unknown keys: {sorted(unknown)}")
    store_arg = args.store or config.get("store")
    if not store_arg:
        parser.error("argument --store: give --store or 'store' in CONFIG")
    store = Path(str(store_arg))
    executor = args.executor or config.get("executor", "serial")
    reuse = args.reuse or config.get("reuse", "exact")
    try:
        sweep.Store(store, reuse).check_writable()  # before any cell: one line naming the store and why
    except (ValueError, TypeError) as exc:
        print(f"sgsim sweep: error: {_flag_message(exc)}", file=sys.stderr)
        return 2
    try:
        cells = sweep.grid(config["function"], config["seeds"], fixed=config.get("fixed"), **config.get("grid", {}))
        report = sweep.run_sweep(
            cells,
            store,
            executor,
            n_workers=args.workers,
            scheduler=args.scheduler,
            progress=not args.quiet,
            reuse=reuse,
        )
    except sweep.SweepError as exc:
        print(f"sgsim sweep: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # run_sweep has said how many cells are saved
        return 130
    except ImportError as exc:
        parser.error(str(exc))
    except (ValueError, TypeError) as exc:
        parser.error(_flag_message(exc))
    summary = sweep.Store(store, reuse).summary(cells)
    atomic_write(store / "summary.nc", lambda tmp: summary.to_netcdf(tmp, engine="h5netcdf"))
    elsewhere = f", {report.n_elsewhere} by another driver" if report.n_elsewhere else ""
    print(
        f"sgsim sweep: {report.n_cells} cells, {report.n_found} already stored, {report.n_computed} computed"
        f"{elsewhere} ({executor}); summary: {store / 'summary.nc'}"
    )
    return 0


_MANIFEST = "manifest.json"


def _write_manifest(out: Path, files: list[Path], seed) -> None:
    import hashlib
    import json

    from .io import atomic_write_text

    digests = {}
    for f in files:
        h = hashlib.sha256()
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        digests[f.name] = h.hexdigest()
    record = {"complete": True, "sgsim_version": __version__, "seed": str(seed), "files": digests}
    atomic_write_text(out / _MANIFEST, json.dumps(record, indent=2) + "\n")


def _target_args(pairs: list[str], parser) -> dict:
    """``KEY=VALUE`` strings to keyword arguments, each VALUE a Python literal or else a string."""
    import ast

    kwargs = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            parser.error(f"argument --target-arg: expected KEY=VALUE, got {pair!r}")
        try:
            kwargs[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            kwargs[key] = value
    return kwargs


def _check_out(out: str, parser) -> None:
    """Create the output directory and prove it writable, before any sampling."""
    import tempfile

    path = Path(out)
    if path.exists() and not path.is_dir():
        parser.error(f"argument --out: {out} exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".sgsim-probe-"):
            pass
    except OSError as exc:
        parser.error(f"argument --out: cannot write to {out}: {exc.strerror or exc}")


# --------------------------------------------------------------------------- sgsim run


def _plot_range(x, centres=None, sd=None):
    import numpy as np

    lo, hi = np.quantile(x, 0.001, axis=0), np.quantile(x, 0.999, axis=0)
    if centres is not None:
        pad = 3.0 * float(np.max(sd)) if sd is not None else 0.0
        lo = np.minimum(lo, centres.min(0) - pad)
        hi = np.maximum(hi, centres.max(0) + pad)
    span = np.where(hi > lo, hi - lo, 1.0)
    return lo - 0.05 * span, hi + 0.05 * span


def density_figure(idata, target):
    """Histogram of the pooled draws with the target's density beside it (or over it in 1-D).

    2-D targets: the exact density on a grid and a 2-D histogram, side by side, same axes.
    1-D targets: a histogram with the exact density, both normalised on the plotted range
    (so the density's normaliser need not be known). Higher dimensions: a 2-D histogram of
    the first two coordinates.

    Chains the result marks as diverged are left out of the histogram and named in the title;
    when every chain diverged, the finite draws are shown under a title that says they are
    not a sample of the target.
    """
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import PowerNorm
    from matplotlib.figure import Figure

    from .diagnostics import diverged_chains

    theta = flat_draws(idata)
    method, chains = idata.attrs.get("method", "?"), theta.shape[0]
    bad = diverged_chains(idata, chains)
    if bad.any() and not bad.all():
        theta = theta[~bad]
    x = theta.reshape(-1, target.dim)
    x = x[np.all(np.isfinite(x), axis=1)]
    if x.shape[0] == 0:
        raise ValueError("the result holds no finite draw to plot")
    title = f"{method} on {target.name}: {chains} chain(s), {x.shape[0]:,} draws, seed {idata.attrs.get('seed')}"
    if bad.all():
        title = f"DIVERGED, every chain: not a sample of the target\n{title}"
    elif bad.any():
        title = f"DIVERGED: chains {np.flatnonzero(bad).tolist()} left out\n{title}"
    centres = target.mode_centres
    if target.dim == 1:
        fig = Figure(figsize=(6.5, 4))
        FigureCanvasAgg(fig)
        ax = fig.subplots()
        lo, hi = _plot_range(x)
        ax.hist(x[:, 0], bins=100, range=(lo[0], hi[0]), density=True, color="#1f77b4", alpha=0.6, label="draws")
        grid = np.linspace(lo[0], hi[0], 1001)
        p = np.exp(target.log_density(grid[:, None]) - np.max(target.log_density(grid[:, None])))
        p /= p.sum() * (grid[1] - grid[0])
        ax.plot(grid, p, color="black", lw=1.5, label="target density")
        ax.set_xlabel("theta")
        ax.set_ylabel("density (normalised on the plotted range)")
        ax.legend(frameon=False)
        ax.set_title(title, fontsize=9)
        fig.tight_layout()
        return fig
    sd = target.mode_sd
    lo, hi = _plot_range(x[:, :2], None if centres is None else centres[:, :2], sd)
    extent = (lo[0], hi[0], lo[1], hi[1])
    hist, _, _ = np.histogram2d(x[:, 0], x[:, 1], bins=200, range=[[lo[0], hi[0]], [lo[1], hi[1]]])
    panels = []
    if target.dim == 2:
        gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], 300), np.linspace(lo[1], hi[1], 300), indexing="ij")
        logp = target.log_density(np.stack([gx.ravel(), gy.ravel()], axis=1)).reshape(gx.shape)
        panels.append(("target density", np.exp(logp - logp.max())))
    label = "draws" if target.dim == 2 else "draws, first two coordinates"
    panels.append((label, hist))
    fig = Figure(figsize=(5.2 * len(panels), 4.8))
    FigureCanvasAgg(fig)
    axes = np.atleast_1d(fig.subplots(1, len(panels)))
    for ax, (name, image) in zip(axes, panels, strict=True):
        norm = PowerNorm(gamma=0.5, vmin=0.0, vmax=max(float(image.max()), 1e-300))
        ax.imshow(image.T, origin="lower", extent=extent, aspect="auto", cmap="viridis", norm=norm)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("theta[0]")
        ax.set_ylabel("theta[1]")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def _cmd_run(args, parser) -> int:
    import inspect

    import numpy as np

    from . import schedules
    from .diagnostics import ball_probability, expected_mode_coverage, mode_coverage, moment_errors
    from .integrators import get_method
    from .io import NoSpaceError, atomic_savefig, write_result
    from .sampling import DivergenceError, sample
    from .targets import get as get_target

    t0 = time.perf_counter()
    method = get_method(args.method)
    options = dict(args.method_options)
    _check_method_options(method, options, parser)
    if args.decay is not None and "n_cycles" in method.schedule_options:
        parser.error(f"argument --decay: applies to sgld and sghmc, not to the cyclical method {method.name!r}")
    if args.hold is not None and args.decay is None:
        parser.error("argument --hold: needs --decay")
    if args.decay is not None and "step_size" not in options:
        parser.error("argument --step-size: required with --decay")
    _check_out(args.out, parser)
    bound = {"auto": "auto", "none": None}.get(args.divergence_bound.lower(), args.divergence_bound)
    if isinstance(bound, str) and bound != "auto":
        try:
            bound = float(bound)
        except ValueError:
            parser.error(f"argument --divergence-bound: a number > 0, 'auto' or 'none', got {args.divergence_bound!r}")
    try:
        target = get_target(args.target, **_target_args(args.target_arg, parser))
        if args.grad_noise is not None:
            target = target.with_gradient_noise(args.grad_noise)
        n_steps, schedule = args.n_steps, None
        if args.decay is not None:
            # the decreasing steps replace the method's schedule, at that schedule's default temperature
            param = inspect.signature(method.schedule).parameters.get("temperature")
            default = 1.0 if param is None or param.default is param.empty else param.default
            temperature = options.pop("temperature", default)
            schedule = schedules.polynomial_decay(
                options.pop("step_size"), args.decay, args.n_steps, hold=args.hold or 0, temperature=temperature
            )
            n_steps = None
        idata = sample(
            target,
            method.name,
            n_steps,
            schedule=schedule,
            n_chains=args.n_chains,
            n_particles=args.n_particles,
            storage=args.storage,
            seed=args.seed,
            burn_in=args.burn_in,
            thin=args.thin,
            noise_correction=args.noise_correction,
            divergence_bound=bound,
            step_check=args.step_check,
            progress=not args.quiet,
            backend=args.backend,
            precision=args.precision,
            stream=args.stream,
            **options,
        )
    except DivergenceError as exc:
        print(f"sgsim run: error: {exc}", file=sys.stderr)
        return 1
    except (ValueError, TypeError) as exc:
        parser.error(_flag_message(exc))

    out = Path(args.out)
    # a previous run's figure and manifest go first: a kill between the writes below never
    # leaves the new result beside an old figure, and manifest.json, written last, lists the
    # files of a complete run (with their SHA-256)
    # The free space is checked as the result is written, for its exact encoded size: compression
    # makes that size unknown before sampling, and no bound on it below the uncompressed bytes is
    # certain, so a check before sampling could refuse a result that fits.
    for stale in (_MANIFEST, "density.png"):
        (out / stale).unlink(missing_ok=True)
    has_draws = "posterior" in groups_of(idata)
    try:
        result = write_result(idata, out / "result.nc")
        written = [str(result)]
        if has_draws:
            fig = density_figure(idata, target)
            written.append(str(atomic_savefig(fig, out / "density.png", dpi=110)))
        _write_manifest(out, [Path(w) for w in written], idata.attrs["seed"])
    except NoSpaceError as exc:
        print(f"sgsim run: error: {exc.strerror} (the run is not saved: {out} holds no manifest)", file=sys.stderr)
        return 1
    wall = time.perf_counter() - t0
    seed = idata.attrs["seed"]
    ensembles = f" of {args.n_particles} particles" if args.n_particles else ""
    lines = [
        f"sgsim {__version__}: {method.name} on {target.name} (d = {target.dim}), "
        f"{args.n_chains} chain(s){ensembles} x {args.n_steps:,} steps, seed {seed}",
    ]
    if has_draws:
        theta = flat_draws(idata)
        n_chains, n_draws = theta.shape[:2]
        lines.append(
            f"  draws kept ({args.storage}): {n_chains} x {n_draws:,} = {n_chains * n_draws:,} "
            f"(burn-in {args.burn_in}, thin {args.thin})"
        )
    else:
        n_kept = int(idata["moments"]["n_draws"].values[0])
        lines.append(f"  running moments of {n_kept:,} draws per chain (burn-in {args.burn_in}, thin {args.thin})")
    lines.append(
        f"  time: sampling {idata.attrs['sampling_time_s']:.2f} s (with numba compilation on first use); "
        f"total {wall:.2f} s"
    )
    if target.mode_centres is not None and has_draws:
        k = target.mode_centres.shape[0]
        cov = mode_coverage(idata, target.mode_centres)
        line = f"  mode coverage (r = 0.25, n-bar = 100): {cov} of {k} modes"
        weights = target.extras.get("weights")
        if target.mode_sd is not None and weights is not None and np.allclose(weights, weights[0]):
            if np.allclose(target.mode_sd, target.mode_sd[0]):
                p = ball_probability(0.25, float(target.mode_sd[0]), target.dim)
                finite = int(np.sum(np.all(np.isfinite(theta), axis=-1)))
                mean, _ = expected_mode_coverage(finite, k, p)
                line += f" ({finite:,} exact iid draws would cover {mean:.1f})"
        lines.append(line)
    if target.mean is not None and target.second_moment is not None:
        err = moment_errors(idata, target)
        lines.append(
            f"  moments: |mean - E theta| = {err['mean_error']:.4g}, "
            f"max |E theta theta^T error| = {err['second_moment_error']:.4g}"
        )
    lines.append(f"  wrote {' and '.join(written)}")
    print("\n".join(lines))
    return 0


# --------------------------------------------------------------------------- sgsim reproduce


def _environment() -> str:
    import numba
    import numpy

    return (
        f"Python {platform.python_version()}, NumPy {numpy.__version__}, numba {numba.__version__} "
        f"({numba.get_num_threads()} threads), {os.cpu_count()} CPUs, {platform.system()} {platform.machine()}"
    )


def render_report(meta: dict, sections: list, pending: list) -> str:
    """The Markdown of ``report.md``: a header, then each finished section in order."""
    describe_mode = _paper_figures().describe_mode
    done = len(sections)
    total = done + len(pending)
    rows = [
        ("mode", describe_mode(meta["full"])),
        ("sgsim version", __version__),
        ("seed", str(meta["seed"])),
        ("started (UTC)", meta["started"]),
        ("total time", f"{meta['elapsed']:.1f} s"),
        ("status", f"{meta['status']} ({done} of {total} sections finished)"),
        ("command", f"`{meta['command']}`"),
        ("environment", meta["environment"]),
    ]
    lines = [
        "# sgsim: the papers' results, reproduced",
        "",
        'Three papers: [cSG] "Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning", [Rep] '
        '"Stochastic Gradient MCMC with Repulsive Forces" and [SGDVI] "Stochastic Gradient Descent as '
        'Approximate Bayesian Inference". '
        "Each section compares our numbers with the published ones and explains the differences; nothing "
        "is tuned toward a paper (the formulas and the papers' errata: the Theory pages of the documentation).",
        "",
        "| | |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v} |" for k, v in rows]
    lines.append("")
    for s in sections:
        lines += [f"## {s.title}", "", f"*`{s.name}`, {s.elapsed_s:.1f} s*", "", s.markdown.rstrip(), ""]
    if pending:
        lines += ["## Not finished", ""]
        lines += [f"- {e.title} (`{e.name}`)" for e in pending]
        lines.append("")
    return "\n".join(lines)


def figure_manifest(meta: dict, sections: list) -> str:
    """The JSON of ``figures.json``: every finished figure with its section and caption.

    The documentation's gallery is built from it; ``status`` says whether the run finished.
    """
    describe_mode = _paper_figures().describe_mode
    figures = [
        {"section": s.name, "title": s.title, "file": f, "caption": s.captions.get(f, "")}
        for s in sections
        for f in s.figures
    ]
    doc = {"seed": meta["seed"], "mode": describe_mode(meta["full"]), "status": meta["status"], "figures": figures}
    return json.dumps(doc, indent=1) + "\n"


def _cmd_reproduce(args, parser, argv) -> int:
    from .io import atomic_write_text

    figures = _paper_figures()
    if args.list:
        for entry in figures.FIGURES:
            print(f"{entry.name:28s} {entry.title}")
        return 0
    seed = figures.DEFAULT_SEED if args.seed is None else args.seed
    if seed < 0:
        parser.error(f"argument --seed: must be >= 0, got {seed}")
    if args.only:
        try:
            wanted = {figures.get_entry(name).name for name in args.only}
        except ValueError as exc:
            parser.error(f"argument --only: {exc}")
        entries = [e for e in figures.FIGURES if e.name in wanted]
    else:
        entries = list(figures.FIGURES)
    _check_out(args.out, parser)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report_path = out / "report.md"
    t0 = time.perf_counter()
    meta = {
        "full": args.full,
        "seed": seed,
        "started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "elapsed": 0.0,
        "status": "running",
        "command": "sgsim " + " ".join(argv),
        "executor": "dask" if args.scheduler else args.executor,
        "environment": _environment(),
    }
    sections: list = []
    pending = list(entries)

    def write() -> None:
        meta["elapsed"] = time.perf_counter() - t0
        atomic_write_text(report_path, render_report(meta, sections, pending))
        atomic_write_text(out / "figures.json", figure_manifest(meta, sections))

    write()
    failed = []
    mode = "full" if args.full else "quick"
    print(f"sgsim reproduce ({mode}, seed {seed}): {len(entries)} section(s) -> {out}", flush=True)
    from .sweep import executing

    executor = "dask" if args.scheduler else args.executor
    try:
        for i, entry in enumerate(entries, 1):
            start = time.perf_counter()
            try:
                with executing(executor, args.workers, args.scheduler):
                    section = entry.run(out, full=args.full, progress=not args.quiet, seed=seed)
            except Exception as exc:  # one failing section must not lose the others
                traceback.print_exc()
                failed.append(entry.name)
                section = figures.Section(entry.name, entry.title, f"**Failed**: `{type(exc).__name__}: {exc}`")
            section.elapsed_s = time.perf_counter() - start
            sections.append(section)
            pending.remove(entry)
            write()
            print(f"[{i}/{len(entries)}] {entry.title}: {section.elapsed_s:.1f} s", flush=True)
    except KeyboardInterrupt:
        meta["status"] = "interrupted"
        write()
        print(f"interrupted; {report_path} keeps the {len(sections)} finished section(s)", file=sys.stderr)
        return 130
    meta["status"] = "failed: " + ", ".join(failed) if failed else "complete"
    write()
    print(f"report: {report_path} ({meta['elapsed']:.1f} s in all)")
    return 1 if failed else 0


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    """Run the ``sgsim`` command with ``argv`` (``sys.argv[1:]`` by default); return the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # a target given as 'module:function' is looked up from the working directory too, as
    # `python -m sgsim` would (the installed script's path holds only its own folder)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    # the modules that register samplers of one's own come first: the parser's methods and flags
    # are read from the registry
    for module in _imports(argv):
        try:
            importlib.import_module(module)
        except Exception as exc:  # any failure of the user's module: report it, exit as argparse does
            print(f"sgsim run: error: argument --import: cannot import {module!r}: {exc}", file=sys.stderr)
            return 2
    parser = build_parser(_help_method(argv))
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        if args.command == "run":
            return _cmd_run(args, args.subparser)
        if args.command == "sweep":
            return _cmd_sweep(args, args.subparser)
        return _cmd_reproduce(args, args.subparser, argv)
    except KeyboardInterrupt:
        # the sampler stops within one block; results are written whole or not at all
        print(f"sgsim {args.command}: interrupted; nothing more was written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
