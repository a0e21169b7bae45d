"""kate: experience-augmented LLM tool use (KATE), with diagnostics for real tool calling."""

__version__ = "0.1.0"
