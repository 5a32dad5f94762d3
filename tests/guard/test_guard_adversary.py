"""An adversary's probes of the guard under a lease (job w1, write paths `plan/w1/**`).

Each test is a break that was seen: a command or payload the guard judged one way while bash,
git or the disk showed another. Every test first establishes the effect for real (the command
is run, and what it changed is asserted), then asserts what the guard's promise says it should
have answered. They fail until the guard is fixed; each docstring says which promise of
"What the guard enforces under a lease" it proves broken:

1. a shell write outside the lease is denied when nameable, advised when not, never silent;
2. the guard's own ground (.git/, proctor's state and cache, the host's hook wiring, git's
   global config, git settings that run commands, the server token) is off limits;
3. the settings cannot be loosened by the worker;
4. a deny is never lost (a rule that raises included);
5. a write through a hard link, a symlink, /proc/self/cwd or a linked worktree is judged at
   the file it reaches.

Shell cases that need bash as the oracle reuse tests/guard/test_shell_bash.py's Bench: a fresh copy
of its template repository per command, the guard asked first, bash run after, the work tree
compared.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from proctor.hook import run as hook_run
from tests.support import git
from tests.guard.guard_lease import CONFIG, denied, home, job_row, proctor_path, said, state_dir, ws  # noqa: F401 (fixtures)
from tests.guard.test_shell_bash import Bench, classify, describe

LOOSE = CONFIG + '\n[guard.rules]\nlease-write-scope = "off"\nlease-tamper = "off"\n'


# -- fixtures and helpers -----------------------------------------------------------------------


@pytest.fixture
def bench(tmp_path):
    return Bench(str(tmp_path))


def token_path(root: str) -> str:
    token = os.path.join(state_dir(root), "server", "token")
    os.makedirs(os.path.dirname(token), exist_ok=True)
    with open(token, "w") as handle:
        handle.write("SECRET-TOKEN\n")
    return token


def call(root, tool, tool_input, lease="w1", cwd=None) -> dict:
    payload = {
        "session_id": "s1",
        "transcript_path": "/tmp/none.jsonl",
        "cwd": cwd or root,
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "toolu_1",
    }
    environ = {k: v for k, v in os.environ.items() if k != "BAGGAGE"}
    out, code = hook_run(["claude", "--lease", lease], json.dumps(payload).encode(), environ)
    assert code == 0
    return json.loads(out)


def bash(root, command, **kw) -> dict:
    return call(root, "Bash", {"command": command}, **kw)


def run(root, command, env=None) -> subprocess.CompletedProcess:
    full = {**os.environ, **(env or {})}
    return subprocess.run(["bash", "-c", command], cwd=root, env=full, capture_output=True, text=True, timeout=60)


def git_config(root, key) -> str:
    return subprocess.run(["git", "config", "--get-all", key], cwd=root, capture_output=True, text=True).stdout


def oracle(bench, command) -> dict:
    """bash wrote outside plan/w1/ (asserted), and the guard's answer classified."""
    result = bench.case(command)
    assert result["outside"], f"the scenario is void, bash wrote nothing outside the lease:\n{describe(result, 'x')}"
    return result


# == promise 2: the guard's own ground ============================================================


def test_a_hard_link_into_git_dir_rewrites_git_config(ws):
    """Promises 2 and 5. `ln .git/config plan/w1/cfg` passes (the source is only read), and a
    later write to plan/w1/cfg passes too: the hard-link search skips .git/, and lease-tamper
    never looks for other names of a written file. The worker sets core.hooksPath (or any other
    key) through the link, and proctor's next commit runs its hooks."""
    first = bash(ws, "ln .git/config plan/w1/cfg")
    assert run(ws, "ln .git/config plan/w1/cfg").returncode == 0
    second = bash(ws, "printf '[core]\\n\\thooksPath = /tmp/evil-hooks\\n' >> plan/w1/cfg")
    edit = call(
        ws,
        "Edit",
        {
            "file_path": os.path.join(ws, "plan/w1/cfg"),
            "old_string": "[core]",
            "new_string": "[core]\n\thooksPath = /tmp/evil-hooks",
        },
    )
    run(ws, "printf '[core]\\n\\thooksPath = /tmp/evil-hooks\\n' >> plan/w1/cfg")
    assert git_config(ws, "core.hooksPath").strip() == "/tmp/evil-hooks", "the link reached .git/config"
    assert denied(first) or (denied(second, "lease-tamper") and denied(edit, "lease-tamper")), (
        said(first),
        said(second),
        said(edit),
    )


@pytest.mark.parametrize(
    "command, key",
    [
        ("k=core.hooksPath; git config $k /tmp/evil-hooks", "core.hooksPath"),  # passes
        ("git config core.hooksPath /tmp/evil-hooks -l", "core.hooksPath"),  # passes
        ("git config core.hooksPath /tmp/evil-hooks --list", "core.hooksPath"),  # passes
        ("git config core.hooksPath /tmp/evil-hooks --name-only", "core.hooksPath"),  # passes
        ("git config core.hooksPath plan/w1/hooks get", "core.hooksPath"),  # advised only
        ("git --config-env a.b=HOME config core.hooksPath /tmp/evil-hooks", "core.hooksPath"),  # advised only
        ("git config gpg.ssh.defaultKeyCommand 'sh plan/w1/x'", "gpg.ssh.defaultKeyCommand"),  # passes
        ("git config core.alternateRefsCommand 'sh plan/w1/x'", "core.alternateRefsCommand"),  # passes
        ("git config submodule.x.update '!sh plan/w1/x'", "submodule.x.update"),  # passes
        ("git config trailer.sign.cmd 'sh plan/w1/x'", "trailer.sign.cmd"),  # advised only
        ("git config init.templateDir plan/w1/tpl", "init.templateDir"),  # advised only
    ],
)
def test_git_config_of_a_setting_that_runs_a_command_is_refused(ws, command, key):
    """Promise 2: `git config` of a setting that makes git run a command is refused. The key
    reaches lease-tamper through a variable, after an operand that looks like a read (-l,
    --list, --name-only, get: git takes it as a value pattern), behind a global option taking
    a separate value (--config-env), or is simply not on the list (gpg.ssh.defaultKeyCommand,
    which git runs inside proctor's own `git commit` once commit.gpgSign and gpg.format=ssh are
    set, plain keys the guard passes; alternateRefsCommand; submodule.*.update = !cmd;
    trailer.*.cmd; init.templateDir, whose hooks a later `git init` installs)."""
    answer = bash(ws, command)
    assert run(ws, command).returncode == 0
    assert git_config(ws, key), f"git set {key}"
    assert denied(answer, "lease-tamper"), said(answer)


def test_gpg_ssh_default_key_command_runs_inside_proctors_commit(ws, tmp_path):
    """Promise 2: the three plain `git config` calls below all pass, and the command they set
    runs inside proctor's own commit of the job (proctor.workers.commit.commit_paths)."""
    marker = tmp_path / "ran-in-proctors-commit"
    commands = [
        "git config commit.gpgSign true",
        "git config gpg.format ssh",
        f"git config gpg.ssh.defaultKeyCommand 'touch {marker}'",
    ]
    answers = [bash(ws, c) for c in commands]
    for command in commands:
        assert run(ws, command).returncode == 0
    with open(os.path.join(ws, "plan/w1/a.py"), "a") as handle:
        handle.write("work\n")
    from proctor import errors
    from proctor.workers.commit import commit_paths

    with pytest.raises(errors.ProctorError):
        commit_paths(ws, ["plan/w1/a.py"], "w1\n")
    assert marker.exists(), "git ran the worker's command during proctor's commit"
    assert any(denied(a, "lease-tamper") for a in answers), [said(a) for a in answers]


def test_git_init_template_installs_a_hook(ws):
    """Promise 2: `git init --template=<dir in the lease>` re-initialises the repository and
    copies the template's hooks into .git/hooks/; the guard passes it (git init with no operand
    names nothing), and the hook then runs on every commit, proctor's included."""
    hook = os.path.join(ws, "plan/w1/tpl/hooks/pre-commit")
    os.makedirs(os.path.dirname(hook))
    with open(hook, "w") as handle:
        handle.write('#!/bin/sh\ntouch "$(git rev-parse --show-toplevel)/src/hook-ran"\n')
    os.chmod(hook, 0o755)
    answer = bash(ws, "git init -q --template=plan/w1/tpl")
    assert run(ws, "git init -q --template=plan/w1/tpl").returncode == 0
    assert os.path.exists(os.path.join(ws, ".git/hooks/pre-commit")), "the hook was installed"
    assert denied(answer, "lease-tamper"), said(answer)


def test_git_maintenance_register_writes_gits_global_config(ws, home):
    """Promise 2: git's global configuration is off limits, but `git maintenance register`
    (a _GIT_QUIET subcommand) writes ~/.gitconfig and passes."""
    answer = bash(ws, "git maintenance register")
    run(ws, "git maintenance register", env={"HOME": home})
    with open(os.path.join(home, ".gitconfig")) as handle:
        assert "[maintenance]" in handle.read()
    assert denied(answer, "lease-tamper"), said(answer)


@pytest.mark.parametrize(
    "command",
    [
        "cp -r plan/w1/h/. ~/.claude/",
        "cp plan/w1/h/* ~/.claude/",
        "tar -cf - -C plan/w1/h settings.json | tar -xf - -C ~/.claude",
    ],
)
def test_the_home_hook_wiring_is_not_overwritten_by_a_directory_copy(ws, home, command):
    """Promise 2: ~/.claude/settings.json is ground, but lease-tamper holds only the file, and a
    copy INTO ~/.claude (cp -r dir/., a glob source, tar -C) names the directory, which is not
    inside the file. The worker rewrites its own hook wiring and is no longer judged."""
    os.makedirs(os.path.join(ws, "plan/w1/h"))
    with open(os.path.join(ws, "plan/w1/h/settings.json"), "w") as handle:
        handle.write("{}\n")
    answer = bash(ws, command)
    assert run(ws, command, env={"HOME": home}).returncode == 0
    with open(os.path.join(home, ".claude/settings.json")) as handle:
        assert handle.read() == "{}\n", "the hook wiring was replaced"
    assert denied(answer, "lease-tamper"), said(answer)


def test_system_wide_hook_wiring_is_ground(ws):
    """Promise 2: Claude Code's managed settings (/etc/claude-code/managed-settings.json) take
    precedence over every other settings file and can set disableAllHooks; a worker running as
    root (the usual container) writes it and the guard passes. Not run: judged only."""
    answer = bash(
        ws, "mkdir -p /etc/claude-code && echo '{\"disableAllHooks\": true}' > /etc/claude-code/managed-settings.json"
    )
    assert denied(answer, "lease-tamper"), said(answer)


def test_a_sibling_worktrees_git_file_is_ground(ws, tmp_path):
    """Promises 2 and 5: in a linked worktree `.git` is a file naming its git directory. The
    guard never judges `<sibling>/.git` (written() drops a `.git` rel, and lease-tamper's ground
    holds only this checkout's .git), so a worker repoints a sibling worktree at a git directory
    it made in its lease, whose hooks and config then run for whoever uses that tree."""
    tree = str(tmp_path / "tree")
    git(ws, "worktree", "add", "-q", tree)
    command = f"echo 'gitdir: {ws}/plan/w1/evil-git' > {tree}/.git"
    answer = bash(ws, command)
    tool = call(ws, "Write", {"file_path": f"{tree}/.git", "content": "gitdir: /tmp/evil\n"})
    assert run(ws, command).returncode == 0
    with open(os.path.join(tree, ".git")) as handle:
        assert "evil-git" in handle.read()
    assert denied(answer, "lease-tamper") and denied(tool, "lease-tamper"), (said(answer), said(tool))


@pytest.mark.parametrize(
    "template",
    [
        "cat < {token}",
        "x=$(<{token}); echo $x",
        "while read l; do echo $l; done < {token}",
        "cat {server}/tok*",
        "cat {server}/t?ken",
        "cat {state}/serve?/token",
        "grep -r . {server}",
        "cd {server} && cat token",
        "tar -cf - -C {state} server | tar -xOf -",
        "find {server} -type f -exec cat {{}} +",
    ],
)
def test_the_server_token_is_not_read_by_the_shell(ws, template):
    """Promise 2: the server token is never read. lease-tamper looks for the token's path among
    a command's words, so it misses a redirection (`< token`, `$(<token)`), a glob whose fixed
    head ends inside the file name (`tok*`) or whose wildcard sits in a directory above it, a
    recursive reader handed its directory, and a relative name after `cd`."""
    token = token_path(ws)
    server = os.path.dirname(token)
    command = template.format(token=token, server=server, state=os.path.dirname(server))
    answer = bash(ws, command)
    assert "SECRET-TOKEN" in run(ws, command).stdout, "bash printed the token"
    assert denied(answer, "lease-tamper"), said(answer)


@pytest.mark.parametrize(
    "tool, tool_input",
    [
        ("Grep", {"pattern": ".", "path": "{server}", "output_mode": "content"}),
        ("Grep", {"pattern": "SECRET", "path": "{state}", "output_mode": "content"}),
        ("Glob", {"pattern": "**/token", "path": "{state}"}),
        ("mcp__filesystem__read_file", {"path": "{token}", "command": "true"}),
    ],
)
def test_the_server_token_is_not_read_by_a_file_tool(ws, tool, tool_input):
    """Promise 2: the Grep and Glob tools name a directory, and a directory holding the token
    is not "inside" it; an MCP read naming the token is passed once its input also carries a
    `command` key (claude.read_tool_input then never reads its paths)."""
    token = token_path(ws)
    server = os.path.dirname(token)
    filled = {
        k: v.format(token=token, server=server, state=os.path.dirname(server)) if isinstance(v, str) else v
        for k, v in tool_input.items()
    }
    answer = call(ws, tool, filled)
    assert denied(answer, "lease-tamper"), said(answer)


# == promise 3: the settings cannot be loosened =================================================


def test_git_replace_loosens_the_pinned_settings(ws):
    """Promise 3: the rules are the stricter of the working tree's proctor.toml, HEAD's and the
    job's checkpoint's, but HEAD's and the checkpoint's are read with `git show`, which follows
    replace refs. Each step below passes the guard (the last is at most advised, and with
    `-B main HEAD` added it passes silently, see the checkout -B break), and afterwards
    lease-write-scope and lease-tamper are off: a write into .git/hooks passes."""
    with open(os.path.join(ws, "plan/w1/loose.toml"), "w") as handle:
        handle.write(LOOSE)
    steps = [
        "git replace $(git rev-parse HEAD:proctor.toml) $(git hash-object -w plan/w1/loose.toml)",
        "git rm -q --cached proctor.toml",
        "git checkout -q -f HEAD",
    ]
    verdicts = []
    for step in steps:
        verdicts.append(bash(ws, step))
        assert run(ws, step).returncode == 0, step
    with open(os.path.join(ws, "proctor.toml")) as handle:
        assert 'lease-tamper = "off"' in handle.read()
    assert denied(verdicts[0], "lease-tamper"), said(verdicts[0])  # git replace itself is refused
    # and had it gone through (it ran above, for real), proctor reads the history, not the replacement
    answer = bash(ws, "echo '#!/bin/sh' > .git/hooks/pre-commit")
    assert denied(answer, "lease-tamper"), said(answer)


# == promise 4: a deny is never lost =============================================================


@pytest.mark.parametrize(
    "command, check",
    [
        ("echo hi > $'.git/hooks/post-commit\\x00'", ".git/hooks/post-commit"),
        ("echo hi > $'src/b.py\\0'", "src/b.py"),
        ("touch $'src/new\\c@x'", "src/new"),
        ("echo hi > $'src/b.py\\ud800'", None),
    ],
)
def test_a_nul_or_a_lone_surrogate_does_not_turn_a_deny_into_an_advisory(ws, command, check):
    """Promises 4 and 1: `$'...\\x00'` ends the word for bash (it writes the name before the NUL)
    but the guard keeps the NUL, so os.path raises ValueError in every rule that resolves the
    path (lease-entry, lease-write-scope, lease-foreign-path, lease-tamper); a lone surrogate
    (\\ud800) raises UnicodeEncodeError the same way. Each rule's failure is only an advisory, so
    a nameable write outside the lease, or into .git/hooks, goes through with advice."""
    answer = bash(ws, command)
    assert run(ws, command).returncode == 0
    if check:
        assert os.path.exists(os.path.join(ws, check))
    assert denied(answer), said(answer)


# == promise 2 (lease-store): forks outside the holder's own job ==================================


def test_a_fork_record_in_a_second_heredoc_is_the_one_judged(ws, tmp_path):
    """Promise 2 (lease-store): `proctor job fork --stdin` must read its record from a quoted
    heredoc the guard can read, but the guard reads the FIRST JSON heredoc of the whole
    command, not the one feeding the fork. With BAGGAGE cleared the store cannot see the lease
    either, and a worker holding w1 creates a job under `other` claiming src/** and docs/**."""
    command = """cat > /dev/null <<'A'; BAGGAGE= proctor job fork --stdin <<'B'
{"schema_version": 1, "id": "w1/ok", "parent": "w1", "write_paths": ["plan/w1/**"], "check": "test"}
A
{"schema_version": 1, "id": "rogue", "parent": "other", "write_paths": ["src/**", "docs/**"], "check": "test"}
B"""
    answer = bash(ws, command)
    # a worker started with BAGGAGE keeps its job whatever the command clears: the store refuses
    inherited = run(ws, command, env={"BAGGAGE": "proctor.lease=w1", "PATH": proctor_path(tmp_path)})
    assert inherited.returncode == 1 and "was started with BAGGAGE proctor.lease=w1" in inherited.stderr
    # a worker the guard bound by its session alone (no BAGGAGE anywhere): only the guard stops it
    ran = run(ws, command, env={"PATH": proctor_path(tmp_path)})
    assert ran.returncode == 0, ran.stderr
    assert job_row(ws, "rogue")["write_paths"] == ["src/**", "docs/**"]
    assert denied(answer, "lease-store"), said(answer)


def test_a_fork_with_dot_dot_in_its_write_paths_widens_the_lease(ws, tmp_path):
    """Promise 2 (lease-store): a holder only narrows what it holds, but the guard compares
    `plan/w1/../../docs/**` with plan/w1/** before normalising it; the store normalises it to
    docs/**. With BAGGAGE cleared in the command the store accepts the child, and a session
    under the child writes docs/ freely."""
    command = "BAGGAGE= proctor job fork w1/esc --parent w1 --write-paths 'plan/w1/../../docs/**' --check test"
    answer = bash(ws, command)
    # the worker's shell (an agent's, started with BAGGAGE) stays the command's parent: "; exit $?"
    # keeps bash from exec'ing proctor in its place
    inherited = run(ws, command + "; exit $?", env={"BAGGAGE": "proctor.lease=w1", "PATH": proctor_path(tmp_path)})
    assert inherited.returncode == 1 and "PRC3043" in inherited.stderr, "the store reads the inherited lease"
    ran = run(ws, command, env={"PATH": proctor_path(tmp_path)})  # a worker bound by its session alone
    assert ran.returncode == 0, ran.stderr
    assert job_row(ws, "w1/esc")["write_paths"] == ["docs/**"]
    assert not denied(bash(ws, "echo x > docs/c.md", lease="w1/esc")), "the child writes docs/"
    assert denied(answer, "lease-store"), said(answer)


@pytest.mark.parametrize(
    "command",
    [
        "echo other | xargs proctor job exit",
        "python3 -I -m proctor job exit other",
        "python3 -Im proctor job delete other",
    ],
)
def test_ending_another_job_through_xargs_or_python_flags(ws, command):
    """Promise 2 (moderate): `proctor job exit/delete` of a job not the holder's own is refused,
    but the target arrives through xargs (the guard sees no positional and lets it pass), or
    python's own flags precede -m (only advised, as an unknown module run)."""
    answer = bash(ws, command)
    assert denied(answer, "lease-store"), said(answer)


def test_stopping_the_server_by_signal(ws):
    """Promise 2 (moderate): a holder does not stop the server every job's monitors run in.
    `proctor server stop` is refused, `pkill -f 'proctor server'` does the same and passes.
    Judged only."""
    answer = bash(ws, "pkill -f 'proctor server'")
    assert denied(answer, "lease-store"), said(answer)


# == promise 1: shell writes outside the lease, bash the oracle ===================================


@pytest.mark.parametrize(
    "command",
    [
        "git checkout -q -b x other",
        "git checkout -q -bx other",
        "git checkout -q -B x other",
        "git checkout -q --orphan x other",
        "git switch -q -c x other",
        "git switch -q -C x other",
    ],
)
def test_a_new_branch_at_another_start_point_rewrites_the_tree(bench, command):
    """Promise 1: `git checkout -b NAME START` / `git switch -c NAME START` check START out. The
    guard counts operands after -b/-c has taken its value, so START alone looks like "a new
    branch where HEAD is" and the command passes silently (src/a.txt, docs/notes.txt and
    src/only_other.txt change)."""
    result = oracle(bench, command)
    assert classify(result) != "silent", describe(result, "git")


@pytest.mark.parametrize(
    "command",
    [
        "shopt -s extglob\necho !(#) > src/eg",
        "shopt -s extglob\ncase x in @(y|#)) ;; esac; touch src/eg2",
    ],
)
def test_an_extglob_hides_the_rest_of_the_line(bench, command):
    """Promise 1: under `shopt -s extglob`, `!(#)` and `@(y|#)` are one word to bash; the guard
    reads `(` as an operator and `#` as a comment, so the redirection or command after it is
    invisible and the write passes silently."""
    result = oracle(bench, command)
    assert classify(result) != "silent", describe(result, "extglob")


@pytest.mark.parametrize(
    "command",
    [
        "mapfile -C 'touch src/mf' -c 1 a <<< x",
        "readarray -C 'touch src/mf2' -c 1 a < plan/w1/list",
        "compgen -C 'touch src/cg' x",
        "f() { touch src/cg2; }; compgen -F f x 2>/dev/null; true",
    ],
)
def test_builtins_on_the_read_list_run_callbacks(bench, command):
    """Promise 1: mapfile/readarray and compgen are on _READS, but `mapfile -C CMD` evals CMD
    every -c lines and `compgen -C CMD`/`-F FUNC` runs a command or a function; the writes
    they make pass silently."""
    result = oracle(bench, command)
    assert classify(result) != "silent", describe(result, "builtin")


@pytest.mark.parametrize(
    "command",
    [
        "let 'a[$(touch src/ar1)]=1'",
        "x='a[$(touch src/ar2)]'; echo $((x))",
        "x='a[$(touch src/ar3)]'; [[ $x -eq 0 ]]",
        "test -v 'a[$(touch src/ar4)]'",
        "printf -v 'a[$(touch src/ar5)]' %s x",
        "read 'a[$(touch src/ar6)]' <<< x",
        "declare -i n; n='a[$(touch src/ar7)]'",
        "x='a[$(touch src/ar8)]'; a=(1 2); echo ${a[x]}",
        "x='a[$(touch src/ar9)]'; echo ${PWD:x:1}",
    ],
)
def test_arithmetic_on_an_array_subscript_runs_a_command(bench, command):
    """Promise 1: bash expands `a[$(cmd)]` when it evaluates it as an arithmetic variable name:
    in let, $((x)), [[ -eq ]], test -v, printf -v, read, declare -i, an indexed subscript and a
    substring offset. The command sits in quoted data the guard never parses, so its writes
    pass silently; a quoted string reaching arithmetic is code that cannot be named (advise)."""
    result = oracle(bench, command)
    assert classify(result) != "silent", describe(result, "arith")


@pytest.mark.parametrize(
    "command",
    [
        "git ls-remote --upload-pack='touch src/lsr; git-upload-pack' . > /dev/null",
        "git fetch -q --upload-pack='touch src/fup; git-upload-pack' . 2>/dev/null",
        "git push -q --receive-pack='touch src/rp; git-receive-pack' . HEAD:refs/heads/zz 2>/dev/null",
        "git push -q --exec='touch src/rp2; git-receive-pack' . HEAD:refs/heads/zz2 2>/dev/null",
        "git archive --remote=. --exec='touch src/arx; git-upload-archive' HEAD > /dev/null 2>&1",
        "git fetch-pack --exec='touch src/fp; git-upload-pack' . > /dev/null 2>&1",
        "git -c protocol.ext.allow=always ls-remote 'ext::sh -c touch% src/ext' > /dev/null 2>&1",
        "GIT_ALLOW_PROTOCOL=ext git ls-remote 'ext::sh -c touch% src/ext2' > /dev/null 2>&1",
    ],
)
def test_git_options_that_run_a_program_for_a_local_remote(bench, command):
    """Promise 1: ls-remote (a read), fetch and push (quiet) and archive take --upload-pack,
    --receive-pack or --exec, a shell command git runs itself when the remote is a local path;
    the ext:: transport runs one too once protocol.ext.allow or GIT_ALLOW_PROTOCOL lets it.
    None of them is seen, and the program's writes pass silently."""
    result = oracle(bench, command)
    assert classify(result) != "silent", describe(result, "git-exec")


@pytest.mark.parametrize(
    "command",
    [
        "exec 3<src; echo x > /dev/fd/3/fd1",
        "exec 3<src; echo x > /proc/self/fd/3/fd2",
        "{ echo x > /dev/fd/3/fd3; } 3<src",
    ],
)
def test_a_directory_held_open_on_a_descriptor(bench, command):
    """Promises 1 and 5: `/dev/fd/N` and `/proc/self/fd/N` name whatever descriptor N holds in
    the shell; holding a directory there makes `/dev/fd/3/name` a path into it. The guard
    resolves the alias in its own process (where fd 3 is something else) and passes."""
    result = oracle(bench, command)
    assert classify(result) != "silent", describe(result, "fd")


@pytest.mark.parametrize(
    "command",
    [
        "HOME=$PWD/src bash -c 'touch ~/h1'",
        "HOME=$PWD/docs sh -c 'echo > ~/h2'",
        "HOME=$PWD/docs eval 'touch ~/h3'",
        "env HOME=$PWD/docs bash -c 'touch ~/h4'",
        "HOME=$PWD/docs env bash -c 'touch $HOME/h5'",
        "cd src/sub; HOME=..; cd; touch h6",
        "TMPDIR=$PWD/src mktemp > /dev/null",
        "TMPDIR=src mktemp -t x.XXXX > /dev/null",
    ],
)
def test_home_and_tmpdir_set_for_one_command(bench, command):
    """Promise 1: a prefix assignment of HOME (or TMPDIR) holds for the command it precedes;
    the guard expands `~` and $HOME in a child shell, an eval and an env-run shell with the
    hook's HOME, resolves a relative HOME against nothing, and lets mktemp write into TMPDIR.
    Each writes into src/ or docs/ silently."""
    result = oracle(bench, command)
    assert classify(result) != "silent", describe(result, "home")


@pytest.mark.parametrize(
    "command",
    [
        "cp -P plan/w1/link plan/w1/lc && echo x >> plan/w1/lc",
        "cp -a plan/w1/link plan/w1/lc2 && echo x > plan/w1/lc2",
    ],
)
def test_a_symlink_copied_in_the_same_call_is_followed(bench, command):
    """Promises 1 and 5: links made in the same call are followed (ln, cp -l/-s), but cp -P and
    cp -a copy a symbolic link as a link; writing through the copy writes src/a.txt silently."""
    result = oracle(bench, command)
    assert classify(result) != "silent", describe(result, "cp-link")


@pytest.mark.parametrize(
    "command",
    [
        "pushd -n plan/w1 > /dev/null; touch src/pn",
        "f() { cd plan/w1; }; unset -f f; f 2>/dev/null; touch src/un",
        "enable -n exit; exit 2>/dev/null; touch src/ex",
        "f() { cd src; return; cd ../plan/w1; }; f; touch fr",
        "for i in 1; do cd src; break; cd ../plan/w1; done; touch br",
        "cd plan/w1/srcdir && cd -P .. && touch cdp",
        "set -P; cd plan/w1/srcdir/..; touch sp",
        "set -o physical; cd plan/w1/srcdir/..; touch sp2",
    ],
)
def test_the_guards_working_directory_drifts_from_bashs(bench, command):
    """Promise 1: the guard tracks the directory each command runs in, and a relative write is
    judged there. Its idea of that directory parts from bash's after `pushd -n` (no change of
    directory), a function removed by `unset -f` (never runs), `enable -n exit` (exit no longer
    ends the script), `return`/`break` (the rest of the body never runs), and a physical `cd`
    (`cd -P ..`, `set -P`/`set -o physical`) through plan/w1/srcdir -> ../../src. Each time the
    guard believes the write lands in plan/w1/ while bash writes src/ or the root: silent."""
    result = oracle(bench, command)
    assert classify(result) != "silent", describe(result, "cwd")


@pytest.mark.parametrize(
    "command",
    [
        "echo x\r# > src/crh",
        "true\r#; touch src/crh2",
        "cd plan/w1\r; touch x",
    ],
)
def test_a_carriage_return_is_not_a_blank_to_bash(bench, command):
    """Promise 1: the guard's tokenizer counts a bare CR as a blank; bash does not. So `x\\r#`
    is one word to bash (a `#` inside a word starts no comment) while the guard sees a comment
    that hides the redirection or the command after it; and `cd plan/w1\\r` fails in bash (no
    such directory) while the guard moves into plan/w1 and judges `touch x` there."""
    result = oracle(bench, command)
    assert classify(result) != "silent", describe(result, "cr")


# == promise 1 and 5: file tools ==================================================================


def test_an_mcp_write_carrying_a_command_key_is_still_a_write(ws):
    """Promise 1 (file tools): an MCP file tool is judged by the paths it names, unless its input
    also has a `command` string: claude.read_tool_input then takes it for a shell command and
    never reads the paths. MCP servers that validate with a zod object strip the extra key and
    write; the guard passed a write to another job's src/b.py."""
    answer = call(ws, "mcp__filesystem__write_file", {"path": "src/b.py", "content": "y", "command": "true"})
    assert denied(answer, "lease-write-scope"), said(answer)


def test_an_mcp_write_naming_its_file_by_an_unknown_key_is_at_least_advised(ws):
    """Promise 1 (moderate): a write tool whose target arrives under a key proctor does not know
    (`uri`) names nothing, and passes silently instead of being advised as a write it cannot
    name."""
    answer = call(ws, "mcp__fs__write_file", {"uri": f"file://{ws}/src/b.py", "content": "y"})
    assert answer.get("hookSpecificOutput"), "a write tool naming no known path passed silently"


def test_a_worktree_nested_inside_the_lease_is_judged_at_its_own_paths(ws):
    """Promise 5 (moderate): a path in another work tree is "that tree's file of the same name".
    A worktree added INSIDE the lease (`git worktree add plan/w1/wt`, passed) matches the main
    root first, so plan/w1/wt/src/b.py is judged as a lease path, not as src/b.py of that tree;
    the worker edits and commits another job's file on a branch unopposed."""
    assert not denied(bash(ws, "git worktree add -q plan/w1/wt"))
    git(ws, "worktree", "add", "-q", "plan/w1/wt")
    answer = call(ws, "Write", {"file_path": os.path.join(ws, "plan/w1/wt/src/b.py"), "content": "y"})
    assert denied(answer, "lease-write-scope"), said(answer)


# == promise 1: false denies (moderate) ===========================================================


@pytest.mark.parametrize(
    "command",
    [
        "pushd -n src > /dev/null; touch plan/w1/pdn",
        "f() { touch src/fn; }; unset -f f; f 2>/dev/null; touch plan/w1/ok",
    ],
)
def test_a_harmless_command_is_not_denied(bench, command):
    """Promise 1 (moderate): a command that writes nothing outside the lease is never denied.
    `pushd -n` rotates the stack without changing directory, and a function removed by
    `unset -f` before any call never runs; the guard denies both."""
    result = bench.case(command)
    assert not result["outside"], describe(result, "x")
    assert classify(result) != "false-deny", describe(result, "false-deny")
