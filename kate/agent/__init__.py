"""The agent loop (user turn -> retrieve -> sample/vote -> execute -> observe) and its records."""

from kate.agent.loop import DialogueResult, StepRecord, TurnResult, run_dialogue, run_turn
from kate.agent.trajectory_io import append_jsonl, read_jsonl

__all__ = ["DialogueResult", "StepRecord", "TurnResult", "append_jsonl", "read_jsonl", "run_dialogue", "run_turn"]
