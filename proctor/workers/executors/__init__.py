"""One module per agent CLI, each with the same small interface:

    argv(worker, prompt, resume=None, lease=None) -> list[str]   one attempt's command line (lease: the job)
    PROMPT_ON_STDIN: bool                            whether the prompt goes on stdin instead
    SPEND = "usd" | "tokens" | "none"                what the CLI reports of its spend, on a line
                                                     of its own: config reads it from the file
    Parser().feed(line) -> [Event]                   one stdout line in, proctor's events out
    Parser().close(exit_code) -> [Event]             the process has exited
    Parser.RELEVANT (optional): byte strings; a line holding none of them is output only
    Parser.TAIL (optional): only this many last lines of each read are fed
    ENV (optional): variables set in the worker's environment (its attempts and resumes)
    env(lease) (optional): more such variables, made for the worker's job (gemini's hook settings)
    Parser().partial() (optional) -> str | None      what the worker has said so far: the reply
                                                     kept when it is stopped before a final one
    Parser().skim(data, start, end) (optional)       shown the stretches of whole lines not fed

Events: Event("session", value=id), Event("final", text=reply), Event("confirm", text=reply,
value=kind) (a final reply confirmed later: the text and kind, no new grace window),
Event("step") (work resumed after a final-looking reply), Event("cost", value=total usd so
far), Event("fatal", text=...), Event("provider_error", text=...).

Adding a CLI is adding a module here: config lists this directory's files (config.EXECUTORS,
the names `module()` accepts and [workers] executor = ... takes) and reads each one's SPEND line
(config.TOKENS_ONLY: "tokens" means max_spend_usd cannot be enforced). It reads them as text,
since config is core and imports no capability; ARCHITECTURE.md lists the rest.
"""

from __future__ import annotations


class Event:
    __slots__ = ("kind", "text", "value")

    def __init__(self, kind: str, text: str | None = None, value=None) -> None:
        self.kind, self.text, self.value = kind, text, value

    def __repr__(self) -> str:
        return f"Event({self.kind!r}, {self.text!r}, {self.value!r})"


def decode(line: str) -> dict | None:
    """One stream line as a JSON object, or None for anything else (a CLI's stray output)."""
    import json

    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def pinned_hook(lease: str, host: str) -> str:
    """`proctor hook <host> --lease <job>` as a shell command line, run by this proctor's own
    interpreter (`-I`: no PYTHON* variable, no script directory on sys.path) in an environment
    of proctor's choosing (`env -i`): no variable a host's settings or a checkout's files set
    reaches it, so none can point the hook at another proctor, an empty store or no lease.
    """
    import os
    import shlex
    import sys

    from proctor.paths import cache_base, state_base

    # PROCTOR_WORKER_HOOK: the hook judges a `proctor work` worker, which holds its job's secret
    # and is resumed by its runner (the guard's monitor rules read it; env -i hides the rest)
    keep = {
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": os.path.expanduser("~"),
        "LANG": "C.UTF-8",
        "PROCTOR_STATE_DIR": state_base(),
        "XDG_CACHE_HOME": os.path.dirname(cache_base()),
        "PROCTOR_WORKER_HOOK": "1",
    }
    from proctor import broker

    socket = broker.SERVING.get(lease)
    if socket:
        # a sandboxed worker: its domain denies proctor's state, and the broker of its attempt
        # runs the hook for it, with the store's URL (the worker is handed none)
        keep[broker.ENV] = socket
    else:
        keep.update(_pinned_store())
    words = [
        "/usr/bin/env",
        "-i",
        *(f"{key}={value}" for key, value in keep.items()),
        sys.executable,
        "-I",
        "-m",
        "proctor",
        "hook",
        host,
        "--lease",
        lease,
    ]
    return " ".join(shlex.quote(word) for word in words)


def _pinned_store() -> dict:
    """The runner's store for the pinned hook (work.py pins PROCTOR_STORE_URL while it runs) and
    this machine's name. A PostgreSQL URL may hold a password: it goes in a 0600 file named by
    PROCTOR_STORE_URL_FILE, not on a command line every process of the machine can read."""
    import hashlib
    import os

    from proctor.paths import state_base
    from proctor.store import URL_ENV

    pinned = {}
    if os.environ.get("PROCTOR_MACHINE"):
        pinned["PROCTOR_MACHINE"] = os.environ["PROCTOR_MACHINE"]
    url = os.environ.get(URL_ENV)
    if not url:
        return pinned
    if url.startswith("sqlite"):
        pinned[URL_ENV] = "sqlite:"
        return pinned
    directory = os.path.join(state_base(), "store-urls")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, hashlib.sha256(url.encode()).hexdigest()[:32])
    if not os.path.exists(path):
        fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(url)
        os.replace(path + ".tmp", path)
    pinned["PROCTOR_STORE_URL_FILE"] = path
    return pinned


def module(executor: str):
    """proctor/workers/executors/<executor>.py; the names are config.EXECUTORS, this package's
    modules as config lists them."""
    import importlib

    from proctor.config import EXECUTORS

    if executor not in EXECUTORS:
        raise KeyError(executor)
    return importlib.import_module(f"proctor.workers.executors.{executor}")
