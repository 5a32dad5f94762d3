"""`proctor doctor`: one line per check of this workspace; exit 1 when any is wrong."""

from __future__ import annotations

import os

import click

from proctor import errors
from proctor import jobrecord


@click.command()
def doctor() -> int:
    """Check the store, the config, the hook wiring of each host found, the MCP door (its
    tools, each host's wiring of `proctor mcp`, the running server's /mcp), the job tree,
    whether this checkout's lease is live and actually judged, and (with workers defined)
    what ends every process of a worker on this machine."""
    from proctor.guard.harness import HOSTS, host_present, wired
    from proctor.jobs import listing, reap
    from proctor.jobs.lease import resolve
    from proctor.store import rows
    from proctor.workspace import Workspace

    problems = 0

    def line(ok: bool, text: str) -> None:
        nonlocal problems
        problems += 0 if ok else 1
        click.echo(f"{'ok  ' if ok else 'FAIL'} {text}")

    ws = Workspace(warn=lambda _line: None)
    cfg = ws.config
    line(not cfg.problems, "config: " + ("no problems" if not cfg.problems else "; ".join(cfg.problems)))
    from proctor.paths import machine_id
    from proctor.store import redact

    url = ws.store_url
    engine = f"PostgreSQL {redact(url)}" if url else "embedded SQLite"
    started = __import__("time").monotonic()
    try:
        store = ws.store
        reached = (__import__("time").monotonic() - started) * 1000
        line(
            True,
            f"store engine: {engine}, schema version {store.schema_version()}"
            + (f", reachable from this machine ({machine_id()}) in {reached:.0f} ms" if url else ""),
        )
        reap.end_unheld(store, cfg["jobs.stale_after"], lambda text: click.echo(f"note {text}"))
        with store.read() as conn:
            count = rows.counts(conn)
            caller = resolve(conn, ws.root, None)
            job = rows.get(conn, caller.lease) if caller.lease else None
            jobs = rows.all_jobs(conn)
        line(True, f"store: {store.path} ({count[0]} jobs, {count[1]} live)")
    except errors.ProctorError as exc:
        line(False, f"store: {engine}: {exc.message}")
        return 1
    for host in HOSTS:
        if not host_present(host, ws.root):
            continue
        ok, what = wired(host, ws.root)
        line(
            ok,
            f"hook wiring for {host}: {what}" + ("" if ok else f"; proctor describe harness --host {host} prints it"),
        )
    _mcp(ws, line)
    if caller.lease is None:
        line(True, "bound lease: none in this checkout; a session here is judged only by the lease it names")
    elif job is None:
        line(False, f"bound lease: {caller.lease} (from {caller.lease_from}) names no job; nothing is judged")
    elif not jobrecord.is_live(job["state"]):
        line(
            False,
            f"bound lease: {caller.lease} (from {caller.lease_from}) has ended ({job['state']}); nothing is judged",
        )
    elif not job.get("base"):
        line(
            False,
            f"bound lease: {caller.lease} (from {caller.lease_from}) is live but was never taken "
            f"(no base recorded); run proctor job exec {caller.lease}",
        )
    else:
        where = job.get("checkout_root") or "?"
        here = os.path.realpath(where) == os.path.realpath(ws.root)
        line(
            True,
            f"bound lease: {caller.lease} (from {caller.lease_from}) is live and judged; taken "
            f"{'in this checkout' if here else 'in ' + where}",
        )
    from proctor import sandbox

    abi = sandbox.kernel_abi()
    mode = cfg["sandbox.mode"]
    if mode == "off":
        hint = '; [sandbox] mode = "auto" turns it on' if abi else ""
        line(True, f"sandbox: off ({sandbox.kernel_offers(abi)}{hint})")
    elif abi:
        line(
            True,
            f"sandbox: {mode}, Landlock ABI {abi}; runs under a child job's lease write only its paths"
            f"{' (workers too: their proctor commands through a broker)' if cfg['sandbox.workers'] else ''}; denials {sandbox.denial_reporting()}",
        )
    else:
        line(
            mode == "auto",
            f"sandbox: {mode}, but {sandbox.kernel_offers(abi)}: "
            + (
                "runs are not sandboxed"
                if mode == "auto"
                else 'a run under a child job\'s lease is refused; set [sandbox] mode = "auto" or "off"'
            ),
        )
    if cfg.workers:
        from proctor.workers import runner

        held = runner.containment()
        line(True, f"worker containment: {held}")
    built = listing.build(jobs, cfg, __import__("time").time())
    stale = [row for row in built["jobs"] if row["stale"] or row["overdue"]]
    line(
        not stale,
        "job tree: "
        + (
            "no stale or overdue jobs"
            if not stale
            else "; ".join(
                f"{row['id']} {'stale' if row['stale'] else 'overdue'} (proctor job exit {row['id']})" for row in stale
            )
        ),
    )
    ws.close()
    return 1 if problems else 0


def _mcp(ws, line) -> None:
    """The MCP door: the tools this build serves, each present host's wiring of `proctor mcp`
    (a note, not a failure: the door is optional), and the running server's endpoint."""
    from proctor.guard.harness import HOSTS, host_present, mcp_wired
    from proctor.mcp_server import probe
    from proctor.server import daemon

    try:
        line(True, f"mcp: proctor mcp serves {probe()} tools")
    except Exception as exc:  # the SDK missing or broken: say which
        line(False, f"mcp: the MCP tools cannot be served: {type(exc).__name__}: {exc}")
        return
    for host in HOSTS:
        if host_present(host, ws.root):
            ok, what = mcp_wired(host, ws.root)
            click.echo(
                f"{'ok  ' if ok else 'note'} mcp wiring for {host}: {what}"
                + ("" if ok else f"; proctor describe harness --host {host} --part mcp prints it")
            )
    running = daemon.info(ws)
    if running is None:
        return
    if not running.get("mcp"):
        line(
            False,
            "mcp endpoint: the running server predates it; restart it (proctor server stop; proctor server start)",
        )
        return
    try:
        with open(daemon.token_path(ws), encoding="ascii") as handle:
            token = handle.read().strip()
        count = probe(running["mcp"], f"Bearer {token}")
        line(True, f"mcp endpoint: {running['mcp']} answers ({count} tools)")
    except Exception as exc:
        why = str(exc) or type(exc).__name__
        for inner in getattr(exc, "exceptions", ()):  # the SDK's task group wraps the HTTP error
            why = str(inner) or type(inner).__name__
        line(False, f"mcp endpoint: {running['mcp']} did not answer: {why[:300]}")
