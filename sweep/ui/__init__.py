"""What a person watches: the terminal's progress bars and result lines, and the live page's server.

Import each name from the module that defines it (this package lends none):
- `console`: `make_console`
- `live`: `LiveServer`, `serve`
- `progress`: `WIDE`, `StudyProgress`, `clock`, `eta_seconds`, `result_lines`
"""
