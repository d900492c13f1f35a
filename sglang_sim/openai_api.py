"""The simulator's OpenAI-compatible endpoints, shaped as SGLang 0.5's serving_chat.py / serving_completions.py.

- /v1/chat/completions: the prompt is the model's chat template, tokenized (sglang_sim.tokenizer). A stream
  sends the `role: assistant` chunk together with the first token (SGLang emits it on the first output of
  the generation, not on arrival), then one chunk per server update (several tokens with --stream-interval),
  a finish chunk, an optional usage chunk, `[DONE]`.
- /v1/completions: `prompt` is a string or a list of token ids; max_tokens defaults to 16. A stream sends one
  chunk per update with the finish reason on the last one, an optional usage chunk, `[DONE]`.
- stream_options: include_usage adds the final usage chunk; continuous_usage_stats puts the cumulative usage
  on every content chunk.
- A prompt the server cannot take (longer than the context) is an HTTP 400 before any stream starts.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from sglang_sim.stream import ApiHost, Stream


def error_response(message: str, code: int = 400) -> JSONResponse:
    """SGLang's create_error_response shape."""
    return JSONResponse({"object": "error", "message": message, "type": "BadRequestError", "param": None,
                         "code": code}, code)


def finish_reason(r: Any) -> str:
    return "length" if (r.finish_reason or {}).get("type") == "length" else "abort"


def running_usage(r: Any, st: Stream) -> dict[str, Any]:
    """continuous_usage_stats: UsageProcessor.calculate_token_usage of the tokens so far."""
    return {"prompt_tokens": r.prompt_len, "completion_tokens": len(st.ids),
            "total_tokens": r.prompt_len + len(st.ids), "reasoning_tokens": 0, "prompt_tokens_details": None}


def usage(sim: ApiHost, r: Any, st: Stream, media: dict[str, int]) -> dict[str, Any]:
    """The final usage object: prompt_tokens_details only with --enable-cache-report or media."""
    details: dict[str, Any] | None = None
    if sim.info.get("enable_cache_report") or media:
        details = {"cached_tokens": r.cached_tokens if sim.info.get("enable_cache_report") else 0}
        details.update({f"{k}_tokens": v for k, v in media.items()})
    return dict(running_usage(r, st), prompt_tokens_details=details)


def _stream_options(body: dict[str, Any]) -> tuple[bool, bool]:
    opts = body.get("stream_options") or {}
    return bool(opts.get("include_usage")), bool(opts.get("continuous_usage_stats"))


def _submitted(sim: ApiHost, ids: list[int], max_new: int, media: dict[str, int],
               body: dict[str, Any]) -> tuple[Stream, Any] | Response:
    """The request handed to the engine, or the 400 of one the server refused before any output."""
    st, r = sim.submit(ids, max_new, media, bool(body.get("stream")), body.get("rid"))
    if r.status == "aborted" and not st.ids:
        sim.close(st, r)
        return error_response(str((r.finish_reason or {}).get("message", "aborted")))
    return st, r


def _max_tokens(body: dict[str, Any], default: int) -> int | Response:
    raw = body.get("max_completion_tokens") or body.get("max_tokens") or default
    try:
        return int(raw)
    except (TypeError, ValueError):
        return error_response(f"max_tokens must be an integer, got {raw!r}")


async def chat(sim: ApiHost, request: Request) -> Response:
    body = await sim.body(request)
    if isinstance(body, Response):
        return body
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return error_response("Messages cannot be empty.")
    ids, media = sim.tokenizer.chat(messages)
    max_new = _max_tokens(body, 128)
    if isinstance(max_new, Response):
        return max_new
    submitted = _submitted(sim, ids, max_new, media, body)
    if isinstance(submitted, Response):
        return submitted
    st, r = submitted
    cid, created = f"chatcmpl-{st.rid[:24]}", int(time.time())
    model = body.get("model") or sim.model_name
    if body.get("stream"):
        return StreamingResponse(_chat_stream(sim, st, r, cid, created, model, body, media),
                                 media_type="text/event-stream")
    try:
        await sim.whole_output(st, r)
        return JSONResponse({"id": cid, "object": "chat.completion", "created": created, "model": model,
                             "choices": [{"index": 0, "message": {"role": "assistant", "content": st.text.strip()},
                                          "logprobs": None, "finish_reason": finish_reason(r), "matched_stop": None}],
                             "usage": usage(sim, r, st, media), "metadata": {"weight_version": "default"}})
    finally:
        sim.close(st, r)


async def _chat_stream(sim: ApiHost, st: Stream, r: Any, cid: str, created: int, model: str,
                       body: dict[str, Any], media: dict[str, int]) -> AsyncIterator[str]:
    include_usage, continuous = _stream_options(body)

    def chunk(delta: dict[str, Any], reason: str | None, use: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason,
                             "matched_stop": None}], "usage": use}

    try:
        sent_chars, first = 0, True
        async for n, done in sim.updates(st):
            st.grow(n)
            if first:  # SGLang sends the role chunk with the first output of the generation
                first = False
                yield sim.sse(chunk({"role": "assistant", "content": ""}, None))
            piece = st.text[sent_chars:]
            sent_chars = len(st.text)
            if piece:
                yield sim.sse(chunk({"content": piece}, None, running_usage(r, st) if continuous else None))
            if done:
                yield sim.sse(chunk({}, finish_reason(r)))
        if include_usage:
            yield sim.sse({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                            "choices": [], "usage": usage(sim, r, st, media)})
        yield "data: [DONE]\n\n"
    finally:
        sim.close(st, r)


async def completions(sim: ApiHost, request: Request) -> Response:
    body = await sim.body(request)
    if isinstance(body, Response):
        return body
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str) and prompt:
        ids = sim.tokenizer.encode(prompt)
    elif isinstance(prompt, list) and prompt and all(isinstance(x, int) and not isinstance(x, bool) for x in prompt):
        ids = [int(x) for x in prompt]
    elif isinstance(prompt, list) and prompt:
        return error_response("the simulator serves one prompt per /v1/completions request (no batches)")
    else:
        return error_response("Prompt cannot be empty")
    max_new = _max_tokens(body, 16)
    if isinstance(max_new, Response):
        return max_new
    submitted = _submitted(sim, ids, max_new, {}, body)
    if isinstance(submitted, Response):
        return submitted
    st, r = submitted
    cid, created = f"cmpl-{st.rid[:24]}", int(time.time())
    model = body.get("model") or sim.model_name
    if body.get("stream"):
        return StreamingResponse(_completion_stream(sim, st, r, cid, created, model, body),
                                 media_type="text/event-stream")
    try:
        await sim.whole_output(st, r)
        return JSONResponse({"id": cid, "object": "text_completion", "created": created, "model": model,
                             "choices": [{"index": 0, "text": st.text, "logprobs": None,
                                          "finish_reason": finish_reason(r), "matched_stop": None}],
                             "usage": usage(sim, r, st, {}), "metadata": {"weight_version": "default"}})
    finally:
        sim.close(st, r)


async def _completion_stream(sim: ApiHost, st: Stream, r: Any, cid: str, created: int, model: str,
                             body: dict[str, Any]) -> AsyncIterator[str]:
    include_usage, continuous = _stream_options(body)
    try:
        sent_chars = 0
        async for n, done in sim.updates(st):
            st.grow(n)
            piece = st.text[sent_chars:]
            sent_chars = len(st.text)
            yield sim.sse({"id": cid, "object": "text_completion", "created": created, "model": model,
                            "choices": [{"index": 0, "text": piece, "logprobs": None,
                                         "finish_reason": finish_reason(r) if done else None, "matched_stop": None}],
                            "usage": running_usage(r, st) if continuous else None})
        if include_usage:
            yield sim.sse({"id": cid, "object": "text_completion", "created": created, "model": model,
                            "choices": [], "usage": usage(sim, r, st, {})})
        yield "data: [DONE]\n\n"
    finally:
        sim.close(st, r)
