"""Wiring the guard into agent hosts, and the multi-agent skill.

proctor writes no hook wiring into a host's settings: `proctor describe harness` prints it
(each host's module, proctor/hosts/<host>.py, says what) for a person to merge. `proctor agent
harness install` writes the skill that tells an orchestrating agent how to split work and hand
it out through proctor, and opencode's guard plugin, which is a file of its own.
"""

from __future__ import annotations

import os

from proctor.hosts import HOSTS  # noqa: F401  (read from here by doctor and describe)
from proctor.hosts import adapter as _host
from proctor.hosts import modules as host_modules


def wiring(host: str) -> str:
    """What `proctor describe harness --host <host>` prints: the host module's own wiring."""
    return _host(host).wiring()


def mcp_wiring(host: str) -> str:
    """What `proctor describe harness --part mcp --host <host>` prints: how the host starts
    `proctor mcp`, proctor's MCP tools over stdio."""
    return _host(host).mcp_wiring()


def _mcp_files(host: str, root: str, home: str) -> list[str]:
    return _host(host).mcp_files(root, home, os.environ)


def _starts_proctor_mcp(node) -> bool:
    """Whether a parsed config holds a server entry that starts `proctor mcp`, anywhere in it."""
    if isinstance(node, dict):
        command, args = node.get("command"), node.get("args")
        words = command if isinstance(command, list) else [command, *(args if isinstance(args, list) else [])]
        if words and isinstance(words[0], str) and os.path.basename(words[0]) == "proctor" and "mcp" in words[1:2]:
            return True
        return any(_starts_proctor_mcp(value) for value in node.values())
    if isinstance(node, list):
        return any(_starts_proctor_mcp(value) for value in node)
    return False


def _names_server(node, server: str) -> bool:
    """Whether a parsed config holds, anywhere, an entry named `server` that starts `proctor mcp`."""
    if isinstance(node, dict):
        entry = node.get(server)
        if isinstance(entry, dict) and _starts_proctor_mcp(
            {k: v for k, v in entry.items() if k in ("command", "args")}
        ):
            return True
        return any(_names_server(value, server) for value in node.values())
    if isinstance(node, list):
        return any(_names_server(value, server) for value in node)
    return False


def _parsed(path: str):
    import json

    try:
        with open(path, "rb") as handle:
            data = handle.read()
        if path.endswith(".toml"):
            import tomllib

            return tomllib.loads(data.decode("utf-8"))
        return json.loads(data)
    except (OSError, ValueError, UnicodeDecodeError):
        return None  # missing, or a JSONC file with comments, or a broken one


def starts_proctor_mcp(host: str, server: str, cwd: str) -> bool:
    """Whether `host`'s MCP config for the checkout holding `cwd` (or the user's) starts `proctor
    mcp` under the server name `server` (the guard's question about a tool it does not know)."""
    from proctor.paths import find_checkout

    try:
        root = find_checkout(cwd).root
    except Exception:
        root = cwd
    if host not in HOSTS:
        return False
    return any(_names_server(_parsed(path), server) for path in _mcp_files(host, root, os.path.expanduser("~")))


def mcp_wired(host: str, root: str) -> tuple[bool, str]:
    """Whether this host's MCP config here starts `proctor mcp`: (ok, the file, or where it looked)."""
    paths = _mcp_files(host, root, os.path.expanduser("~"))
    for path in paths:
        if _starts_proctor_mcp(_parsed(path)):
            return True, path
    return False, f"not wired (looked in {', '.join(paths)})"


def wired(host: str, root: str) -> tuple[bool, str]:
    """Whether this host will run `proctor hook <host>` here: (ok, where or what is missing).
    Each host module answers for itself (present in its settings, and trusted where the host
    skips untrusted hooks)."""
    return _host(host).wired(root, os.path.expanduser("~"))


def host_present(host: str, root: str) -> bool:
    import shutil

    marker = _host(host).MARKER
    return (
        bool(shutil.which(host))
        or os.path.isdir(os.path.join(root, marker))
        or os.path.isdir(os.path.join(os.path.expanduser("~"), marker))
    )


SKILL = """\
---
name: proctor-multi-agent
description: Split work across agents with proctor jobs and leases; verify returned work on evidence.
---

# Working with several agents under proctor

1. Partition by WRITE SET, not by topic: give each job the files it may write
   (`--write-paths a.py,b.py`), never a directory. Run `proctor ls jobs` and read the
   overlaps before you hand anything out; two jobs on one file need declaration claims
   (`run.go#executeStages`) or `--depends-on`.
2. Narrow at every level: a child job claims only what its parent holds
   (`proctor job fork <child> --parent <yours> ...`).
3. Give each job ONE check, a target from proctor.toml (`--check test`), never the release
   gate: the gate runs once, in your tree, after every job lands.
4. Hand each worker its terms from the row, not from memory: `proctor describe job <id>`.
   Start every worker prompt with the line `lease: <id>` and export, in its environment,
   `BAGGAGE=proctor.lease=<id>` (add `proctor.spawner=<your label>`, and TRACEPARENT when you
   have one).
5. A worker takes its job with `proctor job exec <id>` (best in a worktree of its own:
   `proctor job exec <id> --worktree ../<dir>` makes one at the job's checkpoint), runs its
   check with `proctor run <target>` on its finished tree, and returns it with
   `proctor job exit <id> --stdin` citing each run as `{"run": <id>, "output_ref": <ref>}`,
   the pair `proctor run` printed. There is no "passed" field: proctor grades evidence.
6. Wait on evidence: `proctor job wait <id>` checks the real diff since the checkpoint, the
   recorded runs and the goals. Exit 0 pass, 1 rejected (every reason named), 2 no answer.
7. A small change to a path a live job owns: enter it
   (`echo '{"id": "<job>", "enter": "<path>"}' | proctor job fork --stdin`) instead of
   ending the job.
8. To watch something after your own command ends (CI, a deploy), add a monitor with your
   job's secret in PROCTOR_NONCE: `proctor monitor add --cmd '<command>' --interval 45s
   --allow-unsandboxed`. Before you go idle, start `proctor monitor wait` (the Stop hook
   gives the exact command) as a background task: it ends when the monitors have news and
   you are idle, which wakes you; read its output. Remove monitors you no longer need.
"""


def skill_targets(root: str) -> list[str]:
    """Where each host that reads skills (SKILLS in its module) finds proctor's."""
    return [
        os.path.join(root, module.MARKER, "skills", "proctor-multi-agent", "SKILL.md")
        for module in host_modules()
        if module.SKILLS
    ]


def install_skill(root: str) -> list[str]:
    written = []
    for path in skill_targets(root):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(SKILL)
        written.append(path)
    return written


def install_hosts(root: str) -> list[str]:
    """What each host module writes for itself (`install(root)`: opencode's guard plugin)."""
    written: list[str] = []
    for module in host_modules():
        if hasattr(module, "install"):
            written.extend(module.install(root))
    return written


def install(ws, lease: str | None = None, environ: dict | None = None) -> list[str]:
    """`proctor agent harness install`: the skills and opencode's plugin, written into `ws`'s
    checkout; return the paths written. Refused under a lease (the checkout's binding or a
    BAGGAGE claim): the skills steer every holder, so only an unbound caller rewrites them."""
    from proctor import errors
    from proctor.jobs.lease import resolve

    with ws.store.read() as conn:
        caller = resolve(conn, ws.root, lease, environ)
    if caller.lease:
        raise errors.Refused(
            [
                (
                    errors.NOT_YOUR_JOB,
                    f"refused proctor agent harness install: {caller.whence()}; the skills steer every holder, so "
                    f"only an unbound caller rewrites them{caller.remedy()}",
                )
            ]
        )
    return install_skill(ws.root) + install_hosts(ws.root)
