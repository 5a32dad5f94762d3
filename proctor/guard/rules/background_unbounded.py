"""background-unbounded: a shell command sent to the background with nothing bounding its run time."""

from __future__ import annotations

import os

from proctor.guard.call import PRE_TOOL
from proctor.guard.context import Context

NAME = "background-unbounded"
DEFAULT = "advise"
EVENTS = (PRE_TOOL,)
ORDER = 160  # where it is judged among the rules (proctor/guard/rules/__init__.py)
OPTIONS = {"ceiling_minutes": 120.0}
SUMMARY = "a command sent to the background that runs until stopped, with no timeout"
CATCHES = (
    "A shell command sent to the background (run_in_background, a trailing &, nohup, setsid) "
    "with nothing bounding its run time: no timeout wrapper, and a command that runs until "
    "stopped (tail -f, watch, a dev server, sleep infinity, anything with --watch). The advisory "
    "gives the same command wrapped at the ceiling (ceiling_minutes, 120 unset)."
)
WHY = (
    "A background command that never ends on its own outlives the work it was started for; the "
    "session, its subagents and the next person all inherit it. Bounding it costs one word and "
    "makes background-silent's stop safe to take."
)

_SCRIPTS = ("dev", "start", "serve", "watch", "preview")
# Commands that serve or watch until stopped, whatever their arguments.
_FOREVER = (
    "watch",
    "nodemon",
    "yes",
    "live-server",
    "http-server",
    "serve",
    "uvicorn",
    "gunicorn",
    "hypercorn",
    "webpack-dev-server",
    "caddy",
    "redis-server",
    "mongod",
    "ngrok",
)


def _unbounded(argv: list[str]) -> bool:
    if not argv:
        return False
    name = os.path.basename(argv[0])
    args = argv[1:]
    if any(a in ("--watch", "-w", "--serve", "--follow") for a in args) and name not in ("grep", "rg", "wc"):
        return True
    if name == "tail" and any(
        a in ("-f", "-F") or (a.startswith("-") and "f" in a[1:] and not a.startswith("--")) for a in args
    ):
        return True
    if name == "sleep" and args and args[0] in ("infinity", "inf"):
        return True
    if name in ("npm", "pnpm", "yarn", "bun"):
        script = args[1] if args[:1] == ["run"] and len(args) > 1 else (args[0] if args else "")
        return script in _SCRIPTS
    if name in ("next", "nuxt", "astro", "remix") and args[:1] == ["dev"]:
        return True
    if name == "vite" and (not args or args[0] in ("dev", "serve", "preview")):
        return True
    if name == "rails" and args[:1] in (["s"], ["server"]):
        return True
    if name in ("ng", "jekyll", "hugo") and args[:1] in (["serve"], ["server"]):
        return True
    if name.startswith("python") and (args[:2] == ["-m", "http.server"] or "runserver" in args):
        return True
    if name == "flask" and args[:1] == ["run"]:
        return True
    if name in ("docker", "podman") and "up" in args and "-d" not in args and "--detach" not in args:
        return True
    if (
        name == "kubectl"
        and args[:1] in (["port-forward"], ["logs"])
        and ("-f" in args or args[:1] == ["port-forward"])
    ):
        return True
    return name in _FOREVER


def _inline(argv: list[str]) -> list[list[str]] | None:
    """The commands of `bash -c '...'` (or sh, zsh), to judge what actually runs."""
    if not argv or os.path.basename(argv[0]) not in ("sh", "bash", "zsh", "dash") or "-c" not in argv[1:]:
        return None
    from proctor.guard import shell

    index = argv.index("-c")
    if index + 1 >= len(argv):
        return None
    try:
        commands, _nested = shell.parse(argv[index + 1])
    except shell.ParseError:
        return None
    return [c.argv for c in commands]


def check(ctx: Context) -> list[tuple[str, str]]:
    call = ctx.call
    if not call.command:
        return []
    ceiling = ctx.option(NAME, "ceiling_minutes", OPTIONS["ceiling_minutes"])
    findings = []
    for raw, argv, background in ctx.shell_writes.simple:
        wrappers = [os.path.basename(w) for w in raw[: len(raw) - len(argv)]]
        sent_back = call.background or background or "nohup" in wrappers or "setsid" in wrappers
        if not sent_back or "timeout" in wrappers or "gtimeout" in wrappers:
            continue
        inner = _inline(argv)
        if _unbounded(argv) or "watch" in wrappers or (inner is not None and any(_unbounded(a) for a in inner)):
            command = " ".join(argv)
            findings.append(
                (
                    "rule",
                    f"`{command}` goes to the background and runs until stopped; bound it: "
                    f"timeout {ceiling:g}m {command}",
                )
            )
    return findings
