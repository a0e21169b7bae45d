"""Run trajectories as JSONL, one dialogue per line: the crash-safe JSONL helpers of ``kate.io``."""

from kate.io import append_jsonl, read_jsonl

__all__ = ["append_jsonl", "read_jsonl"]
