"""Token counting as SGLang does it: the model folder's tokenizer.json and chat template, else whitespace words.

SGLang tokenizes a text prompt with the model's own tokenizer, and a chat request after rendering the
model's chat template (`add_generation_prompt=True`). The simulator does the same when --model-path holds a
tokenizer.json, so every client's prompt is counted the way a real server would count it, whatever words it
sent. A folder without one (the simulator does not need a model) falls back to one token per whitespace word
and says so in its log and in /server_info (`tokenizer`).

Output text is made of the model's one-token words (sglang_sim.lexicon), one per generated token with a leading
space, so a client that re-tokenizes the streamed text counts the tokens the server reports.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_sim.lexicon import SIM, from_tokenizer
from sglang_sim.media import count_items

# The fallback template: ChatML, what the shipped model folders use.
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
MEDIA_PARTS = {"image_url": "image", "video_url": "video", "audio_url": "audio", "input_audio": "audio"}
_MARK = "\x00media{}\x00"  # stands for one media item inside the rendered template; split out before encoding


def whitespace_ids(text: str) -> list[int]:
    """One id per whitespace-separated word, hashed to 3..999 (the fallback without a tokenizer)."""
    return [3 + zlib.crc32(w.encode()) % 997 for w in text.split()]


@dataclass(frozen=True)
class SimTokenizer:
    """encode(text) -> ids; chat(messages) -> (prompt ids, media tokens per kind); out_piece(i) -> (id, text)."""

    encode: Callable[[str], list[int]]
    template: Any  # a compiled jinja2 template
    words: tuple[str, ...]  # output words: words[i] is one token, also after a space
    word_ids: tuple[int, ...]  # the id of " " + words[i]
    source: str  # what counts the tokens, for the log and /server_info

    def chat(self, messages: Sequence[Any]) -> tuple[list[int], dict[str, int]]:
        """Prompt ids of a chat request: the chat template rendered, tokenized, media placeholders spliced in."""
        media_ids: list[list[int]] = []
        media: dict[str, int] = {}
        flat: list[dict[str, str]] = []
        for msg in messages:
            if not isinstance(msg, dict):
                continue
            content = msg.get("content")
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else \
                [p for p in (content or []) if isinstance(p, dict)]
            text: list[str] = []
            for part in parts:
                kind = MEDIA_PARTS.get(str(part.get("type")))
                if part.get("type") == "text":
                    text.append(str(part.get("text", "")))
                elif kind is not None:
                    field = part.get(part["type"])
                    url = (field.get("url") or field.get("data") or "") if isinstance(field, dict) else ""
                    urls = url if isinstance(url, list) else [url]
                    n, extra = count_items(kind, [str(u) for u in urls])
                    media[kind] = media.get(kind, 0) + n
                    text.append(_MARK.format(len(media_ids)))
                    media_ids.append(extra)
            flat.append({"role": str(msg.get("role", "user")), "content": "".join(text)})
        rendered = self.template.render(messages=flat, add_generation_prompt=True)
        ids: list[int] = []
        for i, piece in enumerate(rendered.split("\x00")):
            if i % 2 == 0:
                ids += self.encode(piece) if piece else []
            else:
                ids += media_ids[int(piece[len("media"):])]
        return ids, media

    def out_piece(self, token: int) -> tuple[int, str]:
        """The id and text of generated token number `token` (a pseudo-random id picks the word)."""
        k = token % len(self.words)
        return self.word_ids[k], " " + self.words[k]


def _template_text(folder: Path) -> str | None:
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    try:
        cfg = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    tmpl = cfg.get("chat_template") if isinstance(cfg, dict) else None
    return tmpl if isinstance(tmpl, str) else None


def load(model_path: str) -> SimTokenizer:
    """The model folder's tokenizer and chat template; whitespace words and ChatML where they are missing."""
    import jinja2

    folder = Path(model_path)
    env = jinja2.Environment(autoescape=False, keep_trailing_newline=True)
    template = env.from_string(_template_text(folder) or CHATML)
    tj = folder / "tokenizer.json"
    lex = from_tokenizer(str(folder)) if tj.is_file() else None
    if lex is None:
        words = SIM.words
        ids = tuple(whitespace_ids(w)[0] for w in words)
        return SimTokenizer(whitespace_ids, template, words, ids,
                            f"whitespace words (no usable tokenizer.json in {model_path})")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tj))

    def encode(text: str) -> list[int]:
        return list(tok.encode(text, add_special_tokens=True).ids)

    word_ids = tuple(e.ids[0] for e in tok.encode_batch([" " + w for w in lex.words], add_special_tokens=False))
    return SimTokenizer(encode, template, lex.words, word_ids, f"{tj}")
