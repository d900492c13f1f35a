"""The workload of a profile: lengths, modalities, media, shared prefixes, a dataset (arrivals: arrival.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, PrivateAttr, StrictBool, model_validator

from sweep.profile.base import MAX_REQUESTS, MAX_TOKENS
from sweep.profile.base import Strict as _Strict


class LengthDist(_Strict):
    """A token-length distribution with clamps."""

    kind: Literal["fixed", "uniform", "normal", "lognormal"] = Field("fixed",
        description="fixed (value), uniform (low..high), normal or lognormal (mean, std)")
    value: int | None = Field(None, ge=1, le=MAX_TOKENS, description="the length, for kind fixed")  # fixed
    low: int | None = Field(None, ge=1, le=MAX_TOKENS, description="smallest length, for kind uniform")  # uniform
    high: int | None = Field(None, ge=1, le=MAX_TOKENS, description="largest length, for kind uniform")
    mean: float | None = Field(None, gt=0, le=MAX_TOKENS,
        description=("mean length, for kind normal or "
                     "lognormal"))  # normal / lognormal (mean of the distribution)
    std: float | None = Field(None, ge=0, le=MAX_TOKENS, description="standard deviation, for kind normal or lognormal")
    min: int = Field(1, ge=1, le=MAX_TOKENS, description="every drawn length is clamped to at least this")
    max: int = Field(32768, ge=1, le=MAX_TOKENS, description="every drawn length is clamped to at most this")

    @model_validator(mode="after")
    def _params(self) -> LengthDist:
        need = {"fixed": ["value"], "uniform": ["low", "high"], "normal": ["mean", "std"],
                "lognormal": ["mean", "std"]}[self.kind]
        missing = [n for n in need if getattr(self, n) is None]
        if missing:
            raise ValueError(f"{self.kind} distribution needs {', '.join(missing)}")
        if self.kind == "uniform" and self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError("low must be <= high")
        if self.min > self.max:
            raise ValueError("min must be <= max")
        return self


    @property
    def largest(self) -> int:
        """The largest length a draw can give."""
        top = {"fixed": self.value, "uniform": self.high}.get(self.kind) or self.max
        return min(top, self.max)


class ModalMix(_Strict):
    """Shares of each input modality; must sum to 1."""

    text: float = Field(1.0, ge=0, le=1, description="share of text-only requests")
    image: float = Field(0.0, ge=0, le=1, description="share of requests carrying an image")
    video: float = Field(0.0, ge=0, le=1, description="share of requests carrying a video")
    audio: float = Field(0.0, ge=0, le=1, description="share of requests carrying audio")

    @model_validator(mode="after")
    def _sums_to_one(self) -> ModalMix:
        total = self.text + self.image + self.video + self.audio
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"shares must sum to 1 (got {total:g})")
        return self


class MediaSpec(_Strict):
    image_width: int = Field(448, ge=16, le=8192, description="generated image width, pixels")
    image_height: int = Field(448, ge=16, le=8192, description="generated image height, pixels")
    image_format: Literal["png", "jpeg"] = Field("png", description="generated image encoding")
    video_frames: int = Field(8, ge=1, le=512, description="frames per generated video")
    video_width: int = Field(336, ge=16, le=4096, description="generated video width, pixels")
    video_height: int = Field(336, ge=16, le=4096, description="generated video height, pixels")
    audio_seconds: float = Field(5.0, gt=0, le=600, description="length of generated audio clips, seconds")


class SharedPrefix(_Strict):
    groups: int = Field(0, ge=0, le=MAX_REQUESTS, description="number of distinct system prompts")
    length: int = Field(512, ge=1, le=MAX_TOKENS, description="tokens in each shared system prompt")
    share: float = Field(0.0, ge=0, le=1, description="share of requests that start with one")


class Dataset(_Strict):
    path: str = Field(min_length=1,
        description=("file of prompts: relative paths are looked up in the profile's folder, then the "
                     "working directory"))
    format: Literal["auto", "jsonl", "sharegpt", "openai", "openai-batch", "lmsys", "mooncake", "azure"] = Field(
        "auto",
        description=("auto (guessed from the file's first entry, as `sweep dataset validate` does), jsonl (sweep's "
                     "own: one object per line, optional later turns), sharegpt (conversations, every human turn), "
                     "openai (chat-completions requests: the user messages and tool results are the turns), "
                     "openai-batch (an OpenAI Batch API request file), lmsys (LMSYS-Chat-1M rows), mooncake (a "
                     "token-length trace with block hash ids and timestamps) or azure (Azure's LLM inference trace "
                     "CSV: timestamps and token counts); docs/datasets.md"))
    output_lengths: Literal["dataset", "profile"] = Field("dataset", description=(
        "dataset: each turn asks for the file's own output length (an explicit output_len / max_tokens, else the "
        "recorded reply's length), and only turns without one draw from workload.output_len; profile: every turn "
        "draws from workload.output_len, whatever the file says"))
    on_bad_line: Literal["skip", "fail"] = Field("fail",
        description="skip malformed entries, or fail the profile on the first one")
    block_tokens: int = Field(512, ge=1, le=MAX_TOKENS,
        description="mooncake: tokens per hash id (equal ids are equal token blocks: the trace's prefix sharing)")
    order: Literal["auto", "file", "shuffle"] = Field("auto", description=(
        "the order entries are sent in: file, or shuffled by workload.seed; auto: file order when the entries carry "
        "send times (a trace: Mooncake \"timestamp\", JSONL \"send_at\"), else shuffled"))
    start_s: float = Field(0.0, ge=0, le=1e9, description=(
        "trace.start: entries sent before this many seconds into the file are skipped, so a study replays a window "
        "of a long trace at a chosen offset (timestamped entries only)"))
    overlong: Literal["refuse", "clip", "drop"] = Field("refuse", description=(
        "entries whose prompt plus requested output do not fit the server's context length: refuse the study at "
        "load with their count, clip (cut the prompt, then the output, to fit) or drop them; the counts clipped "
        "and dropped are in the report"))
    _resolved: Path | None = PrivateAttr(None)  # set by load_profile: where `path` was found

    @property
    def file(self) -> Path:
        """The dataset file load_profile found (the profile's folder, then the working directory)."""
        return self._resolved or Path(self.path)


MAX_TURNS = 256  # turns one session may have
MAX_FANOUT = 16  # parallel sub-requests one turn may issue


class ThinkTime(_Strict):
    """Seconds a user pauses between one turn's reply and the next turn."""

    kind: Literal["fixed", "uniform", "exponential"] = Field("fixed",
        description="fixed (value), uniform (low..high) or exponential (mean)")
    value: float = Field(0.0, ge=0, le=3600, description="the pause, for kind fixed")
    low: float = Field(0.0, ge=0, le=3600, description="shortest pause, for kind uniform")
    high: float = Field(0.0, ge=0, le=3600, description="longest pause, for kind uniform")
    mean: float = Field(0.0, ge=0, le=3600, description="mean pause, for kind exponential")

    @model_validator(mode="after")
    def _range(self) -> ThinkTime:
        if self.kind == "uniform" and self.low > self.high:
            raise ValueError("low must be <= high")
        return self


class Sessions(_Strict):
    """Multi-turn conversations: each closed-loop user (or each open-loop arrival) runs a session of turns."""

    turns: LengthDist = Field(LengthDist(kind="fixed", value=4),
        description=f"turns per session (a count distribution, at most {MAX_TURNS}; section workload.sessions.turns)")
    followup_len: LengthDist | None = Field(None, description=(
        "tokens of each later turn's new user message (section workload.sessions.followup_len); "
        "unset: workload.prompt_len"))
    think_time: ThinkTime = Field(ThinkTime(), description="pause before each later turn (section "
                                                           "workload.sessions.think_time)")
    fanout: LengthDist = Field(LengthDist(kind="fixed", value=1), description=(
        f"parallel sub-requests per turn, agent-style (at most {MAX_FANOUT}): each sends the conversation so far "
        "plus its own message, and the next turn waits for all of them (section workload.sessions.fanout)"))
    max_context: int = Field(32768, ge=16, le=MAX_TOKENS, description=(
        "a session ends before a turn whose prompt plus reply would pass this many tokens"))

    @model_validator(mode="after")
    def _bounds(self) -> Sessions:
        if self.turns.largest > MAX_TURNS:
            raise ValueError(f"turns can be up to {self.turns.largest}: at most {MAX_TURNS} (set turns.max)")
        if self.fanout.largest > MAX_FANOUT:
            raise ValueError(f"fanout can be up to {self.fanout.largest}: at most {MAX_FANOUT} (set fanout.max)")
        return self


class Workload(_Strict):
    seed: int = Field(0, ge=0, le=2**63 - 1,
        description="seed of every random draw (lengths, media, prefixes, open-loop schedules)")
    num_requests: int = Field(20000, ge=1, le=MAX_REQUESTS,
                              description="size of the replayed pool when workload.replay is on")
    mix: ModalMix = Field(ModalMix(), description="shares of each input modality (section workload.mix)")
    prompt_len: LengthDist = Field(LengthDist(kind="uniform", low=128, high=1024),
        description="prompt length in tokens (section workload.prompt_len)")
    output_len: LengthDist = Field(LengthDist(kind="uniform", low=64, high=512),
        description="output length in tokens, sent as the max new tokens (section workload.output_len)")
    shared_prefix: SharedPrefix = Field(SharedPrefix(),
        description="system prompts shared by a share of requests (section workload.shared_prefix)")
    media: MediaSpec = Field(MediaSpec(),
        description="shape of generated images, videos and audio (section workload.media)")
    dataset: Dataset | None = Field(None,
        description="prompts from a file instead of generated ones (section workload.dataset)")
    api: Literal["generate", "chat"] = Field("generate",
        description="generate (SGLang's /generate) or chat (/v1/chat/completions)")
    replay: StrictBool = Field(False, description=(
        "cycle the first num_requests requests (or the dataset's entries) instead of fresh ones: a server then "
        "sees requests again, and its prefix cache hits them"))
    sessions: Sessions | None = Field(None, description=(
        "multi-turn conversations instead of single requests (section workload.sessions): each turn sends the "
        "whole conversation so far, the server's own replies included, plus a new user message"))

    @model_validator(mode="after")
    def _sessions(self) -> Workload:
        if self.sessions is not None and self.replay:
            raise ValueError("workload.sessions and workload.replay cannot be combined: sessions are never replayed")
        return self
