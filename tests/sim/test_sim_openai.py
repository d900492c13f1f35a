"""The simulator's OpenAI endpoints and token counting, as SGLang does them (serving_chat.py, serving_completions.py).

Peer clients (bench_serving, genai-bench, vLLM's bench) use /v1/completions and count prompts with the model's
tokenizer; the simulator used to 404 the former and count whitespace words.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import jinja2
import pytest
from tokenizers import Tokenizer

from tests.simserver import sim_server

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "llama3-8b-shape"
TOK = Tokenizer.from_file(str(MODEL / "tokenizer.json"))


def n_tokens(text: str) -> int:
    return len(TOK.encode(text).ids)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with sim_server("--sim-speed", "4", "--stream-interval", "2") as u:
        yield u


def events(url: str, path: str, body: dict[str, object]) -> list[tuple[float, dict[str, object] | str]]:
    """(receive time, parsed event) of a streamed response, [DONE] as the string."""
    out: list[tuple[float, dict[str, object] | str]] = []
    with httpx.stream("POST", url + path, json=body, timeout=30) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line.startswith("data: "):
                data = line[len("data: "):]
                out.append((time.perf_counter(), data if data == "[DONE]" else json.loads(data)))
    return out


def test_completions_non_streaming_has_sglang_shape(url: str) -> None:
    text = "hello world, how are you"
    r = httpx.post(url + "/v1/completions", json={"model": "m", "prompt": text}, timeout=30)
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "text_completion" and body["model"] == "m" and body["id"].startswith("cmpl-")
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length" and choice["index"] == 0
    usage = body["usage"]
    assert usage["completion_tokens"] == 16  # max_tokens defaults to 16 for completions
    assert usage["prompt_tokens"] == n_tokens(text) != len(text.split())  # the model's tokenizer, not words
    assert usage["total_tokens"] == usage["prompt_tokens"] + 16
    assert n_tokens(choice["text"]) == 16  # re-tokenizing the output gives the count the server reports
    ids = httpx.post(url + "/v1/completions", json={"prompt": [5, 6, 7, 8], "max_tokens": 3}, timeout=30).json()
    assert ids["usage"]["prompt_tokens"] == 4 and ids["usage"]["completion_tokens"] == 3


def test_completions_stream_with_continuous_usage(url: str) -> None:
    body = {"prompt": "tell me a story", "max_tokens": 9, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    evs = [e for _, e in events(url, "/v1/completions", body)]
    assert evs[-1] == "[DONE]"
    chunks = [e for e in evs[:-1] if isinstance(e, dict) and e["choices"]]
    assert all(c["object"] == "text_completion" for c in chunks)
    counts = [c["usage"]["completion_tokens"] for c in chunks]
    assert counts == sorted(counts) and counts[0] == 1 and counts[-1] == 9
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "length"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    final = evs[-2]
    assert isinstance(final, dict) and final["choices"] == [] and final["usage"]["completion_tokens"] == 9
    assert n_tokens("".join(str(c["choices"][0]["text"]) for c in chunks)) == 9


def test_completions_rejects_an_empty_prompt_and_too_long_input(url: str) -> None:
    assert httpx.post(url + "/v1/completions", json={"prompt": ""}, timeout=10).status_code == 400
    long = httpx.post(url + "/v1/completions", json={"prompt": [5] * 40000, "stream": True}, timeout=10)
    assert long.status_code == 400 and long.json()["object"] == "error"


def test_chat_prompt_is_the_rendered_template_tokenized(url: str) -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "what is a knee?"}]
    r = httpx.post(url + "/v1/chat/completions", json={"messages": messages, "max_tokens": 4}, timeout=30).json()
    tmpl = jinja2.Environment(keep_trailing_newline=True).from_string((MODEL / "chat_template.jinja").read_text())
    rendered = tmpl.render(messages=messages, add_generation_prompt=True)
    assert r["usage"]["prompt_tokens"] == n_tokens(rendered)
    assert n_tokens(" " + r["choices"][0]["message"]["content"]) == 4


def test_chat_role_chunk_comes_with_the_first_token(url: str) -> None:
    """SGLang sends the role chunk on the generation's first output; the simulator sent it on arrival."""
    prompt = " ".join(["knee"] * 3000)  # a long prefill at --sim-speed 4: first token ~0.2 s after sending
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": 6, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    t0 = time.perf_counter()
    evs = events(url, "/v1/chat/completions", body)
    (t_role, role), (t_first, first) = evs[0], evs[1]
    assert isinstance(role, dict) and role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert isinstance(first, dict) and first["choices"][0]["delta"]["content"]
    assert first["usage"]["completion_tokens"] == 1
    assert t_first - t0 > 0.1  # a real wait for the first token ...
    assert t_first - t_role < 0.02  # ... and the role chunk came with it, not at arrival
    contents = [e["choices"][0]["delta"].get("content", "") for _, e in evs if isinstance(e, dict) and e["choices"]]
    assert n_tokens("".join(contents)) == 6
