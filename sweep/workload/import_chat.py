"""What a chat-message entry becomes (sweep.workload.importers has the DatasetItem): an OpenAI chat-completions
request (`openai`), a line of an OpenAI Batch API request file (`openai-batch`: its "body" is such a request, or a
completions one) and an LMSYS-Chat-1M row (`lmsys`: its "conversation" is such a message list).

The user messages are the turns, the first assistant message after a turn its reference output length; an
assistant's tool call (`tool_calls`, `function_call`) is a reply of the length of its calls' names and arguments;
a `tool`/`function` result is a turn of its own (the model is called again with it: the result is that request's
new context), and the assistant reply after it is that turn's output length. "max_tokens" (or
"max_completion_tokens") is the last turn's explicit output length; a logged request's "send_at" (seconds) or
"created" (Unix seconds) its send time (a batch body's too).
"""

from __future__ import annotations

import json
from dataclasses import replace

from sweep.core.types import JSON, MediaItem
from sweep.workload.importers import (
    BadEntry,
    DatasetItem,
    ParseContext,
    TurnBuilder,
    image_url,
    optional_int,
    positive_int,
    seconds,
)

_SYSTEM = ("system", "developer")
_TOOL_RESULTS = ("tool", "function", "ipython", "observation")
BATCH_URLS = ("/v1/chat/completions", "/v1/completions")


def _content(content: JSON, ctx: ParseContext, k: int) -> tuple[str, tuple[MediaItem, ...]]:
    """An OpenAI message's text and images: a string, or a list of text and image_url parts."""
    if content is None or isinstance(content, str):
        return content or "", ()
    if not isinstance(content, list):
        raise BadEntry(f"message {k}: content must be a string or a list of parts")
    texts, images = [], []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(str(part["text"]))
        elif kind == "image_url" and isinstance(part, dict):
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            if not isinstance(url, str) or not url:
                raise BadEntry(f"message {k}: image_url part has no url")
            try:
                images.append(image_url(url, ctx.root))
            except BadEntry as bad:
                raise BadEntry(f"message {k}: {bad}") from None
        else:
            raise BadEntry(f"message {k}: unknown content part {str(kind)!r} (text and image_url are read)")
    return "\n".join(texts), tuple(images)


def _function(call: JSON, k: int) -> str:
    """A function call's text as the model wrote it: its name and its arguments (a JSON string)."""
    fn = call.get("function") if isinstance(call, dict) and "function" in call else call
    name = fn.get("name") if isinstance(fn, dict) else None
    args = fn.get("arguments") if isinstance(fn, dict) else None
    if not isinstance(name, str) or not name or not isinstance(args, str | dict):
        raise BadEntry(f'message {k}: a tool call needs a "function" with a "name" and "arguments"')
    return f"{name} {args if isinstance(args, str) else json.dumps(args)}"


def _calls(m: dict[str, JSON], k: int) -> str:
    """The text of an assistant message's tool calls ("tool_calls" list or legacy "function_call"), "" without."""
    calls = m.get("tool_calls")
    if calls is not None and (not isinstance(calls, list) or not calls):
        raise BadEntry(f'message {k}: "tool_calls" must be a non-empty list of calls')
    texts = [_function(c, k) for c in calls or []]
    if m.get("function_call") is not None:
        texts.append(_function(m["function_call"], k))
    return "\n".join(texts)


def chat_turns(messages: JSON, ctx: ParseContext, name: str = "messages") -> TurnBuilder:
    """The turns of an OpenAI-style message list ({"role", "content"} objects); BadEntry when it has no user
    message or a message is unusable."""
    if not isinstance(messages, list) or not messages:
        raise BadEntry(f'expected an object with a non-empty "{name}" list')
    conv = TurnBuilder()
    for k, m in enumerate(messages, start=1):
        role = m.get("role") if isinstance(m, dict) else None
        if not isinstance(m, dict) or not isinstance(role, str):
            raise BadEntry(f'message {k}: expected an object with a "role"')
        text, images = _content(m.get("content"), ctx, k)
        if role == "user":
            if not text.strip():
                raise BadEntry(f"message {k}: a user message with no text")
            conv.user(text, images)
        elif role in ("assistant", "function_call"):  # function_call: a call written as its own message
            said = "\n".join(t for t in (text, _calls(m, k)) if t)
            conv.reply(ctx.encoder.count(said))
        elif role in _SYSTEM:
            conv.system_text(text)
        elif role in _TOOL_RESULTS:
            conv.tool(text, f"message {k}")
        else:
            raise BadEntry(f"message {k}: unknown role {role!r}")
    if not conv.turns:
        raise BadEntry("no user message")
    return conv


def _last_output(obj: dict[str, JSON]) -> int | None:
    key = "max_completion_tokens" if obj.get("max_completion_tokens") is not None else "max_tokens"
    return optional_int(obj, key)


def openai_item(obj: JSON, line: int, ctx: ParseContext) -> DatasetItem:
    """An OpenAI chat-completions request: user messages and tool results are turns; "max_tokens" (or
    "max_completion_tokens") the last turn's output length; "send_at" or "created" its send time."""
    if not isinstance(obj, dict):
        raise BadEntry('expected an object with a non-empty "messages" list')
    item = chat_turns(obj.get("messages"), ctx).item(ctx, line, _last_output(obj))
    at = _log_time(obj)
    return replace(item, send_at=at) if at is not None else item


def _log_time(obj: dict[str, JSON]) -> float | None:
    """A logged request's send time in seconds: its "send_at" (s), else "created" (Unix seconds, as OpenAI logs
    stamp a request); None when it has neither."""
    at = seconds(obj.get("send_at"), "send_at", "seconds")
    return at if at is not None else seconds(obj.get("created"), "created", "seconds")


def batch_item(obj: JSON, line: int, ctx: ParseContext) -> DatasetItem:
    """A line of an OpenAI Batch API request file: {"custom_id", "method": "POST", "url", "body"}; a
    /v1/chat/completions body is read as `openai`, a /v1/completions body's "prompt" is one turn."""
    if not isinstance(obj, dict):
        raise BadEntry("expected a JSON object")
    if "response" in obj and "body" not in obj:
        raise BadEntry('a Batch API output line (it has "response"), not a request: use the request file')
    if not isinstance(obj.get("custom_id"), str) or not obj["custom_id"]:
        raise BadEntry('"custom_id" must be a non-empty string')
    if obj.get("method") != "POST":
        raise BadEntry(f'"method" must be "POST" (got {str(obj.get("method"))[:40]!r})')
    url, body = obj.get("url"), obj.get("body")
    if url not in BATCH_URLS:
        raise BadEntry(f'"url" {str(url)[:60]!r} is not a generation endpoint (read: {", ".join(BATCH_URLS)})')
    if not isinstance(body, dict):
        raise BadEntry('"body" must be a JSON object (the request)')
    try:
        if url == "/v1/chat/completions":
            return openai_item(body, line, ctx)
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise BadEntry('"prompt" must be a non-empty string')
        conv = TurnBuilder()
        conv.user(prompt)
        return conv.item(ctx, line, _last_output(body))
    except BadEntry as bad:
        raise BadEntry(f"body: {bad}") from None


def lmsys_item(obj: JSON, line: int, ctx: ParseContext) -> DatasetItem:
    """An LMSYS-Chat-1M row: {"conversation_id", "model", "conversation": [{"role", "content"}...], "turn", ...};
    each user message a turn, each assistant reply its turn's reference output length. "turn" (the row's count
    of user turns) must match the conversation."""
    if not isinstance(obj, dict):
        raise BadEntry("expected a JSON object")
    conv = chat_turns(obj.get("conversation"), ctx, "conversation")
    if obj.get("turn") is not None:
        said = positive_int(obj["turn"], "turn")
        users = sum(1 for t in conv.turns if not t.tool)
        if said != users:
            raise BadEntry(f'"turn" is {said} but the conversation has {users} user '
                           f'{"turn" if users == 1 else "turns"} (a cut row?)')
    return conv.item(ctx, line)
