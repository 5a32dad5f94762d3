"""The commented proctor.toml `proctor init` writes.

Generated rather than written out, so that it cannot drift from what is read: every key of KEYS
with its doc and example, and for the tables of many entries a note with an example (the
executors named from the registry in workers.py).
"""

from __future__ import annotations

from proctor.config.keys import KEYS
from proctor.config.workers import DOLLARS, EXECUTORS

# What `proctor init` writes: a short note per section, then every key of KEYS with its doc
# and an example, so a key added to the table is in the template too (tests/config/test_config.py
# uncomments every key and reads the file back with no problem).
_TEMPLATE_HEAD = """\
# proctor.toml: how proctor supervises agents in this repository.
# `proctor config show` prints every effective value and where it came from.
# Durations are written 30s, 15m, 2h or 1h30m; a bare number is in the key's unit:
# minutes for a key named *_minutes, else seconds.
# A bad value is reported and its default kept: it never stops a command.
"""
_SECTION_NOTES = {
    "jobs": "",
    "monitors": "Monitors: commands the server runs for a job, and the follow-ups they leave.",
    "store": (
        "The job store. Unset, it is an embedded SQLite file on this machine, shared by every "
        "worktree and clone here. For agents on several machines, point every clone at one "
        "PostgreSQL database (`proctor store migrate --to URL` copies the embedded store there first)."
    ),
    "sandbox": (
        "The sandbox (Linux Landlock): a run under a child job's lease may write only the job's "
        "write paths inside the checkout, the cache and a private TMPDIR; outside the checkout "
        "nothing changes."
    ),
}
_TARGETS_NOTE = """\
# Targets are named commands. A job names one as its check (`--check test`); proctor
# runs it through the shell, from the repository root or `cwd`, within `timeout`.
# [targets.test]
# command = "python -m pytest -q"
# timeout = "10m"
# cwd = "."
#
# [targets.ci]
# command = "make ci"
# timeout = "30m"
"""

_WORKERS_NOTE = f"""\
# Workers: the agent CLIs `proctor work` runs unattended ({", ".join(EXECUTORS)}),
# tried in the ladder's order, each attempt bounded by spend and wall time.
# [workers]
# ladder = ["claude"]
# attempts = 1
#
# [workers.claude]
# executor = "claude"
# The CLI to run, as an argv list; unset = the executor's own.
# command = ["claude"]
# The model to ask for; unset = the CLI's default.
# model = "sonnet"
# Dollars one attempt may spend (only for {" or ".join(DOLLARS)}, which report dollars).
# max_spend_usd = 2
# wall_minutes = 60
# How many of this worker may run at once; unset = unlimited.
# slots = 2
"""
_GUARD_NOTE = """\
# The guard's rules, each off, advise or deny; unset = the rule's own default.
# `proctor describe rules` lists them, `proctor describe rule NAME` says what one catches.
# [guard.rules]
# lease-write-scope = "deny"
"""


def _comment(text: str) -> list[str]:
    import textwrap

    first = text.split(" ", 1)[0]
    # a sentence starts with a capital, unless it starts with a value (off, true, postgresql://)
    sentence = (text[:1].upper() + text[1:] if first.isalpha() else text) + ("" if text.endswith(".") else ".")
    return ["# " + line for line in textwrap.wrap(sentence, 86)]


def template() -> str:
    """The commented proctor.toml `proctor init` writes, generated from KEYS."""
    parts = [_TEMPLATE_HEAD]
    for section, note in _SECTION_NOTES.items():
        keys = [key for key in KEYS.values() if key.name.split(".", 1)[0] == section]
        written = any(key.written for key in keys)
        lines = _comment(note) if note else []
        lines.append(f"[{section}]" if written else f"# [{section}]")
        for key in keys:
            lines.extend(_comment(key.doc))
            lines.append(f"{'' if key.written else '# '}{key.name.split('.', 1)[1]} = {key.example}")
        parts.append("\n".join(lines) + "\n")
        if section == "jobs":
            parts.append(_TARGETS_NOTE)
    parts.extend((_WORKERS_NOTE, _GUARD_NOTE))
    return "\n".join(parts)
