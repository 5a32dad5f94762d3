"""The guard's view of proctor.toml, cached as JSON keyed by the file's stat and HEAD.

Parsing TOML costs the hook more than the rest of its work (tomllib alone is ~11 ms), so
the effective settings are computed once per change of the working tree's proctor.toml or
of HEAD, and read back as JSON after that. A rule's decision is the STRICTER of the working
tree's file and HEAD's: a tightening applies at once, a loosening only once committed. A
rule's options (minutes) are the smaller of the two.

Under a lease the checkpoints of the job and of its ancestors are sources too (`pinned`): a
holder cannot loosen its own rules, or its child's, by editing or committing proctor.toml. The cache is a file any process of the
user can rewrite, so under a lease a cached setting looser than the rule's default is not
taken on trust: the settings are computed again from the files (`verify_loosening`). A
workspace on the defaults, or one that only tightens, keeps the cache's speed.
"""

from __future__ import annotations

import json
import os
import zlib

from proctor.paths import Checkout, head_revision, repo_cache_dir, write_atomic

CONFIG_NAME = "proctor.toml"
STRICTNESS = {"off": 0, "advise": 1, "deny": 2}
CACHE_VERSION = 4


def _stat_key(path: str) -> list | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_mtime_ns, info.st_size, info.st_ino]


def load(checkout: Checkout, pinned: tuple[str, ...] = (), verify_loosening: bool = False) -> dict:
    """`{"rules": {name: decision}, "gate": ..., "targets": {name: command}, "problems": [...]}`."""
    config_path = os.path.join(checkout.root, CONFIG_NAME)
    head = head_revision(checkout)
    key = {
        "v": CACHE_VERSION,
        "toml": _stat_key(config_path),
        "head": head,
        "root": checkout.root,
        "pinned": list(pinned),
    }
    cache_path = os.path.join(
        repo_cache_dir(checkout),
        f"guard-config-{zlib.crc32(checkout.root.encode('utf-8', 'surrogateescape')):08x}.json",
    )
    try:
        with open(cache_path, encoding="utf-8") as handle:
            cached = json.load(handle)
        if cached.get("key") == key and not (verify_loosening and looser_than_defaults(cached["settings"])):
            return cached["settings"]
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        pass
    settings = compute(checkout, head, pinned)
    try:
        write_atomic(cache_path, json.dumps({"key": key, "settings": settings}))
    except OSError:
        pass  # an unwritable cache costs the next call a parse, nothing more
    return settings


def looser_than_defaults(settings: dict) -> bool:
    """Whether any rule is set looser than its default, or any option above its default."""
    from proctor.guard.rules import ALL

    rules, options = settings.get("rules") or {}, settings.get("options") or {}
    for rule in ALL:
        decision = rules.get(rule.NAME, rule.DEFAULT)
        if STRICTNESS.get(decision, 0) < STRICTNESS[rule.DEFAULT]:
            return True
        for option, default in getattr(rule, "OPTIONS", {}).items():
            value = (options.get(rule.NAME) or {}).get(option, default)
            if not isinstance(value, (int, float)) or value > default:
                return True
    return False


def compute(checkout: Checkout, head: str | None, pinned: tuple[str, ...] = ()) -> dict:
    """Parse the configs (slow path: imports tomllib and runs git once or twice)."""
    from proctor import config as config_mod
    from proctor.guard.rules import ALL

    worktree = config_mod.load(checkout.root)
    others = [config_mod.parse(_committed_config(checkout.root, "HEAD") if head else b"", "HEAD:" + CONFIG_NAME)]
    for revision in pinned:
        others.append(config_mod.parse(_committed_config(checkout.root, revision), f"{revision}:{CONFIG_NAME}"))
    problems = list(worktree.problems) + unknown_rules(worktree.guard_rules)
    rules = {}
    for rule in ALL:
        decision = worktree.guard_rules.get(rule.NAME, rule.DEFAULT)
        for other in others:
            theirs = other.guard_rules.get(rule.NAME, rule.DEFAULT)
            if STRICTNESS[theirs] > STRICTNESS[decision]:
                decision = theirs
        rules[rule.NAME] = decision
    options, option_problems = rule_options(worktree.guard_options)
    problems.extend(option_problems)
    for other in others:
        their_options, _ = rule_options(other.guard_options)
        for name, values in their_options.items():
            mine = options.setdefault(name, dict(values))
            for option, value in values.items():
                mine[option] = min(mine.get(option, value), value)
    return {
        "rules": rules,
        "options": options,
        "gate": worktree.gate,
        "targets": {name: target.command for name, target in worktree.targets.items()},
        "stale_after": worktree["jobs.stale_after"],  # the guard's lease lookup reaps with it
        "problems": problems,
    }


def _committed_config(root: str, revision: str) -> bytes:
    from proctor.vcs import git

    proc = git.run(root, "show", f"{revision}:{CONFIG_NAME}", check=False)
    return proc.stdout if proc.returncode == 0 else b""


def unknown_rules(decisions: dict) -> list[str]:
    """A problem for each name in [guard.rules] that is no rule's: each is ignored."""
    from proctor.guard.rules import ALL

    known = {rule.NAME for rule in ALL}
    return [
        f"{CONFIG_NAME}: [guard.rules] {name} is not a rule (proctor describe rules lists them); ignored"
        for name in sorted(set(decisions) - known)
    ]


def rule_options(tables: dict[str, dict]) -> tuple[dict[str, dict], list[str]]:
    """Each rule's options from its [guard.<rule>] table: a bad value (not a positive, finite
    number, TOML's inf and nan included) is reported and its default kept."""
    import math

    from proctor.guard.rules import ALL

    known = {rule.NAME: rule for rule in ALL}
    options: dict[str, dict] = {}
    problems: list[str] = []
    for name in sorted(set(tables) - set(known)):
        problems.append(
            f"{CONFIG_NAME}: [guard.{name}] is not a rule's table (proctor describe rules lists them); ignored"
        )
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
                problems.append(
                    f"{CONFIG_NAME}: [guard.{rule.NAME}] {key} = {raw!r} is invalid (expected a "
                    f"positive number of minutes); using the default ({declared[key]:g})"
                )
                continue
            values[key] = float(raw)
        check = getattr(rule, "check_options", None)
        if check is not None:
            complaint = check(values)
            if complaint:
                problems.append(
                    f"{CONFIG_NAME}: [guard.{rule.NAME}] {complaint}; using the defaults "
                    f"({', '.join(f'{k} = {v:g}' for k, v in declared.items())})"
                )
                values = dict(declared)
        if declared:
            options[rule.NAME] = values
    return options, problems
