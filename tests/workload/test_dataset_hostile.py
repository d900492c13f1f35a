"""Hostile dataset entries are one line and exit 2 at load, never a traceback or an overflow mid-window: JSON nested
100,000 deep, a decompression-bomb image, lengths and token ids of 10^30, integers of thousands of digits; and a
Mooncake trace is imported in memory proportional to the file, not to the tokens it stands for."""

from __future__ import annotations

import base64
import json
import os
import random
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from sweep.cli import main

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "profiles" / "smoke.yaml")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _validate(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    rc = main(["dataset", "validate", str(path)])
    return rc, [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


def _bomb_png(width: int, height: int) -> bytes:
    """A PNG whose header says width x height (1-bit grey) with a few bytes of data: PIL reads the size from the
    header, a decoder would allocate the pixels."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


@pytest.mark.parametrize("depth", [100_000])
def test_json_nested_too_deep_is_one_line(depth: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = tmp_path / "deep.jsonl"
    lines.write_text('{"prompt": "fine"}\n' + "[" * depth + "]" * depth + "\n")
    rc, err = _validate(lines, capsys)
    assert rc == 2 and err[0] == f"{lines}:2: not valid JSON: nested too deeply", err
    listed = tmp_path / "deep.json"
    listed.write_text("[" + "[" * depth + "]" * depth + "]")
    rc, err = _validate(listed, capsys)
    assert (rc, err) == (2, [f"error: {listed}: not valid JSON: nested too deeply"])


def test_a_decompression_bomb_image_is_refused_unopened(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bomb.png").write_bytes(_bomb_png(100_000, 100_000))
    (tmp_path / "big.png").write_bytes(_bomb_png(12_000, 12_000))  # past the bound, under PIL's own error
    url = "data:image/png;base64," + base64.b64encode(_bomb_png(100_000, 100_000)).decode()
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in [
        {"prompt": "bomb", "images": ["bomb.png"]}, {"prompt": "big", "images": ["big.png"]},
        {"prompt": "url", "images": [url]}]) + "\n")
    openai = tmp_path / "o.jsonl"
    openai.write_text(json.dumps({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": url}}]}]}) + "\n")
    rc, err = _validate(data, capsys)
    assert rc == 2 and len(err) == 4 and "Traceback" not in "".join(err), err
    assert err[0].startswith(f"{data}:1: image bomb.png: cannot decode (") and "exceeds limit" in err[0]
    assert err[1].startswith(f"{data}:2: image big.png: cannot decode (") and "decompression bomb" in err[1]
    assert err[2].startswith(f"{data}:3: image_url") and "decompression bomb" in err[2]
    rc, err = _validate(openai, capsys)
    assert rc == 2 and err[0] == (f"{openai}:1: message 1: image_url: more than 89,478,485 pixels (a "
                                  "decompression bomb?)"), err


@pytest.mark.parametrize(("entry", "line"), [
    ({"prompt": "x", "output_len": 10**30}, '"output_len" must be at most 2,097,152 tokens (got 1' + "0" * 30 + ")"),
    ({"input_ids": [5, 10**30]}, '"input_ids" must be a non-empty list of integers >= 0 and <= 2,147,483,647'),
    ({"prompt": "x", "send_at": 10**400}, '"send_at" must be a number of seconds >= 0'),
    ({"prompt": "x", "turns": [{"prompt": "y", "ref_output_len": 10**30}]},
     'turn 2: "ref_output_len" must be at most 2,097,152 tokens (got 1' + "0" * 30 + ")"),
])
def test_numbers_past_any_server_are_refused_by_validate(entry: dict[str, object], line: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(entry) + "\n")
    rc, err = _validate(data, capsys)
    assert rc == 2 and err[0] == f"{data}:1: {line}", err


def test_mooncake_numbers_and_long_integers_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "trace.jsonl"
    data.write_text("\n".join([
        json.dumps({"timestamp": 10**400, "input_length": 5, "output_length": 5, "hash_ids": [1]}),
        json.dumps({"timestamp": 0, "input_length": 5, "output_length": 10**30, "hash_ids": [1]}),
        json.dumps({"timestamp": 0, "input_length": 5, "output_length": 5, "hash_ids": [10**30]}),
        '{"timestamp": 0, "input_length": 5, "output_length": ' + "9" * 5000 + ', "hash_ids": [1]}']) + "\n")
    rc, err = _validate(data, capsys)
    assert rc == 2 and "Traceback" not in "".join(err)
    assert err[0] == f'{data}:1: "timestamp" must be a number of milliseconds >= 0'
    assert err[1].startswith(f'{data}:2: "output_length" must be at most 2,097,152 tokens')
    assert err[2] == f'{data}:3: "hash_ids" must be a non-empty list of integers >= 0 and <= 9,223,372,036,854,775,807'
    assert err[3].startswith(f"{data}:4: not valid JSON: Exceeds the limit (4300 digits)")


def test_a_hostile_profile_dataset_is_one_line_at_load(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"q {i}", "output_len": 10**30 if i == 7 else 8}) + "\n"
                            for i in range(200)))
    db = tmp_path / "r.db"
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "knee", "-p", SMOKE, "--db", str(db), "--out",
                           str(tmp_path / "out"), "--driver", "virtual", "--no-progress", "--set",
                           f"workload.dataset.path={data}"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=ENV)
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert errors == [f'error: {data}:8: "output_len" must be at most 2,097,152 tokens (got 1{"0" * 30})']
    assert not db.exists()


def test_a_mooncake_trace_imports_in_memory_proportional_to_the_file(tmp_path: Path) -> None:
    """600 KB of trace (578 lines of 120 distinct hash ids, 61,433 tokens each: 35 million tokens) read in well
    under 300 MB; the old import held every token and a 65,536-block cache (1.4-2.7 GB)."""
    rnd = random.Random(1)
    trace = tmp_path / "trace.jsonl"
    with trace.open("w") as fh:
        t = 0
        while fh.tell() < 600_000:
            ids = [rnd.randrange(10**5, 10**6) for _ in range(120)]
            fh.write(json.dumps({"timestamp": t, "input_length": 120 * 512 - 7, "output_length": 50,
                                 "hash_ids": ids}) + "\n")
            t += 100
    # VmHWM: this process's own peak (ru_maxrss would carry the forking pytest's size across the exec)
    code = ("import sys\nfrom pathlib import Path\nfrom sweep.cli import main\n"
            f"rc = main(['dataset', 'validate', {str(trace)!r}])\n"
            "hwm = next(ln for ln in Path('/proc/self/status').read_text().splitlines() if ln.startswith('VmHWM:'))\n"
            "print(hwm.split()[1], file=sys.stderr)\nsys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=ENV)
    assert proc.returncode == 0, proc.stderr
    assert "mooncake: 578 good entries" in proc.stdout
    peak_kb = int(proc.stderr.strip().splitlines()[-1])
    assert peak_kb < 300_000, f"{peak_kb / 1024:.0f} MB"
