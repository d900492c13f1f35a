"""Free text in a report table cell (failure reasons, SLA failures) never breaks the table: `|` is escaped."""

from __future__ import annotations

from sweep.report.html import markdown_to_html
from sweep.report.tables import configs_table, steps_table
from sweep.store import ConfigRecord, RunRecord
from sweep.views.study import StudyContext, StudyView

REASON = "server exited (code 1) | last log: ValueError: a|b\nsecond line"


def _columns(row: str) -> int:
    """Cells of a markdown table row, as a renderer counts them (an escaped \\| is no separator)."""
    return len(row.strip().strip("|").replace("\\|", "").split("|"))


def _ctx() -> StudyContext:
    run = RunRecord.from_row({"id": 7, "server_config_id": 1, "concurrency": 4, "status": "failed", "reason": REASON,
                              "phase": "final"})
    return StudyContext(configs=[ConfigRecord.from_row({"id": 1, "status": "failed", "stop_reason": None,
                                                        "failure_reason": REASON})],
                        runs=[run], labels={1: "mrr=4"})


def _table(lines: list[str]) -> list[str]:
    return [ln for ln in lines if ln.startswith("|")]


def test_a_reason_with_pipes_keeps_every_row_as_wide_as_the_header() -> None:
    for rows in (_table(steps_table(_ctx())), _table(configs_table(_ctx(), StudyView()))):
        assert len(rows) == 3, rows
        assert {_columns(r) for r in rows} == {_columns(rows[0])}, rows
        assert "server exited (code 1) \\| last log: ValueError: a\\|b second line" in rows[2]


def test_the_html_report_shows_the_reason_with_its_pipes() -> None:
    html = markdown_to_html(configs_table(_ctx(), StudyView()), {})
    assert "<td>server exited (code 1) | last log: ValueError: a|b second line</td>" in html
    assert html.count("<th>") == html.split("</tr>", 2)[1].count("<td>")
