"""Chain loops that numba can cache on disk: one generated module per step and target gradient (private).

The generic loop (:func:`sgsim.integrators._loop.chain_loop`) takes the target's gradient as
an argument, and numba cannot cache a function compiled for a function-typed argument: every
process would compile it again (about 1.4 s). Here the same spliced loop is written out as
the source of a small module in which the gradient is a *global*, imported from the module
that defines it, and compiled with numba's on-disk cache. A second process imports that
file and loads the machine code instead of compiling it.

numba's cache checks only the generated file, not the functions it calls. The file's name is
therefore a hash of everything its code depends on: Python's and numba's versions, every
source file of sgsim, the generated source, and the source file of the gradient's module (so
that editing a target's code, or a helper beside it, gives a new file and a fresh
compilation; a helper the gradient imports from a third module is not covered).

A loop is cached only when everything it refers to can be imported by name: modules,
module-level functions, and plain numbers. A gradient defined in ``__main__``, in a closure
or built at run time is not; then :func:`cached_chain_loop` returns None and the caller
compiles the loop in memory as before. Set ``SGSIM_JIT_CACHE=0`` to turn the disk cache off;
``SGSIM_CACHE_DIR`` chooses the directory (default: ``$XDG_CACHE_HOME/sgsim`` or
``~/.cache/sgsim``).
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

from .._jit import _CACHE, JIT_DISABLED
from ._splice import spliced

__all__ = ["cached_chain_loop", "cache_dir"]

_GRADIENTS = ("grad_u", "stochastic_grad_u")


def cache_dir() -> Path:
    """Where the generated loop modules (and numba's cache of them) live."""
    root = os.environ.get("SGSIM_CACHE_DIR")
    if root:
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sgsim"


def _importable(obj) -> tuple[str, str] | None:
    """``(module, name)`` under which ``obj`` is found again by importing, or None."""
    py = getattr(obj, "py_func", None)
    mod = getattr(obj, "__module__", None) or getattr(py, "__module__", None)
    name = getattr(py, "__qualname__", None) or getattr(obj, "__qualname__", None)
    if not mod or not name or mod == "__main__" or "." in name or "<" in name:
        return None
    try:
        found = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError):
        return None
    return (mod, name) if found is obj else None


def _free_names(node: ast.FunctionDef) -> set[str]:
    params = {a.arg for a in node.args.args}
    stored = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    loaded = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loaded - params - stored - set(dir(builtins))


def _binding(name: str, obj) -> str | None:
    """A line of source that binds ``name`` to ``obj`` in a fresh module, or None."""
    if obj is None or isinstance(obj, bool | int | float):
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


@functools.cache
def cached_chain_loop(move: Callable, update: Callable, grad_u: Callable, stochastic_grad_u) -> Callable | None:
    """The chain loop of ``(move, update)`` for this gradient, from an on-disk cached module.

    It takes the arguments of the in-memory loop; its ``grad_u`` and ``stochastic_grad_u``
    arguments are ignored (pass None), the gradients being compiled in. Returns None when the
    loop cannot be cached (see the module's notes); the caller then uses the in-memory one.
    """
    if not _CACHE or JIT_DISABLED:
        return None
    from ._loop import _chain_loop

    node, namespace = spliced(_chain_loop, {"_move": move, "_update": update})
    # the gradients become globals: the parameters of those names are renamed apart
    for a in node.args.args:
        if a.arg in _GRADIENTS:
            a.arg = f"_unused_{a.arg}"
    namespace = {**namespace, "grad_u": grad_u, "stochastic_grad_u": stochastic_grad_u, "jit": None}
    lines = []
    for name in sorted(_free_names(node)):
        if name not in namespace:
            return None
        line = _binding(name, namespace[name])
        if line is None:
            return None
        lines.append(line)
    body = ast.unparse(ast.Module(body=[node], type_ignores=[]))
    digest = hashlib.sha256()
    for part in (
        sys.version,
        numba.__version__,
        _package_digest(),
        body,
        *lines,
        _module_source_digest(grad_u),
        _module_source_digest(stochastic_grad_u) if stochastic_grad_u is not None else "",
    ):
        digest.update(part.encode())
    key = digest.hexdigest()[:24]
    source = "\n".join(
        [
            f'"""sgsim chain loop {key}, generated: do not edit (sgsim.integrators._kernel_cache)."""',
            "from sgsim._jit import jit",
            *lines,
            "",
            "",
            "@jit(cache=True)",
            body,
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
    return getattr(module, node.name)


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
