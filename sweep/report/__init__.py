"""The study's report: markdown and HTML, its tables, setup, inputs, cross-check and winner sections.
The plots (matplotlib) are imported where drawn: `sweep.report.plots`, `sweep.report.html`.
"""

from sweep.report.document import CompareSide, ReportFiles, compare_markdown, write_report
from sweep.report.inputs import cache_lines, input_rows
from sweep.report.setup import arrival_text, setup_lines
from sweep.report.tables import configs_table, steps_table
from sweep.report.winner import launch_command, shape_only

__all__ = [
    "CompareSide", "ReportFiles", "arrival_text", "cache_lines", "compare_markdown", "configs_table",
    "input_rows", "launch_command", "setup_lines", "shape_only", "steps_table", "write_report",
]
