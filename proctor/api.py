"""The library door: the functions the CLI calls, with the same rules, for a script.

    from proctor import api
    api.fork({"id": "api/migrate", "criteria": "...", "write_paths": ["db/m.go"],
              "check": "test"}, cwd="/src/app")
    api.ls_jobs(cwd="/src/app")["overlaps"]

Every function opens the workspace containing `cwd` (default: the current directory),
first ends the jobs proctor can prove nobody holds (printing `ended <id>: <reason>` on
`warn`, stderr by default), and raises proctor.errors.ProctorError (Refused for a refusal)
exactly where the CLI exits non-zero. A caller's lease is `lease`, else `BAGGAGE`'s
proctor.lease in `environ` (default os.environ), else the checkout's recorded binding;
`lease=api.ORCHESTRATOR` acts as the orchestrator, holding none, whatever the checkout's
binding says (the CLI's --orchestrator).
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

from proctor import jobrecord
from proctor.jobs import lease as _lease
from proctor.jobs import reap as _reap
from proctor.paths import find_checkout
from proctor.workspace import Workspace

ORCHESTRATOR = _lease.ORCHESTRATOR

# Each door function imports the capability it calls, so a command pays only for its own.

Warn = Callable[[str], None]


@contextlib.contextmanager
def _opened(cwd: str | None, warn: Warn | None) -> Iterator[Workspace]:
    ws = Workspace(cwd, warn)
    try:
        _reap.end_unheld(ws.store, ws.config["jobs.stale_after"], ws.warn)
        yield ws
    finally:
        ws.close()


def _caller(ws: Workspace, lease: str | None, environ: dict | None) -> _lease.Caller:
    with ws.store.read() as conn:
        return _lease.resolve(conn, ws.root, lease, environ)


def checkpoint(cwd: str | None = None) -> dict:
    """The working state of the checkout: revision, branch, dirty, patch_digest, vcs."""
    from proctor.vcs import checkpoint as _checkpoint

    return _checkpoint.take(find_checkout(cwd).root).to_json()


def fork(
    record: dict,
    *,
    lease: str | None = None,
    cwd: str | None = None,
    environ: dict | None = None,
    warn: Warn | None = None,
) -> dict:
    """Declare (or replace) one job from a record; return the stored row."""
    from proctor.jobs import fork as _fork

    with _opened(cwd, warn) as ws:
        return _public(_fork.fork(ws, record, _caller(ws, lease, environ)))


def exec_job(
    job_id: str,
    *,
    lease: str | None = None,
    cwd: str | None = None,
    environ: dict | None = None,
    warn: Warn | None = None,
    worktree: str | None = None,
) -> dict:
    """Take the job's lease in this checkout, or with `worktree` in a new worktree made there
    at the job's checkpoint; return the row, with `nonce` (the job's secret, on a first take),
    `retake` and `notes` (what the caller should know) beside it."""
    from proctor.jobs import take as _take

    with _opened(cwd, warn) as ws:
        return _public(_take.exec_job(ws, job_id, _caller(ws, lease, environ), worktree))


def exit_job(
    job_id: str,
    result: dict | None = None,
    *,
    lease: str | None = None,
    cwd: str | None = None,
    environ: dict | None = None,
    warn: Warn | None = None,
) -> dict:
    """File a holder's result (the job becomes exited), or with no result end it no_return."""
    with _opened(cwd, warn) as ws:
        caller = _caller(ws, lease, environ)
        if result is None:
            from proctor.jobs import take as _take

            return _public(_take.abandon(ws, job_id, caller))
        from proctor.jobs import result as _result

        return _public(_result.file_result(ws, job_id, result, caller))


def put_away(
    job_id: str,
    how: str,
    *,
    lease: str | None = None,
    cwd: str | None = None,
    environ: dict | None = None,
    warn: Warn | None = None,
) -> dict | None:
    """Archive, trash or delete a job (`how`: "archive", "trash" or "delete"), the forking
    session's move, as the console's action does it; return the row, None once deleted. Its
    monitors are deleted for good by the server."""
    from proctor.jobs import take as _take

    with _opened(cwd, warn) as ws:
        job = _take.put_away(ws, job_id, how, _caller(ws, lease, environ))
        return None if job is None else _public(job)


def move_job(
    job_id: str,
    column: str,
    *,
    lease: str | None = None,
    cwd: str | None = None,
    environ: dict | None = None,
    warn: Warn | None = None,
) -> dict:
    """Move a job's card to another column of the board (the person's move), as the console's
    action does it; return the row (`moved` holds the move, absent when the column is its
    state's own)."""
    from proctor.jobs import take as _take

    with _opened(cwd, warn) as ws:
        return _public(_take.move(ws, job_id, column, _caller(ws, lease, environ)))


def wait_job(
    job_id: str,
    *,
    lease: str | None = None,
    cwd: str | None = None,
    environ: dict | None = None,
    warn: Warn | None = None,
) -> dict:
    """Verify a filed result and record pass or fail: `{"job": row, "grade": {...} or None}`.

    `grade` is None when the verdict was recorded earlier; the row's `verdict` holds it.
    """
    from proctor.jobs import wait as _wait

    with _opened(cwd, warn) as ws:
        job, graded = _wait.wait(ws, job_id, _caller(ws, lease, environ))
        return {"job": _public(job), "grade": graded.to_json() if graded else None}


def run_target(
    target: str,
    *,
    lease: str | None = None,
    cwd: str | None = None,
    environ: dict | None = None,
    echo=None,
    warn: Warn | None = None,
) -> dict:
    """Run a target from proctor.toml and record the run; `echo` receives its output as it comes."""
    from proctor.jobs import runs as _runs

    with _opened(cwd, warn) as ws:
        return _runs.run_target(ws, target, _caller(ws, lease, environ), echo)


def query_output(ref: str, *, cwd: str | None = None) -> bytes:
    """The whole recorded output of a run, by its output_ref."""
    from proctor.jobs import runs as _runs

    with Workspace(cwd) as ws:
        return _runs.read_output(ws, ref)


def result_schema() -> dict:
    """The JSON Schema of a `job exit --stdin` result."""
    from proctor.jobs import result as _result

    return _result.result_schema()


def ls_jobs(cwd: str | None = None, warn: Warn | None = None) -> dict:
    """`{"jobs": [rows, parents first], "overlaps": [pairs]}`."""
    from proctor.jobs import listing as _listing

    with _opened(cwd, warn) as ws:
        return _listing.list_jobs(ws)


def describe_job(job_id: str, cwd: str | None = None, warn: Warn | None = None) -> str:
    """The holder's terms, rendered from the row."""
    from proctor.jobs import describe as _describe

    with _opened(cwd, warn) as ws:
        return _describe.describe_job(ws, job_id)


def config_show(cwd: str | None = None) -> dict:
    """Every effective setting with its source, and every problem found."""
    from proctor import config as config_mod

    root = find_checkout(cwd).root
    cfg = config_mod.load(root)
    from proctor.guard.settings import rule_options, unknown_rules

    cfg.problems.extend(unknown_rules(cfg.guard_rules))
    options, option_problems = rule_options(cfg.guard_options)
    cfg.problems.extend(option_problems)
    for rule_name, values in options.items():
        table = cfg.guard_options.get(rule_name, {})
        for key, value in values.items():
            name = f"guard.{rule_name}.{key}"
            source = config_mod.CONFIG_NAME if key in table and value == table[key] else "default"
            cfg.settings[name] = config_mod.Setting(name, value, source, f"{value:g}")
    from proctor.sandbox import kernel_abi, kernel_offers

    abi = kernel_abi()
    mode = cfg.settings["sandbox.mode"]
    mode.shown = f"{mode.value} ({kernel_offers(abi)}" + (
        ": runs are not sandboxed)"
        if mode.value == "auto" and not abi
        else ": a run under a child job's lease is refused)"
        if mode.value == "landlock" and not abi
        else ")"
    )
    return {
        "file": cfg.path,
        "exists": cfg.exists,
        "settings": [
            {"key": s.key, "value": s.value, "shown": s.shown, "source": s.source, "problem": s.problem}
            for s in cfg.settings.values()
        ],
        "problems": cfg.problems,
        # the number a worker is held to, which jobs.idle_minutes leaves unset when derived
        "idle_limit": {"seconds": cfg.idle_limit_seconds, "source": cfg.idle_limit_source},
    }


def record_schema() -> dict:
    """The JSON Schema of a `fork --stdin` record."""
    from proctor.jobs import model as _model

    return _model.record_schema()


def _public(job: dict) -> dict:
    """A row as the library's callers see it: the core record's public view (no digest of the
    job's secret), and what the store hands this caller alone (the secret, on a first take)."""
    out = jobrecord.public(job)
    if "_nonce" in job:
        out["nonce"] = job["_nonce"]  # shown once, to the caller that took the lease
    for key in ("_notes", "_retake"):
        if key in job:
            out[key[1:]] = job[key]
    return out


def describe_rules(cwd: str | None = None) -> list[dict]:
    """Every rule with its effective decision here, deny first."""
    from proctor.guard import describe as _gdescribe
    from proctor.guard import settings as _settings

    checkout = find_checkout(cwd)
    return _gdescribe.listing(_settings.load(checkout)["rules"])


def describe_rule(name: str, cwd: str | None = None) -> str:
    from proctor import errors
    from proctor.guard import describe as _gdescribe
    from proctor.guard import settings as _settings
    from proctor.guard.rules import BY_NAME

    if name not in BY_NAME:
        raise errors.ProctorError(f"no rule {name!r}; proctor describe rules lists them")
    decisions = _settings.load(find_checkout(cwd))["rules"]
    return _gdescribe.entry(name, decisions.get(name, BY_NAME[name].DEFAULT))


def sessions(cwd: str | None = None) -> list[dict]:
    """The agent sessions the hook has seen, with their lease and claims (trace, spawner)."""
    with _opened(cwd, None) as ws:
        from proctor.store import sessions as session_rows

        with ws.store.read() as conn:
            return session_rows.listing(conn)
