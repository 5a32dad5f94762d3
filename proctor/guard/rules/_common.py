"""Helpers the lease rules share."""

from __future__ import annotations

from proctor import claims
from proctor.store import rows
from proctor.store.entries import entry_covering
from proctor.timeutil import format_duration, parse_iso

ENTRY_QUIET_SECONDS = 60.0


def own_claims(job: dict, field: str = "write_paths") -> list[claims.Claim]:
    return rows.claims(job, field)


def age(job: dict, now: float) -> str:
    return format_duration(now - parse_iso(job["updated"]))


open_entry = entry_covering  # an entry is read the way the store stamps it
