"""Who is calling: the lease a caller acts under, and where that answer came from.

For a command (not a hook) the order is: an explicit `--lease`, else the W3C baggage member
`proctor.lease` in `BAGGAGE`, else the checkout's binding recorded by `proctor job exec`.
The guard adds the per-session record when it arrives. A caller with no lease (an
orchestrator, a person at a terminal) writes anything; a leased one is held to the one-author
rules in fork.py and take.py.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass

from proctor.jobrecord import BAGGAGE_KEY, check_job_id, parse_baggage, settle_lease
from proctor.store import Tx, rows
from proctor.store.rows import agent_scope, checkout_scope  # noqa: F401  (re-exported)
from proctor.timeutil import iso, now

# `lease=ORCHESTRATOR` (the CLI's --orchestrator): act as the orchestrator, holding no lease,
# whatever the checkout's record or BAGGAGE say. Not a job id: no id holds a colon.
ORCHESTRATOR = ":orchestrator"


class Secret(str):
    """A lease the caller proved with the job's secret (the server's MCP door, `Authorization:
    Nonce`): it acts as that job's holder, as with --lease, and a refusal says how it was named."""


@dataclass(frozen=True)
class Caller:
    lease: str | None
    lease_from: str | None  # "flag", "secret", "env", "marker" (the checkout's record), "contested", "orchestrator"
    user: str
    checkout: str | None = None  # the checkout whose record answered, for marker and contested
    claim: str | None = None  # what BAGGAGE claimed, when a record overruled it
    inherited: str | None = None  # the ancestor process whose BAGGAGE answered, when one did

    @property
    def actor(self) -> str:
        return f"job:{self.lease}" if self.lease else f"user:{self.user}"

    @property
    def from_checkout(self) -> bool:
        """Whether the lease came from the checkout's record, which every caller there that
        reports no session reads: the CLI cannot tell the holder from anyone else."""
        return self.lease_from in ("marker", "contested")

    def whence(self) -> str:
        """Where this caller's lease came from, as a refusal says it."""
        if self.lease_from == "flag":
            return f"you act under lease {self.lease}, named by --lease"
        if self.lease_from == "secret":
            return f"you act under lease {self.lease}: you called with its secret (Authorization: Nonce)"
        if self.inherited:
            return (
                f"you act under lease {self.lease}: {self.inherited} was started with BAGGAGE "
                f"proctor.lease={self.lease}, and a process beneath it works that job whatever its own "
                f"environment says"
            )
        if self.lease_from == "env":
            return f"you act under lease {self.lease}, claimed by BAGGAGE (proctor.lease={self.lease})"
        if self.from_checkout:
            over = (
                f"; it overrules BAGGAGE's claim proctor.lease={self.claim}" if self.lease_from == "contested" else ""
            )
            return (
                f"you act under lease {self.lease} because this checkout ({self.checkout}) is bound to it: "
                f"proctor job exec {self.lease} was run here, and every caller here that reports no session "
                f"acts under it (the checkout's record, tier {self.lease_from}{over})"
            )
        return f"you act under lease {self.lease}"

    def remedy(self) -> str:
        """For a lease read from the checkout's record: the ways out that hurt nobody."""
        if not self.from_checkout or self.inherited:
            return ""
        return (
            f". If you are not {self.lease}'s holder: take jobs in worktrees of their own (proctor job exec "
            f"<id> --worktree ../<dir>), or act as the orchestrator explicitly with --orchestrator (the guard "
            f"refuses it to any session under a lease)"
        )


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return str(os.getuid())


def resolve(conn: Tx | None, root: str, flag: str | None = None, environ: dict | None = None) -> Caller:
    """The lease a command acts under. `flag` ORCHESTRATOR is the caller saying it holds none
    (`--orchestrator`): the checkout's record and BAGGAGE are not read. The guard refuses the
    flag to any session under a lease; the CLI itself cannot tell who ran it."""
    env = os.environ if environ is None else environ
    user = _user()
    if flag == ORCHESTRATOR:
        return _orchestrator(conn, root, env, user)
    if flag:
        check_job_id(flag, "--lease")
        inherited = _inherited_claim(conn)
        # (an inherited claim is found only through a store: conn is set whenever it is)
        if inherited and conn is not None and flag != inherited[0] and inherited[0] not in rows.ancestors(conn, flag):
            # a worker names only its own job, or one beneath it
            return Caller(inherited[0], "contested", user, claim=flag, inherited=inherited[1])
        return Caller(str(flag), "secret" if isinstance(flag, Secret) else "flag", user)
    claim = None
    baggage = env.get("BAGGAGE")
    if baggage:
        claim = parse_baggage(baggage).get(BAGGAGE_KEY) or None
        if claim:
            check_job_id(claim, "BAGGAGE proctor.lease")
    inherited = _inherited_claim(conn)
    via = None
    within = None
    if inherited:
        # A process started under a job (BAGGAGE, read from /proc for the outermost ancestor
        # that names a job of this store) works that job, or one beneath it, whatever it or a
        # process between unsets or claims: a claim outside it is overruled, and so is the
        # record of a checkout bound to a job outside it.
        outer, via = inherited

        def within(job: str) -> bool:
            return job == outer or (conn is not None and outer in rows.ancestors(conn, job))

        if claim is None or not within(claim):
            claim = outer
        else:
            via = None  # its own claim, beneath the inherited job, answers as a claim does
    # A checkout's binding holds only while its job is in flight (declared or running): once
    # the holder exited, or the job ended, the checkout is free and the next exec takes the
    # next job. BAGGAGE is the caller's own claim: it answers when no record does, and a
    # record that disagrees with it wins (contested), or a claim would undo the one-way rule.
    checkout = os.path.realpath(root)
    bound = rows.bound_job(conn, checkout_scope(root)) if conn is not None else None
    lease, source = settle_lease(bound, claim, "marker")
    if source == "contested":
        if within is not None and inherited is not None and bound and not within(bound):  # set with inherited
            # a checkout bound to a job outside the inherited one: the inherited claim stands
            return Caller(claim, "contested", user, checkout, claim, inherited=inherited[1])
        return Caller(lease, "contested", user, checkout, claim)
    if source == "env":
        return Caller(lease, "env", user, inherited=via)
    if source == "marker":
        return Caller(lease, "marker", user, checkout)
    return Caller(None, None, user)


def _inherited_claim(conn: Tx | None) -> tuple[str, str] | None:
    """(job, "process <pid> (<name>)") for the OUTERMOST ancestor process that was started with
    BAGGAGE naming a job of this store (in any state: a worker whose job ended is still no
    orchestrator), read from /proc: the environment a process was started with, which nothing
    beneath it can unset. The outermost, since a process beneath could start a child with a
    BAGGAGE of its choosing. None elsewhere, or when no ancestor has one."""
    if conn is None or not os.path.isdir("/proc/self"):
        return None
    # a command a worker's broker runs (proctor/broker.py) is a child of `proctor work`, not of the
    # worker: the job it runs for was set in its own environment when it started, and is the
    # answer (its sandbox keeps it from reading the environment of processes outside it)
    brokered = bool(os.environ.get("PROCTOR_BROKERED"))
    pid = os.getpid() if brokered else os.getppid()
    found = None
    walked: set[int] = set()
    while pid > 1 and pid not in walked:  # to init, however deep: nesting shells is no way out
        if brokered and walked:
            break
        walked.add(pid)
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                environ = handle.read()
            with open(f"/proc/{pid}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            break
        for item in environ.split(b"\0"):
            if item.startswith(b"BAGGAGE="):
                job = parse_baggage(item[8:].decode("utf-8", "replace")).get(BAGGAGE_KEY)
                if job:
                    if rows.exists(conn, job):  # ended too: a job's worker never becomes the orchestrator
                        name = stat[stat.find(b"(") + 1 : stat.rfind(b")")].decode("utf-8", "replace")
                        found = (job, f"process {pid} ({name})")
        try:
            pid = int(stat[stat.rfind(b")") + 2 :].split()[1])
        except (ValueError, IndexError):
            break
    return found


def _orchestrator(conn: Tx | None, root: str, env, user: str) -> Caller:
    """--orchestrator, refused where it can only be a worker's escape: in a process whose
    BAGGAGE names a job in flight (a worker's environment), and in a checkout bound to a job
    declared in another checkout (a worker's worktree). The orchestrator's own checkout, bound
    to a job it declared there, is where the flag is needed."""
    from proctor import errors

    if conn is not None:
        claim = parse_baggage(env.get("BAGGAGE") or "").get(BAGGAGE_KEY) or None
        held = rows.get(conn, claim) if claim else None
        if held is not None:
            raise errors.Refused(
                [
                    (
                        errors.NOT_YOUR_JOB,
                        f"refused --orchestrator: BAGGAGE names lease {claim} ({held['state']}), so this process is a "
                        f"job's worker; the orchestrator runs without it",
                    )
                ]
            )
        inherited = _inherited_claim(conn)
        if inherited:
            raise errors.Refused(
                [
                    (
                        errors.NOT_YOUR_JOB,
                        f"refused --orchestrator: {inherited[1]} was started with BAGGAGE proctor.lease={inherited[0]}, so "
                        f"every process beneath it is that job's worker; the orchestrator runs outside it",
                    )
                ]
            )
        bound = rows.bound_job(conn, checkout_scope(root))
        job = rows.get(conn, bound) if bound else None
        if job is not None and os.path.realpath(job.get("declared_in") or "") != os.path.realpath(root):
            raise errors.Refused(
                [
                    (
                        errors.NOT_YOUR_JOB,
                        f"refused --orchestrator: this checkout ({os.path.realpath(root)}) is bound to {bound}, declared in "
                        f"{job.get('declared_in')}: it is that job's worker's; act as the orchestrator from the checkout "
                        f"the job was declared in",
                    )
                ]
            )
    return Caller(None, "orchestrator", user)


def bind_checkout(conn: Tx, root: str, job_id: str) -> None:
    rows.bind(conn, checkout_scope(root), job_id, iso(now()))


def bind_caller(conn: Tx, host: str, session: str, subagent: str | None, job_id: str) -> None:
    """Record that this host session (or subagent) acts under `job_id`: what the guard calls
    when it lets `proctor job exec <job>` through."""
    rows.bind(conn, agent_scope(host, session, subagent), job_id, iso(now()))
