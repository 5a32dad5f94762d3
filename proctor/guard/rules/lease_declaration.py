"""lease-claimed-declaration: a leased session's edit lands in a declaration another live job claims."""

from __future__ import annotations

from proctor.guard.call import PRE_TOOL
from proctor.guard.context import Context
from proctor.jobrecord import overdue

NAME = "lease-claimed-declaration"
DEFAULT = "deny"
EVENTS = (PRE_TOOL,)
ORDER = 60  # where it is judged among the rules (proctor/guard/rules/__init__.py)
SUMMARY = "a leased session's edit lands in a declaration of a file another live job claims"
CATCHES = (
    "A write, under a live job, to a file another live job claims a declaration of (src/a.py#alpha): "
    "an edit (old and new text, a list of them, an apply_patch hunk) is applied to the file in memory "
    "and its changed lines placed in the file's declarations, and one landing in a declaration the "
    "other job's claim names is refused (the caller claiming it too does not make it the caller's); "
    "one landing only in the caller's own claims, in a declaration nobody claims, or above the first "
    "declaration passes. A write carrying no edit (a whole-file write, a shell command) is graded by "
    "the path alone, and the path is the other job's too."
)
WHY = (
    "Declaration claims are how two jobs start on one file; each is held to its own declaration, "
    "and the file is read only when another live job claims a declaration of it."
)


def check(ctx: Context) -> list[tuple[str, str]]:
    job = ctx.job
    if job is None:
        return []
    family = set(ctx.ancestors(job["id"])) | {job["id"]}
    entered = ctx.entered
    findings = []
    for full in ctx.written_paths():
        rel = ctx.rel(full, resolved=True)
        if rel is None or rel in entered or rel == ".git" or rel.startswith(".git/"):
            continue
        others = [
            (row, claims)
            for row, claims in ctx.declaration_holders(rel)
            if row["id"] not in family and not overdue(row, ctx.now)
        ]
        if not others:
            continue
        named = "; ".join(f"{row['id']} claims {', '.join(c.spelling for c in claims)}" for row, claims in others)
        edits, patch = ctx.edits_for(full)
        from proctor import declarations

        for row, claims in others:
            # each claimant's declarations as its row recorded their patterns at fork: git's
            # config and attributes are the caller's to write
            recorded = (row.get("declaration_rules") or {}).get(rel)
            placed = _place(
                ctx,
                full,
                rel,
                edits,
                patch,
                declarations.Rules.from_json(recorded) if isinstance(recorded, dict) else None,
            )
            if isinstance(placed, str):
                findings.append(
                    (
                        "rule",
                        f"{rel}: {named}, and {placed}; so it is graded by the path alone, which "
                        f"the other job holds too: make the change as an edit (old and new text) "
                        f"so proctor can place it in its declaration",
                    )
                )
                break
            decls, _ = placed
            for decl in decls:
                # the caller claiming it too does not make it the caller's alone: a declaration
                # another live job names is that job's (two claims on one are refused at fork)
                claim = next(
                    (c for c in claims if c.declaration is not None and declarations.names(c.declaration, decl.text)),
                    None,
                )
                if claim is None:
                    continue
                where = f", taken in {row['checkout_root']}" if row.get("checkout_root") else ""
                findings.append(
                    (
                        "rule",
                        f"{rel}: this edit lands in the declaration {decl.text!r} (line "
                        f"{decl.line}), which {row['id']} claims ({claim.spelling}{where}); leave "
                        f"it to {row['id']}, or enter its path (proctor job fork --stdin with "
                        f"enter) for one write",
                    )
                )
    return findings


def _place(ctx, full: str, rel: str, edits, patch: bool, rules):
    """(declarations, above-first) the call's edit of `full` lands in, or why it cannot be placed."""
    import os

    if edits is None:
        return "this call carries no edit proctor can place (a whole-file write, a shell write, a patch that adds or moves it)"
    from proctor import declarations

    if not os.path.isfile(full):
        return "the file is not there to place the edit in"
    try:
        with open(full, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return f"the file could not be read ({exc.strerror})"
    if rules is None:
        reader = declarations.Reader(ctx.checkout.root)
        driver = reader.driver(rel)
        if driver is None:
            return "the file has no diff driver to find declarations by"
        rules = reader.rules(driver)
    if rules.error:
        return rules.error
    placed = declarations.touched(data, edits, rules, patch)
    if placed is None:
        return (
            f"its old text is not in the file, or is in more than {declarations.PLACES} places, so the edit "
            f"cannot be placed"
        )
    return placed
