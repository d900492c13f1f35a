"""What one entry of each dataset format becomes: a DatasetItem (turn 1) with its later user turns.

Formats (docs/datasets.md): `jsonl` (sweep's own: "prompt" or "input_ids", optional "output_len",
"ref_output_len", "images", "send_at", and "turns", a list of later turns with the same fields), `sharegpt`
(every human turn; each reply's length is its turn's reference output length) and `mooncake` (a token-length
trace: each hash id is one block of block_tokens tokens, a deterministic function of the id, so equal ids share
their tokens exactly) here; the chat-message formats (OpenAI requests, OpenAI Batch files, LMSYS-Chat-1M rows) in
sweep.workload.import_chat (a logged request's "send_at" or "created" its send time), Azure's trace CSVs in sweep.workload.import_azure, every format's parser in
sweep.workload.formats. A system message is the start of turn 1's text; a tool (function) result starts a turn of
its own, whose reply is that turn's output length. An unusable entry raises BadEntry with one line saying why."""

from __future__ import annotations

import base64
import binascii
import io
import math
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from PIL import Image

from sweep.core.types import JSON, MediaItem
from sweep.profile.base import MAX_TOKENS
from sweep.workload.blocks import BlockTokens, hash_block
from sweep.workload.media import image_from_file
from sweep.workload.tokens import TextEncoder

_HUMAN = ("human", "user")
_GPT = ("gpt", "assistant", "chatgpt", "bard", "model")
_TOOL_RESULTS = ("tool", "function", "observation", "ipython")  # a tool's result: a turn of its own
MAX_TOKEN_ID = 2**31 - 1  # token ids are int32 on the server (and 32-bit in the requests table's sent ids)
MAX_HASH_ID = 2**63 - 1
TokenIds = tuple[int, ...] | BlockTokens  # a prompt's ids: a tuple, or a mooncake line's blocks made when read
__all__ = ["BadEntry", "BlockTokens", "DatasetItem", "DatasetTurn", "ParseContext", "TokenIds",
           "TurnBuilder", "UserTurn", "hash_block", "image_url",
           "optional_int", "positive_int", "seconds"]
MAX_IMAGE_PIXELS = 89_478_485  # PIL's decompression-bomb bound: a larger image is refused, never decoded


@dataclass(frozen=True)
class DatasetTurn:
    """A later user turn of a conversation (turn 2, 3, ...): its new message and the reply length it expects."""

    input_ids: tuple[int, ...]
    text: str | None = None
    output_len: int | None = None  # explicit output length (jsonl "output_len", openai "max_tokens")
    ref_output_len: int | None = None  # tokens of the recorded reply, used when the profile sets no output_len
    images: tuple[MediaItem, ...] = ()


@dataclass(frozen=True)
class DatasetItem:
    """One usable dataset entry: turn 1's prompt ids (and text), output length and images; later turns in turns."""

    line: int  # 1-based line (jsonl) or entry number (ShareGPT JSON list)
    input_ids: TokenIds
    text: str | None = None  # the original prompt text, if the entry had one
    output_len: int | None = None  # explicit per-entry output length (jsonl "output_len")
    ref_output_len: int | None = None  # the recorded reply's tokens, used when the profile sets no output_len
    images: tuple[MediaItem, ...] = ()
    turns: tuple[DatasetTurn, ...] = ()  # the later user turns (the item itself is turn 1)
    send_at: float | None = None  # seconds after the file's first entry (mooncake "timestamp", jsonl "send_at")


class BadEntry(Exception):
    """One entry is unusable; the message says why, in one line."""


@dataclass(frozen=True)
class ParseContext:
    """What parsing an entry needs besides the entry: the folder images are relative to, the text encoder, and
    the tokens per mooncake hash block."""

    root: Path
    encoder: TextEncoder
    block_tokens: int = 512


def positive_int(value: JSON, name: str) -> int:
    """An int from 1 to MAX_TOKENS (bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadEntry(f'"{name}" must be an integer >= 1')
    if value > MAX_TOKENS:
        raise BadEntry(f'"{name}" must be at most {MAX_TOKENS:,} tokens (got {str(value)[:40]})')
    return value


def seconds(value: JSON, name: str, unit: str, scale: float = 1.0) -> float | None:
    """A finite number >= 0 (None for a missing one), divided by scale; BadEntry naming the unit otherwise."""
    if value is None:
        return None
    try:
        ok = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(float(value)) \
            and value >= 0
    except OverflowError:  # an integer past a float's range
        ok = False
    if not ok:
        raise BadEntry(f'"{name}" must be a number of {unit} >= 0')
    assert isinstance(value, int | float)
    return float(value) / scale


def _ids(value: JSON, name: str, top: int, where: str = "") -> tuple[int, ...]:
    """A non-empty list of integers from 0 to top."""
    good = tuple(i for i in value if isinstance(i, int) and not isinstance(i, bool) and 0 <= i <= top) \
        if isinstance(value, list) else ()
    if not isinstance(value, list) or not value or len(good) != len(value):
        big = isinstance(value, list) and any(isinstance(i, int) and not isinstance(i, bool) and i > top
                                              for i in value)
        raise BadEntry(f'{where}"{name}" must be a non-empty list of integers >= 0'
                       + (f" and <= {top:,}" if big else ""))
    return good


def optional_int(obj: dict[str, JSON], name: str) -> int | None:
    return positive_int(obj[name], name) if obj.get(name) is not None else None


@lru_cache(maxsize=1024)
def _image(path: str) -> MediaItem:
    """Load one image file once per process."""
    return image_from_file(path)


def _checked(item: MediaItem, what: str) -> MediaItem:
    if item.width * item.height > MAX_IMAGE_PIXELS:
        raise BadEntry(f"{what}: {item.width}x{item.height} pixels, more than {MAX_IMAGE_PIXELS:,} (a "
                       "decompression bomb?)")
    return item


def _image_file(rel: str, root: Path) -> MediaItem:
    p = Path(rel) if Path(rel).is_absolute() else root / rel
    if not p.is_file():
        raise BadEntry(f"image {rel}: no such file")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            return _checked(_image(str(p.resolve())), f"image {rel}")
    except (OSError, ValueError, Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise BadEntry(f"image {rel}: cannot decode ({' '.join(str(exc).split())[:200]})") from None


def _images(value: JSON, root: Path) -> tuple[MediaItem, ...]:
    """Resolve and load an "images" list (file paths relative to the dataset file's folder, or data: URLs)."""
    paths = [p for p in value if isinstance(p, str) and p] if isinstance(value, list) else []
    if not isinstance(value, list) or len(paths) != len(value):
        raise BadEntry('"images" must be a list of file paths')
    return tuple(image_url(rel, root) if rel.startswith("data:") else _image_file(rel, root) for rel in paths)


def image_url(url: str, root: Path) -> MediaItem:
    """An OpenAI image_url: a data: URL (kept as sent) or a local file; remote URLs are not fetched."""
    if url.startswith("data:"):
        head, _, payload = url.partition(",")
        try:
            raw = base64.b64decode(payload, validate=True) if head.endswith(";base64") else b""
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                with Image.open(io.BytesIO(raw)) as im:
                    width, height = im.size
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise BadEntry(f"image_url: more than {MAX_IMAGE_PIXELS:,} pixels (a decompression bomb?)") from None
        except (OSError, ValueError, binascii.Error):
            raise BadEntry("image_url: a data: URL that is not a base64 image") from None
        return _checked(MediaItem(kind="image", data_urls=(url,), width=width, height=height), "image_url")
    if url.startswith(("http://", "https://")):
        raise BadEntry(f"image_url {url[:60]}: remote images are not fetched (use a file path or a data: URL)")
    return _image_file(url.removeprefix("file://"), root)


def _prompt(obj: dict[str, JSON], ctx: ParseContext, where: str) -> tuple[tuple[int, ...], str | None]:
    """The prompt of a sweep-JSONL entry or turn: "input_ids" as given, or "prompt" text tokenized."""
    if "input_ids" in obj:
        input_ids = _ids(obj["input_ids"], "input_ids", MAX_TOKEN_ID, where)
        if len(input_ids) > MAX_TOKENS:
            raise BadEntry(f'{where}"input_ids" holds more than {MAX_TOKENS:,} tokens')
        return input_ids, None
    if "prompt" in obj:
        prompt = obj["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise BadEntry(f'{where}"prompt" must be a non-empty string')
        encoded = ctx.encoder.encode(prompt)
        if not encoded:
            raise BadEntry(f'{where}"prompt" has no tokens')
        return encoded, prompt
    raise BadEntry(f'{where}needs "prompt" or "input_ids"')


def _jsonl_turn(obj: JSON, k: int, ctx: ParseContext) -> DatasetTurn:
    where = f"turn {k}: "
    if not isinstance(obj, dict):
        raise BadEntry(f"{where}expected a JSON object")
    ids, text = _prompt(obj, ctx, where)
    try:
        return DatasetTurn(ids, text, optional_int(obj, "output_len"), optional_int(obj, "ref_output_len"),
                           _images(obj["images"], ctx.root) if "images" in obj else ())
    except BadEntry as bad:
        raise BadEntry(f"{where}{bad}") from None


def jsonl_item(obj: JSON, line: int, ctx: ParseContext) -> DatasetItem:
    """sweep's JSONL: {"prompt" | "input_ids", "output_len"?, "ref_output_len"?, "images"?, "send_at"?, "turns"?}."""
    if not isinstance(obj, dict):
        raise BadEntry("expected a JSON object")
    ids, text = _prompt(obj, ctx, "")
    send_at = seconds(obj.get("send_at"), "send_at", "seconds")
    turns = obj.get("turns", [])
    if not isinstance(turns, list):
        raise BadEntry('"turns" must be a list of turns')
    return DatasetItem(line=line, input_ids=ids, text=text, output_len=optional_int(obj, "output_len"),
                       ref_output_len=optional_int(obj, "ref_output_len"),
                       images=_images(obj["images"], ctx.root) if "images" in obj else (),
                       turns=tuple(_jsonl_turn(t, k, ctx) for k, t in enumerate(turns, start=2)),
                       send_at=send_at)


@dataclass
class UserTurn:
    """A turn being assembled from a conversation's messages: a user message, or a tool result (a request of its
    own: the model is called again with the result)."""

    text: str
    images: tuple[MediaItem, ...] = ()
    reply: int | None = None  # tokens of the first reply after it
    tool: bool = False


@dataclass
class TurnBuilder:
    """A conversation's turns, message by message: user messages and tool results start turns, the first reply
    after a turn is its reference output length, system text before the first turn starts turn 1."""

    turns: list[UserTurn] = field(default_factory=list)
    system: list[str] = field(default_factory=list)

    def user(self, text: str, images: tuple[MediaItem, ...] = ()) -> None:
        self.turns.append(UserTurn(text, images))

    def system_text(self, text: str) -> None:
        if not self.turns and text.strip():
            self.system.append(text)

    def reply(self, tokens: int) -> None:
        if self.turns and self.turns[-1].reply is None:
            self.turns[-1].reply = tokens

    def tool(self, text: str, where: str) -> None:
        """A tool/function result: the start of a turn of its own (results in a row are one turn)."""
        if not self.turns:
            raise BadEntry(f"{where}: a tool result before any user message")
        if not text.strip():
            raise BadEntry(f"{where}: a tool result with no text")
        last = self.turns[-1]
        if last.tool and last.reply is None:
            last.text = f"{last.text}\n{text}"
        else:
            self.turns.append(UserTurn(text, tool=True))

    def item(self, ctx: ParseContext, line: int, last_output: int | None = None) -> DatasetItem:
        """The DatasetItem: the system text starts turn 1; last_output is the last turn's explicit output length."""
        turns = self.turns
        if self.system:
            turns[0].text = "\n".join([*self.system, turns[0].text])
        made = [DatasetTurn(ctx.encoder.encode(t.text), t.text, None, t.reply or None, t.images) for t in turns]
        if last_output is not None:
            last = made[-1]
            made[-1] = DatasetTurn(last.input_ids, last.text, last_output, last.ref_output_len, last.images)
        first = made[0]
        return DatasetItem(line=line, input_ids=first.input_ids, text=first.text, output_len=first.output_len,
                           ref_output_len=first.ref_output_len, images=first.images, turns=tuple(made[1:]))


def sharegpt_item(obj: JSON, line: int, ctx: ParseContext) -> DatasetItem:
    """A ShareGPT conversation: every human turn, each with the length of the reply after it; a function call's
    text is a reply, an observation (a tool result) a turn of its own."""
    messages = obj.get("conversations") if isinstance(obj, dict) else None
    if not isinstance(obj, dict) or not isinstance(messages, list):
        raise BadEntry('expected an object with a "conversations" list')
    conv = TurnBuilder()
    for k, m in enumerate(messages, start=1):
        who = m.get("from") if isinstance(m, dict) else None
        said = m.get("value") if isinstance(m, dict) else None
        if who in _HUMAN:
            if not isinstance(said, str) or not said.split():
                raise BadEntry("first human turn has no text" if not conv.turns else f"human turn "
                               f"{len(conv.turns) + 1} has no text")
            conv.user(said)
        elif who in (*_GPT, "function_call") and isinstance(said, str):
            conv.reply(ctx.encoder.count(said))
        elif who in _TOOL_RESULTS and isinstance(said, str) and said.strip() and conv.turns:
            conv.tool(said, f"message {k}")
        elif who == "system" and isinstance(said, str):
            conv.system_text(said)
    if not conv.turns:
        raise BadEntry("no human turn")
    if "images" in obj:
        conv.turns[0].images = _images(obj["images"], ctx.root)
    return conv.item(ctx, line)


def mooncake_item(obj: JSON, line: int, ctx: ParseContext) -> DatasetItem:
    """A Mooncake trace line: input_length tokens from its hash blocks (the last one cut), output_length, and
    its timestamp (ms) as send_at in seconds (made relative to the first line by the loader). The tokens are
    BlockTokens: the line's ids, made into tokens when read."""
    if not isinstance(obj, dict):
        raise BadEntry("expected a JSON object")
    ts = seconds(obj.get("timestamp"), "timestamp", "milliseconds", 1000.0)
    if ts is None:
        raise BadEntry('"timestamp" must be a number of milliseconds >= 0')
    n_in = positive_int(obj.get("input_length"), "input_length")
    n_out = positive_int(obj.get("output_length"), "output_length")
    good = _ids(obj.get("hash_ids"), "hash_ids", MAX_HASH_ID)
    b = ctx.block_tokens
    if n_in > len(good) * b:
        raise BadEntry(f'"input_length" {n_in} is more than its {len(good)} hash blocks of {b} tokens hold')
    return DatasetItem(line=line, input_ids=BlockTokens(good, b, n_in), output_len=n_out, send_at=ts)
