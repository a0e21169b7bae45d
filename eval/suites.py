"""The evaluation suites users run. BFCL suites are the ``suite`` config group of ``kate eval``
(conf/suite/<name>.yaml: categories, split and limit); the others are other jobs' overrides. This
script lists them and runs one, exactly as ``kate <job> <its overrides> <yours>`` does (same configs,
same result folders, resumable).

    .venv/bin/python eval/suites.py list
    .venv/bin/python eval/suites.py full_test_half arm=st_w8v     # = kate eval suite=full_test_half arm=st_w8v
    .venv/bin/python eval/suites.py appworld_test_normal
"""

from __future__ import annotations

import sys
from pathlib import Path

from kate.cli import CONF_DIR
from kate.cli import main as kate_main

OTHER_JOBS: dict[str, tuple[str, list[str], str]] = {
    "main_slice": ("main", [], "the main job: KATE vs direct on the fixed slice, with report"),
    "appworld_test_normal": ("appworld", ["world=appworld", "appworld.dataset=test_normal"],
                             "AppWorld test_normal, direct vs KATE (needs scripts/setup_appworld.sh and the data)"),
}  # fmt: skip


def suites(conf_dir: Path = CONF_DIR) -> dict[str, tuple[str, list[str], str]]:
    """name -> (job, overrides, what it runs): conf/suite/'s options, then the other jobs'."""
    found = {}
    for path in sorted((conf_dir / "suite").glob("*.yaml")):
        comments = [line[1:].strip() for line in path.read_text().splitlines() if line.startswith("# kate eval")]
        found[path.stem] = ("eval", [f"suite={path.stem}"], comments[0].split(": ", 1)[-1] if comments else "")
    return {**found, **OTHER_JOBS}


def main(argv: list[str]) -> None:
    table = suites()
    if not argv or argv[0] not in table:
        print("usage: eval/suites.py SUITE [hydra overrides ...]\n")
        for name, (job, overrides, help_) in table.items():
            print(f"  {name:22s} kate {job} {' '.join(overrides)}\n  {'':22s} {help_}")
        raise SystemExit(0 if argv[:1] == ["list"] else 2)
    job, overrides, _ = table[argv[0]]
    kate_main([job, *overrides, *argv[1:]])


if __name__ == "__main__":
    main(sys.argv[1:])
