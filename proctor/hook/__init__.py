"""`proctor hook <host>`: the command an agent host runs before and after each tool call.

Reads the host's JSON event from stdin, lets the guard judge it, prints the answer in
exactly the form that host honours, and only then writes the call's records, so a busy or
read-only store never delays or erases a verdict. It never fails closed and never prints a
traceback: a hook that cannot judge passes (`{}`), and with PROCTOR_HOOK_DEBUG set it says
why on stderr, which hosts keep in their debug log. Imports: the standard library's cheapest modules and
proctor's core; the CLI framework is never loaded (see proctor/__main__.py).
"""

from __future__ import annotations

import json
import os
import sys


from proctor.hosts import HOSTS, adapter  # noqa: F401  (the door's hosts, read from here by the CLI)

JSON_DEPTH = 10_000  # nesting the event is read to; past it the call is refused, never passed unread
USAGE = f"usage: proctor hook {'|'.join(HOSTS)} [--lease ID]"


def run(argv: list[str], stdin: bytes, environ: dict | None = None) -> tuple[str, int]:
    """The hook's whole work: (what to print on stdout, exit code). Never raises."""
    out, code, finish = judge(argv, stdin, environ)
    finish()
    return out, code


def judge(argv: list[str], stdin: bytes, environ: dict | None = None):
    """(answer, exit code, finish): the answer is reached before anything is recorded, and
    `finish()` writes the call's records afterwards (bounded; see Context.flush). Never raises."""
    env = os.environ if environ is None else environ
    done = lambda: None  # noqa: E731
    if not argv or argv[0] not in HOSTS:
        if argv and argv[0] in ("-h", "--help"):
            return USAGE + "\n", 0, done
        _debug(env, f"proctor hook: unknown host {argv[0] if argv else '(none)'}; {USAGE}", always=True)
        return "{}\n", 0, done
    host = argv[0]
    lease = None
    if "--lease" in argv[1:]:
        index = argv.index("--lease")
        lease = argv[index + 1] if index + 1 < len(argv) else None
    try:
        module = adapter(host)
        limit = sys.getrecursionlimit()
        try:
            sys.setrecursionlimit(max(limit, JSON_DEPTH))  # a tool input nested deep is still read
            event = json.loads(stdin.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            _debug(env, "proctor hook: the event on stdin is not JSON; passing")
            return "{}\n", 0, done
        except RecursionError:  # a tool input nested past reading: a way around the guard, refused
            from proctor.guard.call import PRE_TOOL, Call
            from proctor.guard.engine import DENY, Verdict

            refused = Verdict(
                [
                    (
                        "guard",
                        DENY,
                        "this tool call's input is nested too deeply for proctor to read; "
                        "it refuses what it cannot read",
                    )
                ]
            )
            return json.dumps(module.render(Call(host, PRE_TOOL), refused), separators=(",", ":")) + "\n", 0, done
        finally:
            sys.setrecursionlimit(limit)
        if not isinstance(event, dict):
            _debug(env, "proctor hook: the event on stdin is not a JSON object; passing")
            return "{}\n", 0, done
        call = module.parse(event)
        from proctor.guard.engine import judge as judge_call

        verdict = judge_call(call, lease, env)
    except Exception as exc:  # nothing was judged: the hook fails open
        _debug(env, f"proctor hook: {type(exc).__name__}: {exc}; passing")
        return "{}\n", 0, done

    def finish() -> None:
        try:
            for note in verdict.finish():
                _debug(env, f"proctor hook: {note}")
        except Exception as exc:
            _debug(env, f"proctor hook: recording failed ({type(exc).__name__}: {exc}); the answer stands")

    try:
        answer = module.render(call, verdict)
        return json.dumps(answer, separators=(",", ":")) + "\n", 0, finish
    except Exception as exc:
        _debug(env, f"proctor hook: {type(exc).__name__}: {exc}; passing")
        return "{}\n", 0, finish


def _debug(env, message: str, always: bool = False) -> None:
    if always or env.get("PROCTOR_HOOK_DEBUG"):
        try:
            sys.stderr.write(message + "\n")
        except Exception:
            pass


def main(argv: list[str]) -> int:
    try:
        data = sys.stdin.buffer.read() if sys.stdin is not None else b""
    except Exception:
        data = b""
    out, code, finish = judge(argv, data)
    try:
        sys.stdout.write(out)
        sys.stdout.flush()
    except Exception:
        pass
    finish()  # the answer is out before any record is written
    return code
