"""A small interpreter for AppWorld-style code actions, for the stand-in world: the code is parsed
with ``ast`` and walked; nothing is handed to ``eval``/``exec``.

What it runs: assignments to names, expression statements, ``for`` over a list, ``if``/``else``;
literals, names, subscripts, f-strings, comparisons, ``and``/``or``/``not``, ``+ - * /``; calls to
``apis.<app>.<api>(keyword=...)`` (dispatched to the world's allowlisted functions) and to a few
builtins (``print len str int float sum min max sorted range list``). Anything else is an
``UnsupportedCode`` error the model reads, as AppWorld shows a traceback.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from typing import Any

MAX_LOOP_ITERATIONS = 1000

BUILTINS: dict[str, Callable[..., Any]] = {
    "len": len, "str": str, "int": int, "float": float, "sum": sum, "min": min, "max": max,
    "sorted": sorted, "range": range, "list": list, "bool": bool, "abs": abs, "round": round,
}  # fmt: skip
BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
          ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}  # fmt: skip
COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
           ast.NotIn: lambda a, b: a not in b, ast.Is: operator.is_, ast.IsNot: operator.is_not}  # fmt: skip

ApiFunction = Callable[..., Any]


class UnsupportedCode(Exception):
    """The code uses something the stand-in interpreter does not run."""


class ApiError(Exception):
    """An API call failed (unknown API, bad arguments, or the API refused): shown to the model."""


class Interpreter:
    """``apis``: ``{app: {api: function}}``; variables persist across ``run`` calls (one task's
    shell). ``run(code)`` returns what the code printed, or ``Execution failed ...`` text."""

    def __init__(self, apis: Mapping[str, Mapping[str, ApiFunction]]) -> None:
        self.apis = apis
        self.variables: dict[str, Any] = {}
        self._printed: list[str] = []

    def run(self, code: str) -> str:
        self._printed = []
        try:
            tree = ast.parse(code)
            for statement in tree.body:
                self._statement(statement)
        except SyntaxError as exc:
            return f"Execution failed. Traceback:\nSyntaxError: {exc.msg} (line {exc.lineno})"
        except (UnsupportedCode, ApiError, KeyError, IndexError, TypeError, ValueError, ZeroDivisionError,
                NameError) as exc:  # fmt: skip
            printed = "\n".join(self._printed)
            head = f"{printed}\n" if printed else ""
            return f"{head}Execution failed. Traceback:\n{type(exc).__name__}: {exc}"
        return "\n".join(self._printed) if self._printed else "Execution successful."

    # -- statements -------------------------------------------------------------------------
    def _statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Expr):
            self._expr(node.value)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self.variables[node.targets[0].id] = self._expr(node.value)
        elif isinstance(node, ast.For) and isinstance(node.target, ast.Name) and not node.orelse:
            items = list(self._expr(node.iter))
            if len(items) > MAX_LOOP_ITERATIONS:
                raise UnsupportedCode(f"a loop over {len(items)} items (at most {MAX_LOOP_ITERATIONS})")
            for item in items:
                self.variables[node.target.id] = item
                for statement in node.body:
                    self._statement(statement)
        elif isinstance(node, ast.If):
            for statement in node.body if self._expr(node.test) else node.orelse:
                self._statement(statement)
        elif isinstance(node, ast.Pass):
            pass
        else:
            raise UnsupportedCode(f"{type(node).__name__} statements are not supported in this world")

    # -- expressions ------------------------------------------------------------------------
    def _expr(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.variables:
                return self.variables[node.id]
            raise NameError(f"name {node.id!r} is not defined")
        if isinstance(node, (ast.List, ast.Tuple)):
            values = [self._expr(e) for e in node.elts]
            return values if isinstance(node, ast.List) else tuple(values)
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise UnsupportedCode("** in dict literals is not supported")
            return {self._expr(k): self._expr(v) for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.Subscript):
            return self._expr(node.value)[self._expr(node.slice)]
        if isinstance(node, ast.JoinedStr):
            return "".join(self._fstring_part(part) for part in node.values)
        if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
            return BINARY[type(node.op)](self._expr(node.left), self._expr(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
            value = self._expr(node.operand)
            return (not value) if isinstance(node.op, ast.Not) else -value
        if isinstance(node, ast.BoolOp):
            return self._bool(node)
        if isinstance(node, ast.Compare):
            return self._compare(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        raise UnsupportedCode(f"{type(node).__name__} expressions are not supported in this world")

    def _fstring_part(self, part: ast.expr) -> str:
        if isinstance(part, ast.Constant):
            return str(part.value)
        if isinstance(part, ast.FormattedValue) and part.format_spec is None:
            return str(self._expr(part.value))
        raise UnsupportedCode("f-string format specs are not supported")

    def _bool(self, node: ast.BoolOp) -> Any:
        value: Any = None
        for operand in node.values:
            value = self._expr(operand)
            if isinstance(node.op, ast.And) and not value:
                return value
            if isinstance(node.op, ast.Or) and value:
                return value
        return value

    def _compare(self, node: ast.Compare) -> bool:
        left = self._expr(node.left)
        for op, right_node in zip(node.ops, node.comparators):
            if type(op) not in COMPARE:
                raise UnsupportedCode(f"comparison {type(op).__name__}")
            right = self._expr(right_node)
            if not COMPARE[type(op)](left, right):
                return False
            left = right
        return True

    def _call(self, node: ast.Call) -> Any:
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise UnsupportedCode("*args / **kwargs in calls are not supported")
        args = [self._expr(a) for a in node.args]
        kwargs = {k.arg: self._expr(k.value) for k in node.keywords}
        func = node.func
        if isinstance(func, ast.Name) and func.id == "print":
            self._printed.append(" ".join(str(a) for a in args))
            return None
        if isinstance(func, ast.Name) and func.id in BUILTINS:
            return BUILTINS[func.id](*args, **kwargs)
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute)
                and isinstance(func.value.value, ast.Name) and func.value.value.id == "apis"):  # fmt: skip
            return self._api(func.value.attr, func.attr, args, kwargs)
        if isinstance(func, ast.Attribute) and func.attr in {"get", "keys", "values", "items", "append"}:
            target = self._expr(func.value)
            if isinstance(target, dict) and func.attr != "append" or isinstance(target, list) and func.attr == "append":
                return getattr(target, func.attr)(*args, **kwargs)
        raise UnsupportedCode(f"calling {ast.unparse(func)!r}: only apis.<app>.<api>(...) and {sorted(BUILTINS)} "
                              "and print are available")  # fmt: skip

    def _api(self, app: str, api: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if app not in self.apis:
            raise ApiError(f"no app named {app!r}; apps: {sorted(self.apis)}")
        if api not in self.apis[app]:
            raise ApiError(f"app {app!r} has no API named {api!r}; its APIs: {sorted(self.apis[app])}")
        if args:
            raise ApiError(f"apis.{app}.{api} takes keyword arguments only")
        try:
            return self.apis[app][api](**kwargs)
        except TypeError as exc:
            raise ApiError(f"apis.{app}.{api}: {exc}") from None
