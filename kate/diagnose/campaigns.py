"""The `kate diagnose` calls of the two diagnostic benchmarks, as argument lists (``bench/diagnose_i.py``,
``bench/diagnose_ii.py`` run them one by one as child processes; a test composes each against the
schema). Diagnostics I: ``name=<only>`` on the arithmetic set and on BFCL's relevance /
irrelevance test halves, each into ``<out>/<set>``. Diagnostics II: the ladder's rungs in
RUNGS' order, then the report, into one folder; the checkpoint trajectory is left out where no
checkpoint is on disk."""

from __future__ import annotations

from pathlib import Path

Call = tuple[list[str], Path]
"""(arguments of `kate`, the Hydra run folder of the call)."""

SETS = {"arithmetic": ["set=arithmetic", "arithmetic.n=1000", "arithmetic.seed=0", "act=step"],
        "bfcl": ["set=bfcl", "bfcl.split=test"]}  # fmt: skip
DIAGNOSTICS_I_SKIP = "skip=[replay,near_miss,first_token,trajectory,keyword,toolsense]"  # Diagnostics II's
RUNGS = ["replay", "near_miss", "keyword", "first_token", "toolsense", "trajectory"]
DIAGNOSTICS_II_SKIP = ["necessity", "breakdown", "probes", "pcall", "plan", "gate"]  # Diagnostics I's


def diagnostics_i_calls(sets: list[str], only: str, plan_order: str, out: Path) -> list[Call]:
    """One call per set, in the order given; an unknown set is refused before any runs."""
    unknown = [name for name in sets if name not in SETS]
    if unknown:
        raise SystemExit(f"unknown set {unknown[0]!r}; sets: {', '.join(SETS)}")
    common = [DIAGNOSTICS_I_SKIP, "necessity.stop_early=true", f"necessity.cache_dir={out / 'necessity_cache'}",
              "workers=4", "seed=0"]  # fmt: skip
    return [(["diagnose", f"name={only}", *SETS[name], *common, f"plan.order={plan_order}", f"out_dir={out / name}"],
             out / ".hydra" / name) for name in sets]  # fmt: skip


def has_checkpoints(folder: Path) -> bool:
    return any(folder.glob("checkpoint-*"))


def diagnostics_ii_calls(only: str | None, out: Path, checkpoints: Path, keyword_run: Path) -> list[Call]:
    """One call per rung (``only``: that rung alone), then ``name=all`` for the report; the trajectory
    rung is skipped where ``checkpoints`` holds no ``checkpoint-*`` folder."""
    if only is not None and only not in RUNGS:
        raise SystemExit(f"unknown rung {only!r}; rungs: {', '.join(RUNGS)}")
    skip = [*DIAGNOSTICS_II_SKIP, *([] if has_checkpoints(checkpoints) else ["trajectory"])]
    settings = ["set=bfcl", "bfcl.split=test", "seed=0", f"keyword.run={keyword_run}", "replay.split=test",
                "replay.limit=null", "near_miss.split=test", "near_miss.limit=null", "first_token.limit=200",
                f"trajectory.folder={checkpoints}", "toolsense.queries_per_tier=100", "toolsense.mcq=300",
                "toolsense.qa=300", "toolsense.probes_from=catalogue", "toolsense.workers=4", "workers=4"]  # fmt: skip
    return [(["diagnose", f"name={rung}", *settings, f"skip=[{','.join(skip)}]", f"out_dir={out}"],
             out.parent / ".hydra" / "ladder")
            for rung in ([only] if only else [*RUNGS, "all"]) if rung not in skip]  # fmt: skip
