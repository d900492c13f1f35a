"""The report says each thing once, and the terminal's answer reads as text (issue 33): a smoke study with
screening (both configurations promoted) and a soak, measured through the CLI on the virtual driver. The "Why" table
tells a configuration's screening row from its final row by a phase column; the launch command and its warnings
are printed once (the answer block); a failure's `<` / `>` read as written in table cells; the terminal's answer has
no markdown marks and its launch command is verbatim."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sweep.report.tables import cell, plain
from tests.smoke_study import ROOT, sweep_cli


@pytest.fixture(scope="module")
def knee(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    tmp = tmp_path_factory.mktemp("once")
    proc = sweep_cli("knee", "--profile", str(ROOT / "profiles" / "smoke.yaml"), "--db", str(tmp / "r.db"),
                     "--out", str(tmp / "reports"), "--driver", "virtual", "--study", "once", "--no-progress",
                     "--set", "search.screening.enabled=true", "--set", "search.screening.keep=1",
                     "--set", "soak.enabled=true", cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp / "reports" / "once" / "report.md", proc


def _why_rows(md: str) -> list[list[str]]:
    why = md[md.index("## Why the knees are where they are"):]
    why = why[:why.find("\n## ", 4)]
    table = [ln for ln in why.splitlines() if ln.startswith("| ")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in table]


@pytest.mark.integration
def test_the_why_table_tells_screening_from_final_rows(knee: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    rows = _why_rows(knee[0].read_text())
    head, body = rows[0], rows[1:]
    assert head[:3] == ["configuration", "phase", "knee"]
    keys = [(r[0], r[1]) for r in body]
    assert len(keys) == len(set(keys)), keys  # no two rows alike
    promoted = {label for label, phase in keys if phase == "final"}
    assert promoted and all((label, "screen") in keys for label in promoted)


@pytest.mark.integration
def test_the_launch_command_and_its_warnings_are_printed_once(
        knee: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    md = knee[0].read_text()
    assert md.count("sglang.launch_server") == 1, md
    assert md.count("--load-format dummy`: the server runs random weights") == 1
    winner = md[md.index("## Winner"):md.index("## Setup")]
    assert "Launch it with the command in the answer above." in winner


def test_comparisons_in_table_cells_read_as_written() -> None:
    assert cell("fails: TTFT P99 534 ms > 500 ms; too few requests (9 < 20)") == \
        "fails: TTFT P99 534 ms > 500 ms; too few requests (9 < 20)"
    assert plain("<b>x</b> &lt; <!-- c -->") == "&lt;b>x&lt;/b> &amp;lt; &lt;!-- c -->"  # never raw HTML


@pytest.mark.integration
def test_the_terminal_answer_is_plain_text_with_the_command_verbatim(
        knee: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    err = knee[1].stderr
    block = err[err.index("Answer (SIMULATED)"):]
    assert "**" not in block and "```" not in block and "## " not in block and "`" not in block
    assert "Winner: mrr=" in block
    lines = block.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("python -m sglang.launch_server"))
    assert lines[start].endswith(" \\") and lines[start + 1].startswith("  --model-path ")
