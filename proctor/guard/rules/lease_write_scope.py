"""lease-write-scope: a leased session writes outside its job's write paths or inside its deny paths."""

from __future__ import annotations

from proctor import claims
from proctor.guard.call import PRE_TOOL
from proctor.guard.context import Context
from proctor.guard.rules._common import own_claims

NAME = "lease-write-scope"
DEFAULT = "deny"
EVENTS = (PRE_TOOL,)
ORDER = 20  # where it is judged among the rules (proctor/guard/rules/__init__.py)
SUMMARY = (
    "a leased session writes outside its job's write paths, inside its deny paths, or in another "
    "checkout than the one its job was taken in"
)
CATCHES = (
    "A file tool or a shell command (redirections, tee, cp/mv targets, rm, touch, sed -i, "
    "git checkout -- path, bash -c ...) of a session acting under a live job that writes a "
    "repository path the job's write paths do not cover, or one its deny paths do; or that "
    "writes the repository's files in another work tree than the one its job was taken in "
    "(a `proctor work` worker writing the person's checkout instead of its attempt's worktree)."
)
WHY = (
    "The job row is the boundary its forking session declared, and the diff is graded against "
    "it when the job returns; a write outside it fails the job later or collides with another "
    "job now. Refusing the write at the call says so while it is still cheap to change course. "
    "A write proctor cannot name ($VAR in a path) is advised, never refused."
)


def check(ctx: Context) -> list[tuple[str, str]]:
    job = ctx.job
    if job is None or job.get("read_only") or not job.get("write_paths"):
        return []
    mine = own_claims(job)
    denies = own_claims(job, "deny_paths")
    findings = []
    taken = job.get("checkout_root")
    if taken:
        import os

        taken = os.path.realpath(taken)
        trees = sorted({ctx.root, ctx.checkout.root, *ctx.other_trees()}, key=len, reverse=True)
        for full in ctx.written_paths():
            tree = next((t for t in trees if full == t or full.startswith(t.rstrip("/") + "/")), None)
            if tree is None or os.path.realpath(tree) == taken:
                continue
            inner = full[len(tree.rstrip("/")) + 1 :]
            if inner == ".git" or inner.startswith(".git/"):
                continue  # the git directory is lease-tamper's
            findings.append(
                (
                    "rule",
                    f"{full} is in {tree}, another checkout of the repository; {job['id']} is "
                    f"taken in {taken}, and its work is written there",
                )
            )
    for rel in ctx.written():
        if any(claims.covers(d, rel) for d in denies):
            findings.append(
                (
                    "rule",
                    f"{rel} is inside the deny paths of {job['id']} "
                    f"({', '.join(job['deny_paths'])}); leave it to the job that owns it",
                )
            )
        # a claim of everything under a directory covers the directory itself (chmod -R on it)
        elif not any(claims.covers(c, rel) or c.path == rel + "/**" for c in mine):
            findings.append(
                (
                    "rule",
                    f"{rel} is outside the write paths of {job['id']} "
                    f"({', '.join(job['write_paths'])}); widening them is the forking "
                    f"session's, or enter the path of the job that owns it",
                )
            )
    for unknown in ctx.unknown_writes:
        findings.append(
            (
                "advise",
                f"cannot tell what this writes ({unknown}); {job['id']} may write only {', '.join(job['write_paths'])}",
            )
        )
    return findings
