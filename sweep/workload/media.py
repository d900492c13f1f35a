"""Locally made, deterministic media payloads (PNG/JPEG images, JPEG-frame videos, WAV audio) and token estimates.

Media are pooled: a pool of POOL_SIZE distinct items per kind and seed is encoded once per process and
reused round-robin, so building 20k requests costs a handful of encodes. Caveat: SGLang derives the
image-token pad values (and its multimodal embedding cache key) from a hash of the pixels, so a request
that reuses a pooled image can hit the radix/embedding cache for its image tokens. Raise the pool size
(`pool_size=` on build_workload) when the encoder load itself is what is measured.
"""

from __future__ import annotations

import base64
import io
import math
import wave
from functools import lru_cache

import numpy as np
from PIL import Image

from sweep.core.types import MediaItem

POOL_SIZE = 16
AUDIO_RATE = 16000

# Qwen2.5-VL (models/qwen2.5-vl-7b-shape/preprocessor_config.json): patch 14, merge 2 -> 28 px per token.
VL_FACTOR = 28
VL_MIN_PIXELS = 3136
VL_MAX_PIXELS = 12845056
VL_TEMPORAL_PATCH = 2
# Whisper-style audio encoders (Qwen2-Audio, Qwen2.5-Omni): 16 kHz, 10 ms mel hop = 100 frames/s, conv
# stride 2 -> 50/s, then a stride-2 pooling -> 25 tokens per second of audio.
AUDIO_TOKENS_PER_SECOND = 25

_MIME = {"png": "image/png", "jpeg": "image/jpeg"}


def _rng(seed: int, *stream: int) -> np.random.Generator:
    """A private numpy Generator for (seed, stream...); never the global RNG."""
    return np.random.default_rng([seed % 2**63, *stream])


def _pixels(rng: np.random.Generator, width: int, height: int, phase: float = 0.0) -> np.ndarray:
    """A colour gradient with mild noise: compresses like a photo, not like pure noise."""
    c0, c1, c2 = rng.uniform(0, 255, size=(3, 3))
    y = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None, None]
    x = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :, None]
    x = (x + phase) % 1.0
    img = c0 + (c1 - c0) * x + (c2 - c0) * y
    img = img + rng.normal(0.0, 12.0, size=(height, width, 3)).astype(np.float32)
    pixels: np.ndarray = np.clip(img, 0, 255).astype(np.uint8)
    return pixels


def _encode(arr: np.ndarray, fmt: str) -> bytes:
    """Encode an RGB array as PNG or JPEG with pinned settings (byte-stable for one Pillow version)."""
    buf = io.BytesIO()
    im = Image.fromarray(arr, "RGB")
    if fmt == "png":
        im.save(buf, format="PNG", compress_level=6, optimize=False)
    else:
        im.save(buf, format="JPEG", quality=90, subsampling=0, optimize=False)
    return buf.getvalue()


def _data_url(mime: str, payload: bytes) -> str:
    """A base64 data URL."""
    return f"data:{mime};base64," + base64.b64encode(payload).decode("ascii")


@lru_cache(maxsize=256)
def pooled_image(seed: int, slot: int, width: int, height: int, fmt: str) -> MediaItem:
    """Image number `slot` of the (seed, size, format) pool."""
    arr = _pixels(_rng(seed, 101, slot), width, height)
    return MediaItem(kind="image", data_urls=(_data_url(_MIME[fmt], _encode(arr, fmt)),),
                     width=width, height=height)


@lru_cache(maxsize=64)
def pooled_video(seed: int, slot: int, frames: int, width: int, height: int) -> MediaItem:
    """Video number `slot` of the pool: `frames` JPEG frames of a drifting gradient."""
    rng = _rng(seed, 202, slot)
    urls = []
    for f in range(frames):
        arr = _pixels(_rng(seed, 203, slot), width, height, phase=f / frames)
        arr = np.clip(arr.astype(np.int16) + rng.integers(-6, 7, size=arr.shape), 0, 255).astype(np.uint8)
        urls.append(_data_url("image/jpeg", _encode(arr, "jpeg")))
    return MediaItem(kind="video", data_urls=tuple(urls), width=width, height=height)


@lru_cache(maxsize=64)
def pooled_audio(seed: int, slot: int, seconds: float) -> MediaItem:
    """Audio clip number `slot` of the pool: a 16 kHz mono 16-bit WAV tone plus noise."""
    rng = _rng(seed, 303, slot)
    n = max(1, int(round(seconds * AUDIO_RATE)))
    t = np.arange(n, dtype=np.float64) / AUDIO_RATE
    freq = 180.0 + 40.0 * slot + rng.uniform(0, 20)
    sig = 0.3 * np.sin(2 * math.pi * freq * t) + 0.05 * rng.standard_normal(n)
    pcm = (np.clip(sig, -1, 1) * 32767).astype("<i2").tobytes()
    buf = io.BytesIO()
    with wave.open(buf, "wb") as wf:
        wf.setnchannels(1)
        wf.setsampwidth(2)
        wf.setframerate(AUDIO_RATE)
        wf.writeframes(pcm)
    return MediaItem(kind="audio", data_urls=(_data_url("audio/wav", buf.getvalue()),), seconds=n / AUDIO_RATE)


def image_from_file(path: str) -> MediaItem:
    """Wrap an image file as a data-URL MediaItem, keeping its original bytes."""
    with open(path, "rb") as fh:
        payload = fh.read()
    with Image.open(io.BytesIO(payload)) as im:
        width, height = im.size
        fmt = (im.format or "PNG").lower()
    mime = {"jpeg": "image/jpeg", "png": "image/png", "webp": "image/webp", "gif": "image/gif"}.get(fmt)
    if mime is None:
        raise ValueError(f"unsupported image format {fmt}")
    return MediaItem(kind="image", data_urls=(_data_url(mime, payload),), width=width, height=height)


def smart_resize(height: int, width: int, factor: int = VL_FACTOR, min_pixels: int = VL_MIN_PIXELS,
                 max_pixels: int = VL_MAX_PIXELS) -> tuple[int, int]:
    """Qwen2-VL's resize: round each side to a multiple of `factor`, then fit the pixel budget."""
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def image_grid_tokens(width: int, height: int) -> int:
    """<|image_pad|> tokens for one image: one per 28x28 block after Qwen's smart resize."""
    h_bar, w_bar = smart_resize(height, width)
    return (h_bar // VL_FACTOR) * (w_bar // VL_FACTOR)


def media_tokens(item: MediaItem) -> int:
    """Estimated placeholder tokens of one media item (pads only; +2 start/end markers not counted)."""
    if item.kind == "image":
        return image_grid_tokens(item.width, item.height)
    if item.kind == "video":
        temporal = math.ceil(len(item.data_urls) / VL_TEMPORAL_PATCH)
        return temporal * image_grid_tokens(item.width, item.height)
    return math.ceil(item.seconds * AUDIO_TOKENS_PER_SECOND)
