"""Follow-ups: a job's monitor events, ordered, grouped for 10 s, then delivered to its agent
as batches of at most 100 events and 32 KiB (the rest in later batches).

The limits hold for the text as delivered, byte for byte: a follow-up's UTF-8 text, header
and every line prefix included, is at most MAX_BYTES (32,768) bytes and carries at most
MAX_EVENTS events. Its text is

    Follow-up {id} from the monitors of job {job} ({n} event|events):
    [{time}] {description} (monitor {m}): {line}
    ...

where {id} is the follow-up's row id (the row is inserted, then its text written) and the
description is cut to DESCRIPTION_CAP characters. An event too large for a follow-up of its
own (a 16 KiB line of multi-byte characters, a long description) is cut to fit, with
CUT_MARKER. Every cut falls between two characters: no cut leaves a U+FFFD behind.

What waits for an agent is bounded: a job has at most `waiting` (`[monitors] max_waiting`,
default MAX_WAITING) follow-ups not yet delivered. When grouping makes more, the oldest
undelivered ones are dropped, events and all, and the oldest one left says so in a line right
under its header (DROP_NOTE: how many events were dropped since the agent last took one).
Every follow-up keeps NOTE_RESERVE bytes free for that line, so adding it never takes a
follow-up past MAX_BYTES.

They wait while the agent is working and go as soon as it is idle (monitors/wake.py): the Stop
hook hands the oldest over as the reason to carry on, a person's prompt carries it, or a
`proctor monitor wait` the session started prints it. `next_ready` and `mark_delivered` are
the store's side of that.
"""

from __future__ import annotations

import re

from proctor.timeutil import iso, now

GROUP_SECONDS = 10.0
MAX_EVENTS = 100
MAX_BYTES = 32 << 10
MAX_WAITING = 10  # undelivered follow-ups a job may have; [monitors] max_waiting
DESCRIPTION_CAP = 200  # characters of a monitor's description, as rendered
NOTE_RESERVE = 200  # bytes every follow-up leaves free for a drop note ("\n" + DROP_NOTE)
CUT_MARKER = " [proctor: event cut to fit a 32 KiB follow-up]"
DROP_NOTE = (
    "[proctor: {count} older undelivered event{s} of this job dropped: at most {waiting} "
    "follow-up{ws} wait for its agent ([monitors] max_waiting)]"
)
_NOTE = re.compile(r"^\[proctor: ([0-9,]+) older undelivered events? of this job dropped: ")
_LARGEST_ID = 10**15  # the header is budgeted for an id this long; row ids stay far below


def header(followup_id: int, job: str, count: int) -> str:
    """The first line of a follow-up. Its words up to the job are what monitors/wake.py and
    `proctor monitor wait` look for: keep them."""
    return f"Follow-up {followup_id} from the monitors of job {job} ({count} event{'' if count == 1 else 's'}):"


def drop_note(count: int, waiting: int) -> str:
    return DROP_NOTE.format(
        count=f"{count:,}", s="" if count == 1 else "s", waiting=waiting, ws="" if waiting == 1 else "s"
    )


# -- UTF-8, cut between characters --------------------------------------------------------------


def utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "replace"))


def utf8_boundary(raw: bytes, limit: int) -> int:
    """The largest cut at most `limit` that does not fall inside a UTF-8 character of `raw`.
    Bytes that are no UTF-8 (binary output) are cut anywhere: they decode to U+FFFD whatever
    the cut, as they were in the input."""
    if limit >= len(raw):
        return len(raw)
    if limit <= 0:
        return 0
    cut = limit
    while cut > limit - 3 and cut > 0 and raw[cut] & 0xC0 == 0x80:  # raw[cut], the first byte left out
        cut -= 1
    return cut if raw[cut] & 0xC0 != 0x80 else limit


def utf8_complete(raw: bytes) -> int:
    """The length of `raw` without a character cut short at its end (a prefix of a longer
    text): what can be kept of it with no U+FFFD made by the cut."""
    size = len(raw)
    lead = size - 1
    while lead >= 0 and size - lead < 4 and raw[lead] & 0xC0 == 0x80:
        lead -= 1
    if lead < 0:
        return size
    first = raw[lead]
    need = (
        1
        if first < 0x80
        else 2
        if first >> 5 == 0b110
        else 3
        if first >> 4 == 0b1110
        else 4
        if first >> 3 == 0b11110
        else 0
    )
    return lead if need and size - lead < need else size


def utf8_start(raw: bytes, start: int) -> int:
    """The smallest start at least `start` that begins a character (for keeping a tail)."""
    end = min(len(raw), start + 3)
    while start < end and raw[start] & 0xC0 == 0x80:
        start += 1
    return start


def cut_text(text: str, limit: int) -> str:
    """The longest prefix of `text` at most `limit` bytes in UTF-8, cut between characters."""
    if text.isascii():
        return text[: max(0, limit)]
    raw = text.encode("utf-8", "replace")
    if len(raw) <= limit:
        return text
    return raw[: utf8_boundary(raw, limit)].decode("utf-8", "replace")


def describe(description: str | None) -> str:
    text = " ".join((description or "").split())
    return text if len(text) <= DESCRIPTION_CAP else text[: DESCRIPTION_CAP - 1].rstrip() + "…"


def event_line(time_: str, description: str | None, monitor: int, line: str) -> str:
    return f"[{time_}] {describe(description)} (monitor {monitor}): {line}"


# -- grouping ----------------------------------------------------------------------------------


def pending_since(tx, job: str) -> str | None:
    return tx.scalar("SELECT MIN(time) FROM monitor_events WHERE job = ? AND followup IS NULL", (job,))


def jobs_with_pending(tx) -> list[tuple[str, str]]:
    return [tuple(r) for r in tx.all("SELECT job, MIN(time) FROM monitor_events WHERE followup IS NULL GROUP BY job")]


def has_pending(tx, job: str) -> bool:
    """Whether `job` has an event not grouped into a follow-up yet (one is to come)."""
    return tx.one("SELECT 1 FROM monitor_events WHERE job = ? AND followup IS NULL LIMIT 1", (job,)) is not None


def pack(job: str, events: list[tuple]) -> list[list[tuple[int, str]]]:
    """Split events [(id, monitor, time, line, description)] into follow-ups, in order: each a
    list of (event id, rendered line) within MAX_EVENTS and the byte budget left by the
    largest header and NOTE_RESERVE. A line too large for an empty follow-up is cut to fit."""
    budget = MAX_BYTES - utf8_size(header(_LARGEST_ID, job, MAX_EVENTS)) - NOTE_RESERVE
    groups: list[list[tuple[int, str]]] = []
    current: list[tuple[int, str]] = []
    used = 0
    for event_id, monitor, time_, line, description in events:
        text = event_line(time_, description, monitor, line)
        size = 1 + utf8_size(text)  # its newline, then the line
        if size > budget:
            text = cut_text(text, budget - 1 - len(CUT_MARKER)) + CUT_MARKER
            size = 1 + utf8_size(text)
        if current and (len(current) >= MAX_EVENTS or used + size > budget):
            groups.append(current)
            current, used = [], 0
        current.append((event_id, text))
        used += size
    if current:
        groups.append(current)
    return groups


def render(followup_id: int, job: str, lines: list[str], note: str | None = None) -> str:
    head = header(followup_id, job, len(lines))
    return "\n".join([head, note, *lines] if note else [head, *lines])


def batch(tx, job: str, waiting: int | None = MAX_WAITING) -> list[int]:
    """Group every pending event of `job` into follow-ups (inside a write transaction); then
    hold the job to `waiting` undelivered follow-ups (None: no bound). Returns the ids made
    that are still there."""
    dropped = 0
    if waiting:
        # events that could never be delivered: more than `waiting` full follow-ups newer than them
        keep = waiting * MAX_EVENTS
        count = int(tx.scalar("SELECT COUNT(*) FROM monitor_events WHERE job = ? AND followup IS NULL", (job,), 0))
        if count > keep:
            last = tx.scalar(
                "SELECT id FROM monitor_events WHERE job = ? AND followup IS NULL ORDER BY id LIMIT 1 OFFSET ?",
                (job, count - keep - 1),
            )
            tx.execute("DELETE FROM monitor_events WHERE job = ? AND followup IS NULL AND id <= ?", (job, last))
            dropped = count - keep
    events = tx.all(
        "SELECT e.id, e.monitor, e.time, e.line, m.description FROM monitor_events e "
        "LEFT JOIN monitors m ON m.id = e.monitor WHERE e.job = ? AND e.followup IS NULL ORDER BY e.id",
        (job,),
    )
    made: list[int] = []
    stamp = iso(now())
    for group in pack(job, events):
        followup = tx.insert(
            "INSERT INTO followups (job, created, text, events) VALUES (?, ?, '', ?)", (job, stamp, len(group))
        )
        text = render(followup, job, [line for _id, line in group])
        tx.execute("UPDATE followups SET text = ?, bytes = ? WHERE id = ?", (text, utf8_size(text), followup))
        tx.executemany(
            "UPDATE monitor_events SET followup = ? WHERE id = ?", [(followup, event_id) for event_id, _line in group]
        )
        made.append(followup)
    if waiting:
        gone = hold_waiting(tx, job, waiting, dropped)
        made = [f for f in made if f not in gone]
    return made


def hold_waiting(tx, job: str, waiting: int, dropped: int = 0) -> set[int]:
    """Drop the oldest undelivered follow-ups of `job` beyond `waiting`, their events with them;
    the oldest left that no wait printed yet says how many events went (`dropped` more, already
    gone, counted in). Returns the ids dropped."""
    rows_ = tx.all(
        "SELECT id, events, text, printed FROM followups WHERE job = ? AND delivered IS NULL ORDER BY id", (job,)
    )
    gone: set[int] = set()
    excess = len(rows_) - waiting
    for followup, events, text, _printed in rows_[: max(0, excess)]:
        dropped += events + _noted(text)
        tx.execute("DELETE FROM monitor_events WHERE job = ? AND followup = ?", (job, followup))
        tx.execute("DELETE FROM followups WHERE id = ?", (followup,))
        gone.add(followup)
    if dropped:
        left = [r for r in rows_[max(0, excess) :] if not r[3]] or rows_[max(0, excess) :]
        if left:
            followup, _events, text, _printed = left[0]
            head, _, rest = text.partition("\n")
            carried = _noted(text)
            if carried:
                rest = rest.partition("\n")[2]
            note = drop_note(dropped + carried, waiting)
            text = "\n".join(part for part in (head, note, rest) if part)
            tx.execute("UPDATE followups SET text = ?, bytes = ? WHERE id = ?", (text, utf8_size(text), followup))
    return gone


def _noted(text: str) -> int:
    """The events a follow-up's drop note counts (0 without one)."""
    second = text.split("\n", 2)[1] if text.count("\n") else ""
    found = _NOTE.match(second)
    return int(found.group(1).replace(",", "")) if found else 0


# -- delivery ----------------------------------------------------------------------------------


def next_ready(tx, job: str) -> dict | None:
    row = tx.one(
        "SELECT id, text, events, created FROM followups WHERE job = ? AND delivered IS NULL ORDER BY id LIMIT 1",
        (job,),
    )
    return {"id": row[0], "text": row[1], "events": row[2], "created": row[3]} if row else None


def next_unprinted(tx, job: str, reader: str) -> dict | None:
    """The oldest follow-up of `job` not delivered that no wait printed for `reader` yet."""
    row = tx.one(
        "SELECT id, text, events, created FROM followups WHERE job = ? AND delivered IS NULL AND "
        "(printed_to IS NULL OR printed_to != ?) ORDER BY id LIMIT 1",
        (job, reader),
    )
    return {"id": row[0], "text": row[1], "events": row[2], "created": row[3]} if row else None


def undelivered(tx, job: str, limit: int = 50) -> list[dict]:
    """The oldest `limit` follow-ups of `job` not delivered, with who a wait printed them for."""
    rows_ = tx.all(
        "SELECT id, text, events, created, printed, printed_to FROM followups WHERE job = ? AND "
        "delivered IS NULL ORDER BY id LIMIT ?",
        (job, limit),
    )
    return [
        {"id": r[0], "text": r[1], "events": r[2], "created": r[3], "printed": r[4], "printed_to": r[5]} for r in rows_
    ]


def delivered_at(tx, followup: int) -> str | None:
    """When the follow-up was delivered; None when it was not (or is gone)."""
    return tx.scalar("SELECT delivered FROM followups WHERE id = ?", (followup,))


def mark_delivered(tx, followup: int, via: str) -> None:
    tx.execute(
        "UPDATE followups SET delivered = ?, via = ? WHERE id = ? AND delivered IS NULL", (iso(now()), via, followup)
    )


def mark_printed(tx, followup: int, to: str) -> bool:
    """Claim the follow-up for `to` (inside a write transaction); False when another wait (or
    the hook) took it first. Read, then written: no row count needed from the engine."""
    if (
        tx.one(
            "SELECT 1 FROM followups WHERE id = ? AND delivered IS NULL AND (printed_to IS NULL OR printed_to != ?)",
            (followup, to),
        )
        is None
    ):
        return False
    tx.execute("UPDATE followups SET printed = ?, printed_to = ? WHERE id = ?", (iso(now()), to, followup))
    return True
