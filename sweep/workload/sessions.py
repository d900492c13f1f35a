"""Sessions (workload.sessions): multi-turn conversations whose every turn sends the whole conversation so far.

Session s of a study is a pure function of (profile, s), as request i is (sweep.workload.requests): one private
Generator seeded (seed, session stream, s) draws, in a fixed order, the turn count, each turn's fan-out and think
time, whether the session starts with a shared system prompt (and which), then each message's length, reply length
and modality, and its token ids. Turn 1's messages come from workload.prompt_len (minus the system prompt, as a
single request's tail does), later turns' from sessions.followup_len. A dataset workload takes entry s of its seeded
order as turn 1; a conversation entry (ShareGPT, OpenAI logs, JSONL with "turns") brings its own later user turns
(then its turn count is the file's and nothing fans out), an entry without them gets generated later turns.

What a turn sends is made while the session runs (Conversation), because it holds the server's own replies: turn k's
prompt = the system prompt, every earlier user message and reply (as token ids on /generate, as chat messages on the
chat API, as text with media markers on /generate with media), then turn k's new message. A fan-out turn sends k
sub-requests, each the conversation plus its own message; the next turn's conversation holds all k messages and
replies, in branch order. Media a turn sent stay in the conversation, as chat clients keep them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sweep.core.errors import StreamExhausted, WorkloadError
from sweep.core.types import MediaItem, Modality, RequestSpec, SessionSpec, TurnSpec
from sweep.profile import MAX_FANOUT, MAX_TURNS, Sessions, ThinkTime, Workload
from sweep.profile.context_len import MIN_TAIL
from sweep.workload.datasets import ID_HIGH, ID_LOW
from sweep.workload.datasets import output_len as dataset_output_len
from sweep.workload.lexicon import SIM, Lexicon
from sweep.workload.media import POOL_SIZE
from sweep.workload.requests import (
    MARKERS,
    MODALITIES,
    ChatMessage,
    RequestBody,
    SamplingParams,
    WorkloadParts,
    chat_body,
    estimated_prompt_tokens,
    media_for,
    sample_lengths,
    user_content,
    warm_media_pool,
    with_media_data,
)
from sweep.workload.stream_view import StreamView

_S_SESSION = 10  # the session Generator's stream id (sweep.workload.requests numbers the others)
KEEP = 4096  # sessions a stream view keeps made


def _think(t: ThinkTime, n: int, rng: np.random.Generator) -> list[float]:
    if t.kind == "uniform":
        gaps: list[float] = rng.uniform(t.low, t.high, size=n).tolist()
        return gaps
    if t.kind == "exponential":
        return rng.exponential(t.mean, size=n).tolist() if t.mean > 0 else [0.0] * n
    return [t.value] * n


def make_session(w: Workload, parts: WorkloadParts, s: int, *, lexicon: Lexicon = SIM,
                 pool_size: int = POOL_SIZE) -> SessionSpec:
    """Session s of the workload (see the module docstring for the order of draws)."""
    ss = w.sessions
    assert ss is not None, "make_session needs workload.sessions"
    rng = np.random.default_rng([w.seed % 2**63, _S_SESSION, s])
    item = parts.items[s % len(parts.items)] if parts.items else None
    later = item.turns if item is not None else ()  # a dataset conversation's own later turns, when it has them
    n_turns = 1 + len(later) if later else int(sample_lengths(ss.turns, 1, rng)[0])
    fanout = [1] * n_turns if later else sample_lengths(ss.fanout, n_turns, rng).tolist()
    thinks = _think(ss.think_time, n_turns, rng)
    sp = w.shared_prefix
    draw_share, draw_group = float(rng.random()), int(rng.integers(0, max(sp.groups, 1)))
    group = draw_group if parts.prefixes and draw_share < sp.share else None
    system = parts.prefixes[group] if group is not None else ()
    turns = []
    for t in range(n_turns):
        dist = w.prompt_len if t == 0 else (ss.followup_len or w.prompt_len)
        branches = []
        for j in range(int(fanout[t])):
            length = int(sample_lengths(dist, 1, rng)[0])
            out = int(sample_lengths(w.output_len, 1, rng)[0])
            pick = float(rng.random())
            if t == 0 and group is not None:
                length = max(length - len(system), MIN_TAIL)
            ids = tuple(rng.integers(ID_LOW, ID_HIGH + 1, size=length).tolist())
            text = None
            media: tuple[MediaItem, ...] = ()
            entry = item if t == 0 and item is not None else (later[t - 1] if t and later else None)
            if entry is not None:
                ids, media = entry.input_ids[: dist.max], entry.images
                text = entry.text if len(ids) == len(entry.input_ids) else None
                out = dataset_output_len(entry, w.dataset, out) if w.dataset is not None else out
            k = int(np.searchsorted(np.cumsum(parts.mix), pick, side="right"))
            modality: Modality = "image" if media else MODALITIES[min(k, len(MODALITIES) - 1)]
            if not media and modality != "text":
                media = media_for(w, modality, (s * MAX_TURNS + t) * MAX_FANOUT + j, pool_size)
            text = text if text is not None else lexicon.render(ids)
            branches.append(RequestSpec(index=s, input_ids=ids, output_tokens=out, modality=modality, media=media,
                                        text=text))
        turns.append(TurnSpec(tuple(branches), think_s=float(thinks[t]) if t else 0.0))
    return SessionSpec(index=s, turns=tuple(turns), system_ids=system,
                       system_text=parts.prefix_texts[group] if group is not None else "", prefix_group=group,
                       max_context=ss.max_context)


class SessionStream(StreamView):
    """A view of the study's session stream from position `start`: view.at(k) is session start + k.

    The session counterpart of sweep.workload.stream.RequestStream (same rules: every ladder starts at 0 and each
    step continues where the last stopped, so no session is sent twice to one server; a dataset's entries are
    used once per ladder). Picklable for spawned client processes.
    """

    WARMUP_TAKES_POSITIONS = False

    def __init__(self, w: Workload, base_dir: Path | None = None, *, lexicon: Lexicon = SIM,
                 pool_size: int = POOL_SIZE, start: int = 0, parts: WorkloadParts | None = None):
        if w.sessions is None:
            raise WorkloadError("a session stream needs workload.sessions")
        super().__init__(w, base_dir, lexicon=lexicon, pool_size=pool_size, start=start, parts=parts)
        self._made: dict[int, SessionSpec] = {}

    @property
    def sessions(self) -> Sessions:
        assert self.workload.sessions is not None
        return self.workload.sessions

    @property
    def capacity(self) -> int | None:
        """Sessions one ladder may start: None (unlimited) when generated, else the dataset's entries."""
        return None if self.parts.items is None else len(self.parts.items)

    def at(self, k: int) -> SessionSpec:
        """The view's k-th session; StreamExhausted past the end of a dataset."""
        pos = self.start + k
        made = self._made.get(pos)
        if made is not None:
            return made
        cap = self.capacity
        if cap is not None and pos >= cap:
            assert self.workload.dataset is not None
            raise StreamExhausted(
                f"{self.workload.dataset.path}: the dataset holds {cap} conversations and this server's ladder "
                "needed more; shorten the window or the ladder (sessions are never replayed)")
        spec = make_session(self.workload, self.parts, pos, lexicon=self.lexicon, pool_size=self.pool_size)
        if len(self._made) >= KEEP:
            self._made.pop(next(iter(self._made)))
        self._made[pos] = spec
        return spec

    def prefetch(self, n: int) -> None:
        """Make the view's first n sessions now (and encode the media pool), so a window does not make them."""
        warm_media_pool(self.workload, self.pool_size)
        cap = self.capacity
        last = self.start + n if cap is None else min(self.start + n, cap)
        for pos in range(self.start, last):
            self.at(pos - self.start)

    def first_request(self, k: int) -> RequestSpec:
        return self.at(k).turns[0].branches[0]


def turn_fits(context_tokens: int, turn: TurnSpec, max_context: int) -> bool:
    """Whether every sub-request of a turn (the conversation so far, its message and its reply) stays within
    max_context tokens: the rule that ends a session before a turn that would pass it."""
    need = max(estimated_prompt_tokens(m) + m.output_tokens for m in turn.branches)
    return context_tokens + need <= max_context


@dataclass
class Reply:
    """What the server answered to one turn: its output ids (/generate) and its text."""

    ids: list[int] = field(default_factory=list)
    text: str = ""


class Conversation:
    """One running session: what its next turn sends, grown by each turn's messages and the server's replies."""

    def __init__(self, session: SessionSpec):
        self.session = session
        self.ids: list[int] = list(session.system_ids)
        self.text = session.system_text  # the text form, media markers inline (used once ids cannot be: media)
        self.media: list[MediaItem] = []
        self.messages: list[ChatMessage] = (
            [{"role": "system", "content": session.system_text}] if session.system_text else [])
        self.tokens = len(session.system_ids)  # the conversation's length as sent (media tokens estimated)
        self.ids_known = True  # every reply so far came with its output ids

    def fits(self, turn: TurnSpec) -> bool:
        """Whether every sub-request of the turn (prompt plus reply) stays within the session's max_context."""
        return turn_fits(self.tokens, turn, self.session.max_context)

    def prompt(self, msg: RequestSpec) -> RequestSpec:
        """The whole prompt of a turn's sub-request: the conversation so far, then msg."""
        kinds = {m.kind for m in self.media} | {m.kind for m in msg.media}
        modality: Modality = msg.modality if msg.media or not kinds else min(kinds)
        return RequestSpec(index=msg.index, input_ids=tuple(self.ids) + msg.input_ids,
                           output_tokens=msg.output_tokens, modality=modality, media=tuple(self.media) + msg.media,
                           prefix_group=self.session.prefix_group, text=self._joined(msg))

    def _joined(self, msg: RequestSpec) -> str:
        markers = "".join(MARKERS[m.kind] for m in msg.media)
        new = markers + (msg.text or "")
        return f"{self.text} {new}" if self.text else new

    def body(self, api: str, msg: RequestSpec, model: str) -> RequestBody:
        """The JSON body that sends msg after the conversation so far (streamed)."""
        if api == "chat":
            return chat_body(msg, model, history=self.messages)
        params: SamplingParams = {"max_new_tokens": msg.output_tokens, "ignore_eos": True, "temperature": 0}
        media = tuple(self.media) + msg.media
        if not media and self.ids_known:
            return {"input_ids": self.ids + list(msg.input_ids), "sampling_params": params, "stream": True}
        return with_media_data({"text": self._joined(msg), "sampling_params": params, "stream": True}, media)

    def add(self, turn: list[tuple[RequestSpec, Reply]]) -> None:
        """Append a finished turn: each sub-request's message and the server's reply to it, in branch order."""
        for msg, reply in turn:
            self.ids_known = self.ids_known and bool(reply.ids)
            self.ids += list(msg.input_ids) + reply.ids
            self.text = f"{self._joined(msg)}{reply.text}"
            self.media += msg.media
            self.messages += [{"role": "user", "content": user_content(msg.media, msg.text or "")},
                              {"role": "assistant", "content": reply.text}]
            self.tokens += estimated_prompt_tokens(msg) + (len(reply.ids) or msg.output_tokens)
