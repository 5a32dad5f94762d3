"""Helpers the lease rules share."""

from __future__ import annotations

from proctor import claims
from proctor.store import rows

ENTRY_QUIET_SECONDS = 60.0


def own_claims(job: dict, field: str = "write_paths") -> list[claims.Claim]:
    return rows.claims(job, field)


def overdue(job: dict, now: float) -> bool:
    from datetime import datetime

    deadline = job.get("deadline")
    return bool(deadline) and datetime.fromisoformat(deadline).timestamp() < now


def age(job: dict, now: float) -> str:
    from datetime import datetime

    seconds = max(0, int(now - datetime.fromisoformat(job["updated"]).timestamp()))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h{(seconds % 3600) // 60}m"
    return f"{seconds // 86400}d{(seconds % 86400) // 3600}h"


def open_entry(job: dict, rel: str) -> dict | None:
    for entry in job.get("entries") or ():
        if entry.get("consumed"):
            continue
        path, declaration, _ = claims.split_entry(entry["path"])
        if claims.covers(claims.Claim(path, declaration), rel):
            return entry
    return None


def entered_paths(ctx) -> set[str]:
    """Paths of this call let through by an entry (set by lease-entry, read by later rules)."""
    return getattr(ctx, "_entered", set())
