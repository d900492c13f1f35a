"""Issue 33's reliability round, the small ones: an export leaves aborted windows out, tier files are read strictly
(UTF-8, no name the study has, at least one tier), `sla: []` is refused, an empty dataset file is no success, a full
disk is reported by the write that hit it, and report.md carries no raw HTML from a description or a model path.
Over real smoke studies in SQLite files and real sweep processes."""

from __future__ import annotations

import json
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.cli import main
from tests.smoke_study import ENV, smoke_knee, sweep_cli

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "profiles" / "smoke.yaml"


@pytest.fixture(scope="module")
def smoke_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return smoke_knee(sweep_cli, tmp_path_factory.mktemp("round"), "round")


def _err(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


@pytest.mark.integration
def test_export_leaves_the_rows_of_aborted_windows_out(smoke_db: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """An interrupted attempt leaves its completed steps `aborted` (README: What survives what); they are measured
    again, so an export that kept them would count those steps twice."""
    db = tmp_path / "r.db"
    shutil.copy(smoke_db, db)
    with sqlite3.connect(db) as con:
        aborted = con.execute("SELECT min(id) FROM runs").fetchone()[0]
        con.execute("UPDATE runs SET status = 'aborted' WHERE id = ?", (aborted,))
        per_run = dict(con.execute("SELECT run_id, count(*) FROM requests GROUP BY run_id").fetchall())
    con.close()
    assert per_run[aborted] > 0

    def exported(*extra: str) -> list[dict[str, object]]:
        assert main(["export", "round", "--db", str(db), "--what", "requests", "--format", "jsonl", *extra]) == 0
        return [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]

    kept = exported()
    assert aborted not in {r["run_id"] for r in kept}
    assert len(kept) == sum(n for rid, n in per_run.items() if rid != aborted)
    assert len(exported("--include-aborted")) == sum(per_run.values())
    assert main(["export", "round", "--db", str(db), "--what", "windows", "--format", "jsonl"]) == 0
    assert aborted not in {json.loads(ln)["run_id"] for ln in capsys.readouterr().out.splitlines()}


@pytest.mark.integration
def test_a_tier_file_not_in_utf8_is_one_line(smoke_db: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    tier = tmp_path / "t.yaml"
    tier.write_bytes("name: stricte\nttft_ms: 500\n# déjà\n".encode("latin-1"))
    assert main(["explain", "round", "--db", str(smoke_db), "--tier", str(tier)]) == 2
    assert _err(capsys) == [f"error: --tier {tier}: not UTF-8 text (byte 30); save it as UTF-8"]


@pytest.mark.integration
@pytest.mark.parametrize(("text", "line"), [
    ("name: default\nttft_ms: 500\n", "error: --tier default: the study already has a tier named 'default' (a "
                                      "single-sla profile's tier); give the extra tier another name"),
    ("[]\n", "error: --tier {tier}: an empty list: no tier to judge"),
])
def test_a_tier_is_never_dropped_silently(text: str, line: str, smoke_db: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    tier = tmp_path / "t.yaml"
    tier.write_text(text)
    for verb in (["explain", "round"], ["report", "round", "--out", str(tmp_path / "rep")]):
        assert main([*verb, "--db", str(smoke_db), "--tier", str(tier)]) == 2
        assert _err(capsys) == [line.format(tier=tier)]
    assert not (tmp_path / "rep").exists()


def test_an_empty_sla_list_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text("\n".join(ln for ln in SMOKE.read_text().splitlines()
                                 if not ln.startswith(("sla:", "  ttft_", "  tpot_", "  max_error"))) + "\nsla: []\n")
    assert main(["plan", "-p", str(profile)]) == 2
    assert _err(capsys) == [f"error: {profile}: <root>: sla: an empty list of tiers (give the SLA bounds, or at "
                            "least one tier)"]


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_validate_of_an_empty_dataset_file_is_no_success(text: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text(text)
    assert main(["dataset", "validate", str(empty)]) == 2
    assert _err(capsys) == [f"error: {empty}: no entries (an empty file)"]


def _file_size_limit(limit: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.integration
def test_a_full_disk_is_reported_by_the_write_that_hit_it(tmp_path: Path) -> None:
    """Files cannot grow past 700 kB (as on a full disk) while Optuna writes a trial: the error names that write,
    not marking the worker failed afterwards, which fails too for the same reason."""
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "knee", "-p", str(SMOKE), "--db", str(tmp_path / "r.db"),
                           "--out", str(tmp_path / "out"), "--no-progress"], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env=ENV, preexec_fn=lambda: _file_size_limit(700_000))
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert proc.returncode == 5 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "mark worker" not in errors[0] and "disk I/O error" in errors[0], errors


@pytest.mark.integration
def test_report_md_carries_no_raw_html_from_the_description_or_the_model_path(tmp_path: Path) -> None:
    model = tmp_path / "m`<img src=x onerror=alert(2)>`"
    shutil.copytree(ROOT / "models" / "llama3-8b-shape", model)
    profile = tmp_path / "p.yaml"
    profile.write_text(SMOKE.read_text().replace(
        "description: Tests and first contact. Never use its numbers for a decision.",
        'description: "<script>alert(1)</script> & <b>bold</b>"'))
    proc = sweep_cli("knee", "-p", str(profile), "--db", str(tmp_path / "r.db"), "--out", str(tmp_path / "rep"),
                 "--driver", "virtual", "--study", "h", "--no-progress", "--set", "ladder=[2]",
                 "--set", "search.space.max_running_requests=[8]", "--set", f"server.model_path={model}",
                 cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    md = (tmp_path / "rep" / "h" / "report.md").read_text()
    assert "<script>" not in md and "<b>bold" not in md
    assert "&lt;script>alert(1)&lt;/script> & &lt;b>bold&lt;/b>" in md  # the description, shown
    assert f"- model path: `` {model} ``;" in md  # a backtick in it cannot end the code span
    assert f"> **Warning**: `` {model} `` is a shape-only folder" in md
    html = (tmp_path / "rep" / "h" / "report.html").read_text()
    assert "<script>" not in html and "<img src=x" not in html
