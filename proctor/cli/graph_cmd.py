"""`proctor graph diff --rev R` and `proctor diff -`: the symbol view of a change, read with
proctor's own index of definitions and references (proctor.symbols)."""

from __future__ import annotations

import os
import sys

import click

from proctor.cli import emit_json
from proctor.cli.options import output_option
from proctor.errors import DIFF_TAKES_STDIN, ProctorError


def _index():
    from proctor.paths import find_checkout
    from proctor.symbols.index import Index

    checkout = find_checkout(os.getcwd())
    return checkout.root, Index(checkout.root)


@click.group()
def graph() -> None:
    """proctor's index of definitions and references."""


@graph.command("diff")
@click.option(
    "--rev",
    "revision",
    required=True,
    metavar="REVISION",
    help="The revision to diff from: a commit, a branch, or a checkpoint token (its revision half).",
)
@output_option("text", "json")
def graph_diff(revision: str, output: str) -> None:
    """The symbols added, removed and changed since REVISION, per file.

    \b
    The work tree as it is on disk is compared, untracked files included. A definition is
    changed when its text differs. Files in a language with no grammar are listed as
    unindexed. Python, Go, JavaScript, TypeScript (and TSX) and Rust are read.
    """
    from proctor.symbols.diff import graph_diff as run

    root, index = _index()
    with index:
        record = run(root, revision, index)
    if output == "json":
        emit_json(record)
        return
    click.echo(f"since {record['revision'][:12]}")
    if not record["files"]:
        click.echo("  no definition added, removed or changed")
    for entry in record["files"]:
        click.echo(entry["path"])
        for mark, field in (("+", "added"), ("-", "removed"), ("~", "changed")):
            for d in entry[field]:
                name = f"{d['scope']}.{d['name']}" if d["scope"] else d["name"]
                click.echo(f"  {mark} {d['kind']:<10} {name}  (lines {d['lines'][0]}-{d['lines'][1]})")
        if entry["error"]:
            click.echo(f"  ! {entry['error']}")
    if record["unindexed"]:
        click.echo(f"unindexed (no grammar): {', '.join(record['unindexed'])}")


@click.command("diff", context_settings={"ignore_unknown_options": True})
@output_option("text", "json")
@click.argument("source", nargs=-1, type=click.UNPROCESSED)
def diff(output: str, source: tuple[str, ...]) -> None:
    """Annotate a unified diff read from stdin: `git diff REV | proctor diff -`.

    \b
    Each changed file with the declarations its hunks touch (removed lines placed on the old
    side, added lines on the new), whether each is on its module's public surface (exported,
    pub, capitalised, no leading underscore), and the files that name it. A revision given
    here is refused: pipe git's diff in, so what is annotated is exactly what git printed.
    """
    if list(source) != ["-"]:
        given = " ".join(source) or "nothing"
        raise ProctorError(
            f"proctor diff reads a diff on stdin and takes only '-' (got {given}); run "
            f"git diff {' '.join(source) or '<revision>'} | proctor diff -",
            DIFF_TAKES_STDIN,
        )
    from proctor.symbols.diff import annotate

    stream = getattr(sys.stdin, "buffer", None)
    patch = stream.read() if stream is not None else sys.stdin.read().encode("utf-8", "surrogateescape")
    root, index = _index()
    with index:
        record = annotate(root, patch, index)
    if output == "json":
        emit_json(record)
        return
    if not record["files"]:
        click.echo("no file in the diff")
    for entry in record["files"]:
        click.echo(f"{entry['path']}" + (f" ({entry['language']})" if entry["language"] else ""))
        for touched in entry["touched"]:
            name = f"{touched['scope']}.{touched['name']}" if touched["scope"] else touched["name"]
            refs = touched.get("referenced_by") or []
            named = (
                (
                    f"named in {len(refs)} files: {', '.join(touched['references'][:5])}"
                    + (", ..." if len(touched["references"]) > 5 else "")
                )
                if refs
                else "named nowhere else"
            )
            public = "public " if touched.get("public") else ""
            click.echo(
                f"  {public}{touched['kind']} {name} (lines {touched['lines'][0]}-{touched['lines'][1]}, "
                f"{touched['side']} side): {named}"
            )
        for side in ("old", "new"):
            if entry["outside"][side]:
                lines = entry["outside"][side]
                click.echo(f"  {side} lines above or between declarations: {_ranges(lines)}")
        if entry["note"]:
            click.echo(f"  ! {entry['note']}")


def _ranges(lines: list[int]) -> str:
    out: list[str] = []
    start: int | None = None
    prev: int | None = None
    for line in sorted(set(lines)):
        if start is None:
            start = prev = line
        elif prev is not None and line == prev + 1:  # prev is set whenever start is
            prev = line
        else:
            out.append(f"{start}-{prev}" if start != prev else str(start))
            start = prev = line
    if start is not None:
        out.append(f"{start}-{prev}" if start != prev else str(start))
    return ", ".join(out)
