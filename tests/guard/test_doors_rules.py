"""One rule, every door: a rule moved out of the CLI into its capability refuses the same case
with the same lines from the CLI and from the library door (proctor.api) or the capability the
server calls; and `proctor job archive|trash|delete` reaps and records as the console's action."""

from __future__ import annotations

import pytest

from proctor import api, errors


def _fork(proctor, *args: str) -> None:
    result = proctor("job", "fork", *args)
    assert result.code == 0, result.err


def _refusals(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("PRC")]


def _row(root: str, job_id: str) -> dict | None:
    from proctor.store import rows
    from proctor.workspace import Workspace

    with Workspace(root) as ws, ws.store.read() as conn:
        return rows.get(conn, job_id)


def _trail(root: str, job_id: str) -> list[tuple[str, str]]:
    from proctor import trail
    from proctor.workspace import Workspace

    with Workspace(root) as ws, ws.store.read() as conn:
        return [(e["kind"], e["actor"]) for e in trail.events(conn, job_id) if e["kind"].startswith("job_")]


@pytest.mark.parametrize("how", ["archive", "trash", "delete"])
def test_put_away_under_a_lease_is_refused_alike_by_the_cli_and_the_api(repo, proctor, how):
    _fork(proctor, "a", "--write-paths", "a.py", "--check", "test")
    _fork(proctor, "b", "--write-paths", "b.py", "--check", "test")
    by_cli = proctor("job", how, "a", "--lease", "b")
    with pytest.raises(errors.Refused) as by_api:
        api.put_away("a", how, lease="b", cwd=repo)
    assert by_cli.code == 1 and by_api.value.code == errors.NOT_YOUR_JOB
    assert _refusals(by_cli.err) == by_api.value.lines(), by_cli.err
    row = _row(repo, "a")
    assert row is not None and not row.get("archived") and not row.get("trashed")


def test_move_under_a_lease_is_refused_alike_by_the_cli_and_the_api(repo, proctor):
    _fork(proctor, "a", "--write-paths", "a.py", "--check", "test")
    _fork(proctor, "b", "--write-paths", "b.py", "--check", "test")
    by_cli = proctor("job", "move", "a", "Done", "--lease", "b")
    with pytest.raises(errors.Refused) as by_api:
        api.move_job("a", "Done", lease="b", cwd=repo)
    assert by_cli.code == 1 and _refusals(by_cli.err) == by_api.value.lines(), by_cli.err


def test_harness_install_under_a_lease_is_refused_alike(repo, proctor):
    from proctor.guard import harness
    from proctor.workspace import Workspace

    _fork(proctor, "j", "--write-paths", "a.py", "--check", "test")
    by_cli = proctor("agent", "harness", "install", env={"BAGGAGE": "proctor.lease=j"})
    with Workspace(repo) as ws, pytest.raises(errors.Refused) as by_function:
        harness.install(ws, environ={"BAGGAGE": "proctor.lease=j"})
    assert by_cli.code == 1 and _refusals(by_cli.err) == by_function.value.lines(), by_cli.err
    assert "only an unbound caller" in by_cli.err


def test_monitor_wait_for_another_job_under_a_lease_is_refused_alike(repo, proctor, monkeypatch):
    from proctor.monitors import wake
    from proctor.workspace import Workspace

    _fork(proctor, "j", "--write-paths", "a.py", "--check", "test")
    _fork(proctor, "k", "--write-paths", "b.py", "--check", "test")
    by_cli = proctor("monitor", "wait", "--job", "k", env={"BAGGAGE": "proctor.lease=j"})
    monkeypatch.setenv("BAGGAGE", "proctor.lease=j")
    with Workspace(repo) as ws, pytest.raises(errors.Refused) as by_function:
        wake.job_to_wait(ws, "k")
    assert by_cli.code == 1 and _refusals(by_cli.err) == by_function.value.lines(), by_cli.err
    monkeypatch.delenv("BAGGAGE")
    with Workspace(repo) as ws, pytest.raises(errors.ProctorError, match="you act under no lease"):
        wake.job_to_wait(ws, None)


def _console_act(root: str, body: dict) -> dict:
    from proctor.server import app, console
    from proctor.workspace import Workspace

    with Workspace(root) as ws:
        state_dir = ws.state_dir
    return console.act(app.State(root, state_dir, root, "token", 0), body, "console")


@pytest.mark.parametrize("how", ["archive", "trash", "delete"])
def test_the_cli_reaps_and_records_as_the_consoles_action(repo, proctor, how):
    # r/a and r/b are ended by the next read that reaps once their parent ends
    _fork(proctor, "r", "--check", "test")
    _fork(proctor, "r/a", "--parent", "r", "--write-paths", "a.py", "--check", "test")
    _fork(proctor, "r/b", "--parent", "r", "--write-paths", "b.py", "--check", "test")
    _fork(proctor, "by-cli", "--write-paths", "c.py", "--check", "test")
    _fork(proctor, "by-console", "--write-paths", "d.py", "--check", "test")
    assert proctor("job", "exit", "r").code == 0
    assert _row(repo, "r/a")["state"] == "declared"

    done = proctor("job", how, "by-cli")
    assert done.code == 0, done.err
    assert done.out.strip() == (f"{how}d by-cli" if how != "delete" else "deleted by-cli")
    assert "ended r/a: its parent r ended in no_return" in done.err, "the CLI's put-away reaps first"
    assert _row(repo, "r/a")["state"] == "no_return"

    answer = _console_act(repo, {"action": how, "job": "by-console"})
    assert answer["deleted"] is (how == "delete")
    # the same trail record from either door, the actor aside
    cli_trail, console_trail = _trail(repo, "by-cli"), _trail(repo, "by-console")
    assert [kind for kind, _ in cli_trail][-1] == [kind for kind, _ in console_trail][-1] == f"job_{how}"
    assert console_trail[-1][1] == "user:console"
    for job_id in ("by-cli", "by-console"):
        row = _row(repo, job_id)
        if how == "delete":
            assert row is None
        else:
            assert row.get("archived" if how == "archive" else "trashed")
