"""Argument checks for an allowlisted function: a model's JSON arguments converted to fit the type hints.

Checks follow JSON types: an int is accepted (and converted) for a float, an integral number
(``2.0``) for an int, and a bool is never a number. A mismatch raises ``_BadArgument`` whose
message is shown to the model.
"""

from __future__ import annotations

import inspect
import json
import types
import typing
from typing import Any, Literal, Union

from kate.envs.function_schema import _NONE, _json_type_of, schema_for
from kate.toolcall.call import to_json_value


class _BadArgument(Exception):
    """Internal: an argument does not fit its parameter; the message is shown to the model."""



def _got(value: Any) -> str:
    return f"got {_json_type_of(value)} {json.dumps(value, ensure_ascii=False)[:60]}"



def _coerce(value: Any, annotation: Any, where: str) -> Any:
    """``value`` converted to fit ``annotation``; _BadArgument when it does not fit."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return to_json_value(value)  # a fresh copy: the tool cannot mutate the call
    if annotation is _NONE or annotation is None:
        if value is None:
            return None
        raise _BadArgument(f"{where} must be null, {_got(value)}")
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        for option in args:
            if _json_type_of(option) == _json_type_of(value) and option == value:
                return option
        raise _BadArgument(f"{where} must be one of {json.dumps(list(args))}, {_got(value)}")
    if origin in (Union, types.UnionType):
        if value is None and _NONE in args:
            return None
        options = [a for a in args if a is not _NONE]
        if len(options) == 1:
            return _coerce(value, options[0], where)
        for option in options:
            try:
                return _coerce(value, option, where)
            except _BadArgument:
                continue
        wanted = " or ".join(json.dumps(schema_for(a)) for a in options)
        raise _BadArgument(f"{where} must be {wanted}, {_got(value)}")
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise _BadArgument(f"{where} must be a boolean, {_got(value)}")
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise _BadArgument(f"{where} must be an integer, {_got(value)}")
    if annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise _BadArgument(f"{where} must be a number, {_got(value)}")
    if annotation is str:
        if isinstance(value, str):
            return value
        raise _BadArgument(f"{where} must be a string, {_got(value)}")
    if annotation in (list, tuple) or origin in (list, tuple):
        if not isinstance(value, list):
            raise _BadArgument(f"{where} must be an array, {_got(value)}")
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                raise _BadArgument(f"{where} must have exactly {len(args)} items, got {len(value)}")
            return tuple(_coerce(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
        item = args[0] if args else Any
        items = [_coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if tuple in (annotation, origin) else items
    if annotation is dict or origin is dict:
        if not isinstance(value, dict):
            raise _BadArgument(f"{where} must be an object, {_got(value)}")
        item = args[1] if args else Any
        return {k: _coerce(v, item, f"{where}.{k}") for k, v in value.items()}
    raise _BadArgument(f"{where} has a type this environment cannot check")
