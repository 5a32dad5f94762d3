"""Moving a repository's store between engines: `proctor store migrate --to URL`.

Every table is copied row for row, in one write transaction on the target (all of it lands or
none of it), from one read snapshot of the source; then each table is counted on both sides,
and the blobs too, and a difference fails the move. Both sides are opened by this proctor, so
both carry the same schema version. A target that already holds rows is refused unless
`replace` is given, which empties it first in the same transaction.
"""

from __future__ import annotations

from proctor.errors import STORE_MOVE_MISMATCH, STORE_NOT_EMPTY, ProctorError

TABLES = (
    "jobs",
    "job_paths",
    "bindings",
    "events",
    "runs",
    "sessions",
    "monitors",
    "monitor_runs",
    "monitor_events",
    "followups",
)
# Tables whose `id` is generated: PostgreSQL's identity must continue after the copied ids.
GENERATED = ("events", "monitors", "monitor_runs", "monitor_events", "followups")
BATCH = 1000


def columns(tx, table: str) -> list[str]:
    if tx.dialect == "sqlite":
        return [row[1] for row in tx.all(f"PRAGMA table_info({table})")]
    return [
        row[0]
        for row in tx.all(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = ? ORDER BY ordinal_position",
            (table,),
        )
    ]


def counts(tx) -> dict[str, int]:
    return {table: int(tx.scalar(f"SELECT COUNT(*) FROM {table}", default=0)) for table in TABLES}


def _stamp_machine(tx) -> None:
    """An embedded store is one machine's, this one's: a path or pid it holds with no machine
    named is stamped with it, or on a shared store every machine would judge it as its own."""
    from proctor.paths import machine_id
    from proctor.store import rows

    here = machine_id()
    for job in rows.all_jobs(tx):
        stamped = False
        for field, has in (
            ("machine", "checkout_root"),
            ("declared_on", "declared_in"),
            ("worker_machine", "worker_pid"),
        ):
            if job.get(has) and not job.get(field):
                job[field] = here
                stamped = True
        if stamped:
            rows.put(tx, job, job["_root"], job["_depth"])
    tx.execute("UPDATE runs SET machine = ? WHERE machine IS NULL", (here,))
    tx.execute("UPDATE monitor_runs SET machine = ? WHERE machine IS NULL", (here,))


def move(source, target, replace: bool = False, progress=None) -> dict:
    """Copy `source` into `target` (two open stores); return the counts, verified."""
    from proctor.store import blobs

    say = progress or (lambda _text: None)
    with source.read() as src:
        before = counts(src)
        with target.write() as dst:
            held = counts(dst)
            held_blobs = sum(1 for _ in blobs.refs(target))
            if (any(held.values()) or held_blobs) and not replace:
                busy = ", ".join(f"{t} {n}" for t, n in held.items() if n)
                raise ProctorError(
                    f"the target store {target.describe()} already holds rows "
                    f"({busy or f'{held_blobs} blobs'}); pass --replace to empty it first, or "
                    f"migrate into another database",
                    STORE_NOT_EMPTY,
                )
            if replace:
                for table in reversed(TABLES):
                    dst.execute(f"DELETE FROM {table}")
                blobs.clear(dst)
            for table in TABLES:
                names = [c for c in columns(src, table) if c in set(columns(dst, table))]
                listed = ", ".join(names)
                marks = ", ".join("?" * len(names))
                key = "id" if "id" in names else names[0]
                copied = 0
                cursor = src.execute(f"SELECT {listed} FROM {table} ORDER BY {key}")
                while True:
                    chunk = cursor.fetchmany(BATCH)
                    if not chunk:
                        break
                    dst.executemany(f"INSERT INTO {table} ({listed}) VALUES ({marks})", chunk)
                    copied += len(chunk)
                say(f"{table}: {copied} rows")
                if dst.dialect == "postgresql" and table in GENERATED:
                    dst.execute(
                        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                        f"COALESCE((SELECT MAX(id) FROM {table}), 0) + 1, false)"
                    )
            if source.dialect == "sqlite":
                _stamp_machine(dst)
            moved = 0
            for ref in list(blobs.refs(source)):
                blobs.put(dst, blobs.get(source, ref))
                moved += 1
            say(f"blobs: {moved}")
            after = counts(dst)
        source_blobs = sum(1 for _ in blobs.refs(source))
    target_blobs = sum(1 for _ in blobs.refs(target))
    wrong = {t: (before[t], after[t]) for t in TABLES if before[t] != after[t]}
    if source_blobs != target_blobs:
        wrong["blobs"] = (source_blobs, target_blobs)
    if wrong:
        raise ProctorError(
            "the copy does not match its source: "
            + ", ".join(f"{t} {a} in the source, {b} in the target" for t, (a, b) in wrong.items())
            + "; nothing is lost from the source; retry with --replace",
            STORE_MOVE_MISMATCH,
        )
    return {"tables": {t: before[t] for t in TABLES}, "blobs": source_blobs}
