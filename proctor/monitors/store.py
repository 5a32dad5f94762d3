"""Declaring, listing and removing monitors, with the spec's rules and stable errors.

Intervals run from 10 s to 24 h; the description defaults to a readable excerpt of the
command; a card (a job) has at most eight monitors; the command's directory must be the
repository, the job's checkout, or a worktree attached to the job; the caller must
acknowledge that the command runs outside the sandbox (--allow-unsandboxed). Monitors are
deleted for good when their job leaves an active column, is archived, trashed or deleted, or
its column becomes passive.
"""

from __future__ import annotations

import os
import sqlite3

from proctor import config as config_mod
from proctor import errors
from proctor.store import rows
from proctor.timeutil import iso, now, parse_duration

MIN_INTERVAL, MAX_INTERVAL = 10.0, 86400.0
MAX_PER_JOB = 8

UNSANDBOXED_ACK_REQUIRED = "MONITOR_UNSANDBOXED_ACK_REQUIRED"
INTERVAL_INVALID = "MONITOR_INTERVAL_INVALID"
CWD_OUTSIDE_CARD = "MONITOR_CWD_OUTSIDE_CARD"
LIMIT_REACHED = "MONITOR_LIMIT_REACHED"
CARD_INACTIVE = "MONITOR_CARD_INACTIVE"
NOT_FOUND = "MONITOR_NOT_FOUND"
OUT_OF_SCOPE = "MONITOR_OUT_OF_SCOPE"

_COLUMNS = ("id", "job", "command", "interval", "description", "cwd", "created", "created_by", "last_run", "deleted")


def _refuse(code: str, message: str) -> errors.Refused:
    return errors.Refused([(code, message)])


def excerpt(command: str, width: int = 60) -> str:
    """A readable excerpt of a command: one line, its whitespace folded, cut with an ellipsis."""
    text = " ".join(command.split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def parse_interval(raw) -> float:
    try:
        seconds = parse_duration(raw)
    except ValueError as exc:
        raise _refuse(INTERVAL_INVALID, f"interval {raw!r}: {exc}; give 10s to 24h") from None
    if not MIN_INTERVAL <= seconds <= MAX_INTERVAL:
        raise _refuse(INTERVAL_INVALID, f"interval {raw!r} is outside 10s to 24h")
    return seconds


def repository_root(checkout_root: str, common_dir: str) -> str:
    """The main work tree of the repository (worktrees hang off its git dir)."""
    if os.path.basename(common_dir.rstrip("/")) == ".git":
        return os.path.realpath(os.path.dirname(common_dir.rstrip("/")))
    return os.path.realpath(checkout_root)


def allowed_cwd(job: dict, cwd: str, repo_root: str) -> str:
    real = os.path.realpath(cwd)
    allowed = {repo_root}
    if job.get("checkout_root"):
        allowed.add(os.path.realpath(job["checkout_root"]))
    for path in job.get("worktrees") or ():
        allowed.add(os.path.realpath(path))
    if real not in allowed:
        raise _refuse(CWD_OUTSIDE_CARD, f"{cwd} is not the repository ({repo_root}), {job['id']}'s checkout, nor a "
                                        f"worktree attached to it; run the command from one of those")
    return real


def job_is_active(cfg: config_mod.Config, job: dict) -> bool:
    if job.get("archived") or job.get("trashed"):
        return False
    column = config_mod.column_of(cfg, job["state"])
    return bool(column and column[1])


def add(conn: sqlite3.Connection, cfg: config_mod.Config, repo_root: str, job_id: str, command: str, interval,
        description: str | None, cwd: str, acknowledged: bool, actor: str) -> dict:
    if not acknowledged:
        raise _refuse(UNSANDBOXED_ACK_REQUIRED, "monitor commands run outside the agent sandbox, with the server's "
                                                "own rights; pass --allow-unsandboxed to acknowledge that")
    if not isinstance(command, str) or not command.strip():
        raise errors.ProctorError("a monitor needs a command (--cmd)")
    seconds = parse_interval(interval)
    job = rows.get(conn, job_id)
    if job is None:
        raise errors.ProctorError(f"no job {job_id}; proctor ls jobs lists them", errors.UNKNOWN_JOB)
    if not job_is_active(cfg, job):
        column = config_mod.column_of(cfg, job["state"])
        raise _refuse(CARD_INACTIVE, f"{job_id} is in column {column[0] if column else '(none)'}, which is not "
                                     f"active; monitors run only for jobs in an active column")
    real_cwd = allowed_cwd(job, cwd, repo_root)
    count = conn.execute("SELECT COUNT(*) FROM monitors WHERE job = ? AND deleted IS NULL", (job_id,)).fetchone()[0]
    if count >= MAX_PER_JOB:
        raise _refuse(LIMIT_REACHED, f"{job_id} has {count} monitors, the most a card may have; remove one first "
                                     f"(proctor monitor remove <id>)")
    text = description.strip() if isinstance(description, str) and description.strip() else excerpt(command)
    cursor = conn.execute(
        "INSERT INTO monitors (job, command, interval, description, cwd, created, created_by) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (job_id, command, seconds, text, real_cwd, iso(now()), actor))
    return get(conn, int(cursor.lastrowid))


def get(conn: sqlite3.Connection, monitor_id: int) -> dict | None:
    row = conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM monitors WHERE id = ?", (monitor_id,)).fetchone()
    return dict(zip(_COLUMNS, row)) if row else None


def live(conn: sqlite3.Connection, job: str | None = None) -> list[dict]:
    query = f"SELECT {', '.join(_COLUMNS)} FROM monitors WHERE deleted IS NULL"
    params: tuple = ()
    if job is not None:
        query += " AND job = ?"
        params = (job,)
    return [dict(zip(_COLUMNS, r)) for r in conn.execute(query + " ORDER BY id", params)]


def remove(conn: sqlite3.Connection, monitor_id: int, scope_job: str | None, why: str = "removed") -> dict:
    monitor = get(conn, monitor_id)
    if monitor is None or monitor["deleted"]:
        raise _refuse(NOT_FOUND, f"no monitor {monitor_id}; proctor monitor list shows them")
    if scope_job is not None and monitor["job"] != scope_job:
        raise _refuse(OUT_OF_SCOPE, f"monitor {monitor_id} belongs to {monitor['job']}; with a job's secret you "
                                    f"manage {scope_job}'s monitors only")
    conn.execute("UPDATE monitors SET deleted = ? WHERE id = ?", (f"{iso(now())} {why}", monitor_id))
    return get(conn, monitor_id)


def prune(conn: sqlite3.Connection, cfg: config_mod.Config) -> list[tuple[int, str]]:
    """Delete, for good, every monitor whose job left an active column or the board."""
    gone = []
    for monitor in live(conn):
        job = rows.get(conn, monitor["job"])
        if job is None:
            why = "its job was deleted"
        elif job.get("archived"):
            why = "its job was archived"
        elif job.get("trashed"):
            why = "its job was trashed"
        elif not job_is_active(cfg, job):
            column = config_mod.column_of(cfg, job["state"])
            why = f"its job is in column {column[0] if column else '(none)'}, which is passive"
        else:
            continue
        conn.execute("UPDATE monitors SET deleted = ? WHERE id = ?", (f"{iso(now())} {why}", monitor["id"]))
        gone.append((monitor["id"], why))
    return gone


def events(conn: sqlite3.Connection, job: str | None = None, limit: int = 1000) -> list[dict]:
    query = "SELECT e.monitor, e.run, e.time, e.line, e.truncated, e.followup, e.job, f.delivered " \
            "FROM monitor_events e LEFT JOIN followups f ON f.id = e.followup"
    params: tuple = ()
    if job is not None:
        query += " WHERE e.job = ?"
        params = (job,)
    rows_ = conn.execute(query + " ORDER BY e.id DESC LIMIT ?", (*params, limit)).fetchall()
    out = []
    for monitor, run, time_, line, truncated, followup, job_id, delivered in reversed(rows_):
        # "the follow-up they went out in, or pending": a batch not handed over yet is pending
        out.append({"monitor": monitor, "run": run, "time": time_, "line": line, "truncated": bool(truncated),
                    "followup": followup if followup is not None and delivered else "pending", "job": job_id,
                    "batch": followup, "delivered": delivered})
    return out
