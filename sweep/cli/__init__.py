"""The `sweep` command: a thin layer of typer verbs over the study, views and report layers."""

from sweep.cli.commands import app, main

__all__ = ["app", "main"]
