"""The job table and bindings: reading and writing rows. Only this module writes `jobs`,
`job_paths` and `bindings`.

A row is the job's record as JSON (`doc`) plus the columns queries select on; `put` keeps
the two in step. `job_paths` indexes the write paths of live jobs by directory key. Core, so
the guard reads jobs the way the job store writes them; the rules about what may be written
live in jobs/.
"""

from __future__ import annotations

import json
import sqlite3

from proctor import claims as jpaths

# A job's states; every job ends in one of the last three.
STATES = ("declared", "running", "exited", "pass", "fail", "no_return")
TERMINAL = frozenset(("pass", "fail", "no_return"))
IN_FLIGHT = ("declared", "running")


def is_live(state: str) -> bool:
    return state not in TERMINAL

_COLUMNS = "id, parent, root, depth, state, live, holder, checkout_root, declared_in, created, updated, doc"


def _doc(row: tuple) -> dict:
    job = json.loads(row[11])
    job["_root"] = row[2]
    job["_depth"] = row[3]
    return job


def get(conn: sqlite3.Connection, job_id: str) -> dict | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return _doc(row) if row else None


def all_jobs(conn: sqlite3.Connection) -> list[dict]:
    return [_doc(r) for r in conn.execute(f"SELECT {_COLUMNS} FROM jobs")]


def where(conn: sqlite3.Connection, clause: str, params: tuple = ()) -> list[dict]:
    return [_doc(r) for r in conn.execute(f"SELECT {_COLUMNS} FROM jobs WHERE {clause}", params)]


def claims(job: dict, field: str = "write_paths") -> list[jpaths.Claim]:
    """A stored job's claims in one path field (stored spellings are canonical, so they
    re-parse exactly)."""
    out = []
    for spelling in job.get(field) or ():
        path, declaration, _ = jpaths.split_entry(spelling)
        out.append(jpaths.Claim(path, declaration))
    return out


def put(conn: sqlite3.Connection, job: dict, root: str, depth: int) -> None:
    doc = {k: v for k, v in job.items() if not k.startswith("_")}
    live = is_live(doc["state"])
    conn.execute(
        f"INSERT OR REPLACE INTO jobs ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            doc["id"], doc.get("parent"), root, depth, doc["state"], 1 if live else 0,
            doc.get("holder", "session"), doc.get("checkout_root"), doc.get("declared_in"),
            doc["created"], doc["updated"], json.dumps(doc, sort_keys=True, separators=(",", ":")),
        ),
    )
    conn.execute("DELETE FROM job_paths WHERE job = ?", (doc["id"],))
    if live:
        conn.executemany(
            "INSERT INTO job_paths (job, spelling, key) VALUES (?, ?, ?)",
            [(doc["id"], c.spelling, c.key) for c in claims(doc)],
        )
    job["_root"], job["_depth"] = root, depth


def live_claims_near(conn: sqlite3.Connection, keys: list[str], exclude: str) -> dict[str, list[jpaths.Claim]]:
    """Claims of live jobs whose keys contain, equal, or lie under any of `keys`."""
    found: dict[str, set[str]] = {}
    for key in set(keys):
        ancestors = jpaths.ancestors(key)
        marks = ",".join("?" * len(ancestors))
        rows = conn.execute(
            f"SELECT job, spelling FROM job_paths WHERE key IN ({marks}) AND job != ?", (*ancestors, exclude)
        ).fetchall()
        if key != "":
            rows += conn.execute(
                "SELECT job, spelling FROM job_paths WHERE key > ? AND key < ? AND job != ?",
                (key + "/", key + "0", exclude),
            ).fetchall()
        else:
            rows += conn.execute("SELECT job, spelling FROM job_paths WHERE job != ?", (exclude,)).fetchall()
        for job, spelling in rows:
            found.setdefault(job, set()).add(spelling)
    out: dict[str, list[jpaths.Claim]] = {}
    for job, spellings in found.items():
        out[job] = []
        for spelling in sorted(spellings):
            path, declaration, _ = jpaths.split_entry(spelling)
            out[job].append(jpaths.Claim(path, declaration))
    return out


def descendants(conn: sqlite3.Connection, job_id: str) -> list[str]:
    rows = conn.execute(
        """WITH RECURSIVE tree(id) AS (
               SELECT id FROM jobs WHERE parent = ?
               UNION SELECT jobs.id FROM jobs JOIN tree ON jobs.parent = tree.id)
           SELECT id FROM tree""",
        (job_id,),
    ).fetchall()
    return [r[0] for r in rows]


def ancestors(conn: sqlite3.Connection, job_id: str) -> list[str]:
    """Parent, grandparent, ... of a job (stops at a missing row or a cycle)."""
    chain: list[str] = []
    current = conn.execute("SELECT parent FROM jobs WHERE id = ?", (job_id,)).fetchone()
    while current and current[0] and current[0] not in chain and current[0] != job_id:
        chain.append(current[0])
        current = conn.execute("SELECT parent FROM jobs WHERE id = ?", (current[0],)).fetchone()
    return chain


def bind(conn: sqlite3.Connection, scope: str, job_id: str, at: str) -> None:
    """Record that callers of `scope` act under `job_id` (`checkout:<root>` or `agent:...`)."""
    conn.execute("INSERT OR REPLACE INTO bindings (scope, job, recorded) VALUES (?, ?, ?)", (scope, job_id, at))


def bound_job(conn: sqlite3.Connection, scope: str) -> str | None:
    """The job `scope` is bound to while that job is in flight (declared or running)."""
    row = conn.execute(
        "SELECT b.job FROM bindings b JOIN jobs j ON j.id = b.job WHERE b.scope = ? "
        "AND j.state IN ('declared', 'running')", (scope,),
    ).fetchone()
    return row[0] if row else None


def checkout_scope(root: str) -> str:
    """The binding key of a checkout, read by callers that report no session or subagent."""
    import os

    return "checkout:" + os.path.realpath(root)


def agent_scope(host: str, session: str, subagent: str | None) -> str:
    """The binding key of a hook caller: exactly its host, session and subagent ids."""
    return f"agent:{host}:{session}:{subagent or ''}"
