"""The `runs` table: recorded runs of targets (proctor/runs.py makes them). Only this module
writes it."""

from __future__ import annotations

import json

from proctor.store import Tx

COLUMNS = (
    "id",
    "target",
    "command",
    "cwd",
    "checkout",
    "checkpoint",
    "tree",
    "tree_end",
    "lease",
    "exit_code",
    "timed_out",
    "started",
    "ended",
    "output_ref",
    "output_bytes",
    "machine",
    "sandbox",
)
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM runs"


def _row_to_run(row: tuple) -> dict:
    run = dict(zip(COLUMNS, row))
    run["timed_out"] = bool(run["timed_out"])
    if run["sandbox"]:
        try:
            run["sandbox"] = json.loads(run["sandbox"])
        except ValueError:
            pass
    run["ref"] = run["output_ref"]
    return run


def insert(tx: Tx, run: dict) -> None:
    """Record a run (its COLUMNS; `timed_out` stored as 0/1, `sandbox` as JSON)."""
    values = tuple(
        int(bool(run[c]))
        if c == "timed_out"
        else json.dumps(run[c], sort_keys=True)
        if c == "sandbox" and run.get(c) is not None
        else run.get(c)
        for c in COLUMNS
    )
    tx.execute(f"INSERT INTO runs ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})", values)


def get(tx: Tx, run_id: str) -> dict | None:
    row = tx.one(f"{_SELECT} WHERE id = ?", (run_id,))
    return _row_to_run(row) if row else None


def by_ref(tx: Tx, ref: str) -> list[dict]:
    """Every run whose output is `ref` (identical outputs share one blob), newest first."""
    return [_row_to_run(r) for r in tx.all(f"{_SELECT} WHERE output_ref = ? ORDER BY started DESC", (ref,))]


def latest(tx: Tx, target: str, since: str, checkout: str | None, machine: str | None = None) -> dict | None:
    """The newest run of `target` started at or after `since`, in `checkout` when given, on
    `machine` when given (a path names a checkout only on its machine)."""
    query = f"{_SELECT} WHERE target = ? AND started >= ?"
    params: list = [target, since]
    if checkout:
        query += " AND checkout = ?"
        params.append(checkout)
    if machine:
        query += " AND (machine IS NULL OR machine = ?)"
        params.append(machine)
    row = tx.one(query + " ORDER BY started DESC, ended DESC, id DESC LIMIT 1", params)
    return _row_to_run(row) if row else None


def has_output(tx: Tx, ref: str) -> bool:
    """Whether any recorded run printed output `ref`."""
    return tx.one("SELECT 1 FROM runs WHERE output_ref = ? LIMIT 1", (ref,)) is not None
