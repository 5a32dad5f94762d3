"""[workers]: the agent CLIs `proctor work` may run, their limits, the ladder and the attempts.

Each [workers.NAME] table becomes a Worker, its limits shown as settings so `config show` says
what bounds it and where that came from; a worker that cannot run (no such executor, a command
executor with no command) is left out and said so, and a limit that cannot be kept (a bad
number, a dollar limit on a CLI that reports tokens) keeps its default and is said so.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Any

from proctor.config.model import CONFIG_NAME, DEFAULT_WALL_MINUTES, Config, Setting, Worker
from proctor.config.values import _describe, _minutes, _positive, _render_raw, _show_count

# An executor module's own line saying what its CLI reports of an attempt's spend: "usd" (a cost
# in dollars, which max_spend_usd bounds), "tokens" (never dollars) or "none" (nothing).
_SPEND = re.compile(r'^SPEND = "(usd|tokens|none)"', re.MULTILINE)


def _executors() -> dict[str, str | None]:
    """The executors, one module each in proctor/workers/executors/ (adding one is adding its
    module), with the SPEND each declares (None when it declares none). Read from the files, not
    imported: config is core and may not import the workers package, and the guard's settings
    reach this module on the hook's path, which must not load an agent CLI's parser."""
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "workers", "executors")
    spends: dict[str, str | None] = {}
    for name in sorted(os.listdir(here)):
        if name.endswith(".py") and name[:1] != "_":
            with open(os.path.join(here, name), encoding="utf-8") as handle:
                declared = _SPEND.search(handle.read())
            spends[name[:-3]] = declared.group(1) if declared else None
    return spends


SPENDS = _executors()
EXECUTORS = tuple(SPENDS)
# These CLIs report tokens, never dollars: a dollar limit on them could never fire.
TOKENS_ONLY = tuple(name for name, spend in SPENDS.items() if spend == "tokens")
# Only these report dollars; on any other executor (tokens, nothing) max_spend_usd is refused.
DOLLARS = tuple(name for name, spend in SPENDS.items() if spend == "usd")


def _no_dollars(executor: str) -> str | None:
    """Why a dollar limit could never fire on this executor's worker, or None when it can."""
    if executor in DOLLARS:
        return None
    return "reports tokens, not dollars" if executor in TOKENS_ONLY else "reports no spend"


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
        if spend is not None and _no_dollars(executor):
            rejected["max_spend_usd"] = (
                f"{CONFIG_NAME}: {where} max_spend_usd cannot be enforced on a {executor} "
                f"worker ({executor} {_no_dollars(executor)}); no spend limit, "
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
    no_dollars = _no_dollars(worker.executor)
    shown = {
        "executor": worker.executor,
        "command": shlex.join(worker.command) if worker.command else f"{worker.executor} (the executor's default)",
        "model": worker.model or "the CLI's default",
        "wall_minutes": f"{worker.wall_minutes:g}",
        "max_spend_usd": (
            f"not enforceable: {worker.executor} {no_dollars.split(',')[0]}"
            if no_dollars
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
