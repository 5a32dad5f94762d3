"""lease-tamper: a leased session reaches for the ground the guard and proctor's commits stand on."""

from __future__ import annotations

import functools
import os

from proctor.guard.call import PRE_TOOL
from proctor.guard.context import Context

NAME = "lease-tamper"
DEFAULT = "deny"
EVENTS = (PRE_TOOL,)
ORDER = 90  # where it is judged among the rules (proctor/guard/rules/__init__.py)
SUMMARY = (
    "a leased session writes into .git/, proctor's state, store or cache, or an agent host's hook "
    "wiring; sets a git setting that runs commands; or reads the server token"
)
CATCHES = (
    "Under a live job, whatever its write paths: a write (file tool or shell, through a hard link or "
    "a glob too) into the repository's git directories (a hook, config, a ref file, a worktree's .git "
    "file), into proctor's state directory (the store, the server's files) or cache (the guard's "
    "settings cache, repository keys, transcript checkpoints), into the hook wiring of Claude Code, "
    "Codex, Gemini CLI or opencode (in the checkout, the home directory, /etc, or where CLAUDE_CONFIG_DIR, "
    "CODEX_HOME, GEMINI_CLI_HOME or OPENCODE_CONFIG_DIR point), Claude Code's session records, git's "
    "global configuration, or proctor's own code and interpreter when they lie outside the checkout; a "
    "hard link made to any of these; a command that is not a read and names a path in proctor's state "
    "or cache (sqlite3 on the store); `git config` of core.hooksPath or any setting that makes git run "
    "a command (core.fsmonitor, filters, diff drivers, pagers, editors, include paths, ...) or of a key "
    "held in a variable; `git replace`; and a read of the server token, by a file tool or the shell (a "
    "redirection, a glob, a recursive reader of a directory above it). git's own commands that move "
    "refs, such as commit or reset --soft, are not this rule's."
)
WHY = (
    "A worker that can rewrite the store unbinds itself, one that can rewrite the settings cache turns "
    "every rule off, one that can install a git hook forges the trailers of the commit proctor makes "
    "for it, and one that can edit its host's hook wiring is no longer judged at all. None of these "
    "is ever part of a job's work, so no write path lets them through. Reading the server token "
    "would let a worker act as the person who runs the server."
)

# git settings that make git run a program (fnmatch patterns, matched lower-case).
_RUNS_COMMANDS = (
    "core.hookspath",
    "core.fsmonitor",
    "core.sshcommand",
    "core.editor",
    "core.pager",
    "core.askpass",
    "core.gitproxy",
    "sequence.editor",
    "diff.external",
    "gpg.program",
    "gpg.*.program",
    "credential.helper",
    "credential.*.helper",
    "include.path",
    "includeif.*.path",
    "uploadpack.packobjectshook",
    "diff.*.textconv",
    "diff.*.command",
    "merge.*.driver",
    "filter.*.clean",
    "filter.*.smudge",
    "filter.*.process",
    "pager.*",
    "core.worktree",
    "remote.*.uploadpack",
    "remote.*.receivepack",
    "protocol.*.allow",
    "interactive.difffilter",
    "web.browser",
    "browser.*.cmd",
    "man.*.cmd",
    "mergetool.*.cmd",
    "difftool.*.cmd",
    "ssh.variant",
    "gpg.ssh.defaultkeycommand",
    "core.alternaterefscommand",
    "submodule.*.update",
    "trailer.*.cmd",
    "trailer.*.command",
    "init.templatedir",
    "gpg.*.defaultkeycommand",
)


def _runs_commands(key: str) -> bool:
    from fnmatch import fnmatchcase

    return any(fnmatchcase(key.lower(), pattern) for pattern in _RUNS_COMMANDS)


def ground(ctx) -> list[tuple[str, str]]:
    """(directory or file, what it is) for everything this rule keeps a holder out of."""
    from proctor.paths import cache_base, state_base

    home = os.path.expanduser("~")
    xdg_config = ctx.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    checkout = ctx.checkout
    out = [
        (os.path.join(ctx.root, ".git"), "the repository's git directory"),
        (checkout.git_dir, "the repository's git directory"),
        (checkout.common_dir, "the repository's git directory"),
        (state_base(), "proctor's state (the store and the server's files)"),
        (ctx.state_dir, "proctor's state (the store and the server's files)"),
        (cache_base(), "proctor's cache (the guard's settings cache and checkpoints)"),
        (os.path.join(home, ".gitconfig"), "git's global configuration"),
        (os.path.join(xdg_config, "git"), "git's global configuration"),
        ("/etc/gitconfig", "git's system configuration"),
    ]
    env = ctx.environ
    # each agent host's hook wiring, plugins and records, as its module (proctor/hosts/) names them
    from proctor.hosts import modules as host_modules

    for host in host_modules():
        out.extend(host.protected(ctx.root, home, xdg_config, env))
    for variable, what in (
        ("GIT_CONFIG_GLOBAL", "git's global configuration"),
        ("GIT_CONFIG_SYSTEM", "git's system configuration"),
    ):
        if env.get(variable) and os.path.isabs(env[variable]):
            out.append((env[variable], what))
    # the guard itself: proctor's code, and the interpreter and environment that run it, unless
    # they are this checkout's own files (proctor developed under its own guard: the job's paths
    # judge those)
    import sys

    import proctor

    for path, what in (
        (os.path.dirname(os.path.abspath(proctor.__file__)), "proctor's own code"),
        (sys.prefix if sys.prefix != sys.base_prefix else "", "the environment proctor's hook runs in"),
        (sys.executable, "the interpreter proctor's hook runs in"),
    ):
        if path and not _inside(os.path.realpath(path), ctx.root):
            out.append((path, what))
    for tree in ctx.other_trees():  # a worktree's .git file names its git directory
        out.append((os.path.join(tree, ".git"), "a work tree's git directory"))
    real: list[tuple[str, str]] = []
    parents: dict[str, str] = {}  # a parent directory -> its real path
    for path, what in out:
        real.append((_real(path, parents), what))
    return real


def _real(path: str, parents: dict) -> str:
    """os.path.realpath, resolving each parent directory once: the ground's ~45 places share a
    handful of parents (home, the checkout, the state and cache bases)."""
    parent, name = os.path.split(os.path.abspath(path))
    resolved = parents.get(parent)
    if resolved is None:
        resolved = parents[parent] = os.path.realpath(parent)
    full = os.path.join(resolved, name)
    return os.path.realpath(full) if os.path.islink(full) else full


def _ground_inodes(places: list[tuple[str, str]], budget: int = 20_000) -> dict:
    """(device, inode) of every hard-linked file in the ground, walked within a budget: a hard
    link made to one of them (~/.gitconfig, the store, a repository key) is that file."""
    found: dict = {}
    for base, what in places:
        if not os.path.isdir(base):
            try:
                info = os.stat(base)
                found[(info.st_dev, info.st_ino)] = f"{base} ({what})"
            except (OSError, ValueError):
                pass
            continue
        for directory, dirs, files in os.walk(base):
            budget -= len(files) + len(dirs)
            if budget < 0:
                return found
            for name in files:
                full = os.path.join(directory, name)
                try:
                    info = os.stat(full)
                except OSError:
                    continue
                if info.st_nlink > 1:
                    found[(info.st_dev, info.st_ino)] = f"{full} ({what})"
    return found


def _reaches(path: str, base: str, root: str) -> bool:
    """Whether a write to `path` lands on `base`: inside it, or (for ground outside the
    repository) into a directory holding it, as `cp -r x/. ~/.claude/` or `tar -x -C ~` do."""
    if _inside(path, base):
        return True
    if any(char in path for char in "*?["):  # a glob the shell left unexpanded: whatever it may match
        return _named_by(path, base, "/")
    return not _inside(base, root) and _inside(base, path) and os.path.isdir(path)


def _inside(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")


def _named_by(word: str, base: str, cwd: str) -> bool:
    """Whether an argument names `base`, a path inside it, or (a glob) may match one of them."""
    import fnmatch

    text = os.path.expanduser(word.split("=", 1)[1] if word.startswith("-") and "=" in word else word)
    if not text or text.startswith("-"):
        return False
    full = os.path.normpath(text if os.path.isabs(text) else os.path.join(cwd, text))
    if any(char in full for char in "*?["):
        if "**" in full:  # globstar: any depth
            return fnmatch.fnmatchcase(base, full) or fnmatch.fnmatchcase(base, full.split("**", 1)[0] + "*")
        parts = full.split("/")
        target = base.split("/")
        # the pattern matches the base, a directory above it, or a path inside it; as bash
        # globs, a name starting with a dot is matched only by a pattern part that does
        return all(
            fnmatch.fnmatchcase(t, p) and (p.startswith(".") or not t.startswith(".")) for p, t in zip(parts, target)
        )
    return _inside(_realpath(full), base) or _inside(full, base)


@functools.lru_cache(maxsize=4096)
def _realpath(path: str) -> str:
    """os.path.realpath, once per path for the call (a command's words are tried against
    several places)."""
    return os.path.realpath(path)


def _holds(path: str, token: str, state: str, recursive: bool = False) -> bool:
    """Whether reading `path` reads the token: the token itself, a directory on the way down to
    it inside proctor's state, or, for a reader that walks down (a recursive grep, find, tar, a
    Grep or Glob tool), any directory above it but the filesystem's root."""
    if _inside(path, token):
        return True
    return _inside(token, path) and (_inside(path, state) or (recursive and path != "/"))


_WALKERS = frozenset(
    ("find", "rg", "ag", "ack", "tar", "zip", "rsync", "cpio", "pax", "tree", "du", "fd", "fdfind", "locate")
)


def _walks(argv: list[str]) -> bool:
    """Whether a command reads directories recursively (find, rg, tar; grep -r, cp -r, ls -R)."""
    name = os.path.basename(argv[0]) if argv else ""
    if name in _WALKERS:
        return True
    flags = "".join(w[1:] for w in argv[1:] if w.startswith("-") and not w.startswith("--"))
    long = {w for w in argv[1:] if w.startswith("--")}
    if name == "cp" and ("a" in flags or "--archive" in long):
        return True
    return bool(set(flags) & set("rR")) or bool(long & {"--recursive", "--dereference-recursive"})


def check(ctx: Context) -> list[tuple[str, str]]:
    job = ctx.job
    if job is None:
        return []
    _realpath.cache_clear()  # the file system as this call finds it
    places = ground(ctx)
    findings: list[tuple[str, str]] = []
    said: set[str] = set()

    def deny(message: str) -> None:
        if message not in said:
            said.add(message)
            findings.append(("rule", message))

    linked: dict | None = None
    for path in ctx.written_paths():
        for base, what in places:
            if _reaches(path, base, ctx.root):
                deny(
                    f"{path} is inside {what}; a session holding {job['id']} never writes there, whatever "
                    f"its write paths"
                )
                break
        else:
            try:
                info = os.stat(path)
            except (OSError, ValueError):
                continue
            if info.st_nlink > 1 and not os.path.isdir(path):  # another name of a file in the ground?
                linked = _ground_inodes(places) if linked is None else linked
                other = linked.get((info.st_dev, info.st_ino))
                if other:
                    deny(f"{path} is a hard link to {other}; a session holding {job['id']} never writes there")
    from proctor.paths import state_base

    token = os.path.realpath(os.path.join(ctx.state_dir, "server", "token"))
    state = os.path.realpath(state_base())
    walker = ctx.call.tool in ("Grep", "Glob", "LS", "grep_search", "glob", "search_file_content", "grep")
    for path in ctx.call.reads:
        if _holds(ctx.full_path(path), token, state, walker) or _named_by(path, token, ctx.cwd):
            deny(f"{path} holds the server's token; a session holding {job['id']} does not read it")
    walking = any(_walks(argv) for argv in ctx.commands())
    for path in ctx.shell_writes.named:
        if _holds(path, token, state, walking) or _named_by(path, token, ctx.cwd):
            deny(
                f"this command reads {path}, which holds the server's token; a session holding {job['id']} "
                f"does not read it"
            )
            break
    store_places = [(b, w) for b, w in places if w.startswith("proctor's")]
    remote = _store_url(ctx)
    for argv in ctx.commands():
        name = os.path.basename(argv[0]) if argv else ""
        words = argv[1:]
        if remote and name != "proctor" and (name in PG_CLIENTS or any(_names_store(w, remote) for w in words)):
            deny(
                f"{name} {'connects to PostgreSQL' if name in PG_CLIENTS else 'is handed the store'}, where this "
                f"repository's store lives; a session holding {job['id']} changes proctor's records only through "
                f"proctor's commands"
            )
            continue
        if any(_named_by(w, token, ctx.cwd) for w in words):
            deny(f"{' '.join(argv)[:200]} names the server's token; a session holding {job['id']} does not read it")
        if name == "git":
            key = _git_config_key(words)
            if key is not None:
                deny(
                    f"git config {key} makes git run a command (a hook or a program of the worker's choosing); a "
                    f"session holding {job['id']} does not set it"
                )
            if _git_subcommand(words)[:1] == ["replace"] and not {"-l", "--list"} & set(words):
                deny(
                    f"git replace makes every reader of the history, proctor included, see other objects; a "
                    f"session holding {job['id']} does not replace objects"
                )
            continue
        if name == "ln" and not any(
            w in ("-s", "--symbolic") or (w.startswith("-") and not w.startswith("--") and "s" in w) for w in words
        ):
            linked_ground = [w for w in words for base, _ in places if _named_by(w, base, ctx.cwd)]
            if linked_ground:
                deny(
                    f"ln {linked_ground[0]}: a hard link to a file in proctor's or git's ground would let a later "
                    f"write reach it; a session holding {job['id']} does not make one"
                )
        if name == "proctor" or not words:
            continue
        # a path as an argument, or inside one (an interpreter's script naming the store)
        reaching = [
            w
            for w in words
            for base, _ in store_places
            if _named_by(w, base, ctx.cwd) or (base in w and len(w) > len(base))
        ]
        from proctor.guard import shell  # (a call with a command has loaded it already)

        if reaching and not shell.is_read(" ".join(_quote(w) for w in argv), ctx.cwd):
            deny(
                f"{name} is handed {reaching[0]}, inside proctor's own state or cache; a session holding "
                f"{job['id']} changes proctor's records only through proctor's commands"
            )
    return findings


# PostgreSQL's client programs: on a PostgreSQL store, each reaches the database the jobs live in.
PG_CLIENTS = frozenset(
    (
        "psql",
        "pg_dump",
        "pg_dumpall",
        "pg_restore",
        "createdb",
        "dropdb",
        "createuser",
        "dropuser",
        "vacuumdb",
        "reindexdb",
        "clusterdb",
        "pgbench",
        "pg_basebackup",
        "pg_recvlogical",
    )
)


def _store_url(ctx) -> str | None:
    from proctor.store import configured_url

    url = configured_url(ctx.root)
    return url if url and not url.startswith("sqlite") else None


def _names_store(word: str, url: str) -> bool:
    """A word that carries the store's URL, or its host and database (a connection string)."""
    if url in word:
        return True
    rest = url.split("?", 1)[0].split("://", 1)[-1]
    database = rest.split("/", 1)[1] if "/" in rest else ""
    return bool(database) and ("postgres" in word or "dbname=" in word) and database in word


def _quote(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


_GIT_VALUE_OPTIONS = (
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--exec-path",
    "--config-env",
    "--super-prefix",
    "--list-cmds",
    "--attr-source",
)


def _git_subcommand(words: list[str]) -> list[str]:
    """git's subcommand and its arguments, past git's own options."""
    i = 0
    while i < len(words) and words[i].startswith("-"):
        i += 2 if words[i] in _GIT_VALUE_OPTIONS else 1
    return words[i:]


def _git_config_key(words: list[str]) -> str | None:
    """The key `git [global options] config ...` sets, when it is one that runs a command, or
    one proctor cannot read (held in a variable)."""
    sub = _git_subcommand(words)
    if sub[:1] != ["config"]:
        return None
    rest = sub[1:]
    from proctor.guard.context import Context

    operands = Context.positional(
        rest, {"--file", "-f", "--blob", "--type", "--default", "--comment", "--value", "--url"}
    )
    if operands[:1] in (
        ["set"],
        ["unset"],
        ["get"],
        ["list"],
        ["edit"],
        ["rename-section"],
        ["remove-section"],
        ["get-color"],
        ["get-colorbool"],
    ):
        verb, operands = operands[0], operands[1:]
        if verb == "edit":
            return "(its editor: any key)"
        if verb != "set":
            return None
    elif "--edit" in rest or "-e" in rest:
        return "(its editor: any key)"
    if len(operands) < 2 or any(
        flag in rest
        for flag in (
            "--unset",
            "--unset-all",
            "--get",
            "--get-all",
            "--get-regexp",
            "--get-urlmatch",
            "--remove-section",
            "--rename-section",
        )
    ):
        return None  # a read, or a removal: nothing set (git takes a third operand as a value pattern)
    key = operands[0]
    if "$" in key or "`" in key:
        return f"{key} (a key proctor cannot read)"
    return key if _runs_commands(key) else None
