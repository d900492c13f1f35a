"""Issue 31 §2: entries whose prompt plus requested output cannot fit the server's context are handled before the
GPU sees them: refused at load with their count (dataset.overlong: refuse, the default), or clipped or dropped, with
the counts in the report. Before, a prompt longer than the context was cut to prompt_len.max (set to the context)
(or sent whole) and the server refused every such request: each window failed on errors, and no study could end with a winner."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from sweep.cli import main
from sweep.core.errors import WorkloadError
from sweep.profile import load_profile
from sweep.workload.requests import make_block, workload_parts

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "datasets"
SMOKE = ROOT / "profiles" / "smoke.yaml"
CONTEXT = 2048  # the server's --context-length: 4 of the file's 12 entries ask for more (prompt + output)


def _profile(folder: Path, overlong: str | None) -> Path:
    """smoke on the overlong Mooncake file, the server's context set to CONTEXT (prompt_len.max left at its
    default, as a user importing a trace does), entries replayed so 12 serve a ladder."""
    shutil.copy(DATA / "mooncake_overlong.jsonl", folder / "trace.jsonl")
    ds = {"path": "trace.jsonl", **({"overlong": overlong} if overlong else {})}
    text = SMOKE.read_text().replace("workload:\n", "workload:\n  replay: true\n  dataset: " + json.dumps(ds) + "\n", 1)
    text = text.replace("extra_args: [--load-format, dummy]",
                        f"extra_args: [--load-format, dummy, --context-length, '{CONTEXT}']")
    path = folder / "mine.yaml"
    path.write_text(text)
    return path


def _study(folder: Path, overlong: str | None) -> tuple[int, str]:
    out = folder / "reports"
    rc = main(["ladder", "--profile", str(_profile(folder, overlong)), "--db", str(folder / "r.db"), "--out", str(out),
               "--launcher", "sim", "--set", "ladder=[2]", "--set", "window.warmup_requests=2",
               "--set", "window.measure_seconds=3", "--config", "max_running_requests=8"])
    reports = list(out.glob("*/report.md"))
    return rc, reports[0].read_text() if reports else ""


def _errors(db: Path) -> tuple[int, int]:
    with sqlite3.connect(db) as conn:
        n, bad = conn.execute("SELECT count(*), sum(error IS NOT NULL) FROM requests").fetchone()
    return int(n), int(bad or 0)


def test_overlong_entries_refuse_the_study_at_load_with_their_count(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    rc, _ = _study(tmp_path, None)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "4 of 12 entries ask for more than the server's context of 2,048 tokens" in err
    assert "overlong: clip or drop" in err
    assert not (tmp_path / "reports").exists() or not list((tmp_path / "reports").glob("*/report.md"))


def test_clipped_entries_fit_and_no_request_fails(tmp_path: Path) -> None:
    rc, report = _study(tmp_path, "clip")
    assert rc == 0
    n, bad = _errors(tmp_path / "r.db")
    assert n > 0 and bad == 0  # before: every overlong entry, cut to the context, was refused by the server
    assert "**4 clipped** of 12 entries to fit the server's context of 2,048 tokens" in report
    prof = load_profile(_profile(tmp_path, "clip"))
    parts = workload_parts(prof.workload, prof.folder, context_len=CONTEXT)
    specs = make_block(prof.workload, parts, 0)[:12]
    assert all(s.prompt_tokens + s.output_tokens <= CONTEXT - 1 for s in specs)
    # file order, the long one cut to fit with its 52 output tokens and the 64-token shared prefix smoke may put first
    assert [s.prompt_tokens for s in specs if s.prefix_group is None][:3] == [1500, CONTEXT - 1 - 52 - 64, 800]


def test_dropped_entries_are_left_out_and_counted(tmp_path: Path) -> None:
    rc, report = _study(tmp_path, "drop")
    assert rc == 0
    n, bad = _errors(tmp_path / "r.db")
    assert n > 0 and bad == 0
    assert "**4 dropped** of 12 entries" in report
    prof = load_profile(_profile(tmp_path, "drop"))
    parts = workload_parts(prof.workload, prof.folder, context_len=CONTEXT)
    assert parts.items is not None and len(parts.items) == 8
    assert parts.fitted is not None and (parts.fitted.dropped, parts.fitted.clipped) == (4, 0)


def test_refuse_is_the_default_and_names_the_longest(tmp_path: Path) -> None:
    prof = load_profile(_profile(tmp_path, None))
    with pytest.raises(WorkloadError, match=r"up to 3,124\)"):
        workload_parts(prof.workload, prof.folder, context_len=CONTEXT)
    assert workload_parts(prof.workload, prof.folder).items is not None  # no context known: nothing judged
