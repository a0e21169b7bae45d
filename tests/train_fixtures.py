"""A one-tool trajectory the training tests build their small datasets from."""

OWN = {
    "id": "own_add", "source": "own",
    "tools": [{"type": "function", "function": {"name": "add", "description": "Add two numbers.",
               "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                              "required": ["a", "b"]}}}],
    "turns": [{"user": "What is 2 plus 3?", "calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}], "results": ["5"],
               "answer": "2 plus 3 is 5."}],
}  # fmt: skip
