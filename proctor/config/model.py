"""What a read of proctor.toml gives: the Config, its Settings, Targets and Workers.

Plain records and the few defaults they are built with, so every other module of the package
(and every reader of the configuration) shares one definition of them; the parsing is elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proctor.timeutil import format_config_duration

CONFIG_NAME = "proctor.toml"
DEFAULT_BOARD = (
    ("Declared", ("declared",), False),
    ("Running", ("running",), True),
    ("Returned", ("exited",), True),
    ("Done", ("pass", "fail", "no_return"), False),
)
IDLE_FLOOR_MINUTES = 15.0
DEFAULT_WALL_MINUTES = 60.0


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
