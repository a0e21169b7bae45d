"""Arms against a base arm entry by entry, as counts: the multi-turn dialogues each arm passed more or
fewer turns of than ``direct`` (or than its own control), and the single-turn entries it fixed and broke
per category (bench/failure_table.py's paired tables)."""

from __future__ import annotations

from collections import defaultdict


def multi_turn_paired(turns: dict[str, dict[str, int]], controls: dict[str, str] | None = None) -> dict:
    """Each arm's turns passed against ``direct``'s (or its control's, ``controls``: arm -> arm) on the
    multi-turn dialogues both ran: better / worse dialogues and the turns passed in all."""
    out = {}
    for arm, mine in turns.items():
        against = (controls or {}).get(arm, "direct")
        base = turns.get(against, {})
        common = sorted(set(mine) & set(base))
        if arm == against or not common:
            continue
        out[arm] = {"dialogues": len(common), "better": sum(mine[i] > base[i] for i in common),
                    "worse": sum(mine[i] < base[i] for i in common), "turns_passed": sum(mine[i] for i in common),
                    f"{against}_turns_passed": sum(base[i] for i in common)}
    return out


def paired(valid: dict[str, dict[str, bool]], reached: dict[str, dict[str, bool]] | None = None) -> dict:
    """Each arm against ``direct`` on the single-turn entries both ran: per category n, direct's and the
    arm's correct counts, fixed (wrong -> right) and broken (right -> wrong), and how many entries the
    arm's knowledge reached."""
    base, out, reached = valid.get("direct", {}), {}, reached or {}
    for arm, rows in valid.items():
        if arm == "direct":
            continue
        per: dict = defaultdict(lambda: {"n": 0, "direct": 0, "arm": 0, "fixed": 0, "broken": 0, "reached": 0})
        for item, ok in rows.items():
            if item not in base or item.startswith("multi_turn"):
                continue
            row = per[item.rsplit("_", 1)[0]]
            row["n"] += 1
            row["direct"] += base[item]
            row["arm"] += ok
            row["fixed"] += ok and not base[item]
            row["broken"] += base[item] and not ok
            row["reached"] += reached.get(arm, {}).get(item, False)
        if per:
            out[arm] = dict(sorted(per.items()))
    return out
