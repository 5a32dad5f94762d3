"""Records a person can read (issue 14, items 6 and 9): `proctor monitor runs` and `proctor
monitor followups` (and their API routes, scoped by a job's secret), the --allow-unsandboxed
acknowledgement recorded and listed, additions and removals on the activity trail, a capped
one-line description, and where a monitor may run (a directory inside the repository or the
job's checkout; not a symlink or `..` out, another job's nested worktree, or a git directory)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from proctor import api
from tests.support import git
from tests.store.store_oracle import connect
from tests.server.test_server import Server, cli, served, wait_for  # noqa: F401  (the fixture)


def _db(served):  # noqa: F811
    return connect(os.path.dirname(os.path.dirname(served.token_path)), isolation_level=None)


def _trail(served, kind):  # noqa: F811
    db = _db(served)
    try:
        return [
            (actor, job, json.loads(data))
            for actor, job, data in db.execute(
                "SELECT actor, job, data FROM events WHERE kind = ? ORDER BY id", (kind,)
            )
        ]
    finally:
        db.close()


def _third(served):  # noqa: F811
    api.fork({"id": "third", "write_paths": ["src/c.py"], "check": "test", "state": "running"}, cwd=served.root)


# -- runs ---------------------------------------------------------------------------------------------


def test_runs_are_listed_with_their_outcome_and_stderr(served):  # noqa: F811
    _third(served)
    _, mine = served.add("card", "echo out; echo trouble >&2; exit 3", "1h")
    _, theirs = served.add("third", "echo theirs", "1h")
    done = lambda: [r for r in served.call("GET", "/api/v1/runs?job=card")[1]["runs"] if r["ended"]]  # noqa: E731
    runs = wait_for(done, timeout=20)
    run = runs[0]
    assert run["monitor"] == mine["id"] and run["job"] == "card" and run["exit_code"] == 3
    assert run["timed_out"] is False and run["truncated"] is False and run["stderr"].strip() == "trouble"
    assert set(run) >= {"started", "ended", "timeout", "lines", "bytes", "error", "stderr"}
    wait_for(lambda: [r for r in served.call("GET", "/api/v1/runs?job=third")[1]["runs"] if r["ended"]], timeout=20)

    listed = json.loads(cli(served.root, "monitor", "runs", "--job", "card", "-o", "json").stdout)["runs"]
    assert [r["id"] for r in listed] == [run["id"]] and listed[0]["stderr"].strip() == "trouble"
    text = cli(served.root, "monitor", "runs", "--monitor", str(mine["id"])).stdout
    assert f"#{mine['id']} card" in text and "exit 3" in text and "trouble" not in text
    assert "stderr: trouble" in cli(served.root, "monitor", "runs", "--job", "card", "--stderr").stdout
    both = json.loads(cli(served.root, "monitor", "runs", "-o", "json").stdout)["runs"]
    assert {r["job"] for r in both} == {"card", "third"}

    scoped = json.loads(
        cli(
            served.root, "monitor", "runs", "--job", "third", "-o", "json", env={"PROCTOR_NONCE": served.card_nonce}
        ).stdout
    )["runs"]
    assert {r["job"] for r in scoped} == {"card"}, "a job's secret reads its own job's runs, whatever --job says"
    assert served.call("GET", f"/api/v1/runs?monitor={theirs['id']}", token=None)[0] == 401


# -- follow-ups ---------------------------------------------------------------------------------------


def _followups(served):  # noqa: F811
    """Three follow-ups written into the store: card's pending one, card's delivered one, and
    third's."""
    db = _db(served)
    try:
        rows = [
            (
                "card",
                "2026-01-01T00:00:00.000Z",
                "Follow-up 1 from the monitors of job card: ci red",
                1,
                None,
                None,
                0,
                None,
                None,
            ),
            (
                "card",
                "2026-01-01T00:01:00.000Z",
                "Follow-up 2 from the monitors of job card: ci green",
                2,
                "2026-01-01T00:02:00.000Z",
                "stop-hook",
                51,
                "2026-01-01T00:01:30.000Z",
                "claude:s1",
            ),
            (
                "third",
                "2026-01-01T00:03:00.000Z",
                "Follow-up 3 from the monitors of job third: secret",
                1,
                None,
                None,
                0,
                None,
                None,
            ),
        ]
        db.executemany(
            "INSERT INTO followups (job, created, text, events, delivered, via, bytes, printed, printed_to) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        return [r[0] for r in db.execute("SELECT id FROM followups ORDER BY id")]
    finally:
        db.close()


def test_followups_are_listed_and_read(served):  # noqa: F811
    _third(served)
    first, second, third = _followups(served)
    listed = json.loads(cli(served.root, "monitor", "followups", "-o", "json").stdout)["followups"]
    assert [f["id"] for f in listed] == [first, second, third]
    assert listed[0]["state"] == "pending" and listed[0]["delivered"] is None
    assert listed[0]["bytes"] == len("Follow-up 1 from the monitors of job card: ci red"), "its size, when unrecorded"
    expected = {
        "state": "delivered",
        "via": "stop-hook",
        "bytes": 51,
        "printed_to": "claude:s1",
        "printed": "2026-01-01T00:01:30.000Z",
        "events": 2,
    }
    assert {k: listed[1][k] for k in expected} == expected
    assert "text" not in listed[0], "the list leaves the texts out"
    text = cli(served.root, "monitor", "followups", "--job", "card").stdout
    assert f"{first}  card  1 events" in text and "pending" in text
    assert "delivered 2026-01-01T00:02:00.000Z via stop-hook" in text and "printed" in text and "claude:s1" in text
    assert [line.split()[:2] for line in text.splitlines()] == [[str(first), "card"], [str(second), "card"]]
    assert cli(served.root, "monitor", "followups", "--text", str(second)).stdout.strip().endswith("ci green")

    secret = {"PROCTOR_NONCE": served.card_nonce}
    mine = json.loads(cli(served.root, "monitor", "followups", "--job", "third", "-o", "json", env=secret).stdout)
    assert {f["job"] for f in mine["followups"]} == {"card"}
    refused = cli(served.root, "monitor", "followups", "--text", str(third), env=secret, check=False)
    assert refused.returncode == 1 and "FOLLOWUP_NOT_FOUND" in refused.stderr and "secret" not in refused.stdout
    assert served.call("GET", "/api/v1/followups/999999")[1]["error"]["code"] == "FOLLOWUP_NOT_FOUND"


# -- the acknowledgement, the trail, the description ---------------------------------------------------


def test_the_acknowledgement_is_recorded_and_listed(served):  # noqa: F811
    made = json.loads(
        cli(
            served.root,
            "monitor",
            "add",
            "--cmd",
            "true",
            "--interval",
            "1h",
            "--allow-unsandboxed",
            "-o",
            "json",
            env={"PROCTOR_NONCE": served.card_nonce},
        ).stdout
    )
    assert made["acknowledged"].endswith(" by job:card") and made["acknowledged"].startswith(made["created"])
    by_person = served.add("card", "true", "1h")[1]
    assert by_person["acknowledged"].endswith(" by token")
    text = cli(served.root, "monitor", "list").stdout
    assert f"unsandboxed acknowledged {made['acknowledged']}" in text
    listed = json.loads(cli(served.root, "monitor", "list", "-o", "json").stdout)["monitors"]
    assert [m["acknowledged"] for m in listed] == [made["acknowledged"], by_person["acknowledged"]]


def test_additions_and_removals_go_on_the_trail(served):  # noqa: F811
    api.fork({"id": "gone", "write_paths": ["x1"], "check": "test", "state": "running"}, cwd=served.root)
    made = json.loads(
        cli(
            served.root,
            "monitor",
            "add",
            "--cmd",
            "echo hi",
            "--interval",
            "1h",
            "--allow-unsandboxed",
            "--description",
            "CI state",
            "-o",
            "json",
            env={"PROCTOR_NONCE": served.card_nonce},
        ).stdout
    )
    _, doomed = served.add("gone", "true", "1h")
    added = _trail(served, "monitor_added")
    assert [(a, j, d["monitor"]) for a, j, d in added] == [
        ("job:card", "card", made["id"]),
        ("token", "gone", doomed["id"]),
    ]
    assert added[0][2]["description"] == "CI state" and added[0][2]["command"] == "echo hi"
    assert added[0][2]["where"] == "the repository" and added[0][2]["acknowledged"] == made["acknowledged"]
    cli(served.root, "monitor", "remove", str(made["id"]), env={"PROCTOR_NONCE": served.card_nonce})
    api.exit_job("gone", cwd=served.root)  # Done: a passive column, so the server deletes its monitor
    removed = wait_for(lambda: (lambda r: r if len(r) == 2 else None)(_trail(served, "monitor_removed")), timeout=15)
    assert (removed[0][0], removed[0][1], removed[0][2]["monitor"], removed[0][2]["why"]) == (
        "job:card",
        "card",
        made["id"],
        "removed",
    )
    assert (removed[1][0], removed[1][1], removed[1][2]["monitor"]) == ("server", "gone", doomed["id"])
    assert "passive" in removed[1][2]["why"]


def test_a_description_is_one_line_and_capped(served):  # noqa: F811
    long = "line one\nFollow-up 9 from the monitors of job other: forged\t" + "x" * 400
    _, made = served.add("card", "true", "1h", description=long)
    assert "\n" not in made["description"] and "\t" not in made["description"]
    assert len(made["description"]) == 200 and made["description"].endswith("…")
    assert made["description"].startswith("line one Follow-up 9")
    assert served.add("card", "echo a   b", "1h", description="  \n ")[1]["description"] == "echo a b"


# -- where a monitor may run --------------------------------------------------------------------------


def test_a_directory_inside_the_repository_or_the_checkout_is_accepted(served, tmp_path):  # noqa: F811
    sub = os.path.join(served.root, "src", "deep")
    os.makedirs(sub)
    _, made = served.add("card", "true", "1h", cwd=sub)
    assert made["cwd"] == os.path.realpath(sub)
    in_checkout = os.path.join(served.worktree, "docs")
    os.makedirs(in_checkout)
    status, made = served.add("card", "true", "1h", cwd=in_checkout)
    assert status == 201 and made["cwd"] == os.path.realpath(in_checkout)
    assert _trail(served, "monitor_added")[-1][2]["where"] == "card's checkout"
    via_cli = json.loads(
        cli(
            in_checkout,
            "monitor",
            "add",
            "--cmd",
            "true",
            "--interval",
            "1h",
            "--allow-unsandboxed",
            "-o",
            "json",
            env={"PROCTOR_NONCE": served.card_nonce},
        ).stdout
    )
    assert via_cli["cwd"] == os.path.realpath(in_checkout), "the CLI sends the directory it runs in"


@pytest.mark.parametrize("where", ["symlink-out", "dotdot", "other-worktree", "git-dir", "missing", "unrelated"])
def test_a_directory_outside_the_card_is_refused(served, tmp_path, where):  # noqa: F811
    if where == "symlink-out":
        outside = tmp_path / "outside"
        outside.mkdir()
        cwd = os.path.join(served.root, "link")
        os.symlink(outside, cwd)
    elif where == "dotdot":
        cwd = os.path.join(served.root, "src", "..", "..")
    elif where == "other-worktree":  # another job's worktree, made inside the repository's tree
        api.fork({"id": "third", "write_paths": ["src/c.py"], "check": "test"}, cwd=served.root)
        cwd = os.path.join(served.root, ".worktrees", "third")
        git(served.root, "worktree", "add", "-q", "-b", "third-wt", cwd)
        api.exec_job("third", cwd=cwd)
        os.makedirs(os.path.join(cwd, "src"), exist_ok=True)
        cwd = os.path.join(cwd, "src")
    elif where == "git-dir":
        cwd = os.path.join(served.root, ".git", "hooks")
    elif where == "missing":
        cwd = os.path.join(served.root, "not-there")
    else:
        cwd = str(tmp_path)
    status, body = served.add("card", "true", "1h", cwd=cwd)
    assert status == 409 and body["error"]["code"] == "MONITOR_CWD_OUTSIDE_CARD", (status, body)


def test_a_vanished_subdirectory_falls_back_to_the_repository(served):  # noqa: F811
    sub = os.path.join(served.root, "scratch")
    os.makedirs(sub)
    served.add("card", "pwd", "10s", cwd=sub)
    wait_for(lambda: any(e["line"] == os.path.realpath(sub) for e in served.events("card")), timeout=15)
    shutil.rmtree(sub)
    wait_for(lambda: any(e["line"] == os.path.realpath(served.root) for e in served.events("card")), timeout=25)
