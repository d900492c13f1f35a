"""`sweep serve`'s server (sweep/ui/live.py) on a real socket: started before its study exists, the page says so
and keeps asking; once the study is stored, the same URL serves it."""

from __future__ import annotations

from pathlib import Path

import httpx

from sweep.profile import load_profile
from sweep.store import Store
from sweep.ui.live import LiveServer

ROOT = Path(__file__).resolve().parent.parent


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
