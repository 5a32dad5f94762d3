"""proctor/hosts/gemini.py: Gemini CLI 0.61.0's events through the hook: its tool arguments, where its answers reach the model, its trust."""

from __future__ import annotations

import json
import os

from tests.hook.world import LEASED


def test_gemini_forms(ws, hook):
    base = {
        "session_id": "g1",
        "transcript_path": None,
        "cwd": ws,
        "hook_event_name": "BeforeTool",
        "timestamp": "2026-11-30T00:00:00Z",
    }
    deny = hook(
        {**base, "tool_name": "run_shell_command", "tool_input": {"command": "echo x > src/b.py"}},
        host="gemini",
        env=LEASED,
    )
    assert deny["decision"] == "deny" and deny["reason"].startswith("deny [lease-write-scope]")
    write = hook(
        {**base, "tool_name": "write_file", "tool_input": {"file_path": os.path.join(ws, "README")}},
        host="gemini",
        env=LEASED,
    )
    assert write["decision"] == "deny"
    assert (
        hook(
            {
                **base,
                "tool_name": "replace",
                "tool_input": {"file_path": os.path.join(ws, "src/a.py"), "old_string": "a", "new_string": "b"},
            },
            host="gemini",
            env=LEASED,
        )
        == {}
    )


def gemini_event(root, tool, tool_input, name="BeforeTool", session="g-1", **extra):
    """A payload shaped as Gemini CLI 0.61.0 sends it (fixtures/hosts/gemini-0.61.0): no call id."""
    return {
        "session_id": session,
        "transcript_path": "/tmp/none.json",
        "cwd": root,
        "hook_event_name": name,
        "timestamp": "2026-12-01T08:21:20.206Z",
        "tool_name": tool,
        "tool_input": tool_input,
        **extra,
    }


def test_gemini_dir_path_is_where_a_shell_command_runs(ws, hook):
    def deny_text(tool_input):
        answer = hook(gemini_event(ws, "run_shell_command", tool_input), host="gemini", env=LEASED)
        return answer.get("reason", "") if answer.get("decision") == "deny" else ""

    assert (
        hook(
            gemini_event(ws, "run_shell_command", {"command": "echo x > a.py", "dir_path": "src"}),
            host="gemini",
            env=LEASED,
        )
        == {}
    )
    for directory in ("src", os.path.join(ws, "src")):
        reason_text = deny_text({"command": "echo x > b.py", "dir_path": directory, "description": "d"})
        assert reason_text.startswith("deny [lease-write-scope]: src/b.py is outside the write paths of feat")
    assert deny_text({"command": "echo x > a.py"}).startswith("deny [lease-write-scope]: a.py is outside")


def test_gemini_tool_arguments_are_read():
    from proctor.hosts import gemini

    def parsed(tool, tool_input):
        return gemini.parse(gemini_event("/r", tool, tool_input))

    assert parsed("list_directory", {"dir_path": "src"}).reads == ["src"]
    assert parsed("glob", {"pattern": "*.py", "dir_path": "/r/src"}).reads == ["/r/src"]
    grep = parsed("grep_search", {"pattern": "TODO", "dir_path": "lib"})
    assert grep.reads == ["lib"] and not grep.writes and grep.command is None
    assert parsed("read_file", {"file_path": "src/a.py"}).reads == ["src/a.py"]
    assert parsed("read_many_files", {"include": ["src/*.py"]}).reads == ["src/*.py"]
    fetch = parsed("web_fetch", {"prompt": "summarise https://example.invalid"})
    assert fetch.prompt is None and fetch.spawn_label is None, "web_fetch is not a delegation"
    agent = parsed("invoke_agent", {"agent_name": "codebase_investigator", "prompt": "lease: feat\nlook"})
    assert agent.prompt == "lease: feat\nlook" and agent.spawn_label == "codebase_investigator"
    shell = parsed("run_shell_command", {"command": "ls", "dir_path": "sub", "is_background": True})
    assert shell.cwd == "/r/sub" and shell.background is True


def test_gemini_advisory_is_carried_to_the_after_tool_answer(ws, hook):
    command = {"command": "T=src/a.py; echo 'A = 2' > \"$T\"", "description": "scripted command"}
    before = hook(gemini_event(ws, "run_shell_command", command), host="gemini", env=LEASED)
    assert set(before) == {"systemMessage"}  # the person's terminal; Gemini drops it for the model
    assert "advise [lease-write-scope]: cannot tell what this writes" in before["systemMessage"]
    response = {"llmContent": "Output: (empty)", "returnDisplay": ""}
    other = hook(
        gemini_event(ws, "run_shell_command", command, name="AfterTool", session="g-2", tool_response=response),
        host="gemini",
        env=LEASED,
    )
    assert other == {}, "another session's call does not take it"
    after = hook(
        gemini_event(ws, "run_shell_command", command, name="AfterTool", tool_response=response),
        host="gemini",
        env=LEASED,
    )
    assert set(after) == {"hookSpecificOutput"} and after["hookSpecificOutput"]["hookEventName"] == "AfterTool"
    assert after["hookSpecificOutput"]["additionalContext"] == before["systemMessage"]
    again = hook(
        gemini_event(ws, "run_shell_command", command, name="AfterTool", tool_response=response),
        host="gemini",
        env=LEASED,
    )
    assert again == {}, "each carry is delivered once"


def test_gemini_after_tool_advisory_and_after_agent_deny_forms():
    from proctor.guard.call import POST_TOOL, STOP, Call
    from proctor.guard.engine import Verdict
    from proctor.hosts import gemini

    advise = Verdict([("lease-unattributed", "advise", "src/b.py is held by other")], "feat", "env")
    answer = gemini.render(Call("gemini", POST_TOOL), advise)
    assert answer == {"hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": advise.text()}}
    followup = Verdict([("monitor-followup", "deny", "Follow-up from the monitors of job feat")], "feat", "env")
    assert gemini.render(Call("gemini", STOP), followup) == {"decision": "deny", "reason": followup.text()}
    assert gemini.render(Call("gemini", STOP), Verdict([])) == {}


def _gemini_home(tmp_path, monkeypatch):
    for name in (
        "GEMINI_CLI_TRUST_WORKSPACE",
        "GEMINI_RESTRICTED_MODE",
        "GEMINI_CLI_TRUSTED_FOLDERS_PATH",
        "GEMINI_CLI_HOME",
    ):
        monkeypatch.delenv(name, raising=False)
    root, home = tmp_path / "work" / "repo", tmp_path / "home"
    (root / ".gemini").mkdir(parents=True)
    (home / ".gemini").mkdir(parents=True)
    return str(root), str(home)


def _write(path, value) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(value if isinstance(value, str) else json.dumps(value))


def _printed_wiring() -> dict:
    from proctor.hosts import gemini

    return json.loads("\n".join(line for line in gemini.wiring().splitlines() if not line.startswith("#")))


def test_gemini_wired_reads_trust(tmp_path, monkeypatch):
    from proctor.hosts.gemini import wired

    root, home = _gemini_home(tmp_path, monkeypatch)
    ok, text = wired(root, home)
    assert not ok and text.startswith("missing")
    _write(os.path.join(root, ".gemini", "settings.json"), _printed_wiring())
    ok, text = wired(root, home)
    assert not ok and "only in a trusted folder" in text and "GEMINI_CLI_TRUST_WORKSPACE=true" in text
    assert "exits 55" in text and "--skip-trust" in text
    trusted = os.path.join(home, ".gemini", "trustedFolders.json")
    _write(trusted, {os.path.realpath(root): "TRUST_FOLDER"})
    ok, text = wired(root, home)
    assert ok and "TRUST_FOLDER" in text
    # TRUST_PARENT on the repository trusts its parent, and so the repository; the longest rule wins
    _write(trusted, {os.path.join(os.path.dirname(root), "sibling"): "TRUST_PARENT"})
    assert wired(root, home)[0]
    _write(trusted, {os.path.dirname(root): "TRUST_FOLDER", root: "DO_NOT_TRUST"})
    ok, text = wired(root, home)
    assert not ok and "DO_NOT_TRUST" in text
    monkeypatch.setenv("GEMINI_CLI_TRUST_WORKSPACE", "true")
    ok, text = wired(root, home)
    assert ok and "trusted by GEMINI_CLI_TRUST_WORKSPACE=true" in text
    monkeypatch.delenv("GEMINI_CLI_TRUST_WORKSPACE")
    # folder trust turned off in the user's settings: every folder is trusted
    _write(os.path.join(home, ".gemini", "settings.json"), {"security": {"folderTrust": {"enabled": False}}})
    assert wired(root, home)[0]


def test_gemini_wired_in_user_settings_always_loads(tmp_path, monkeypatch):
    from proctor.hosts.gemini import wired

    root, home = _gemini_home(tmp_path, monkeypatch)
    user = os.path.join(home, ".gemini", "settings.json")
    text = json.dumps(_printed_wiring(), indent=2)
    # Gemini reads its settings with comments and trailing commas
    _write(user, "// proctor's guard\n" + text.replace('"AfterAgent"', '/* stop */ "AfterAgent"')[:-1] + ",\n}")
    ok, where = wired(root, home)
    assert ok and where == f"present in {user}"
    partial = _printed_wiring()
    del partial["hooks"]["AfterTool"]
    _write(user, partial)
    ok, where = wired(root, home)
    assert not ok and "AfterTool not wired" in where
    _write(user, {**_printed_wiring(), "hooksConfig": {"enabled": False}})
    ok, where = wired(root, home)
    assert not ok and "hooksConfig.enabled = false" in where
    _write(user, {**_printed_wiring(), "hooksConfig": {"disabled": ["proctor hook gemini"]}})
    assert not wired(root, home)[0]
