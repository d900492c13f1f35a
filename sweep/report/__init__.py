"""The study's report: markdown and HTML, its tables, setup, inputs, cross-check and winner sections.
The plots (matplotlib) are imported where drawn: `sweep.report.plots`, `sweep.report.html`.

Import each name from the module that defines it (this package lends none):
- `document`: `CompareSide`, `ReportFiles`, `compare_markdown`, `write_report`
- `inputs`: `cache_lines`, `input_rows`
- `sessions`: `session_lines`
- `setup`: `arrival_text`, `setup_lines`
- `tables`: `configs_table`, `steps_table`
- `winner`: `launch_command`, `shape_only`
"""
