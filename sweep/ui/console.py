"""The terminal console every command writes its messages to (stderr), without the progress display's imports."""

from __future__ import annotations

from rich.console import Console


def make_console() -> Console:
    """stderr, at the terminal's real width; in a pipe, lines are never broken (one line per message)."""
    console = Console(stderr=True)
    console.soft_wrap = not console.is_terminal
    return console
