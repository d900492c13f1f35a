"""What a person watches: the terminal's progress bars and result lines, and the live page's server."""

from sweep.ui.live import LiveServer, serve
from sweep.ui.progress import WIDE, StudyProgress, clock, eta_seconds, make_console, result_lines

__all__ = [
    "LiveServer", "StudyProgress", "WIDE", "clock", "eta_seconds", "make_console", "result_lines", "serve",
]
