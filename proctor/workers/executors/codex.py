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
enforced on a Codex worker and `proctor config show` says so (see proctor/config/workers.py).

The guard is handed over on the command line, whatever the checkout or the person wired: the
hooks `proctor describe harness --host codex` prints, as `-c hooks.<Event>=[...]` overrides
(Codex's session-flags layer, which outranks the user's and the project's config.toml), each
command pinned (`pinned_hook`: `env -i`, this interpreter, `proctor hook codex --lease <job>`).
`codex exec` silently skips a hook nobody trusted, so the trust Codex's `/hooks` review would
record for exactly these hooks goes with them (`-c hooks.state={...}`, keyed by the layer's
name `/<session-flags>/config.toml`; the session-flags layer is one of those whose hook state
Codex reads, a project's is not), and `-c features.hooks=true` outranks a `[features] hooks =
false` anywhere below. Not `--dangerously-bypass-hook-trust`: that would run every other hook
the person left untrusted too. Hooks come with a person's `command` as well; the sandbox
options do not (a command of one's own says how it runs).

With `[sandbox] workers = true` the worker starts inside proctor's Landlock grant, where
Codex's own sandbox (bubblewrap) cannot be built: it runs with `sandbox_mode="danger-full-access"`,
proctor's grant the boundary of what its commands write.
"""

from __future__ import annotations

from proctor.workers.executors import Event, decode, pinned_hook

PROMPT_ON_STDIN = False
SPEND = "tokens"  # never dollars: max_spend_usd cannot be enforced (config reads this line)
# How Codex names the hooks of its `-c` overrides in hook-state keys (codex-rs/hooks discovery.rs:
# ConfigLayerSource::SessionFlags => "<session-flags>/config.toml", resolved against "/").
SESSION_FLAGS_SOURCE = "/<session-flags>/config.toml"


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


def hook_overrides(lease: str | None = None) -> list[str]:
    """`-c` overrides handing Codex proctor's hooks (with the worker's job, each command pinned),
    trusted and switched on: Codex runs them whatever the checkout's and the person's config say
    (a managed policy, such as allow_managed_hooks_only, still can refuse them)."""
    import json

    from proctor.hosts import codex as wiring

    command = pinned_hook(lease, "codex") if lease else wiring.COMMAND
    handler = {"type": "command", "command": command, "timeout": wiring.TIMEOUT}
    inline = "{" + f'type="command",command={json.dumps(command)},timeout={wiring.TIMEOUT}' + "}"
    out = ["-c", "features.hooks=true"]
    states = []
    for event in wiring.WIRED_EVENTS:
        out += ["-c", f"hooks.{event}=[{{hooks=[{inline}]}}]"]
        key = f"{SESSION_FLAGS_SOURCE}:{wiring.EVENT_LABELS[event]}:0:0"
        trusted = json.dumps(wiring.trust_hash(event, handler))
        states.append(f"{json.dumps(key)}={{enabled=true,trusted_hash={trusted}}}")
    return out + ["-c", "hooks.state={" + ",".join(states) + "}"]


def _store_is_remote() -> bool:
    """The runner's store is PostgreSQL (work.py pins PROCTOR_STORE_URL while it runs)."""
    import os

    from proctor.store import URL_ENV, is_postgres

    return is_postgres(os.environ.get(URL_ENV))


def argv(worker, prompt: str, resume: str | None = None, lease: str | None = None) -> list[str]:
    base = list(worker.command) if worker.command else ["codex"]
    out = base + ["exec"]
    if resume:
        out += ["resume"]
    out += ["--json"]
    from proctor import broker

    if not worker.command and lease in broker.SERVING:
        # the worker starts inside proctor's own sandbox ([sandbox] workers = true), where Codex's
        # cannot be built (bubblewrap may not remount / in a Landlock domain: "bwrap: Failed to make
        # / slave"): its commands run in proctor's grant, which is the boundary, and its proctor
        # commands reach the store through the broker of its attempt
        out += ["-c", 'sandbox_mode="danger-full-access"', "-c", "allow_login_shell=false"]
    elif not worker.command:
        # exec defaults to a read-only sandbox; this override is accepted by exec and exec resume
        out += [
            "-c",
            'sandbox_mode="workspace-write"',
            "-c",
            "sandbox_workspace_write.writable_roots=" + _toml_list(writable_roots()),
            # commands run in the worker's environment: a login shell's profile resets PATH,
            # and `proctor` (say, in a virtualenv) is then not found
            "-c",
            "allow_login_shell=false",
        ]
        if _store_is_remote():
            # its sandbox blocks every socket, the store's too: on a PostgreSQL store the worker's own
            # proctor commands (run, job exit) reach it only with the sandbox's network opened
            out += ["-c", "sandbox_workspace_write.network_access=true"]
    out += hook_overrides(lease)  # the guard, whatever the checkout wires or the person trusted
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
            item = event.get("item")
            if not isinstance(item, dict):
                item = {}
            if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                self.last_message = item["text"]
        elif kind == "turn.started":
            out.append(Event("step"))
        elif kind == "turn.completed":
            out.append(Event("final", text=self.last_message, value="completed"))
        elif kind == "turn.failed":
            error = event.get("error")
            if not isinstance(error, dict):
                error = {}
            message = str(error.get("message") or "turn failed")
            out.append(Event("provider_error", text=message))
            out.append(Event("final", text=self.last_message or f"(turn failed: {message})", value="failed"))
        elif kind == "error":
            out.append(Event("provider_error", text=str(event.get("message") or "codex error")))
        return out

    def partial(self) -> str | None:
        """What the worker has said so far: its last agent message."""
        return self.last_message or None

    def close(self, exit_code: int | None) -> list[Event]:
        return []
