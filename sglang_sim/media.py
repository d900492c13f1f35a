"""Media token accounting (Qwen2.5-VL rules) and deterministic placeholder ids for the radix cache."""

from __future__ import annotations

import base64
import binascii
import io
import zlib
from collections.abc import Sequence

BLOCK = 28  # one LLM token per 28x28 pixel block (14 px patches merged 2x2)
VIDEO_FRAMES_PER_TOKEN = 2  # temporal patch size 2
AUDIO_TOKENS_PER_S = 25  # Whisper-style 50 Hz encoder frames pooled by 2 (Qwen2-Audio)
PLACEHOLDER_BASE = 1_000_000  # outside any text vocabulary, so media never matches text


def image_tokens(width: int, height: int) -> int:
    """Resize to multiples of 28 (rounding), one token per block, plus vision start/end tokens."""
    return max(1, round(width / BLOCK)) * max(1, round(height / BLOCK)) + 2


def video_tokens(frames: int, width: int, height: int) -> int:
    groups = max(1, -(-frames // VIDEO_FRAMES_PER_TOKEN))
    return groups * max(1, round(width / BLOCK)) * max(1, round(height / BLOCK)) + 2


def audio_tokens(seconds: float) -> int:
    return max(1, int(seconds * AUDIO_TOKENS_PER_S)) + 2


def decode_data_url(url: str) -> bytes:
    """Bytes of a data: URL or bare base64 string; b'' when it is neither."""
    payload = url.split(",", 1)[1] if url.startswith("data:") and "," in url else url
    try:
        return base64.b64decode(payload, validate=False)
    except (binascii.Error, ValueError):
        return b""


def image_size(data: bytes) -> tuple[int, int]:
    """(width, height) from the PNG/JPEG header via Pillow (no full decode); (448, 448) if unreadable."""
    from PIL import Image  # local import: only the HTTP front needs Pillow

    try:
        with Image.open(io.BytesIO(data)) as im:
            return int(im.width), int(im.height)
    except Exception:  # noqa: BLE001 - any undecodable payload falls back to the profile default size
        return 448, 448


def wav_seconds(data: bytes) -> float:
    """Duration of a PCM WAV from its header; 5 s when the header is not a plain RIFF/WAVE."""
    if len(data) >= 44 and data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        byte_rate = int.from_bytes(data[28:32], "little")
        if byte_rate > 0:
            return max(0.0, (len(data) - 44) / byte_rate)
    return 5.0


def placeholder_ids(n: int, key: str | bytes) -> list[int]:
    """n ids derived from the media content, so the same image hits the prefix cache (as SGLang's pad values do)."""
    raw = key.encode() if isinstance(key, str) else key
    h = zlib.crc32(raw[:65536]) ^ len(raw)
    return [PLACEHOLDER_BASE + (h * 31 + i) % 1_000_000 for i in range(n)]


def count_items(kind: str, urls: Sequence[str]) -> tuple[int, list[int]]:
    """Token count and placeholder ids for media sent as data URLs (image, video frames or audio)."""
    blobs = [decode_data_url(u) for u in urls]
    if kind == "image":
        total, ids = 0, []
        for u, b in zip(urls, blobs, strict=True):
            w, h = image_size(b)
            n = image_tokens(w, h)
            total += n
            ids += placeholder_ids(n, u[-4096:])
        return total, ids
    if kind == "video":
        w, h = image_size(blobs[0]) if blobs else (336, 336)
        n = video_tokens(len(blobs), w, h)
        return n, placeholder_ids(n, "".join(u[-256:] for u in urls))
    n = audio_tokens(sum(wav_seconds(b) for b in blobs))
    return n, placeholder_ids(n, "".join(u[-1024:] for u in urls))
