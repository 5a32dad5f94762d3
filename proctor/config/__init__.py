"""proctor.toml: the one reader of the workspace's configuration.

Every key proctor reads is declared in KEYS with its type, range and default, so
`proctor config show` can print each effective value and where it came from, and so a bad
value is reported by name with the default kept instead. A bad value never stops a command:
the worst a typo in proctor.toml can do is leave a default in place and say so.

This module reads the file and hands each part to the module that owns it; every name a
caller uses is importable from here (`from proctor.config import Worker`), wherever it lives:
- model.py: what a read gives (Config, Setting, Target, Worker) and their defaults;
- values.py: the parsers of one raw value (durations, counts, ranges, `Clamped`);
- keys.py: the key table KEYS, one row per single-valued key;
- sections.py: [targets.NAME], [guard] and [board], and the board's column lookups;
- workers.py: [workers], and the executors' names read from proctor/workers/executors/;
- template.py: the commented proctor.toml `proctor init` writes, generated from the above.
"""

from __future__ import annotations

import os

from proctor.config.keys import KEYS, MONITORS_KEEP_DEFAULT, Key
from proctor.config.model import (
    CONFIG_NAME,
    DEFAULT_BOARD,
    DEFAULT_WALL_MINUTES,
    IDLE_FLOOR_MINUTES,
    Config,
    Setting,
    Target,
    Worker,
)
from proctor.config.sections import (
    DEFAULT_TARGET_TIMEOUT,
    RULE_DECISIONS,
    _apply_board,
    _apply_guard,
    _apply_targets,
    column_of,
    column_of_job,
)
from proctor.config.template import template
from proctor.config.values import GRACE_RANGE, MAX_WAITING_RANGE, MONITORS_KEEP_RANGE, Clamped, _render_raw
from proctor.config.workers import DOLLARS, EXECUTORS, TOKENS_ONLY, _apply_workers
from proctor.jobrecord import STATES

__all__ = [
    "CONFIG_NAME",
    "DEFAULT_BOARD",
    "DEFAULT_TARGET_TIMEOUT",
    "DEFAULT_WALL_MINUTES",
    "DOLLARS",
    "EXECUTORS",
    "GRACE_RANGE",
    "IDLE_FLOOR_MINUTES",
    "KEYS",
    "MAX_WAITING_RANGE",
    "MONITORS_KEEP_DEFAULT",
    "MONITORS_KEEP_RANGE",
    "RESERVED_SECTIONS",
    "RULE_DECISIONS",
    "STATES",
    "TEMPLATE",
    "TOKENS_ONLY",
    "Clamped",
    "Config",
    "Key",
    "Setting",
    "Target",
    "Worker",
    "column_of",
    "column_of_job",
    "load",
    "parse",
    "template",
]

# Sections later capabilities read; their keys are not judged by this version.
RESERVED_SECTIONS: tuple[str, ...] = ()
TEMPLATE = template()


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
