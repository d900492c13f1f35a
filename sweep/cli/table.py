"""Rows as a table that fits the terminal: numbers are never cut; columns are left out instead.

A number is one word, so a column's narrowest layout (rich's minimum measurement) holds its longest number
whole; text (a configuration's label, a header) may wrap between words. The table keeps the columns it was
given, in their order, while their narrowest layout fits the width; the ones from the right that do not fit
are left out and named on stderr. `wide` prints every column at its natural width, whatever the terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table


@dataclass(frozen=True)
class Fitted:
    """A table ready to print, and the columns (names) left out to make it fit."""

    table: Table
    width: int
    left_out: tuple[str, ...]


def _table(cols: Sequence[str], header: Callable[[str], str], cells: list[list[str]],
           numeric: Callable[[str], bool], widths: Sequence[int]) -> Table:
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for c, w in zip(cols, widths, strict=True):
        # a fixed width, so rich never squeezes a column below it; fold, never ellipsize
        t.add_column(header(c), justify="right" if numeric(c) else "left", overflow="fold", width=w)
    for row in cells:
        t.add_row(*row)
    return t


def _span(texts: Sequence[str], whole: bool) -> tuple[int, int]:
    """The narrowest and widest a column of these texts can be: a number (`whole`) never breaks, text breaks
    between words."""
    widest = max((len(t) for t in texts), default=1)
    if whole:
        return widest, widest
    return max((len(w) for t in texts for w in t.split()), default=1), widest


def fit(cols: Sequence[str], rows: Sequence[Sequence[str]], header: Callable[[str], str],
        numeric: Callable[[str], bool], console: Console, wide: bool = False) -> Fitted:
    """The table of `rows` (cells in `cols` order) that fits `console`'s width, or all of it when `wide`."""
    keep = list(cols)
    index = {c: i for i, c in enumerate(cols)}
    spans = {}
    for c in cols:
        head = _span([header(c)], False)
        body = _span([r[index[c]] for r in rows], numeric(c))
        spans[c] = (max(head[0], body[0]), max(head[1], body[1]))

    def build(names: list[str], widths: list[int]) -> Table:
        return _table(names, header, [[r[index[c]] for c in names] for r in rows], numeric, widths)

    def chrome(names: list[str]) -> int:
        """What borders and padding add to the columns' own widths."""
        widths = [spans[c][1] for c in names]
        wide_open = console.options.update_width(100_000)
        return Measurement.get(console, wide_open, build(names, widths)).maximum - sum(widths)

    if wide:
        widths = [spans[c][1] for c in keep]
        return Fitted(build(keep, widths), sum(widths) + chrome(keep), ())
    while len(keep) > 1 and sum(spans[c][0] for c in keep) + chrome(keep) > console.width:
        keep.pop()
    widths = [spans[c][1] for c in keep]
    excess = sum(widths) + chrome(keep) - console.width
    while excess > 0:  # narrow the column with the most room to give, one character at a time
        slack, i = max((widths[i] - spans[c][0], i) for i, c in enumerate(keep))
        if slack <= 0:
            break
        widths[i] -= 1
        excess -= 1
    return Fitted(build(keep, widths), console.width, tuple(c for c in cols if c not in keep))
