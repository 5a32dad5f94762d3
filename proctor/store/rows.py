"""The job table and bindings: reading and writing rows. Only this module writes `jobs`,
`job_paths` and `bindings`.

A row is the job's record as JSON (`doc`) plus the columns queries select on; `put` keeps
the two in step. `job_paths` indexes the write paths of live jobs by directory key. Core, so
the guard reads jobs the way the job store writes them; the rules about what may be written
live in jobs/.
"""

from __future__ import annotations

import json

from proctor import claims as jpaths
from proctor.paths import machine_id
from proctor.jobrecord import IN_FLIGHT, is_live, row_claims
from proctor.store import Tx

# the states a binding holds in, as SQL
_IN_FLIGHT = "(" + ", ".join(f"'{state}'" for state in IN_FLIGHT) + ")"
_COLUMNS = "id, parent, root, depth, state, live, holder, checkout_root, declared_in, created, updated, doc, machine"
_UPDATE = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS.split(", ")[1:])


def _doc(row: tuple) -> dict:
    job = json.loads(row[11])
    job["_root"] = row[2]
    job["_depth"] = row[3]
    return job


def get(conn: Tx, job_id: str) -> dict | None:
    row = conn.one(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,))
    return _doc(row) if row else None


def record(conn: Tx, job_id: str) -> dict | None:
    """The job's record as stored (no `_root`/`_depth`): the guard's read."""
    row = conn.one("SELECT doc FROM jobs WHERE id = ?", (job_id,))
    return json.loads(row[0]) if row else None


def exists(conn: Tx, job_id: str) -> bool:
    """Whether a job `job_id` is recorded, in any state."""
    return conn.one("SELECT 1 FROM jobs WHERE id = ?", (job_id,)) is not None


def all_jobs(conn: Tx) -> list[dict]:
    return [_doc(r) for r in conn.all(f"SELECT {_COLUMNS} FROM jobs")]


def fingerprint(conn: Tx) -> str:
    """A digest of every row as stored: it changes whenever any job does (the console reads the
    whole board again only then, not on every monitor's line)."""
    import hashlib

    digest = hashlib.sha1()
    for job_id, doc in conn.all("SELECT id, doc FROM jobs ORDER BY id"):
        digest.update(f"{len(job_id)}:{job_id}{len(doc)}:".encode("utf-8", "surrogateescape"))
        digest.update(doc.encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def where(conn: Tx, clause: str, params: tuple = ()) -> list[dict]:
    """Jobs matching an SQL condition on the jobs table's columns (prefer the named verbs:
    children)."""
    return [_doc(r) for r in conn.all(f"SELECT {_COLUMNS} FROM jobs WHERE {clause}", params)]


def children(conn: Tx, job_id: str) -> list[dict]:
    """The jobs whose parent is `job_id`."""
    return [_doc(r) for r in conn.all(f"SELECT {_COLUMNS} FROM jobs WHERE parent = ?", (job_id,))]


def counts(conn: Tx) -> tuple[int, int]:
    """(jobs, live jobs) in the store."""
    row = conn.one("SELECT COUNT(*), SUM(live) FROM jobs")
    return int(row[0] or 0), int(row[1] or 0)


def live_under_root(conn: Tx, root: str, exclude: str) -> int:
    """Live jobs in the tree of `root`, neither the root itself nor `exclude`."""
    return int(
        conn.scalar(
            "SELECT COUNT(*) FROM jobs WHERE root = ? AND live = 1 AND id != ? AND id != ?", (root, root, exclude), 0
        )
    )


def taken_with_paths(conn: Tx, exclude: str) -> list[str]:
    """Ids of live jobs taken in some checkout that hold write paths, `exclude` left out, in order."""
    return [
        r[0]
        for r in conn.all(
            "SELECT id FROM jobs WHERE live = 1 AND checkout_root IS NOT NULL AND id != ? "
            "AND EXISTS (SELECT 1 FROM job_paths p WHERE p.job = jobs.id) ORDER BY id",
            (exclude,),
        )
    ]


def any_live_with_paths_in(conn: Tx, root: str, exclude: str) -> bool:
    """Whether a live job other than `exclude`, taken in checkout `root` (or declared there and
    not taken), holds write paths."""
    return (
        conn.one(
            "SELECT 1 FROM jobs j WHERE j.live = 1 AND j.id != ? AND ((j.checkout_root = ? AND "
            "(j.machine IS NULL OR j.machine = ?)) OR (j.checkout_root IS NULL AND j.declared_in = ?)) AND EXISTS "
            "(SELECT 1 FROM job_paths p WHERE p.job = j.id) LIMIT 1",
            (exclude, root, machine_id(), root),
        )
        is not None
    )


def job_by_secret_digest(conn: Tx, digest: str) -> str | None:
    """The id of a job whose secret (PROCTOR_NONCE) hashes to `digest`, in any state."""
    row = conn.one(f"SELECT id FROM jobs WHERE {conn.json_text('doc', 'nonce_sha256')} = ?", (digest,))
    return row[0] if row else None


def live_job_by_secret_digest(conn: Tx, digest: str) -> str | None:
    """The id of a live job whose secret (PROCTOR_NONCE) hashes to `digest`."""
    row = conn.one(f"SELECT id FROM jobs WHERE live = 1 AND {conn.json_text('doc', 'nonce_sha256')} = ?", (digest,))
    return row[0] if row else None


def delete(conn: Tx, job_id: str) -> None:
    """Remove a job's row and its paths for good."""
    conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
    conn.execute("DELETE FROM job_paths WHERE job = ?", (job_id,))


claims = row_claims  # a stored job's claims in one path field (jobrecord says how)


def read_boundary(job: dict, lookup, _depth: int = 0) -> list[jpaths.Claim]:
    """What a holder of `job` may read: its read paths; when it has none, the directories of its
    write paths and of those of the jobs it depends on (`lookup(id)`: a row or None); when those
    are none too, what its parent may read (a read-only child that names no paths reads no more
    than the job it was forked from). Empty: no boundary at all (a top-level job that names none).
    The guard's read rule and the store's check of a holder's child read it alike."""
    if job.get("read_paths"):
        return claims(job, "read_paths")
    out = []
    for source in [job] + [lookup(d) or {} for d in job.get("depends_on") or ()]:
        for claim in claims(source):
            key = claim.key if claim.glob else claim.path.rpartition("/")[0]
            out.append(jpaths.Claim(key or "."))
    if not out and job.get("parent") and _depth < 64:
        parent = lookup(job["parent"])
        if parent:
            return read_boundary(parent, lookup, _depth + 1)
    return out


def put(conn: Tx, job: dict, root: str, depth: int) -> None:
    doc = {k: v for k, v in job.items() if not k.startswith("_")}
    live = is_live(doc["state"])
    conn.execute(
        f"INSERT INTO jobs ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        f"ON CONFLICT (id) DO UPDATE SET {_UPDATE}",
        (
            doc["id"],
            doc.get("parent"),
            root,
            depth,
            doc["state"],
            1 if live else 0,
            doc.get("holder", "session"),
            doc.get("checkout_root"),
            doc.get("declared_in"),
            doc["created"],
            doc["updated"],
            json.dumps(doc, sort_keys=True, separators=(",", ":")),
            doc.get("machine") if doc.get("checkout_root") else None,
        ),
    )
    conn.execute("DELETE FROM job_paths WHERE job = ?", (doc["id"],))
    if live:
        conn.executemany(
            "INSERT INTO job_paths (job, spelling, key) VALUES (?, ?, ?)",
            [(doc["id"], c.spelling, c.key) for c in claims(doc)],
        )
    job["_root"], job["_depth"] = root, depth


def live_claims_near(conn: Tx, keys: list[str], exclude: str) -> dict[str, list[jpaths.Claim]]:
    """Claims of live jobs whose keys contain, equal, or lie under any of `keys`."""
    found: dict[str, set[str]] = {}
    for key in set(keys):
        ancestors = jpaths.ancestors(key)
        marks = ",".join("?" * len(ancestors))
        rows = list(
            conn.all(f"SELECT job, spelling FROM job_paths WHERE key IN ({marks}) AND job != ?", (*ancestors, exclude))
        )
        if key != "":
            rows += conn.all(
                "SELECT job, spelling FROM job_paths WHERE key > ? AND key < ? AND job != ?",
                (key + "/", key + "0", exclude),
            )
        else:
            rows += conn.all("SELECT job, spelling FROM job_paths WHERE job != ?", (exclude,))
        for job, spelling in rows:
            found.setdefault(job, set()).add(spelling)
    out: dict[str, list[jpaths.Claim]] = {}
    for job, spellings in found.items():
        out[job] = []
        for spelling in sorted(spellings):
            path, declaration, _ = jpaths.split_entry(spelling)
            out[job].append(jpaths.Claim(path, declaration))
    return out


def descendants(conn: Tx, job_id: str) -> list[str]:
    rows = conn.all(
        """WITH RECURSIVE tree(id) AS (
               SELECT id FROM jobs WHERE parent = ?
               UNION SELECT jobs.id FROM jobs JOIN tree ON jobs.parent = tree.id)
           SELECT id FROM tree""",
        (job_id,),
    )
    return [r[0] for r in rows]


def ancestors(conn: Tx, job_id: str) -> list[str]:
    """Parent, grandparent, ... of a job (stops at a missing row or a cycle)."""
    chain: list[str] = []
    current = conn.one("SELECT parent FROM jobs WHERE id = ?", (job_id,))
    while current and current[0] and current[0] not in chain and current[0] != job_id:
        chain.append(current[0])
        current = conn.one("SELECT parent FROM jobs WHERE id = ?", (current[0],))
    return chain


def bind(conn: Tx, scope: str, job_id: str, at: str) -> None:
    """Record that callers of `scope` act under `job_id` (`checkout:<machine>:<root>` or
    `agent:...`), and on which machine."""
    conn.execute(
        "INSERT INTO bindings (scope, job, recorded, machine) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (scope) DO UPDATE SET job = excluded.job, recorded = excluded.recorded, "
        "machine = excluded.machine",
        (scope, job_id, at, machine_id()),
    )


def unbind(conn: Tx, scope: str, job_id: str) -> None:
    """Forget that `scope` acts under `job_id` (a binding to another job is left alone)."""
    conn.execute("DELETE FROM bindings WHERE scope = ? AND job = ?", (scope, job_id))


def bound_job(conn: Tx, scope: str) -> str | None:
    """The job `scope` is bound to while that job is in flight (declared or running)."""
    row = conn.one(
        f"SELECT b.job FROM bindings b JOIN jobs j ON j.id = b.job WHERE b.scope = ? AND j.state IN {_IN_FLIGHT}",
        (scope,),
    )
    return row[0] if row else None


def any_bound_under(conn: Tx, prefix: str) -> bool:
    """Whether a scope that extends `prefix` (a session's subagents) is bound to a job in flight."""
    return (
        conn.one(
            "SELECT 1 FROM bindings b JOIN jobs j ON j.id = b.job WHERE b.scope > ? AND b.scope < ? "
            f"AND j.state IN {_IN_FLIGHT} LIMIT 1",
            (prefix, prefix + "\uffff"),
        )
        is not None
    )


def checkout_scope(root: str) -> str:
    """The binding key of a checkout, read by callers that report no session or subagent: the
    machine and the path, since one store may serve checkouts on several machines."""
    import os

    return f"checkout:{machine_id()}:{os.path.realpath(root)}"


def agent_scope(host: str, session: str, subagent: str | None) -> str:
    """The binding key of a hook caller: exactly its host, session and subagent ids."""
    return f"agent:{host}:{session}:{subagent or ''}"
