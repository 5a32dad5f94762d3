"""The commit of a job that passed its gates: only its changed paths inside its write paths,
with a message a worker cannot forge.

The subject is the job's first criteria line. With `[jobs] commit_body = "full"` the body
names the job, its kind and the gates it passed, and quotes the worker's own summary between
markers, every line behind `> `, control characters and escape sequences stripped, capped at
1,500 characters, so no line of it can parse as a trailer (Signed-off-by:, Co-Authored-By:,
Fixes:). `minimal` commits the subject alone; the gate results stay in the job's evidence.
"""

from __future__ import annotations

import re

from proctor import errors
from proctor.vcs import git

CLAIM_CAP = 1500
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean_claim(text: str) -> str:
    text = _ESCAPES.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = _CONTROL.sub("", text.replace("\t", "    "))
    text = text.strip()
    if len(text) > CLAIM_CAP:
        text = text[:CLAIM_CAP].rstrip() + " [cut at 1,500 characters]"
    return text


def subject(job: dict) -> str:
    for line in (job.get("criteria") or "").splitlines():
        line = clean_claim(line)
        if line:
            return line[:200]
    return f"proctor job {job['id']}"


def message(job: dict, kind: str, gates: list[str], summary: str | None, status: str, body: str) -> str:
    head = subject(job)
    if body == "minimal":
        return head + "\n"
    lines = [head, "", f"proctor job {job['id']} ({kind}) passed gates {', '.join(gates) or 'none'}.", ""]
    claim = clean_claim(summary or "")
    lines.append(f"----- worker's claim, not verified (status: {status}) -----")
    for line in claim.splitlines() or ["(no summary)"]:
        lines.append(f"> {line}".rstrip())
    lines.append("----- end of worker's claim -----")
    return "\n".join(lines) + "\n"


def commit_paths(root: str, paths: list[str], text: str) -> str:
    """Commit exactly `paths` (additions, changes and deletions) with `text`; return the sha.

    No hook runs (git.run pins core.hooksPath to nothing, and --no-verify besides), and the
    message is recorded verbatim whatever the person's commit.cleanup or the repository's
    encoding say: what proctor wrote is what the commit carries."""
    if not paths:
        raise errors.ProctorError("nothing to commit: the job changed no path inside its write paths")
    before = git.run(root, "rev-parse", "--verify", "-q", "HEAD", check=False).stdout.decode().strip() or None
    git.run(root, "add", "-A", "--", *paths)
    proc = git.run(
        root,
        "-c",
        "i18n.commitEncoding=UTF-8",
        "commit",
        "-q",
        "--no-verify",
        "--cleanup=verbatim",
        "--only",
        "-F",
        "-",
        "--",
        *paths,
        check=False,
        input=text.encode("utf-8"),
    )
    if proc.returncode != 0:
        git.run(root, "reset", "-q", "--", *paths, check=False)  # leave the index as it was
        detail = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip().splitlines()
        raise errors.ProctorError(f"git commit failed: {detail[-1] if detail else 'exit ' + str(proc.returncode)}")
    sha = git.run(root, "rev-parse", "HEAD").stdout.decode().strip()
    parent = git.run(root, "rev-parse", "--verify", "-q", sha + "^", check=False).stdout.decode().strip() or None
    if parent != before:
        raise errors.ProctorError(
            f"git commit made {sha[:12]} on {(parent or 'no parent')[:12]}, not on "
            f"{(before or 'an unborn branch')[:12]}: something else committed meanwhile"
        )
    return sha
