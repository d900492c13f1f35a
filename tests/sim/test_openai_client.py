"""The unmodified `openai` SDK streams a multimodal chat completion from the simulated server."""

from __future__ import annotations

import base64
import io
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.simserver import wait_healthy

openai = pytest.importorskip("openai")  # the dev extra installs it; without it there is nothing to exercise
KEY = "sdk-key"
ROOT = Path(__file__).resolve().parents[2]


def launch_vlm() -> tuple[subprocess.Popen[str], str]:
    """`python -m sglang_sim` with the Qwen2.5-VL shape on a free port, in its own session."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    cmd = [sys.executable, "-m", "sglang_sim", "--model-path", str(ROOT / "models/qwen2.5-vl-7b-shape"),
           "--port", str(port), "--api-key", KEY]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    return proc, f"http://127.0.0.1:{port}"




def png_data_url(size: int = 448) -> str:
    """A real PNG (the sim reads width/height from the header to count image tokens)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (size, size), (120, 30, 200)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


@pytest.fixture(scope="module")
def vlm_server() -> Iterator[str]:
    proc, url = launch_vlm()
    try:
        wait_healthy(proc, url)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # our own child's session only
        proc.wait(timeout=10)


def test_openai_sdk_streams_chat_with_an_image_and_reports_usage(vlm_server: str) -> None:
    client = openai.OpenAI(base_url=vlm_server + "/v1", api_key=KEY, timeout=30.0, max_retries=0)
    stream = client.chat.completions.create(
        model="default", stream=True, stream_options={"include_usage": True}, max_tokens=16,
        messages=[{"role": "user", "content": [
            {"type": "text", "text": "Describe this picture."},
            {"type": "image_url", "image_url": {"url": png_data_url()}}]}])
    chunks = list(stream)
    text = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(text) >= 2  # streamed token by token, not one final blob
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["length"]
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens == 16
    # 448x448 through Qwen2.5-VL's 14 px patches and 2x2 merge is 256 image tokens inside the prompt
    assert usage.prompt_tokens > 256


def test_openai_sdk_surfaces_a_bad_key_as_authentication_error(vlm_server: str) -> None:
    client = openai.OpenAI(base_url=vlm_server + "/v1", api_key="wrong", timeout=10.0, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model="default", max_tokens=4, messages=[{"role": "user", "content": "hi"}])
