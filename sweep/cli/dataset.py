"""`sweep dataset validate|convert|stats FILE`: check a dataset file line by line, write it as sweep's JSONL (with
its turns), or print what it holds (docs/datasets.md describes the formats).

validate and convert print one `FILE:LINE: why` per bad entry and exit 2 when there is any (bad input, as
docs/automation.md's table says); a file that cannot be read, or holds no entry at all, is one line and exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from sweep.cli.app import app
from sweep.core.errors import UsageError, WorkloadError

if TYPE_CHECKING:
    from sweep.workload.datasets import DatasetItem

FORMATS = ("auto", "jsonl", "sharegpt", "openai", "openai-batch", "lmsys", "mooncake", "azure")

dataset_app = typer.Typer(help="Dataset files: `sweep dataset validate|convert|stats FILE`.", no_args_is_help=True)

_FORMAT = typer.Option("auto", "--format", help=f"{', '.join(FORMATS[1:])}; auto guesses from the file")
_MODEL = typer.Option(None, "--model", help="a model folder: its tokenizer.json tokenizes text when it is a real "
                      "model's (else one token per word)")
_BLOCK = typer.Option(512, "--block-tokens", min=1, help="mooncake, azure: tokens per hash block")


class BadLines(WorkloadError):
    """A dataset file has bad entries (each already printed on its own line): bad input, exit 2."""


def _load(file: Path, fmt: str, model: Path | None, block_tokens: int) -> tuple[list[DatasetItem], list[str], str]:
    """The file's items, its problems and the format read (guessed when auto)."""
    from sweep.workload.datasets import guess_format, read_entries

    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if not file.is_file():
        raise WorkloadError(f"{file}: no such file")
    fmt = guess_format(file) if fmt == "auto" else fmt
    items, problems = read_entries(file, fmt, str(file), model=model, block_tokens=block_tokens)
    return items, problems, fmt


def _n(k: int, one: str, many: str) -> str:
    return f"{k} {one if k == 1 else many}"


def _report_problems(problems: list[str]) -> None:
    for line in problems:
        typer.echo(line, err=True)


@dataset_app.command("validate")
def validate(file: Path = typer.Argument(..., help="the dataset file"), fmt: str = _FORMAT,
             model: Path | None = _MODEL, block_tokens: int = _BLOCK) -> None:
    """One line per bad entry (FILE:LINE: why); exit 2 when there is any, or no entry at all."""
    items, problems, fmt = _load(file, fmt, model, block_tokens)
    _report_problems(problems)
    turns = sum(1 + len(it.turns) for it in items)
    typer.echo(f"{file}: {fmt}: {_n(len(items), 'good entry', 'good entries')} ({_n(turns, 'turn', 'turns')}), "
               f"{len(problems)} bad")
    if problems:
        raise BadLines(f"{file}: {len(problems)} bad entries")
    if not items:
        raise WorkloadError(f"{file}: no entries (an empty file)")


@dataset_app.command("convert")
def convert(file: Path = typer.Argument(..., help="the dataset file"),
            out: Path = typer.Option(..., "--out", "-o", help="the sweep JSONL file to write"),
            fmt: str = _FORMAT, model: Path | None = _MODEL, block_tokens: int = _BLOCK,
            force: bool = typer.Option(False, "--force", "--overwrite", help="replace an existing --out file")) -> None:
    """Write the file's good entries as sweep's JSONL (every turn; send_at from timestamps); bad ones are listed
    and left out (exit 2 then, the file is still written)."""
    from sweep.cli.outfile import check_out, text_out
    from sweep.workload.datasets import item_record

    check_out(out, "--out", force=force, inputs=[file])
    items, problems, fmt = _load(file, fmt, model, block_tokens)
    _report_problems(problems)
    if not items:
        raise WorkloadError(f"{file}: no usable entries ({len(problems)} bad): nothing written")
    try:
        with text_out(out, "--out") as fh:
            fh.writelines(json.dumps(item_record(it), ensure_ascii=False) + "\n" for it in items)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write there ({exc.strerror or exc})") from None
    typer.echo(f"{out}: {_n(len(items), 'entry', 'entries')} from {file} ({fmt})"
               + (f"; {_n(len(problems), 'bad entry', 'bad entries')} left out" if problems else ""))
    if problems:
        raise BadLines(f"{file}: {len(problems)} bad entries left out of {out}")


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 or float(x).is_integer() else f"{x:.2f}"


@dataset_app.command("stats")
def stats(file: Path = typer.Argument(..., help="the dataset file"), fmt: str = _FORMAT,
          model: Path | None = _MODEL, block_tokens: int = _BLOCK) -> None:
    """Entries, turns per conversation, prompt and output lengths (p50/p90/p99), the prefix-sharing potential and,
    for a timestamped file, arrival burstiness."""
    from sweep.workload.dataset_stats import dataset_stats

    items, problems, fmt = _load(file, fmt, model, block_tokens)
    _report_problems(problems)
    if not items:
        raise WorkloadError(f"{file}: no usable entries ({len(problems)} bad)")
    s = dataset_stats(items)
    table = Table(title=f"{file} ({fmt}): {s.entries} entries" + (f", {len(problems)} bad left out" if problems
                                                                   else ""))
    for col in ("", "n", "mean", "p50", "p90", "p99", "max"):
        table.add_column(col, justify="left" if not col else "right", no_wrap=True)
    for name, d in (("turns per conversation", s.turns), ("prompt tokens per turn", s.prompt_tokens),
                    ("output tokens per turn", s.output_tokens)):
        table.add_row(name, str(d.n), *(_fmt(v) for v in (d.mean, d.p50, d.p90, d.p99, d.max)))
    Console(width=200).print(table)
    typer.echo(f"prefix-sharing potential: {s.prefix_share:.1%} of {s.prompt_tokens_total:,} prompt tokens a "
               "perfect prefix cache would hit (file order; a turn's prompt = the conversation's user turns so far)")
    if s.interarrival_cv is not None:
        typer.echo(f"arrival burstiness: inter-arrival CV {s.interarrival_cv:.2f} over {s.duration_s or 0:,.1f} s "
                   "(1 = Poisson, above 1 = bursty)")
    else:
        typer.echo("arrival burstiness: - (no send times in the file)")


app.add_typer(dataset_app, name="dataset")
