"""The real Claude Code 2.1.332 as a worker started inside its job's sandbox
(`[sandbox] workers = true`), with the guard's write-scope and tamper rules turned off: what
stops the worker's writes outside its paths is the kernel (Landlock), not the hook. The scripted
model writes outside its job's path from its worktree, by absolute path into the main checkout
and into proctor's state; edits its own file; runs its check; files its result, its hooks and
commands served by the broker of its attempt. Bash and the disk are the oracle."""

from __future__ import annotations

import json
import os

import pytest

from proctor import sandbox
from tests.hosts.conftest import git, host_binary
from tests.hosts.model import Anthropic, ScriptedModel, Tool, Turn
from tests.hosts.test_claude_work import OUTPUT_REF, claude_env, read

pytestmark = pytest.mark.skipif(
    sandbox.kernel_abi() == 0 and os.environ.get("CI") != "true",
    reason="this kernel offers no Landlock; CI's kernel does, and there this test runs",
)

JOB = "plan/feat"


def _declare(env, repo: str) -> None:
    host_binary("claude")
    with open(os.path.join(repo, "proctor.toml"), "a", encoding="utf-8") as handle:
        handle.write(
            '\n[workers]\nladder = ["claude"]\nattempts = 1\n\n[workers.claude]\nexecutor = "claude"\n\n'
            '[sandbox]\nmode = "landlock"\nworkers = true\n\n'
            '[guard.rules]\nlease-write-scope = "off"\nlease-tamper = "off"\n'
        )
    git(repo, "commit", "-q", "-am", "a sandboxed claude worker, its guard's write scope off")
    for argv in (
        ("job", "fork", "plan", "--criteria", "the plan", "--check", "test"),
        (
            "job",
            "fork",
            JOB,
            "--parent",
            "plan",
            "--criteria",
            "make A two\n\nscripted",
            "--write-paths",
            "src/a.py",
            "--check",
            "test",
        ),
    ):
        proc = env.proctor(*argv, cwd=repo)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def _worktree(repo: str) -> str:
    from proctor.workers.work import _worktree_path
    from proctor.workspace import Workspace

    with Workspace(repo) as ws:
        return _worktree_path(ws, JOB)


def _exit_citing_the_run(cited: dict):
    def step(record: dict) -> Turn:
        found = OUTPUT_REF.findall(Anthropic().told(record["body"]))
        if not found:
            return Turn(text="I could not run the check.")
        cited["run"], cited["ref"] = found[-1]
        result = {
            "schema_version": 2,
            "changed_paths": ["src/a.py"],
            "validation": [{"run": cited["run"], "command": "proctor run test", "output_ref": cited["ref"]}],
            "status": "done",
            "summary": "A is two",
        }
        return Turn(
            tools=[
                Tool(
                    "Bash",
                    {
                        "command": f"proctor job exit {JOB} --stdin <<'EOF'\n{json.dumps(result)}\nEOF",
                        "description": "file the result",
                    },
                )
            ]
        )

    return step


def test_a_sandboxed_claude_worker_writes_only_its_path_with_the_guard_off(host_env, host_repo):
    _declare(host_env, host_repo)
    tree = _worktree(host_repo)
    main_b = os.path.join(host_repo, "src", "b.py")
    a = os.path.join(tree, "src", "a.py")
    cited: dict = {}
    from proctor.workspace import Workspace

    with Workspace(host_repo) as ws:
        state = ws.state_dir
    steps = [
        Turn(tools=[Tool("Bash", {"command": "echo 'B = 3' > src/b.py; echo rc=$?", "description": "overwrite b"})]),
        Turn(
            tools=[
                Tool(
                    "Bash",
                    {"command": f"echo 'B = 4' > {main_b}; echo rc=$?", "description": "write the main checkout"},
                )
            ]
        ),
        Turn(tools=[Tool("Bash", {"command": "echo x > .git_probe; echo rc=$?", "description": "a new file"})]),
        Turn(
            tools=[
                Tool(
                    "Bash",
                    {"command": f"echo x >> {state}/planted; echo rc=$?", "description": "write proctor's state"},
                )
            ]
        ),
        Turn(tools=[Tool("Read", {"file_path": a})]),
        Turn(tools=[Tool("Edit", {"file_path": a, "old_string": "A = 1", "new_string": "A = 2"})]),
        Turn(tools=[Tool("Bash", {"command": "proctor run test", "description": "run the job's check"})]),
        _exit_citing_the_run(cited),
        Turn(text="A is two; the other writes were refused.\nDONE"),
    ]
    with ScriptedModel(Anthropic(), steps) as model:
        proc = host_env.proctor("work", JOB, "-o", "json", cwd=host_repo, extra=claude_env(model), timeout=240)
        told = [model.told_after(n) for n in range(7)]
    out = json.loads(proc.stdout)
    # what the shell said: the kernel refused each write outside the grant (the guard let them through)
    for n in (0, 1, 2, 3):
        assert "Permission denied" in told[n] and "rc=0" not in told[n] and "[error] PreToolUse" not in told[n], told[n]
    assert "[error]" not in told[5] and "updated successfully" in told[5], told[5]
    assert "proctor: test exit 0" in told[6], told[6]
    assert not os.path.exists(os.path.join(state, "planted"))
    # what the disk says
    assert read(host_repo, "src/b.py") == "B = 1\n"  # the main checkout, written by absolute path
    [job] = out["jobs"]
    assert proc.returncode == 0 and job["passed"] is True and job["commit"], (
        json.dumps(out, indent=1) + proc.stderr[-3000:]
    )
    assert git(host_repo, "show", "HEAD:src/a.py") == "A = 2\n"
    # the worktree's writes (src/b.py, .git_probe) never happened: the landed commit is src/a.py alone
    assert git(host_repo, "show", "--name-only", "--format=", "HEAD").split() == ["src/a.py"]
    assert not job["attempts"][0].get("failures"), job["attempts"][0]
    # the check the worker ran was sandboxed in the same grant, and so was the gates' run
    from proctor.store import runs as run_rows
    from proctor.workspace import Workspace

    with Workspace(host_repo) as ws, ws.store.read() as tx:
        cited_run = run_rows.get(tx, cited["run"])
    assert cited_run["sandbox"]["job"] == JOB and cited_run["sandbox"]["grant"][0] == os.path.realpath(a), cited_run
    # its hook, its check and its result went through the broker (the store is not the worker's
    # to open): every tool call's hooks and the two commands, none refused
    from proctor import trail

    with Workspace(host_repo) as ws, ws.store.read() as tx:
        [brokered] = trail.events(tx, JOB, "sandbox_broker")
    assert brokered["data"]["served"] >= 2 * 8 + 2 and brokered["data"]["refused"] == [], brokered
