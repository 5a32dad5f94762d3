"""The guard's view of proctor.toml, cached as JSON keyed by the file's stat and HEAD.

Parsing TOML costs the hook more than the rest of its work (tomllib alone is ~11 ms), so
the effective settings are computed once per change of the working tree's proctor.toml or
of HEAD, and read back as JSON after that. A rule's decision is the STRICTER of the working
tree's file and HEAD's: a tightening applies at once, a loosening only once committed.
"""

from __future__ import annotations

import json
import os
import zlib

from proctor.paths import Checkout, head_revision, repo_cache_dir, write_atomic

CONFIG_NAME = "proctor.toml"
STRICTNESS = {"off": 0, "advise": 1, "deny": 2}
CACHE_VERSION = 2


def _stat_key(path: str) -> list | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_mtime_ns, info.st_size, info.st_ino]


def load(checkout: Checkout) -> dict:
    """`{"rules": {name: decision}, "gate": ..., "targets": {name: command}, "problems": [...]}`."""
    config_path = os.path.join(checkout.root, CONFIG_NAME)
    key = {"v": CACHE_VERSION, "toml": _stat_key(config_path), "head": head_revision(checkout),
           "root": checkout.root}
    cache_path = os.path.join(
        repo_cache_dir(checkout),
        f"guard-config-{zlib.crc32(checkout.root.encode('utf-8', 'surrogateescape')):08x}.json")
    try:
        with open(cache_path, encoding="utf-8") as handle:
            cached = json.load(handle)
        if cached.get("key") == key:
            return cached["settings"]
    except (OSError, ValueError, AttributeError):
        pass
    settings = compute(checkout, key["head"])
    try:
        write_atomic(cache_path, json.dumps({"key": key, "settings": settings}))
    except OSError:
        pass  # an unwritable cache costs the next call a parse, nothing more
    return settings


def compute(checkout: Checkout, head: str | None) -> dict:
    """Parse both configs (slow path: imports tomllib and runs git once)."""
    from proctor import config as config_mod
    from proctor.guard.rules import ALL

    worktree = config_mod.load(checkout.root)
    committed = config_mod.parse(_committed_config(checkout.root) if head else b"", "HEAD:" + CONFIG_NAME)
    problems = list(worktree.problems)
    known = {rule.NAME for rule in ALL}
    for name in sorted(set(worktree.guard_rules) - known):
        problems.append(f"{CONFIG_NAME}: [guard.rules] {name} is not a rule (proctor describe rules lists "
                        f"them); ignored")
    rules = {}
    for rule in ALL:
        mine = worktree.guard_rules.get(rule.NAME, rule.DEFAULT)
        theirs = committed.guard_rules.get(rule.NAME, rule.DEFAULT)
        rules[rule.NAME] = mine if STRICTNESS[mine] >= STRICTNESS[theirs] else theirs
    options, option_problems = rule_options(worktree.guard_options)
    problems.extend(option_problems)
    return {
        "rules": rules,
        "options": options,
        "gate": worktree.gate,
        "targets": {name: target.command for name, target in worktree.targets.items()},
        "problems": problems,
    }


def _committed_config(root: str) -> bytes:
    from proctor.vcs import git

    proc = git.run(root, "show", f"HEAD:{CONFIG_NAME}", check=False)
    return proc.stdout if proc.returncode == 0 else b""


def rule_options(tables: dict[str, dict]) -> tuple[dict[str, dict], list[str]]:
    """Each rule's options from its [guard.<rule>] table: a bad value (not a positive, finite
    number, TOML's inf and nan included) is reported and its default kept."""
    import math

    from proctor.guard.rules import ALL

    known = {rule.NAME: rule for rule in ALL}
    options: dict[str, dict] = {}
    problems: list[str] = []
    for name in sorted(set(tables) - set(known)):
        problems.append(f"{CONFIG_NAME}: [guard.{name}] is not a rule's table (proctor describe rules lists them); ignored")
    for rule in ALL:
        declared = getattr(rule, "OPTIONS", {})
        table = tables.get(rule.NAME, {})
        values = dict(declared)
        for key, raw in table.items():
            if key not in declared:
                problems.append(f"{CONFIG_NAME}: unknown key {key} in [guard.{rule.NAME}]; ignored")
                continue
            good = isinstance(raw, (int, float)) and not isinstance(raw, bool) and math.isfinite(raw) and raw > 0
            if not good:
                problems.append(f"{CONFIG_NAME}: [guard.{rule.NAME}] {key} = {raw!r} is invalid (expected a "
                                f"positive number of minutes); using the default ({declared[key]:g})")
                continue
            values[key] = float(raw)
        check = getattr(rule, "check_options", None)
        if check is not None:
            complaint = check(values)
            if complaint:
                problems.append(f"{CONFIG_NAME}: [guard.{rule.NAME}] {complaint}; using the defaults "
                                f"({', '.join(f'{k} = {v:g}' for k, v in declared.items())})")
                values = dict(declared)
        if declared:
            options[rule.NAME] = values
    return options, problems
