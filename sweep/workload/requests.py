"""Turn a Workload profile into a deterministic request stream, hash it, and render request bodies.

Every random draw comes from a private numpy Generator: one per block of BLOCK requests, seeded (w.seed, block
number), and one for the shared prefixes, so request i is a pure function of (profile, i) and the same profile gives a
byte-identical stream (for one numpy/Pillow version).
Prompt lengths count text tokens; media placeholder tokens come on top (see media_tokens).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Required, TypedDict

import numpy as np

from sweep.core.types import MediaItem, Modality, RequestSpec
from sweep.profile import LengthDist, Workload
from sweep.profile.context_len import (
    MIN_TAIL,  # unique tokens after a shared prefix longer than the drawn length
)
from sweep.workload.datasets import ID_HIGH, ID_LOW, DatasetItem, load_dataset
from sweep.workload.datasets import output_len as dataset_output_len
from sweep.workload.lexicon import SIM, Lexicon
from sweep.workload.media import POOL_SIZE, media_tokens, pooled_audio, pooled_image, pooled_video
from sweep.workload.overlong import Fitted, fit_context, from_start, in_file_order

log = logging.getLogger(__name__)

MODALITIES: tuple[Modality, ...] = ("text", "image", "video", "audio")
BLOCK = 32  # requests made together from one Generator (make_block)
MARKERS = {
    "image": "<|vision_start|><|image_pad|><|vision_end|>",
    "video": "<|vision_start|><|video_pad|><|vision_end|>",
    "audio": "<|audio_bos|><|AUDIO|><|audio_eos|>",  # Qwen2-Audio / Qwen2.5-Omni convention
}


class SamplingParams(TypedDict):
    max_new_tokens: int
    ignore_eos: bool
    temperature: float


class GenerateBody(TypedDict, total=False):
    """The JSON body of SGLang's /generate: token ids, or text with media markers and the media."""

    input_ids: list[int]
    text: str
    image_data: list[str]
    video_data: list[list[str]]
    audio_data: list[str]
    sampling_params: Required[SamplingParams]
    stream: Required[bool]


class UrlRef(TypedDict):
    url: str | list[str]


class ChatPart(TypedDict, total=False):
    """One part of a chat message's content: text or one medium by URL."""

    type: Required[str]
    text: str
    image_url: UrlRef
    video_url: UrlRef
    audio_url: UrlRef


class ChatMessage(TypedDict):
    role: str
    content: str | list[ChatPart]


class StreamOptions(TypedDict):
    include_usage: bool
    continuous_usage_stats: bool


class ChatBody(TypedDict, total=False):
    """The JSON body of /v1/chat/completions."""

    model: Required[str]
    messages: Required[list[ChatMessage]]
    max_tokens: Required[int]
    ignore_eos: Required[bool]
    temperature: Required[float]
    stream: Required[bool]
    stream_options: StreamOptions


RequestBody = GenerateBody | ChatBody

# Stream ids: adding a stream never perturbs the others.
_S_PFX_IDS, _S_ORDER, _S_REQUEST = 6, 8, 9  # 1-5 and 7 were per-purpose streams of the old pooled generator


def _rng(seed: int, stream: int) -> np.random.Generator:
    """The private Generator of one stream."""
    return np.random.default_rng([seed % 2**63, stream])


def render_ids(ids: Sequence[int] | np.ndarray, lexicon: Lexicon = SIM) -> str:
    """Deterministic text form of token ids: one word per id (sweep.workload.lexicon), single-space separated."""
    return lexicon.render(ids)


def sample_lengths(d: LengthDist, n: int, rng: np.random.Generator) -> np.ndarray:
    """n integer lengths from d, clamped to [d.min, d.max]; lognormal uses the distribution's own mean/std."""
    if d.kind == "fixed":
        x = np.full(n, float(d.value or 1))
    elif d.kind == "uniform":
        x = rng.integers(int(d.low or 1), int(d.high or 1) + 1, size=n).astype(np.float64)
    elif d.kind == "normal":
        x = rng.normal(float(d.mean or 1), float(d.std or 0), size=n)
    else:
        mean, std = float(d.mean or 1), float(d.std or 0)
        sigma2 = math.log1p((std / mean) ** 2)
        x = rng.lognormal(math.log(mean) - sigma2 / 2, math.sqrt(sigma2), size=n)
    lengths: np.ndarray = np.clip(np.rint(x), d.min, d.max).astype(np.int64)
    return lengths


@dataclass(frozen=True)
class WorkloadParts:
    """What every request of one workload shares, made once: the shared prefixes and the dataset entries."""

    prefixes: tuple[tuple[int, ...], ...]
    prefix_texts: tuple[str, ...]
    mix: tuple[float, ...]  # MODALITIES shares, normalised
    items: tuple[DatasetItem, ...] | None = None  # dataset entries, in file order (a trace) or a seeded shuffle
    fitted: Fitted | None = None  # how many entries were clipped or dropped to fit the context (dataset.overlong)


def workload_parts(w: Workload, base_dir: Path | None = None, lexicon: Lexicon = SIM,
                   context_len: int | None = None) -> WorkloadParts:
    """The shared prefixes (one seeded stream) and, for a dataset workload, its entries: from dataset.start_s on, in
    file order (a trace) or a seeded order, fitted to `context_len` by dataset.overlong (sweep.workload.overlong;
    OverlongError under refuse)."""
    sp = w.shared_prefix
    prefixes: tuple[tuple[int, ...], ...] = ()
    texts: tuple[str, ...] = ()
    if sp.groups > 0 and sp.share > 0:
        arr = _rng(w.seed, _S_PFX_IDS).integers(ID_LOW, ID_HIGH + 1, size=(sp.groups, sp.length))
        prefixes = tuple(tuple(row) for row in arr.tolist())
        texts = tuple(lexicon.render(row) for row in arr)
    items: tuple[DatasetItem, ...] | None = None
    fitted: Fitted | None = None
    if w.dataset is not None:
        loaded, problems = load_dataset(w.dataset, base_dir, model=lexicon.tokenizer or None)
        if problems:
            log.warning("%s: skipped %d bad entries: %s", w.dataset.path, len(problems), "; ".join(problems[:5]))
        loaded = from_start(loaded, w.dataset)
        if context_len is not None:
            loaded, fitted = fit_context(loaded, w, context_len)
        if in_file_order(loaded, w.dataset):
            items = tuple(loaded)
        else:
            order = _rng(w.seed, _S_ORDER).permutation(len(loaded))
            items = tuple(loaded[int(j)] for j in order)
    p = np.array([w.mix.text, w.mix.image, w.mix.video, w.mix.audio], dtype=np.float64)
    return WorkloadParts(prefixes, texts, tuple((p / p.sum()).tolist()), items, fitted)


def make_block(w: Workload, parts: WorkloadParts, block: int, *, lexicon: Lexicon = SIM,
               pool_size: int = POOL_SIZE) -> list[RequestSpec]:
    """Requests block*BLOCK .. block*BLOCK + BLOCK - 1 of the workload, each labelled with its own number.

    Request c is a pure function of (w.seed, c): block c // BLOCK has a private Generator seeded (seed, request
    stream, block) that draws, for the whole block in a fixed order, output lengths, modalities, shared-prefix
    flags and groups, prompt lengths, then the tail ids (one Generator per block, not per request: seeding one
    costs about as much as making a request). A dataset workload takes entry c % len(entries) of its seeded
    shuffled order; media come round-robin from the pool by c.
    """
    n, first = BLOCK, block * BLOCK
    rng = np.random.default_rng([w.seed % 2**63, _S_REQUEST, block])
    out = sample_lengths(w.output_len, n, rng).tolist()
    modal = np.minimum(np.searchsorted(np.cumsum(parts.mix), rng.random(n), side="right"), len(MODALITIES) - 1)
    sp = w.shared_prefix
    flags = (rng.random(n) < sp.share) if parts.prefixes else np.zeros(n, dtype=bool)
    groups = rng.integers(0, max(sp.groups, 1), size=n).tolist()
    plen = sp.length if parts.prefixes else 0
    lens = sample_lengths(w.prompt_len, n, rng)
    tails: list[tuple[tuple[int, ...], str, tuple[MediaItem, ...]]] = []
    if parts.items is not None:
        for k in range(n):
            item = parts.items[(first + k) % len(parts.items)]
            ids = item.input_ids[: max(w.prompt_len.max - plen, MIN_TAIL) if flags[k] else w.prompt_len.max]
            text = item.text if item.text is not None and len(ids) == len(item.input_ids) else lexicon.render(ids)
            out[k] = dataset_output_len(item, w.dataset, out[k]) if w.dataset is not None else out[k]
            tails.append((ids, text, item.images))
    else:
        tail_len = np.where(flags, np.maximum(lens - plen, MIN_TAIL), lens)
        ends = np.cumsum(tail_len)
        flat = rng.integers(ID_LOW, ID_HIGH + 1, size=int(ends[-1]))
        flat_list = flat.tolist()
        tails = [(tuple(flat_list[a:b]), lexicon.render(flat[a:b]), ())
                 for a, b in zip((ends - tail_len).tolist(), ends.tolist(), strict=True)]
    specs = []
    for k, (ids, text, media) in enumerate(tails):
        c = first + k
        modality: Modality = "image" if media else MODALITIES[int(modal[k])]
        if not media and modality != "text":
            media = media_for(w, modality, c, pool_size)
        group = groups[k] if flags[k] else None
        if group is not None:
            ids, text = parts.prefixes[group] + ids, parts.prefix_texts[group] + " " + text
        specs.append(RequestSpec(index=c, input_ids=ids, output_tokens=int(out[k]), modality=modality, media=media,
                                 prefix_group=group, text=text))
    return specs


def media_for(w: Workload, modality: str, slot: int, pool_size: int = POOL_SIZE) -> tuple[MediaItem, ...]:
    """Pooled media item number `slot` of this modality."""
    m, slot = w.media, slot % pool_size
    if modality == "image":
        return (pooled_image(w.seed, slot, m.image_width, m.image_height, m.image_format),)
    if modality == "video":
        return (pooled_video(w.seed, slot, m.video_frames, m.video_width, m.video_height),)
    if modality == "audio":
        return (pooled_audio(w.seed, slot, float(m.audio_seconds)),)
    return ()


def warm_media_pool(w: Workload, pool_size: int = POOL_SIZE) -> None:
    """Encode every pooled media item of each modality the mix sends (each is encoded once per process)."""
    for modality in MODALITIES[1:]:
        if getattr(w.mix, modality) > 0:
            for slot in range(pool_size):
                media_for(w, modality, slot, pool_size)


def build_workload(w: Workload, base_dir: Path | None = None, *, pool_size: int = POOL_SIZE,
                   lexicon: Lexicon = SIM) -> list[RequestSpec]:
    """The first w.num_requests requests of the workload's stream (dataset path relative to base_dir).

    The token ids are the workload; lexicon turns them into the text that text-taking APIs send (the server's
    own tokenizer words, so text prompts have the token counts the profile asked for: sweep.workload.lexicon). A study
    does not send this list: it sends sweep.workload.stream.RequestStream, which makes requests on demand and never
    repeats one on a server unless the profile sets workload.replay; this list is the replayed pool then.
    """
    parts = workload_parts(w, base_dir, lexicon)
    blocks = -(-w.num_requests // BLOCK)
    return [spec for b in range(blocks) for spec in make_block(w, parts, b, lexicon=lexicon, pool_size=pool_size)
            ][: w.num_requests]


def workload_digest(specs: Sequence[RequestSpec]) -> str:
    """sha256 over a canonical serialisation of the specs, media bytes included."""
    h = hashlib.sha256()
    url_memo: dict[str, str] = {}
    for s in specs:
        media = []
        for m in s.media:
            urls = []
            for u in m.data_urls:
                d = url_memo.get(u)
                if d is None:
                    d = url_memo[u] = hashlib.sha256(u.encode("ascii", "surrogateescape")).hexdigest()
                urls.append(d)
            media.append([m.kind, m.width, m.height, m.seconds, urls])
        head = [s.index, s.output_tokens, s.modality, s.prefix_group, len(s.input_ids), media]
        text = (s.text or "").encode("utf-8")
        ids = array("I", s.input_ids)
        if sys.byteorder == "big":
            ids.byteswap()
        h.update(json.dumps(head, separators=(",", ":")).encode())
        h.update(len(text).to_bytes(8, "little") + text)
        h.update(ids.tobytes())
    return h.hexdigest()


def estimated_prompt_tokens(spec: RequestSpec) -> int:
    """Text tokens plus media placeholder tokens, each item with its 2 start/end marker tokens."""
    extra = sum(media_tokens(m) + 2 for m in spec.media)
    return spec.prompt_tokens + extra


def _split_text(spec: RequestSpec, prefix_len: int) -> tuple[str, str]:
    """(shared-prefix text, rest) when prefix_len > 0 and the spec has a prefix; else ("", text)."""
    text = spec.text if spec.text is not None else render_ids(spec.input_ids)
    if prefix_len <= 0 or spec.prefix_group is None:
        return "", text
    words = text.split(" ", prefix_len)
    return " ".join(words[:prefix_len]), (words[prefix_len] if len(words) > prefix_len else "")


def generate_body(spec: RequestSpec, stream: bool = True, *, prefix_len: int = 0) -> GenerateBody:
    """Body for SGLang's native /generate; prefix_len > 0 puts media after the shared prefix text."""
    params: SamplingParams = {"max_new_tokens": spec.output_tokens, "ignore_eos": True, "temperature": 0}
    if not spec.media:
        return {"input_ids": list(spec.input_ids), "sampling_params": params, "stream": stream}
    head, rest = _split_text(spec, prefix_len)
    markers = "".join(MARKERS[m.kind] for m in spec.media)
    body: GenerateBody = {"text": (head + " " + markers + rest) if head else markers + rest,
                          "sampling_params": params, "stream": stream}
    return with_media_data(body, spec.media)


def with_media_data(body: GenerateBody, media: Sequence[MediaItem]) -> GenerateBody:
    """/generate's image_data, video_data and audio_data for these media, in order (the text carries their markers)."""
    images = [m.data_urls[0] for m in media if m.kind == "image"]
    videos = [list(m.data_urls) for m in media if m.kind == "video"]
    audios = [m.data_urls[0] for m in media if m.kind == "audio"]
    if images:
        body["image_data"] = images
    if videos:
        body["video_data"] = videos
    if audios:
        body["audio_data"] = audios
    return body


def user_content(media: Sequence[MediaItem], text: str) -> list[ChatPart]:
    """A chat user message's content: each medium by URL, then the text."""
    content: list[ChatPart] = []
    for m in media:
        url: UrlRef = {"url": list(m.data_urls) if m.kind == "video" else m.data_urls[0]}
        if m.kind == "image":
            content.append({"type": "image_url", "image_url": url})
        elif m.kind == "video":
            content.append({"type": "video_url", "video_url": url})
        else:
            content.append({"type": "audio_url", "audio_url": url})
    content.append({"type": "text", "text": text})
    return content


def chat_body(spec: RequestSpec, model: str, stream: bool = True, *, prefix_len: int = 0,
              history: Sequence[ChatMessage] | None = None) -> ChatBody:
    """Body for /v1/chat/completions; prefix_len > 0 sends the shared prefix as a system message. history: the
    messages before this one (a session's conversation so far), sent instead of the system message."""
    head, rest = _split_text(spec, prefix_len) if history is None else ("", spec.text or "")
    messages: list[ChatMessage] = list(history or ([{"role": "system", "content": head}] if head else []))
    messages.append({"role": "user", "content": user_content(spec.media, rest)})
    body: ChatBody = {"model": model, "messages": messages, "max_tokens": spec.output_tokens,
                      "ignore_eos": True, "temperature": 0, "stream": stream}
    if stream:
        # continuous usage: every content chunk says how many tokens it completes (one chunk can hold several)
        body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    return body
