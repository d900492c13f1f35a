"""`sweep serve`'s server (sweep/ui/live.py) on a real socket: started before its study exists, the page says so
and keeps asking; once the study is stored, the same URL serves it."""

from __future__ import annotations

from pathlib import Path

import httpx

from sweep.profile import load_profile
from sweep.store import Store
from sweep.ui.live import LiveServer

ROOT = Path(__file__).resolve().parents[2]


def test_a_page_opened_before_its_study_exists_refreshes_until_the_study_is_there(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    store = Store(url)
    live = LiveServer(url, "later", port=0)
    page = live.start()
    try:
        early = httpx.get(page, timeout=10)
        assert early.status_code == 404 and "no study later in this database yet" in early.text
        assert '<meta http-equiv="refresh" content="2">' in early.text  # it asks again by itself
        prof = load_profile(ROOT / "profiles" / "smoke.yaml")
        store.create_study("later", "smoke", prof.model_dump_json(), prof.fingerprint(), "grid", True, "virtual",
                           "optuna-later")
        now = httpx.get(page, timeout=10)
        assert now.status_code == 200 and "sweep live: later" in now.text
        state = httpx.get(page + "state.json", timeout=10).json()
        assert (state["study"], state["status"], state["windows_done"]) == ("later", "running", 0)
    finally:
        live.stop()


HOSTILE = "<!--<script> </script><b>x</b> & \u2028"


def test_text_that_would_close_or_comment_out_the_script_element_stays_data(tmp_path: Path) -> None:
    """A worker label and a failure reason holding `<!--<script>` and `</script>`: the state embedded in the page
    holds no `<` (an HTML parser sees no tag, comment or end of the element in it) and reads back as the same text."""
    import json
    import re

    from sweep.core.types import ServerConfig

    url = f"sqlite:///{tmp_path / 'r.db'}"
    store = Store(url)
    prof = load_profile(ROOT / "profiles" / "smoke.yaml")
    sid = store.create_study("hostile", "smoke", prof.model_dump_json(), prof.fingerprint(), "grid", True, "virtual",
                             "optuna-hostile")
    wid = store.register_worker(sid, HOSTILE, "host", 1, 0.0, None, "test", prof.fingerprint())
    cid = store.create_server_config(sid, ServerConfig(max_running_requests=4), "sim", [], 0)
    store.update_server_config(cid, status="failed", failure_reason=HOSTILE, worker_id=wid)
    live = LiveServer(url, "hostile", port=0)
    page = live.start()
    try:
        text = httpx.get(page, timeout=10).text
    finally:
        live.stop()
    m = re.search(r'<script id="state" type="application/json">(.*?)</script>', text, re.S)
    assert m is not None
    assert "<" not in m.group(1) and ">" not in m.group(1) and "&" not in m.group(1)
    state = json.loads(m.group(1))
    assert [w["worker"] for w in state["workers"]] == [HOSTILE]
    assert [f["reason"] for f in state["failures"]] == [HOSTILE]
    assert text.count("</script>") == 3  # the state's, uPlot's and live.js's: nothing else ends an element


def test_serving_on_every_interface_says_other_hosts_can_read_the_study(tmp_path: Path) -> None:
    """`sweep serve --host 0.0.0.0`: a warning line before the URL (127.0.0.1, the default, prints none)."""
    import os
    import select
    import subprocess
    import sys
    import time

    prof = load_profile(ROOT / "profiles" / "smoke.yaml")
    db = tmp_path / "r.db"
    Store(f"sqlite:///{db}").create_study("open", "smoke", prof.model_dump_json(), prof.fingerprint(), "grid", True,
                                          "virtual", "optuna-open")
    seen = {}
    for host in ("0.0.0.0", "127.0.0.1"):
        proc = subprocess.Popen([sys.executable, "-m", "sweep.cli", "serve", "--db", str(db), "--host", host,
                                 "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200"))
        assert proc.stdout is not None
        out, end = "", time.monotonic() + 60
        try:
            while "live page http" not in out and time.monotonic() < end and proc.poll() is None:
                if select.select([proc.stdout], [], [], 0.5)[0]:
                    out += proc.stdout.readline()
        finally:
            proc.terminate()
            proc.wait(timeout=20)
        assert "live page http://" in out, out
        seen[host] = out
    assert "warning: the live page listens on 0.0.0.0: other hosts can read the study" in seen["0.0.0.0"]
    assert "warning" not in seen["127.0.0.1"]
