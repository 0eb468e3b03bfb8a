"""Loops that numba can cache on disk: one generated module per step and target gradient (private).

The generic loops (:func:`sgsim.integrators._loop.chain_loop` and
:func:`~sgsim.integrators._loop.ensemble_loop`) take the target's gradient as an argument,
and numba cannot cache a function compiled for a function-typed argument: every process
would compile them again (1.4 s for a chain loop, 3 s for SVGD's). Here the same loop (for
chains, with the step halves spliced in; for ensembles, calling the compiled step) is
written out as the source of a small module in which the gradient is a *global*, imported
from the module that defines it, and compiled with numba's on-disk cache. A second process
imports that file and loads the machine code instead of compiling it (the machine code of
the functions the loop calls is part of the cached library).

numba's cache checks only the generated file, not the functions it calls. The file's name is
therefore a hash of everything its code depends on: Python's and numba's versions, every
source file of sgsim, the generated source, and the source file of the gradient's module (so
that editing a target's code, or a helper beside it, gives a new file and a fresh
compilation; a helper the gradient imports from a third module is not covered).

A loop is cached only when everything it refers to can be imported by name: modules,
module-level functions, and plain numbers or tuples of them (a table of jitters). A gradient
defined in ``__main__``, in a closure or built at run time is not; then
:func:`cached_chain_loop` returns None and the caller compiles the loop in memory as before.
Set ``SGSIM_JIT_CACHE=0`` to turn the disk cache off; ``SGSIM_CACHE_DIR`` chooses the
directory (default: ``$XDG_CACHE_HOME/sgsim`` or ``~/.cache/sgsim``).
"""

from __future__ import annotations

import ast
import builtins
import functools
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path

import numba

from .._jit import _CACHE, JIT_DISABLED, cache_dir
from ._splice import function_def, spliced

__all__ = ["cached_chain_loop", "cached_lane_loop", "cached_ensemble_loop", "cached_vector_step", "cache_dir"]

_GRADIENTS = ("grad_u", "stochastic_grad_u", "grad_u_block")


def _importable(obj) -> tuple[str, str] | None:
    """``(module, name)`` under which ``obj`` is found again by importing, or None."""
    py = getattr(obj, "py_func", None)
    mod = getattr(obj, "__module__", None) or getattr(py, "__module__", None)
    name = getattr(py, "__qualname__", None) or getattr(obj, "__qualname__", None)
    if not mod or not name or mod == "__main__" or "<" in name:
        return None
    try:
        module = importlib.import_module(mod)
    except ImportError:
        return None
    if getattr(module, name, None) is obj:
        return mod, name
    # a compiled function bound under another name (``step = jit(_step_function)``)
    bound = [k for k, v in vars(module).items() if v is obj and k.isidentifier()]
    return (mod, bound[0]) if bound else None


def _free_names(node: ast.FunctionDef) -> set[str]:
    params = {a.arg for a in node.args.args}
    stored = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    loaded = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loaded - params - stored - set(dir(builtins))


def _plain_number(obj) -> bool:
    return obj is None or isinstance(obj, bool | int | float)


def _binding(name: str, obj) -> str | None:
    """A line of source that binds ``name`` to ``obj`` in a fresh module, or None."""
    if _plain_number(obj) or (isinstance(obj, tuple) and all(_plain_number(v) for v in obj)):
        # repr gives the same value back (floats round-trip), and numba freezes such a global
        # as a constant in the generated module as it does in the original one
        return f"{name} = {obj!r}"
    if isinstance(obj, types.ModuleType):
        return f"import {obj.__name__} as {name}"
    where = _importable(obj)
    if where is None:
        return None
    return f"from {where[0]} import {where[1]} as {name}"


def _module_source_digest(obj) -> str:
    """The bytes of the file that defines ``obj``, hashed ('' when there is none)."""
    try:
        path = inspect.getsourcefile(getattr(obj, "py_func", obj))
    except TypeError:
        path = None
    if not path or not os.path.exists(path):
        return ""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _origin(obj) -> str:
    """Where ``obj`` is defined (its module and name) and a hash of that module's file."""
    py = getattr(obj, "py_func", obj)
    return f"{getattr(py, '__module__', '')}:{getattr(py, '__qualname__', '')}:{_module_source_digest(py)}"


@functools.cache
def cached_chain_loop(
    move: Callable,
    update: Callable,
    grad_u: Callable,
    stochastic_grad_u,
    kept_row: int = 0,
    constants: type = tuple,
    philox: bool = False,
    lane: Callable | None = None,
    lane_work: int = 0,
    dim: int = 1,
    n_state: int = 1,
) -> Callable | None:
    """The chain loop of ``(move, update)`` keeping state row ``kept_row``, for this gradient,
    from an on-disk cached module.

    It takes the arguments of the in-memory loop; its ``grad_u`` and ``stochastic_grad_u``
    arguments are ignored (pass None), the gradients being compiled in. Returns None when the
    loop cannot be cached (see the module's notes); the caller then uses the in-memory one.
    ``constants`` is the class of the step's constants: numba's cache index names the classes
    of its arguments, so two samplers whose halves have the same source but live in different
    modules (with constants classes of their own) get cache files of their own. ``philox``: the
    loop draws its normals from Philox streams. ``lane``, ``lane_work``: the one-point form of the
    target's block gradient, written into the loop with the state's shape ``(n_state, dim)``
    (:func:`~sgsim.integrators._loop.chain_loop`).
    """
    if not _CACHE or JIT_DISABLED:
        return None
    from ._loop import _chain_loop, chain_halves, loop_constants

    constants_ = loop_constants(kept_row, philox, True, dim, n_state, None if lane is None else lane_work)
    node, namespace = spliced(_chain_loop, chain_halves(move, update, lane), constants_)
    origins = (_origin(move), _origin(update), _origin(constants)) + ((_origin(lane),) if lane is not None else ())
    return _cached_module([(_gradients_global(node), namespace, "jit(cache=True)")], grad_u, stochastic_grad_u, origins)


@functools.cache
def cached_lane_loop(
    move: Callable,
    update: Callable,
    grad_u_block: Callable,
    kept_row: int = 0,
    constants: type = tuple,
    dim: int = 1,
    n_state: int = 1,
) -> Callable | None:
    """The lane loop (:func:`~sgsim.integrators._loop.lane_loop`) of ``(move, update)`` for this block
    gradient, from an on-disk cached module; called like the in-memory loop with None for the
    gradients. None when it cannot be cached.
    """
    if not _CACHE or JIT_DISABLED:
        return None
    from ._loop import _lane_loop, loop_constants, stay

    constants_ = loop_constants(kept_row, True, move is not stay, dim, n_state)
    node, namespace = spliced(_lane_loop, {"_move": move, "_update": update}, constants_)
    origins = (_origin(move), _origin(update), _origin(constants))
    return _cached_module(
        [(_gradients_global(node), namespace, "jit(cache=True)")], None, None, origins, grad_u_block=grad_u_block
    )


@functools.cache
def cached_vector_step(
    move: Callable, update: Callable, kept_row: int = 0, constants: type = tuple, philox: bool = False
) -> Callable | None:
    """The step of independent chains whose gradients come from outside the loop
    (:func:`~sgsim.integrators._loop.vector_step`: a log-density target's), from an on-disk
    cached module; None when it cannot be cached. It takes no gradient, so it is cached
    whatever the target: a second process on any log density loads it.
    """
    if not _CACHE or JIT_DISABLED:
        return None
    from ._loop import _vector_step, loop_constants

    node, namespace = spliced(_vector_step, {"_move": move, "_update": update}, loop_constants(kept_row, philox))
    origins = (_origin(move), _origin(update), _origin(constants))
    return _cached_module([(node, namespace, "jit(cache=True)")], None, None, origins)


@functools.cache
def cached_ensemble_loop(
    step: Callable, grad_u: Callable, stochastic_grad_u, constants: type = tuple
) -> Callable | None:
    """The ensemble loop of the compiled ``step`` for this gradient, from an on-disk cached module.

    Called like the in-memory loop, with None for the gradients; None when it cannot be
    cached. The module holds three functions: :func:`~sgsim.integrators._loop.gradient` with
    the target's gradients as globals, the step (its source, compiled as ``step`` is, serial
    or parallel) calling that ``gradient``, and the loop calling that step. So an ensemble
    step must evaluate gradients through ``gradient`` only, the one name replaced here.
    """
    if not _CACHE or JIT_DISABLED:
        return None
    from ._loop import _ensemble_loop, gradient

    g_node, g_namespace = function_def(gradient)
    s_node, s_namespace = function_def(step)
    s_node.name = "_step"
    parallel = bool(getattr(step, "targetoptions", {}).get("parallel", False))
    l_node, l_namespace = function_def(_ensemble_loop)
    functions = [
        (_gradients_global(g_node), g_namespace, "jit(inline=True)"),
        (s_node, s_namespace, f"jit(cache=True, parallel={parallel})"),
        (l_node, l_namespace, "jit(cache=True)"),
    ]
    return _cached_module(functions, grad_u, stochastic_grad_u, (_origin(step), _origin(constants)))


def _gradients_global(node: ast.FunctionDef) -> ast.FunctionDef:
    """``node`` with its parameters ``grad_u`` and ``stochastic_grad_u`` renamed apart, so that
    the names in its body are the module's globals (the target's compiled gradients).
    """
    for a in node.args.args:
        if a.arg in _GRADIENTS:
            a.arg = f"_unused_{a.arg}"
    return node


def _cached_module(
    functions: list[tuple[ast.FunctionDef, dict, str]], grad_u, stochastic_grad_u, origins=(), grad_u_block=None
):
    """The last of ``functions`` compiled from a generated module, cached on disk (None if it cannot be).

    ``functions`` are ``(node, globals, decorator)`` in order of definition; a name one of them
    defines is that function in the module, every other free name is imported (or written as
    a number) from the function's globals, and the gradients' names are the target's.
    """
    local = {node.name for node, _, _ in functions}
    bindings: dict[str, str] = {}
    bodies = []
    for node, namespace, decorator in functions:
        node.decorator_list = []
        namespace = {
            **namespace,
            "grad_u": grad_u,
            "stochastic_grad_u": stochastic_grad_u,
            "grad_u_block": grad_u_block,
        }
        for name in sorted(_free_names(node) - local):
            line = _binding(name, namespace[name]) if name in namespace else None
            if line is None or bindings.setdefault(name, line) != line:
                return None
        bodies.append(f"@{decorator}\n{ast.unparse(ast.Module(body=[node], type_ignores=[]))}")
    lines = [bindings[name] for name in sorted(bindings)]
    digest = hashlib.sha256()
    for part in (
        sys.version,
        numba.__version__,
        _package_digest(),
        *bodies,
        *lines,
        _module_source_digest(grad_u),
        _module_source_digest(stochastic_grad_u) if stochastic_grad_u is not None else "",
        _module_source_digest(grad_u_block) if grad_u_block is not None else "",
        *origins,
    ):
        digest.update(part.encode())
    key = digest.hexdigest()[:24]
    source = "\n".join(
        [
            f'"""sgsim loop {key}, generated: do not edit (sgsim.integrators._kernel_cache)."""',
            "from sgsim._jit import jit",
            *lines,
            *(f"\n\n{body}" for body in bodies),
            "",
        ]
    )
    try:
        path = _write_once(cache_dir() / f"sgsim_loop_{key}.py", source)
        name = f"_sgsim_loop_{key}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        # registered, so that numba's cached code finds its module again when it is loaded
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except Exception:  # no writable cache directory, a module that no longer imports: compile in memory
        sys.modules.pop(f"_sgsim_loop_{key}", None)
        return None
    return getattr(module, functions[-1][0].name)


@functools.cache
def _package_digest() -> str:
    """A hash of sgsim's own source files: the loop inlines its generator and helpers."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _write_once(path: Path, source: str) -> Path:
    """Write ``source`` to ``path`` unless it holds it already; atomically (processes may race)."""
    if path.exists() and path.read_text() == source:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(source)
    os.replace(tmp, path)
    return path
