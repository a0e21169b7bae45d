"""The system prompt kate's BFCL runs give every arm alike (BFCL's FC mode has none): small models
otherwise loop on calls, so it makes ending a turn easy. ``system_prompt: kate`` in a config."""

AGENT_SYSTEM_PROMPT = (
    "You can call the provided functions to act in the user's environment. Make one call at a time "
    "unless the calls are independent, and read each result before the next call. When the request is "
    "done, or cannot be done with these functions, reply to the user in plain text without any call."
)


def resolve_system_prompt(value: str | None) -> str | None:
    """``"kate"`` -> kate's prompt; ``None`` or ``""`` -> none; anything else is used as written."""
    if not value:
        return None
    return AGENT_SYSTEM_PROMPT if value == "kate" else value
