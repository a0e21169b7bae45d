"""The main job's cost: the README's first command after set-up (``.venv/bin/kate main``), timed from a fresh
result folder with ``/usr/bin/time -v``: wall seconds and peak resident memory, written with the slice's
size, the arms and the machine's core count, and appended, with the commit it ran, to
``main_job_time_history.jsonl`` (earlier runs on other machines and commits: compare rows of one
``cpu``). Run it with nothing else heavy on the machine; the file says what ran beside it only as
``--note`` tells it.

    .venv/bin/python bench/main_job_time.py --note "nothing else running"   # bench/results/main_job_time.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path

from hydra import compose, initialize_config_dir

from kate.cli import CONF_DIR
from kate.io import atomic_write_json

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "main_job_time.json"
HISTORY = ROOT / "bench" / "results" / "main_job_time_history.jsonl"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def commit() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()  # fmt: skip
    return head.stdout.strip() + ("+changes" if dirty else "")


def measured(stderr: str) -> tuple[float, float]:
    """(wall seconds, peak resident GiB) from ``/usr/bin/time -v``'s report."""
    clock = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr)
    if clock is None or rss is None:
        raise SystemExit(f"no timing in /usr/bin/time's report:\n{stderr[-2000:]}")
    seconds = 0.0
    for part in clock.group(1).split(":"):
        seconds = 60 * seconds + float(part)
    return round(seconds, 1), round(int(rss.group(1)) / 2**20, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--note", default="", help="what else ran on the machine")
    args = parser.parse_args()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("main")
    with tempfile.TemporaryDirectory() as out:
        command = ["/usr/bin/time", "-v", str(ROOT / ".venv" / "bin" / "kate"), "main", f"out_dir={out}"]
        done = subprocess.run(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise SystemExit(f"kate main failed ({done.returncode}):\n{done.stderr[-3000:]}")
        arms_s = json.loads((Path(out) / "wall_seconds.json").read_text())
    wall, rss = measured(done.stderr)
    result = {
        "what": "the main job (README's first command, after set-up): `.venv/bin/kate main`, a fresh result folder",
        "command": ".venv/bin/python bench/main_job_time.py", "date": datetime.date.today().isoformat(),
        "wall_s": wall, "arms_wall_s": arms_s, "max_rss_gib": rss, "cores": os.cpu_count(), "cpu": cpu_model(),
        "entries": sum(int(n) for n in cfg.slice.categories.values()), "arms": list(cfg.arms),
        "engine": f"llama-cpp-python {metadata.version('llama-cpp-python')}",
        "default_model": "conf/llm/default.yaml (the adapter arm)", "machine_note": args.note, "commit": commit(),
    }  # fmt: skip
    atomic_write_json(OUT, result)
    with HISTORY.open("a") as history:
        history.write(json.dumps({k: result[k] for k in ("date", "commit", "cpu", "cores", "wall_s", "arms_wall_s",
                                                         "max_rss_gib", "machine_note")}) + "\n")  # fmt: skip
    print(f"kate main: {wall / 60:.1f} min, {rss:.2f} GiB")


if __name__ == "__main__":
    main()
