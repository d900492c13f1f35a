"""What a person watches: the terminal's progress bars and result lines, and the live page's server.
"""

from sweep.core.face import lazy

__getattr__, __dir__, __all__ = lazy(__name__, {
    "sweep.ui.live": ("LiveServer", "serve"),
    "sweep.ui.console": ("make_console",),
    "sweep.ui.progress": ("WIDE", "StudyProgress", "clock", "eta_seconds", "result_lines"),
})
