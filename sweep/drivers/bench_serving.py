"""SGLang's own benchmark client (`python -m sglang.bench_serving`) as the cross-check reference.

It cannot take sweep's requests as token ids, nor a timed window, so the nearest equivalent is used:
- the same requests as text: each spec's prompt (its text form, else its ids rendered with the model's one-token
  words, sweep.workload.lexicon) and a completion of exactly output_tokens such words, written as bench_serving's `custom`
  JSONL dataset (it shuffles the order with --seed and counts lengths with --tokenizer, the model folder);
- the same step: --max-concurrency = the step's concurrency with --request-rate inf (a closed loop), and as many
  prompts as sweep's own measured window started (at least 2 per user), after --warmup-requests;
- its own summary figures (median/P99 TTFT and TPOT) become the reference row. Its output throughput is all
  output tokens over its whole run, ramp-down included (the last requests run with fewer users in flight), which
  reads below the steady state sweep's window measures (−15% on the H200). The row's output tok/s is therefore
  the closed loop's steady state by Little's law from its own per-request figures: C users, each request taking
  E2E on average with no think time, complete C / E2E requests a second, so output tok/s = C × (total output
  tokens / completed) / mean E2E. Its own duration-based figure is kept in the row's note.
The API key, if any, goes through the environment (OPENAI_API_KEY), never argv.
Media requests are not expressible in that dataset. An image workload (every request one image of one size, no
shared prefixes, uniform or fixed lengths with one range ratio for prompt and output) runs bench_serving's `image`
dataset instead: the same shape (resolution, format, length distributions), not the same requests; other media
workloads need the h11 reference.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from sweep.core.errors import SweepError
from sweep.core.types import JSON
from sweep.profile import LengthDist, Workload
from sweep.workload.lexicon import Lexicon
from sweep.workload.stream import Requests, spec_at

NAME = "sglang-bench_serving"
BACKENDS = {"generate": "sglang", "chat": "sglang-oai-chat"}
# bench_serving result key -> runs column
RESULT_COLUMNS = {
    "median_ttft_ms": "ttft_p50_ms", "p90_ttft_ms": "ttft_p90_ms", "p95_ttft_ms": "ttft_p95_ms",
    "p99_ttft_ms": "ttft_p99_ms", "mean_ttft_ms": "ttft_mean_ms",
    "median_tpot_ms": "tpot_p50_ms", "p90_tpot_ms": "tpot_p90_ms", "p95_tpot_ms": "tpot_p95_ms",
    "p99_tpot_ms": "tpot_p99_ms", "mean_tpot_ms": "tpot_mean_ms",
    "median_itl_ms": "itl_p50_ms", "p90_itl_ms": "itl_p90_ms", "p95_itl_ms": "itl_p95_ms", "p99_itl_ms": "itl_p99_ms",
    "mean_itl_ms": "itl_mean_ms",
    "median_e2e_latency_ms": "e2e_p50_ms", "p90_e2e_latency_ms": "e2e_p90_ms", "p95_e2e_latency_ms": "e2e_p95_ms",
    "p99_e2e_latency_ms": "e2e_p99_ms", "mean_e2e_latency_ms": "e2e_mean_ms",
    "request_throughput": "throughput_rps", "input_throughput": "input_tps", "output_throughput": "output_tps",
}
TIMEOUT_MARGIN_S = 300.0  # imports, tokenizer and dataset set-up before the first request
BenchResult = dict[str, JSON]  # one line of bench_serving's --output-file: its summary of a run
BenchStats = dict[str, float | None]  # that summary as runs columns


def _num(value: JSON) -> float | None:
    """A number of bench_serving's summary; None where it is missing or not a number."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def default_command() -> list[str] | None:
    """`python -m sglang.bench_serving` where sglang is importable here, else None."""
    if importlib.util.find_spec("sglang") is None:
        return None
    return [sys.executable, "-m", "sglang.bench_serving"]


def added_special_tokens(tokenizer: str) -> int:
    """How many tokens (a BOS) the model's tokenizer adds to any text: bench_serving counts them in a completion."""
    tj = Path(tokenizer) / "tokenizer.json" if Path(tokenizer).is_dir() else Path(tokenizer)
    try:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(tj))
        return len(tok.encode("a").ids) - len(tok.encode("a", add_special_tokens=False).ids)
    except Exception:  # noqa: BLE001 - no readable tokenizer.json: assume none are added
        return 0


def dataset_lines(specs: Requests, n: int, lexicon: Lexicon, specials: int = 0) -> list[str]:
    """The first n requests of the stream (cycled) as `custom` dataset lines: prompt and a completion that the
    tokenizer counts as output_tokens (`specials` fewer words: the tokens it adds to every text)."""
    out = []
    for k in range(n):
        spec = spec_at(specs, k)
        if spec.media:
            raise SweepError("bench_serving's custom dataset has no media: cross-check a multimodal workload "
                             "with crosscheck.reference=h11")
        prompt = spec.text if spec.text is not None else lexicon.render(spec.input_ids)
        completion = lexicon.render(np.arange(max(1, spec.output_tokens - specials)) * 7 + 3)
        out.append(json.dumps({"conversations": [{"role": "user", "content": prompt},
                                                 {"role": "assistant", "content": completion}]}))
    return out


def _full_and_ratio(d: LengthDist) -> tuple[int, float]:
    """bench_serving's random lengths are U(full × ratio, full): (full, ratio) of a fixed or uniform length."""
    if d.kind == "fixed" and d.value:
        return d.value, 1.0
    if d.kind == "uniform" and d.low and d.high:
        return d.high, d.low / d.high
    raise SweepError(f"bench_serving's image dataset cannot draw {d.kind} lengths (uniform or fixed only)")


def image_dataset_args(w: Workload) -> list[str]:
    """bench_serving's `image` dataset arguments of the same shape as an image workload; SweepError if there is none."""
    if w.mix.image != 1.0 or w.shared_prefix.share > 0 or w.dataset is not None:
        raise SweepError("bench_serving can replay an image workload only as its image dataset: every request one "
                         "image (workload.mix.image 1), no shared prefixes, no dataset; use crosscheck.reference=h11")
    (p_full, p_ratio), (o_full, o_ratio) = _full_and_ratio(w.prompt_len), _full_and_ratio(w.output_len)
    if abs(p_ratio - o_ratio) > 1e-9:
        raise SweepError(f"bench_serving draws prompt and output lengths with one range ratio ({p_ratio:g} vs "
                         f"{o_ratio:g} here); use crosscheck.reference=h11")
    m = w.media
    return ["--dataset-name", "image", "--image-count", "1", "--image-resolution", f"{m.image_height}x{m.image_width}",
            "--image-format", m.image_format, "--image-content", "random", "--random-input-len", str(p_full),
            "--random-output-len", str(o_full), "--random-range-ratio", f"{p_ratio:g}"]


def argv(command: Sequence[str], *, api: str, url: str, model_name: str, tokenizer: str, dataset: Path | list[str],
         num_prompts: int, concurrency: int, warmup: int, output: Path, seed: int) -> list[str]:
    """The bench_serving command line of one step (dataset: a custom JSONL file, or image-dataset arguments)."""
    if api not in BACKENDS:
        raise SweepError(f"bench_serving reference: no backend for workload.api={api!r}")
    data = ["--dataset-name", "custom", "--dataset-path", str(dataset)] if isinstance(dataset, Path) else dataset
    # The image dataset loads its processor from --model (not --tokenizer): a served name such as "default" would
    # send it to the Hugging Face hub (seen on the H200: "Check your internet connection"). The model folder is
    # also the name SGLang serves when no --served-model-name is set.
    model = tokenizer if not isinstance(dataset, Path) else model_name
    return [*command, "--backend", BACKENDS[api], "--base-url", url, "--model", model, "--tokenizer", tokenizer,
            *data, "--num-prompts", str(num_prompts), "--max-concurrency", str(concurrency), "--request-rate", "inf",
            "--warmup-requests", str(warmup), "--output-file", str(output), "--seed", str(seed), "--disable-tqdm"]


def steady_output_tps(result: BenchResult, concurrency: int) -> float | None:
    """The closed loop's steady-state output tok/s from bench_serving's own figures (the module docstring):
    C × (total_output_tokens / completed) / mean E2E; None when a figure is missing or zero."""
    completed, tokens = _num(result.get("completed")), _num(result.get("total_output_tokens"))
    e2e_ms = _num(result.get("mean_e2e_latency_ms"))
    if not completed or not tokens or not e2e_ms or concurrency < 1:
        return None
    return concurrency * (tokens / completed) / (e2e_ms / 1000.0)


def throughput_note(result: BenchResult, concurrency: int) -> str:
    """What the reference row's output tok/s is, and bench_serving's own figure beside it."""
    own, steady = _num(result.get("output_throughput")), steady_output_tps(result, concurrency)
    if steady is None or own is None:
        return ""
    return (f"output tok/s {steady:,.0f} = {concurrency} users x mean output / mean E2E (Little's law); "
            f"bench_serving's own figure over its whole run, ramp-down included: {own:,.0f}")


def stats_from_result(result: BenchResult, num_prompts: int, concurrency: int = 0) -> BenchStats:
    """bench_serving's summary line as runs columns (window_s = its benchmark duration; output_tps the steady
    state by Little's law where its figures allow, else its own output throughput)."""
    stats: BenchStats = {col: _num(result.get(key)) for key, col in RESULT_COLUMNS.items() if key in result}
    steady = steady_output_tps(result, concurrency)
    if steady is not None:
        stats["output_tps"] = steady
    completed = int(_num(result.get("completed")) or 0)
    stats.update(n_started=num_prompts, n_completed=completed, n_errors=max(0, num_prompts - completed),
                 error_rate=(num_prompts - completed) / num_prompts if num_prompts else None,
                 window_s=_num(result.get("duration")))
    return stats


class BenchServingReference:
    """Runs bench_serving once per step against the same server; returns its figures as a stats row."""

    name = NAME

    def __init__(self, command: Sequence[str], workload: Workload, tokenizer: str, lexicon: Lexicon,
                 model_name: str = "default", url: str | None = None, seed: int = 1):
        self.command = list(command)
        self.api = workload.api
        # an image workload runs as bench_serving's image dataset (same shape); a text one as the same requests
        self.image_args = image_dataset_args(workload) if workload.mix.text < 1.0 else None
        self.dataset_note = "bench_serving image dataset: the same shape, not the same requests" if self.image_args else ""
        self.step_note = ""  # the last step's throughput_note
        self.tokenizer = tokenizer
        self.lexicon = lexicon
        self.model_name = model_name
        self.url = url
        self.seed = seed
        self.last_argv: list[str] = []

    @property
    def note(self) -> str:
        """What the last reference row is, for its stored reason (shown under the report's comparison)."""
        return "; ".join(n for n in (self.dataset_note, self.step_note) if n)

    def run_step(self, url: str, api_key: str | None, specs: Requests, concurrency: int,
                 num_prompts: int, warmup: int, timeout_s: float) -> BenchStats:
        """One bench_serving run; its summary as a stats dict. A failed run raises SweepError with its output tail."""
        n = max(num_prompts, 2 * concurrency)
        env = dict(os.environ)
        env.pop("OPENAI_API_KEY", None)
        if api_key:
            env["OPENAI_API_KEY"] = api_key
        with tempfile.TemporaryDirectory(prefix="sweep-bench-serving-") as tmp:
            data, out = Path(tmp) / "requests.jsonl", Path(tmp) / "result.jsonl"
            if self.image_args is None:
                data.write_text("\n".join(dataset_lines(specs, n, self.lexicon, added_special_tokens(self.tokenizer)))
                                + "\n")
            cmd = argv(self.command, api=self.api, url=(self.url or url).rstrip("/"), model_name=self.model_name,
                       tokenizer=self.tokenizer, dataset=self.image_args or data, num_prompts=n,
                       concurrency=concurrency,
                       warmup=max(1, warmup), output=out, seed=self.seed)
            self.last_argv = cmd
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False,
                                      timeout=timeout_s + TIMEOUT_MARGIN_S)
            except subprocess.TimeoutExpired:
                raise SweepError(f"bench_serving did not finish within {timeout_s + TIMEOUT_MARGIN_S:.0f} s") from None
            except OSError as exc:
                raise SweepError(f"cannot run bench_serving ({cmd[0]}): {exc}") from None
            if proc.returncode != 0 or not out.exists() or not out.read_text().strip():
                tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
                raise SweepError(f"bench_serving failed (exit {proc.returncode}): {tail[0][:300]}")
            result = json.loads(out.read_text().strip().splitlines()[-1])
        if not isinstance(result, dict):
            raise SweepError(f"bench_serving's result line is not a JSON object: {str(result)[:100]}")
        self.step_note = throughput_note(result, concurrency)
        return stats_from_result(result, n, concurrency)
