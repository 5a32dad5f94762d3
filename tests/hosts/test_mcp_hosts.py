"""proctor's MCP door (`proctor mcp`) in the real hosts, each against a scripted model on loopback.

Each host is wired with BOTH parts `proctor describe harness --host <host>` prints, exactly as
printed: `--part hooks` (the guard) and `--part mcp` (the server), merged into the host's config
in the test's own HOME. Two tests per host:

- the model calls proctor's `vcs_checkpoint` and reads back the checkout's real revision;
- a session under a lease (BAGGAGE=proctor.lease=plan/w1, PROCTOR_NONCE=<the job's secret>)
  first calls `monitor_list`, then `job_put` with a record that widens its own job's write
  paths: the guard's hook denies it (lease-store), the model reads why, and the job's row in
  the store is unchanged.

What the hosts did (Codex 0.171.0, Gemini CLI 0.61.0, opencode 1.18.33), as these tests assert:

Codex
  To the model: the MCP tools are not in the request's `tools`; they are deferred behind the
  client-executed `tool_search` (a `tool_search_call` from the model is answered by Codex with
  a `tool_search_output` holding namespace `mcp__proctor` with functions `vcs_checkpoint`,
  `job_put`, ...), and the model calls a `function_call` with `namespace: "mcp__proctor"`,
  `name: "vcs_checkpoint"`. Codex starts the MCP server beside the first model request, so a
  search made at once can find nothing yet (the script searches again until it does).
  To the hook: `tool_name` `mcp__proctor__<tool>` (e.g. `mcp__proctor__job_put`). A deny
  reaches the model as "Tool call blocked by PreToolUse hook: deny [lease-store]: ...".
  Approval: without `default_tools_approval_mode = "approve"` in [mcp_servers.proctor] every
  call is refused in `codex exec` ("MCP tool call requires approval, but approval policy is
  never"); the printed wiring now carries it.
  Environment: Codex hands the server only HOME, LANG, PATH, TERM, USER and the variables its
  `env_vars` names (no XDG_*, no proxies): BAGGAGE and PROCTOR_NONCE (and PROCTOR_STATE_DIR)
  reached `proctor mcp` through the printed `env_vars`. It runs in the session's directory.

Gemini CLI
  To the model: `mcp_proctor_<tool>` (e.g. `mcp_proctor_vcs_checkpoint`), listed in the
  request's functionDeclarations; loaded from user settings under `--skip-trust`, and run
  without a prompt under `--approval-mode yolo`.
  To the hook: `tool_name` `mcp_proctor_<tool>`, with `mcp_context` {"server_name": "proctor",
  "tool_name": "<tool>", "command": "proctor", "args": ["mcp"]}. A deny reaches the model as
  the tool's error "Tool execution blocked: deny [lease-store]: ...".
  Environment: the session's own, less what Gemini redacts by name (GEMINI_API_KEY and
  GIT_AUTHOR_* were dropped; a variable named like a key or auth would be too): BAGGAGE and
  PROCTOR_NONCE reached `proctor mcp`. It runs in the session's directory.

opencode
  To the model: `proctor_<tool>` (e.g. `proctor_vcs_checkpoint`), listed in the request's tools;
  `--auto` runs it without asking.
  To the hook (the printed plugin): `tool_name` `proctor_<tool>`. A deny reaches the model as
  the tool's error "deny [lease-store]: ...".
  Environment: the session's whole environment: BAGGAGE and PROCTOR_NONCE reached `proctor
  mcp`. It runs in the session's directory.

In every host the leased session's `monitor_list` answered `{"monitors": []}` from the running
server: only the job's secret (PROCTOR_NONCE, in `proctor mcp`'s environment) gets that answer
for a caller under a lease, which the server would otherwise refuse.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

import pytest

from tests.hosts.chat import Chat
from tests.hosts.conftest import fork_and_take, git, host_binary, server
from tests.hosts.gemini_api import Gemini
from tests.hosts.model import ScriptedModel, Tool, Turn, sse
from tests.hosts.responses import USAGE, Responses

JOB = "plan/w1"
WIDER = {"id": JOB, "write_paths": ["src/a.py", "src/b.py"]}  # the job holds src/a.py only


# --- what every host's tests share ------------------------------------------------------------


def printed(env, repo: str, host: str, part: str) -> str:
    """What `proctor describe harness --host <host> --part <part>` prints, run as the person in `repo`."""
    proc = env.proctor("describe", "harness", "--host", host, "--part", part, cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def printed_json(env, repo: str, host: str, part: str) -> dict:
    """The printed wiring's JSON (its `#` or `//` comment lines dropped)."""
    text = printed(env, repo, host, part)
    return json.loads("\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("#", "//"))))


def merge(into: dict, part: dict) -> dict:
    """`part` merged into `into`, one level of objects deep (as the other host tests merge)."""
    for key, value in part.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            into[key] = {**into[key], **value}
        else:
            into[key] = value
    return into


def mcp_servers(home: str) -> list[dict]:
    """Every live `proctor mcp` process started under this test's HOME: its environment (what
    the host really handed the server, from /proc) and its working directory."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                argv = [a.decode(errors="replace") for a in handle.read().split(b"\0") if a]
            if "mcp" not in argv or not any(os.path.basename(a) == "proctor" for a in argv[:2]):
                continue
            with open(f"/proc/{pid}/environ", "rb") as handle:
                environ = dict(
                    e.decode(errors="replace").split("=", 1) for e in handle.read().split(b"\0") if b"=" in e
                )
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if environ.get("HOME") == home:
            found.append({"pid": int(pid), "environ": environ, "cwd": cwd})
    return found


class Script:
    """A scripted model that reads what the host sent before it answers: `generator` is sent
    each tool-offering request's record and yields the Turn that answers it (the
    ScriptedModel's only step, its default)."""

    def __init__(self, generator) -> None:
        self.generator = generator
        self.started = self.finished = False

    def __call__(self, record: dict) -> Turn:
        if self.finished:
            return Turn(text="done.")
        try:
            if not self.started:
                self.started = True
                next(self.generator)
            return self.generator.send(record)
        except StopIteration:
            self.finished = True
            return Turn(text="done.")


def job_row(env, repo: str, job: str = JOB) -> dict:
    proc = env.proctor("ls", "jobs", "-o", "json", cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return next(j for j in json.loads(proc.stdout)["jobs"] if j["id"] == job)


def assert_unchanged(row: dict, before: dict) -> None:
    """The job's row as it was (its age aside, which only the clock moves)."""
    strip = lambda r: {k: v for k, v in r.items() if k != "age_seconds"}  # noqa: E731
    assert strip(row) == strip(before), (row, before)
    assert row["write_paths"] == ["src/a.py"], row


def hooked_calls(repo: str, job: str = JOB) -> list[tuple[str, str]]:
    """(tool name the host sent its hook, the guard's decision) of each call judged under `job`
    (the trail's tool_call events)."""
    from proctor.paths import find_checkout, repo_state_dir
    from proctor.store import Store, events

    store = Store(repo_state_dir(find_checkout(repo)))
    try:
        with store.read() as conn:
            return [(e["data"]["tool"], e["data"]["decision"]) for e in events.select(conn, job=job, kind="tool_call")]
    finally:
        store.close()


def revision(repo: str) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def leased(nonce: str) -> dict:
    assert nonce, "proctor job exec printed no PROCTOR_NONCE"
    return {"BAGGAGE": f"proctor.lease={JOB}", "PROCTOR_NONCE": nonce}


def assert_server_env(servers: list[dict], repo: str, nonce: str | None = None) -> dict:
    """The `proctor mcp` process(es) the host started ran in the repository, with the lease and
    the job's secret in their environment (or neither, when `nonce` is None)."""
    assert servers, "no proctor mcp process was running while the model was answered"
    for found in servers:
        environ = found["environ"]
        assert os.path.realpath(found["cwd"]) == os.path.realpath(repo), found["cwd"]
        if nonce is None:
            assert "PROCTOR_NONCE" not in environ and "BAGGAGE" not in environ, sorted(environ)
        else:
            assert environ.get("BAGGAGE") == f"proctor.lease={JOB}", sorted(environ)
            assert environ.get("PROCTOR_NONCE") == nonce, sorted(environ)
    return servers[0]["environ"]


def assert_monitors_answered(told: str) -> None:
    """monitor_list answered from the server, scoped by the job's secret: under a lease,
    without PROCTOR_NONCE in proctor mcp's environment it is refused instead."""
    assert '"monitors": []' in told or '"monitors":[]' in told, told
    assert "PROCTOR_NONCE" not in told and "lease-store" not in told, told


# --- Codex ------------------------------------------------------------------------------------


@dataclass
class Call(Tool):
    """A function call in a namespace: Codex hands an MCP server's tools to the model as the
    functions of namespace `mcp__<server>`, once tool_search has loaded them."""

    namespace: str | None = None


class CodexResponses(Responses):
    """The Responses dialect, plus what Codex's deferred MCP tools need: a client-executed
    `tool_search_call` (Tool("tool_search", {"query", "limit"})), and function calls that
    carry their `namespace`."""

    def items(self, turn: Turn, body: dict, call_ids: list[str]) -> list[dict]:
        out = super().items(turn, body, call_ids)
        calls = [i for i in out if i["type"] != "message"]
        for item, tool, call_id in zip(calls, turn.tools, call_ids):
            if tool.name == "tool_search":
                item.clear()
                item.update(
                    {
                        "id": f"tsc_{time.time_ns():x}",
                        "type": "tool_search_call",
                        "call_id": call_id,
                        "status": "completed",
                        "execution": "client",
                        "arguments": dict(tool.args),
                    }
                )
            elif getattr(tool, "namespace", None):
                item["namespace"] = tool.namespace
        return out

    def render(self, turn: Turn, body: dict, stream: bool, call_ids: list[str]):
        if not any(t.name == "tool_search" for t in turn.tools):
            return super().render(turn, body, stream, call_ids)
        items = self.items(turn, body, call_ids)
        head = {
            "id": f"resp_{time.time_ns():x}",
            "object": "response",
            "created_at": int(time.time()),
            "model": body.get("model") or "gpt-scripted",
            "status": "in_progress",
            "output": [],
            "usage": None,
        }
        chunks = [sse("response.created", {"type": "response.created", "response": head})]
        for index, item in enumerate(items):
            for kind in ("response.output_item.added", "response.output_item.done"):
                chunks.append(sse(kind, {"type": kind, "output_index": index, "item": item}))
        chunks.append(
            sse(
                "response.completed",
                {
                    "type": "response.completed",
                    "response": {**head, "status": "completed", "output": items, "usage": USAGE},
                },
            )
        )
        return "text/event-stream", chunks


def codex_found(body: dict, tool: str) -> str | None:
    """The namespace the last tool_search_output handed the model `tool` in, if any."""
    outputs = [i for i in body.get("input") or () if isinstance(i, dict) and i.get("type") == "tool_search_output"]
    for entry in (outputs[-1].get("tools") or ()) if outputs else ():
        if entry.get("type") == "namespace" and any(t.get("name") == tool for t in entry.get("tools") or ()):
            return entry["name"]
    return None


def codex_discover(tool: str, seen: dict):
    """Search (tool_search) until Codex's index holds proctor's `tool`: Codex starts the MCP
    server beside the first model request, so a search made at once may find nothing yet."""
    record = yield
    seen["offered"] = [t.get("name") or t.get("type") for t in record["body"].get("tools") or ()]
    for _ in range(60):
        record = yield Turn(tools=[Tool("tool_search", {"query": f"proctor {tool}", "limit": 20})])
        namespace = codex_found(record["body"], tool)
        if namespace:
            seen["namespace"] = namespace
            return record
        time.sleep(0.5)
    raise AssertionError("tool_search never found proctor's tools")


def codex_wire(env, repo: str, model: ScriptedModel) -> None:
    """~/.codex/config.toml: the scripted provider, then the hooks (with their trust) and the
    MCP server exactly as `proctor describe harness --host codex` prints them."""
    path = os.path.join(env.home, ".codex", "config.toml")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    provider = (
        f'model = "gpt-5.5"\nmodel_provider = "scripted"\n\n[model_providers.scripted]\nname = "scripted"\n'
        f'base_url = "{model.url}/v1"\nwire_api = "responses"\n\n'
    )
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(provider + printed(env, repo, "codex", "hooks") + "\n" + printed(env, repo, "codex", "mcp"))


def run_codex(env, repo: str, extra: dict | None = None) -> None:
    codex = host_binary("codex")
    proc = env.run(
        [codex, "exec", "--json", "-c", 'sandbox_mode="workspace-write"', "do the task"],
        cwd=repo,
        extra=extra,
        timeout=150,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert events[-1]["type"] == "turn.completed", proc.stdout[-2000:]


def test_codex_vcs_checkpoint_over_mcp(host_env, host_repo):
    host_binary("codex")
    seen: dict = {}

    def script():
        yield from codex_discover("vcs_checkpoint", seen)
        record = yield Turn(tools=[Call("vcs_checkpoint", {}, namespace=seen["namespace"])])
        seen["told"] = Responses().told(record["body"])
        seen["servers"] = mcp_servers(host_env.home)
        yield Turn(text="finished")

    with ScriptedModel(CodexResponses(), [], default=Script(script())) as model:
        codex_wire(host_env, host_repo, model)
        run_codex(host_env, host_repo)
    # the request's own tools hold none of proctor's: tool_search loads them, as namespace mcp__proctor
    assert "tool_search" in seen["offered"] and not any("proctor" in str(t) for t in seen["offered"]), seen
    assert seen["namespace"] == "mcp__proctor"
    assert revision(host_repo) in seen["told"], seen["told"]
    assert "requires approval" not in seen["told"]
    assert_server_env(seen["servers"], host_repo)


def test_codex_job_put_widening_is_denied_under_lease(host_env, host_repo):
    host_binary("codex")
    seen: dict = {}

    def script():
        yield from codex_discover("job_put", seen)
        record = yield Turn(tools=[Call("monitor_list", {}, namespace=seen["namespace"])])
        seen["monitors"] = Responses().told(record["body"])
        seen["servers"] = mcp_servers(host_env.home)
        record = yield Turn(tools=[Call("job_put", dict(WIDER), namespace=seen["namespace"])])
        seen["told"] = Responses().told(record["body"])
        yield Turn(text="finished")

    with server(host_env, host_repo):
        nonce = fork_and_take(host_env, host_repo, JOB, "src/a.py")
        before = job_row(host_env, host_repo)
        with ScriptedModel(CodexResponses(), [], default=Script(script())) as model:
            codex_wire(host_env, host_repo, model)
            run_codex(host_env, host_repo, extra=leased(nonce))
    assert (
        "Tool call blocked by PreToolUse hook: deny [lease-store]: job_put plan/w1: src/b.py widens your "
        "write paths" in seen["told"]
    ), seen["told"]
    assert hooked_calls(host_repo) == [("mcp__proctor__monitor_list", "pass"), ("mcp__proctor__job_put", "deny")]
    assert_unchanged(job_row(host_env, host_repo), before)
    assert_monitors_answered(seen["monitors"])
    environ = assert_server_env(seen["servers"], host_repo, nonce)
    # Codex filters what it hands the server: the lease and the secret came by the printed env_vars
    assert "XDG_CONFIG_HOME" not in environ and "NO_PROXY" not in environ, sorted(environ)


# --- Gemini CLI -------------------------------------------------------------------------------


GEMINI_AUTH = {"security": {"auth": {"selectedType": "gemini-api-key"}}}


@pytest.fixture
def tmp(tmp_path):
    path = tmp_path / "tmp"
    path.mkdir()
    return path


def gemini_wire(env, repo: str) -> None:
    """~/.gemini/settings.json (user settings, loaded under --skip-trust): the auth type, then
    the hooks and the MCP server exactly as `proctor describe harness --host gemini` prints them."""
    settings = merge(
        merge(json.loads(json.dumps(GEMINI_AUTH)), printed_json(env, repo, "gemini", "hooks")),
        printed_json(env, repo, "gemini", "mcp"),
    )
    path = os.path.join(env.home, ".gemini", "settings.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(settings, handle, indent=2)


def gemini_tools(body: dict) -> list[str]:
    return [
        d.get("name")
        for t in body.get("tools") or ()
        if isinstance(t, dict)
        for d in t.get("functionDeclarations") or ()
    ]


def named(tools: list[str], tool: str) -> str:
    """The one offered tool whose name ends with proctor's `tool`."""
    names = [n for n in tools if n and n.endswith(tool)]
    assert len(names) == 1, tools
    return names[0]


def run_gemini(env, repo: str, model: ScriptedModel, tmp, extra: dict | None = None) -> None:
    gemini = host_binary("gemini")
    variables = {"GOOGLE_GEMINI_BASE_URL": model.url, "GEMINI_API_KEY": "dummy", "TMPDIR": str(tmp)}
    variables.update(extra or {})
    argv = [gemini, "-p", "do the task", "--output-format", "stream-json", "--approval-mode", "yolo", "--skip-trust"]
    proc = env.run(argv, cwd=repo, extra=variables, timeout=150)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_gemini_vcs_checkpoint_over_mcp(host_env, host_repo, tmp):
    host_binary("gemini")
    seen: dict = {}

    def script():
        record = yield
        seen["name"] = named(gemini_tools(record["body"]), "vcs_checkpoint")
        record = yield Turn(tools=[Tool(seen["name"], {})])
        seen["told"] = Gemini().told(record["body"])
        seen["servers"] = mcp_servers(host_env.home)
        yield Turn(text="finished")

    gemini_wire(host_env, host_repo)
    with ScriptedModel(Gemini(), [], default=Script(script())) as model:
        run_gemini(host_env, host_repo, model, tmp)
    assert seen["name"] == "mcp_proctor_vcs_checkpoint"
    assert revision(host_repo) in seen["told"], seen["told"]
    assert_server_env(seen["servers"], host_repo)


def test_gemini_job_put_widening_is_denied_under_lease(host_env, host_repo, tmp):
    host_binary("gemini")
    seen: dict = {}

    def script():
        record = yield
        tools = gemini_tools(record["body"])
        record = yield Turn(tools=[Tool(named(tools, "monitor_list"), {})])
        seen["monitors"] = Gemini().told(record["body"])
        seen["servers"] = mcp_servers(host_env.home)
        record = yield Turn(tools=[Tool(named(tools, "job_put"), dict(WIDER))])
        seen["told"] = Gemini().told(record["body"])
        yield Turn(text="finished")

    gemini_wire(host_env, host_repo)
    with server(host_env, host_repo):
        nonce = fork_and_take(host_env, host_repo, JOB, "src/a.py")
        before = job_row(host_env, host_repo)
        with ScriptedModel(Gemini(), [], default=Script(script())) as model:
            run_gemini(host_env, host_repo, model, tmp, extra=leased(nonce))
    assert (
        "[mcp_proctor_job_put] Tool execution blocked: deny [lease-store]: job_put plan/w1: src/b.py widens "
        "your write paths" in seen["told"]
    ), seen["told"]
    assert hooked_calls(host_repo) == [("mcp_proctor_monitor_list", "pass"), ("mcp_proctor_job_put", "deny")]
    assert_unchanged(job_row(host_env, host_repo), before)
    assert_monitors_answered(seen["monitors"])
    assert_server_env(seen["servers"], host_repo, nonce)


# --- opencode ---------------------------------------------------------------------------------


def opencode_wire(env, repo: str, model: ScriptedModel) -> None:
    """$XDG_CONFIG_HOME/opencode: opencode.json with the scripted provider and the MCP server as
    `proctor describe harness --host opencode --part mcp` prints it, merged in; the guard plugin
    exactly as `--part hooks` prints it, in plugins/proctor.js. npm_config_offline: opencode's
    install of @opencode-ai/plugin beside a plugin fails at once (see test_opencode.py)."""
    env.env["npm_config_offline"] = "true"
    directory = os.path.join(env.env["XDG_CONFIG_HOME"], "opencode")
    os.makedirs(os.path.join(directory, "plugins"), exist_ok=True)
    from tests.hosts.test_opencode import scripted_provider

    with open(os.path.join(directory, "opencode.json"), "w", encoding="utf-8") as handle:
        json.dump(merge(scripted_provider(model), printed_json(env, repo, "opencode", "mcp")), handle, indent=2)
    with open(os.path.join(directory, "plugins", "proctor.js"), "w", encoding="utf-8") as handle:
        handle.write(printed(env, repo, "opencode", "hooks"))


def chat_tools(body: dict) -> list[str]:
    return [(t.get("function") or {}).get("name") for t in body.get("tools") or () if isinstance(t, dict)]


def run_opencode(env, repo: str, extra: dict | None = None) -> None:
    argv = [host_binary("opencode"), "run", "--format", "json", "--auto", "do the task"]
    proc = env.run(argv, cwd=repo, extra=extra, timeout=150)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_opencode_vcs_checkpoint_over_mcp(host_env, host_repo):
    host_binary("opencode")
    seen: dict = {}

    def script():
        record = yield
        seen["name"] = named(chat_tools(record["body"]), "vcs_checkpoint")
        record = yield Turn(tools=[Tool(seen["name"], {})])
        seen["told"] = Chat().told(record["body"])
        seen["servers"] = mcp_servers(host_env.home)
        yield Turn(text="finished")

    with ScriptedModel(Chat(), [], default=Script(script())) as model:
        opencode_wire(host_env, host_repo, model)
        run_opencode(host_env, host_repo)
    assert seen["name"] == "proctor_vcs_checkpoint"
    assert revision(host_repo) in seen["told"], seen["told"]
    assert_server_env(seen["servers"], host_repo)


def test_opencode_job_put_widening_is_denied_under_lease(host_env, host_repo):
    host_binary("opencode")
    seen: dict = {}

    def script():
        record = yield
        tools = chat_tools(record["body"])
        record = yield Turn(tools=[Tool(named(tools, "monitor_list"), {})])
        seen["monitors"] = Chat().told(record["body"])
        seen["servers"] = mcp_servers(host_env.home)
        record = yield Turn(tools=[Tool(named(tools, "job_put"), dict(WIDER))])
        seen["told"] = Chat().told(record["body"])
        yield Turn(text="finished")

    with server(host_env, host_repo):
        nonce = fork_and_take(host_env, host_repo, JOB, "src/a.py")
        before = job_row(host_env, host_repo)
        with ScriptedModel(Chat(), [], default=Script(script())) as model:
            opencode_wire(host_env, host_repo, model)
            run_opencode(host_env, host_repo, extra=leased(nonce))
    assert seen["told"].startswith("deny [lease-store]: job_put plan/w1: src/b.py widens your write paths"), seen[
        "told"
    ]
    assert hooked_calls(host_repo) == [("proctor_monitor_list", "pass"), ("proctor_job_put", "deny")]
    assert_unchanged(job_row(host_env, host_repo), before)
    assert_monitors_answered(seen["monitors"])
    assert_server_env(seen["servers"], host_repo, nonce)
