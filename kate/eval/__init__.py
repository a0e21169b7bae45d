"""Evaluation: BFCL-V3 runs, result files, reports."""
