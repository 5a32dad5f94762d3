"""The tables of proctor.toml that are not rows of KEYS: [targets.NAME], [guard] and [board].

Each `_apply_<section>` reads its table into the Config, and reports by name what it could not
use, keeping the default in its place: a bad table never stops a command. The board's lookups
(which column a job is in) live beside the reading of [board], which decides the columns.
[workers] has a module of its own (workers.py): it is the one section that reads another
package's files.
"""

from __future__ import annotations

import os
from typing import Any

from proctor.config.model import CONFIG_NAME, Config, Setting, Target
from proctor.config.values import _TARGET_NAME, _render_raw
from proctor.jobrecord import STATES
from proctor.timeutil import format_config_duration, parse_duration

DEFAULT_TARGET_TIMEOUT = 3600.0
RULE_DECISIONS = ("off", "advise", "deny")  # in order of strictness


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
