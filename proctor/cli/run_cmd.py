"""`proctor run <target>`: run a target and record the run as evidence."""

from __future__ import annotations

import sys

import click

from proctor import api
from proctor.cli import emit_json
from proctor.cli.options import lease_option, output_option


@click.command()
@click.argument("target")
@lease_option
@output_option("text", "json")
def run(target: str, lease: str | None, output: str) -> int:
    """Run TARGET from [targets.TARGET] in proctor.toml, streaming its output, and record it.

    The record (its id, exit code, times, lease, checkout, the content digest of the tree
    before and after, and the whole output as a content-addressed blob, its output_ref) is
    the evidence `proctor job wait` grades a check on: a result cites it as {"run": <id>,
    "output_ref": <ref>}, and it counts only for the tree it ran on, unchanged while it ran.
    Exit 0 when the target passed, 1 when it failed or timed out. With -o json the output
    streams to stderr.

    With [sandbox] mode on and a lease naming a live child job with write paths, the target
    may write only those paths inside the checkout, the cache and a private TMPDIR (Landlock);
    the record says so, and names the grant.
    """
    echo = sys.stderr.buffer if output == "json" else sys.stdout.buffer
    record = api.run_target(target, lease=lease, echo=echo)
    if output == "json":
        emit_json(record)
    else:
        status = "timed out" if record["timed_out"] else f"exit {record['exit_code']}"
        sys.stderr.write(
            f"proctor: {target} {status} in {record['duration_seconds']:.1f}s; "
            f"run {record['id']}, output_ref {record['output_ref']}\n"
        )
    box = record.get("sandbox")
    if box:
        refused = (
            f"{box['denials']} write{'s' if box['denials'] != 1 else ''} refused (the trail has each sandbox_denial)"
            if box.get("denials") is not None
            else f"refused writes are not reported here: {box.get('denials_unreported')}"
        )
        sys.stderr.write(
            f"proctor: ran in job {box['job']}'s sandbox: it may write {', '.join(box['grant'])}; {refused}\n"
        )
    moved = record.get("tree_moved") or []
    if moved:
        shown = ", ".join(moved[:5]) + (f" and {len(moved) - 5} more" if len(moved) > 5 else "")
        sys.stderr.write(
            f"proctor: note: the tree changed while {target} ran ({shown}): written during the run, "
            f"even if back as they were, so this run is evidence for no tree. If the target writes "
            f"them itself: ignore an untracked output (.gitignore); a tracked file it must not "
            f"rewrite (npm ci rather than npm install, a formatter in --check mode)\n"
        )
    return 0 if record["exit_code"] == 0 and not record["timed_out"] else 1
