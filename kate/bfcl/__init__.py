"""BFCL-V3: the pinned bfcl-eval data and official checkers, seen through kate."""
