"""The key table: every single-valued key of proctor.toml, with its parser, default and doc.

One row per key, so that `proctor config show` can print each effective value and where it came
from, `proctor init`'s template can print each key with its doc (template.py), and a section
whose keys are all here ([jobs], [monitors], [store], [sandbox]) can have its unknown keys
reported. A key added here, in one of those sections, is read, shown and templated with no
other change (a new section is also named in __init__.py's _apply). The tables of many entries
([targets.NAME], [workers.NAME], [guard.rules], [board]) are read by sections.py and workers.py
instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from proctor.config.values import (
    _boolean,
    _commit_body,
    _duration_zero_never,
    _grace_seconds,
    _max_waiting,
    _minutes,
    _monitors_keep,
    _name,
    _optional_count,
    _optional_duration,
    _sandbox_mode,
    _show_count,
    _show_optional_duration,
    _show_stale,
    _show_store_url,
    _store_url,
)
from proctor.timeutil import format_config_duration

MONITORS_KEEP_DEFAULT = 7 * 86400.0


@dataclass(frozen=True)
class Key:
    name: str  # dotted, as in config show: "jobs.max_depth"
    parse: Callable[[Any], Any]  # raises ValueError with the reason
    default: Any
    show: Callable[[Any], str]
    doc: str  # one or two sentences; `proctor init`'s template prints it above the key
    example: str  # a TOML value the template shows (commented out, unless `written`)
    written: bool = False  # the template writes the key, set to `example`, rather than a comment


KEYS: dict[str, Key] = {
    k.name: k
    for k in (
        Key(
            "jobs.max_depth",
            _optional_count,
            None,
            _show_count,
            "levels of jobs below a root job; 0 or unset = unlimited",
            "3",
        ),
        Key(
            "jobs.max_live",
            _optional_count,
            None,
            _show_count,
            "live jobs under one root; 0 or unset = unlimited",
            "12",
        ),
        Key(
            "jobs.default_timeout",
            _optional_duration,
            None,
            _show_optional_duration,
            "deadline stamped on a job forked without --timeout; unset = none",
            '"2h"',
        ),
        Key(
            "jobs.stale_after",
            _duration_zero_never,
            7200.0,
            _show_stale,
            "end jobs nobody took that were untouched this long, and mark taken ones stale; 0 = never",
            '"2h"',
            written=True,
        ),
        Key(
            "jobs.gate",
            _name,
            "ci",
            str,
            "the release gate: the target run once, in the orchestrator's tree, after every job lands; "
            "no job may name it as its check",
            '"ci"',
            written=True,
        ),
        Key(
            "jobs.idle_minutes",
            _minutes,
            None,
            lambda v: "derived" if v is None else f"{v:g}",
            "minutes of silence before a worker is stopped; unset derives it from the targets' timeouts "
            "(1.5 times the longest, at least 15)",
            "30",
        ),
        Key(
            "jobs.grace_seconds",
            _grace_seconds,
            60.0,
            lambda v: f"{v:g}",
            "seconds a worker may take to exit after its final reply (5 to 3600)",
            "60",
        ),
        Key(
            "jobs.commit_body",
            _commit_body,
            "full",
            str,
            "full or minimal: what goes under each passing job's commit subject",
            '"full"',
        ),
        # A week: long enough to look back at what a monitor saw over a weekend, or to debug a run
        # a few days on; short enough that events, runs and follow-ups stay a few megabytes (the
        # per-job and per-monitor caps in monitors/retention.py bound a chatty monitor sooner).
        Key(
            "monitors.keep",
            _monitors_keep,
            MONITORS_KEEP_DEFAULT,
            format_config_duration,
            "how long monitor events, runs and follow-ups are kept (1h to 3650d)",
            '"7d"',
        ),
        Key(
            "monitors.max_waiting",
            _max_waiting,
            10,
            str,
            "undelivered follow-ups a job may have; the oldest past it are dropped, and said so (1 to 1000)",
            "10",
        ),
        # Off by default: under a child job's lease it narrows what every check may write, and a
        # build that writes its output into the checkout (cargo's target/, a coverage file) stops
        # working until its output goes to the cache or a write path; a repository opts in.
        Key(
            "sandbox.mode",
            _sandbox_mode,
            "off",
            str,
            "off, landlock or auto: runs under a child job's lease may write only its write paths "
            "(Landlock; auto = where the kernel offers it; landlock = refuse to run without it)",
            '"auto"',
        ),
        Key(
            "sandbox.workers",
            _boolean,
            False,
            lambda v: "true" if v else "false",
            "true: proctor work starts each worker CLI inside its job's write grant too",
            "false",
        ),
        Key(
            "store.url",
            _store_url,
            None,
            _show_store_url,
            "postgresql://user@host/db: one store for agents on several machines (PROCTOR_STORE_URL wins); "
            "unset = the embedded SQLite store",
            '"postgresql://proctor@db.internal/proctor"',
        ),
    )
}
