"""Tests for workload generation, media payloads, dataset import and request bodies."""

from __future__ import annotations

import base64
import io
import json
import wave
from pathlib import Path
from typing import Literal

import numpy as np
import pytest
from PIL import Image

from sweep.core.errors import WorkloadError
from sweep.core.types import MediaItem
from sweep.profile import Dataset, LengthDist, MediaSpec, Workload
from sweep.workload.datasets import load_dataset, text_to_ids, word_id
from sweep.workload.media import media_tokens
from sweep.workload.requests import (
    MARKERS,
    MIN_TAIL,
    build_workload,
    chat_body,
    estimated_prompt_tokens,
    generate_body,
    render_ids,
    sample_lengths,
    workload_digest,
)

FIX = Path(__file__).parents[1] / "fixtures"
SMALL_MEDIA = MediaSpec(image_width=56, image_height=28, video_frames=2, video_width=28, video_height=28,
                        audio_seconds=0.1)
MIXED = {"text": 0.4, "image": 0.3, "video": 0.2, "audio": 0.1}


def _payload(url: str) -> bytes:
    """Decode a base64 data URL."""
    head, _, data = url.partition(",")
    assert head.startswith("data:") and head.endswith(";base64")
    return base64.b64decode(data)


def test_same_seed_same_digest_other_seed_differs() -> None:
    w = Workload(seed=7, num_requests=400, mix=MIXED, media=SMALL_MEDIA,
                 shared_prefix={"groups": 3, "length": 16, "share": 0.5})
    a, b = build_workload(w), build_workload(w)
    assert a == b
    assert workload_digest(a) == workload_digest(b)
    other = build_workload(w.model_copy(update={"seed": 8}))
    assert workload_digest(other) != workload_digest(a)
    assert len(a) == 400 and [s.index for s in a] == list(range(400))


def test_digest_covers_media_bytes() -> None:
    w = Workload(seed=1, num_requests=50, mix={"text": 0.0, "image": 1.0}, media=SMALL_MEDIA)
    specs = build_workload(w)
    first = specs[0]
    swapped = MediaItem(kind="image", data_urls=("data:image/png;base64,AAAA",), width=56, height=28)
    changed = [type(first)(**{**first.__dict__, "media": (swapped,)}), *specs[1:]]
    assert workload_digest(changed) != workload_digest(specs)


def test_ids_in_range_and_text_renders_ids() -> None:
    specs = build_workload(Workload(seed=3, num_requests=200))
    for s in specs:
        assert all(3 <= i <= 999 for i in s.input_ids)
        assert s.text == render_ids(s.input_ids)
        assert len(s.text.split()) == s.prompt_tokens


@pytest.mark.parametrize(
    ("dist", "mean", "tol"),
    [
        (LengthDist(kind="fixed", value=77), 77, 0.0),
        (LengthDist(kind="uniform", low=100, high=200), 150, 0.02),
        (LengthDist(kind="normal", mean=300, std=50), 300, 0.02),
        (LengthDist(kind="lognormal", mean=500, std=300, max=100000), 500, 0.04),
    ],
)
def test_length_distributions_mean(dist: LengthDist, mean: float, tol: float) -> None:
    x = sample_lengths(dist, 20000, np.random.default_rng(11))
    assert x.min() >= dist.min and x.max() <= dist.max
    assert abs(x.mean() - mean) <= tol * mean + 1e-9


def test_lognormal_std_matches() -> None:
    x = sample_lengths(LengthDist(kind="lognormal", mean=500, std=300, max=100000), 50000,
                       np.random.default_rng(5))
    assert abs(x.std() - 300) < 0.08 * 300


def test_length_clamps_via_build() -> None:
    w = Workload(seed=2, num_requests=3000,
                 prompt_len=LengthDist(kind="normal", mean=100, std=100, min=50, max=150),
                 output_len=LengthDist(kind="lognormal", mean=64, std=64, min=16, max=96))
    specs = build_workload(w)
    p = np.array([s.prompt_tokens for s in specs])
    o = np.array([s.output_tokens for s in specs])
    assert p.min() == 50 and p.max() == 150
    assert o.min() == 16 and o.max() == 96


def test_mix_shares_within_tolerance() -> None:
    specs = build_workload(Workload(seed=4, num_requests=5000, mix=MIXED, media=SMALL_MEDIA))
    for kind, share in MIXED.items():
        got = sum(s.modality == kind for s in specs) / len(specs)
        assert abs(got - share) < 0.025, (kind, got)
    for s in specs:
        assert (s.modality == "text") == (not s.media)
        assert all(m.kind == s.modality for m in s.media)


def test_shared_prefix_share_and_identical_leading_ids() -> None:
    w = Workload(seed=5, num_requests=3000, shared_prefix={"groups": 3, "length": 64, "share": 0.4},
                 prompt_len=LengthDist(kind="uniform", low=10, high=300))
    specs = build_workload(w)
    pre = [s for s in specs if s.prefix_group is not None]
    assert abs(len(pre) / len(specs) - 0.4) < 0.03
    heads: dict[int, tuple[int, ...]] = {}
    for s in pre:
        head = heads.setdefault(s.prefix_group, s.input_ids[:64])
        assert s.input_ids[:64] == head
        assert s.text.split()[:64] == render_ids(head).split()
        assert s.prompt_tokens >= 64 + MIN_TAIL
    assert sorted(heads) == [0, 1, 2] and len(set(heads.values())) == 3
    short = [s for s in pre if s.prompt_tokens == 64 + MIN_TAIL]
    assert short, "sampled lengths below the prefix should give prefix + a few tokens"
    # group choice is uniform
    counts = np.bincount([s.prefix_group for s in pre], minlength=3) / len(pre)
    assert np.all(np.abs(counts - 1 / 3) < 0.05)


@pytest.mark.parametrize("fmt", ["png", "jpeg"])
def test_images_decode_to_configured_size(fmt: str) -> None:
    media = MediaSpec(image_width=100, image_height=60, image_format=fmt)
    specs = build_workload(Workload(seed=6, num_requests=40, mix={"text": 0.0, "image": 1.0}, media=media))
    urls = {s.media[0].data_urls[0] for s in specs}
    assert len(urls) == 16  # pooled, round-robin
    for url in urls:
        assert url.startswith(f"data:image/{fmt};base64,")
        with Image.open(io.BytesIO(_payload(url))) as im:
            assert im.size == (100, 60)
            assert im.format == fmt.upper()


def test_video_frames_and_wav_audio() -> None:
    media = MediaSpec(video_frames=4, video_width=64, video_height=32, audio_seconds=0.5)
    specs = build_workload(Workload(seed=9, num_requests=30, mix={"text": 0.0, "video": 0.5, "audio": 0.5},
                                    media=media))
    video = next(s for s in specs if s.modality == "video").media[0]
    assert len(video.data_urls) == 4 and len(set(video.data_urls)) == 4
    for url in video.data_urls:
        with Image.open(io.BytesIO(_payload(url))) as im:
            assert im.size == (64, 32) and im.format == "JPEG"
    audio = next(s for s in specs if s.modality == "audio").media[0]
    assert audio.data_urls[0].startswith("data:audio/wav;base64,")
    with wave.open(io.BytesIO(_payload(audio.data_urls[0]))) as wf:
        assert (wf.getnchannels(), wf.getframerate(), wf.getsampwidth()) == (1, 16000, 2)
        assert wf.getnframes() == 8000


def test_media_tokens_match_qwen25_vl() -> None:
    def img(w: int, h: int) -> MediaItem:
        return MediaItem(kind="image", data_urls=("x",), width=w, height=h)

    # numbers from models/qwen2.5-vl-7b-shape/README.md
    assert media_tokens(img(448, 448)) == 256
    assert media_tokens(img(640, 480)) == 391
    assert media_tokens(img(1024, 768)) == 999
    assert media_tokens(img(224, 224)) == 64
    video = MediaItem(kind="video", data_urls=("f",) * 8, width=336, height=336)
    assert media_tokens(video) == 4 * 144
    assert media_tokens(MediaItem(kind="audio", data_urls=("a",), seconds=5.0)) == 125


def test_word_hash_deterministic_and_in_range() -> None:
    assert word_id("hello") == word_id("hello")
    ids = text_to_ids("the quick brown fox the")
    assert len(ids) == 5 and ids[0] == ids[4]
    assert all(3 <= i <= 999 for i in ids)


def test_jsonl_dataset_good() -> None:
    items, problems = load_dataset(Dataset(path="workload_prompts.jsonl"), FIX)
    assert problems == [] and len(items) == 4
    assert items[0].output_len == 64 and items[0].text is not None
    assert items[2].input_ids == (5, 17, 999, 42, 3, 314) and items[2].line == 3
    assert items[3].line == 5  # blank line 4 is ignored
    w = Workload(seed=1, num_requests=12, dataset=Dataset(path="workload_prompts.jsonl"),
                 output_len=LengthDist(kind="fixed", value=33))
    specs = build_workload(w, FIX)
    by_ids = {it.input_ids: it for it in items}
    seen = [by_ids[s.input_ids] for s in specs]
    assert [it.line for it in seen[:4]] == [it.line for it in seen[4:8]]  # cycles in one shuffled order
    assert {it.line for it in seen[:4]} == {1, 2, 3, 5}
    for s, it in zip(specs, seen, strict=True):
        assert s.output_tokens == (it.output_len or 33)
        assert s.text == (it.text if it.text is not None else render_ids(it.input_ids))


def test_jsonl_bad_line_fail_and_skip() -> None:
    with pytest.raises(WorkloadError, match=r"workload_bad\.jsonl:3: not valid JSON"):
        load_dataset(Dataset(path="workload_bad.jsonl"), FIX)
    items, problems = load_dataset(Dataset(path="workload_bad.jsonl", on_bad_line="skip"), FIX)
    assert [it.line for it in items] == [1, 2, 4]
    assert len(problems) == 1 and problems[0].startswith("workload_bad.jsonl:3:")
    w = Workload(num_requests=5, dataset=Dataset(path="workload_bad.jsonl", on_bad_line="skip"))
    assert len(build_workload(w, FIX)) == 5


def test_dataset_invalid_fields_and_empty(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"input_ids": [1, "x"]}\n{"prompt": "ok", "output_len": 0}\n{"foo": 1}\n')
    with pytest.raises(WorkloadError, match=r"d\.jsonl:1: .*input_ids"):
        load_dataset(Dataset(path="d.jsonl"), tmp_path)
    with pytest.raises(WorkloadError, match=r"no usable entries \(3 skipped\)"):
        load_dataset(Dataset(path="d.jsonl", on_bad_line="skip"), tmp_path)
    with pytest.raises(WorkloadError, match="no such dataset file"):
        load_dataset(Dataset(path="missing.jsonl"), tmp_path)


def test_jsonl_images(tmp_path: Path) -> None:
    Image.new("RGB", (84, 56), (10, 200, 30)).save(tmp_path / "pic.png")
    rows = [{"prompt": "what is in the picture", "images": ["pic.png"]}, {"prompt": "x", "images": ["nope.png"]}]
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    ds = Dataset(path="d.jsonl", on_bad_line="skip")
    items, problems = load_dataset(ds, tmp_path)
    assert len(items) == 1 and problems == ["d.jsonl:2: image nope.png: no such file"]
    specs = build_workload(Workload(num_requests=3, dataset=ds), tmp_path)
    assert all(s.modality == "image" and s.media[0].width == 84 for s in specs)
    assert media_tokens(specs[0].media[0]) == 3 * 2


def test_sharegpt_import() -> None:
    ds = Dataset(path="workload_sharegpt.json", format="sharegpt", on_bad_line="skip")
    items, problems = load_dataset(ds, FIX)
    # the system message starts turn 1 (as the server would see it); every later human turn is a turn
    assert [it.text for it in items] == ["What is goodput?", "You are terse.\nName two SGLang scheduling policies."]
    assert [it.ref_output_len for it in items] == [15, 3]
    assert items[0].turns == () and [(t.text, t.ref_output_len) for t in items[1].turns] == [
        ("Which favours prefix reuse?", 1)]
    assert problems == ["workload_sharegpt.json:entry 3: no human turn"]
    with pytest.raises(WorkloadError, match="entry 3"):
        load_dataset(ds.model_copy(update={"on_bad_line": "fail"}), FIX)
    specs = build_workload(Workload(num_requests=6, dataset=ds), FIX)  # no output_len in profile: reply words
    assert sorted({s.output_tokens for s in specs}) == [3, 15]
    fixed = Workload(num_requests=6, dataset=ds, output_len=LengthDist(kind="fixed", value=50))
    assert sorted({s.output_tokens for s in build_workload(fixed, FIX)}) == [3, 15]  # the file's lengths win
    ours = Workload(num_requests=6, dataset=ds.model_copy(update={"output_lengths": "profile"}),
                    output_len=LengthDist(kind="fixed", value=50))
    assert {s.output_tokens for s in build_workload(ours, FIX)} == {50}


def test_generate_bodies() -> None:
    specs = build_workload(Workload(seed=12, num_requests=200, mix=MIXED, media=SMALL_MEDIA))
    text = next(s for s in specs if s.modality == "text")
    b = generate_body(text)
    assert b["input_ids"] == list(text.input_ids) and b["stream"] is True
    assert b["sampling_params"] == {"max_new_tokens": text.output_tokens, "ignore_eos": True, "temperature": 0}
    assert generate_body(text, stream=False)["stream"] is False
    media_keys: tuple[tuple[str, Literal["image_data", "video_data", "audio_data"]], ...] = (
        ("image", "image_data"), ("video", "video_data"), ("audio", "audio_data"))
    for kind, key in media_keys:
        s = next(x for x in specs if x.modality == kind)
        b = generate_body(s)
        assert "input_ids" not in b and b["text"] == MARKERS[kind] + s.text
        assert len(b[key]) == 1
        expected = list(s.media[0].data_urls) if kind == "video" else s.media[0].data_urls[0]
        assert b[key][0] == expected
        assert b["sampling_params"]["ignore_eos"] is True


def test_chat_bodies() -> None:
    specs = build_workload(Workload(seed=13, num_requests=100, mix={"text": 0.5, "image": 0.5}, media=SMALL_MEDIA))
    img = next(s for s in specs if s.modality == "image")
    b = chat_body(img, "qwen")
    assert b["model"] == "qwen" and b["max_tokens"] == img.output_tokens
    assert b["ignore_eos"] is True and b["temperature"] == 0 and b["stream"] is True
    assert b["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    content = b["messages"][0]["content"]
    assert b["messages"][0]["role"] == "user"
    assert content[0] == {"type": "image_url", "image_url": {"url": img.media[0].data_urls[0]}}
    assert content[-1] == {"type": "text", "text": img.text}
    txt = next(s for s in specs if s.modality == "text")
    b = chat_body(txt, "qwen", stream=False)
    assert b["messages"][0]["content"] == [{"type": "text", "text": txt.text}] and "stream_options" not in b


def test_prefix_len_puts_media_after_shared_prefix() -> None:
    w = Workload(seed=14, num_requests=200, mix={"text": 0.0, "image": 1.0}, media=SMALL_MEDIA,
                 shared_prefix={"groups": 2, "length": 8, "share": 1.0})
    s = build_workload(w)[0]
    head = " ".join(s.text.split()[:8])
    chat = chat_body(s, "m", prefix_len=8)
    assert chat["messages"][0] == {"role": "system", "content": head}
    assert chat["messages"][1]["content"][-1]["text"] == " ".join(s.text.split()[8:])
    gen = generate_body(s, prefix_len=8)
    assert gen["text"].startswith(head + " " + MARKERS["image"])
    # 56x28 is below Qwen's min_pixels (3136): smart resize scales it up to 84x56 = 3x2 blocks
    assert media_tokens(s.media[0]) == 6
    assert estimated_prompt_tokens(s) == s.prompt_tokens + 6 + 2


def test_twenty_thousand_text_specs_are_all_generated() -> None:
    # Speed is measured by `make bench`, not asserted here (timed unit tests flake on a shared machine).
    specs = build_workload(Workload(seed=0, num_requests=20000))
    assert len(specs) == 20000
    assert [s.index for s in specs[:3]] == [0, 1, 2]
