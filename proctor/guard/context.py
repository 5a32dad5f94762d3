"""What a rule may read about a call: the checkout, the settings, the store, the acting lease,
and the call's writes and reads resolved to repository paths. Records the rules ask for
(entries consumed, unattributed writes) are queued and written once, after judging.

The acting lease is resolved in the spec's order: an explicit --lease; the record for this
host session or subagent (made when the guard let `proctor job exec` through, or by a
spawn whose prompt named the job); the checkout's record for a caller that reports neither
id; then BAGGAGE, the caller's own claim, which answers only when no record does. The
verdict names the tier as lease_from: flag, agent, marker, env, or contested (a record that
overruled a different claim).

A subagent with no record yet is bound on its first call, from the host's own files: a
Claude Code subagent's prompt is the first line of its transcript beside the parent's
(`<session>/subagents/agent-<id>.jsonl`; its `.meta.json` names the spawning call), so a
spawn with `lease: <id>` binds from the first call, before the parent's PostToolUse, which
for a foreground subagent arrives only after it finished. A subagent whose prompt names no
job acts under its session's job (agent tier), when the session is bound to one.
"""

from __future__ import annotations

import json
import os
import time

from proctor import claims, jobrecord
from proctor.guard.call import Call
from proctor.paths import find_checkout, machine_id, repo_state_dir
from proctor.store import rows

# Every option of proctor's own commands that takes a value, so that reading a command's
# positional arguments skips the value too. The hook cannot load the CLI (click) to ask it:
# tests/test_layers.py ties this list to the CLI's definitions, and fails when one changes.
PROCTOR_VALUE_OPTIONS = frozenset(
    (
        "-o",
        "--output",
        "--lease",
        "--criteria",
        "--write-paths",
        "--deny-paths",
        "--read-paths",
        "--check",
        "--parent",
        "--depends-on",
        "--timeout",
        "--model",
        "--checkpoint",
        "--host",
        "--worktree",
        "--cmd",
        "--description",
        "--interval",
        "--job",
        "--limit",
        "--monitor",
        "--session",
        "--text",
        "--from",
        "--to",
        "--part",
        "--port",
        "--rev",
        "--stream",
        "--worker",
    )
)
HARD_LINK_WALK_BUDGET = 50_000  # directory entries walked to find a hard link's other names
RECORD_WAIT_SECONDS = 0.25  # how long the hook waits for another writer before skipping its records
ACTIVITY_WAIT_SECONDS = 3.0  # ... and for a prompt's, a notification's or a stop's (the session's activity)


PG_MARKER = "proctor.pg"  # store/postgres.py leaves it in a state directory whose store it opened


def _checkout_with_store(cwd: str):
    """(checkout, state dir) for a call made in `cwd`: the nearest enclosing checkout that has
    a store, and past it the outermost enclosing checkout of the same repository. A repository
    made inside a leased tree (`git init`, or a clone of this one) is a checkout of its own,
    but the call is judged in the checkout around it; a linked worktree of the same clone made
    inside one (`.worktrees/w2`) is a checkout in its own right, with its own binding. A call from outside any checkout is
    judged where the hook runs, which hosts start in the project. With no store anywhere, the
    nearest checkout."""
    from proctor.errors import ProctorError

    try:
        checkout = find_checkout(cwd)
    except ProctorError:
        checkout = find_checkout(os.getcwd())  # raises, and the hook passes, outside any checkout
    first = found = None
    probe = checkout
    for _ in range(32):
        state_dir = repo_state_dir(probe, create=False)
        first = first or (probe, state_dir)
        if found is not None and state_dir != found[1]:
            break
        if os.path.exists(os.path.join(state_dir, "proctor.db")) or os.path.exists(os.path.join(state_dir, PG_MARKER)):
            found = (probe, state_dir)  # and on outward: a clone made inside a leased tree is the tree's
        parent = os.path.dirname(os.path.abspath(probe.root))
        if parent == probe.root:
            break
        try:
            outer = find_checkout(parent)
        except ProctorError:
            break
        if os.path.realpath(outer.common_dir) == os.path.realpath(probe.common_dir):
            break  # a linked worktree of the same clone (`git worktree add` inside a tree) is its own checkout
        probe = outer
    return found or first


def _python_module_args(args: list[str], module: str) -> list[str] | None:
    """The arguments after `-m <module>` in a python command line (its own options first:
    `-I -m proctor`, `-Im proctor`, `-mproctor`), or None when it runs something else."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-X", "-W", "-Q"):
            i += 2
            continue
        if not arg.startswith("-") or arg == "-" or arg == "-c":
            return None  # a script, stdin, or -c: not the module
        flags = arg[1:]
        if "m" in flags and not arg.startswith("--"):
            name = flags[flags.index("m") + 1 :]
            if not name:
                name = args[i + 1] if i + 1 < len(args) else ""
                i += 1
            return args[i + 1 :] if name == module else None
        i += 1
    return None


def os_safe(path: str) -> str:
    """A path as the system sees it: cut at a NUL (a C string ends there, as bash's own open()
    does), and a lone surrogate turned into the bytes it stands for, so no os call raises."""
    if "\0" in path:
        path = path.split("\0", 1)[0]
    try:
        path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        path = path.encode("utf-8", "surrogatepass").decode("utf-8", "surrogateescape")
    return path


class _NoCommand:
    """A call with no shell command: shell.Writes with nothing in it."""

    paths: list = []
    unknown: list = []
    commands: list = []
    stdins: list = []
    simple: list = []
    heredocs: list = []
    named: list = []
    no_follow: frozenset = frozenset()
    read = True


class Context:
    def __init__(self, call: Call, flag_lease: str | None, environ) -> None:
        self.call = call
        self.environ = environ
        self.now = time.time()
        self.notes: list[str] = []  # what the guard could not do, for the hook's debug output
        self.cwd = os.path.realpath(call.cwd) if call.cwd and os.path.isdir(call.cwd) else os.getcwd()
        self.checkout, self.state_dir = _checkout_with_store(self.cwd)
        self.root = os.path.realpath(self.checkout.root)
        self._store = None
        self.conn = None
        self.store_problem: str | None = None
        self.store_note: str | None = None  # a PostgreSQL store out of reach: said to the session
        self.stop_counted = False  # monitor-followup wrote this Stop's refusal itself, before answering
        self.activity: str | None = None  # what this event says the session's main thread is doing
        db = os.path.join(self.state_dir, "proctor.db")
        from proctor.store import DatabaseError, configured_url

        url = configured_url(self.root)
        # a PostgreSQL store has no file here: the guard opens it where proctor has opened it (the
        # marker), and where it cannot tell (a store out of reach) to say so; it never makes one
        if os.path.exists(db) or (url and not url.startswith("sqlite")):
            from proctor.errors import StoreError
            from proctor.store import open_store

            from proctor.store import NoStore

            try:
                self._store = open_store(
                    self.state_dir, url, busy_seconds=RECORD_WAIT_SECONDS, for_guard=True, root=self.root
                )
                self.conn = self._store.tx
            except NoStore:
                pass  # as with no database file: no jobs to judge against, nothing to say
            except StoreError as exc:
                self.store_problem = str(exc)
                self.notes.append(f"the store cannot be read ({exc}); judging with no jobs")
                if url and not url.startswith("sqlite"):
                    # a shared store the network lost: the guard fails open, and says so to the session
                    self.store_note = (
                        f"proctor cannot reach its job store ({exc}); this call is judged with "
                        f"no jobs, so no lease is enforced until it is back; proctor doctor says why"
                    )
        self.entered: set[str] = set()  # paths of this call an entry lets through (lease-entry sets them)
        self.pending: list = []  # callables run in one write transaction after judging
        self.allowed_only: list = []  # the same, dropped when the verdict denies
        self.baggage = jobrecord.parse_baggage(environ.get("BAGGAGE"))
        self.spawn_note: str | None = None  # why a subagent's spawn bound nothing
        self.ended: dict[str, str] = {}  # jobs proctor can prove nobody holds: judged ended now
        try:
            self.lease, self.lease_from = self._resolve_lease(flag_lease)
            row = self.job_row(self.lease) if self.lease else None
        except DatabaseError as exc:  # a damaged page: judged as with no store, and said so
            self.store_problem = f"the store {self._store.describe() if self._store else db} is damaged ({exc})"
            self.notes.append(self.store_problem)
            self.close()
            self._store = self.conn = None
            self.ended = {}
            self.lease, self.lease_from = self._resolve_lease(flag_lease)
            row = None
        self.job: dict | None = None
        self.lease_note: str | None = self.spawn_note
        if self.lease:
            if row is None or not jobrecord.is_live(row["state"]):
                state = "names no job" if row is None else f"names a job that has ended ({row['state']})"
                if self.conn is None and self.store_problem:
                    state = f"cannot be checked: {self.store_problem}"
                self.lease_note = "; ".join(
                    filter(
                        None,
                        (
                            self.spawn_note,
                            (
                                f"lease {self.lease} (from {self.lease_from}) {state}; nothing is "
                                f"enforced for this session, and its writes are unattributed"
                            ),
                        ),
                    )
                )
            else:
                self.job = row
        self.settings = self._settings()
        if self.conn is not None:
            try:
                self.ended = self._unheld(self.settings.get("stale_after"))
            except DatabaseError as exc:
                self.notes.append(f"the jobs nobody holds could not be read ({exc})")
            if self.job is not None and self.job["id"] in self.ended:
                self.lease_note = (
                    f"lease {self.lease} (from {self.lease_from}) names a job proctor ended now "
                    f"(no_return: {self.ended[self.job['id']]}); nothing is enforced for this "
                    f"session, and its writes are unattributed"
                )
                self.job = None
        self._writes = None  # shell.Writes, read on first use
        self._written: list[str] | None = None
        self._written_paths: list[str] | None = None
        self._link_budget = HARD_LINK_WALK_BUDGET
        self.alias_unknown: list[str] = []  # writes through a hard link whose other names were not all found

    def _unheld(self, stale_after) -> dict[str, str]:
        """Every read of the store first ends what proctor can prove nobody holds, this one
        included: the jobs found are judged ended now (job_row, holders_of, the acting lease),
        and ended in the store once the answer is out. A few indexed reads and a stat per
        taken checkout."""
        from proctor.store import unheld

        assert self.conn is not None  # called only once a store is open
        stale = float(stale_after) if isinstance(stale_after, (int, float)) else 2 * 3600.0
        found = dict(unheld.candidates(self.conn, stale, self.now, unheld.repository_of(self.state_dir)))
        if found:
            at = self.now

            def action(conn, state_dir):
                unheld.end(conn, state_dir, stale, at)

            self.later(action)
            self.notes.extend(f"ended {job}: {why}" for job, why in found.items())
        return found

    def _settings(self) -> dict:
        """The workspace's rule settings; under a lease, no looser than at the job's checkpoint.
        Settings that cannot be read are the defaults: every rule at its own decision."""
        from proctor.guard import settings as guard_settings

        pinned: list[str] = []
        if self.job is not None:
            # the job's own checkpoint and every ancestor's: a holder cannot loosen its child's
            # rules by committing a looser proctor.toml and forking the child from there
            for row in [self.job] + [self.job_row(a) or {} for a in self.ancestors(self.job["id"])]:
                for candidate in (jobrecord.split_checkpoint(row.get("checkpoint"))[0], row.get("base") or ""):
                    if 7 <= len(candidate) <= 64 and all(c in "0123456789abcdef" for c in candidate):
                        if candidate not in pinned:
                            pinned.append(candidate)  # a revision, never an option git could read
                        break
        try:
            return guard_settings.load(self.checkout, pinned=tuple(pinned[:16]), verify_loosening=self.job is not None)
        except Exception as exc:
            self.notes.append(
                f"the settings could not be read ({type(exc).__name__}: {exc}); every rule at its default"
            )
            return {}

    def _resolve_lease(self, flag: str | None) -> tuple[str | None, str | None]:
        lease, source = self._claimed_lease(flag)
        pinned = os.environ.get("PROCTOR_BROKERED")
        if pinned and lease != pinned:
            # a hook a sandboxed worker's broker runs (proctor/broker.py) judges that worker's job,
            # or a job beneath it, whatever --lease, BAGGAGE or a record says
            beneath = False
            if lease and self.conn is not None:
                try:
                    beneath = pinned in rows.ancestors(self.conn, lease)
                except Exception:  # an unreadable store: the pinned job, as with none
                    beneath = False
            if not beneath:
                return pinned, "broker"
        return lease, source

    def _claimed_lease(self, flag: str | None) -> tuple[str | None, str | None]:
        if flag:
            return flag, "flag"
        claim = self.baggage.get(jobrecord.BAGGAGE_KEY) or None
        record, source = None, None
        if self.conn is not None:
            from proctor.store.rows import agent_scope, checkout_scope

            if self.call.session or self.call.subagent:
                record, source = (
                    rows.bound_job(self.conn, agent_scope(self.call.host, self.call.session or "", self.call.subagent)),
                    "agent",
                )
                if record is None and self.call.subagent:
                    record = self._subagent_job()
            else:
                record, source = rows.bound_job(self.conn, checkout_scope(self.root)), "marker"
        return jobrecord.settle_lease(record, claim, source or "marker")

    def _subagent_job(self) -> str | None:
        """The job of a subagent with no record yet, from its first call on. A subagent spawned
        with `lease: <id>` (its prompt's first line, which the host keeps as the first line of
        the subagent's own transcript) is bound to that job now, and takes it as `proctor job
        exec` would: the parent's PostToolUse for a foreground spawn arrives only after the
        subagent has finished. A subagent whose prompt names no job, or one it may not take,
        acts under its spawner's job (the session's, or the subagent's that spawned it)."""
        from proctor.guard.engine import spawn_job
        from proctor.store.rows import agent_scope
        from proctor.transcript import claude as transcript

        assert self.conn is not None  # called only once a store is open
        call = self.call
        prompt = transcript.subagent_prompt(call.transcript, call.session, call.subagent)
        job = spawn_job(prompt) if prompt else None
        spawn = self._spawn_event(transcript.subagent_spawn_call(call.transcript, call.session, call.subagent))
        if job is None and prompt is None and spawn is not None:
            job = spawn.get("job") if isinstance(spawn.get("job"), str) else None
        # The spawner is whoever made the spawning call: the session, or a subagent of it whose
        # own job then bounds what its subagent may name. Not recorded, it is taken as the session.
        spawner_job = rows.bound_job(self.conn, agent_scope(call.host, call.session, None)) if call.session else None
        parent = spawn.get("subagent") if spawn is not None else None
        if isinstance(parent, str) and parent and call.session:
            spawner_job = rows.bound_job(self.conn, agent_scope(call.host, call.session, parent)) or spawner_job
        if job is not None:
            if spawn is None and call.session and self._bound_subagents(call.host, call.session):
                self.spawn_note = (
                    f"the spawn names lease {job}, but its spawner cannot be told (no record of "
                    f"the spawning call) while subagents of this session hold jobs; it binds nothing"
                )
                return spawner_job
            refusal = self.spawn_refusal(job, spawner_job or self.baggage.get(jobrecord.BAGGAGE_KEY) or None)
            if refusal is None:
                self.take_for_agent(job, agent_scope(call.host, call.session or "", call.subagent))
                return job
            self.spawn_note = refusal
        # no job of its own: its spawner's job, else (None) the claim the subagent inherited
        return spawner_job

    def spawn_refusal(self, job_id: str, spawner: str | None) -> str | None:
        """Why a spawn naming `job_id` binds nothing, or None when it binds. A spawn is a claim
        made by whoever wrote the prompt: it binds only a live job that no other checkout has
        taken, and, when the spawner acts under a job, only that job or one beneath it (the
        one-way rule of `proctor job exec`), so a leased agent cannot escape its lease by
        spawning a helper that names another job, an ended one, or none that exists."""
        row = self.job_row(job_id)
        named = f"the spawn names lease {job_id}, which"
        if row is None:
            return f"{named} names no job; it binds nothing"
        if not jobrecord.in_flight(row["state"]):
            return f"{named} has ended ({row['state']}); it binds nothing"
        taken = row.get("checkout_root")
        if row["state"] == "running" and taken and not jobrecord.taken_here(row, self.root):
            return f"{named} is taken in another checkout ({jobrecord.where_taken(row)}); it binds nothing"
        if spawner and job_id != spawner and spawner not in self.ancestors(job_id):
            return (
                f"{named} is not the spawner's job {spawner} nor beneath it; it binds nothing, and "
                f"the subagent acts under {spawner}"
            )
        return None

    def _spawn_event(self, tool_use_id: str | None) -> dict | None:
        """What the guard recorded of the spawning call (its agent_spawn event: the job its
        prompt named, and the session and subagent that made it), found by the call's id."""
        if not tool_use_id or self.conn is None:
            return None
        from proctor.store import events

        needle = json.dumps(tool_use_id)
        for job, data in events.recent(self.conn, "agent_spawn", 200):
            if data and needle in data:
                try:
                    event = json.loads(data)
                except ValueError:
                    continue
                if isinstance(event, dict) and event.get("tool_use_id") == tool_use_id:
                    return {**event, "job": job}
        return None

    def _bound_subagents(self, host: str, session: str) -> bool:
        """Whether any subagent of this session is bound to a job in flight."""
        prefix = rows.agent_scope(host, session, None)
        assert self.conn is not None  # called only once a store is open (from _subagent_job)
        return rows.any_bound_under(self.conn, prefix)

    def take_for_agent(self, job_id: str, scope: str, subagent: str | None = None) -> None:
        """Queue the binding of `scope` to a job, and the job's taking: a declared job is
        taken in this checkout (its checkout, its base, running), a running one taken here
        gets the base it lacks. The base is HEAD's revision, read from git's files; whether the
        handed checkpoint's uncommitted changes match is not measured here. The checkout's
        own binding is left alone: it belongs to whoever works the checkout, not to one of
        its subagents."""
        from proctor.paths import head_revision

        root, checkout, session = self.root, self.checkout, self.call.session
        subagent = subagent or self.call.subagent
        host, when = self.call.host, self.now

        def action(conn, state_dir):
            from proctor import trail
            from proctor.timeutil import iso

            job = rows.get(conn, job_id)
            if job is None or not jobrecord.in_flight(job["state"]):
                return
            if job["state"] == "running" and job.get("checkout_root") and not jobrecord.taken_here(job, root):
                return  # taken in another checkout meanwhile: no binding here
            rows.bind(conn, scope, job_id, iso(when))
            if job["state"] == "running" and job.get("base"):
                return
            base = head_revision(checkout)
            handed = (job.get("checkpoint") or "").split("+", 1)[0]
            if job["state"] == "declared":
                job["state"] = "running"
                job["checkout_root"] = root
                job["machine"] = machine_id()
                job["taken"] = iso(when)
            job["base"] = base
            job["base_diverges"] = bool(handed) and base != handed
            job["updated"] = iso(when)
            rows.put(conn, job, job["_root"], job["_depth"])
            trail.append(
                conn,
                state_dir,
                "job_exec",
                f"session:{host}:{session or '-'}",
                job_id,
                {
                    "checkout": root,
                    "base": base,
                    "checkpoint": job.get("checkpoint"),
                    "diverges": job["base_diverges"],
                    "subagent": subagent,
                    "by": "spawn",
                },
                when=when,
            )

        self.later(action)

    # -- reading the store -------------------------------------------------------------------

    def job_row(self, job_id: str) -> dict | None:
        if self.conn is None:
            return None
        job = rows.record(self.conn, job_id)
        if job is None:
            return None
        if job_id in self.ended:
            job.update(state="no_return", end_reason=self.ended[job_id])
        return job

    def holders_of(self, rel: str) -> list[tuple[dict, claims.Claim]]:
        """Live jobs (other than the acting one) whose write claims cover repository file `rel`."""
        if self.conn is None:
            return []
        cache = self.__dict__.setdefault("_holders", {})  # one store read per path per call
        if rel in cache:
            return cache[rel]
        near = rows.live_claims_near(self.conn, [rel], self.lease or "")
        out = []
        for job_id in sorted(near):
            covering = [c for c in near[job_id] if claims.covers(c, rel)]
            if not covering:
                continue
            row = self.job_row(job_id)
            if row is not None and job_id not in self.ended:
                # a claim of the whole file first: one of a declaration holds only that declaration
                out.append((row, min(covering, key=lambda c: c.declaration is not None)))
        cache[rel] = out
        return out

    def declaration_holders(self, rel: str) -> list[tuple[dict, list[claims.Claim]]]:
        """Live jobs (other than the acting one) claiming declarations of file `rel`, each with
        those claims."""
        out = []
        for row, _ in self.holders_of(rel):
            mine = [c for c in rows.claims(row) if c.declaration is not None and c.path == rel and not c.glob]
            if mine:
                out.append((row, mine))
        return out

    def edits_for(self, full: str) -> tuple[list[tuple[str, str]] | None, bool]:
        """(the (old, new) replacements this call makes in file `full` (absolute, resolved), or
        None when it carries none proctor can place there: a whole-file write, a shell write, a
        patch that adds, deletes or moves the file; whether they are apply_patch hunks)."""
        call = self.call
        if full in {self.full_path(p) for p in self.shell_writes.paths} or self.shell_writes.unknown:
            return None, False
        if call.patch is not None:
            from proctor.guard.shell import patch_edits

            found: list[tuple[str, str]] = []
            for path, hunks in patch_edits(call.patch).items():
                if self.full_path(path) != full:
                    continue
                if hunks is None:
                    return None, True
                found.extend(hunks)
            return found or None, True
        single = call.writes[0] if len({self.full_path(p) for p in call.writes}) == 1 else None
        found = []
        for edited, old, new in call.edits:
            named = edited or single
            if named is not None and self.full_path(named) == full:
                found.append((old, new))
        return found or None, False

    def ancestors(self, job_id: str) -> list[str]:
        return rows.ancestors(self.conn, job_id) if self.conn is not None else []

    def descendants(self, job_id: str) -> list[str]:
        return rows.descendants(self.conn, job_id) if self.conn is not None else []

    # -- the call, resolved --------------------------------------------------------------------

    def rel(self, path: str, resolved: bool = False) -> str | None:
        """`path` relative to the repository root, or None when it lies outside. A path through a
        symbolic link is judged where it leads: writing src/a.py that links to src/b.py writes b.
        A path in another work tree of the same repository (the main checkout, seen from a
        linked worktree, or a sibling worktree) is that tree's file of the same name: a holder
        leased here is judged against its lease wherever it writes the repository's files."""
        full = path if resolved else self.full_path(path)
        # the deepest tree holding it: a worktree made inside this one is its own tree
        for base in sorted({self.root, self.checkout.root, *self.other_trees()}, key=len, reverse=True):
            if full == base:
                return "."
            if full.startswith(base.rstrip("/") + "/"):
                return full[len(base.rstrip("/")) + 1 :]
        return None

    def other_trees(self) -> list[str]:
        """The other work trees of this repository (read from git's files, once per call)."""
        if getattr(self, "_other_trees", None) is None:
            trees: list[str] = []
            common = self.checkout.common_dir
            if os.path.basename(common) == ".git":
                trees.append(os.path.realpath(os.path.dirname(common)))
            try:
                names = os.listdir(os.path.join(common, "worktrees"))
            except OSError:
                names = []
            for name in names[:256]:
                try:
                    with open(os.path.join(common, "worktrees", name, "gitdir"), encoding="utf-8") as handle:
                        dot_git = handle.read().strip()
                except OSError:
                    continue
                if dot_git:
                    trees.append(os.path.realpath(os.path.dirname(dot_git)))
            self._other_trees = [t for t in trees if t not in (self.root, os.path.realpath(self.checkout.root))]
        return self._other_trees

    @property
    def shell_writes(self):
        """What the call's shell command writes (proctor.guard.shell.Writes). The shell reader is
        imported only for a call that has a command: a file tool's call never loads it."""
        if self._writes is None:
            if self.call.command:
                from proctor.guard import shell

                self._writes = shell.writes(self.call.command, self.cwd)
            else:
                self._writes = _NoCommand()
        return self._writes

    def written(self) -> list[str]:
        """Repository paths this call writes, from file tools and from the shell, every name of
        a hard-linked file included (see `written_paths`)."""
        if self._written is not None:
            return self._written
        out: list[str] = []
        for full in self.written_paths():
            rel = self.rel(full, resolved=True)
            if rel is not None and rel not in out and not rel.startswith(".git/") and rel != ".git":
                out.append(rel)
        self._written = out
        return out

    def hard_links(self, full: str, info) -> list[str]:
        """The other names, in the repository's work trees and git directories, of the file
        `info` describes (its device and inode), found by walking them; a walk past its budget
        is an unknown write."""
        found: list[str] = []
        budget = self._link_budget  # one budget for the whole call, however many names it writes
        if budget <= 0:
            self.alias_unknown.append(
                f"{full} has {info.st_nlink} hard links, and the call's search for other names is spent"
            )
            return found
        wanted = (info.st_dev, info.st_ino)
        tops = [self.root, *self.other_trees(), os.path.realpath(self.checkout.common_dir)]
        if os.path.realpath(self.checkout.git_dir) not in tops:
            tops.append(os.path.realpath(self.checkout.git_dir))
        walked: set[str] = set()
        for top in tops:
            for directory, dirs, files in os.walk(top):
                if directory in walked:
                    dirs[:] = []
                    continue
                walked.add(directory)
                dirs[:] = [d for d in dirs if os.path.join(directory, d) not in tops]
                budget -= len(files) + len(dirs)
                self._link_budget = budget
                if budget < 0:
                    self.alias_unknown.append(
                        f"{full} has {info.st_nlink} hard links, and the repository is too large to search for "
                        f"the others"
                    )
                    return found
                for name in files:
                    path = os.path.join(directory, name)
                    if path == full:
                        continue
                    try:
                        other = os.lstat(path)
                    except OSError:
                        continue
                    if (other.st_dev, other.st_ino) == wanted:
                        found.append(path)
                        if len(found) + 1 >= info.st_nlink:
                            return found
        return found  # names outside the repository are nothing of a lease's

    def full_path(self, path: str, follow: bool = True) -> str:
        """An absolute path as the call reaches it: `/proc/self/cwd` is the call's own directory
        (not the hook's), and symbolic links are followed; with `follow` False the last one is
        not (rm, mv, ln -sf, sed -i replace a link, they do not write through it)."""
        path = os_safe(path)
        for alias in ("/proc/self/cwd", "/proc/thread-self/cwd"):
            if path == alias or path.startswith(alias + "/"):
                path = self.cwd + path[len(alias) :]
        full = os.path.normpath(path if os.path.isabs(path) else os.path.join(self.cwd, path))
        if not follow:
            return os.path.join(os.path.realpath(os.path.dirname(full)), os.path.basename(full))
        return os.path.realpath(full)

    def written_paths(self) -> list[str]:
        """Every path this call writes, absolute and resolved, inside the repository or not. A
        file with more than one hard link is written under each of its names in the repository
        (its work trees and its git directories)."""
        if self._written_paths is not None:
            return self._written_paths
        out: list[str] = []
        no_follow = self.shell_writes.no_follow
        targets = [(path, True) for path in self.call.writes]
        targets += [(path, path not in no_follow) for path in self.shell_writes.paths]
        for path, follow in targets:
            full = self.full_path(path, follow=follow)
            names = [full]
            try:
                info = os.stat(full) if follow else os.lstat(full)
            except (OSError, ValueError):
                info = None
            if info is not None and info.st_nlink > 1 and not os.path.isdir(full):
                names.extend(self.hard_links(full, info))
            for name in names:
                if name not in out:
                    out.append(name)
        self._written_paths = out
        return out

    def read(self) -> list[str]:
        out = []
        for path in self.call.reads:
            rel = self.rel(path)
            if rel is not None and rel not in out:
                out.append(rel)
        return out

    @property
    def unknown_writes(self) -> list[str]:
        """Writes this call may make that proctor cannot name: the shell's, a hard link's
        other names it could not search for, a tool that writes naming no path."""
        return list(self.shell_writes.unknown) + self.alias_unknown + list(self.call.unknown_writes)

    def commands(self) -> list[list[str]]:
        return self.shell_writes.commands

    @staticmethod
    def positional(args: list[str], takes_value: frozenset | set = PROCTOR_VALUE_OPTIONS) -> list[str]:
        """A command's positional arguments: options and their values (`takes_value`: by
        default those of proctor's commands) left out."""
        out, skip = [], False
        for arg in args:
            if skip:
                skip = False
            elif arg in takes_value:
                skip = True
            elif not arg.startswith("-"):
                out.append(arg)
        return out

    def proctor_commands(self) -> list[list[str]]:
        """Each `proctor ...` (or `python [options] -m proctor ...`) in the call, as its arguments."""
        return [args for args, _ in self.proctor_calls()]

    def proctor_calls(self) -> list[tuple[list[str], str | None]]:
        """Each proctor command in the call, as its arguments, with the text it reads on standard
        input when that is its own literal here-document or here-string (else None)."""
        out = []
        for argv, stdin in zip(self.commands(), self.shell_writes.stdins):
            if argv and os.path.basename(argv[0]) == "proctor":
                out.append((argv[1:], stdin))
            elif argv and os.path.basename(argv[0]).startswith("python"):
                rest = _python_module_args(argv[1:], "proctor")
                if rest is not None:
                    out.append((rest, stdin))
        return out

    def proctor_environments(self) -> list[list[str]]:
        """The words before each proctor command (assignments, env and its options) and every
        command that unsets or exports a variable: where a call could change BAGGAGE for it."""
        out = []
        for with_wrappers, argv, _ in self.shell_writes.simple:
            if argv and (os.path.basename(argv[0]) == "proctor" or argv[1:3] == ["-m", "proctor"]):
                out.append(with_wrappers[: len(with_wrappers) - len(argv)])
            elif argv and argv[0] in ("unset", "export", "declare", "typeset", "readonly", "local"):
                out.append(argv)
        return out

    # -- transcripts ---------------------------------------------------------------------------

    def transcript(self, path: str | None):
        """The background-task state of a Claude Code transcript, read incrementally, or None
        when there is none or it cannot be read (the rules that need it then pass)."""
        if not path:
            return None
        from proctor.paths import repo_cache_dir
        from proctor.transcript import claude

        try:
            return claude.read(os.path.expanduser(path), os.path.join(repo_cache_dir(self.checkout), "transcripts"))
        except (OSError, ValueError, MemoryError):
            return None

    def option(self, rule: str, key: str, default: float) -> float:
        return (self.settings.get("options") or {}).get(rule, {}).get(key, default)

    def notes_path(self, name: str) -> str:
        import zlib

        from proctor.paths import repo_cache_dir

        key = f"{self.call.host}:{self.call.session or '-'}:{self.call.subagent or ''}"
        return os.path.join(
            repo_cache_dir(self.checkout),
            "sessions",
            f"{name}-{zlib.crc32(key.encode('utf-8', 'surrogateescape')):08x}.json",
        )

    # -- records -----------------------------------------------------------------------------

    def later(self, action) -> None:
        self.pending.append(action)

    def if_allowed(self, action) -> None:
        """A record to write only when the verdict lets the call through."""
        self.allowed_only.append(action)

    def flush(self) -> None:
        """Write the queued records. A repository with no store gets none: the hook, wired
        for every repository a person opens, creates no state where proctor is not in use.
        Bounded: a store another writer holds past RECORD_WAIT_SECONDS, or one that cannot be
        written, is skipped with a note; the verdict never waits on it."""
        if not self.pending or self._store is None:
            return
        store = self._store
        if not store.writable:
            self.notes.append(f"the store {store.path} cannot be written; {len(self.pending)} record(s) skipped")
            self._spill_activity()
            return
        from proctor.errors import StoreError
        from proctor.guard.call import NOTIFY, PROMPT, STOP

        # A prompt, a notification or a stop is what a session's activity turns on (a monitor's
        # follow-up is held while it works); these are rare beside tool calls, and the answer
        # is out already: their records are tried for longer.
        deadline = time.monotonic() + (ACTIVITY_WAIT_SECONDS if self.call.event in (PROMPT, NOTIFY, STOP) else 0)
        while True:
            try:
                with store.write() as conn:
                    for action in self.pending:
                        action(conn, store.state_dir)
                return
            except StoreError as exc:
                if time.monotonic() >= deadline:
                    self.notes.append(f"records skipped: {exc}")
                    self._spill_activity()
                    return

    def _spill_activity(self) -> None:
        """What the session is doing must not be lost with the records (a monitor's wait reads
        it to hold follow-ups while the session works): it goes to a file of its own."""
        if not self.activity or not self.call.session or self.call.subagent:
            return
        try:
            from proctor.monitors.wake import spill_activity
            from proctor.timeutil import iso

            spill_activity(self.checkout, self.call.host, self.call.session, self.activity, iso(self.now))
        except Exception as exc:
            self.notes.append(f"the session's activity could not be kept ({type(exc).__name__}: {exc})")

    def finish(self) -> list[str]:
        """Write the records and close; what could not be done, for the debug output."""
        try:
            self.flush()
        except Exception as exc:
            self.notes.append(f"records skipped ({type(exc).__name__}: {exc})")
        finally:
            self.close()
        return self.notes

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
