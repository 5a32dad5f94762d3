"""Who is calling: the lease a caller acts under, and where that answer came from.

For a command (not a hook) the order is: an explicit `--lease`, else the W3C baggage member
`proctor.lease` in `BAGGAGE`, else the checkout's binding recorded by `proctor job exec`.
The guard adds the per-session record when it arrives. A caller with no lease (an
orchestrator, a person at a terminal) writes anything; a leased one is held to the one-author
rules in fork.py and take.py.
"""

from __future__ import annotations

import getpass
import os
import sqlite3
from dataclasses import dataclass
from urllib.parse import unquote

from proctor.jobs.model import check_job_id
from proctor.store import rows
from proctor.store.rows import agent_scope, checkout_scope  # noqa: F401  (re-exported)
from proctor.timeutil import iso, now

BAGGAGE_KEY = "proctor.lease"
SPAWNER_KEY = "proctor.spawner"


@dataclass(frozen=True)
class Caller:
    lease: str | None
    lease_from: str | None  # "flag", "env", "marker" (the checkout's record)
    user: str

    @property
    def actor(self) -> str:
        return f"job:{self.lease}" if self.lease else f"user:{self.user}"


def parse_baggage(header: str) -> dict[str, str]:
    """W3C baggage: `key=value;prop, key2=value2`, values percent-encoded."""
    members: dict[str, str] = {}
    for member in header.split(","):
        pair = member.split(";", 1)[0].strip()
        if "=" not in pair:
            continue
        key, _, value = pair.partition("=")
        key, value = key.strip(), value.strip()
        if key:
            members[key] = unquote(value)
    return members


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return str(os.getuid())


def resolve(conn: sqlite3.Connection | None, root: str, flag: str | None = None,
            environ: dict | None = None) -> Caller:
    env = os.environ if environ is None else environ
    user = _user()
    if flag:
        return Caller(check_job_id(flag, "--lease"), "flag", user)
    claim = None
    baggage = env.get("BAGGAGE")
    if baggage:
        claim = parse_baggage(baggage).get(BAGGAGE_KEY) or None
        if claim:
            check_job_id(claim, "BAGGAGE proctor.lease")
    # A checkout's binding holds only while its job is in flight (declared or running): once
    # the holder exited, or the job ended, the checkout is free and the next exec takes the
    # next job. BAGGAGE is the caller's own claim: it answers when no record does, and a
    # record that disagrees with it wins (contested), or a claim would undo the one-way rule.
    bound = rows.bound_job(conn, checkout_scope(root)) if conn is not None else None
    if bound and claim and claim != bound:
        return Caller(bound, "contested", user)
    if claim:
        return Caller(claim, "env", user)
    if bound:
        return Caller(bound, "marker", user)
    return Caller(None, None, user)


def bind_checkout(conn: sqlite3.Connection, root: str, job_id: str) -> None:
    rows.bind(conn, checkout_scope(root), job_id, iso(now()))


def bind_caller(conn: sqlite3.Connection, host: str, session: str, subagent: str | None, job_id: str) -> None:
    """Record that this host session (or subagent) acts under `job_id`: what the guard calls
    when it lets `proctor job exec <job>` through."""
    rows.bind(conn, agent_scope(host, session, subagent), job_id, iso(now()))
