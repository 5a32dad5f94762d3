"""The result a holder files with `proctor job exit <id> --stdin`: what it says it did.

Every field is a claim. `validation` names recorded runs, each by its run id with the
output_ref that run printed; each is resolved now, in the holder's own checkout, and refused
unless it can speak for this job (evidence.py says when it can). The run records are filed
beside the result, so whoever waits on the job (from any checkout) reads the same evidence. There is no `passed` field: a holder's verdict on its own
run is exactly what the output ref exists to replace.
"""

from __future__ import annotations

import os
from typing import Any

from proctor import errors, jobrecord, trail
from proctor import claims as jpaths
from proctor.paths import machine_id
from proctor.store import rows
from proctor.jobs.lease import Caller
from proctor.jobs.model import DECLARED, EXITED, RUNNING, TERMINAL, check_job_id
from proctor.timeutil import iso, now
from proctor.workspace import Workspace

RESULT_SCHEMA_VERSION = 2
RESULT_FIELDS = (
    "schema_version",
    "changed_paths",
    "validation",
    "descendants",
    "unresolved_risks",
    "status",
    "summary",
)
STATUSES = ("done", "blocked", "split")


def result_schema() -> dict:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://proctor.dev/schemas/job-result-v1.json",
        "title": "proctor job result",
        "description": (
            "What a holder files with `proctor job exit <id> --stdin`. Every field is a claim that "
            "`proctor job wait` holds to the evidence; there is no passed field."
        ),
        "type": "object",
        "required": ["schema_version"],
        "additionalProperties": False,
        "properties": {
            "schema_version": {"const": RESULT_SCHEMA_VERSION},
            "changed_paths": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "description": "repository-relative paths the holder changed",
            },
            "validation": {
                "type": "array",
                "description": (
                    "runs of the job's check the holder made, in its own checkout, on the finished "
                    "tree: each names one run by the id and output_ref proctor run printed"
                ),
                "items": {
                    "type": "object",
                    "required": ["run", "output_ref"],
                    "additionalProperties": False,
                    "properties": {
                        "run": {
                            "type": "string",
                            "minLength": 1,
                            "description": "the run id proctor run printed (run-...)",
                        },
                        "command": {"type": "string"},
                        "output_ref": {"type": "string", "pattern": "^(sha256:)?[0-9a-f]{64}$"},
                    },
                },
            },
            "descendants": {"type": "array", "items": {"type": "string"}, "description": "jobs the holder forked"},
            "unresolved_risks": {"type": "array", "items": {"type": "string"}},
            "status": {"enum": list(STATUSES), "description": "the holder's own account"},
            "summary": {"type": "string", "description": "the holder's own words, kept as a claim"},
        },
    }


def _bad(message: str) -> errors.ProctorError:
    return errors.ProctorError(message, errors.BAD_RECORD)


def _strings(record: dict, field: str) -> list[str]:
    value = record.get(field, [])
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(f"result field {field} must be a list of strings")
    return value


def normalize_result(record: Any, root: str, job_id: str) -> dict:
    if not isinstance(record, dict):
        raise _bad("a result must be a JSON object (proctor job exit --schema prints its shape)")
    from proctor.jobs.model import check_text

    check_text(record, "the result")
    if "passed" in record:
        raise _bad(
            "a result has no passed field: proctor grades the evidence (proctor run's "
            "output_ref), never the holder's verdict; remove it"
        )
    unknown = sorted(set(record) - set(RESULT_FIELDS))
    if unknown:
        raise _bad(f"unknown result field {unknown[0]!r}; a result has {', '.join(RESULT_FIELDS)}")
    version = record.get("schema_version")
    if version is None:
        raise _bad(f"a result needs schema_version ({RESULT_SCHEMA_VERSION})")
    if isinstance(version, bool) or version not in (1, RESULT_SCHEMA_VERSION):
        raise _bad(f"result schema_version {version!r} is not supported; this proctor reads {RESULT_SCHEMA_VERSION}")
    if version == 1 and record.get("validation"):
        raise _bad(
            "result schema_version 1 cited runs by output_ref alone, which any run with the same output "
            'matched; version 2 names each run: {"run": "run-...", "output_ref": "sha256:..."}, '
            "both as proctor run printed them"
        )
    changed = []
    outside = []
    for raw in _strings(record, "changed_paths"):
        path = jpaths.normalize(raw.strip(), root)
        if path is None or path == ".":
            outside.append(raw)
        else:
            changed.append(path)
    if outside:
        raise errors.Refused(
            [
                (
                    errors.PATH_OUTSIDE_REPO,
                    f"refused the result of {job_id}: changed path {p!r} is outside the repository {root}; "
                    f"name files inside it, relative to its root",
                )
                for p in outside
            ]
        )
    validation = record.get("validation", []) or []
    if not isinstance(validation, list):
        raise _bad("result field validation must be a list of {command, output_ref}")
    entries = []
    for index, entry in enumerate(validation):
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("output_ref"), str)
            or not isinstance(entry.get("run"), str)
            or not entry["run"].strip()
        ):
            raise _bad(
                f'validation[{index}] must name one run: {{"run": <id>, "output_ref": <ref>}}, both as '
                f"proctor run printed them (run run-..., output_ref sha256:...)"
            )
        extra = sorted(set(entry) - {"run", "command", "output_ref"})
        if extra:
            raise _bad(f"validation[{index}] has unknown field {extra[0]!r}; it is {{run, output_ref, command}}")
        if "command" in entry and not isinstance(entry["command"], str):
            raise _bad(f"validation[{index}].command must be a string")
        ref = entry["output_ref"].strip()
        if not ref.startswith(trail.REF_PREFIX):
            ref = trail.REF_PREFIX + ref
        entries.append({"run": entry["run"].strip(), "command": entry.get("command", ""), "output_ref": ref})
    descendants = [check_job_id(d, "descendants entry") for d in _strings(record, "descendants")]
    status = record.get("status")
    if status is not None and status not in STATUSES:
        raise _bad(f"result status {status!r} is not one of {', '.join(STATUSES)}")
    summary = record.get("summary")
    if summary is not None and not isinstance(summary, str):
        raise _bad("result summary must be a string")
    return {
        "schema_version": RESULT_SCHEMA_VERSION,
        "changed_paths": changed,
        "validation": entries,
        "descendants": descendants,
        "unresolved_risks": _strings(record, "unresolved_risks"),
        "status": status,
        "summary": summary,
    }


def file_result(ws: Workspace, job_id: str, record: Any, caller: Caller) -> dict:
    """Record a holder's result: the job becomes exited, its evidence filed beside it."""
    from proctor.jobs import runs
    from proctor.jobs import evidence

    check_job_id(job_id)
    result = normalize_result(record, ws.root, job_id)
    # What takes time (the tree's digest, hashing each cited output) is read before the
    # write lock is taken; the job is read again under it.
    tree = None
    blobs: dict[str, str | None] = {}
    with ws.store.read() as conn:
        before = rows.get(conn, job_id)
        cited_runs = [r for r in (runs.get(conn, e["run"]) for e in result["validation"]) if r]
    if before is not None and before.get("checkout_root") and not jobrecord.on_this_machine(before):
        raise errors.Refused(
            [
                (
                    errors.CHECKOUT_ELSEWHERE,
                    f"refused exit of {job_id}: it is taken in {jobrecord.where_taken(before)}; its holder files its result "
                    f"there, where its diff and its runs can be read",
                )
            ]
        )
    observed = None
    if before is not None and before["state"] in (DECLARED, RUNNING):
        from proctor.jobs.verify import record_observation

        observed = record_observation(before, ws.root)
    if before is not None and result["validation"]:
        tree = evidence.Tree(evidence.checkout_of(before, ws.root))
        if observed is not None and observed["tree"] and observed["checkout"] == tree.checkout:
            tree.known(observed["tree"])  # read once, for the record and for the evidence
        tree.now()
        for cited in cited_runs:
            blobs[cited["id"]] = evidence.blob_problem(ws.store, cited)
    with ws.store.write() as conn:
        job = jobrecord.require(rows.get(conn, job_id), job_id)
        if caller.lease and caller.lease != job_id:
            raise errors.Refused(
                [
                    (
                        errors.NOT_YOUR_JOB,
                        f"refused exit of {job_id}: a session holding lease {caller.lease} may end only its own "
                        f"job; ending {job_id} is the forking session's ({caller.whence()}){caller.remedy()}",
                    )
                ]
            )
        if job["state"] in TERMINAL:
            raise errors.Refused(
                [
                    (
                        errors.NOT_LIVE,
                        f"refused exit of {job_id}: it has ended ({job['state']}); nothing more can be filed",
                    )
                ]
            )
        if job["state"] == EXITED:
            raise errors.Refused(
                [
                    (
                        errors.NOT_LIVE,
                        f"refused exit of {job_id}: a result is filed already ({job['result']['filed']}); "
                        f"proctor job wait {job_id} verifies it",
                    )
                ]
            )
        reasons = []
        filed_runs = []
        checkout = evidence.checkout_of(job, ws.root)
        if tree is None or tree.checkout != checkout:
            tree = evidence.Tree(checkout)
        for entry in result["validation"]:
            found = runs.get(conn, entry["run"])
            if found is None:
                reasons.append(
                    (
                        errors.UNKNOWN_RUN,
                        f"refused the result of {job_id}: validation names run {entry['run']!r}, which is not "
                        f"recorded; cite the run id and output_ref proctor run printed",
                    )
                )
                continue
            if found["output_ref"] != entry["output_ref"]:
                reasons.append(
                    (
                        errors.EVIDENCE_NOT_THIS_JOB,
                        f"refused the result of {job_id}: it cites {entry['output_ref']} as the output of run "
                        f"{found['id']}, which printed {found['output_ref']}; cite the pair proctor run printed",
                    )
                )
                continue
            missing = blobs[found["id"]] if found["id"] in blobs else evidence.blob_problem(ws.store, found)
            if missing:
                reasons.append((errors.BLOB_MISSING, f"refused the result of {job_id}: {missing}"))
                continue
            for why in evidence.provenance(conn, job, found, checkout, tree):
                reasons.append((errors.EVIDENCE_NOT_THIS_JOB, f"refused the result of {job_id}: {why}"))
            filed_runs.append(found)
        if reasons:
            raise errors.Refused(reasons)
        at = now()
        result["filed"] = iso(at)
        result["by"] = caller.actor
        result["runs"] = filed_runs
        job["result"] = result
        job["state"] = EXITED
        job["updated"] = iso(at)
        if not job.get("checkout_root") and job["state"] in (DECLARED, RUNNING, EXITED):
            job["checkout_root"] = os.path.realpath(ws.root)
            job["machine"] = machine_id()
        if observed is not None and observed["checkout"] == evidence.checkout_of(job, ws.root):
            job["observed"] = observed
        rows.put(conn, job, job["_root"], job["_depth"])
        trail.append(
            conn, ws.state_dir, "job_exit", caller.actor, job_id, {"state": EXITED, "status": result["status"]}, when=at
        )
    return job


def add_evidence(ws: Workspace, job_id: str, made: list[dict], caller: Caller) -> dict | None:
    """Cite runs the forking side made itself (`proctor work` runs a job's check once its
    worker stops) in the job's filed result, beside what the holder cited. An unleased
    caller's move; the runs are held to the same checks when the job is graded."""
    if caller.lease or not made:
        return None
    with ws.store.write() as conn:
        job = rows.get(conn, job_id)
        if job is None or job["state"] != EXITED or not job.get("result"):
            return job
        result = job["result"]
        for run in made:
            result.setdefault("validation", []).append(
                {
                    "run": run["id"],
                    "command": f"proctor run {run['target']}",
                    "output_ref": run["output_ref"],
                    "by": caller.actor,
                }
            )
            result.setdefault("runs", []).append(
                {k: v for k, v in run.items() if k not in ("ref", "duration_seconds", "pipe_held")}
            )
        rows.put(conn, job, job["_root"], job["_depth"])
    return job
