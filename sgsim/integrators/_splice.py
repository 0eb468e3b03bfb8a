"""Build a loop with an algorithm's step halves written into it, at the source level (private).

numba inlines a function (``inline="always"``) by assigning its arguments to new variables,
and every such assignment of an array costs an atomic reference-count update at each call:
for a step half that takes four arrays, about 10 ns of a 70 ns SGLD step. :func:`splice`
avoids them by doing what a person would do by hand: it copies the body of each step half
into the loop's source in place of the call, with the half's parameters renamed to the
loop's variables and its own variables renamed apart, and compiles the result. The halves
stay ordinary functions (each algorithm module keeps its update where it belongs, and the
tests run them on their own).

A call may pass an argument named in ``OPTIONAL_ARGS`` (the step's temperature ``t``) that a
half of the shorter signature does not take; it is then left out.

A spliced function must be a plain statement sequence over its parameters: no ``return``
with a value (a bare ``return`` or a docstring is ignored only at the end), no closures, no
``global``. Every call site in the template must be a statement whose arguments are plain
names.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import linecache
import textwrap
import weakref
from collections.abc import Callable

_counter = itertools.count()


# each function's source as first read (when its algorithm record was built): a loop compiled
# later, for another chain count or storage mode, splices that source and not the file as it
# stands then, which may have been edited (or half saved) during the session
_SOURCES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def function_def(func: Callable) -> tuple[ast.FunctionDef, dict]:
    """The AST of a (compiled or plain) function's source, and the globals its names refer to.

    The source is read once per function object; each call parses it afresh (callers edit the
    tree they get).
    """
    py = getattr(func, "py_func", func)
    source = _SOURCES.get(py)
    if source is None:
        source = _SOURCES[py] = textwrap.dedent(inspect.getsource(py))
    tree = ast.parse(source)
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef):
        raise TypeError(f"{py.__qualname__} is not a plain function")
    return node, py.__globals__


def _stored_names(node: ast.FunctionDef) -> set[str]:
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            names.add(sub.id)
        if isinstance(sub, (ast.Global, ast.Nonlocal, ast.FunctionDef, ast.Lambda)) and sub is not node:
            raise TypeError(f"{node.name}: cannot splice a function with {type(sub).__name__}")
        if isinstance(sub, ast.Return) and not _bare(sub):
            raise TypeError(f"{node.name}: cannot splice a function that returns a value")
    return names


def check_spliceable(node: ast.FunctionDef) -> None:
    """Raise a TypeError when ``node`` cannot be written into a loop (see the module's rules)."""
    _stored_names(node)
    body = list(node.body)
    if body and isinstance(body[-1], ast.Return):
        body = body[:-1]
    if any(isinstance(n, ast.Return) for stmt in body for n in ast.walk(stmt)):
        raise TypeError(f"{node.name}: cannot splice a function with an early return")


def _bare(node: ast.Return) -> bool:
    return node.value is None or (isinstance(node.value, ast.Constant) and node.value.value is None)


class _Rename(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.mapping:
            return ast.copy_location(ast.Name(id=self.mapping[node.id], ctx=node.ctx), node)
        return node


# call arguments a half may leave out of its parameters: the step's temperature ``t``, which only
# the updates that read it take (a template passes it; an update of the shorter signature drops it)
OPTIONAL_ARGS = ("t",)


def _body(func: Callable, args: list[ast.expr], tag: str, namespace: dict) -> list[ast.stmt]:
    node, glob = function_def(func)
    params = [a.arg for a in node.args.args]
    extra = len(args) - len(params)
    optional = [a for a in args if isinstance(a, ast.Name) and a.id in OPTIONAL_ARGS]
    if 0 < extra <= len(optional):
        dropped = {id(a) for a in optional[:extra]}
        args = [a for a in args if id(a) not in dropped]
    if len(params) != len(args) or not all(isinstance(a, ast.Name) for a in args):
        raise TypeError(f"{node.name}: each call must pass its {len(params)} parameters as plain names")
    mapping = {p: a.id for p, a in zip(params, args, strict=True) if isinstance(a, ast.Name)}
    local = _stored_names(node) - set(params)
    mapping.update({name: f"_{tag}_{name}" for name in local})
    used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} - set(params) - local
    for name in used:
        if name in glob:
            if name in namespace and namespace[name] is not glob[name]:
                mapping[name] = f"_{tag}_g_{name}"
                namespace[mapping[name]] = glob[name]
            else:
                namespace[name] = glob[name]
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if body and isinstance(body[-1], ast.Return):
        body = body[:-1]
    if any(isinstance(n, ast.Return) for stmt in body for n in ast.walk(stmt)):
        raise TypeError(f"{node.name}: cannot splice a function with an early return")
    out = [_Rename(mapping).visit(stmt) for stmt in body]
    return out or [ast.Pass()]


class _Splicer(ast.NodeTransformer):
    def __init__(self, halves: dict[str, Callable], namespace: dict):
        self.halves = halves
        self.namespace = namespace

    def visit_Expr(self, node: ast.Expr):
        call = node.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in self.halves:
            return _body(self.halves[call.func.id], list(call.args), call.func.id, self.namespace)
        return node


def spliced(
    template: Callable, halves: dict[str, Callable], constants: dict | None = None
) -> tuple[ast.FunctionDef, dict]:
    """The AST of ``template`` with the halves written in, and the globals it needs (see :func:`splice`)."""
    node, glob = function_def(template)
    namespace = {**glob, **(constants or {})}
    new = _Splicer(halves, namespace).visit(node)
    new.decorator_list = []
    return ast.fix_missing_locations(new), namespace


def splice(
    template: Callable, halves: dict[str, Callable], decorate: Callable, constants: dict | None = None
) -> Callable:
    """``template`` with each statement ``name(args)`` for ``name`` in ``halves`` replaced by its body.

    Parameters
    ----------
    template : callable
        A plain function whose body calls the halves as statements.
    halves : dict
        Call name -> function (compiled or not: its Python source is used).
    decorate : callable
        Applied to the generated function (e.g. the compiler).
    constants : dict, optional
        Globals of the template replaced by these values (numbers: numba compiles them in).
    """
    node, namespace = spliced(template, halves, constants)
    module = ast.Module(body=[node], type_ignores=[])
    source = ast.unparse(module)
    names = ", ".join(f"{k}={getattr(getattr(f, 'py_func', f), '__qualname__', f)}" for k, f in halves.items())
    filename = f"<sgsim loop {next(_counter)}: {template.__name__} with {names}>"
    # registered so that tracebacks and numba's messages can show the generated lines
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return decorate(namespace[node.name])
