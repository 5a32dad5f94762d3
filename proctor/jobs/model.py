"""The job record as a client writes it: its fields, their validation, and the JSON Schema of a
`fork --stdin` record. What a client may send and what only the store writes are listed
here once; fork, the CLI's --schema and the library door all read these tables. A job's
states, its id syntax and what a row means are the core record's (`proctor.jobrecord`), which
the guard reads too.
"""

from __future__ import annotations

from typing import Any

from proctor import errors, jobrecord

# the core record's facts, read here by the CLI's --schema and the jobs' modules
from proctor.jobrecord import (  # noqa: F401  (re-exported)
    DECLARED,
    EXITED,
    FAIL,
    HOLDER_SERVER,
    HOLDER_SESSION,
    JOB_ID_PATTERN,
    MAX_JOB_ID,
    NO_RETURN,
    PASS,
    PATH_FIELDS,
    RUNNING,
    STATES,
    SYMBOL_NAME,
    TERMINAL,
    check_job_id,
    is_live,
)
from proctor.timeutil import parse_duration

RECORD_SCHEMA_VERSION = 1


# Fields a client may send, and the fields only the store writes.
INPUT_FIELDS = (
    "schema_version",
    "id",
    "parent",
    "criteria",
    "checkpoint",
    "write_paths",
    "deny_paths",
    "read_paths",
    "depends_on",
    "model",
    "check",
    "goals",
    "state",
    "read_only",
    "timeout",
)
OUTPUT_FIELDS = (
    "actor",
    "created",
    "updated",
    "releases",
    "unattributed",
    "entries",
    "write_proof",
    "checkout_root",
    "end_reason",
    "deadline",
    "base",
    "holder",
    "declared_in",
    # what the store adds as a job moves, and what a listing (ls jobs, the console) adds to a row
    "base_diverges",
    "taken",
    "handed",
    "result",
    "verdict",
    "previous_results",
    "nonce_sha256",
    "worker_pid",
    "commit",
    "archived",
    "trashed",
    "depth",
    "age_seconds",
    "stale",
    "overdue",
    "overlaps_with",
    "notes",
    "column",
    "sparse",
    "runner_start",
    "forked_checkpoint",
    "previous_verdicts",
    "declaration_rules",
    "machine",
    "declared_on",
    "worker_machine",
    "observed",
    "moved",
)

GOAL_KINDS = ("check", "paths", "symbol")
GOAL_EXPECT = {
    "check": ("pass",),
    "paths": ("changed", "present", "absent"),
    "symbol": ("changed", "present", "absent", "unreferenced"),
}
GOAL_FIELDS = ("id", "kind", "expect", "check", "paths", "symbols", "depends_on")
CHECK_GOAL_ID = "check"


def _bad(message: str) -> errors.ProctorError:
    return errors.ProctorError(message, errors.BAD_RECORD)


def _string_list(record: dict, field: str) -> list[str] | None:
    if field not in record or record[field] is None:
        return None
    value = record[field]
    if isinstance(value, str):
        value = jobrecord.comma_list(value)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(f"{field} must be a list of strings")
    return value


def normalize_check(value: Any, where: str = "check") -> dict | None:
    """`"test"` or `{"target": "test"}` -> `{"target": "test"}`."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return jobrecord.check_as_stored(value)
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"target"})
        if unknown:
            raise _bad(f'{where} has unknown field {unknown[0]!r}; a check is {{"target": NAME}}')
        target = value.get("target")
        if not isinstance(target, str) or not target.strip():
            raise _bad(f'{where} names no target; a check is {{"target": NAME}} from [targets.NAME]')
        return jobrecord.check_as_stored(value)
    raise _bad(f'{where} must be a target name or {{"target": NAME}}')


def normalize_goals(value: Any) -> list[dict]:
    """Validate goals' shape (not their targets): kinds, expectations, ids, a DAG of depends_on."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise _bad("goals must be a list of goal objects")
    goals: list[dict] = []
    seen: set[str] = set()
    for index, raw in enumerate(value):
        where = f"goals[{index}]"
        if not isinstance(raw, dict):
            raise _bad(f"{where} must be an object")
        unknown = sorted(set(raw) - set(GOAL_FIELDS))
        if unknown:
            raise _bad(f"{where} has unknown field {unknown[0]!r}; a goal has {', '.join(GOAL_FIELDS)}")
        goal_id = raw.get("id")
        if not isinstance(goal_id, str) or not goal_id.strip():
            raise errors.Refused([(errors.BAD_GOAL, f"{where} needs an id, a short name unique among the job's goals")])
        if goal_id in seen:
            raise errors.Refused([(errors.BAD_GOAL, f"goal id {goal_id!r} is used twice; give each goal its own id")])
        seen.add(goal_id)
        has_check = raw.get("check") not in (None, "")
        has_paths = bool(raw.get("paths"))
        has_symbols = bool(raw.get("symbols"))
        kind = raw.get("kind")
        if kind is None:
            kind = "paths" if has_paths and not has_check else "symbol" if has_symbols and not has_check else "check"
        if kind not in GOAL_KINDS:
            raise _bad(f"goal {goal_id!r}: kind {kind!r} is not one of {', '.join(GOAL_KINDS)}")
        if has_check and (has_paths or has_symbols):
            raise errors.Refused(
                [
                    (
                        errors.BAD_GOAL,
                        f"goal {goal_id!r} names both a check and {'paths' if has_paths else 'symbols'}; "
                        f"split it into two goals",
                    )
                ]
            )
        goal: dict = {"id": goal_id, "kind": kind}
        if kind == "check":
            if not has_check:
                raise errors.Refused(
                    [
                        (
                            errors.BAD_GOAL,
                            f'goal {goal_id!r} names nothing to examine; give it a check ({{"target": NAME}})',
                        )
                    ]
                )
            goal["check"] = normalize_check(raw["check"], f"goal {goal_id!r} check")
        elif kind == "paths":
            paths = raw.get("paths")
            if not has_paths or not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
                raise errors.Refused(
                    [
                        (
                            errors.BAD_GOAL,
                            f"goal {goal_id!r} names nothing to examine; give it paths (a list of paths or globs)",
                        )
                    ]
                )
            goal["paths"] = list(paths)
        else:
            symbols = raw.get("symbols")
            if not has_symbols or not isinstance(symbols, list) or not all(isinstance(s, str) and s for s in symbols):
                raise errors.Refused(
                    [(errors.BAD_GOAL, f"goal {goal_id!r} names nothing to examine; give it symbols (a list of names)")]
                )
            malformed = [s for s in symbols if not SYMBOL_NAME.fullmatch(s)]
            if malformed:
                raise errors.Refused(
                    [
                        (
                            errors.BAD_GOAL,
                            f"goal {goal_id!r}: {', '.join(repr(s) for s in malformed)} is not a symbol name; give the name "
                            f"the index gives it (an identifier such as LegacyStore, or Scope.name such as Store.load)",
                        )
                    ]
                )
            goal["symbols"] = list(symbols)
        expect = raw.get("expect", GOAL_EXPECT[kind][0])
        if expect not in GOAL_EXPECT[kind]:
            raise _bad(
                f"goal {goal_id!r}: expect {expect!r} is not one of {', '.join(GOAL_EXPECT[kind])} for kind {kind}"
            )
        goal["expect"] = expect
        deps = raw.get("depends_on") or []
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            raise _bad(f"goal {goal_id!r}: depends_on must be a list of goal ids")
        goal["depends_on"] = list(deps)
        goals.append(goal)
    ids = {g["id"] for g in goals}
    for goal in goals:
        for dep in goal["depends_on"]:
            if dep not in ids:
                raise errors.Refused(
                    [(errors.BAD_GOAL, f"goal {goal['id']!r} depends on {dep!r}, which is not a goal of this job")]
                )
    cycle = _goal_cycle(goals)
    if cycle:
        raise errors.Refused(
            [
                (
                    errors.BAD_GOAL,
                    f"goals depend on each other in a cycle ({' -> '.join(cycle)}); a goal cannot wait on itself",
                )
            ]
        )
    return goals


def _goal_cycle(goals: list[dict]) -> list[str] | None:
    edges = {g["id"]: g["depends_on"] for g in goals}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in edges.get(node, ()):
            if state.get(dep) == 1:
                return stack[stack.index(dep) :] + [dep]
            if state.get(dep) is None:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for goal_id in edges:
        if state.get(goal_id) is None:
            found = visit(goal_id)
            if found:
                return found
    return None


def check_text(value: Any, where: str = "the record") -> None:
    """Refuse NUL bytes and lone surrogates anywhere in a decoded JSON value: no path, id or
    prose can hold them, and they would break every later read."""
    if isinstance(value, str):
        if "\x00" in value:
            raise _bad(f"{where} holds a NUL character, which no path or text may contain")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _bad(f"{where} holds a lone surrogate (invalid Unicode); send UTF-8 text") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            check_text(key, where)
            check_text(item, f"{key}" if where == "the record" else where)
    elif isinstance(value, list):
        for item in value:
            check_text(item, where)


def normalize_record(record: Any, ignored: list[str] | None = None) -> dict:
    """Check a client record's shape; return it normalized, with only the fields it named.

    Output-only fields (what the store writes, what a listing adds) are left out, and their
    names appended to `ignored`, so a row from `ls jobs -o json` can be fed back to fork.
    Rules that need the store or the tree (paths, targets, limits) are fork's.
    """
    if not isinstance(record, dict):
        raise _bad("a job record must be a JSON object")
    check_text(record)
    output_only = sorted(set(record) & set(OUTPUT_FIELDS))
    if output_only:
        if ignored is not None:
            ignored.extend(output_only)
        record = {k: v for k, v in record.items() if k not in OUTPUT_FIELDS}
    unknown = sorted(set(record) - set(INPUT_FIELDS))
    if unknown:
        raise _bad(
            f"unknown field {unknown[0]!r}; a job record has {', '.join(INPUT_FIELDS)} "
            f"(proctor job fork --schema prints them)"
        )
    out: dict = {}
    version = record.get("schema_version", RECORD_SCHEMA_VERSION)
    if isinstance(version, bool) or version != RECORD_SCHEMA_VERSION:
        raise _bad(f"schema_version {version!r} is not supported; this proctor reads version {RECORD_SCHEMA_VERSION}")
    out["id"] = check_job_id(record.get("id"), "id")
    if record.get("parent") is not None:
        out["parent"] = check_job_id(record["parent"], "parent")
    for field in ("criteria", "model", "checkpoint"):
        if record.get(field) is not None:
            if not isinstance(record[field], str):
                raise _bad(f"{field} must be a string")
            out[field] = record[field]
    for field in PATH_FIELDS:
        value = _string_list(record, field)
        if value is not None:
            out[field] = value
    deps = _string_list(record, "depends_on")
    if deps is not None:
        out["depends_on"] = [check_job_id(d, "depends_on entry") for d in deps]
    if "check" in record:
        out["check"] = normalize_check(record["check"])
    if "goals" in record:
        out["goals"] = normalize_goals(record["goals"])
        if any(g["id"] == CHECK_GOAL_ID for g in out["goals"]) and out.get("check"):
            raise errors.Refused(
                [
                    (
                        errors.BAD_GOAL,
                        "goal id 'check' is the job's check; set either check or a goal with that id, not both",
                    )
                ]
            )
    if record.get("state") is not None:
        if record["state"] not in STATES:
            raise _bad(f"state {record['state']!r} is not one of {', '.join(STATES)}")
        out["state"] = record["state"]
    if "read_only" in record and record["read_only"] is not None:
        if not isinstance(record["read_only"], bool):
            raise _bad("read_only must be true or false")
        out["read_only"] = record["read_only"]
    if record.get("timeout") is not None:
        try:
            seconds = parse_duration(record["timeout"])
        except ValueError as exc:
            raise _bad(f"timeout: {exc}") from None
        if seconds <= 0:
            raise _bad("timeout must be more than zero (2h, 30m); leave it out for no deadline")
        out["timeout"] = seconds
    return out


def goal_list(job: dict) -> list[dict]:
    """Every goal of a job, its check included as the goal with id `check`."""
    goals = list(job.get("goals") or [])
    if job.get("check"):
        goals.insert(
            0, {"id": CHECK_GOAL_ID, "kind": "check", "check": job["check"], "expect": "pass", "depends_on": []}
        )
    return goals


def _path_list_schema(description: str) -> dict:
    return {
        "description": description,
        "oneOf": [
            {"type": "array", "items": {"type": "string", "minLength": 1}},
            {"type": "string", "description": "comma-separated"},
        ],
    }


_CHECK_SCHEMA = {
    "description": "a target from [targets.NAME] in proctor.toml; never the release gate",
    "oneOf": [
        {"type": "string", "minLength": 1},
        {
            "type": "object",
            "properties": {"target": {"type": "string", "minLength": 1}},
            "required": ["target"],
            "additionalProperties": False,
        },
    ],
}

_JOB_ID_SCHEMA = {"type": "string", "pattern": JOB_ID_PATTERN, "maxLength": MAX_JOB_ID}


def record_schema() -> dict:
    """The JSON Schema a `proctor job fork --stdin` record must satisfy."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://proctor.dev/schemas/job-record-v1.json",
        "title": "proctor job record",
        "description": (
            "One job, as `proctor job fork --stdin` reads it. The store adds "
            + ", ".join(OUTPUT_FIELDS)
            + "; a record carrying any of them has them ignored, with a note."
        ),
        "type": "object",
        "required": ["id"],
        "additionalProperties": False,
        "properties": {
            "schema_version": {"const": RECORD_SCHEMA_VERSION},
            "id": {**_JOB_ID_SCHEMA, "description": "the job's id; fork replaces a job with the same id"},
            "parent": {**_JOB_ID_SCHEMA, "type": ["string", "null"], "description": "the job this one was forked from"},
            "criteria": {"type": "string", "description": "the acceptance criteria, prose a person grades"},
            "checkpoint": {
                "type": ["string", "null"],
                "pattern": r"^[0-9a-f]{4,64}(\+[0-9a-f]+)?$",
                "description": "as `proctor vcs checkpoint -o name` prints it; default: now",
            },
            "write_paths": _path_list_schema(
                "files, globs or file#declaration claims the job may write; no existing directory"
            ),
            "deny_paths": _path_list_schema("paths the job must not write"),
            "read_paths": _path_list_schema("paths the job may read; write_paths stand in when empty"),
            "depends_on": {
                "type": "array",
                "items": _JOB_ID_SCHEMA,
                "description": "jobs that must land before this one",
            },
            "model": {"type": ["string", "null"]},
            "check": {**_CHECK_SCHEMA, "oneOf": [*_CHECK_SCHEMA["oneOf"], {"type": "null"}]},
            "goals": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id"],
                    "additionalProperties": False,
                    "properties": {
                        "id": {"type": "string", "minLength": 1},
                        "kind": {"enum": list(GOAL_KINDS), "default": "check"},
                        "expect": {"enum": sorted({e for v in GOAL_EXPECT.values() for e in v})},
                        "check": _CHECK_SCHEMA,
                        "paths": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
                        "symbols": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
                        "depends_on": {"type": "array", "items": {"type": "string"}},
                    },
                },
            },
            "state": {"enum": list(STATES), "description": "default: declared"},
            "read_only": {"type": "boolean", "description": "a job that writes nothing"},
            "enter": {
                "type": "string",
                "description": "enter one path of a live job for one write: a record of only id and enter",
            },
            "timeout": {
                "description": "a deadline this long after fork: 30m, 2h, or seconds",
                "oneOf": [{"type": "string"}, {"type": "number", "exclusiveMinimum": 0}, {"type": "null"}],
            },
            **{
                name: {"description": "output-only: the store writes it; ignored in a record, with a note"}
                for name in OUTPUT_FIELDS
            },
        },
    }
