"""Empty a server's prefix cache between ladder steps: the engine's flush path (SGLang's POST /flush_cache, which
the simulator serves too).

SGLang refuses (HTTP 400) while any request is still running or queued, which is normal for a moment after
a window's drain cut requests off: the server aborts them as their connections close. So the flush is asked
again until it is accepted or the deadline passes; a refusal at the deadline is reported, never raised.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from sweep.engines import default

RETRY_S = 0.1


def flush_over_http(url: str, headers: dict[str, str], timeout_s: float = 30.0,
                    clock: Callable[[], float] = time.monotonic, path: str | None = None) -> str | None:
    """POST {url}{path} (the default engine's flush path where None) until it answers 200; None when flushed,
    else one line saying why not."""
    path = path or default().paths.flush_cache
    deadline = clock() + timeout_s
    last = "no answer"
    with httpx.Client(base_url=url, headers=headers, timeout=10.0) as client:
        while True:
            try:
                resp = client.post(path)
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code == 200:
                    return None
                last = f"HTTP {resp.status_code}: {resp.text.strip()[:120]}"
                if resp.status_code in (404, 405, 401, 403):  # no such endpoint or not allowed: asking again won't help
                    return f"POST {path} refused ({last})"
            if clock() + RETRY_S >= deadline:
                return f"POST {path} not accepted within {timeout_s:.0f} s ({last})"
            time.sleep(RETRY_S)  # bounded by the deadline above: the server needs a moment to abort cut-off requests
