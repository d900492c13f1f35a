"""The study's report: markdown and HTML, its tables, setup, inputs, cross-check and winner sections.
The plots (matplotlib) are imported where drawn: `sweep.report.plots`, `sweep.report.html`.
"""

from sweep.core.face import lazy

__getattr__, __dir__, __all__ = lazy(__name__, {
    "sweep.report.document": ("CompareSide", "ReportFiles", "compare_markdown", "write_report"),
    "sweep.report.inputs": ("cache_lines", "input_rows"),
    "sweep.report.sessions": ("session_lines",),
    "sweep.report.setup": ("arrival_text", "setup_lines"),
    "sweep.report.tables": ("configs_table", "steps_table"),
    "sweep.report.winner": ("launch_command", "shape_only"),
})
