"""Jobs proctor ends itself: the live jobs it can PROVE nobody holds, ended as no_return.

Run at the start of every read of the store (ls jobs, fork, describe, exec, exit). Three
rules, from the spec:

1. an ancestor ended (pass, fail or no_return): the tree dies with its root;
2. its checkout is gone: exec recorded where it was taken and that directory no longer
   exists (an exited job is spared: removing its worktree is the normal end);
3. nobody took it: still declared, never exec'd, not updated within jobs.stale_after, and
   no live job hangs under it.

A job whose liveness cannot be decided (a checkout on a mount that cannot be read) stays
live. The server's own maintenance jobs are never ended this way. Candidates are found
with plain reads; only when there are any does a write transaction re-check and end them,
so a read of a healthy store writes nothing.
"""

from __future__ import annotations

from typing import Callable

from proctor.store import Store, unheld
from proctor.timeutil import now


def end_unheld(store: Store, stale_after: float, warn: Callable[[str], None]) -> list[tuple[str, str]]:
    """End every job the rules prove unheld; print `ended <id>: <reason>` for each."""
    at = now()
    with store.read() as conn:
        if not unheld.candidates(conn, stale_after, at, unheld.repository_of(store.state_dir)):
            return []
    with store.write() as conn:
        found = unheld.end(conn, store.state_dir, stale_after, at)
    for job_id, reason in found:
        warn(f"ended {job_id}: {reason}")
    return found
