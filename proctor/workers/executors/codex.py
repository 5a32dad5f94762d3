"""Codex: `codex exec --json -c sandbox_mode="workspace-write" ... <prompt>`, and to resume
`codex exec resume --json ... <session> <prompt>` (tested with Codex 0.171.0).

`--full-auto` is refused since 0.147, `-s` only works before `exec` and `exec resume` refuses
it; the `sandbox_mode` override works for both. Under `workspace-write` only the checkout and
the temporary directories are writable, so proctor's state directory (the store, its blobs
and lock), its cache directory are added as writable roots: the worker runs `proctor run`
and `proctor job exit`, which write there. Its commands run without a login shell
(`allow_login_shell=false`), so they see the PATH proctor started it with.

`turn.completed` is the final reply (the last agent_message); `turn.failed` is a provider
failure; a top-level `error` event is a failure too (an `item.completed` of type `error` is a
warning, not a failure). Codex reports tokens, never dollars: `max_spend_usd` cannot be
enforced on a Codex worker and `proctor config show` says so (see proctor/config.py).
"""

from __future__ import annotations

from proctor.workers.executors import Event, decode

PROMPT_ON_STDIN = False


def writable_roots() -> list[str]:
    """This repository's state directory (its store, runs and blobs) and its cache directory,
    where the worker's `proctor run` and `proctor job exit` write: not the directories every
    repository's store lives under. Outside a repository, proctor's state and cache bases."""
    from proctor.paths import cache_base, find_checkout, repo_cache_dir, repo_state_dir, state_base

    import os

    try:
        checkout = find_checkout(os.getcwd())
        wanted = (repo_state_dir(checkout), repo_cache_dir(checkout))
    except Exception:  # not in a repository, or no git: the bases, as before
        wanted = (state_base(), cache_base())
    roots = []
    for path in wanted:
        try:
            os.makedirs(path, exist_ok=True)  # a sandbox cannot grant a root that does not exist
        except OSError:
            continue
        if path not in roots:
            roots.append(path)
    return roots


def _toml_list(items: list[str]) -> str:
    import json

    return "[" + ",".join(json.dumps(item) for item in items) + "]"


def argv(worker, prompt: str, resume: str | None = None, lease: str | None = None) -> list[str]:
    base = list(worker.command) if worker.command else ["codex"]
    out = base + ["exec"]
    if resume:
        out += ["resume"]
    out += ["--json"]
    if not worker.command:
        # exec defaults to a read-only sandbox; this override is accepted by exec and exec resume
        out += ["-c", 'sandbox_mode="workspace-write"',
                "-c", "sandbox_workspace_write.writable_roots=" + _toml_list(writable_roots()),
                # commands run in the worker's environment: a login shell's profile resets PATH,
                # and `proctor` (say, in a virtualenv) is then not found
                "-c", "allow_login_shell=false"]
    if worker.model:
        out += ["-m", worker.model]
    if resume:
        out += [resume]
    return out + [prompt]


class Parser:
    RELEVANT = (b"thread.started", b"turn.", b"agent_message", b'"error"')

    def __init__(self) -> None:
        self.last_message = ""

    def feed(self, line: str) -> list[Event]:
        event = decode(line)
        if event is None:
            return []
        kind = event.get("type")
        out: list[Event] = []
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            out.append(Event("session", value=event["thread_id"]))
        elif kind == "item.completed":
            item = event.get("item") if isinstance(event.get("item"), dict) else {}
            if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                self.last_message = item["text"]
        elif kind == "turn.started":
            out.append(Event("step"))
        elif kind == "turn.completed":
            out.append(Event("final", text=self.last_message, value="completed"))
        elif kind == "turn.failed":
            error = event.get("error") if isinstance(event.get("error"), dict) else {}
            message = str(error.get("message") or "turn failed")
            out.append(Event("provider_error", text=message))
            out.append(Event("final", text=self.last_message or f"(turn failed: {message})", value="failed"))
        elif kind == "error":
            out.append(Event("provider_error", text=str(event.get("message") or "codex error")))
        return out

    def close(self, exit_code: int | None) -> list[Event]:
        return []
