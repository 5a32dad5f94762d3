"""proctor/hook/: the hook whatever the host: it reads what it is given and fails open; the
lease it judges under (from the flag, the session's binding, the checkout's marker, a spawn);
which rule settings apply. Each host's own forms: tests/hook/<host>_test.py; each rule's:
tests/guard/rules/<rule>_test.py."""

from __future__ import annotations

import json
import os

import pytest

from tests.support import call_hook, git
from proctor import api
from proctor.hook import run as hook_run
from tests.hook.world import CONFIG, LEASED, advised, denied, event, reason


# -- failing open -----------------------------------------------------------------------------


def test_stop_events_are_read_and_pass(ws, hook):
    stop = {
        "session_id": "s1",
        "transcript_path": "/tmp/x.jsonl",
        "cwd": ws,
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        "last_assistant_message": "done",
        "background_tasks": [],
    }
    assert hook(stop) == {}
    assert hook({**stop, "hook_event_name": "SubagentStop", "agent_id": "a1", "agent_type": "Explore"}) == {}


@pytest.mark.parametrize(
    "payload",
    [
        {"hook_event_name": "PreToolUse"},
        {},
        {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": None},
        {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": 5}},
        {"hook_event_name": "PreToolUse", "tool_name": "Write", "tool_input": {"file_path": ["x"]}},
        {
            "hook_event_name": "PreToolUse",
            "cwd": "/nonexistent/dir",
            "tool_name": "Bash",
            "tool_input": {"command": "ls"},
        },
    ],
)
def test_missing_fields_pass(ws, payload, hook):
    assert hook(payload, env=LEASED) == {}


def test_not_json_passes(ws, hook):
    for data in (b"", b"garbage", b"\xff\xfe", b"[1,2]", b"null", b"{" * 100000):
        assert hook(data) == {}


def test_unknown_host_passes(ws):
    out, code = hook_run(["vim"], b"{}", dict(os.environ))
    assert code == 0 and json.loads(out) == {}


# -- resolving the lease ----------------------------------------------------------------------


def test_exec_through_the_guard_binds_the_session(ws, hook):
    assert hook(event(ws, "Bash", {"command": "proctor job exec feat"}, session="w1")) == {}
    answer = hook(event(ws, "Bash", {"command": "echo > src/b.py"}, session="w1"))
    assert denied(answer, "lease-write-scope") and "from agent" in reason(answer)
    # exactly that session: another session is not bound
    assert advised(hook(event(ws, "Bash", {"command": "echo > src/b.py"}, session="w2")), "lease-unattributed")
    # a subagent of it, bound to no job of its own, acts under the session's job
    sub = hook(event(ws, "Bash", {"command": "echo > src/b.py"}, session="w1", agent_id="a9"))
    assert denied(sub, "lease-write-scope") and "feat" in reason(sub) and "from agent" in reason(sub)
    contested = hook(
        event(ws, "Bash", {"command": "echo > src/b.py"}, session="w1"), env={"BAGGAGE": "proctor.lease=other"}
    )
    assert "from contested" in reason(contested) and "feat" in reason(contested)


def test_flag_outranks_everything(ws, hook):
    answer = hook(
        event(ws, "Bash", {"command": "echo > src/a.py"}),
        env={"BAGGAGE": "proctor.lease=feat"},
        args=("--lease", "other"),
    )
    assert denied(answer, "lease-write-scope") and "from flag" in reason(answer)


def test_checkout_marker_for_callers_without_ids(ws, hook):
    api.exec_job("feat", cwd=ws)
    answer = hook(
        {"hook_event_name": "PreToolUse", "cwd": ws, "tool_name": "Bash", "tool_input": {"command": "echo > src/b.py"}}
    )
    assert denied(answer, "lease-write-scope") and "from marker" in reason(answer)
    with_session = hook(event(ws, "Bash", {"command": "echo > src/b.py"}))
    assert advised(with_session, "lease-unattributed"), "a caller with a session id never reads the marker"


# -- spawns -----------------------------------------------------------------------------------


def _events(root, kind):
    from proctor import trail
    from proctor.paths import find_checkout, repo_state_dir
    from proctor.store import Store

    store = Store(repo_state_dir(find_checkout(root)))
    with store.read() as conn:
        found = trail.events(conn, kind=kind)
    store.close()
    return found


def test_spawn_recorded_never_judged(ws, hook):
    prompt = "lease: feat\n\nRun `rm -rf src/b.py` and `proctor run ci`; write README."
    assert (
        hook(
            event(ws, "Task", {"prompt": prompt, "description": "do it", "subagent_type": "general-purpose"}),
            env=LEASED,
        )
        == {}
    )
    spawned = _events(ws, "agent_spawn")[-1]
    assert spawned["job"] == "feat" and spawned["data"]["action"] == "general-purpose"
    from tests.store.store_oracle import read_blob
    from proctor.paths import find_checkout, repo_state_dir

    assert read_blob(repo_state_dir(find_checkout(ws)), spawned["blob"]).decode() == prompt
    assert hook(event(ws, "Agent", {"prompt": "Please\nlease: feat\n", "description": "x"})) == {}
    assert _events(ws, "agent_spawn")[-1]["job"] is None, "a marker deeper in the prompt stamps nothing"


def test_background_subagent_bound_by_its_agent_id(ws, hook):
    post = event(
        ws,
        "Agent",
        {"prompt": "lease: feat\ngo", "description": "x"},
        name="PostToolUse",
        tool_response={"status": "async_launched", "agentId": "a49bdb08c902ff81f"},
    )
    assert hook(post) == {}
    answer = hook(event(ws, "Bash", {"command": "echo > src/b.py"}, agent_id="a49bdb08c902ff81f"))
    assert denied(answer, "lease-write-scope") and "from agent" in reason(answer)


# -- settings ---------------------------------------------------------------------------------


def test_loosening_applies_once_committed_and_never_to_a_holder_of_an_older_checkpoint(ws, hook):
    with open(os.path.join(ws, "proctor.toml"), "a") as handle:
        handle.write('\n[guard.rules]\nlease-write-scope = "advise"\nlease-base-diverged = "deny"\n')
    command = event(ws, "Bash", {"command": "echo > README"})
    assert denied(hook(command, env=LEASED), "lease-write-scope"), "an uncommitted loosening waits"
    git(ws, "commit", "-qam", "loosen")
    # feat was handed the checkpoint before the loosening: its holder cannot loosen its own rules
    assert denied(hook(command, env=LEASED), "lease-write-scope"), "a holder's commit loosens nothing for it"
    rules = {r["name"]: r["decision"] for r in api.describe_rules(cwd=ws)}
    assert rules["lease-write-scope"] == "advise" and rules["lease-base-diverged"] == "deny"
    api.fork({"id": "later", "write_paths": ["src/a.py"], "check": "test"}, cwd=ws)
    later = {"BAGGAGE": "proctor.lease=later"}
    assert advised(hook(command, env=later), "lease-write-scope"), "a job handed the loosened checkpoint"
    with open(os.path.join(ws, "proctor.toml"), "a") as handle:
        handle.write('lease-gate = "off"\n')
    # TOML: the appended key lands in [guard.rules]; a rule turned off is not evaluated at all
    git(ws, "commit", "-qam", "off")
    api.fork({"id": "latest", "write_paths": ["src/a.py"], "check": "test"}, cwd=ws)
    assert hook(event(ws, "Bash", {"command": "proctor run ci"}), env={"BAGGAGE": "proctor.lease=latest"}) == {}
    assert denied(hook(event(ws, "Bash", {"command": "proctor run ci"}), env=LEASED), "lease-gate")


def test_tightening_applies_at_once(ws, hook):
    api.fork({"id": "old", "write_paths": ["src/o.py"], "check": "test", "checkpoint": "0" * 40}, cwd=ws)
    api.exec_job("old", cwd=ws)
    with open(os.path.join(ws, "proctor.toml"), "a") as handle:
        handle.write('\n[guard.rules]\nlease-base-diverged = "deny"\n')
    answer = hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/o.py")}), env={"BAGGAGE": "proctor.lease=old"})
    assert denied(answer, "lease-base-diverged")


def test_no_store_passes(tmp_path, new_repo, hook):
    root = new_repo("bare", CONFIG)
    answer = hook(event(root, "Bash", {"command": "rm -rf src"}), env=LEASED)
    assert "permissionDecision" not in answer.get("hookSpecificOutput", {}), "at most an advisory"
    assert hook(event(root, "Bash", {"command": "rm -rf src"})) == {}
    assert not os.path.exists(tmp_path / "state"), "the hook does not create a store to pass"


# SQLite's engine itself: a corrupt proctor.db file
@pytest.mark.sqlite_store
def test_corrupt_store_fails_open(ws, hook):
    from proctor.paths import find_checkout, repo_state_dir

    path = os.path.join(repo_state_dir(find_checkout(ws)), "proctor.db")
    for suffix in ("-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    with open(path, "wb") as handle:
        handle.write(b"garbage" * 1000)
    answer = hook(event(ws, "Bash", {"command": "echo > src/b.py"}), env=LEASED)
    assert advised(answer, "lease-unattributed") and "is not a readable SQLite database" in reason(answer)
    assert hook(event(ws, "Bash", {"command": "echo > src/b.py"})) == {}, "no lease claimed: nothing to say"


def test_options_are_not_read_as_names(ws, hook):
    assert denied(hook(event(ws, "Bash", {"command": "proctor run -o json ci"}), env=LEASED), "lease-gate")
    assert denied(hook(event(ws, "Bash", {"command": "proctor run --lease x ci"}), env=LEASED), "lease-gate")
    assert hook(event(ws, "Bash", {"command": "proctor job exec -o json feat"}, session="w5")) == {}
    answer = hook(event(ws, "Bash", {"command": "echo > src/b.py"}, session="w5"))
    assert denied(answer, "lease-write-scope") and "from agent" in reason(answer)


def test_refused_exec_binds_nobody(ws, tmp_path, hook):
    wt = str(tmp_path / "wt")
    git(ws, "worktree", "add", "-q", "-b", "wt", wt)
    api.exec_job("feat", cwd=wt)
    assert hook(event(ws, "Bash", {"command": "proctor job exec feat"}, session="sZ")) == {}
    answer = hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/a.py")}, session="sZ"))
    assert "lease-unattributed" in reason(answer), "not bound to a job taken elsewhere"


# -- subagents bound from their first call (Claude Code 2.1.332's own files) ---------------------

from tests.support import SHARED_FIXTURES, needs_shared_fixtures as needs_host_fixtures  # noqa: E402

HOSTS_FIXTURES = os.path.join(SHARED_FIXTURES, "hosts", "claude-2.1.332")


def _captured(scenario: str) -> list[dict]:
    with open(os.path.join(HOSTS_FIXTURES, scenario, "hook-calls.jsonl"), encoding="utf-8") as handle:
        return [json.loads(line)["in"] for line in handle if line.strip()]


def _lay_out(scenario: str, root: str, home: str, with_subagent_file: bool = True) -> list[dict]:
    """The captured hook payloads of a scenario, pointed at `root` (the repository) and at a
    transcript directory under `home` laid out as Claude Code lays it out: the session's
    transcript, and beside it <session>/subagents/agent-<id>.jsonl (and .meta.json)."""
    calls = _captured(scenario)
    session = calls[0]["session_id"]
    projects = os.path.join(home, "projects", "p")
    subagents = os.path.join(projects, session, "subagents")
    os.makedirs(subagents)
    transcript = os.path.join(projects, session + ".jsonl")
    with (
        open(os.path.join(HOSTS_FIXTURES, scenario, "transcript.jsonl"), "rb") as source,
        open(transcript, "wb") as target,
    ):
        target.write(source.read())
    for name in os.listdir(os.path.join(HOSTS_FIXTURES, scenario)):
        if name.startswith("subagent-agent-") and with_subagent_file:
            with (
                open(os.path.join(HOSTS_FIXTURES, scenario, name), "rb") as source,
                open(os.path.join(subagents, name[len("subagent-") :]), "wb") as target,
            ):
                target.write(source.read())
    spawn = next(c for c in calls if c.get("tool_name") == "Agent" and c["hook_event_name"] == "PreToolUse")
    for call in calls:
        if call.get("agent_id"):
            # the meta file, shaped as 2.1.332 writes it
            with open(os.path.join(subagents, f"agent-{call['agent_id']}.meta.json"), "w", encoding="utf-8") as meta:
                json.dump(
                    {
                        "agentType": "general-purpose",
                        "description": "Edit the files",
                        "toolUseId": spawn["tool_use_id"],
                        "spawnDepth": 1,
                    },
                    meta,
                )
            break
    text = json.dumps(calls)
    old_root = calls[0]["cwd"]
    text = text.replace(json.dumps(old_root)[1:-1], root).replace(
        json.dumps(calls[0]["transcript_path"])[1:-1], transcript
    )
    return json.loads(text)


@pytest.fixture
def planned(new_repo, monkeypatch):
    root = new_repo("repo", CONFIG)
    os.makedirs(os.path.join(root, "src"))
    monkeypatch.chdir(root)
    api.fork({"id": "plan/w1", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.fork({"id": "feat", "write_paths": ["src/c.py"], "check": "test"}, cwd=root)
    return root


def _job(root: str, job_id: str) -> dict:
    return {r["id"]: r for r in api.ls_jobs(cwd=root)["jobs"]}[job_id]


@needs_host_fixtures
def test_foreground_subagent_is_bound_by_its_first_call(planned, tmp_path, hook):
    calls = _lay_out("f_fg", planned, str(tmp_path / "claude"))
    sub = [c for c in calls if c.get("agent_id")]
    first = sub[0]  # a Read: it binds, and passes
    assert hook(first) == {}
    job = _job(planned, "plan/w1")
    assert job["state"] == "running" and job["checkout_root"] == os.path.realpath(planned)
    assert job["base"] == git(planned, "rev-parse", "HEAD").strip() and job["base_diverges"] is False
    write_b = next(
        c
        for c in sub
        if c["hook_event_name"] == "PreToolUse"
        and c["tool_input"].get("file_path", "").endswith("src/b.py")
        and c["tool_name"] == "Write"
    )
    answer = hook(write_b)
    assert denied(answer, "lease-write-scope") and "plan/w1" in reason(answer) and "from agent" in reason(answer)
    write_a = next(
        c
        for c in sub
        if c["hook_event_name"] == "PreToolUse"
        and c["tool_name"] == "Write"
        and c["tool_input"]["file_path"].endswith("src/a.py")
    )
    assert hook(write_a) == {}
    # the parent itself is not bound by its subagent
    parent = dict(write_b)
    parent.pop("agent_id")
    parent.pop("agent_type")
    assert "permissionDecision" not in hook(parent).get("hookSpecificOutput", {})


@needs_host_fixtures
def test_subagent_bound_through_its_meta_file_when_its_transcript_is_missing(planned, tmp_path, hook):
    calls = _lay_out("f_bg_first", planned, str(tmp_path / "claude"), with_subagent_file=False)
    spawn = next(c for c in calls if c.get("tool_name") == "Agent" and c["hook_event_name"] == "PreToolUse")
    assert hook(spawn) == {}  # recorded on the trail, with its job and tool_use_id
    first = next(c for c in calls if c.get("agent_id"))
    assert first["tool_name"] == "Write" and first["tool_input"]["file_path"].endswith("src/c.py")
    answer = hook(first)
    assert denied(answer, "lease-write-scope") and "plan/w1" in reason(answer)


@needs_host_fixtures
def test_subagent_without_a_job_acts_under_its_sessions_job(planned, tmp_path, hook):
    calls = _lay_out("e2", planned, str(tmp_path / "claude"))
    session = calls[0]["session_id"]
    root_call = event(planned, "Bash", {"command": "proctor job exec feat"}, session=session)
    assert hook(root_call) == {}
    sub = next(c for c in calls if c.get("agent_id"))  # spawned with "MARKER-SUB run a helper"
    write = dict(sub, tool_name="Write", tool_input={"file_path": os.path.join(planned, "src/a.py")})
    answer = hook(write)
    assert denied(answer, "lease-write-scope") and "src/a.py is outside the write paths of feat" in reason(answer)
    assert hook(dict(write, tool_input={"file_path": os.path.join(planned, "src/c.py")})) == {}


@needs_host_fixtures
def test_subagent_spawned_for_a_job_beneath_the_session_is_bound_to_it(tmp_path, new_repo, monkeypatch, hook):
    root = new_repo("repo", CONFIG)
    os.makedirs(os.path.join(root, "src"))
    monkeypatch.chdir(root)
    api.fork({"id": "plan", "write_paths": ["src/a.py", "src/c.py"], "check": "test"}, cwd=root)
    api.fork({"id": "plan/w1", "parent": "plan", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    calls = _lay_out("f_fg", root, str(tmp_path / "claude"))
    session = calls[0]["session_id"]
    assert hook(event(root, "Bash", {"command": "proctor job exec plan"}, session=session)) == {}
    sub = next(c for c in calls if c.get("agent_id"))
    write = dict(sub, tool_name="Write", tool_input={"file_path": os.path.join(root, "src/c.py")})
    answer = hook(write)
    assert denied(answer, "lease-write-scope") and "outside the write paths of plan/w1" in reason(answer)
    assert hook(dict(write, tool_input={"file_path": os.path.join(root, "src/a.py")})) == {}


# A spawn is a claim by whoever wrote the prompt: it must not lift a leased agent out of its lease.


def _subagent_write(calls, root, rel):
    sub = next(c for c in calls if c.get("agent_id"))
    return dict(sub, tool_name="Write", tool_input={"file_path": os.path.join(root, rel)})


@needs_host_fixtures
def test_leased_session_cannot_spawn_its_way_into_a_sibling_job(planned, tmp_path, hook):
    calls = _lay_out("f_fg", planned, str(tmp_path / "claude"))
    session = calls[0]["session_id"]
    assert hook(event(planned, "Bash", {"command": "proctor job exec feat"}, session=session)) == {}
    answer = hook(_subagent_write(calls, planned, "src/a.py"))  # plan/w1's path; the prompt says plan/w1
    assert denied(answer, "lease-write-scope") and "outside the write paths of feat" in reason(answer)
    assert "not the spawner's job feat nor beneath it" in reason(answer)
    assert _job(planned, "plan/w1")["state"] == "declared", "the sibling job was not taken"
    own = hook(_subagent_write(calls, planned, "src/c.py"))  # feat's own path: the subagent acts under feat
    assert not denied(own, "lease-write-scope") and "acting under lease feat" in reason(own)


@needs_host_fixtures
@pytest.mark.parametrize("baggage", [False, True])
def test_spawn_naming_an_ended_job_leaves_the_session_lease(planned, tmp_path, baggage, hook):
    calls = _lay_out("f_fg", planned, str(tmp_path / "claude"))
    session = calls[0]["session_id"]
    env = {"BAGGAGE": "proctor.lease=feat"} if baggage else None
    assert hook(event(planned, "Bash", {"command": "proctor job exec feat"}, session=session), env=env) == {}
    api.exit_job("plan/w1", cwd=planned)
    answer = hook(_subagent_write(calls, planned, "src/b.py"), env=env)
    assert denied(answer, "lease-write-scope") and "outside the write paths of feat" in reason(answer)
    assert "which has ended (no_return); it binds nothing" in reason(answer)


@needs_host_fixtures
def test_spawn_naming_no_job_leaves_the_inherited_claim(planned, tmp_path, hook):
    calls = _lay_out("f_fg", planned, str(tmp_path / "claude"))
    # the subagent's prompt names a job nobody declared
    subagents = os.path.join(str(tmp_path / "claude"), "projects", "p", calls[0]["session_id"], "subagents")
    for name in os.listdir(subagents):
        if name.endswith(".jsonl"):
            with open(os.path.join(subagents, name), encoding="utf-8") as handle:
                lines = handle.read().splitlines()
            first = json.loads(lines[0])
            first["message"]["content"] = "lease: no-such-job\nwrite src/b.py"
            with open(os.path.join(subagents, name), "w", encoding="utf-8") as handle:
                handle.write("\n".join([json.dumps(first)] + lines[1:]) + "\n")
    answer = hook(_subagent_write(calls, planned, "src/b.py"), env={"BAGGAGE": "proctor.lease=feat"})
    assert denied(answer, "lease-write-scope") and "outside the write paths of feat" in reason(answer)
    assert "names no job; it binds nothing" in reason(answer)


@needs_host_fixtures
def test_spawn_cannot_take_a_job_running_in_another_checkout(planned, tmp_path, hook):
    other = str(tmp_path / "other")
    git(planned, "worktree", "add", "-q", other)
    assert api.exec_job("plan/w1", cwd=other) is not None
    calls = _lay_out("f_fg", planned, str(tmp_path / "claude"))
    answer = hook(_subagent_write(calls, planned, "src/a.py"))
    assert "is taken in another checkout" in reason(answer)
    assert not (answer == {}), "the subagent is not let through as plan/w1's holder"
    assert os.path.realpath(_job(planned, "plan/w1")["checkout_root"]) == os.path.realpath(other)


def _nested_spawn(calls, root, home, prompt: str, nested_id: str = "anested01") -> dict:
    """Subagent A of the captured session spawns B with `prompt`, as Claude Code 2.1.332 would:
    A's Agent call reaches the hook (recorded as a spawn by A), B's transcript and meta file lie
    beside A's. Returns B's first call, a Write to src/z.py."""
    a = next(c for c in calls if c.get("agent_id"))
    spawn = dict(
        a,
        tool_name="Agent",
        tool_use_id="toolu_nested_spawn",
        tool_input={"prompt": prompt, "description": "nested", "subagent_type": "general-purpose"},
    )
    assert call_hook(spawn) == {}, "a spawn is recorded, never judged"
    subagents = os.path.join(home, "projects", "p", a["session_id"], "subagents")
    with open(os.path.join(subagents, f"agent-{nested_id}.jsonl"), "w", encoding="utf-8") as handle:
        handle.write(json.dumps({"type": "user", "message": {"role": "user", "content": prompt}}) + "\n")
    with open(os.path.join(subagents, f"agent-{nested_id}.meta.json"), "w", encoding="utf-8") as handle:
        json.dump({"agentType": "general-purpose", "toolUseId": "toolu_nested_spawn", "spawnDepth": 2}, handle)
    return dict(
        a,
        agent_id=nested_id,
        tool_name="Write",
        tool_input={"file_path": os.path.join(root, "src", "z.py"), "content": "z"},
    )


@needs_host_fixtures
def test_a_subagents_subagent_is_bounded_by_its_spawner_not_the_session(planned, tmp_path, hook):
    api.fork({"id": "other", "write_paths": ["src/z.py"], "check": "test"}, cwd=planned)
    home = str(tmp_path / "claude")
    calls = _lay_out("f_fg", planned, home)  # the session is unleased; A is spawned with lease: plan/w1
    a_write = _subagent_write(calls, planned, "src/c.py")
    assert denied(hook(a_write), "lease-write-scope"), "A acts under plan/w1 from its first call"
    b_write = _nested_spawn(calls, planned, home, "lease: other\nwrite src/z.py")
    answer = hook(b_write)
    assert denied(answer, "lease-write-scope") and "outside the write paths of plan/w1" in reason(answer)
    assert "not the spawner's job plan/w1 nor beneath it" in reason(answer)
    assert _job(planned, "other")["state"] == "declared", "B did not take a job outside its spawner's"


@needs_host_fixtures
def test_a_subagents_subagent_with_no_lease_line_acts_under_its_spawner(planned, tmp_path, hook):
    home = str(tmp_path / "claude")
    calls = _lay_out("f_fg", planned, home)
    assert denied(hook(_subagent_write(calls, planned, "src/c.py")), "lease-write-scope")
    answer = hook(_nested_spawn(calls, planned, home, "write src/z.py please"))
    assert denied(answer, "lease-write-scope") and "outside the write paths of plan/w1" in reason(answer)


@needs_host_fixtures
def test_subagent_naming_an_ended_job_binds_nothing(planned, tmp_path, hook):
    calls = _lay_out("f_fg", planned, str(tmp_path / "claude"))
    api.exit_job("plan/w1", cwd=planned)
    sub = next(c for c in calls if c.get("agent_id"))
    write = dict(sub, tool_name="Write", tool_input={"file_path": os.path.join(planned, "src/b.py")})
    answer = hook(write)
    assert advised(answer, "lease-unattributed") and "which has ended (no_return); it binds nothing" in reason(answer)
    assert _job(planned, "plan/w1")["state"] == "no_return"
