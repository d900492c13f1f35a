"""Prompts that fit the model: the longest prompt a workload can draw against the server's context length.

A prompt at or beyond the context length is refused by the server (SGLang: "The input (N tokens) is longer than
the model's context length"), so every such request of a study would be an error, and a 2M-token prompt exhausts
the client's memory before it is sent. load_profile refuses such a profile in one line. The context length is the
server's --context-length in server.extra_args, else the model folder's config.json (max_position_embeddings);
a hub name (no local folder) or an attached server is not checked here.
"""

from __future__ import annotations

import json
from typing import Protocol

from sweep import engines
from sweep.core.errors import ProfileError
from sweep.profile.bundled import model_folder
from sweep.profile.workload import LengthDist, Workload

MIN_TAIL = 4  # unique tokens a prefixed prompt keeps after its shared prefix (sweep.workload.requests)
_CONFIG_KEYS = ("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions")


class _Server(Protocol):
    @property
    def engine(self) -> str: ...

    @property
    def launcher(self) -> str: ...

    @property
    def model_path(self) -> str: ...

    @property
    def extra_args(self) -> list[str]: ...


class _Prof(Protocol):
    @property
    def workload(self) -> Workload: ...

    @property
    def server(self) -> _Server: ...


def longest_draw(d: LengthDist) -> int:
    """The longest length a distribution can draw after its clamps."""
    top = {"fixed": d.value, "uniform": d.high}.get(d.kind) or d.max
    return max(d.min, min(top, d.max))


def longest_prompt(w: Workload) -> int:
    """The most text tokens one request's prompt can have: the drawn length (a dataset's entries are cut at
    prompt_len.max when the profile sets it; its entries are not read here, so an unset max is not judged), or a
    shared prefix and its shortest tail where that is longer."""
    if w.dataset is not None:
        longest = w.prompt_len.max if "max" in w.prompt_len.model_fields_set else 0
    else:
        longest = longest_draw(w.prompt_len)
    sp = w.shared_prefix
    if sp.groups > 0 and sp.share > 0:
        longest = max(longest, sp.length + MIN_TAIL)
    return longest


def context_length(prof: _Prof) -> tuple[int, str] | None:
    """(the server's context length in tokens, where it was read) or None when it is not known here."""
    flag = engines.get(prof.server.engine).flag("context_length")
    args = prof.server.extra_args
    for i, tok in enumerate(args):
        raw = args[i + 1] if tok == flag and i + 1 < len(args) else tok.partition("=")[2] if tok.startswith(
            f"{flag}=") else None
        if raw is not None and raw.isdigit():
            return int(raw), f"server.extra_args {flag}"
    folder = model_folder(prof.server.model_path)
    config = folder / "config.json" if folder is not None else None
    if config is None or not config.is_file():
        return None
    try:
        data = json.loads(config.read_text())
    except (OSError, ValueError):
        return None
    for scope in (data, data.get("text_config") if isinstance(data, dict) else None):
        if isinstance(scope, dict):
            for key in _CONFIG_KEYS:
                if isinstance(scope.get(key), int) and scope[key] > 0:
                    return scope[key], f"{config} {key}"
    return None


def check_prompt_fits(prof: _Prof, where: str) -> None:
    """ProfileError (one line) when the workload can draw a prompt at or beyond the server's context length."""
    if prof.server.launcher == "attach":
        return  # the attached server's own model: its length is not known before it answers
    known = context_length(prof)
    if known is None:
        return
    limit, source = known
    sessions = prof.workload.sessions
    if sessions is not None and sessions.max_context > limit:
        raise ProfileError(f"{where}: workload.sessions.max_context: conversations of up to "
                           f"{sessions.max_context:,} tokens do not fit the model's context length of {limit:,} "
                           f"tokens ({source}); lower max_context to at most {limit:,}")
    longest = longest_prompt(prof.workload)
    if longest >= limit:
        field = ("workload.shared_prefix.length" if longest == prof.workload.shared_prefix.length + MIN_TAIL
                 and longest > longest_draw(prof.workload.prompt_len) else "workload.prompt_len")
        raise ProfileError(f"{where}: {field}: prompts of up to {longest:,} tokens do not fit the model's context "
                           f"length of {limit:,} tokens ({source}); lower prompt_len.max (or the fixed length) "
                           "below it")


def server_context(prof: _Prof) -> int | None:
    """The context length a dataset's entries are fitted to (workload.dataset.overlong): the server's, where it is
    known before launch; None for an attached server or a hub model without a local folder."""
    if prof.server.launcher == "attach":
        return None
    known = context_length(prof)
    return known[0] if known is not None else None
