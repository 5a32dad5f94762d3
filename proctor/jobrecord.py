"""The core job record: what the guard, the jobs and the doors all know of a job, said once.

A job's states, its id syntax, when it is overdue, where it was taken and whether that is
here, what of it the public may see, how a checkpoint token splits, the lease a BAGGAGE header
names, and "that job, or a refusal naming the remedy". Both `proctor.jobs` and
`proctor.guard` read these; neither keeps a copy.

Also here, the one-author check: what a session holding a job may put as a job record, judged
once for the store (`jobs/fork_refusals.py`, at the fork) and for the guard
(`guard/rules/lease_store.py`, at the call), each of which renders the findings in its own words.

Core, and on the hook's hot path: it imports only `os`, `re`, `proctor.claims`, `proctor.errors`,
`proctor.paths` and `proctor.timeutil` (no `typing`, `dataclasses` or `urllib`), and holds no
connection: the store reads rows, this module says what a row means.
"""

from __future__ import annotations

import os
import re

from proctor import claims, errors
from proctor.paths import machine_id
from proctor.timeutil import parse_iso

# A job's states, in the order a job moves through them; every job ends in one of the last three.
STATES = ("declared", "running", "exited", "pass", "fail", "no_return")
DECLARED, RUNNING, EXITED, PASS, FAIL, NO_RETURN = STATES
TERMINAL = frozenset((PASS, FAIL, NO_RETURN))
# In flight: the job is still to be worked (declared) or being worked (running); a checkout's
# binding, a one-way lease and an entry hold only while their job is in flight.
IN_FLIGHT = (DECLARED, RUNNING)

HOLDER_SESSION = "session"
HOLDER_SERVER = "server"


def is_live(state: str) -> bool:
    """Not ended: declared, running or exited (a filed result not yet graded)."""
    return state not in TERMINAL


def in_flight(state: str) -> bool:
    return state in IN_FLIGHT


# --- id syntax --------------------------------------------------------------------------------

JOB_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*(/[A-Za-z0-9_][A-Za-z0-9_.\-]*)*$"
_JOB_ID = re.compile(JOB_ID_PATTERN)
MAX_JOB_ID = 200


# A symbol goal's name: an identifier, or one inside its scope (Store.load). The record's reader
# (jobs/model.py) refuses a malformed one at the fork, the goals' grader (symbols/goals.py) when
# it grades; both read it here, so symbols imports nothing of jobs.
SYMBOL_NAME = re.compile(r"(?:[^\W\d]|\$)[\w$]*(?:\.(?:[^\W\d]|\$)[\w$]*)*")


def is_job_id(value: object) -> bool:
    """Whether `value` can be a job id: segments of letters, digits, `_ . -` joined by `/`,
    none of them `..`, at most MAX_JOB_ID characters."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_JOB_ID
        and _JOB_ID.fullmatch(value) is not None
        and ".." not in value.split("/")
    )


def check_job_id(value: object, what: str = "job id") -> str:
    if not isinstance(value, str) or not value:
        raise errors.ProctorError(f"{what} must be a non-empty string", errors.BAD_JOB_ID)
    if not is_job_id(value):
        raise errors.ProctorError(
            f"{what} {value!r} cannot be a job id: use letters, digits, _ . - in segments "
            f"separated by / (api/migrate), at most {MAX_JOB_ID} characters",
            errors.BAD_JOB_ID,
        )
    return value


def require(job: dict | None, job_id: str) -> dict:
    """The job read for `job_id`, or the refusal every door gives for an id naming none."""
    if job is None:
        raise errors.ProctorError(
            f"no job {job_id}; proctor ls jobs lists the jobs of this repository", errors.UNKNOWN_JOB
        )
    return job


# --- time and place ---------------------------------------------------------------------------


def overdue(job: dict, at: float) -> bool:
    """Past its deadline at `at` (seconds since the epoch). Whether that matters (a live job's
    writes are refused, its paths block nobody) is the reader's."""
    deadline = job.get("deadline")
    if not deadline:
        return False
    return parse_iso(deadline) < at


def on_this_machine(job: dict) -> bool:
    """Whether the job's checkout (if taken) is on this machine; a job recorded before machines
    were (a one-machine store) is."""
    return job.get("machine") in (None, machine_id())


def taken_here(job: dict, root: str) -> bool:
    """Taken in the checkout at `root` (a real path) on this machine."""
    taken = job.get("checkout_root")
    if not taken:
        return False
    return os.path.realpath(taken) == root and on_this_machine(job)


def bound_here(job: dict, root: str) -> bool:
    """Bound to the checkout at `root`: taken there, or declared there and not taken yet."""
    if job.get("checkout_root"):
        return taken_here(job, root)
    return job.get("declared_in") == root and job.get("declared_on") in (None, machine_id())


def where_taken(job: dict) -> str:
    """Where a job was taken, as a person reads it: the path, and the machine when not this one."""
    taken = job.get("checkout_root") or "?"
    return taken if on_this_machine(job) else f"{taken} on machine {job.get('machine')}"


# --- what others may see ----------------------------------------------------------------------

# Fields no reader but the store sees: the digest a job's secret is checked against.
PRIVATE_FIELDS = frozenset(("nonce_sha256",))


def public(job: dict) -> dict:
    """The job as a listing, the API, MCP and the console show it: without the store's own
    keys (`_root`, `_depth`) and without PRIVATE_FIELDS."""
    return {k: v for k, v in job.items() if not k.startswith("_") and k not in PRIVATE_FIELDS}


# --- checkpoints ------------------------------------------------------------------------------


def split_checkpoint(token: str | None) -> tuple[str, str]:
    """`<revision>[+<digest>]` (as `proctor vcs checkpoint -o name` prints it) -> (revision,
    digest); either may be empty."""
    revision, _, digest = (token or "").strip().partition("+")
    return revision, digest


def checkpoint_revision(token: str | None) -> str | None:
    """The commit a checkpoint token names, or None for an empty token."""
    return split_checkpoint(token)[0] or None


# --- the lease a caller claims ----------------------------------------------------------------

BAGGAGE_KEY = "proctor.lease"
_HEX = frozenset(b"0123456789abcdefABCDEF")


def _unquote(text: str) -> str:
    """Percent-decoding, as W3C baggage values use it (urllib.parse costs the hook 5 ms)."""
    if "%" not in text:
        return text
    out = bytearray()
    raw = text.encode("utf-8", "surrogateescape")
    i = 0
    while i < len(raw):
        if raw[i] == 0x25 and i + 2 < len(raw) and raw[i + 1] in _HEX and raw[i + 2] in _HEX:
            out.append(int(raw[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(raw[i])
            i += 1
    return out.decode("utf-8", "replace")


def settle_lease(record: str | None, claim: str | None, tier: str) -> tuple[str | None, str | None]:
    """The lease a caller acts under, from what a record binds it to (`tier`: "agent", the
    host session's record; "marker", the checkout's) and what BAGGAGE claims: a record wins
    over a claim, and says so ("contested") when they differ, or a claim could undo the
    one-way rule of taking a lease; a claim answers alone ("env"); neither, (None, None). An
    explicit --lease and the tiers before the record (the guard's broker pin, the CLI's
    inherited claim) are the callers'; this is the order both share."""
    if record:
        return record, ("contested" if claim and claim != record else tier)
    if claim:
        return claim, "env"
    return None, None


def parse_baggage(header: str | None) -> dict[str, str]:
    """W3C baggage: `key=value;prop, key2=value2`, values percent-encoded."""
    members: dict[str, str] = {}
    for member in (header or "").split(","):
        pair = member.split(";", 1)[0].strip()
        if "=" not in pair:
            continue
        key, _, value = pair.partition("=")
        key = key.strip()
        if key:
            members[key] = _unquote(value.strip())
    return members


# --- one author per job -----------------------------------------------------------------------

# The fields a record lists; an absent one reads as an empty list when compared with what is held.
PATH_FIELDS = ("write_paths", "deny_paths", "read_paths")
LIST_FIELDS = PATH_FIELDS + ("depends_on", "goals")


def comma_list(text: str) -> list[str]:
    """A list field as a flag or a record's string spells it: `a, b,,c` -> ["a", "b", "c"]."""
    return [part for part in (piece.strip() for piece in text.split(",")) if part]


def check_as_stored(value):
    """A check as a row holds it: `"test"` or `{"target": " test "}` -> `{"target": "test"}`;
    any other value as given (the store's reading refuses it; see jobs/model.normalize_check)."""
    if isinstance(value, str):
        return {"target": value.strip()}
    if isinstance(value, dict) and set(value) == {"target"} and isinstance(value["target"], str):
        return {"target": value["target"].strip()}
    return value


def one_author(held: dict, record: dict, existing: dict | None, family, reads_allowed, writes, reads) -> list:
    """What a session holding `held` may not put as `record` (the fields it names), as
    (finding, detail) pairs in the order the store and the guard report them; none when it may.

    Widening a boundary and changing the plan's shape are the forking session's: a holder may
    shrink its own write paths (changing no other field of its row) and fork children of itself
    (`parent` its job) inside them, re-declaring such a child while nobody has taken it.

    `existing`: the row under record["id"] now, or None. `family()`: the holder's job and its
    descendants; `reads_allowed()`: the claims it may read (each asked only when needed).
    `writes`, `reads`: the record's write and read entries as (spelling, Claim), the Claim None
    for an entry that leaves the repository or cannot be read.

    Findings: ("not-child", None); ("ended", state); on the holder's own row ("fields",
    [changed fields]), ("empty", None), ("widens", [spellings]); on a child ("state", value),
    ("taken", its state), ("depends", [ids]), ("reads", ([spellings], allowed claims)),
    ("writes", [spellings]).
    """
    lease = held["id"]
    if record.get("id") == lease:
        if not is_live(held["state"]):
            return [("ended", held["state"])]
        found: list = []
        changed = []
        for field, value in record.items():
            if field in ("id", "write_paths", "schema_version"):
                continue
            current = held.get(field)
            if field in LIST_FIELDS:
                current = current or []
            if value != current:
                changed.append(field)
        if changed:
            found.append(("fields", changed))
        if "write_paths" in record and not writes and held.get("write_paths") and not held.get("read_only"):
            found.append(("empty", None))
        widened = _outside(writes, row_claims(held))
        if widened:
            found.append(("widens", widened))
        return found
    if record.get("parent") != lease or (existing is not None and existing.get("parent") != lease):
        return [("not-child", None)]
    if not is_live(held["state"]):
        return [("ended", held["state"])]
    if "state" in record:
        return [("state", record["state"])]
    if existing is not None and existing["state"] != DECLARED:
        return [("taken", existing["state"])]
    depends = record.get("depends_on") or ()
    known = family() if depends else set()  # asked once: each ask reads the store
    beyond = [d for d in depends if d not in known]
    if beyond:
        return [("depends", beyond)]
    if reads:
        allowed = reads_allowed()
        wider = _outside(reads, allowed)
        if wider:
            return [("reads", (wider, allowed))]
    outside = _outside(writes, row_claims(held))
    if outside:
        return [("writes", outside)]
    return []


def row_claims(job: dict, field: str = "write_paths") -> list:
    """A stored job's claims in one path field (stored spellings are canonical, so they
    re-parse exactly)."""
    out = []
    for spelling in job.get(field) or ():
        path, declaration, _ = claims.split_entry(spelling)
        out.append(claims.Claim(path, declaration))
    return out


def _outside(entries, allowed) -> list:
    """The spellings of the entries no allowed claim holds (an unreadable entry is outside)."""
    return [s for s, c in entries if c is None or not any(claims.within(c, mine) for mine in allowed)]
