"""docs/results.md and the README's headline table are what `kate results` makes of the committed
bench/results/ (no model): out of date fails here. The page is deterministic, names each report's
source and command, picks up a new report, and survives a missing results file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from kate.cli import CONF_DIR, SUBCOMMANDS
from kate.eval.results_doc import (
    README_BEGIN,
    README_END,
    REGENERATE,
    command_for,
    headlines,
    render_readme,
    render_results_doc,
    results_files,
    write_results_doc,
)

ROOT = Path(__file__).resolve().parents[1]


def test_docs_results_md_is_up_to_date():
    committed = (ROOT / "docs" / "results.md").read_text()
    assert committed == render_results_doc(ROOT), f"docs/results.md is out of date: run `{REGENERATE}`"


def test_readme_results_table_is_up_to_date():
    readme = (ROOT / "README.md").read_text()
    assert README_BEGIN in readme and README_END in readme
    assert readme == render_readme(readme, ROOT), f"README.md's results table is out of date: run `{REGENERATE}`"


def test_readme_table_has_at_most_six_rows_each_with_n_and_a_link():
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index(README_BEGIN):readme.index(README_END)]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| result ")]
    assert 1 <= len(rows) <= 6
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[2] and "](bench/results/" in cells[3], row
    for h in headlines(ROOT):
        assert all((ROOT / "bench" / "results" / s).is_file() for s in h.sources)


def test_every_report_is_included_under_its_source_with_a_command():
    page = render_results_doc(ROOT)
    reports = [f for f in results_files(ROOT) if f.endswith(".md")]
    assert "bfcl_report.md" in reports and "train_cpu.md" in reports
    for rel in reports:
        assert f"## `bench/results/{rel}`" in page
        assert command_for(ROOT, rel, (ROOT / "bench" / "results" / rel).read_text()) != "not recorded", rel
    bfcl = (ROOT / "bench" / "results" / "bfcl_report.md").read_text()
    assert "bench/bfcl_report.py" in command_for(ROOT, "bfcl_report.md", bfcl)


def test_the_page_is_deterministic_and_picks_up_new_reports(tmp_path):
    results = tmp_path / "bench" / "results"
    shutil.copytree(ROOT / "bench" / "results", results)
    first = render_results_doc(tmp_path)
    assert render_results_doc(tmp_path) == first
    (results / "full").mkdir(exist_ok=True)
    (results / "full" / "report.md").write_text("# Full run\n\nRegenerate: `kate eval suite=full`.\n\n![p](p.png)\n")
    (results / "full" / "progress.json").write_text(json.dumps({"command": "kate eval suite=full"}))
    page = render_results_doc(tmp_path)
    assert "## `bench/results/full/report.md`" in page and "### Full run" in page
    assert "Regenerate: `kate eval suite=full`" in page and "(../bench/results/full/p.png)" in page
    assert "[`full/progress.json`](../bench/results/full/progress.json) | `kate eval suite=full`" in page


def test_a_missing_results_file_drops_its_headline_row_only(tmp_path):
    results = tmp_path / "bench" / "results"
    shutil.copytree(ROOT / "bench" / "results", results)
    before = len(headlines(tmp_path))
    (results / "main_job_time.json").unlink()
    assert len(headlines(tmp_path)) == before - 1
    assert "# Results" in render_results_doc(tmp_path)


def test_write_then_check(tmp_path):
    shutil.copytree(ROOT / "bench" / "results", tmp_path / "bench" / "results")
    (tmp_path / "README.md").write_text(f"intro\n{README_BEGIN}\nold\n{README_END}\nrest\n")
    with pytest.raises(SystemExit, match="out of date"):
        write_results_doc(tmp_path, check=True)
    write_results_doc(tmp_path)
    write_results_doc(tmp_path, check=True)  # now up to date
    readme = (tmp_path / "README.md").read_text()
    assert readme.startswith("intro\n") and readme.endswith("rest\n") and "old" not in readme


def test_kate_results_is_a_typed_subcommand():
    from kate.configs import SCHEMAS
    from kate.eval.results_doc import ResultsConfig

    assert SUBCOMMANDS["results"][:2] == ("results", "kate.eval.results_doc:run_results")
    assert SCHEMAS["results"] is ResultsConfig
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("results", overrides=[f"root={ROOT}", "check=true"])
    from kate.eval.results_doc import run_results

    assert run_results(cfg).startswith("# Results")
