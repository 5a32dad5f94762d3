"""lease-store: what a leased session may run on the job store."""

from __future__ import annotations

import json
import os
import posixpath

from proctor import claims, jobrecord
from proctor.guard.call import PRE_TOOL
from proctor.guard.context import Context

NAME = "lease-store"
DEFAULT = "deny"
EVENTS = (PRE_TOOL,)
ORDER = 80  # where it is judged among the rules (proctor/guard/rules/__init__.py)
SUMMARY = (
    "a leased session forks outside its own job, takes, ends or waits on a job not its own or beneath "
    "it, manages monitors without its job's secret (or with it removed), starts or stops the server, or runs "
    "the guard's hook itself; the same calls through proctor's MCP tools (job_put, job_exec, job_exit, "
    "job_wait, monitor_*)"
)
CATCHES = (
    "`proctor job fork` by a session under a live job that names neither its own job (shrinking "
    "its write paths, changing nothing else of its row, in a checkout bound to that job) nor --parent "
    "<its job> (as flags, or a --stdin record in the fork's own quoted here-document) for a new job or "
    "a child nobody has taken yet, whose read paths and depends_on stay within what the holder may read; `proctor job wait` on any job that is not one "
    "of its descendants; `proctor job move`; `proctor job exit`, archive, trash or delete of a job that is neither its own "
    "nor beneath it, or one named through xargs, a variable or a substitution; `proctor job exec` of "
    "another job while its own is in flight (taking a lease is one-way); any proctor command passed "
    "--lease naming another job or --orchestrator (or an option the guard cannot read: a variable or a "
    "substitution), or run with BAGGAGE changed or unset; any command with PROCTOR_MACHINE, "
    "PROCTOR_STORE_URL or PROCTOR_STORE_URL_FILE set, exported or unset (another machine's name "
    "would judge its checkouts from here); `proctor run` with its environment changed "
    "(an assignment or env before it, an export or unset beside it), which would make the run "
    "evidence of another command; `proctor monitor` (but `monitor wait`, which reads its own job's "
    "follow-ups) without the job's secret in PROCTOR_NONCE (in the session's environment, or assigned "
    "before the command), or with it removed (env -u, env -i, unset, an empty assignment), which "
    "would fall back to the server token, a person's; `proctor server start` and `stop`, and "
    "pkill or killall of proctor's processes; and `proctor hook`, whose hand-made event could rebind "
    "the session or a subagent. proctor's MCP tools, reported as mcp__proctor__<tool>, are judged as "
    "the same command: job_put as a fork's record, job_exec, job_exit and job_wait as those commands, "
    "monitor tools without the job's secret in the session's environment."
)
WHY = (
    "One author per job: widening a boundary, changing the plan's shape and verifying a result "
    "are the forking session's. The store refuses these too; the guard refuses them at the call, "
    "with the caller's session known, before anything runs."
)


def check(ctx: Context) -> list[tuple[str, str]]:
    job = ctx.job
    if job is None:
        return []
    lease = job["id"]
    if ctx.call.proctor_tool:
        why = _mcp_refusal(ctx, job)
        return [("rule", why)] if why else []
    findings = []
    for words in _environments(ctx):
        changed = _baggage_change(words, lease)
        if changed:
            findings.append(
                (
                    "rule",
                    f"{changed}: a session holding {lease} runs everything as {lease} (any "
                    f"program can run proctor); the lease in its environment is not the "
                    f"session's to change",
                )
            )
            break
    for words in _environments(ctx):
        changed = _store_change(words)
        if changed:
            findings.append(
                (
                    "rule",
                    f"{changed}: a session holding {lease} works the store and the machine it was "
                    f"given (another machine's name would judge that machine's checkouts from "
                    f"here and end their jobs; another store holds none of its rules)",
                )
            )
            break
    changed_env = _check_environment(ctx)
    if changed_env:
        findings.append(
            (
                "rule",
                f"proctor run with {changed_env[:80]}: a session holding {lease} runs its check "
                f"in the environment it was given, or the run is evidence of another command "
                f"(a PATH, PYTHONPATH or LD_PRELOAD of its own picks what the check runs); put "
                f"what the target needs in its command in proctor.toml",
            )
        )
    for argv in ctx.commands():
        if argv and os.path.basename(argv[0]) in ("pkill", "killall") and any("proctor" in a for a in argv[1:]):
            findings.append(
                (
                    "rule",
                    f"{' '.join(argv)[:120]}: a session holding {lease} does not signal proctor's "
                    f"own processes (the server every job's monitors run in, a worker's runner)",
                )
            )
    monitor_secret = _monitor_secret(ctx) if any(a[:1] == ["monitor"] for a in ctx.proctor_commands()) else None
    for argv, stdin in ctx.proctor_calls():
        hidden = [
            a
            for a in argv[1:]
            if a == "--orchestrator"
            or a.startswith("--orchestrator=")
            or a[:1] in ("$", "`")
            or (a.startswith("-") and ("$" in a or "`" in a))
        ]
        if hidden:
            findings.append(
                (
                    "rule",
                    f"proctor {' '.join(argv[:2])} {hidden[0][:60]}: a session holding {lease} acts "
                    f"as {lease}, never as the orchestrator (--orchestrator is the forking "
                    f"session's), and passes proctor's options literally, where the guard can "
                    f"read them",
                )
            )
        if argv[:2] == ["job", "fork"]:
            verdict = _fork_refusal(ctx, argv[2:], job, stdin)
            if verdict:
                findings.append(("rule", verdict))
        elif argv[:2] == ["monitor", "wait"]:
            waited = _option_value(argv[2:], "--job")
            if waited is not None and waited != lease:
                findings.append(
                    (
                        "rule",
                        f"proctor monitor wait --job {waited[:60]}: a session holding {lease} waits "
                        f"for its own job's follow-ups (--job {lease}); another job's are its "
                        f"agent's to read",
                    )
                )
        elif argv[:1] == ["monitor"] and monitor_secret is not None:
            removed, given = monitor_secret
            if removed:
                findings.append(
                    (
                        "rule",
                        f"proctor {' '.join(argv[:2])} with {removed}: a session holding {lease} "
                        f"keeps its job's secret (PROCTOR_NONCE) for monitors; without it the CLI "
                        f"would reach for the server token, which is a person's",
                    )
                )
            elif not (ctx.environ.get("PROCTOR_NONCE") or given or ctx.environ.get("PROCTOR_WORKER_HOOK")):
                # (a `proctor work` worker's hook runs under env -i; its runner gave it the secret)
                findings.append(
                    (
                        "rule",
                        f"proctor {' '.join(argv[:2])}: a session holding {lease} manages monitors "
                        f"with its job's secret (PROCTOR_NONCE, printed by proctor job exec {lease}), "
                        f"which scopes it to {lease}'s monitors; the server token is a person's",
                    )
                )
        elif argv[:1] == ["hook"]:
            findings.append(
                (
                    "rule",
                    f"proctor {' '.join(argv[:2])}: a session holding {lease} does not run the "
                    f"guard's hook itself; its host runs it on every call, and a hand-made event "
                    f"could bind this session or a subagent to another job",
                )
            )
        elif argv[:1] == ["store"] and argv[1:2] != ["--help"]:
            findings.append(
                (
                    "rule",
                    f"proctor {' '.join(argv[:2])}: a session holding {lease} does not move or "
                    f"replace the store every job lives in (--replace empties it); a person moves "
                    f"a store",
                )
            )
        elif argv[:2] in (["server", "stop"], ["server", "start"]):
            findings.append(
                (
                    "rule",
                    f"proctor server {argv[1]}: a session holding {lease} does not {argv[1]} the "
                    f"server every job's monitors run in (one started under a lease would hand "
                    f"its lease and secret to all of them); a person {argv[1]}s the server",
                )
            )
        elif argv[:2] == ["job", "move"] and "--help" not in argv:
            findings.append(
                (
                    "rule",
                    f"proctor job move: a session holding {lease} does not move cards on the "
                    f"board (a passive column would end monitors); a person moves them",
                )
            )
        elif argv[:1] == ["job"] and argv[1:2] and argv[1] in ("exit", "archive", "trash", "delete", "exec"):
            target = next(iter(ctx.positional(argv[2:])), None)
            if target is None or not _literal(target):
                findings.append(
                    (
                        "rule",
                        f"proctor job {argv[1]} {target or ''}: a session holding {lease} names "
                        f"the job it {'takes' if argv[1] == 'exec' else 'ends'} literally, where "
                        f"the guard can read it (not from xargs, a variable or a substitution)",
                    )
                )
            elif argv[1] == "exec":
                if target != lease and jobrecord.in_flight(job["state"]):
                    findings.append(
                        (
                            "rule",
                            f"proctor job exec {target}: this session holds {lease}, still "
                            f"{job['state']}; taking a lease is one-way while the job is in "
                            f"flight. Return it first (proctor job exit {lease} --stdin)",
                        )
                    )
            elif target != lease and target not in ctx.descendants(lease):
                findings.append(
                    (
                        "rule",
                        f"proctor job {argv[1]} {target}: a session holding {lease} ends only its "
                        f"own job or one forked beneath it; {target} is its forking session's",
                    )
                )
        if "--lease" in argv or any(a.startswith("--lease=") for a in argv):
            named = next((a.split("=", 1)[1] for a in argv if a.startswith("--lease=")), None)
            if named is None and "--lease" in argv and argv.index("--lease") + 1 < len(argv):
                named = argv[argv.index("--lease") + 1]
            if named is not None and named != lease:
                findings.append(
                    (
                        "rule",
                        f"proctor {' '.join(argv[:2])} --lease {named}: a session holding {lease} acts only as {lease}",
                    )
                )
        if argv[:2] == ["job", "wait"]:
            target = next(iter(ctx.positional(argv[2:])), None)
            if target and target not in ctx.descendants(lease):
                findings.append(
                    (
                        "rule",
                        f"proctor job wait {target}: a session holding {lease} waits only on "
                        f"jobs forked beneath it; verifying {target} is its forking session's",
                    )
                )
    return findings


def _environments(ctx) -> list[list[str]]:
    """The words before every command of the call (assignments, env and its options), and every
    command that unsets or exports a variable."""
    out = []
    for with_wrappers, argv, _ in ctx.shell_writes.simple:
        if not argv:
            continue
        if argv[0] in ("unset", "export", "declare", "typeset", "readonly", "local"):
            out.append(argv)
        else:
            out.append(with_wrappers[: len(with_wrappers) - len(argv)])
    return out


def _removes(words: list[str], name: str) -> str | None:
    """What in these words (the ones before a command, or an unset/export command) removes
    the variable `name` or empties it, if anything: env -u NAME (-uNAME, --unset[=]NAME), env
    -i (unless NAME is given again after it), unset NAME, export -n NAME, NAME= ."""
    verb = words[0] if words else ""
    for index, word in enumerate(words):
        if word == f"{name}=" or word in (f"{name}=''", f'{name}=""'):
            return f"{word} (empty)"
        if word in ("-u", "--unset") and words[index + 1 : index + 2] == [name]:
            return f"env {word} {name}"
        if word in (f"-u{name}", f"--unset={name}"):
            return f"env {word}"
        if word in ("-i", "--ignore-environment", "-") and index > 0 and os.path.basename(words[index - 1]) == "env":
            if not any(w.startswith(f"{name}=") and len(w) > len(name) + 1 for w in words[index + 1 :]):
                return f"env {word}"
        if (
            word == name
            and verb in ("unset", "export", "declare", "typeset", "local", "readonly")
            and (verb == "unset" or "-n" in words[1:index] or "+x" in words[1:index])
        ):
            return f"{verb} {' '.join(words[1 : index + 1])}"
    return None


def _monitor_secret(ctx) -> tuple[str | None, bool]:
    """(what in this call removes PROCTOR_NONCE, if anything; whether it gives a non-empty one
    to a proctor command: NAME=value before it, or export NAME=value beside it)."""
    removed, given = None, False
    for words in _environments(ctx):
        removed = removed or _removes(words, "PROCTOR_NONCE")
        given = given or any(
            w.startswith("PROCTOR_NONCE=")
            and len(w) > len("PROCTOR_NONCE=")
            and w not in ("PROCTOR_NONCE=''", 'PROCTOR_NONCE=""')
            for w in words
        )
    return removed, given


def _check_environment(ctx) -> str | None:
    """What in this call changes the environment of a `proctor run` in it, if anything: an
    assignment or env option before it, or an export, unset or declare beside it."""
    runs = []
    changes = []
    for with_wrappers, argv, _ in ctx.shell_writes.simple:
        if not argv:
            continue
        name = os.path.basename(argv[0])
        args = argv[1:] if name == "proctor" else None
        if args is None and name.startswith("python"):
            from proctor.guard.context import _python_module_args

            args = _python_module_args(argv[1:], "proctor")
        if args is not None:
            if args[:1] == ["run"]:
                before = with_wrappers[: len(with_wrappers) - len(argv)]
                runs.append(next((w for w in before if "=" in w or w.startswith("-") or w == "env"), None))
        elif argv[0] in ("export", "unset", "declare", "typeset", "readonly", "local", "set") and len(argv) > 1:
            changes.append(" ".join(argv[:2]))
    if not runs:
        return None
    return next((w for w in runs if w), None) or (changes[0] if changes else None)


def _listed(value) -> list:
    """A record's list field, as flags spell it (comma-separated) or as JSON gives it."""
    if isinstance(value, str):
        return jobrecord.comma_list(value)
    return list(value) if isinstance(value, list) else []


def _literal(word: str) -> bool:
    return bool(word) and not any(c in word for c in "$`{}*?[") and all(c.isalnum() or c in "_.-/" for c in word)


def _baggage_change(words: list[str], lease: str) -> str | None:
    """What in these words changes BAGGAGE for a proctor command, if anything does."""
    for index, word in enumerate(words):
        if (
            word.startswith("BAGGAGE=")
            and jobrecord.parse_baggage(word[len("BAGGAGE=") :]).get(jobrecord.BAGGAGE_KEY) != lease
        ):
            return word[:80]
        if word in ("-u", "--unset") and index + 1 < len(words) and words[index + 1] == "BAGGAGE":
            return f"env {word} BAGGAGE"
        if (
            word.startswith("--unset=BAGGAGE")
            or word == "-uBAGGAGE"
            or (word in ("-i", "--ignore-environment", "-") and index > 0 and words[index - 1].endswith("env"))
        ):
            return f"env {word}"
        if word == "BAGGAGE" and words[0] in ("unset", "export", "declare", "typeset", "local", "readonly"):
            return f"{words[0]} BAGGAGE"
    return None


# What names the store and this machine: not a leased session's to change for any command (any
# program can run proctor).
STORE_VARIABLES = ("PROCTOR_MACHINE", "PROCTOR_STORE_URL", "PROCTOR_STORE_URL_FILE")


def _store_change(words: list[str]) -> str | None:
    """What in these words sets, exports or unsets a STORE_VARIABLES name, if anything does."""
    verb = words[0] if words else ""
    declares = verb in ("export", "declare", "typeset", "local", "readonly")
    for index, word in enumerate(words):
        name = word.split("=", 1)[0]
        if declares and index and not word.startswith("-") and ("$" in name or "`" in name):
            return f"{verb} {word[:60]} (a name the guard cannot read)"
        if name in STORE_VARIABLES and (
            "=" in word or verb in ("unset", "export", "declare", "typeset", "local", "readonly")
        ):
            return word[:80] if "=" in word else f"{verb} {word}"
        if word in ("-u", "--unset") and index + 1 < len(words) and words[index + 1] in STORE_VARIABLES:
            return f"env {word} {words[index + 1]}"
        if word.startswith(("-u", "--unset=")) and word.split("=", 1)[-1].lstrip("-u") in STORE_VARIABLES:
            return f"env {word}"
    return None


# `proctor job fork`'s options that set a field of the record (the CLI's own, which the hook
# cannot load; tests/test_layers.py ties this table to them), and its one flag that does.
FORK_VALUE_OPTIONS = {
    "--parent": "parent",
    "--write-paths": "write_paths",
    "--check": "check",
    "--criteria": "criteria",
    "--deny-paths": "deny_paths",
    "--read-paths": "read_paths",
    "--depends-on": "depends_on",
    "--timeout": "timeout",
    "--model": "model",
    "--checkpoint": "checkpoint",
}
FORK_FLAG_OPTIONS = {"--read-only": "read_only"}


def _flags(args: list[str]) -> dict:
    """The record a `proctor job fork` command line states, as the guard reads it."""
    record: dict = {}
    i = 0
    names = FORK_VALUE_OPTIONS
    while i < len(args):
        arg = args[i]
        if arg in names and i + 1 < len(args):
            record[names[arg]] = args[i + 1]
            i += 2
            continue
        if arg.startswith("--") and "=" in arg and arg.split("=", 1)[0] in names:
            key, value = arg.split("=", 1)
            record[names[key]] = value
        elif arg in FORK_FLAG_OPTIONS:
            record[FORK_FLAG_OPTIONS[arg]] = True
        i += 1
    positional = Context.positional(args)
    if positional:
        record["id"] = positional[0]
    return record


def _fork_refusal(ctx, args: list[str], job: dict, stdin: str | None) -> str | None:
    """`stdin`: what this fork reads on standard input when it is its own literal here-document
    or here-string (shell.Writes.stdins), else None."""
    lease = job["id"]
    if "--schema" in args:
        return None
    record = _flags(args)
    if "--stdin" in args:
        try:
            parsed = json.loads(stdin) if stdin is not None else None
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            return (
                f"proctor job fork --stdin: a session holding {lease} passes its record as the fork's own "
                f"quoted here-document (proctor job fork --stdin <<'EOF'), where the guard reads what the fork "
                f"reads; not from a pipe, a file, another command's here-document or one that expands"
            )
        record = {**parsed, **{k: v for k, v in record.items() if k == "id" and "id" not in parsed}}
    return _record_refusal(ctx, record, job, "proctor job fork")


def _record_refusal(ctx, record: dict, job: dict, verb: str) -> str | None:
    """Why a leased session may not put this job record (`verb` is how it was asked: `proctor
    job fork` in a shell command, or the MCP door's job_put), or None: jobrecord.one_author's
    findings, said at the call, and this checkout's binding."""
    lease = job["id"]
    job_id = record.get("id")
    if job_id != lease and record.get("parent") == lease and not isinstance(job_id, str):
        return f"{verb} {job_id}: a fork names its NEW job by an id; {lease}'s children are named literally"
    found = jobrecord.one_author(
        job,
        _normalised(record),
        job if job_id == lease else ctx.job_row(job_id) if isinstance(job_id, str) else None,
        lambda: {lease, *ctx.descendants(lease)},
        lambda: _boundary(ctx, job),
        [(s, _path_claim(s)) for s in _listed(record.get("write_paths"))],
        [(r, _path_claim(r)) for r in _listed(record.get("read_paths"))],
    )
    if found:
        finding, detail = found[0]
        if finding == "not-child" and record.get("parent") == lease:
            return (
                f"{verb} {job_id}: a fork declares a NEW job, and {job_id} exists already; a session "
                f"holding {lease} does not rewrite another job's row"
            )
        if finding == "not-child":
            return (
                f"{verb} {job_id or ''}: a session holding {lease} may fork only children of its own "
                f"job (--parent {lease}) or shrink its own write paths; anything else is its forking session's"
            )
        if finding == "ended":
            return (
                f"{verb} {job_id}: {lease} has ended ({detail}); an ended job neither changes its paths nor "
                f"takes children (proctor job exec <id> takes the next)"
            )
        if finding == "fields":
            return (
                f"{verb} {lease}: a holder changes only its own write paths, by shrinking them; "
                f"{', '.join(sorted(detail))} of {lease} are its forking session's"
            )
        if finding == "empty":
            return (
                f"{verb} {lease}: shrinking the write paths to none leaves no boundary at all (an "
                f"empty write set scopes nothing); keep the paths still being written, or return the job "
                f"(proctor job exit {lease} --stdin)"
            )
        if finding == "state":
            return (
                f"{verb} {job_id}: a holder does not set a child's state ({str(detail)[:40]}); a "
                f"child starts declared and its own holder moves it"
            )
        if finding == "taken":
            return (
                f"{verb} {job_id}: {job_id} is {detail}, so its terms are its own holder's now; a holder "
                f"re-declares only a child nobody has taken"
            )
        if finding == "depends":
            return (
                f"{verb} {job_id}: depends_on {', '.join(map(str, detail))} reaches past "
                f"{lease}'s own jobs, and widens what the child may read; that is the forking session's"
            )
        if finding == "reads":
            return (
                f"{verb} {job_id}: read_paths {', '.join(map(str, detail[0]))} reach past what {lease} "
                f"may read; a holder hands a child no more than it holds"
            )
        what = "widens your write paths" if finding == "widens" else f"lies outside {lease}'s write paths"
        return (
            f"{verb} {job_id}: {', '.join(map(str, detail))} {what}; a holder only narrows what it holds, "
            f"and widening is its forking session's"
        )
    # the lease may be the hook's alone (a session's record, or a --lease the shell's BAGGAGE need
    # not carry): unless this checkout is bound to the job, the fork's proctor may see none
    blind = ctx.lease_from in ("agent", "contested", "flag") and not _checkout_bound_to(ctx, lease)
    if job_id == lease and blind:
        # the store would take the record as the forking session's new plan for the job, every
        # field it leaves out cleared (its deny and read paths, its deadline, its write paths)
        return (
            f"{verb} {lease}: this checkout is not bound to {lease}, so the store cannot tell this fork is "
            f"{lease}'s holder shrinking its paths, and would take it as a new plan for the whole job; "
            f"take the job in this checkout first (proctor job exec {lease})"
        )
    if job_id != lease and blind and ctx.lease_from != "flag":
        declares = [k for k in ("write_paths", "check", "goals", "deny_paths", "read_paths") if record.get(k)]
        if not record.get("read_only") or declares:
            return (
                f"{verb} {job_id}: this checkout is bound to nobody, so the store cannot grade a "
                f"child written as {lease} here; fork only a --read-only child that declares no paths, "
                f"check or goals, or take the job in this checkout first (proctor job exec {lease})"
            )
    return None


def _normalised(record: dict) -> dict:
    """The record as the one-author check compares it with a row, read as cheaply as the hook
    may: an empty value names nothing (the store's reading drops it too), and a list field
    spelled as flags spell it (comma-separated) is a list, and a check is a row's {"target": ...}."""
    out = {}
    for field, value in record.items():
        if field in jobrecord.LIST_FIELDS and isinstance(value, str):
            value = _listed(value)
        elif field == "check" and value:
            value = jobrecord.check_as_stored(value)
        if value in (None, "", False) and field != "write_paths":
            continue
        out[field] = value
    return out


def _path_claim(spelling) -> claims.Claim | None:
    """A path entry (write or read) as the store reads it: split at its declaration's `#`
    first, then normalised (plan/w1/../../docs is docs); None for one that leaves the
    repository or is no string."""
    if not isinstance(spelling, str):
        return None
    path, declaration, _ = claims.split_entry(spelling[2:] if spelling.startswith("./") else spelling)
    path = posixpath.normpath(path.rstrip("/") or ".")
    if path == ".." or path.startswith("../") or path.startswith("/"):
        return None
    return claims.Claim(path, declaration)


def _boundary(ctx, job: dict) -> list:
    from proctor.guard.rules.lease_read_boundary import boundary

    return boundary(ctx, job)


def _mcp_refusal(ctx, job: dict) -> str | None:
    """Why a leased session may not make this call of proctor's MCP tools (reported by its host
    as mcp__proctor__<tool>), judged as the same command in a shell would be, or None."""
    lease = job["id"]
    name, args = ctx.call.proctor_tool, ctx.call.tool_args if isinstance(ctx.call.tool_args, dict) else {}
    target = args.get("id")
    if name == "job_put":
        return _record_refusal(ctx, dict(args), job, "job_put")
    if name in ("job_exec", "job_exit", "job_wait") and not isinstance(target, str):
        return None  # the tool refuses a call naming no job; there is nothing to judge
    if name == "job_exec" and target != lease and jobrecord.in_flight(job["state"]):
        return (
            f"job_exec {target}: this session holds {lease}, still {job['state']}; taking a lease is one-way "
            f"while the job is in flight. Return it first (job_exit {lease} with a result)"
        )
    if name == "job_exit" and target != lease and target not in ctx.descendants(lease):
        return (
            f"job_exit {target}: a session holding {lease} ends only its own job or one forked beneath it; "
            f"{target} is its forking session's"
        )
    if name == "job_wait" and target not in ctx.descendants(lease):
        return (
            f"job_wait {target}: a session holding {lease} waits only on jobs forked beneath it; verifying "
            f"{target} is its forking session's"
        )
    if name.startswith("monitor_") and not (ctx.environ.get("PROCTOR_NONCE") or ctx.environ.get("PROCTOR_WORKER_HOOK")):
        return (
            f"{name}: a session holding {lease} manages monitors with its job's secret (PROCTOR_NONCE, printed "
            f"by proctor job exec {lease}, in the environment its host started proctor mcp with), which scopes "
            f"it to {lease}'s monitors; the server token is a person's"
        )
    return None


def _checkout_bound_to(ctx, lease: str) -> bool:
    from proctor.store.rows import bound_job, checkout_scope

    return ctx.conn is not None and bound_job(ctx.conn, checkout_scope(ctx.root)) == lease


def _option_value(args: list[str], name: str) -> str | None:
    """The value of `name` among a command's arguments (`--job X` or `--job=X`), the last one given."""
    found = None
    for index, arg in enumerate(args):
        if arg == name and index + 1 < len(args):
            found = args[index + 1]
        elif arg.startswith(name + "="):
            found = arg[len(name) + 1 :]
    return found
