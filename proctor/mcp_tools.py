"""The MCP door's tools: what each does, the arguments it takes, and the library call behind it.

An agent connected over MCP declares, takes, returns and asks about jobs through the same
functions the CLI calls (proctor.api), so it meets the same refusals, each with its PRC code.
Nothing here knows the MCP SDK: proctor/mcp_server.py serves these tools over stdio (`proctor
mcp`) and over HTTP (the server's /mcp), and the guard knows them by TOOL_NAMES (kept in
guard/call.py, off the door's modules) when a host reports one to the hook as
`mcp__proctor__<tool>`.

Who is calling is a Door: over stdio, the process's own environment (BAGGAGE, PROCTOR_NONCE)
and working directory, read exactly as the CLI reads them; over HTTP, the server token (a
person, who holds no lease) or a job's secret (that job's holder, scoped to it).
"""

from __future__ import annotations

from proctor import errors, jobrecord
from proctor.jobs.model import INPUT_FIELDS
from proctor.guard.call import TOOL_NAMES  # noqa: F401  (the names, kept where the guard's hook reads them)

TYPE_CHECKING = False  # `typing` only for the checker
if TYPE_CHECKING:
    from typing import Callable

MONITOR_TOOLS = frozenset(("monitor_add", "monitor_list", "monitor_remove", "monitor_events"))

_ID = {"type": "string", "description": "the job's id, as proctor ls jobs lists it (e.g. fleet/w2)"}


class Door:
    """Who calls, and from where: `lease` is None (resolve it as the CLI does: BAGGAGE in
    `environ`, else the checkout's record), api.ORCHESTRATOR (the server token) or a job id
    (a job's secret). `cwd` is the checkout the caller acts in: the process's own over stdio;
    over HTTP the server's for the token, and the job's own checkout for its secret.
    `monitors(method, path, body)` reaches the monitor API as this caller may."""

    def __init__(
        self,
        cwd: str,
        environ: dict,
        lease: str | None = None,
        how: str = "stdio",
        monitors=None,
        busy_seconds: float | None = None,
    ) -> None:
        self.cwd, self.environ, self.lease, self.how = cwd, environ, lease, how
        self.monitors = monitors
        self.busy_seconds = busy_seconds  # a bound on each wait for the store (the server's, over HTTP)


def _warnings() -> tuple[list[str], Callable[[str], None]]:
    lines: list[str] = []
    return lines, lines.append


def _with_ended(out: dict, ended: list[str]) -> dict:
    if ended:
        out["ended"] = ended  # `ended <id>: <reason>` for each job proctor ended before it answered
    return out


_KIND = {str: "a string", int: "a number", float: "a number", dict: "an object", bool: "true or false"}


def _args(name: str, args: dict, allowed: dict[str, type | tuple], required: tuple[str, ...] = ()) -> dict:
    """`args` checked against the tool's parameters: unknown ones and wrong types are refused
    (PRC3044) rather than ignored, since a misspelt option would otherwise do something else."""
    unknown = sorted(set(args) - set(allowed))
    if unknown:
        takes = ", ".join(sorted(allowed)) or "no arguments"
        raise errors.ProctorError(f"{name} takes {takes}; {', '.join(unknown)} is not one of them", errors.BAD_RECORD)
    for key in required:
        if args.get(key) in (None, ""):
            raise errors.ProctorError(f"{name} needs {key}", errors.BAD_RECORD)
    for key, kind in allowed.items():
        value = args.get(key)
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if value is not None and (not isinstance(value, kinds) or (int in kinds and isinstance(value, bool))):
            raise errors.ProctorError(
                f"{name}: {key} must be {' or '.join(_KIND[k] for k in kinds)}", errors.BAD_RECORD
            )
    return args


# -- the calls (sync: each opens the workspace, as one CLI command does) ------------------------


def vcs_checkpoint(door: Door, args: dict) -> dict:
    from proctor import api

    if args:
        raise errors.ProctorError(
            f"vcs_checkpoint takes no parameters (given {', '.join(sorted(args))}): it reports the whole "
            f"checkout's working state, never a path's",
            errors.CHECKPOINT_TAKES_NO_PATH,
        )
    return api.checkpoint(door.cwd)


def jobs_list(door: Door, args: dict) -> dict:
    from proctor import api

    _args("jobs_list", args, {})
    ended, warn = _warnings()
    listing = api.ls_jobs(door.cwd, warn)
    listing["jobs"] = [jobrecord.public(row) for row in listing["jobs"]]
    return _with_ended(listing, ended)


def job_describe(door: Door, args: dict) -> dict:
    from proctor import api

    _args("job_describe", args, {"id": str}, ("id",))
    ended, warn = _warnings()
    return _with_ended({"id": args["id"], "terms": api.describe_job(args["id"], door.cwd, warn)}, ended)


def job_put(door: Door, args: dict) -> dict:
    from proctor import api

    ended, warn = _warnings()
    row = api.fork(dict(args), lease=door.lease, cwd=door.cwd, environ=door.environ, warn=warn)
    return _with_ended({"job": jobrecord.public(row)}, ended)


def job_exec(door: Door, args: dict) -> dict:
    from proctor import api

    _args("job_exec", args, {"id": str, "worktree": str}, ("id",))
    if door.how == "http" and not args.get("worktree"):
        # "this checkout" over HTTP would be the server's, the person's own: binding it would put
        # every caller there under the job
        raise errors.ProctorError(
            f"job_exec over HTTP takes the job in a new worktree: pass worktree (a path for it); the server's "
            f"checkout is the person's, and taking {args['id']} there would bind every caller in it to the job",
            errors.BAD_RECORD,
        )
    ended, warn = _warnings()
    taken = api.exec_job(
        args["id"], lease=door.lease, cwd=door.cwd, environ=door.environ, warn=warn, worktree=args.get("worktree")
    )
    out = {
        "job": jobrecord.public({k: v for k, v in taken.items() if k not in ("nonce", "notes", "retake")}),
        "retake": bool(taken.get("retake")),
        "notes": taken.get("notes") or [],
    }
    environment = {"BAGGAGE": f"{jobrecord.BAGGAGE_KEY}={args['id']}"}
    if taken.get("nonce"):
        environment["PROCTOR_NONCE"] = taken["nonce"]
    out["environment"] = environment
    out["next"] = (
        f"work in {taken['checkout_root']}; run its check with `proctor run <target>` there and return "
        f"it with job_exit, citing each run. Start the agent that works it with this environment "
        f"(PROCTOR_NONCE is shown once, on the first take)"
    )
    return _with_ended(out, ended)


def job_exit(door: Door, args: dict) -> dict:
    from proctor import api

    _args("job_exit", args, {"id": str, "result": dict}, ("id",))
    ended, warn = _warnings()
    row = api.exit_job(args["id"], args.get("result"), lease=door.lease, cwd=door.cwd, environ=door.environ, warn=warn)
    out: dict = {"job": jobrecord.public(row)}
    out["next"] = (
        f"job_wait {args['id']} verifies the filed result against the evidence"
        if args.get("result") is not None
        else f"{args['id']} ended no_return"
    )
    return _with_ended(out, ended)


def job_wait(door: Door, args: dict) -> dict:
    from proctor import api

    _args("job_wait", args, {"id": str}, ("id",))
    ended, warn = _warnings()
    answer = api.wait_job(args["id"], lease=door.lease, cwd=door.cwd, environ=door.environ, warn=warn)
    job, graded = answer["job"], answer["grade"]
    failures = []
    if graded is not None:
        failures = [{"label": o["label"], "subjects": o["subjects"]} for o in graded["outcomes"] if not o["ok"]]
    else:
        failures = [
            {"label": f["label"], "subjects": f["subjects"]} for f in (job.get("verdict") or {}).get("failures", [])
        ]
    return _with_ended(
        {
            "id": args["id"],
            "state": job["state"],
            "passed": job["state"] == "pass",
            "failures": failures,
            "verdict": job.get("verdict"),
            "grade": graded,
            "graded_now": graded is not None,
        },
        ended,
    )


CALLS = {
    "vcs_checkpoint": vcs_checkpoint,
    "jobs_list": jobs_list,
    "job_describe": job_describe,
    "job_put": job_put,
    "job_exec": job_exec,
    "job_exit": job_exit,
    "job_wait": job_wait,
}


def monitor_request(name: str, args: dict, cwd: str) -> tuple[str, str, dict | None]:
    """(method, API path, body) of a monitor tool's call, its arguments checked."""
    from urllib.parse import urlencode

    if name == "monitor_add":
        _args(
            name,
            args,
            {
                "command": str,
                "interval": (str, int, float),
                "description": str,
                "allow_unsandboxed": bool,
                "job": str,
                "cwd": str,
            },
            ("command", "interval"),
        )
        return (
            "POST",
            "/api/v1/monitors",
            {
                "job": args.get("job"),
                "command": args["command"],
                "interval": args["interval"],
                "description": args.get("description"),
                "cwd": args.get("cwd") or cwd,
                "allow_unsandboxed": args.get("allow_unsandboxed") is True,
            },
        )
    if name == "monitor_list":
        _args(name, args, {"job": str})
        return "GET", "/api/v1/monitors" + (f"?{urlencode({'job': args['job']})}" if args.get("job") else ""), None
    if name == "monitor_remove":
        _args(name, args, {"id": int}, ("id",))
        return "DELETE", f"/api/v1/monitors/{args['id']}", None
    _args(name, args, {"job": str, "limit": int})
    limit = min(5000, max(1, args.get("limit") or 1000))
    return (
        "GET",
        "/api/v1/events?" + urlencode({"limit": limit, **({"job": args["job"]} if args.get("job") else {})}),
        None,
    )


def monitor_answer(name: str, answer: dict) -> dict:
    if name == "monitor_events":
        return {
            "events": [
                {k: e.get(k) for k in ("monitor", "run", "time", "line", "truncated", "followup")}
                for e in answer.get("events", [])
            ]
        }
    return answer


def error_json(exc: errors.ProctorError) -> dict:
    """A refusal as a tool's structured error: the PRC code, the message, and every reason."""
    out = exc.to_json()
    out["exit_code"] = exc.exit_code
    return out


# -- what the model reads ---------------------------------------------------------------------

# What a caller puts: a record's input fields but the state (the store's and its holders'), and
# `enter` (one write into a live job's path).
_RECORD_KEYS = tuple(f for f in INPUT_FIELDS if f != "state") + ("enter",)


def _record_schema() -> dict:
    from proctor import api

    full = api.record_schema()
    return {
        "type": "object",
        "required": ["id"],
        "properties": {k: v for k, v in full["properties"].items() if k in _RECORD_KEYS},
    }


def _result_schema() -> dict:
    from proctor import api

    full = api.result_schema()
    return {k: v for k, v in full.items() if k not in ("$schema", "$id")}


def tools() -> list[dict]:
    """Every tool as MCP lists it: name, description, inputSchema."""
    nothing = {"type": "object", "properties": {}, "additionalProperties": False}
    one_job = {"type": "object", "required": ["id"], "properties": {"id": _ID}, "additionalProperties": False}
    return [
        {
            "name": "vcs_checkpoint",
            "inputSchema": nothing,
            "description": (
                "The working state of this checkout: revision, branch, dirty, patch_digest, vcs, and `name`, the token "
                "a job's checkpoint takes. Takes no parameters (a path is refused with PRC3055: the record is the whole "
                "checkout's, never a path's). Take one before you declare jobs, so they start from a state you saw."
            ),
        },
        {
            "name": "jobs_list",
            "inputSchema": nothing,
            "description": (
                "Every job, parents before the jobs forked from them, with state, holder, write paths, stale and "
                "overdue marks, and `overlaps`: every pair of live jobs whose write paths intersect (two jobs on one "
                "file need declaration claims such as `run.go#executeStages`, or depends_on). Read it before you hand "
                "work out. Jobs proctor can prove nobody holds are ended first and listed under `ended`."
            ),
        },
        {
            "name": "job_describe",
            "inputSchema": one_job,
            "description": (
                "A job's terms as its holder is handed them (criteria, write/deny/read paths, the check, goals, "
                "deadline), rendered from the stored row. Hand this text to the agent that works the job rather than "
                "retelling it. Refuses an unknown id (PRC3045)."
            ),
        },
        {
            "name": "job_put",
            "inputSchema": _record_schema(),
            "description": (
                "Declare or replace a job from a record, exactly as `proctor job fork --stdin` takes it: id, criteria, "
                "write_paths (files, globs or file#declaration claims), deny_paths, read_paths, check (ONE target from "
                "proctor.toml), parent, depends_on, goals, timeout, read_only. The same call shrinks a job's write paths "
                "(releasing the dropped ones, each recorded with its digest) and, with only id and enter, enters one "
                "path of a live job for one write. Under a lease you may only fork children of your own job (parent: "
                "your job) inside your own paths, or shrink your own write paths; anything else is refused "
                "(PRC3042 not your job, PRC3043 a child wider than its parent) and is your forking session's to do. "
                "Other refusals name their code and remedy (PRC3044 a bad record, PRC3039 an empty write set, PRC3037 "
                "an unknown check). Returns the stored row."
            ),
        },
        {
            "name": "job_exec",
            "inputSchema": {
                "type": "object",
                "required": ["id"],
                "additionalProperties": False,
                "properties": {
                    "id": _ID,
                    "worktree": {
                        "type": "string",
                        "description": "make a new worktree at this path "
                        "on the job's checkpoint and take the job there (recommended)",
                    },
                },
            },
            "description": (
                "Take a job's lease in this checkout (or, with worktree, in a new worktree made at the job's "
                "checkpoint), recording the base the tree landed on. Every caller in that checkout then acts under the "
                "job, so take jobs in worktrees of their own. Returns the row, `environment` (BAGGAGE, and on the first "
                "take PROCTOR_NONCE, the job's secret: shown once) for the agent that works it, and notes. Over HTTP "
                "(the server's /mcp) worktree is required. Refused "
                "while another job holds this checkout (PRC3049), for a job not live (PRC3047), and while you hold "
                "another job still in flight."
            ),
        },
        {
            "name": "job_exit",
            "inputSchema": {
                "type": "object",
                "required": ["id"],
                "additionalProperties": False,
                "properties": {"id": _ID, "result": _result_schema()},
            },
            "description": (
                "Return a job. With `result`, file the holder's result (schema_version 2; changed_paths and each "
                'validation run cited as {"run": <id>, "output_ref": <ref>}, the pair `proctor run` printed): the job '
                "becomes exited and waits for job_wait, which holds every claim to the evidence. There is no passed "
                "field. Without `result`, end the job no_return. Only the job's holder (or its forking session) may; "
                "others are refused with PRC3042."
            ),
        },
        {
            "name": "job_wait",
            "inputSchema": one_job,
            "description": (
                "Verify a job's filed result against the evidence and record pass or fail: the real diff since the "
                "checkpoint against its write paths, the recorded runs of its check, and its goals. Returns state, "
                "passed, and every failing rule and goal with its subjects. A job with nothing filed is refused "
                "(PRC3054). Under a lease you may wait only on jobs forked beneath yours; your own is your forking "
                "session's to verify."
            ),
        },
        {
            "name": "monitor_add",
            "inputSchema": {
                "type": "object",
                "required": ["command", "interval"],
                "additionalProperties": False,
                "properties": {
                    "command": {"type": "string", "description": "the shell command to run"},
                    "interval": {
                        "type": ["string", "number"],
                        "description": "10s to 24h (seconds, or 45s, 5m, 1h); the "
                        "next run starts this long after a run ends",
                    },
                    "description": {"type": "string", "description": "one line; default: an excerpt of the command"},
                    "allow_unsandboxed": {
                        "type": "boolean",
                        "description": "acknowledge it runs outside the agent sandbox "
                        "(recorded, with when and by whom)",
                    },
                    "job": {
                        "type": "string",
                        "description": "the job it belongs to; a job's secret always means its own",
                    },
                    "cwd": {
                        "type": "string",
                        "description": "where it runs (default: here): the repository, the job's "
                        "checkout or a worktree of it",
                    },
                },
            },
            "description": (
                "Add a monitor: a command the proctor server runs for a job, now and then every interval; what it prints "
                "becomes a follow-up that wakes the job's idle agent. Needs the server running (proctor server start) "
                "and, for an agent, its job's secret (PROCTOR_NONCE), which scopes every monitor tool to that job: "
                "without it the server token is a person's and is refused to a process that works a job."
            ),
        },
        {
            "name": "monitor_list",
            "inputSchema": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "job": {"type": "string", "description": "only this job's (a job's secret always means its own)"}
                },
            },
            "description": "The live monitors, each with its id, job, interval, description and last run.",
        },
        {
            "name": "monitor_remove",
            "inputSchema": {
                "type": "object",
                "required": ["id"],
                "additionalProperties": False,
                "properties": {"id": {"type": "integer", "description": "the monitor's id"}},
            },
            "description": (
                "Remove a monitor: its command and its descendants are ended. A job's secret removes only "
                "that job's monitors. Remove monitors you no longer need."
            ),
        },
        {
            "name": "monitor_events",
            "inputSchema": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "job": {"type": "string", "description": "only this job's (a job's secret always means its own)"},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 5000,
                        "description": "at most this many (1000)",
                    },
                },
            },
            "description": (
                "The lines monitors printed: monitor, run, time, the line, whether it was cut, and the "
                "follow-up it went out in (or pending)."
            ),
        },
    ]
