"""Gemini CLI: `gemini -p <prompt> --output-format stream-json --approval-mode yolo`
(`--resume <session_id>` to resume), tested with Gemini CLI 0.61.0.

Unattended: `-p` runs headless, where a tool call that would ask for approval is refused, so
the default command approves every call (`--approval-mode yolo`); proctor's guard, wired as
hooks, still judges each one. Gemini CLI loads a project's `.gemini/settings.json` (where
the guard may be wired) only in a trusted folder and exits 55 in an untrusted one; the worker
is started with `GEMINI_CLI_TRUST_WORKSPACE=true` (ENV), which trusts the checkout proctor
runs it in for that process only. (`--skip-trust` would not do: it runs without the project's
settings, hooks included.)

The stream: `init{session_id, model}`, `message` (the assistant's text in `delta` chunks),
`tool_use`, `tool_result`, `error{severity, message}` (a warning, such as an AfterAgent hook
handing the model a new prompt, or an error), `result{status, stats}`. The result is the final
reply; its `stats` count tokens only, never dollars, so `max_spend_usd` cannot be enforced on
a Gemini worker (`proctor config show` says so). A result with status `error` carrying an API
error (an HTTP 429 after the CLI's own ten retries, a 400, a 5xx; the process then exits with
the status modulo 256: 173, 144) or a network failure is a provider error, not counted
against the worker; exit 55 (an untrusted folder) is a setup problem, not the worker's either.

The guard is handed over by proctor (`env(lease)`), whatever the person or the checkout wired:
Gemini CLI has no command-line option for settings or hooks, but it reads its system settings,
which outrank the user's and the project's, from `$GEMINI_CLI_SYSTEM_SETTINGS_PATH`. proctor
writes there (in this repository's cache directory, else its state directory) the hooks
`proctor describe harness --host gemini` prints, each command pinned (`env -i`, this
interpreter, `proctor hook gemini --lease <job>`), merged into the system settings Gemini would
have read, with `hooksConfig.enabled: true` (unless those system settings turn hooks off). Each
hook has a name made afresh for every start, so a project's `hooksConfig.disabled` (a list
merged from every layer) cannot name it, and is `sequential`: it runs after the project's
hooks (system settings come last) and judges a tool input as the hook before it rewrote it.
Gemini CLI 0.61.0 loads a system settings file only if it and every directory above it belong
to root and no group or other may write them (`isFileAndDirectorySecureSync`), so this works
for a worker started as root; otherwise no file is written and the guard is the wiring the
person trusted (`hooks_handed` says which).
"""

from __future__ import annotations

import os
import re

from proctor.workers.executors import Event, decode

PROMPT_ON_STDIN = False
SPEND = "tokens"  # never dollars: max_spend_usd cannot be enforced (config reads this line)
ENV = {"GEMINI_CLI_TRUST_WORKSPACE": "true"}  # set in the worker's environment by proctor work
EXIT_UNTRUSTED = 55
PROVIDER_TEXT = re.compile(
    r"API Error|\b(?:status|code)\W{0,3}(?:4(?:08|29)|5\d\d)\b|RESOURCE_EXHAUSTED|UNAVAILABLE|INTERNAL|"
    r"DEADLINE_EXCEEDED|INVALID_ARGUMENT|UNAUTHENTICATED|PERMISSION_DENIED|quota|rate.?limit|"
    r"ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|fetch failed|socket hang up|Retry attempts exhausted",
    re.I,
)
# The system settings Gemini reads when GEMINI_CLI_SYSTEM_SETTINGS_PATH is not set (Linux, macOS)
SYSTEM_SETTINGS = {"darwin": "/Library/Application Support/GeminiCli/settings.json"}
NAME_PREFIX = "proctor-guard-"  # the names of proctor's hooks, made afresh for every start


def env(lease: str | None = None) -> dict:
    """The worker's environment for one start (an attempt or a resume): the checkout trusted
    (ENV) and, where Gemini will load it, the system settings file carrying proctor's hooks."""
    out = dict(ENV)
    path = write_settings(lease)
    if path:
        out["GEMINI_CLI_SYSTEM_SETTINGS_PATH"] = path
    return out


def hooks_handed() -> tuple[bool, str]:
    """Whether `env()` can hand Gemini proctor's hooks here, and why not when it cannot."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return False, "only on POSIX systems"
    if os.geteuid() != 0:
        return False, (
            "Gemini CLI loads a system settings file only when root owns it and every directory "
            "above it; proctor is not running as root"
        )
    if not any(_root_secure(os.path.join(d, "x")) for d in _settings_dirs()):
        return False, (
            "neither this repository's cache nor its state directory is owned by root all the way "
            "up and closed to group and others (" + ", ".join(_settings_dirs()) + ")"
        )
    return True, "handed as system settings"


def hooks_settings(lease: str | None = None, base: dict | None = None) -> dict:
    """System settings for a worker: `base` (the system settings Gemini would read), with the
    hooks `proctor describe harness --host gemini` prints added to each event's list, each command
    pinned with the worker's job, named afresh and run in sequence after any other hook."""
    import copy
    import json
    import secrets

    from proctor.hosts import gemini as wiring
    from proctor.workers.executors import pinned_hook

    text = "\n".join(line for line in wiring.wiring().splitlines() if not line.lstrip().startswith("#"))
    ours = json.loads(text)["hooks"]
    name = NAME_PREFIX + secrets.token_hex(8)
    command = pinned_hook(lease, "gemini") if lease else wiring.HOOK_COMMAND
    settings = copy.deepcopy(base) if isinstance(base, dict) else {}
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        hooks = {}
    for event, groups in ours.items():
        for group in groups:
            group["sequential"] = True
            for hook in group["hooks"]:
                hook["command"] = command
                hook["name"] = name
        kept = (
            [g for g in hooks.get(event) or [] if isinstance(g, dict) and not _ours(g)]
            if isinstance(hooks.get(event), list)
            else []
        )
        hooks[event] = kept + groups
    settings["hooks"] = hooks
    config = settings.get("hooksConfig")
    if not isinstance(config, dict):
        config = {}
    if config.get("enabled") is not False:  # the system's own settings keep their say
        config["enabled"] = True
    settings["hooksConfig"] = config
    return settings


def write_settings(lease: str | None = None) -> str | None:
    """Write the worker's system settings file where Gemini will load it; its path, or None
    (not root, no directory Gemini would trust, or a command Gemini would rewrite: it expands
    `$NAME` in settings strings)."""
    import hashlib
    import json
    import sys

    from proctor.hosts.gemini import _read_json
    from proctor.paths import write_atomic

    if not hooks_handed()[0]:
        return None
    current = os.environ.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH") or SYSTEM_SETTINGS.get(
        sys.platform, "/etc/gemini-cli/settings.json"
    )
    base = _read_json(current) if _root_secure(current) else None
    settings = hooks_settings(lease, base if isinstance(base, dict) else None)
    if any(
        "$" in hook.get("command", "")
        for groups in settings["hooks"].values()
        for g in groups
        if _ours(g)
        for hook in g["hooks"]
    ):
        return None
    tag = hashlib.sha256((lease or "").encode("utf-8")).hexdigest()[:16]
    for directory in _settings_dirs():
        path = os.path.join(directory, f"gemini-system-settings-{tag}.json")
        if not _root_secure(path):
            continue
        try:
            write_atomic(path, json.dumps(settings, indent=2) + "\n", mode=0o644)
        except OSError:
            continue
        if _root_secure(path):
            return path
    return None


def _ours(group: dict) -> bool:
    hooks = group.get("hooks")
    if not isinstance(hooks, list):
        hooks = []
    return any(isinstance(h, dict) and str(h.get("name") or "").startswith(NAME_PREFIX) for h in hooks)


def _settings_dirs() -> list[str]:
    """This repository's cache and state directories (outside a repository, proctor's bases)."""
    from proctor.paths import cache_base, find_checkout, repo_cache_dir, repo_state_dir, state_base

    try:
        checkout = find_checkout(os.getcwd())
        return [repo_cache_dir(checkout), repo_state_dir(checkout)]
    except Exception:
        return [cache_base(), state_base()]


def _root_secure(path: str) -> bool:
    """What Gemini CLI 0.61.0 asks of a system settings file (isFileAndDirectorySecureSync): the
    file, if it exists, and every directory above it, as named and as resolved, belong to root
    and are not writable by group or others; a symbolic link on the way belongs to root too.
    Directories that do not exist yet pass, as they do for Gemini; the file is checked again
    once written."""
    import stat

    def secure(place: str, directory: bool) -> bool:
        try:
            link = os.lstat(place)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        if stat.S_ISLNK(link.st_mode) and link.st_uid != 0:
            return False
        try:
            info = os.stat(place)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        if directory != stat.S_ISDIR(info.st_mode) or (not directory and not stat.S_ISREG(info.st_mode)):
            return False
        return info.st_uid == 0 and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)

    def ancestors(directory: str) -> list[str]:
        out = [directory]
        while os.path.dirname(out[-1]) != out[-1]:
            out.append(os.path.dirname(out[-1]))
        return out

    path = os.path.abspath(path)
    places = ancestors(os.path.dirname(path))
    real = os.path.realpath(path)
    if real != path:
        places += ancestors(os.path.dirname(real))
    return all(secure(d, True) for d in places) and secure(path, False) and secure(real, False)


def argv(worker, prompt: str, resume: str | None = None, lease: str | None = None) -> list[str]:
    base = list(worker.command) if worker.command else ["gemini"]
    out = base + ["-p", prompt, "--output-format", "stream-json"]
    if not worker.command:
        out += ["--approval-mode", "yolo"]  # headless: a call needing approval would be refused
    if worker.model:
        out += ["-m", worker.model]
    if resume:
        out += ["--resume", resume]
    return out


class Parser:
    RELEVANT = (b'"init"', b'"message"', b'"tool_use"', b'"tool_result"', b'"result"', b'"error"')

    def __init__(self) -> None:
        self.reply: list[str] = []  # the assistant's text since its last tool call
        self.final_seen = False
        self.tokens = 0

    def feed(self, line: str) -> list[Event]:
        event = decode(line)
        if event is None:
            return []
        kind = event.get("type")
        out: list[Event] = []
        if kind == "init":
            if isinstance(event.get("session_id"), str) and event["session_id"]:
                out.append(Event("session", value=event["session_id"]))
        elif kind == "message":
            if event.get("role") == "assistant" and isinstance(event.get("content"), str):
                if event.get("delta") is True or not self.reply:
                    self.reply.append(event["content"])
                else:
                    self.reply = [event["content"]]
        elif kind in ("tool_use", "tool_result"):
            self.reply = []
        elif kind == "error":
            # a warning (an AfterAgent hook's new prompt, a loop detected) starts a new reply
            if event.get("severity") == "warning":
                self.reply = []
        elif kind == "result":
            stats = event.get("stats")
            if not isinstance(stats, dict):
                stats = {}
            if isinstance(stats.get("total_tokens"), int):
                self.tokens = stats["total_tokens"]
            status = event.get("status") if isinstance(event.get("status"), str) else "unknown"
            reply = "".join(self.reply)
            if status != "success":
                error = event.get("error")
                if not isinstance(error, dict):
                    error = {}
                message = str(error.get("message") or status)
                kind_text = str(error.get("type") or "")
                if PROVIDER_TEXT.search(message) or PROVIDER_TEXT.search(kind_text):
                    out.append(Event("provider_error", text=message[:500]))
                reply = reply or f"(no reply: {status}: {message[:500]})"
            self.final_seen = True
            out.append(Event("final", text=reply, value=status))
        return out

    def partial(self) -> str | None:
        """What the worker has said so far: its reply since its last tool call."""
        return "".join(self.reply) or None

    def close(self, exit_code: int | None) -> list[Event]:
        if exit_code == EXIT_UNTRUSTED and not self.final_seen:
            return [
                Event(
                    "provider_error",
                    text="gemini exited 55: the folder is not trusted (set GEMINI_CLI_TRUST_WORKSPACE=true)",
                )
            ]
        return []
