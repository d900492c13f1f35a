"""Request-side types shared by the engine, the HTTP front and the virtual driver."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sglang_sim.radix import Node


@dataclass
class SimRequest:
    """What a client submits: the full prompt ids (media placeholders included) and the output length."""

    rid: str
    input_ids: Sequence[int]
    max_new_tokens: int
    media_tokens: dict[str, int] = field(default_factory=dict)  # tokens per kind, already inside input_ids
    encoder_flops: float | None = None  # None: derived from media_tokens and the model's encoder size
    streaming: bool = True
    # the ids of the first n output tokens (what the server streams back): given, the finished request's whole
    # sequence (prompt and output) is cached, as SGLang's cache_finished_req does, so a conversation's next turn
    # hits the reply too
    output_ids: Callable[[int], Sequence[int]] | None = None


class Req:
    """Engine-side state of one request; output counts of decoding requests are derived lazily."""

    __slots__ = ("rid", "ids", "prompt_len", "max_new", "media", "enc_flops", "streaming", "arrival", "status",
                 "path", "prefix", "done", "seq_len", "out_base", "seg_start", "segments", "extra_times",
                 "first_token_at", "finished_at", "cached_tokens", "num_retractions", "private", "version",
                 "enc_pending", "finish_reason", "pages", "last_token_at", "ready_at", "output_ids")

    def __init__(self, sr: SimRequest, arrival: float, enc_flops: float, pages: list[tuple[int, ...]]):
        self.rid, self.ids, self.streaming = sr.rid, sr.input_ids, sr.streaming
        self.output_ids = sr.output_ids
        self.prompt_len, self.max_new = len(sr.input_ids), max(1, sr.max_new_tokens)
        self.media, self.enc_flops, self.enc_pending = sr.media_tokens, enc_flops, enc_flops > 0
        self.arrival, self.status = arrival, "waiting"
        self.ready_at = arrival  # when the scheduler sees it (after the host-side tokenizer/HTTP stage)
        self.path: list[Node] = []
        self.pages = pages
        self.prefix = self.done = 0
        self.seq_len = self.prompt_len
        self.out_base = self.seg_start = 0
        self.segments: list[tuple[int, int]] = []  # [a, b) ranges of the engine's decode timeline
        self.extra_times: list[float] = []  # tokens emitted by (re-)prefill steps
        self.first_token_at: float | None = None
        self.finished_at: float | None = None
        self.last_token_at = 0.0
        self.cached_tokens = self.num_retractions = self.private = self.version = 0
        self.finish_reason: dict[str, Any] | None = None


@dataclass
class StepResult:
    """One engine call: a prefill forward or a run of identical-shape decode forwards."""

    start: float
    duration: float = 0.0
    kind: str = "idle"  # idle | prefill | decode
    n_steps: int = 0
    first_token: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    retracted: list[str] = field(default_factory=list)

    @property
    def end(self) -> float:
        return self.start + self.duration
