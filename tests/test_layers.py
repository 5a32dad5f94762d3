"""Layers that hold, read from the source itself (Python's own parser, every import at the top
and inside functions): the core imports no capability and no door; a capability imports no door
but the few named below; and the guard's list of proctor's value-taking options is the CLI's.
ARCHITECTURE.md names the layers."""

from __future__ import annotations

import ast
import os

import click
import pytest

import proctor

PACKAGE = os.path.dirname(os.path.abspath(proctor.__file__))

CORE, CAPABILITY, DOOR = 0, 1, 2
NAMES = {CORE: "core", CAPABILITY: "capability", DOOR: "door"}
# The first name under proctor/ decides a module's layer; whatever is not listed is core.
CAPABILITIES = ("jobs", "guard", "hosts", "monitors", "workers", "sandbox", "broker", "symbols")
DOORS = ("cli", "server", "hook", "mcp_server", "mcp_tools", "api", "__main__")

# Capability -> door imports that stand today, each with why; the test fails when one is added
# and when one is gone (then strike it here).
KNOWN = {
    ("proctor.monitors.client", "proctor.server"): "the monitor commands reach the running server",
    ("proctor.monitors.client", "proctor.server.daemon"): "the monitor commands reach the running server",
    ("proctor.workers.work", "proctor.server"): "whether a server runs, to say where follow-ups go",
    ("proctor.workers.work", "proctor.server.daemon"): "whether a server runs, to say where follow-ups go",
}


def _modules() -> dict[str, str]:
    found = {}
    for directory, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                module = "proctor." + os.path.relpath(path, PACKAGE)[:-3].replace(os.sep, ".")
                found[module.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _imports(module: str, path: str) -> set[str]:
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            out.add(source)
            out.update(f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in MODULES)
    return {name for name in out if name == "proctor" or name.startswith("proctor.")}


def layer(module: str) -> int:
    first = module.split(".")[1] if module.count(".") else ""
    return DOOR if first in DOORS else CAPABILITY if first in CAPABILITIES else CORE


def _edges() -> list[tuple[str, str]]:
    return [(module, target) for module, path in sorted(MODULES.items()) for target in sorted(_imports(module, path))]


def test_the_layer_table_names_real_modules():
    tops = {m.split(".")[1] for m in MODULES if m.count(".")}
    assert set(CAPABILITIES) <= tops and set(DOORS) <= tops, sorted(set(CAPABILITIES + DOORS) - tops)
    assert len(MODULES) > 100 and len(_edges()) > 300, "the walk read too little to judge anything"


def test_the_core_imports_no_capability_and_no_door():
    upward = [f"{m} -> {t} ({NAMES[layer(t)]})" for m, t in _edges() if layer(m) == CORE and layer(t) > CORE]
    assert not upward, "a core module imports above itself:\n" + "\n".join(upward)


def test_a_capability_imports_no_door_but_the_known_few():
    found = {(m, t) for m, t in _edges() if layer(m) == CAPABILITY and layer(t) == DOOR}
    new = sorted(found - set(KNOWN))
    gone = sorted(set(KNOWN) - found)
    assert not new, "a capability imports a door:\n" + "\n".join(f"{m} -> {t}" for m, t in new)
    assert not gone, "no longer imported (strike it from KNOWN):\n" + "\n".join(f"{m} -> {t}" for m, t in gone)


def test_the_check_can_fail(tmp_path, monkeypatch):
    """A core module that imported the CLI would be caught: the walk reads lazy imports too."""
    fake = tmp_path / "fake.py"
    fake.write_text("def f():\n    from proctor.cli import main\n    from . import jobs\n")
    monkeypatch.setitem(MODULES, "proctor.fake", str(fake))
    assert {"proctor.cli", "proctor.jobs"} <= _imports("proctor.fake", str(fake))
    with pytest.raises(AssertionError, match="proctor.fake -> proctor.cli"):
        test_the_core_imports_no_capability_and_no_door()


# --- the guard's reading of proctor's own command lines ---------------------------------------


def _cli_options() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    from proctor.cli.main import cli

    values: dict[str, set[str]] = {}
    flags: dict[str, set[str]] = {}

    def walk(command: click.Command, path: list[str]) -> None:
        if isinstance(command, click.Group):
            context = click.Context(command)
            for name in command.list_commands(context):
                walk(command.get_command(context, name), path + [name])
        for param in command.params:
            if isinstance(param, click.Option):
                into = flags if (param.is_flag or param.count) else values
                for name in param.opts + param.secondary_opts:
                    into.setdefault(name, set()).add(" ".join(path))

    walk(cli, [])
    return values, flags


def test_the_guards_value_options_are_the_clis():
    """The guard skips an option's value when it reads a command's positional arguments (which
    job `proctor job exit` ends, say); it cannot load click on the hook's path, so its list is
    its own, and this ties it to every option the CLI defines."""
    from proctor.guard.context import PROCTOR_VALUE_OPTIONS

    values, flags = _cli_options()
    assert len(values) > 20, "the walk found too few of the CLI's options to judge"
    missing = {name: sorted(values[name]) for name in sorted(set(values) - PROCTOR_VALUE_OPTIONS)}
    extra = sorted(PROCTOR_VALUE_OPTIONS - set(values))
    both = {name: (sorted(values[name]), sorted(flags[name])) for name in sorted(set(values) & set(flags))}
    assert not missing, f"options that take a value, missing from the guard's list: {missing}"
    assert not extra, f"the guard's list names options no command defines: {extra}"
    assert not both, f"one name is a flag in one command and takes a value in another (one list cannot say): {both}"


def test_the_guard_reads_a_target_past_a_value_option():
    from proctor.guard.context import Context

    assert Context.positional(["--worker", "codex", "plan/a"]) == ["plan/a"]
    assert Context.positional(["--job", "x", "--limit", "5", "-o", "json"]) == []


# --- the rules' interface --------------------------------------------------------------------


def test_the_rules_are_the_packages_modules_in_their_order():
    """Adding a rule is adding its module: ALL is every module of proctor/guard/rules/ (but the
    `_` helpers), each judged at its ORDER, lease-entry first (it marks what an entry lets
    through for the rules after it)."""
    from proctor.guard.rules import ALL

    here = os.path.join(PACKAGE, "guard", "rules")
    files = {name[:-3] for name in os.listdir(here) if name.endswith(".py") and not name.startswith("_")}
    assert {rule.__name__.rsplit(".", 1)[1] for rule in ALL} == files
    orders = [rule.ORDER for rule in ALL]
    assert orders == sorted(orders) and len(set(orders)) == len(orders), "two rules at one ORDER"
    assert ALL[0].NAME == "lease-entry"


def test_every_rule_is_a_rule():
    """What proctor/guard/rules/__init__.py's Rule protocol states (mypy checks ALL against it),
    checked at run time too: the members, their types, and check(ctx: Context)."""
    import inspect

    from proctor.guard.call import NOTIFY, POST_TOOL, PRE_TOOL, PROMPT, STOP, SUBAGENT_STOP
    from proctor.guard.rules import ALL, BY_NAME

    events = {NOTIFY, POST_TOOL, PRE_TOOL, PROMPT, STOP, SUBAGENT_STOP}
    assert len(ALL) == len(BY_NAME) == len({rule.__name__ for rule in ALL})
    for rule in ALL:
        for member in ("NAME", "DEFAULT", "SUMMARY", "CATCHES", "WHY"):
            assert isinstance(getattr(rule, member), str) and getattr(rule, member), (rule.__name__, member)
        assert rule.DEFAULT in ("deny", "advise"), rule.__name__
        assert isinstance(rule.ORDER, int) and not isinstance(rule.ORDER, bool), rule.__name__
        assert isinstance(rule.EVENTS, tuple) and rule.EVENTS and set(rule.EVENTS) <= events, rule.__name__
        signature = inspect.signature(rule.check)
        assert list(signature.parameters) == ["ctx"], rule.__name__
        assert signature.parameters["ctx"].annotation in ("Context", "ctx: Context"), (rule.__name__, signature)


def test_the_guard_reads_job_fork_options_as_the_cli_defines_them():
    """The guard judges `proctor job fork --write-paths ...` by the record its options state
    (lease-store's table); every option of the CLI's `job fork` that sets a field is in it,
    under the field the CLI gives it, and nothing else is."""
    from proctor.cli.main import cli
    from proctor.guard.rules.lease_store import FORK_FLAG_OPTIONS, FORK_VALUE_OPTIONS

    context = click.Context(cli)
    job = cli.get_command(context, "job")
    fork = job.get_command(click.Context(job), "fork")
    not_fields = {"--lease", "--output", "-o", "--stdin", "--schema", "--orchestrator", "--help", "-h"}
    values, flags = {}, {}
    for param in fork.params:
        if not isinstance(param, click.Option):
            continue
        for name in param.opts:
            if name not in not_fields:
                (flags if param.is_flag else values)[name] = param.name
    assert values == FORK_VALUE_OPTIONS, (values, FORK_VALUE_OPTIONS)
    assert flags == FORK_FLAG_OPTIONS, (flags, FORK_FLAG_OPTIONS)
    from proctor.jobs.model import INPUT_FIELDS

    assert set(values.values()) | set(flags.values()) <= set(INPUT_FIELDS), "every option sets a record field"


# --- the hosts: one module each ---------------------------------------------------------------

HOST_INTERFACE = (
    "parse",
    "render",
    "MARKER",
    "LABEL",
    "SKILLS",
    "mcp_files",
    "protected",
    "wiring",
    "mcp_wiring",
    "wired",
)


def test_each_host_is_one_module_and_nothing_else_names_one():
    """The hook, the harness, doctor, the CLI's choices, lease-tamper and the executors read
    the hosts from proctor/hosts/: HOSTS is its modules, each has the whole interface, and no
    module outside it spells a host's configuration directory."""
    from proctor import hosts as hook

    files = sorted(
        name[:-3]
        for name in os.listdir(os.path.join(PACKAGE, "hosts"))
        if name.endswith(".py") and not name.startswith("_")
    )
    assert list(hook.HOSTS) == files == ["claude", "codex", "gemini", "opencode"]
    for module in hook.modules():
        missing = [name for name in HOST_INTERFACE if not hasattr(module, name)]
        assert not missing, (module.__name__, missing)
    markers = {module.MARKER for module in hook.modules()}
    spelled = []
    for module, path in MODULES.items():
        if module.startswith("proctor.hosts."):
            continue
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        spelled += [
            f"{module}:{node.lineno} {node.value}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in markers
        ]
    assert not spelled, "a host's directory spelled outside its module:\n" + "\n".join(spelled)


def test_a_new_host_module_is_read_everywhere(monkeypatch, tmp_path):
    """What adding proctor/hosts/<host>.py does, shown with a module put in its place: the
    harness writes its skill, lease-tamper keeps a holder out of its wiring, doctor reads its
    MCP files."""
    import sys
    import types

    from proctor import hosts as hook
    from proctor.guard import harness
    from proctor.guard.rules import lease_tamper

    fake = types.ModuleType("proctor.hosts.zed")
    fake.MARKER, fake.LABEL, fake.SKILLS = ".zed", "Zed", True
    fake.protected = lambda root, home, xdg, env: [(os.path.join(root, ".zed"), "this checkout's Zed configuration")]
    fake.mcp_files = lambda root, home, env: [os.path.join(root, ".zed", "mcp.json")]
    monkeypatch.setitem(sys.modules, "proctor.hosts.zed", fake)
    monkeypatch.setattr(hook, "HOSTS", (*hook.HOSTS, "zed"))
    assert os.path.join(str(tmp_path), ".zed", "skills", "proctor-multi-agent", "SKILL.md") in harness.skill_targets(
        str(tmp_path)
    )

    class Checkout:
        git_dir = common_dir = str(tmp_path / ".git")

    class Ctx:
        root, environ, state_dir, checkout = str(tmp_path), {}, str(tmp_path / "state"), Checkout()

        @staticmethod
        def other_trees():
            return []

    assert any(what == "this checkout's Zed configuration" for _, what in lease_tamper.ground(Ctx()))
    assert harness._mcp_files("zed", str(tmp_path), str(tmp_path)) == [os.path.join(str(tmp_path), ".zed", "mcp.json")]


# Capabilities that import each other, each pair with why; any other cycle between capability
# packages fails (the imports of one name the other as a whole: a cycle of lazy imports is one).
KNOWN_CYCLES = {
    frozenset(("guard", "hosts")): "a host parses its event into the guard's Call record; the guard's "
    "rules read the host registry (which files are a host's wiring)",
}


def test_capabilities_import_each_other_only_where_known():
    graph: dict[str, set[str]] = {}
    for source, target in _edges():
        if layer(source) == CAPABILITY and layer(target) == CAPABILITY:
            a, b = source.split(".")[1], target.split(".")[1]
            if a != b:
                graph.setdefault(a, set()).add(b)

    def reaches(start: str, goal: str) -> bool:
        seen, stack = set(), [start]
        while stack:
            node = stack.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                stack.extend(graph.get(node, ()))
        return False

    cycles = {frozenset((a, b)) for a in graph for b in graph[a] if reaches(b, a)}
    assert cycles == set(KNOWN_CYCLES), sorted(sorted(c) for c in cycles ^ set(KNOWN_CYCLES))


# -- a test module per rule, host and executor -------------------------------------------------

FAMILIES = [
    ("proctor/guard/rules", "tests/guard/rules"),
    ("proctor/hosts", "tests/hook"),
    ("proctor/workers/executors", "tests/workers/executors"),
]


@pytest.mark.parametrize("package, tests", FAMILIES, ids=[package for package, _ in FAMILIES])
def test_every_member_of_a_family_has_its_own_test_module_naming_it(package, tests):
    """Adding a rule, a host or an executor is adding its module and its `<module>_test.py`
    (CONTRIBUTING.md, "Where a test goes"); the test module's docstring opens with the path of
    the module it tests."""
    from tests.support import REPO_ROOT

    members = sorted(
        name[:-3] for name in os.listdir(os.path.join(REPO_ROOT, package)) if name.endswith(".py") and name[:1] != "_"
    )
    assert members, package
    missing, misnamed = [], []
    for name in members:
        path = os.path.join(REPO_ROOT, tests, f"{name}_test.py")
        if not os.path.isfile(path):
            missing.append(f"{tests}/{name}_test.py")
            continue
        with open(path) as handle:
            doc = ast.get_docstring(ast.parse(handle.read())) or ""
        if not doc.startswith(f"{package}/{name}.py"):
            misnamed.append(f"{tests}/{name}_test.py: {doc[:60]!r}")
    assert not missing, f"no test module for: {missing}"
    assert not misnamed, f"a test module's docstring must open with the module it tests: {misnamed}"
