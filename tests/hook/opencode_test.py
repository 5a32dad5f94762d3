"""proctor/hosts/opencode.py: opencode 1.18.33's tool calls, as its plugin hands them to the hook, and the answers the plugin acts on."""

from __future__ import annotations

import json
import os

from proctor.hosts import opencode
from tests.hook.world import LEASED
from tests.support import SHARED_FIXTURES, needs_shared_fixtures

CAPTURES = os.path.join(SHARED_FIXTURES, "hosts", "opencode-1.18.33")


def captured_calls() -> dict:
    """The hook event a plugin sent (plugin-payloads.jsonl: its envelope; that capture's plugin
    renamed the tool for `proctor hook claude`, today's sends opencode's own), and each opencode
    tool call of the runs' streams by tool name: {"envelope": event, "bash": part, "edit": part}."""
    with open(os.path.join(CAPTURES, "plugin-payloads.jsonl")) as handle:
        calls = {"envelope": json.loads(handle.readline())["payload"]}
    for name in ("plugin-deny-shell-stream.jsonl", "run-tools.jsonl"):
        with open(os.path.join(CAPTURES, name)) as handle:
            for line in handle:
                record = json.loads(line)
                if record["type"] == "tool_use":
                    calls.setdefault(record["part"]["tool"], record["part"])
    return calls


def plugin_event(root: str, part: dict, **tool_input) -> dict:
    """The PreToolUse event the plugin builds for a captured tool call: its envelope, in `root`,
    with opencode's own tool name and arguments (changed by `tool_input`)."""
    envelope = captured_calls()["envelope"]
    return {
        **envelope,
        "cwd": root,
        "tool_use_id": part["callID"],
        "tool_name": part["tool"],
        "tool_input": {**part["state"]["input"], **tool_input},
    }


@needs_shared_fixtures
def test_the_captured_shell_write_is_refused_in_the_form_the_plugin_throws(ws, hook):
    calls = captured_calls()
    shell = calls["bash"]
    assert shell["state"]["status"] == "error"  # opencode turned the plugin's throw into the tool's error
    answer = hook(plugin_event(ws, shell), host="opencode", env=LEASED)
    assert set(answer) == {"decision", "reason"} and answer["decision"] == "deny"
    # the reason is what the plugin throws, and opencode showed the model (the captured error)
    prefix = "deny [lease-write-scope]: src/b.py is outside the write paths of "
    assert shell["state"]["error"].startswith(prefix + "plan/w1")
    assert answer["reason"].startswith(prefix + "feat") and answer["reason"].endswith(
        "(acting under lease feat, from env)"
    )
    call = opencode.parse(plugin_event(ws, shell))
    assert (call.session, call.tool_use_id, call.command) == (
        calls["envelope"]["session_id"],
        "call_0_0",
        shell["state"]["input"]["command"],
    )
    # opencode's workdir is where the command runs
    here = plugin_event(ws, shell, command="echo 'A = 2' > a.py", workdir="src")
    assert hook(here, host="opencode", env=LEASED) == {}


@needs_shared_fixtures
def test_the_captured_edit_is_judged_by_its_file_path(ws, hook):
    edit = captured_calls()["edit"]
    assert edit["state"]["input"]["filePath"] == "src/a.py"  # opencode's path, relative to the project
    with open(os.path.join(ws, "src", "a.py"), "w") as handle:
        handle.write("A = 1\n")
    assert hook(plugin_event(ws, edit), host="opencode", env=LEASED) == {}
    answer = hook(plugin_event(ws, edit, filePath="src/b.py"), host="opencode", env=LEASED)
    assert answer["decision"] == "deny" and answer["reason"].startswith("deny [lease-write-scope]: src/b.py")


@needs_shared_fixtures
def test_an_advisory_is_the_plugins_to_append_to_the_output(ws, hook):
    shell = captured_calls()["bash"]
    answer = hook(plugin_event(ws, shell), host="opencode")  # no lease: src/b.py is another job's
    assert set(answer) == {"advisory"} and answer["advisory"].startswith("advise [lease-unattributed]")


def test_render_caps_what_it_says_and_says_nothing_for_a_pass():
    from proctor.guard.call import PRE_TOOL, Call
    from proctor.guard.engine import Verdict

    call = Call("opencode", PRE_TOOL)
    assert opencode.render(call, Verdict([])) == {}
    long = Verdict([("lease-write-scope", "deny", "x" * (opencode.REASON_LIMIT * 2))])
    answer = opencode.render(call, long)
    assert answer["decision"] == "deny" and answer["reason"].startswith("deny [lease-write-scope]: xxx")
    assert answer["reason"].endswith(f"only the first {opencode.REASON_LIMIT} are shown]")
    assert len(answer["reason"]) < opencode.REASON_LIMIT + 200
