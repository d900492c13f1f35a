#!/usr/bin/env bash
# On the lent H200: run sweep's own CLI against real SGLang 0.5.17 (bundle from build-bundle.sh).
#   usage: tools/sglang-h200/proof.sh STAGE OUTDIR     STAGE: ladder | chat | knee | multimodal | kvbound |
#                                                             kvrepeat | crosscheck | crosscheck-vl | workers |
#                                                             refine | repeat | answer | sessions | trace | earlystop | night | kvdtype |
#                                                             crosscheck-sessions | tiebreak
# Needs, carried: .sglang-bundle/ (the SGLang site bundle) and .whl/core/ (sweep's dependencies missing there; the
# device tool carries 64 MiB, so the bench-only wheels live in .whl/bench/; the image has tokenizers).
# Everything lands in one database and report folder under $WORK (default /tmp/proof); OUTDIR gets flat
# copies (the device tool returns files at most two folders down).
set -euo pipefail
stage=$1; out=$2; mkdir -p "$out"; work=${WORK:-/tmp/proof}; mkdir -p "$work"
# SEED_DB: a results.db from an earlier call (a study to resume), copied in before the stage runs
[ -n "${SEED_DB:-}" ] && [ -f "$SEED_DB" ] && [ ! -f "$work/results.db" ] && cp "$SEED_DB" "$work/results.db"
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd); cd "$root"
if [ ! -f /tmp/site/.ok ]; then
  if [ -f .whl/site/core-site.tar.xz ]; then  # the same wheels unpacked and xz-packed: 3 MB less to carry
    mkdir -p /tmp/site && tar -xJf .whl/site/core-site.tar.xz -C /tmp/site
  else
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*/*.whl
  fi
  touch /tmp/site/.ok
fi
export PYTHONPATH=/tmp/site:$root PYTHONUNBUFFERED=1
bundle="$root/.sglang-bundle/sglang-0.5.17-site.tar.xz"
# Unpack the SGLang bundle once so that `--help` (flag validation) is fast.
[ "${LAUNCHER:-sglang}" = sim ] || bash "$here/start-server.sh" "$bundle" -- --help >/dev/null 2>&1 || true
cmd="[\"bash\",\"$here/start-server.sh\",\"$bundle\",\"--\"]"
bench="[\"env\",\"SGLANG_MODULE=sglang.bench_serving\",\"bash\",\"$here/start-server.sh\",\"$bundle\",\"--\"]"
db="$work/results.db"
common=(--db "$db" --out "$work/reports" --launcher sglang --set "server.command=$cmd")
# LAUNCHER=sim: the same stage on the simulated server (a CPU dry run of a stage before it spends GPU time)
[ "${LAUNCHER:-sglang}" = sim ] && common=(--db "$db" --out "$work/reports" --launcher sim --driver http)
dummy='server.extra_args=["--load-format","dummy","--attention-backend","triton","--sampling-backend","pytorch"]'
[ "${LAUNCHER:-sglang}" = sim ] && dummy='server.extra_args=["--load-format","dummy"]'
# issue 19: the primary tier is the interactive profile's own SLA; strict is a second tier judged on the same windows
tiers='sla=[{"name":"interactive","primary":true,"ttft_ms":1000,"tpot_ms":100,"ttft_percentile":95,"tpot_percentile":95,"max_error_rate":0.01},{"name":"strict","ttft_ms":300,"tpot_ms":30,"ttft_percentile":95,"tpot_percentile":95,"max_error_rate":0.01}]'

short=(--set window.warmup_requests=32 --set window.warmup_seconds=5 --set window.measure_seconds=${MEASURE_S:-20}
       --set window.drain_seconds=20 --set server.startup_timeout_s=400)
# EARLY_MIN_S: let window.early_stop decide within short windows (its default waits 60 s, longer than MEASURE_S)
[ -n "${EARLY_MIN_S:-}" ] && short+=(--set "window.early_stop.min_seconds=$EARLY_MIN_S"
                                    --set "window.early_stop.min_requests=${EARLY_MIN_N:-30}")
set +e
case "$stage" in
  ladder)
    python3 -m sweep.cli ladder --profile interactive "${common[@]}" "${short[@]}" \
      --config max_running_requests=64,mem_fraction_static=0.85,chunked_prefill_size=8192,schedule_policy=lpm \
      --set 'ladder=[8,32,128]' --set 'server.extra_args=["--load-format","dummy","--attention-backend","triton","--sampling-backend","pytorch"]' ;;
  knee)
    python3 -m sweep.cli knee --profile interactive "${common[@]}" "${short[@]}" --study h200-knee \
      --set 'ladder=[16,64]' \
      --set 'search.space={"max_running_requests":[32,128],"mem_fraction_static":[0.85],"chunked_prefill_size":[8192],"schedule_policy":["lpm"]}' \
      --set 'server.extra_args=["--load-format","dummy","--attention-backend","triton","--sampling-backend","pytorch"]' ;;
  multimodal)
    python3 -m sweep.cli ladder --profile multimodal "${common[@]}" "${short[@]}" \
      --config max_running_requests=32,mem_fraction_static=0.7,chunked_prefill_size=8192 \
      --set 'workload.mix={"text":0.5,"image":0.5}' --set 'ladder=[8,32]' --set workload.num_requests=1000 \
      --set 'server.extra_args=["--load-format","dummy","--attention-backend","triton","--sampling-backend","pytorch","--mm-attention-backend","triton_attn"]' ;;
  chat)
    # The OpenAI chat API through the same load generator (text only: the 8B shape has no vision tower).
    python3 -m sweep.cli ladder --profile interactive "${common[@]}" "${short[@]}" \
      --config max_running_requests=64,mem_fraction_static=0.85,chunked_prefill_size=8192,schedule_policy=lpm \
      --set workload.api=chat --set 'ladder=[8,64]' \
      --set 'server.extra_args=["--load-format","dummy","--attention-backend","triton","--sampling-backend","pytorch","--enable-cache-report"]' ;;
  kvbound)
    # A constrained KV pool: the article's regime (retractions, a queue that never empties) on purpose.
    python3 -m sweep.cli ladder --profile interactive "${common[@]}" "${short[@]}" \
      --config max_running_requests=128,mem_fraction_static=0.2,chunked_prefill_size=8192,schedule_policy=lpm \
      --set 'ladder=[32,128]' \
      --set 'server.extra_args=["--load-format","dummy","--attention-backend","triton","--sampling-backend","pytorch"]' ;;
  kvrepeat)
    # docs/calibration.md: a second KV-bound ladder (52k-token pool) around the knee, to tell the simulator's
    # -34% TTFT P50 one step past it from window noise. ~4 minutes on a warm machine.
    python3 -m sweep.cli knee --profile interactive "${common[@]}" "${short[@]}" --study kv-calib-2 \
      --set 'search.space={"max_running_requests":[256],"mem_fraction_static":[0.14],"chunked_prefill_size":[4096],"schedule_policy":["lpm"]}' \
      --set 'ladder=[48,64,96]' \
      --set 'server.extra_args=["--load-format","dummy","--attention-backend","triton","--sampling-backend","pytorch"]' ;;
  crosscheck)
    # After each of sweep's windows, SGLang's own bench_serving (from the same bundle) replays the same requests at
    # the same concurrency on the same server; REFERENCE=h11 uses sweep's second HTTP stack instead.
    python3 -m sweep.cli crosscheck --profile interactive "${common[@]}" "${short[@]}" --study "h200-crosscheck-${REFERENCE:-bench_serving}" \
      --reference "${REFERENCE:-bench_serving}" --set "crosscheck.command=$bench" \
      --config max_running_requests=256,mem_fraction_static=0.85,chunked_prefill_size=8192,schedule_policy=lpm \
      --set 'ladder=[16,32]' \
      --set 'server.extra_args=["--load-format","dummy","--attention-backend","triton","--sampling-backend","pytorch"]' ;;
  crosscheck-vl)
    # The Qwen2.5-VL shape, every request one 448x448 PNG and text: bench_serving's image dataset of the same shape
    # (it cannot replay sweep's own images; REFERENCE=h11 replays them exactly).
    python3 -m sweep.cli crosscheck --profile multimodal "${common[@]}" "${short[@]}" --study "h200-crosscheck-vl-${REFERENCE:-bench_serving}" \
      --reference "${REFERENCE:-bench_serving}" --set "crosscheck.command=$bench" \
      --config max_running_requests=32,mem_fraction_static=0.7,chunked_prefill_size=8192 \
      --set 'workload.mix={"text":0.0,"image":1.0}' --set 'workload.shared_prefix={"groups":0,"share":0.0}' \
      --set 'workload.prompt_len={"kind":"uniform","low":128,"high":512}' \
      --set 'workload.output_len={"kind":"uniform","low":64,"high":256}' \
      --set 'ladder=[8,32]' --set workload.num_requests=4000 \
      --set 'server.extra_args=["--load-format","dummy","--attention-backend","triton","--sampling-backend","pytorch","--mm-attention-backend","triton_attn"]' ;;
  workers)
    # Two study workers sharing one H200 (two-GPU machines are withheld): each worker's servers get
    # CUDA_VISIBLE_DEVICES=0, a port range of their own and a small static memory fraction (SGLang takes it of
    # the memory free when it starts, so two fit). The study is shared through one SQLite file on this host
    # (WAL; Optuna's transactions BEGIN IMMEDIATE): no PostgreSQL on the GPU machine, none needed for one host.
    python3 -m sweep.cli study create --profile interactive --db "$db" --study h200-workers --launcher sglang \
      --set "server.command=$cmd" "${short[@]}" --set 'ladder=[16,64]' --set search.heartbeat_s=10 \
      --set 'search.space={"max_running_requests":[32,64],"mem_fraction_static":[0.3],"chunked_prefill_size":[4096,8192],"schedule_policy":["lpm"]}' \
      --set 'server.extra_args=["--load-format","dummy","--attention-backend","triton","--sampling-backend","pytorch"]' \
      --set search.screening.enabled=false --set soak.enabled=${SOAK:-false} --set soak.duration_s=30 \
      || exit $?
    # SGLang sizes its KV pool as (memory free now) - (memory free when it started) x (1 - fraction): two servers
    # starting at the same moment on one GPU both count the other's memory as theirs, and the second fails. So w1
    # joins once w0's first server answers HTTP at all (SGLang serves only after its KV pool is allocated; 401 for
    # want of the key counts), so each later launch is offset by about one start-up.
    pids=()
    for i in 0 1; do
      if [ "$i" = 1 ]; then
        python3 -c 'import sys, time, httpx
end = time.monotonic() + 450
while time.monotonic() < end:
    try:
        httpx.get("http://127.0.0.1:30000/health", timeout=2); sys.exit(0)
    except httpx.HTTPError: pass
    time.sleep(2)
sys.exit(1)' || echo "w0's server never answered /health; w1 starts anyway" >&2
      fi
      python3 -m sweep.cli worker --study h200-workers --db "$db" --out "$work/reports" --launcher sglang \
        --driver http --gpus 0 --ports "$((30000 + 100 * i))-$((30100 + 100 * i))" --label "w$i" --no-progress \
        > "$out/workers-w$i.log" 2>&1 &
      pids+=($!)
    done
    wrc=0; for p in "${pids[@]}"; do wait "$p" || wrc=$?; done
    python3 -m sweep.cli report h200-workers --db "$db" --out "$work/reports"
    python3 -m sweep.cli runs --study h200-workers --db "$db" --format csv > "$out/workers-runs.csv" || true
    (exit $wrc) ;;
  refine)
    # issue 19 §1: the boundary bisected on the same warm server (ladder 16/64, up to 3 refinement windows), then a
    # dense scan of the same configuration in the same call (a fresh launch, every 2 concurrencies around the
    # bracket; the ladder stops at its first failing, saturated step): where does the SLA really stop holding?
    python3 -m sweep.cli ladder --profile interactive "${common[@]}" "${short[@]}" --study h200-refine \
      --config max_running_requests=32,mem_fraction_static=0.85,chunked_prefill_size=8192,schedule_policy=lpm \
      --set 'ladder=[16,64]' --set refine.enabled=true --set refine.max_steps=3 --set refine.tolerance=0.1 \
      --set "$dummy" || exit $?
    python3 -m sweep.cli ladder --profile interactive "${common[@]}" "${short[@]}" --study h200-dense \
      --config max_running_requests=32,mem_fraction_static=0.85,chunked_prefill_size=8192,schedule_policy=lpm \
      --set "ladder=${DENSE:-[30,32,34,36,38,40,42,44,48]}" --set refine.enabled=false \
      --set search.far_windows.enabled=false --set "$dummy" ;;
  repeat)
    # issue 28: one configuration launched twice in one call, each launch a ladder 16/64 with refinement: does each
    # launch's interval (SLA boundary, knee goodput) hold the other launch's point? (docs/h200-sample/repeat/)
    for run in ${RUNS:-a b}; do  # RUNS=c: one more launch under another study name
      python3 -m sweep.cli ladder --profile interactive "${common[@]}" "${short[@]}" --study "h200-repeat-$run" \
        --config max_running_requests=32,mem_fraction_static=0.85,chunked_prefill_size=8192,schedule_policy=lpm \
        --set 'ladder=[16,64]' --set refine.enabled=true --set refine.max_steps=4 --set refine.tolerance=0.1 \
        --set "$dummy" || exit $?
    done ;;
  answer)
    # issue 19 §2-5: one study, two SLO tiers, SGLang's defaults measured as configuration 0, refinement on:
    # the final answer block (per tier: winner, refined knee, gain over the defaults, why, launch command).
    python3 -m sweep.cli knee --profile interactive "${common[@]}" "${short[@]}" --study h200-answer \
      --set "$tiers" --set search.baseline=true --set 'ladder=[24,96]' \
      --set refine.enabled=true --set refine.max_steps=3 --set refine.tolerance=0.1 \
      --set 'search.space={"max_running_requests":[48],"mem_fraction_static":[0.85],"chunked_prefill_size":[8192],"schedule_policy":["lpm"]}' \
      --set search.screening.enabled=false --set soak.enabled=false --set "$dummy" || exit $?
    python3 -m sweep.cli explain h200-answer --db "$db" > "$out/answer-explain.txt" || true ;;
  sessions)
    # issue 20: multi-turn chat (profiles/chat-sessions.yaml: every turn sends the conversation so far with SGLang's
    # own replies), two configurations that differ only in mem_fraction_static (0.17: a ~86k-token KV pool, 0.85),
    # ladder 16/32/64: cache hit and TTFT by turn index, a knee per configuration. RESUME=1 continues the study
    # (results.db carried in as SEED_DB): one device call cannot hold both configurations.
    python3 -m sweep.cli knee --profile chat-sessions "${common[@]}" "${short[@]}" --study h200-sessions \
      ${RESUME:+--resume} --set 'ladder=[16,32,64]' --set refine.enabled=false --set search.baseline=false \
      --set search.screening.enabled=false --set soak.enabled=false \
      --set 'search.space={"max_running_requests":[128],"mem_fraction_static":[0.17,0.85],"chunked_prefill_size":[4096],"schedule_policy":["lpm"]}' \
      --set search.far_windows.enabled=false --set "$dummy" ;;
  crosscheck-sessions)
    # issue 31 §4: multi-turn chat cross-checked. After each of sweep's windows the h11 reference replays the same
    # sessions (conversations, think times, fan-out) on the same server from a flushed cache; the report's cross-check
    # table judges sessions completed, session time P50/P90, the cache hit of turn 1 and of later turns, and the
    # later turns' prompt tokens beside TTFT/TPOT. 2-4 turns and 0.2 s think times so a 20 s window completes
    # enough sessions to judge; one configuration, ladder 16/32: about 6 minutes with the first launch.
    python3 -m sweep.cli crosscheck --profile chat-sessions "${common[@]}" "${short[@]}" --study h200-crosscheck-sessions \
      --reference h11 --config max_running_requests=128,mem_fraction_static=0.85,chunked_prefill_size=4096,schedule_policy=lpm \
      --set 'ladder=[16,32]' --set ladder_max=0 --set refine.enabled=false --set 'workload.sessions.turns={"kind":"uniform","low":2,"high":4}' \
      --set 'workload.sessions.think_time={"kind":"fixed","value":0.2}' --set "$dummy" ;;
  trace)
    # issue 31: a trace at its own timing. A SYNTHETIC slice in the FAST'25 Mooncake format (tools/mooncake_slice.py:
    # deterministic, 600 s at ~2 req/s, 512-token hash blocks shared by system prompts and multi-turn sessions; the
    # device has no network to fetch the recorded trace) replayed at 1x, 2x and 4x its recorded rate on ONE
    # configuration (one launch, TRACE_S-second windows), then the cache hit measured vs predicted per window.
    python3 tools/mooncake_slice.py "$work/mooncake-slice.jsonl" --seconds 600 --rate 2 --seed 31 --max-blocks 12
    python3 -m sweep.cli ladder --profile trace-replay "${common[@]}" --study h200-trace \
      --config max_running_requests=64,mem_fraction_static=0.85,chunked_prefill_size=8192,schedule_policy=lpm \
      --set "workload.dataset.path=$work/mooncake-slice.jsonl" --set 'arrival.scales=[1,2,4]' --set 'ladder=[1,2,3]' \
      --set window.warmup_requests=8 --set window.warmup_seconds=3 --set "window.measure_seconds=${TRACE_S:-40}" \
      --set window.drain_seconds=15 --set server.startup_timeout_s=400 --set refine.enabled=false \
      --set "$dummy" || exit $?
    python3 tools/sglang-h200/trace_hits.py "$db" h200-trace "$work/mooncake-slice.jsonl" | tee "$out/trace-hits.txt" ;;
  earlystop)
    # issue 29: windows that stop when their verdict is decided. One launch, ladder 16/128 at max_running_requests 32:
    # c=16 passes and runs its whole window (ES_MEASURE_S, 150 s); c=128 queues 96 requests, its TTFT P95 cannot pass
    # and the window stops once window.early_stop's test decides (after min_seconds 20 s, 50 requests), stored with
    # runs.stopped_early_by and the seconds it measured. About 140 s launch + 2 x 5 s warm-up + 150 + ~25 s windows.
    # No prior and no far windows: the interactive profile's prior predicts the knee at 16, so c=128 would run a
    # quarter window (37 s, 15 s in the dry run's 60) as a far step, shorter than min_seconds, and never stop early.
    python3 -m sweep.cli ladder --profile interactive "${common[@]}" "${short[@]}" --study h200-earlystop \
      --config max_running_requests=32,mem_fraction_static=0.85,chunked_prefill_size=8192,schedule_policy=lpm \
      --set 'ladder=[16,128]' --set refine.enabled=false --set ladder_max=0 \
      --set window.measure_seconds=${ES_MEASURE_S:-150} --set window.early_stop.min_seconds=20 \
      --set window.early_stop.min_requests=50 --set search.prior=none --set search.prior_margin=null \
      --set search.far_windows.enabled=false --set "$dummy" ;;
  night)
    # issue 29: one cut study twice in one call, same space and windows: today's settings (every configuration
    # screened on quarter windows, no prior, no short windows, no early stop: 2 screen launches + 1 final) and the new
    # ones (the simulated prior as the screen, on this machine's CPU, ~20 s; far steps on short windows; windows that
    # stop early where this checkout's profile has window.early_stop: 1 launch when the prior keeps one). Then both
    # winners and GPU times (tools/sglang-h200/night_summary.py). Launches: 4 (~140 + 3 x 70 s); windows ~11 s
    # (screen) and ~20 s (full) at MEASURE_S=12: about 9.5 min in all on a warm machine; the new settings run first,
    # so a call that runs out of time loses today's half (NIGHT=old SEED_DB=results.db runs it alone). NIGHT_MEM='[0.14,0.17,0.85]' adds a third
    # configuration (a 5th launch): then run NIGHT=old and NIGHT=new as two calls (SEED_DB=results.db between them).
    # On the simulator the pool fractions 0.14 / 0.17 / 0.85 (mrr 128) have knees 32 / 64 / 128, so the prior's 15%
    # margin keeps 0.85 alone (0.2 would tie it: a pool never full at 128 measures alike).
    space="search.space={\"max_running_requests\":[128],\"mem_fraction_static\":${NIGHT_MEM:-[0.14,0.85]},\"chunked_prefill_size\":[4096],\"schedule_policy\":[\"lpm\"]}"
    # NIGHT_REFINE=true: both studies refine their final ladders (refine.max_steps NIGHT_REFINE_STEPS, default 2)
    cut=(--set "$space" --set "ladder=${NIGHT_LADDER:-[32,64,128]}" --set ladder_max=128
         --set "refine.enabled=${NIGHT_REFINE:-false}" --set "refine.max_steps=${NIGHT_REFINE_STEPS:-2}"
         --set search.baseline=false --set soak.enabled=false --set search.screening.enabled=true
         --set search.screening.fraction=0.25 --set search.screening.keep=0.25 --set search.screening.min_keep=1
         --set window.measure_seconds=${MEASURE_S:-12} --set window.warmup_seconds=3 --set window.warmup_requests=16
         --set window.drain_seconds=8 --set "$dummy")
    # wt-early's field, when this checkout has it: a bool, or a section with `enabled`
    early=$(python3 -c 'from sweep.profile import Window
f = Window.model_fields.get("early_stop")
print("" if f is None else "window.early_stop" + ("" if f.annotation is bool else ".enabled"))')
    nrc=0
    mode=${NIGHT:-both}
    if [ "$mode" = both ] || [ "$mode" = new ]; then
      python3 -m sweep.cli knee --profile interactive "${common[@]}" "${short[@]}" --study h200-night-new "${cut[@]}" \
        --set search.prior=sim --set search.prior_margin=0.15 --set search.far_windows.enabled=true \
        --set search.far_windows.factor=2 --set search.far_windows.fraction=0.25 ${early:+--set "$early=true"} \
        --no-progress > "$out/night-new.log" 2>&1 || nrc=$?
      tail -n 40 "$out/night-new.log"
    fi
    if [ "${NIGHT:-both}" = probe ] || [ "${NIGHT:-both}" = probe+shipped ]; then
      # the probe screen (search.screening.probe): each survivor of the prior's margin measured once, one full window
      # at its predicted knee's step; with NIGHT_MEM='[0.2,0.85]' the prior keeps both (a pool never full at 128):
      # 2 probe launches + 1 final (~140 + 2 x 55 s). probe+shipped then runs the shipped screen on the same two
      # (quarter ladders, the ties measured again: up to 5 more launches) for the same-winner check.
      python3 -m sweep.cli knee --profile interactive "${common[@]}" "${short[@]}" --study h200-night-probe "${cut[@]}" \
        --set search.prior=sim --set search.prior_margin=0.15 --set search.far_windows.enabled=true \
        --set search.far_windows.factor=2 --set search.far_windows.fraction=0.25 ${early:+--set "$early=true"} \
        --set 'search.screening.probe={"enabled":true,"fraction":1.0}' --no-progress > "$out/night-probe.log" 2>&1 || nrc=$?
      tail -n 40 "$out/night-probe.log"
      python3 tools/sglang-h200/night_summary.py "$db" h200-night-probe | tee "$out/night-probe-summary.txt"
    fi
    if [ "${NIGHT:-both}" = probe+shipped ] || [ "${NIGHT:-both}" = shipped ]; then
      python3 -m sweep.cli knee --profile interactive "${common[@]}" "${short[@]}" --study h200-night-shipped "${cut[@]}" \
        --set search.prior=sim --set search.prior_margin=0.15 --set search.far_windows.enabled=true \
        --set search.far_windows.factor=2 --set search.far_windows.fraction=0.25 ${early:+--set "$early=true"} \
        --set 'search.screening.probe={"enabled":false}' --set search.screening.ties=true --no-progress \
        > "$out/night-shipped.log" 2>&1 || nrc=$?
      tail -n 40 "$out/night-shipped.log"
      python3 tools/sglang-h200/night_summary.py "$db" h200-night-probe h200-night-shipped | tee "$out/night-summary.txt"
    fi
    if [ "${NIGHT:-both}" = lean ] || [ "${NIGHT:-both}" = lean+old ]; then
      # session 13, the lean night (what profiles/interactive.yaml ships now): the prior as the screen; among its
      # survivors screen ladders from half the predicted knee up (search.screening.near_knee); the screen's ties
      # measured again, at most 2 (ties_max); the final ladder short near its knee too, its refinement deciding
      # (far_windows.near short: a bracket end left short measured again). With NIGHT_MEM='[0.2,0.85]' and
      # NIGHT_LADDER='[16,32,64,128]' NIGHT_REFINE=true: 2 screen launches of 2 windows each, 1 final launch.
      python3 -m sweep.cli knee --profile interactive "${common[@]}" "${short[@]}" --study h200-night-lean "${cut[@]}" ${NIGHT_RESUME:+--resume} \
        --set search.prior=sim --set search.prior_margin=0.15 --set search.far_windows.enabled=true \
        --set search.far_windows.factor=2 --set search.far_windows.fraction=0.25 --set search.far_windows.near=short \
        --set search.screening.near_knee=true --set search.screening.ties=true --set search.screening.ties_max=2 \
        --set search.screening.ties_order=screen_and_prior \
        --set 'search.screening.probe={"enabled":false}' ${early:+--set "$early=true"} --no-progress \
        > "$out/night-lean.log" 2>&1 || nrc=$?
      tail -n 40 "$out/night-lean.log"
      python3 tools/sglang-h200/night_summary.py "$db" h200-night-lean | tee "$out/night-lean-summary.txt"
    fi
    case "${NIGHT:-both}" in probe*|shipped|lean) (exit $nrc); exit $? ;; esac
    if [ "${NIGHT:-both}" != new ]; then
      python3 -m sweep.cli knee --profile interactive "${common[@]}" "${short[@]}" --study h200-night-old "${cut[@]}" \
        --set search.prior=none --set search.prior_margin=null ${early:+--set "$early=false"} \
        --set search.screening.ties=false --set search.tie_break.enabled=false --no-progress \
        > "$out/night-old.log" 2>&1 || nrc=$?
      tail -n 40 "$out/night-old.log"
    fi
    if [ "${NIGHT:-both}" = lean+old ] || { [ "${NIGHT:-both}" = old ] && [ -n "${SEED_DB:-}" ]; }; then
      python3 tools/sglang-h200/night_summary.py "$db" h200-night-old h200-night-lean | tee "$out/night-summary.txt"
    else
      python3 tools/sglang-h200/night_summary.py "$db" h200-night-old h200-night-new | tee "$out/night-summary.txt"
    fi
    (exit $nrc) ;;
  kvdtype)
    # issue 30: the KV-bound configuration (256 / 0.14 / 4096 / lpm, a ~52k-token pool) with --kv-cache-dtype auto
    # (bf16) vs fp8_e5m2 (half the bytes per KV token: the pool should double). For each: the KV pool predicted
    # before launch (sweep.launchers.prediction) vs the server log's "KV Cache is allocated. #tokens: N", the knee
    # and its goodput, and the simulator's prediction of the same ladder (virtual clock, after the GPU runs).
    # Two launches (~140 s + ~70 s) and 2 x 3 short windows: MEASURE_S=12 fits the device call's 600 s; LADDER and
    # LADDER_MAX (0: no climbing on past the top step) shorten it.
    # fp8_e5m2 KV on triton attention: supported since SGLang PR 1286 (2024; e4m3 needs scales, e5m2 does not), so
    # both run on triton; FP8_BACKEND=flashinfer moves the fp8 launch to flashinfer if the bundle's triton refuses.
    kvladder=${LADDER:-[48,96,144]}
    kvconf=max_running_requests=256,mem_fraction_static=0.14,chunked_prefill_size=4096,schedule_policy=lpm
    backend=triton; [ "${LAUNCHER:-sglang}" = sim ] && backend=
    for dt in auto fp8_e5m2; do
      # kv_cache_dtype is a searched flag of the configuration (issue 30: stored with it, in its label and launch)
      be=$backend; [ "$dt" != auto ] && [ -n "${FP8_BACKEND:-}" ] && be=$FP8_BACKEND
      args='"--load-format","dummy"'
      [ -n "$be" ] && args="$args,\"--attention-backend\",\"$be\",\"--sampling-backend\",\"pytorch\""
      python3 -m sweep.cli ladder --profile interactive "${common[@]}" "${short[@]}" --study "h200-kvdtype-$dt" \
        --config "$kvconf,kv_cache_dtype=$dt" --set "ladder=$kvladder" --set refine.enabled=false \
        --set "ladder_max=${LADDER_MAX:-256}" --set "server.extra_args=[$args]" || echo "kvdtype: the $dt ladder exited $?" >&2
      # the simulator's prediction of the same ladder (virtual clock: seconds, no GPU)
      python3 -m sweep.cli ladder --profile interactive --db "$work/sim.db" --out "$work/sim-reports" \
        --launcher sim --driver virtual "${short[@]}" --study "sim-kvdtype-$dt" --config "$kvconf,kv_cache_dtype=$dt" \
        --set "ladder=$kvladder" --set refine.enabled=false --set "ladder_max=${LADDER_MAX:-256}" \
        --set 'server.extra_args=["--load-format","dummy"]' \
        > "$out/kvdtype-sim-$dt.txt" 2>&1 || echo "kvdtype: the simulated $dt ladder exited $?" >&2
    done
    python3 "$here/kvdtype_summary.py" "$db" "$work/sim.db" | tee "$out/kvdtype-summary.md" ;;
  tiebreak)
    # issue 29, the same winner: two configurations that measure alike on the H200 (the KV pool is never full at
    # c=64: mem_fraction_static 0.85 and 0.86) tie within the window noise, so search.tie_break launches each again
    # and measures its knee load once more at full length; the answer (tiebreak-report.md, answer.json) says what it
    # decided. Launches: 4 (~140 + 3 x 70 s); windows: 2 ladders of 2 steps and 2 re-measures at MEASURE_S=12, about
    # 8 min on a warm machine. No tie called (the two knees ranked apart): 2 launches, and the answer has no tie-break.
    space='search.space={"max_running_requests":[64],"mem_fraction_static":[0.85,0.86],"chunked_prefill_size":[8192],"schedule_policy":["lpm"]}'
    python3 -m sweep.cli knee --profile interactive "${common[@]}" "${short[@]}" --study h200-tiebreak \
      --set "$space" --set 'ladder=[32,64]' --set ladder_max=64 --set refine.enabled=false \
      --set search.baseline=false --set soak.enabled=false --set search.screening.enabled=false \
      --set search.prior=none --set search.prior_margin=null --set search.tie_break.enabled=true \
      --set window.measure_seconds=${MEASURE_S:-12} --set window.warmup_seconds=3 --set window.warmup_requests=16 \
      --set window.drain_seconds=8 --set "$dummy" --no-progress > "$out/tiebreak.log" 2>&1
    trc=$?
    tail -n 40 "$out/tiebreak.log"
    python3 -m sweep.cli explain h200-tiebreak --db "$db" > "$out/tiebreak-explain.txt" || true
    (exit $trc) ;;
  *) echo "unknown stage $stage" >&2; exit 2 ;;
esac
rc=$?
python3 -m sweep.cli runs --db "$db" --format csv > "$out/runs.csv" || true
cp "$db" "$out/results.db"
latest=$(ls -td "$work"/reports/*/ | head -1)
cp "$latest/report.md" "$out/$stage-report.md"; cp "$latest"/*.png "$out/" 2>/dev/null || true
log=$(ls -t "$latest"/logs/*.log 2>/dev/null | head -1); [ -n "$log" ] && tail -c 20000 "$log" > "$out/$stage-server-log-tail.txt" || true
exit $rc
