"""The stops of one attempt, and how its end maps to its outcome (workers/runner.py runs it).

Each stop is a small function of the attempt's state (`Clock`), its limits and `Graces`: the
moment it fires, or None while it cannot. `due(clock, limits, graces)` is the nearest of them,
and the watch stops the worker once the monotonic clock passes it ("drained" is no stop: the
worker exited, and its pipes had DRAIN_AFTER_EXIT to close). `reason(...)` says why, in the
attempt's record. A spend crossed before any final reply fires at once (its moment is -inf);
crossed after it, the worker keeps SPEND_FLOOR seconds (at most its grace window) from its
final reply. Proctor interrupted is the sixth stop; it comes as a signal, not from the clock
(runner.Interrupted), and its row is written over the outcome at the very end
(`runner._interrupted`).

`outcome(...)` is the table of how an attempt ended, by which stop (None: the worker exited
by itself), whether a final reply was seen, and whether a spend was crossed before it: the
attempt's `outcome`, whether it `counts` against the worker, and its `provider_error`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple, Protocol

DRAIN_AFTER_EXIT = 1.0  # seconds the pipes may stay open once the worker exited


class LimitsLike(Protocol):
    idle: float
    grace: float
    wall: float | None
    spend: float | None


@dataclass
class Graces:
    fatal: float  # seconds a worker keeps after a fatal error (runner.FATAL_GRACE)
    spend_floor: float  # seconds it keeps after its final reply, whatever it spent (runner.SPEND_FLOOR)


@dataclass
class Clock:
    """What the stops read: moments on the monotonic clock, and the spend's state."""

    started: float
    last_output: float
    final_at: float | None = None  # the first final reply (the grace window's start)
    idle_applies: bool = True  # False from the final reply on, until the worker carries on
    fatal_at: float | None = None
    exited_at: float | None = None
    spend_crossed: bool = False
    spend_before_final: bool = False  # crossed with no final reply yet: a stop at once


Due = tuple[float, str]  # (the moment, the stop's kind)


def idle(clock: Clock, limits: LimitsLike, graces: Graces) -> Due | None:
    return (clock.last_output + limits.idle, "idle") if clock.idle_applies else None


def grace(clock: Clock, limits: LimitsLike, graces: Graces) -> Due | None:
    return (clock.final_at + limits.grace, "grace") if clock.final_at is not None else None


def wall(clock: Clock, limits: LimitsLike, graces: Graces) -> Due | None:
    return (clock.started + limits.wall, "wall") if limits.wall is not None else None


def fatal(clock: Clock, limits: LimitsLike, graces: Graces) -> Due | None:
    return (clock.fatal_at + graces.fatal, "fatal") if clock.fatal_at is not None else None


def drained(clock: Clock, limits: LimitsLike, graces: Graces) -> Due | None:
    return (clock.exited_at + DRAIN_AFTER_EXIT, "drained") if clock.exited_at is not None else None


def spend(clock: Clock, limits: LimitsLike, graces: Graces) -> Due | None:
    if not clock.spend_crossed:
        return None
    if clock.spend_before_final or clock.final_at is None:
        return (float("-inf"), "spend")  # at once
    # after the final reply: the worker keeps its floor to save its session
    return (clock.final_at + min(graces.spend_floor, limits.grace), "spend")


STOPS: tuple[Callable[[Clock, LimitsLike, Graces], Due | None], ...] = (idle, grace, wall, fatal, drained, spend)


def due(clock: Clock, limits: LimitsLike, graces: Graces) -> Due | None:
    """The nearest stop (ties go to the kind first in alphabetical order), or None."""
    return min((found for stop in STOPS if (found := stop(clock, limits, graces)) is not None), default=None)


def _minutes(seconds: float) -> str:
    value = seconds / 60
    return f"{value:g}" if value != int(value) else str(int(value))


def spend_reason(cost: float, limit: float | None, after_final: bool) -> str:
    said = f"stopped: spend ${cost:.2f} past max_spend_usd ${limit or 0:g}"
    return f"{said}, after the final reply" if after_final else said


def reason(kind: str, clock: Clock, limits: LimitsLike, graces: Graces, cost: float, fatal_reason: str) -> str:
    """Why the stop `kind` fired, as the attempt's record says it."""
    if kind == "spend":
        return spend_reason(cost, limits.spend, not (clock.spend_before_final or clock.final_at is None))
    return {
        "idle": lambda: f"stopped: no output for {_minutes(limits.idle)} minutes",
        "grace": lambda: f"stopped: {limits.grace:g} s after the final reply",
        "wall": lambda: f"stopped: wall clock of {_minutes(limits.wall or 0)} minutes",
        "fatal": lambda: f"stopped: {graces.fatal:g} s after a fatal error ({fatal_reason})",
    }[kind]()


# ------------------------------------------------------------------------------ the outcome table


class Row(NamedTuple):
    outcome: str  # finished | aborted
    counts: bool | None  # against the worker; None: unless it had a provider error
    provider_error: bool | None  # True: the stop is one; None: as the parser's events said


OUTCOMES: dict[str, Row] = {
    "exited, with a final reply": Row("finished", None, None),
    "exited, without one": Row("aborted", None, None),
    "grace": Row("finished", True, None),
    "spend, after the final reply": Row("finished", True, None),
    "spend": Row("aborted", False, None),
    "idle": Row("aborted", False, True),
    "fatal": Row("aborted", False, True),
    "wall": Row("aborted", True, None),
}


def row(stop: str | None, replied: bool, spend_before_final: bool) -> Row:
    """The row of the table for an attempt ended by `stop` (None: the worker exited by itself;
    after `relabel`), with a final reply seen or not."""
    if stop is None:
        return OUTCOMES["exited, with a final reply" if replied else "exited, without one"]
    if stop == "spend" and replied and not spend_before_final:
        return OUTCOMES["spend, after the final reply"]
    return OUTCOMES[stop]


def relabel(stop: tuple[str, str], spend_crossed: bool, cost: float, limit: float | None) -> tuple[str, str]:
    """The grace window ended with the spend crossed meanwhile: the stop is the spend's."""
    if stop[0] == "grace" and spend_crossed:
        return "spend", spend_reason(cost, limit, after_final=True)
    return stop
