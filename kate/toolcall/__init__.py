"""Tool calls: one canonical ``ToolCall``, strict total readers and their inverse writers."""

from kate.toolcall.call import NotJSONCompatible, ToolCall, canonical_call_set, canonical_json
from kate.toolcall.format import (
    to_bfcl,
    to_bfcl_strings,
    to_hermes,
    to_json_text,
    to_openai_tool_calls,
    to_python_call,
)
from kate.toolcall.parse import (
    first_call_complete,
    first_call_end,
    from_bfcl,
    from_bfcl_strings,
    from_hermes,
    from_json_text,
    from_openai_tool_calls,
    from_python_call,
    parse_first_call,
    parse_model_output,
)
from kate.toolcall.parsed import Parsed

__all__ = [
    "NotJSONCompatible",
    "Parsed",
    "ToolCall",
    "canonical_call_set",
    "canonical_json",
    "first_call_complete",
    "first_call_end",
    "from_bfcl",
    "from_bfcl_strings",
    "from_hermes",
    "from_json_text",
    "from_openai_tool_calls",
    "from_python_call",
    "parse_first_call",
    "parse_model_output",
    "to_bfcl",
    "to_bfcl_strings",
    "to_hermes",
    "to_json_text",
    "to_openai_tool_calls",
    "to_python_call",
]
