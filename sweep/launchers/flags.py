"""Check launch flags against the installed server's own `--help` before a launch burns minutes."""

from __future__ import annotations

import difflib
import re
import subprocess
import threading
from collections.abc import Sequence

from sweep.core.errors import LaunchError
from sweep.engines import DEFAULT_ENGINE, SGLANG, flags_in_argv
from sweep.launchers import keyshim

HELP_TIMEOUT_S = 120.0  # SGLang's `--help` imports torch: tens of seconds on a cold cache

# An option line in argparse's help body: two spaces, then the invocation ("--a A, --b A").
_OPTION_LINE = re.compile(r"^  (-{1,2}[A-Za-z0-9][^\s,]*.*)$")
_FLAG_TOKEN = re.compile(r"(?<![\w-])(--?[A-Za-z0-9][A-Za-z0-9_.-]*)")
_USAGE_FLAG = re.compile(r"[\[ |](--?[A-Za-z0-9][A-Za-z0-9_.-]*)")

_help_cache: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], str] = {}
_version_cache: dict[str, str] = {}
_lock = threading.Lock()


def parse_help_flags(help_text: str) -> set[str]:
    """Every option string (aliases included) declared in an argparse `--help` text."""
    flags: set[str] = set()
    for line in help_text.splitlines():
        m = _OPTION_LINE.match(line)
        if not m:
            continue
        # The invocation ends where the help column starts (two or more spaces).
        invocation = re.split(r"\s{2,}", m.group(1).strip(), maxsplit=1)[0]
        for part in invocation.split(", "):
            tok = _FLAG_TOKEN.match(part.strip())
            if tok:
                flags.add(tok.group(1))
    # The usage block names every option's first spelling; union it in case the body was cut.
    usage, _, _ = help_text.partition("\n\n")
    if usage.lstrip().startswith("usage:"):
        flags.update(_USAGE_FLAG.findall(usage))
    return flags


def explain_flag(flag: str, known: set[str], version: str, engine: str = DEFAULT_ENGINE) -> str | None:
    """Why `flag` would be rejected (or silently mis-parsed) by this version of the engine; None if it is valid."""
    if flag in known:
        return None
    head = f"{flag} is not a flag of {engine} {version}"
    prefixed = sorted(k for k in known if k.startswith(flag))
    if len(prefixed) == 1:
        # argparse would accept this abbreviation today, but a release that adds a flag with the
        # same prefix makes it ambiguous and the launch exits 2 (that is how --cuda-graph-max-bs broke
        # in 0.5.23), so a sweep profile must spell flags out.
        return f"{head} (only an abbreviation of {prefixed[0]}; spell it out, abbreviations break across releases)"
    if prefixed:  # ambiguous prefix: argparse exits 2 ("ambiguous option"); the shortest is the likely rename
        candidates = sorted(prefixed, key=lambda k: (len(k), k))
    else:
        candidates = difflib.get_close_matches(flag, sorted(known), n=3, cutoff=0.6)
    hint = f"did you mean {candidates[0]}?" if candidates else "no similar flag"
    return f"{head} (removed or renamed; {hint})"


def validate_flags(argv_flags: Sequence[str], help_text: str, version: str, engine: str = DEFAULT_ENGINE) -> None:
    """Raise LaunchError(reason="bad_flag") naming every flag the help text does not declare exactly."""
    known = parse_help_flags(help_text)
    if not known:
        return  # an unparsable help text must not block a launch; the server's argparse still guards it
    problems = [p for f in dict.fromkeys(flags_in_argv(argv_flags)) if (p := explain_flag(f, known, version, engine))]
    if problems:
        raise LaunchError("; ".join(problems), reason="bad_flag")


def help_text(command: Sequence[str], timeout_s: float = HELP_TIMEOUT_S, env: dict[str, str] | None = None) -> str:
    """The `--help` output of a launch command (e.g. [python, -m, module]), cached per command and env."""
    key = (tuple(command), tuple(sorted(env.items())) if env else ())
    with _lock:
        if key in _help_cache:
            return _help_cache[key]
    shown = " ".join(keyshim.readable(command))  # the key shim's code is never part of a message
    try:
        proc = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL, env=env)
    except subprocess.TimeoutExpired:
        raise LaunchError(f"`{shown} --help` did not finish in {timeout_s:.0f} s", reason="timeout") from None
    except OSError as exc:
        raise LaunchError(f"cannot run `{shown} --help`: {exc}", reason="crash") from None
    text = proc.stdout or ""
    if proc.returncode != 0 or "usage:" not in text:
        last = keyshim.scrub(proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or ["no output"]
        raise LaunchError(f"`{shown} --help` failed (exit {proc.returncode}): {last[0]}", reason="crash")
    with _lock:
        _help_cache[key] = text
    return text


def installed_version(python: str, package: str = SGLANG.version_package, timeout_s: float = 60.0,
                      env: dict[str, str] | None = None) -> str:
    """`importlib.metadata.version(package)` inside the target python, or "unknown"."""
    key = f"{python}\0{package}\0{sorted(env.items()) if env else ''}"
    with _lock:
        if key in _version_cache:
            return _version_cache[key]
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    try:
        proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL, env=env)
        version = proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        version = "unknown"
    with _lock:
        _version_cache[key] = version
    return version
