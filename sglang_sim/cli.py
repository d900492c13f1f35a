"""`python -m sglang_sim`: sglang.launch_server's flags that matter, sim-only flags, lifecycle and faults."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import uvicorn

from sglang_sim.engine import Engine
from sglang_sim.fidelity import UNMODELLED_PREFIX, unmodelled_flags
from sglang_sim.params import (
    KV_DTYPE_BYTES,
    EngineKnobs,
    SimOOM,
    SimParams,
    gpu_preset,
    with_tp,
)
from sglang_sim.server import VERSION, Faults, SimServer
from sglang_sim.shape import choose_model
from sglang_sim.tokenizer import load as load_tokenizer

READY_LINE = "The server is fired up and ready to roll!"  # SGLang's own words; launchers wait for them
# SGLang 0.5.23's --schedule-policy choices (sweep.core.types.SCHEDULE_POLICIES holds the same set)
POLICIES = ["lpm", "random", "fcfs", "dfs-weight", "lof", "priority", "routing-key", "hrrn", "shortest-prefill-first"]


def log(msg: str) -> None:
    """SGLang's log prefix; flushed so launchers tailing the log see lines at once."""
    print(f"[{dt.datetime.now().strftime('%Y-%m-%d %H:%M:%S')}] {msg}", flush=True)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sglang_sim", description="Simulated SGLang server (no GPU).")
    a = p.add_argument
    a("--model-path", "--model", dest="model_path", required=True)
    a("--host", default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--max-running-requests", type=int)
    a("--mem-fraction-static", type=float)
    a("--chunked-prefill-size", type=int)
    a("--max-prefill-tokens", type=int, default=16384)
    a("--schedule-policy", choices=POLICIES, default="fcfs")
    a("--schedule-conservativeness", type=float, default=1.0)
    a("--enable-metrics", action="store_true")
    a("--api-key")
    a("--load-format", default="auto")
    a("--attention-backend")
    a("--sampling-backend")
    a("--mm-attention-backend")
    a("--disable-cuda-graph", action="store_true")
    a("--kv-cache-dtype", choices=list(KV_DTYPE_BYTES), default="auto")
    a("--cuda-graph-max-bs", "--cuda-graph-max-bs-decode", dest="cuda_graph_max_bs", type=int)
    a("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int,
      help="tensor parallel GPUs (default: the model preset's own, 1 but for llama3-70b)")
    a("--random-seed", type=int)
    a("--stream-interval", type=int, default=1)
    a("--log-level", default="info")
    a("--disable-radix-cache", action="store_true")
    a("--enable-cache-report", action="store_true")
    a("--enable-mixed-chunk", action="store_true")
    a("--served-model-name")
    a("--skip-server-warmup", action="store_true")
    a("--context-length", type=int)
    a("--trust-remote-code", action="store_true")
    a("--sim-gpu", default="H200", help="GPU preset: H200, H100-80G, A100-80G, L40S")
    a("--sim-model", help="model preset for a --model-path without config.json (default llama3-8b); "
                          "refused when the folder's config.json describes another shape")
    a("--sim-speed", type=float, default=1.0, help="multiply every step time (slower GPU)")
    a("--sim-speed-drift", type=float, default=0.0, metavar="CV",
      help="window-to-window noise: step times multiplied by a seeded lognormal factor (median 1, this CV) redrawn "
           "every --sim-speed-drift-period-s simulated seconds (sglang_sim.drift); 0 = off")
    a("--sim-speed-drift-period-s", type=float, default=60.0)
    a("--sim-crash-after-s", type=float)
    a("--sim-crash-after-requests", type=int)
    a("--sim-hang-after-s", type=float)
    a("--sim-slow-start-s", type=float, default=0.0)
    a("--sim-malformed-sse-rate", type=float, default=0.0)
    a("--sim-http500-rate", type=float, default=0.0)
    a("--sim-slow-metrics-s", type=float, default=0.0)
    a("--sim-ignore-sigterm", action="store_true")
    a("--sim-spawn-orphan", action="store_true")
    for option, takes in SGLANG_FLAGS:  # every other flag of real SGLang: accepted, listed as not modelled
        if option not in p._option_string_actions:
            if takes == "switch":
                a(option, action="store_true", dest=_unmodelled_dest(option))
            else:
                a(option, nargs="+" if takes == "values" else None, dest=_unmodelled_dest(option))
    return p


def _unmodelled_dest(option: str) -> str:
    return UNMODELLED_PREFIX + option.lstrip("-").replace("-", "_")


def _sglang_flags() -> list[tuple[str, str]]:
    """SGLang 0.5.17's options (sglang_flags.txt) and whether each is a switch, takes a value or several."""
    text = (Path(__file__).resolve().parent / "sglang_flags.txt").read_text()
    return [(o, t) for o, t in (ln.split() for ln in text.splitlines() if ln.strip() and not ln.startswith("#"))]


SGLANG_FLAGS = _sglang_flags()


def make_params(args: argparse.Namespace) -> SimParams:
    """GPU preset plus the model (shape.choose_model): --model-path's config.json, else the --sim-model preset.
    ValueError (ModelConflict among them) for an unknown preset, a bad config.json or the two disagreeing."""
    gpu = gpu_preset(args.sim_gpu)
    model = choose_model(args.model_path, args.sim_model)
    params = SimParams(gpu=gpu, model=model, speed=args.sim_speed, cuda_graph=not args.disable_cuda_graph,
                       speed_drift_cv=args.sim_speed_drift, speed_drift_period_s=args.sim_speed_drift_period_s)
    return with_tp(params, args.tp_size)  # the Engine applies the same knob (EngineKnobs.tp_size) again: a no-op


def knobs_from(args: argparse.Namespace) -> EngineKnobs:
    return EngineKnobs(max_running_requests=args.max_running_requests, mem_fraction_static=args.mem_fraction_static,
                       chunked_prefill_size=args.chunked_prefill_size, schedule_policy=args.schedule_policy,
                       schedule_conservativeness=args.schedule_conservativeness,
                       disable_radix_cache=args.disable_radix_cache, context_length=args.context_length,
                       max_prefill_tokens=args.max_prefill_tokens, enable_mixed_chunk=args.enable_mixed_chunk,
                       tp_size=args.tp_size, kv_cache_dtype=args.kv_cache_dtype, cuda_graph_max_bs=args.cuda_graph_max_bs)


def server_info(args: argparse.Namespace, eng: Engine) -> dict[str, Any]:
    """What /server_info returns: resolved args at top level, as 0.5.17 does."""
    info = {k: v for k, v in vars(args).items() if k != "api_key"}
    c = eng.cfg
    info.update(max_total_num_tokens=c.max_total_num_tokens, max_running_requests=c.max_running_requests,
                mem_fraction_static=c.mem_fraction_static, chunked_prefill_size=c.chunked_prefill_size,
                context_len=c.context_len, schedule_policy=c.schedule_policy, tp_size=eng.params.model.tp,
                kv_cache_dtype=eng.knobs.kv_cache_dtype, cuda_graph_max_bs=c.cuda_graph_max_bs or None,
                version=VERSION, simulated=True,
                sim_gpu=eng.params.gpu.name, sim_model=eng.params.model.name, page_size=eng.params.page_size,
                served_model_name=args.served_model_name or args.model_path, api_key=None,
                unmodelled_flags=unmodelled_flags(args, eng.knobs.schedule_policy),
                # the GPU group its launcher gave it: a simulated fleet is checked from the launch records
                cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"))
    return info


class _Server(uvicorn.Server):
    """uvicorn without its own signal handlers: SIGTERM drains like SGLang's tokenizer manager."""

    def capture_signals(self):  # type: ignore[no-untyped-def]
        import contextlib

        return contextlib.nullcontext()


def faults_from(args: argparse.Namespace) -> Faults:
    """The process faults the --sim-* flags ask for (crash, hang, slow start, bad responses)."""
    return Faults(args.sim_crash_after_s, args.sim_crash_after_requests, args.sim_hang_after_s,
                  args.sim_slow_start_s, args.sim_malformed_sse_rate, args.sim_http500_rate, args.sim_slow_metrics_s)


def build_server(args: argparse.Namespace, eng: Engine) -> SimServer:
    """The HTTP front over an engine: /server_info, the model folder's tokenizer, API key and faults."""
    info = server_info(args, eng)
    tokenizer = load_tokenizer(args.model_path)
    info["tokenizer"] = tokenizer.source
    log(f"Prompt tokens are counted with {tokenizer.source}")
    return SimServer(eng, info, info["served_model_name"], faults_from(args), log, api_key=args.api_key,
                     enable_metrics=args.enable_metrics, stream_interval=args.stream_interval,
                     seed=args.random_seed or 0, has_vision=eng.params.model.vision_params > 0, tokenizer=tokenizer)


class Lifecycle:
    """The process's life around uvicorn: the ready line, SIGTERM's drain, SIGINT, simulated crash, hang."""

    def __init__(self, args: argparse.Namespace, eng: Engine, sim: SimServer, server: uvicorn.Server):
        self.args, self.eng, self.sim, self.server = args, eng, sim, server
        self.tasks: list[asyncio.Task[Any]] = []

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self.tasks.append(asyncio.ensure_future(coro))

    def cancel(self) -> None:
        for t in self.tasks:
            t.cancel()

    def on_sigterm(self) -> None:
        if self.args.sim_ignore_sigterm:
            log("SIGTERM received. Ignored (--sim-ignore-sigterm).")
            return
        if self.sim.draining:
            return
        log("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
        self.sim.draining = True
        self.spawn(self.drain())

    def on_sigint(self) -> None:
        self.server.should_exit = True

    async def drain(self) -> None:
        """As SGLang's tokenizer manager does: finish what is in flight, saying how much is left every 5 s."""
        loop = asyncio.get_running_loop()
        last = -5.0
        while self.sim.streams or self.eng.has_work():
            if loop.time() - last >= 5.0:
                log(f"Gracefully exiting... Remaining number of requests {len(self.sim.streams)}.")
                last = loop.time()
            await asyncio.sleep(0.05)
        log("Gracefully exiting... Remaining number of requests 0.")
        self.server.should_exit = True

    async def come_up(self) -> None:
        """Once uvicorn listens: the (slow) start, the warm-up line, ready, then any scheduled fault."""
        args = self.args
        while not self.server.started:
            await asyncio.sleep(0.01)
        log(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
        if args.sim_slow_start_s:
            await asyncio.sleep(args.sim_slow_start_s)  # weights loading / warm-up taking long
        if not args.skip_server_warmup:
            log("Prefill batch, #new-seq: 1, #new-token: 8, #cached-token: 0, token usage: 0.00, #running-req: 0, "
                "#queue-req: 0 (simulated warmup)")
        self.sim.ready = True
        log(READY_LINE)
        if args.sim_crash_after_s is not None:
            self.spawn(self._later(args.sim_crash_after_s, self.crash))
        if args.sim_hang_after_s is not None:
            self.spawn(self._later(args.sim_hang_after_s, self.hang))

    @staticmethod
    async def _later(delay: float, fn: Callable[[], None]) -> None:
        await asyncio.sleep(delay)
        fn()

    @staticmethod
    def crash() -> None:
        log("Scheduler hit an exception: simulated crash (--sim-crash-after-s). Exiting.")
        os._exit(1)

    def hang(self) -> None:
        log("Simulated hang (--sim-hang-after-s): the scheduler stops making progress.")
        self.sim.hung = True


async def serve(args: argparse.Namespace, eng: Engine) -> int:
    """Serve the engine over HTTP until SIGTERM's drain ends or SIGINT; 1 if the port could not be bound."""
    sim = build_server(args, eng)
    server = _Server(uvicorn.Config(sim.app(), host=args.host, port=args.port, log_level="warning",
                                    access_log=False, timeout_graceful_shutdown=5))
    life = Lifecycle(args, eng, sim, server)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, life.on_sigterm)
    loop.add_signal_handler(signal.SIGINT, life.on_sigint)
    life.spawn(sim.run_engine())
    life.spawn(life.come_up())
    try:
        await server.serve()
    finally:
        life.cancel()
    if not server.started:
        log(f"ERROR: could not bind {args.host}:{args.port}")
        return 1
    return 0


def log_server_args(args: argparse.Namespace, params: SimParams) -> None:
    """The unmodelled flags, then the server_args line, as SGLang logs it (the API key included)."""
    for line in unmodelled_flags(args, args.schedule_policy):
        log(f"WARNING: accepted but not simulated: {line}")
    log(f"server_args=ServerArgs(model_path='{args.model_path}', mem_fraction_static={args.mem_fraction_static}, "
        f"max_running_requests={args.max_running_requests}, chunked_prefill_size={args.chunked_prefill_size}, "
        f"schedule_policy='{args.schedule_policy}', tp_size={params.model.tp}, host='{args.host}', port={args.port}, "
        f"random_seed={args.random_seed}, stream_interval={args.stream_interval}, sim_gpu='{params.gpu.name}', "
        f"sim_model='{params.model.name}', sim_speed={params.speed}, "
        f"api_key={args.api_key!r})")  # as SGLang's server_args line does: the key is in the log


def spawn_orphan() -> None:
    """--sim-spawn-orphan: a child in a session of its own, which a process-group kill does not reach."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", "sim-orphan"],
                             start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    log(f"Spawned orphan child pid={child.pid} in its own session (--sim-spawn-orphan)")


def load_engine(args: argparse.Namespace, params: SimParams) -> Engine | None:
    """The engine, with SGLang's weight-loading and KV-pool lines; None (OOM logged) if the pool won't fit."""
    gib = params.gpu.mem_bytes / 2**30 - params.gpu.context_bytes / 2**30
    log(f"Load weight begin. avail mem={gib:.2f} GB")
    try:
        eng = Engine(params, knobs_from(args), log=log, seed=args.random_seed)
    except SimOOM as exc:
        log(f"Load weight end. mem usage={params.model.weight_bytes / 2**30:.2f} GB.")
        log(f"RuntimeError: {exc}")
        return None
    c = eng.cfg
    log(f"Load weight end. type={params.model.name}, avail mem={gib - c.extra['weight_gb']:.2f} GB, "
        f"mem usage={c.extra['weight_gb']:.2f} GB.")
    log(f"KV Cache is allocated. #tokens: {c.max_total_num_tokens}, K size: {c.extra['kv_gb'] / 2:.2f} GB, "
        f"V size: {c.extra['kv_gb'] / 2:.2f} GB")
    log(f"max_total_num_tokens={c.max_total_num_tokens}, chunked_prefill_size={c.chunked_prefill_size}, "
        f"max_prefill_tokens={args.max_prefill_tokens}, max_running_requests={c.max_running_requests}, "
        f"context_len={c.context_len}, available_gpu_mem={c.available_gpu_mem_gb:.2f} GB")
    return eng


def main(argv: list[str] | None = None) -> int:
    """`python -m sglang_sim`: exit 2 for a bad preset, 1 if the KV pool does not fit or the port is taken."""
    args = build_parser().parse_args(argv)
    log("SIMULATED SGLang server (sglang_sim): no GPU and no model weights; timings come from a roofline model.")
    try:
        params = make_params(args)
    except ValueError as exc:
        log(f"ERROR: {exc}")
        return 2
    if args.random_seed is None:
        args.random_seed = random.randrange(1 << 30)
    log_server_args(args, params)
    if args.sim_spawn_orphan:
        spawn_orphan()
    eng = load_engine(args, params)
    if eng is None:
        return 1
    if not Path(args.model_path).exists():
        log(f"WARNING: model path {args.model_path} does not exist; the simulator does not need it")
    try:
        return asyncio.run(serve(args, eng))
    except KeyboardInterrupt:
        return 0
