"""What sweep hands SGLang's bench_serving: the same requests as its custom dataset, or an image workload's shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from sweep.core.errors import SweepError
from sweep.core.types import RequestSpec
from sweep.drivers.bench_serving import (
    argv,
    dataset_lines,
    image_dataset_args,
    stats_from_result,
    steady_output_tps,
    throughput_note,
)
from sweep.profile import Workload
from sweep.workload.lexicon import for_model

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "llama3-8b-shape"


def test_custom_dataset_lines_carry_each_prompt_and_a_completion_of_its_output_length() -> None:
    lex = for_model(MODEL)
    tok = Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    specs = [RequestSpec(index=i, input_ids=tuple(range(3 + i, 40 + 7 * i)), output_tokens=16 + 5 * i)
             for i in range(3)]
    lines = [json.loads(x) for x in dataset_lines(specs, 5, lex)]
    assert len(lines) == 5  # cycled like the workload stream
    for k, row in enumerate(lines):
        spec = specs[k % 3]
        user, assistant = row["conversations"]
        assert user["content"] == lex.render(spec.input_ids)
        # bench_serving takes a custom row's output length from its tokenizer's count of the completion
        assert len(tok.encode(assistant["content"]).ids) == spec.output_tokens


def test_image_workload_becomes_bench_servings_image_dataset_of_the_same_shape() -> None:
    w = Workload(mix={"text": 0.0, "image": 1.0}, prompt_len={"kind": "uniform", "low": 128, "high": 512},
                 output_len={"kind": "uniform", "low": 64, "high": 256},
                 media={"image_width": 448, "image_height": 336, "image_format": "png"}, api="chat")
    args = image_dataset_args(w)
    pairs = dict(zip(args[::2], args[1::2], strict=True))
    assert pairs == {"--dataset-name": "image", "--image-count": "1", "--image-resolution": "336x448",
                     "--image-format": "png", "--image-content": "random", "--random-input-len": "512",
                     "--random-output-len": "256", "--random-range-ratio": "0.25"}
    with pytest.raises(SweepError, match="one range ratio"):
        image_dataset_args(w.model_copy(update={"output_len": w.output_len.model_copy(update={"low": 200})}))
    with pytest.raises(SweepError, match="every request one image"):
        image_dataset_args(w.model_copy(update={"mix": w.mix.model_copy(update={"text": 0.5, "image": 0.5})}))


def test_argv_is_a_closed_loop_at_the_steps_concurrency_and_carries_no_key() -> None:
    cmd = argv(["python", "-m", "sglang.bench_serving"], api="generate", url="http://127.0.0.1:1", model_name="m",
               tokenizer=str(MODEL), dataset=Path("/tmp/x.jsonl"), num_prompts=300, concurrency=16, warmup=8,
               output=Path("/tmp/out.jsonl"), seed=1)
    pairs = dict(zip(cmd[3::2], cmd[4::2], strict=False))
    assert pairs["--backend"] == "sglang" and pairs["--dataset-name"] == "custom"
    assert pairs["--max-concurrency"] == "16" and pairs["--request-rate"] == "inf" and pairs["--num-prompts"] == "300"
    assert not any("key" in a.lower() for a in cmd)


def test_image_dataset_loads_its_processor_from_the_model_folder_not_the_served_name() -> None:
    # bench_serving's image dataset calls get_processor(--served-model-name or --model): "default" went to the hub
    vl = ROOT / "models" / "qwen2.5-vl-7b-shape"
    w = Workload(mix={"text": 0.0, "image": 1.0}, shared_prefix={"groups": 0, "share": 0.0},
                 prompt_len={"kind": "uniform", "low": 128, "high": 512},
                 output_len={"kind": "uniform", "low": 64, "high": 256}, api="chat")
    cmd = argv(["python", "-m", "sglang.bench_serving"], api="chat", url="http://127.0.0.1:1", model_name="default",
               tokenizer=str(vl), dataset=image_dataset_args(w), num_prompts=100, concurrency=8, warmup=4,
               output=Path("/tmp/out.jsonl"), seed=1)
    model = cmd[cmd.index("--model") + 1]
    assert Path(model) == vl and (Path(model) / "preprocessor_config.json").is_file()
    assert "--served-model-name" not in cmd
    text = argv(["bs"], api="generate", url="http://127.0.0.1:1", model_name="default", tokenizer=str(vl),
                dataset=Path("/tmp/x.jsonl"), num_prompts=1, concurrency=1, warmup=0, output=Path("/tmp/o"), seed=1)
    assert text[text.index("--model") + 1] == "default"  # the custom dataset sends the served name, as before


def test_summary_becomes_runs_columns() -> None:
    # no total_output_tokens / mean E2E: its own output throughput stands
    stats = stats_from_result({"completed": 290, "duration": 20.5, "median_ttft_ms": 31.0, "p99_ttft_ms": 70.0,
                               "median_tpot_ms": 7.0, "p99_tpot_ms": 9.0, "output_throughput": 2100.0}, 300, 16)
    assert stats["ttft_p50_ms"] == 31.0 and stats["tpot_p99_ms"] == 9.0 and stats["output_tps"] == 2100.0
    assert stats["n_completed"] == 290 and stats["n_errors"] == 10 and stats["window_s"] == 20.5


def test_output_tps_is_the_closed_loops_steady_state_by_littles_law() -> None:
    # 16 users, 130 requests of 160 output tokens on average, 1.12 s each: 16 / 1.12 requests a second in the
    # steady state, 2,286 tok/s; bench_serving's own figure (tokens / whole duration with its ramp-down) is lower.
    result = {"completed": 130, "total_output_tokens": 130 * 160, "mean_e2e_latency_ms": 1120.0, "duration": 10.9,
              "output_throughput": 1903.0}
    assert steady_output_tps(result, 16) == pytest.approx(16 * 160 / 1.12)
    stats = stats_from_result(result, 130, 16)
    assert stats["output_tps"] == pytest.approx(2285.7, abs=0.1)
    note = throughput_note(result, 16)
    assert "2,286" in note and "1,903" in note and "Little's law" in note
    assert steady_output_tps({**result, "completed": 0}, 16) is None
    assert stats_from_result({**result, "mean_e2e_latency_ms": None}, 130, 16)["output_tps"] == 1903.0
