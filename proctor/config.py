"""proctor.toml: the one reader of the workspace's configuration.

Every key proctor reads is declared in KEYS with its type, range and default, so
`proctor config show` can print each effective value and where it came from, and so a bad
value is reported by name with the default kept instead. A bad value never stops a command:
the worst a typo in proctor.toml can do is leave a default in place and say so.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Callable

from proctor.jobrecord import STATES
from proctor.timeutil import format_config_duration, parse_duration

CONFIG_NAME = "proctor.toml"
DEFAULT_TARGET_TIMEOUT = 3600.0

# Sections later capabilities read; their keys are not judged by this version.
RESERVED_SECTIONS: tuple[str, ...] = ()
# [monitors] keep: how long monitor events, runs and follow-ups are kept (monitors/retention.py)
MONITORS_KEEP_RANGE = (3600.0, 3650 * 86400.0)
MONITORS_KEEP_DEFAULT = 7 * 86400.0
MAX_WAITING_RANGE = (1, 1000)
DEFAULT_BOARD = (
    ("Declared", ("declared",), False),
    ("Running", ("running",), True),
    ("Returned", ("exited",), True),
    ("Done", ("pass", "fail", "no_return"), False),
)
EXECUTORS = ("claude", "opencode", "codex", "gemini", "command")
GRACE_RANGE = (5.0, 3600.0)
IDLE_FLOOR_MINUTES = 15.0
DEFAULT_WALL_MINUTES = 60.0
# These CLIs report tokens, never dollars: a dollar limit on them could never fire.
TOKENS_ONLY = ("codex", "gemini")
RULE_DECISIONS = ("off", "advise", "deny")  # in order of strictness

_TARGET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Key:
    name: str  # dotted, as in config show: "jobs.max_depth"
    parse: Callable[[Any], Any]  # raises ValueError with the reason
    default: Any
    show: Callable[[Any], str]
    doc: str  # one or two sentences; `proctor init`'s template prints it above the key
    example: str  # a TOML value the template shows (commented out, unless `written`)
    written: bool = False  # the template writes the key, set to `example`, rather than a comment


@dataclass
class Setting:
    key: str
    value: Any
    source: str  # "default" or the file it was read from
    shown: str
    problem: str | None = None


@dataclass(frozen=True)
class Target:
    name: str
    command: str
    timeout: float
    cwd: str | None  # relative to the repository root; None is the root


@dataclass
class Config:
    path: str
    exists: bool
    settings: dict[str, Setting] = field(default_factory=dict)
    targets: dict[str, Target] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    # [guard.rules]: rule name -> "off" | "advise" | "deny", as written (names are checked
    # against the rules by the guard, which owns them)
    guard_rules: dict[str, str] = field(default_factory=dict)
    # [guard.<rule>] tables as written; each rule declares and checks its own options
    guard_options: dict[str, dict] = field(default_factory=dict)
    workers: dict[str, "Worker"] = field(default_factory=dict)
    # [board]: (column name, the job states it holds, active?) in order
    board: list[tuple[str, tuple[str, ...], bool]] = field(default_factory=lambda: list(DEFAULT_BOARD))
    ladder: list[str] = field(default_factory=list)
    attempts: int = 1

    @property
    def idle_limit_seconds(self) -> float:
        """jobs.idle_minutes, else the larger of 15 minutes and 1.5 times the longest target
        timeout: a worker running the slowest check prints nothing until it ends."""
        configured = self.settings["jobs.idle_minutes"].value
        if configured is not None:
            return configured * 60
        longest = max((t.timeout for t in self.targets.values()), default=0.0)
        return max(IDLE_FLOOR_MINUTES * 60, 1.5 * longest)

    @property
    def idle_limit_source(self) -> str:
        """Where idle_limit_seconds comes from, said so a person can tell which setting to change."""
        if self.settings["jobs.idle_minutes"].value is not None:
            return f"[jobs] idle_minutes in {CONFIG_NAME}"
        longest = max(self.targets.values(), key=lambda t: t.timeout, default=None)
        if longest is None:
            return f"derived: the {IDLE_FLOOR_MINUTES:g}-minute floor; no target is defined"
        timeout = format_config_duration(longest.timeout)
        if 1.5 * longest.timeout > IDLE_FLOOR_MINUTES * 60:
            return f"derived: 1.5 x [targets.{longest.name}] timeout {timeout}"
        return f"derived: the {IDLE_FLOOR_MINUTES:g}-minute floor; longest target timeout {timeout}"

    def __getitem__(self, key: str) -> Any:
        return self.settings[key].value

    @property
    def gate(self) -> str:
        return self.settings["jobs.gate"].value


def _sandbox_mode(value: Any) -> str:
    """[sandbox] mode: off, landlock or auto."""
    if value not in ("off", "landlock", "auto"):
        raise ValueError(f'expected "off", "landlock" or "auto", got {_describe(value)}')
    return value


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {_describe(value)}")
    return value


def _store_url(value: Any) -> str | None:
    """[store] url: a PostgreSQL URL; the embedded SQLite store when unset."""
    if not isinstance(value, str):
        raise ValueError(f"expected a postgresql://... URL, got {_describe(value)}")
    if not value.strip():
        return None
    if value.split(":", 1)[0] not in ("postgresql", "postgres"):
        raise ValueError("expected a postgresql://... URL (unset it for the embedded store)")
    return value


def _show_store_url(value: str | None) -> str:
    if value is None:
        return "unset (the embedded SQLite store)"
    from proctor.store import redact

    return redact(value)


def _optional_count(value: Any) -> int | None:
    """An integer >= 0 where 0 means unlimited; stored as None for unlimited."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a whole number, got {_describe(value)}")
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError(f"expected a whole number, got {value}")
        if value != int(value):
            raise ValueError(f"expected a whole number, got {value}")
        value = int(value)
    if value < 0:
        raise ValueError("must be 0 (unlimited) or more")
    return value or None


class Clamped(ValueError):
    """A value out of its range, brought back into it (and reported)."""

    def __init__(self, message: str, value: float) -> None:
        super().__init__(message)
        self.value = value


def _duration(value: Any, unit_seconds: float) -> float:
    """Seconds, more than 0, from `20m`, `90s`, `1h30m` or a bare number in the key's unit."""
    seconds = parse_duration(value, unit_seconds)
    if seconds <= 0:
        raise ValueError("must be more than 0")
    return seconds


def _positive(value: Any, unit: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number of {unit}, got {_describe(value)}")
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"expected a finite number of {unit}, got {value}")
    if value <= 0:
        raise ValueError("must be more than 0")
    return float(value)


def _minutes(value: Any) -> float:
    """Minutes, fractions allowed, from a duration or a bare number of minutes."""
    return _duration(value, 60) / 60


def _grace_seconds(value: Any) -> float:
    seconds = _duration(value, 1)
    low, high = GRACE_RANGE
    if not low <= seconds <= high:
        # a window under the floor would kill Claude before it saves its session file
        raise Clamped(f"clamped to {low:g}..{high:g} seconds", min(high, max(low, seconds)))
    return seconds


def _monitors_keep(value: Any) -> float:
    seconds = _duration(value, 1)
    low, high = MONITORS_KEEP_RANGE
    if not low <= seconds <= high:
        # under an hour a follow-up could go before its agent is back; past ten years is no bound
        raise Clamped(
            f"clamped to {format_config_duration(low)}..{format_config_duration(high)}", min(high, max(low, seconds))
        )
    return seconds


def _max_waiting(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected a whole number, got {_describe(value)}")
    low, high = MAX_WAITING_RANGE
    if not low <= value <= high:
        raise Clamped(f"clamped to {low}..{high}", min(high, max(low, value)))
    return value


def _commit_body(value: Any) -> str:
    if value not in ("full", "minimal"):
        raise ValueError(f"expected full or minimal, got {_describe(value)}")
    return value


def _optional_duration(value: Any) -> float | None:
    seconds = parse_duration(value)
    return seconds or None


def _duration_zero_never(value: Any) -> float:
    return parse_duration(value)


def _name(value: Any) -> str:
    if not isinstance(value, str) or not _TARGET_NAME.match(value):
        raise ValueError(f"expected a target name such as ci, got {_describe(value)}")
    return value


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return str(value)
    if isinstance(value, (dict, list)):
        return "a table" if isinstance(value, dict) else "an array"
    return repr(value)


def _show_count(value: int | None) -> str:
    return "unlimited" if value is None else str(value)


def _show_optional_duration(value: float | None) -> str:
    return format_config_duration(value)


def _show_stale(value: float) -> str:
    return "0 (never)" if value == 0 else format_config_duration(value)


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


@dataclass(frozen=True)
class Worker:
    name: str
    executor: str
    command: tuple[str, ...] | None  # argv; None runs the executor's own CLI
    model: str | None
    max_spend_usd: float | None
    wall_minutes: float  # always bounded: DEFAULT_WALL_MINUTES unless set
    # at most this many workers of this executor at once on the machine; None = unlimited
    slots: int | None = None


def load(root: str) -> Config:
    """Read `<root>/proctor.toml`. Never raises on bad content: problems are collected."""
    path = os.path.join(root, CONFIG_NAME)
    try:
        with open(path, "rb") as handle:
            raw_bytes = handle.read()
        exists = True
    except FileNotFoundError:
        raw_bytes, exists = b"", False
    except OSError as exc:
        raw_bytes, exists = b"", True
        config = Config(path, exists)
        config.problems.append(f"{CONFIG_NAME}: cannot be read ({exc.strerror}); every default is kept")
        _apply({}, config)
        return config
    return parse(raw_bytes, path, exists)


def parse(raw_bytes: bytes, path: str, exists: bool = True) -> Config:
    import tomllib

    config = Config(path, exists)
    data: dict = {}
    if raw_bytes:
        try:
            data = tomllib.loads(raw_bytes.decode("utf-8"))
        except UnicodeDecodeError:
            config.problems.append(f"{CONFIG_NAME}: not UTF-8 text; every default is kept")
        except tomllib.TOMLDecodeError as exc:
            config.problems.append(f"{CONFIG_NAME}: cannot be parsed ({exc}); every default is kept")
    _apply(data, config)
    return config


def _keyed_table(data: dict, section: str, fallback: str, config: Config) -> dict:
    """A section whose keys are all in KEYS: the table, its unknown keys reported (a section that
    is no table is reported, and read as empty)."""
    table = data.get(section, {})
    if not isinstance(table, dict):
        config.problems.append(f"{CONFIG_NAME}: {section} must be a table ([{section}]); {fallback}")
        return {}
    for name in table:
        if f"{section}.{name}" not in KEYS:
            config.problems.append(f"{CONFIG_NAME}: unknown key {name} in [{section}]; ignored")
    return table


def _apply(data: dict, config: Config) -> None:
    source = CONFIG_NAME
    for section in data:
        if (
            section in ("jobs", "targets", "guard", "workers", "board", "monitors", "store", "sandbox")
            or section in RESERVED_SECTIONS
        ):
            continue
        config.problems.append(f"{CONFIG_NAME}: unknown section [{section}]; ignored")
    jobs = _keyed_table(data, "jobs", "every [jobs] default is kept", config)
    monitors = _keyed_table(data, "monitors", "every [monitors] default is kept", config)
    store = _keyed_table(data, "store", "the embedded store is used", config)
    sandbox = _keyed_table(data, "sandbox", "the sandbox stays off", config)
    tables = {"jobs": jobs, "monitors": monitors, "store": store, "sandbox": sandbox}
    for key in KEYS.values():
        section, name = key.name.split(".", 1)
        table = tables.get(section, {})
        if name not in table:
            config.settings[key.name] = Setting(key.name, key.default, "default", key.show(key.default))
            continue
        raw = table[name]
        try:
            value = key.parse(raw)
        except Clamped as exc:
            problem = (
                f"{CONFIG_NAME}: [{section}] {name} = {_render_raw(raw)} is out of range; {exc} ({key.show(exc.value)})"
            )
            config.problems.append(problem)
            config.settings[key.name] = Setting(key.name, exc.value, source, key.show(exc.value), problem)
            continue
        except ValueError as exc:
            problem = (
                f"{CONFIG_NAME}: [{section}] {name} = {_render_raw(raw)} is invalid ({exc}); "
                f"using the default ({key.show(key.default)})"
            )
            config.problems.append(problem)
            config.settings[key.name] = Setting(key.name, key.default, "default", key.show(key.default), problem)
            continue
        config.settings[key.name] = Setting(key.name, value, source, key.show(value))
    _apply_targets(data.get("targets", {}), config)
    idle = config.settings["jobs.idle_minutes"]
    if idle.value is None:
        idle.shown = f"{config.idle_limit_seconds / 60:g} ({config.idle_limit_source})"
    _apply_guard(data.get("guard", {}), config)
    _apply_workers(data.get("workers", {}), config)
    _apply_board(data.get("board"), config)


def _apply_board(board: Any, config: Config) -> None:
    """[board] columns = [{name = "Running", states = ["running"], active = true}, ...]"""
    if board is None:
        return
    columns = board.get("columns") if isinstance(board, dict) else None
    if not isinstance(columns, list) or not columns:
        config.problems.append(
            f"{CONFIG_NAME}: [board] needs columns = [{{name, states, active}}, ...]; using the default board"
        )
        return
    parsed = []
    seen: dict[str, str] = {}  # state -> the column it is in
    for index, column in enumerate(columns):
        if not isinstance(column, dict) or not isinstance(column.get("name"), str) or not column["name"].strip():
            config.problems.append(f"{CONFIG_NAME}: [board] column {index + 1} needs a name; using the default board")
            return
        states = column.get("states")
        if not isinstance(states, list) or not states or any(s not in STATES for s in states):
            config.problems.append(
                f"{CONFIG_NAME}: [board] column {column['name']!r} states must be a list of "
                f"{', '.join(STATES)}; using the default board"
            )
            return
        for state in states:
            if state in seen:
                config.problems.append(
                    f"{CONFIG_NAME}: [board] state {state} is in columns {seen[state]!r} and "
                    f"{column['name']!r}; using the default board"
                )
                return
            seen[state] = column["name"]
        active = column.get("active", False)
        if not isinstance(active, bool):
            config.problems.append(
                f"{CONFIG_NAME}: [board] column {column['name']!r} active must be true or false; "
                f"using the default board"
            )
            return
        parsed.append((column["name"], tuple(states), active))
    config.board = parsed


def column_of(config: "Config", state: str) -> tuple[str, bool] | None:
    """(column name, active?) for a job in `state`; None when no column holds it."""
    for name, states, active in config.board:
        if state in states:
            return name, active
    return None


def column_of_job(config: "Config", job: dict) -> tuple[str, bool] | None:
    """(column name, active?) for a job on the board; None when it is off the board (archived,
    trashed, or in a state no column holds). A job's column follows its state unless a person
    moved its card (`moved`, jobs/take.move): the move holds while the job stays in the state it
    was moved in, and a column since removed from [board] counts as no move."""
    if job.get("archived") or job.get("trashed"):
        return None
    moved = job.get("moved")
    if isinstance(moved, dict) and moved.get("state") == job.get("state"):
        for name, _states, active in config.board:
            if name == moved.get("column"):
                return name, active
    return column_of(config, job.get("state", ""))


def _apply_workers(workers: Any, config: Config) -> None:
    if not isinstance(workers, dict):
        config.problems.append(f"{CONFIG_NAME}: workers must be a table ([workers.NAME]); no worker is defined")
        return
    for name, table in workers.items():
        if name in ("ladder", "attempts"):
            continue
        where = f"[workers.{name}]"
        if not isinstance(table, dict):
            config.problems.append(f"{CONFIG_NAME}: {where} must be a table with an executor; ignored")
            continue
        for extra in sorted(set(table) - {"executor", "command", "model", "max_spend_usd", "wall_minutes", "slots"}):
            config.problems.append(f"{CONFIG_NAME}: unknown key {extra} in {where}; ignored")
        executor = table.get("executor")
        if executor not in EXECUTORS:
            config.problems.append(
                f"{CONFIG_NAME}: {where} executor = {_render_raw(executor)} is invalid "
                f"(expected {', '.join(EXECUTORS)}); worker ignored"
            )
            continue
        command = table.get("command")
        if command is not None and not (
            isinstance(command, list) and command and all(isinstance(c, str) and c for c in command)
        ):
            config.problems.append(
                f"{CONFIG_NAME}: {where} command must be an argv list of strings "
                f'(command = ["claude"]); using the executor\'s own CLI'
            )
            command = None
        if executor == "command" and command is None:
            config.problems.append(f"{CONFIG_NAME}: {where} with executor command needs a command; worker ignored")
            continue
        model = table.get("model")
        if model is not None and not isinstance(model, str):
            config.problems.append(f"{CONFIG_NAME}: {where} model must be a string; using the CLI's default")
            model = None
        rejected: dict[str, str] = {}  # key -> the problem that kept its default

        def reject(key: str, reason: str, kept: str) -> None:
            rejected[key] = f"{CONFIG_NAME}: {where} {key} = {_render_raw(table[key])} is invalid ({reason}); {kept}"
            config.problems.append(rejected[key])

        spend = None
        if "max_spend_usd" in table:
            try:
                spend = _positive(table["max_spend_usd"], "dollars")
            except ValueError as exc:
                reject("max_spend_usd", str(exc), "using the default (none)")
        if executor in TOKENS_ONLY and spend is not None:
            rejected["max_spend_usd"] = (
                f"{CONFIG_NAME}: {where} max_spend_usd cannot be enforced on a {executor} "
                f"worker ({executor} reports tokens, not dollars); no spend limit, "
                f"bound it with wall_minutes"
            )
            config.problems.append(rejected["max_spend_usd"])
            spend = None
        wall = DEFAULT_WALL_MINUTES
        if "wall_minutes" in table:
            try:
                wall = _minutes(table["wall_minutes"])
            except ValueError as exc:
                reject("wall_minutes", str(exc), f"using the default ({DEFAULT_WALL_MINUTES:g})")
        slots = table.get("slots")
        if slots is not None and (isinstance(slots, bool) or not isinstance(slots, int) or slots < 1):
            reject(
                "slots", f"expected a whole number, 1 or more, got {_describe(slots)}", "using the default (unlimited)"
            )
            slots = None
        worker = Worker(name, executor, tuple(command) if command else None, model, spend, wall, slots)
        config.workers[name] = worker
        _show_worker(config, worker, set(table), rejected)
    ladder = workers.get("ladder")
    if ladder is not None:
        if not isinstance(ladder, list) or not all(isinstance(n, str) for n in ladder):
            config.problems.append(
                f"{CONFIG_NAME}: [workers] ladder must be a list of worker names; using "
                f"the workers in the order they are defined"
            )
        else:
            unknown = [n for n in ladder if n not in config.workers]
            for name in unknown:
                config.problems.append(f"{CONFIG_NAME}: [workers] ladder names {name}, which is not a worker; left out")
            config.ladder = [n for n in ladder if n in config.workers]
    if not config.ladder:
        config.ladder = list(config.workers)
    attempts = workers.get("attempts")
    if attempts is not None:
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1 or attempts > 100:
            config.problems.append(
                f"{CONFIG_NAME}: [workers] attempts = {_render_raw(attempts)} is invalid "
                f"(expected a whole number from 1 to 100); using the default (1)"
            )
        else:
            config.attempts = attempts
    config.settings["workers.ladder"] = Setting(
        "workers.ladder",
        list(config.ladder),
        CONFIG_NAME if ladder is not None else "default",
        ", ".join(config.ladder) or "(no workers)",
    )
    config.settings["workers.attempts"] = Setting(
        "workers.attempts", config.attempts, CONFIG_NAME if attempts is not None else "default", str(config.attempts)
    )


def _show_worker(config: Config, worker: Worker, given: set[str], rejected: dict[str, str]) -> None:
    """A worker's limits as settings, so `config show` says what bounds it and where that came from."""
    tokens_only = worker.executor in TOKENS_ONLY
    shown = {
        "executor": worker.executor,
        "command": shlex.join(worker.command) if worker.command else f"{worker.executor} (the executor's default)",
        "model": worker.model or "the CLI's default",
        "wall_minutes": f"{worker.wall_minutes:g}",
        "max_spend_usd": (
            f"not enforceable: {worker.executor} reports tokens"
            if tokens_only
            else "none"
            if worker.max_spend_usd is None
            else f"{worker.max_spend_usd:g}"
        ),
        "slots": _show_count(worker.slots),
    }
    for key, text in shown.items():
        value = getattr(worker, key)
        value = list(value) if isinstance(value, tuple) else value
        from_file = key in given and key not in rejected and value is not None
        name = f"workers.{worker.name}.{key}"
        config.settings[name] = Setting(name, value, CONFIG_NAME if from_file else "default", text, rejected.get(key))


def _apply_guard(guard: Any, config: Config) -> None:
    if not isinstance(guard, dict):
        config.problems.append(f"{CONFIG_NAME}: guard must be a table ([guard.rules]); ignored")
        return
    for name, table in guard.items():
        if name == "rules":
            continue
        if isinstance(table, dict):
            config.guard_options[name] = dict(table)
        else:
            config.problems.append(f"{CONFIG_NAME}: [guard] {name} must be a table ([guard.{name}]); ignored")
    rules = guard.get("rules", {})
    if not isinstance(rules, dict):
        config.problems.append(f"{CONFIG_NAME}: [guard] rules must be a table ([guard.rules]); ignored")
        return
    for name, value in rules.items():
        if value not in RULE_DECISIONS:
            config.problems.append(
                f"{CONFIG_NAME}: [guard.rules] {name} = {_render_raw(value)} is invalid (expected "
                f"deny, advise or off); using the rule's default"
            )
            continue
        config.guard_rules[name] = value
        key = f"guard.rules.{name}"
        config.settings[key] = Setting(key, value, CONFIG_NAME, value)


def _render_raw(raw: Any) -> str:
    if isinstance(raw, bool):
        return str(raw).lower()
    if isinstance(raw, str):
        return f'"{raw}"'
    if isinstance(raw, dict):
        return "{...}"
    return repr(raw)


def _apply_targets(targets: Any, config: Config) -> None:
    if not isinstance(targets, dict):
        config.problems.append(f"{CONFIG_NAME}: targets must be tables ([targets.NAME]); no target is defined")
        return
    for name, table in targets.items():
        where = f"[targets.{name}]"
        if not _TARGET_NAME.match(name):
            config.problems.append(f"{CONFIG_NAME}: {where}: a target name is letters, digits, _ . -; target ignored")
            continue
        if not isinstance(table, dict):
            config.problems.append(f"{CONFIG_NAME}: {where} must be a table with a command; target ignored")
            continue
        for extra in table:
            if extra not in ("command", "timeout", "cwd"):
                config.problems.append(f"{CONFIG_NAME}: unknown key {extra} in {where}; ignored")
        command = table.get("command")
        if not isinstance(command, str) or not command.strip():
            config.problems.append(
                f"{CONFIG_NAME}: {where} command must be a non-empty string (the shell command to run); target ignored"
            )
            continue
        prefix = f"targets.{name}"
        config.settings[f"{prefix}.command"] = Setting(f"{prefix}.command", command, CONFIG_NAME, command)
        timeout = DEFAULT_TARGET_TIMEOUT
        shown_source = "default"
        if "timeout" in table:
            try:
                timeout = parse_duration(table["timeout"])
                if timeout <= 0:
                    raise ValueError("must be more than 0")
                shown_source = CONFIG_NAME
            except ValueError as exc:
                timeout = DEFAULT_TARGET_TIMEOUT
                problem = (
                    f"{CONFIG_NAME}: {where} timeout = {_render_raw(table['timeout'])} is invalid ({exc}); "
                    f"using the default ({format_config_duration(DEFAULT_TARGET_TIMEOUT)})"
                )
                config.problems.append(problem)
        config.settings[f"{prefix}.timeout"] = Setting(
            f"{prefix}.timeout", timeout, shown_source, format_config_duration(timeout)
        )
        cwd = None
        if "cwd" in table:
            raw_cwd = table["cwd"]
            if (
                isinstance(raw_cwd, str)
                and raw_cwd.strip()
                and not os.path.isabs(raw_cwd)
                and ".." not in raw_cwd.replace("\\", "/").split("/")
            ):
                cwd = os.path.normpath(raw_cwd)
                cwd = None if cwd == "." else cwd
            else:
                config.problems.append(
                    f"{CONFIG_NAME}: {where} cwd = {_render_raw(raw_cwd)} must be a path inside the "
                    f"repository, relative to its root; using the repository root"
                )
        if cwd is not None:
            config.settings[f"{prefix}.cwd"] = Setting(f"{prefix}.cwd", cwd, CONFIG_NAME, cwd)
        config.targets[name] = Target(name, command, timeout, cwd)


# What `proctor init` writes: a short note per section, then every key of KEYS with its doc
# and an example, so a key added to the table is in the template too (tests/test_config.py
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
# Dollars one attempt may spend (not for codex or gemini, which report tokens).
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


TEMPLATE = template()
