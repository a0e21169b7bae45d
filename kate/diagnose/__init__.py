"""Diagnostics: does a model really call tools, or only talk about them? (strict vs keyword scoring)."""
