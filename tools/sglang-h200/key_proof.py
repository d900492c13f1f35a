"""On the lent H200: real SGLang started by sweep's launcher keeps its API key out of every process's argv.

    usage: PYTHONPATH=SITE:. python3 tools/sglang-h200/key_proof.py BUNDLE OUT.json

Starts the tiny-llama shape (dummy weights) through tools/sglang-h200/start-server.sh, which runs the server
through the key shim (sweep/launchers/keyshim.py); then walks the server's process tree (launcher, scheduler and
detokenizer processes) and the whole process table for the key, sends one request with the key and one
without, and stops the server. Exit 0 only if the key is in no argv, the keyed request streams tokens and the
unkeyed one gets 401.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import httpx
import psutil

from sweep.core.types import ServerConfig
from sweep.launchers.sglang import SGLangLauncher
from sweep.profile import ServerSpec

ROOT = Path(__file__).resolve().parents[2]


def main(bundle: str, out: str) -> int:
    spec = ServerSpec(launcher="sglang", model_path=str(ROOT / "models" / "tiny-llama"), startup_timeout_s=500,
                      extra_args=["--load-format", "dummy", "--attention-backend", "triton", "--sampling-backend",
                                  "pytorch", "--disable-cuda-graph"])
    launcher = SGLangLauncher(spec, Path("/tmp/key-proof-logs"), validate=False, drain_s=30,
                              command_prefix=["bash", str(ROOT / "tools/sglang-h200/start-server.sh"), bundle, "--"])
    t0 = time.monotonic()
    h = launcher.start(ServerConfig(max_running_requests=8, mem_fraction_static=0.5))
    facts: dict[str, object] = {"startup_s": round(time.monotonic() - t0, 1), "shown_argv": h.argv}
    try:
        assert h.api_key and h.pid
        tree = [psutil.Process(h.pid), *psutil.Process(h.pid).children(recursive=True)]
        facts["tree"] = [{"pid": p.pid, "cmdline": " ".join(p.cmdline())[:200],
                          "key_in_argv": any(h.api_key in a for a in p.cmdline())} for p in tree]
        facts["processes_with_key_in_argv"] = [p.pid for p in psutil.process_iter(["cmdline"])
                                               if any(h.api_key in a for a in (p.info["cmdline"] or []))]
        body = {"text": "Hello", "sampling_params": {"max_new_tokens": 8, "temperature": 0}}
        keyed = httpx.post(f"{h.url}/generate", json=body, headers=h.headers(), timeout=120)
        bare = httpx.post(f"{h.url}/generate", json=body, timeout=30)
        facts.update(keyed_status=keyed.status_code, keyed_tokens=keyed.json().get("meta_info", {}).get(
            "completion_tokens") if keyed.status_code == 200 else None, unkeyed_status=bare.status_code,
            version=h.version)
    finally:
        stop = launcher.stop(h)
        facts["stop"] = {"graceful": stop.graceful, "exit_code": stop.exit_code, "leftovers": stop.killed_leftovers}
        facts["key_in_log_after_stop"] = bool(h.log_path and h.api_key and h.api_key in Path(h.log_path).read_text())
    Path(out).write_text(json.dumps(facts, indent=2))
    print(json.dumps(facts, indent=2))
    ok = (facts["processes_with_key_in_argv"] == [] and len(facts["tree"]) >= 2  # type: ignore[arg-type]
          and facts["keyed_status"] == 200 and facts["unkeyed_status"] == 401 and not facts["key_in_log_after_stop"])
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
