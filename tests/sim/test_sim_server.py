"""The simulated server as a real subprocess: SSE format, chat, metrics, auth, flags, SIGTERM."""

from __future__ import annotations

import base64
import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.simserver import free_port, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
KEY = "sekret"


def launch(*extra: str) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "sglang_sim", "--model-path", str(ROOT / "models/tiny-llama"),
           "--port", str(port), *extra]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    return proc, f"http://127.0.0.1:{port}"




def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    proc, url = launch("--enable-metrics", "--api-key", KEY, "--enable-cache-report")
    try:
        wait_healthy(proc, url)
        yield url
    finally:
        stop(proc)


def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {KEY}"}


def sse_events(resp: httpx.Response) -> list[str]:
    return [line[len("data: "):] for line in resp.iter_lines() if line.startswith("data: ")]


def test_stream_generate_is_cumulative_with_meta_info_and_done(server: str) -> None:
    body = {"input_ids": list(range(3, 40)), "sampling_params": {"max_new_tokens": 12, "ignore_eos": True},
            "stream": True}
    with httpx.stream("POST", server + "/generate", json=body, headers=auth(), timeout=20) as resp:
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        events = sse_events(resp)
    assert events[-1] == "[DONE]"
    objs = [json.loads(e) for e in events[:-1]]
    lengths = [len(o["output_ids"]) for o in objs]
    assert lengths == sorted(lengths) and lengths[0] >= 1 and lengths[-1] == 12
    for prev, cur in zip(objs, objs[1:], strict=False):
        assert cur["output_ids"][:len(prev["output_ids"])] == prev["output_ids"]  # cumulative, not deltas
    assert all(o["meta_info"]["finish_reason"] is None for o in objs[:-1])
    last = objs[-1]["meta_info"]
    assert last["finish_reason"] == {"type": "length", "length": 12}
    assert last["prompt_tokens"] == 37 and last["completion_tokens"] == 12 and "e2e_latency" in last
    assert {"id", "cached_tokens", "num_retractions"} <= set(last)


def test_nonstream_generate_chat_and_cache_hit(server: str) -> None:
    body = {"text": " ".join(f"w{i}" for i in range(64)), "sampling_params": {"max_new_tokens": 4}}
    first = httpx.post(server + "/generate", json=body, headers=auth(), timeout=20).json()
    second = httpx.post(server + "/generate", json=body, headers=auth(), timeout=20).json()
    assert len(first["output_ids"]) == 4 and first["meta_info"]["finish_reason"]["length"] == 4
    assert second["meta_info"]["cached_tokens"] >= 48  # the radix cache kept the prompt's full pages
    chat = {"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 5, "stream": True,
            "stream_options": {"include_usage": True}}
    with httpx.stream("POST", server + "/v1/chat/completions", json=chat, headers=auth(), timeout=20) as resp:
        events = sse_events(resp)
    assert events[-1] == "[DONE]"
    objs = [json.loads(e) for e in events[:-1]]
    assert objs[-1]["choices"] == [] and objs[-1]["usage"]["completion_tokens"] == 5
    assert "cached_tokens" in objs[-1]["usage"]["prompt_tokens_details"]
    assert any(c["choices"] and c["choices"][0]["finish_reason"] == "length" for c in objs)


def test_image_tokens_counted_from_png_header(server: str) -> None:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (448, 448)).save(buf, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    body = {"text": "describe", "image_data": url, "sampling_params": {"max_new_tokens": 2}}
    meta = httpx.post(server + "/generate", json=body, headers=auth(), timeout=20).json()["meta_info"]
    from tokenizers import Tokenizer

    words = len(Tokenizer.from_file(str(ROOT / "models/tiny-llama/tokenizer.json")).encode("describe").ids)
    assert meta["image_tokens"] == 258  # 16x16 blocks + start/end
    assert meta["prompt_tokens"] == 258 + words  # the text as the model's tokenizer counts it


def test_metrics_parse_with_sglang_names(server: str) -> None:
    httpx.post(server + "/generate", json={"text": "a b c", "sampling_params": {"max_new_tokens": 3}},
               headers=auth(), timeout=20)
    text = httpx.get(server + "/metrics", timeout=5).text  # exempt from the API key
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    for name in ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage", "sglang:cache_hit_rate",
                 "sglang:prompt_tokens", "sglang:generation_tokens", "sglang:num_retracted_requests",
                 "sglang:time_to_first_token_seconds", "sglang:max_total_num_tokens"):
        assert name in fams, name
    reqs = sum(s.value for s in fams["sglang:num_requests"].samples)
    assert reqs >= 1
    les = [s.labels["le"] for s in fams["sglang:time_to_first_token_seconds"].samples if s.name.endswith("_bucket")]
    assert les[:3] == ["0.1", "0.2", "0.4"] and les[-1] == "+Inf"


def test_api_key_and_info_endpoints(server: str) -> None:
    assert httpx.post(server + "/generate", json={"text": "x"}, timeout=5).status_code == 401
    assert httpx.get(server + "/server_info", timeout=5).status_code == 401
    assert httpx.get(server + "/health", timeout=5).status_code == 200
    info = httpx.get(server + "/server_info", headers=auth(), timeout=5).json()
    assert info["simulated"] is True and info["version"] == "0.5.17-sim" and info["api_key"] is None
    assert info["max_total_num_tokens"] > 0 and info["chunked_prefill_size"] == 8192
    assert httpx.post(server + "/flush_cache", headers=auth(), timeout=5).status_code == 200


def test_unknown_flag_exits_2_and_oom_refuses() -> None:
    base = [sys.executable, "-m", "sglang_sim", "--model-path", "models/tiny-llama"]
    bad = subprocess.run([*base, "--no-such-flag"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "unrecognized arguments" in bad.stderr
    # a hub name (no config.json here): the named preset is the model, and its 15 GiB do not fit in 10%
    hub = [sys.executable, "-m", "sglang_sim", "--model-path", "meta-llama/Meta-Llama-3-8B"]
    oom = subprocess.run([*hub, "--sim-model", "llama3-8b", "--mem-fraction-static", "0.1"], cwd=ROOT,
                         capture_output=True, text=True, timeout=30)
    assert oom.returncode == 1 and "Not enough memory" in oom.stdout and "SIMULATED" in oom.stdout.splitlines()[0]


def test_a_preset_the_model_folder_contradicts_exits_2_naming_both() -> None:
    """--sim-model is for a model path without config.json: one the folder's config.json contradicts is refused."""
    run = subprocess.run([sys.executable, "-m", "sglang_sim", "--model-path", "models/tiny-llama", "--sim-model",
                          "llama3-8b"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    errors = [line for line in run.stdout.splitlines() if "ERROR" in line]
    assert run.returncode == 2 and len(errors) == 1, run.stdout
    assert "'llama3-8b'" in errors[0] and "models/tiny-llama/config.json" in errors[0] and "layers 32 vs 2" in errors[0]


def test_sigterm_drains_in_flight_and_exits_zero() -> None:
    proc, url = launch("--sim-speed", "15")  # ~55 ms per decode step: 60 tokens keep a request in flight ~3 s
    try:
        wait_healthy(proc, url)
        with httpx.stream("POST", url + "/generate", timeout=30,
                          json={"text": "go", "sampling_params": {"max_new_tokens": 60}, "stream": True}) as resp:
            lines = resp.iter_lines()
            first = next(line for line in lines if line.startswith("data: "))
            assert json.loads(first[6:])["meta_info"]["finish_reason"] is None
            os.kill(proc.pid, signal.SIGTERM)
            rest = [line for line in lines if line.startswith("data: ")]
        assert rest[-1] == "data: [DONE]"
        assert json.loads(rest[-2][6:])["meta_info"]["finish_reason"]["length"] == 60  # drained, not cut
        out, _ = proc.communicate(timeout=20)
        assert proc.returncode == 0
        assert "Draining requests" in out and "ready to roll" in out
    finally:
        stop(proc)
