"""Dataset entries fitted to the server's context before the GPU sees them, and where a trace replay starts.

SGLang refuses a request whose prompt plus requested output (max_new_tokens) reaches its context length ("Requested
token count exceeds the model's maximum context length"; a prompt alone at the context: "The input (N tokens) is
longer than the model's context length"), so such an entry would be an error in every window of every
configuration and a study on the file could never find a winner. workload.dataset.overlong says what happens
first: refuse (the default: the study is refused at load, with the count), clip (the prompt is cut, then the output,
so prompt + output = context - 1) or drop (the entry is left out); the counts clipped and dropped (`Fitted`) go to
the report.

A timestamped file (a trace) keeps its file order (dataset.order auto), and dataset.start_s cuts it: the replay
starts at its first entry at or after that offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypedDict

import numpy as np

from sweep.core.errors import WorkloadError
from sweep.core.types import JSON
from sweep.profile import Dataset, Workload
from sweep.profile.context_len import longest_draw
from sweep.profile.trace import burstiness, recorded_rate
from sweep.workload.blocks import BlockTokens
from sweep.workload.importers import DatasetItem

__all__ = ["Fitted", "OverlongError", "fit_context", "from_start", "InputFacts", "in_file_order", "input_facts"]


class OverlongError(WorkloadError):
    """Entries that cannot fit the server's context under dataset.overlong: refuse."""


@dataclass(frozen=True)
class Fitted:
    """What fitting a dataset to the context did: entries kept as they were, clipped, dropped, and the limit."""

    entries: int
    clipped: int
    dropped: int
    context_len: int
    policy: str

    def text(self) -> str:
        """"3 of 40 entries clipped to fit the context of 32,768 tokens (dataset.overlong: clip)"."""
        done = [f"{self.clipped} clipped" if self.clipped else "", f"{self.dropped} dropped" if self.dropped else ""]
        what = " and ".join(d for d in done if d) or "none clipped or dropped"
        return (f"{what} of {self.entries} entries to fit the context of {self.context_len:,} tokens "
                f"(prompt + requested output; workload.dataset.overlong: {self.policy})")


def in_file_order(items: list[DatasetItem], ds: Dataset) -> bool:
    """Whether entries are sent in file order: dataset.order file, or auto with every entry timestamped."""
    if ds.order != "auto":
        return ds.order == "file"
    return bool(items) and all(it.send_at is not None for it in items)


def from_start(items: list[DatasetItem], ds: Dataset) -> list[DatasetItem]:
    """The entries from dataset.start_s on (send times rebased there); all of them when it is 0."""
    if ds.start_s <= 0:
        return items
    kept = [it for it in items if it.send_at is not None and it.send_at >= ds.start_s]
    if not kept:
        last = max((it.send_at for it in items if it.send_at is not None), default=None)
        raise WorkloadError(f"{ds.path}: workload.dataset.start_s: no timestamped entry at or after {ds.start_s:g} s"
                            + (f" (the last is at {last:g} s)" if last is not None else " (the file has no send times)"))
    first = kept[0].send_at or 0.0
    return [replace(it, send_at=(it.send_at or 0.0) - first) for it in kept]


def _asked(item: DatasetItem, w: Workload) -> tuple[int, int]:
    """(prompt tokens as sent: cut at prompt_len.max, plus a shared prefix where one may lead it; output asked)."""
    ds = w.dataset
    assert ds is not None
    sp = w.shared_prefix
    extra = sp.length if sp.groups > 0 and sp.share > 0 else 0
    prompt = min(len(item.input_ids), w.prompt_len.max) + extra
    own = item.output_len if item.output_len is not None else item.ref_output_len
    out = own if ds.output_lengths == "dataset" and own is not None else longest_draw(w.output_len)
    return prompt, out


def _clipped(item: DatasetItem, prompt: int, out: int, limit: int, extra: int) -> DatasetItem:
    """The entry with its prompt cut (then its output) so that prompt + output <= limit."""
    keep = min(prompt, max(1, limit - out))
    out = min(out, limit - keep)
    n = max(1, keep - extra)
    ids = item.input_ids
    cut = BlockTokens(ids.hash_ids, ids.block_tokens, n) if isinstance(ids, BlockTokens) else tuple(ids[:n])
    text = item.text if n >= len(ids) else None  # a cut prompt is sent as its ids' words
    return replace(item, input_ids=cut if n < len(ids) else ids, text=text, output_len=out)


def fit_context(items: list[DatasetItem], w: Workload, context_len: int) -> tuple[list[DatasetItem], Fitted]:
    """The entries fitted to `context_len` by w.dataset.overlong, and what was done; OverlongError (one line, with
    the count) under refuse when any entry does not fit, or when every entry would be dropped."""
    ds = w.dataset
    assert ds is not None
    limit = context_len - 1  # SGLang refuses prompt + max_new_tokens >= its context length
    sp = w.shared_prefix
    extra = sp.length if sp.groups > 0 and sp.share > 0 else 0
    out: list[DatasetItem] = []
    over: list[int] = []
    clipped = dropped = 0
    for item in items:
        prompt, asked = _asked(item, w)
        if prompt + asked <= limit:
            out.append(item)
            continue
        over.append(prompt + asked)
        if ds.overlong == "clip":
            out.append(_clipped(item, prompt, asked, limit, extra))
            clipped += 1
        else:
            dropped += 1
    if over and ds.overlong == "refuse":
        raise OverlongError(f"{ds.path}: {len(over)} of {len(items)} entries ask for more than the server's context of "
                            f"{context_len:,} tokens (prompt + requested output, up to {max(over):,}): the server "
                            "would refuse every one; set workload.dataset.overlong: clip or drop")
    if not out:
        raise OverlongError(f"{ds.path}: every one of its {len(items)} entries is longer than the server's context "
                            f"of {context_len:,} tokens (prompt + requested output): nothing left to send")
    return out, Fitted(len(items), clipped, dropped, context_len, ds.overlong)


class InputFacts(TypedDict, total=False):
    """input_facts: what the study stores of its dataset (its environment row's extra keys)."""

    dataset_fit: dict[str, JSON]
    trace: dict[str, JSON]


def input_facts(items: Sequence[DatasetItem] | None, fitted: Fitted | None, ds: Dataset | None) -> InputFacts:
    """What the study's report says of its dataset, stored with the study (its environment row): the entries
    clipped and dropped to fit the context, and a trace's own timing (recorded rate and burstiness, from
    dataset.start_s), so a calm slice is not mistaken for the day."""
    out: InputFacts = {}
    if fitted is not None:
        out["dataset_fit"] = {"entries": fitted.entries, "clipped": fitted.clipped, "dropped": fitted.dropped,
                              "context_len": fitted.context_len, "policy": fitted.policy}
    times = [it.send_at for it in items or () if it.send_at is not None]
    if ds is not None and len(times) > 1:
        b = burstiness(times)
        out["trace"] = {"sends": b.sends, "span_s": round(b.span_s, 3), "gap_cv": b.gap_cv,
                        "peak_ratio": b.peak_ratio, "recorded_rps": recorded_rate(np.asarray(sorted(times))),
                        "start_s": ds.start_s}
    return out
