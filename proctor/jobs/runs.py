"""Recorded runs of targets: `proctor run <target>` and `proctor query output <ref>`.

A run is the evidence a check is graded on, so it records everything needed to trust it
later without the holder's word: the target and the exact command, the exit code, start and
end, the lease it ran under, the checkout and its checkpoint at the start, and the whole
output (stdout and stderr, interleaved as printed) as a content-addressed blob, `output_ref`.
The store is shared by every checkout of the repository, so a parent waiting from another
worktree reads the same record.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from typing import BinaryIO

from proctor import errors, trail
from proctor.jobs.lease import Caller
from proctor.process import run_shell
from proctor.store import Tx, blobs
from proctor.store import runs as run_rows
from proctor.paths import machine_id
from proctor.timeutil import iso, now
from proctor.vcs import checkpoint as vcs_checkpoint
from proctor.workspace import Workspace

_COLUMNS = run_rows.COLUMNS


def run_target(ws: Workspace, name: str, caller: Caller, echo: BinaryIO | None) -> dict:
    """Run target `name`, echoing its output to `echo` as it comes; record and return the run."""
    cfg = ws.config
    target = cfg.targets.get(name)
    if target is None:
        known = ", ".join(sorted(cfg.targets)) or "none defined"
        raise errors.ProctorError(
            f"no target {name!r} in proctor.toml (targets: {known}); add [targets.{name}] with a command",
            errors.CHECK_UNKNOWN_TARGET,
        )
    cwd = os.path.join(ws.root, target.cwd) if target.cwd else ws.root
    if not os.path.isdir(cwd):
        raise errors.ProctorError(f"target {name}'s cwd {cwd} is not a directory; fix [targets.{name}] cwd")
    # The tree's content is digested BEFORE the target starts and again after it ends: a run
    # is evidence only for a tree that stood still, and that digest is what a check is graded
    # against. The checkpoint, a name for the record, is read beside the run (git works while
    # the target starts).
    checkpoint_box: list[str | None] = [None]

    def read_checkpoint() -> None:
        try:
            taken = vcs_checkpoint.take(ws.root)
            checkpoint_box[0] = taken.name if taken.revision else None
        except errors.ProctorError:
            pass

    reader = threading.Thread(target=read_checkpoint, daemon=True)
    reader.start()
    hashed: dict = {}  # blob ids of the files hashed before, reused after where nothing moved
    begun = time.time_ns()  # a file whose status changes after this moved while the run ran
    before = _tree(ws.root, hashed)
    env = _target_env()
    if caller.lease:
        env["PROCTOR_LEASE"] = caller.lease
    boxed = sandboxed(ws, caller.lease)  # refuses here, before anything ran, where it must and cannot
    if boxed is not None:
        env = boxed.env(env)
        # a sandboxed job's worker may write $HOME: a .pth or usercustomize it put in the user
        # site would decide a Python check
        env["PYTHONNOUSERSITE"] = "1"
    writer = blobs.writer(ws.store)
    # Hashing and writing the blob happen on a thread of their own (hashlib and file writes
    # release the GIL), so recording overlaps with reading the pipe and echoing.
    pending: queue.Queue[bytes | None] = queue.Queue(maxsize=64)

    def record() -> None:
        while (chunk := pending.get()) is not None:
            writer.write(chunk)

    recorder = threading.Thread(target=record, daemon=True)
    recorder.start()

    def sink(chunk: bytes) -> None:
        pending.put(chunk)
        if echo is not None:
            try:
                echo.write(chunk)
                echo.flush()
            except (BrokenPipeError, ValueError):
                pass  # nobody is reading the echo; the record still gets every byte

    started = now()
    previous = _raise_on_sigterm()
    finished = None
    if boxed is not None:
        from proctor.vcs import git as _git

        reader.join()  # the checkpoint may write objects: taken whole before anything is confined
        _git.CONFINE = boxed.preexec  # from the target's start until its tree is read back
    try:
        try:
            finished = run_shell(
                target.command, cwd, target.timeout, sink, env, preexec=boxed.preexec if boxed is not None else None
            )
        except BaseException:
            pending.put(None)
            recorder.join()
            writer.abandon()
            raise
    except BaseException as exc:
        if boxed is not None:
            _git.CONFINE = None
            boxed.finish(set())
            import subprocess

            if isinstance(exc, subprocess.SubprocessError):  # the sandbox's preexec raised: nothing ran
                raise errors.ProctorError(
                    f"the sandbox for job {boxed.job} could not be applied to {name} (the kernel refused "
                    f'landlock_restrict_self or no_new_privs); nothing ran. Set [sandbox] mode = "off" in '
                    f"proctor.toml to run unsandboxed",
                    errors.SANDBOX_FAILED,
                ) from None
        raise
    finally:
        _restore_sigterm(previous)
    exited = time.monotonic()
    pending.put(None)
    recorder.join()
    ended = now()
    output_ref = writer.finish()
    changed_status: dict[bytes, int] = {}
    after = _tree(ws.root, hashed, changed_status)
    reader.join()
    moved = (
        sorted(
            p.decode("utf-8", "surrogateescape")
            for p in set(before or {}) | set(after or {})
            if (before or {}).get(p) != (after or {}).get(p) or changed_status.get(p, 0) > begun
        )
        if before is not None and after is not None
        else []
    )
    if moved and after is not None:
        # written while it ran, even if put back since: the run is evidence for no tree
        after = {**after, b"\0moved": "\0".join(moved).encode("utf-8", "surrogateescape")}
    if boxed is not None:  # read after the tree: the kernel's records have had that long to arrive
        _git.CONFINE = None
        boxed.finish({finished.pid} if finished.pid else set(), since=exited)
    checkpoint = checkpoint_box[0]
    run: dict = {
        "id": f"run-{iso(started).replace(':', '').replace('-', '').replace('.', '')[:18]}-{os.urandom(3).hex()}",
        "target": name,
        "command": target.command,
        "cwd": cwd,
        "checkout": os.path.realpath(ws.root),
        "checkpoint": checkpoint,
        "tree": vcs_checkpoint.digest_of(before) if before is not None else None,
        "tree_end": vcs_checkpoint.digest_of(after) if after is not None else None,
        "lease": caller.lease,
        "exit_code": finished.exit_code,
        "timed_out": finished.timed_out,
        "started": iso(started),
        "ended": iso(ended),
        "output_ref": output_ref,
        "output_bytes": writer.size,
        "machine": machine_id(),
        "sandbox": boxed.record() if boxed is not None else None,
    }
    with ws.store.write() as conn:
        run_rows.insert(conn, run)
        trail.append(
            conn,
            ws.state_dir,
            "run",
            caller.actor,
            caller.lease,
            {
                "run": run["id"],
                "target": name,
                "exit_code": finished.exit_code,
                "timed_out": finished.timed_out,
                "output_ref": output_ref,
                **({"sandboxed": boxed.job} if boxed is not None else {}),
            },
            when=ended,
        )
        if boxed is not None:
            for denial in boxed.denials:
                trail.append(
                    conn,
                    ws.state_dir,
                    "sandbox_denial",
                    caller.actor,
                    boxed.job,
                    {"run": run["id"], "target": name, "path": denial["path"], "blockers": denial["blockers"]},
                    when=ended,
                )
    run["ref"] = output_ref
    run["tree_moved"] = moved  # paths that changed while it ran: its own output, or someone's edits
    run["duration_seconds"] = round(ended - started, 3)
    run["pipe_held"] = finished.pipe_held
    return run


class Sandboxed:
    """A run's sandbox (proctor/sandbox.py): the grant, its ruleset, and the kernel's denials."""

    def __init__(self, grant, ruleset, abi: int) -> None:
        from proctor import sandbox

        self.grant, self.ruleset, self.abi = grant, ruleset, abi
        self.job = grant.job
        self.watch = sandbox.AuditWatch.open()
        self.unreported = None if self.watch is not None else sandbox.AuditWatch.why
        self.denials: list[dict] = []

    def env(self, env: dict) -> dict:
        from proctor import sandbox

        return sandbox.env_for(self.grant, env)

    def preexec(self) -> None:
        self.ruleset.preexec()

    def finish(self, pids: set[int], since: float | None = None) -> None:
        """After the run (it ended at monotonic `since`): the denials the kernel reported for its
        domain; the rules and the temp dir let go."""
        if self.watch is not None:
            self.denials = self.watch.denials(pids, since) if pids else []
            if not self.watch.still_on():
                self.unreported = "the kernel's audit was turned off while the run ran: its count cannot be vouched for"
            self.watch = None
        self.ruleset.close()
        self.grant.cleanup()

    def record(self) -> dict:
        out = self.grant.record(self.abi)
        out["denials"] = len(self.denials) if self.unreported is None else None
        if self.unreported is not None:
            out["denials_unreported"] = self.unreported
        return out


def sandboxed(
    ws: Workspace, lease: str | None, extra_regions: tuple[str, ...] = (), worker: bool = False
) -> Sandboxed | None:
    """The sandbox a run acting for `lease` in this checkout gets ([sandbox] mode), or None
    where nothing narrows: mode off, no lease, a root job, no live row, a writable row without
    write paths, or `auto` on a kernel without Landlock. Raises PRC3061 for mode landlock on
    such a kernel and PRC3062 when the rules cannot be built: a run meant to be sandboxed never
    runs without it. Narrowed with the checkout: a linked worktree's main checkout, a git
    directory kept outside the checkout, and (for a target, not a `worker`) proctor's state."""
    from proctor import broker, sandbox
    from proctor.paths import repo_cache_dir
    from proctor.store import rows

    brokered = bool(os.environ.get(broker.BROKERED)) and not worker
    if not brokered and (ws.config["sandbox.mode"] == "off" or not lease):
        return None
    job = None
    if lease:
        with ws.store.read() as tx:
            job = rows.get(tx, lease)
    if brokered:
        # a command a sandboxed worker's broker runs: it holds proctor's state, its targets never
        # do, whatever lease they name or the checkout's proctor.toml says (proctor/broker.py)
        mode = sandbox.Mode("landlock", sandbox.kernel_abi())
        if not sandbox.narrows(job):
            return _store_only(ws, lease, mode.abi)
    else:
        if not sandbox.narrows(job):
            return None
        mode = sandbox.mode_for(ws.config)
        if not mode.active:
            return None
    # the store that holds the row is no way around it: a target never writes proctor's state (a
    # worker does: it files its result through proctor, which writes the store in its process)
    regions = list(extra_regions) + ([] if worker else [ws.state_dir])
    main = main_worktree(ws)
    if main:
        regions.append(main)  # a worktree's own repository is no way around its grant
    for git_dir in (ws.checkout.git_dir, ws.checkout.common_dir):
        # a git directory outside the checkout (--separate-git-dir, a bare repository's
        # worktree): its config, hooks and attributes are the repository's, never granted
        if git_dir and not sandbox.inside_any(os.path.realpath(git_dir), [ws.root, *regions]):
            regions.append(git_dir)
    grant = sandbox.plan(job, ws.root, repo_cache_dir(ws.checkout), tuple(regions))
    try:
        ruleset = sandbox.Ruleset(grant, mode.abi)
    except OSError as exc:
        grant.cleanup()
        raise errors.ProctorError(
            f"the sandbox for job {job['id']} could not be built ({exc.strerror or exc}); nothing ran. "
            f'Set [sandbox] mode = "off" in proctor.toml to run unsandboxed',
            errors.SANDBOX_FAILED,
        ) from None
    return Sandboxed(grant, ruleset, mode.abi)


def _store_only(ws: Workspace, lease: str | None, abi: int) -> Sandboxed:
    """The sandbox of a brokered command's target whose lease narrows nothing (a root job named
    by flag, no row): the worker's domain it already runs in, less proctor's state."""
    from proctor import sandbox

    grant = sandbox.Grant(lease or "(none)", [ws.state_dir], [], "", [], False)
    grant.tmpdir = sandbox.private_tmpdir()
    grant.paths.append(grant.tmpdir)
    try:
        ruleset = sandbox.Ruleset(grant, abi)
    except OSError as exc:
        grant.cleanup()
        raise errors.ProctorError(
            f"the sandbox of a worker's command could not be built ({exc.strerror or exc}); nothing ran",
            errors.SANDBOX_FAILED,
        ) from None
    return Sandboxed(grant, ruleset, abi)


def _target_env() -> dict:
    """A target's environment: this process's, or, in a command a worker's broker runs, the
    worker's own (the target runs sandboxed beneath it: proctor/broker.py)."""
    import json

    from proctor import broker

    if os.environ.get(broker.BROKERED) and os.environ.get(broker.CLIENT_ENV):
        try:
            client = json.loads(os.environ[broker.CLIENT_ENV])
        except ValueError:
            client = None
        if isinstance(client, dict):
            return {str(k): str(v) for k, v in client.items()}
    return dict(os.environ)


def main_worktree(ws: Workspace) -> str | None:
    """The main working tree of the repository a linked worktree belongs to, or None."""
    common = os.path.realpath(ws.checkout.common_dir)
    if os.path.realpath(ws.checkout.git_dir) == common or os.path.basename(common) != ".git":
        return None
    main = os.path.dirname(common)
    return main if os.path.realpath(main) != os.path.realpath(ws.root) else None


def _tree(root: str, hashed: dict, ctimes: dict | None = None) -> dict[bytes, bytes] | None:
    """The tree's entries (vcs.checkpoint.tree_entries), or None when git cannot read it: such
    a run is evidence for no tree."""
    try:
        return vcs_checkpoint.tree_entries(root, hashed, ctimes=ctimes)
    except errors.ProctorError:
        return None


class Terminated(KeyboardInterrupt):
    """SIGTERM while a target runs: unwinds so the target's process group is ended too."""


def _raise_on_sigterm():
    import signal

    def handler(signum, frame):
        raise Terminated()

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:
        return None  # not the main thread: leave signals alone


def _restore_sigterm(previous) -> None:
    import signal

    if previous is not None:
        try:
            signal.signal(signal.SIGTERM, previous)
        except ValueError:
            pass


def by_ref(conn: Tx, ref: str) -> list[dict]:
    """Every run whose output is `ref` (identical outputs share one blob), newest first."""
    return run_rows.by_ref(conn, ref)


def get(conn: Tx, run_id: str) -> dict | None:
    return run_rows.get(conn, run_id)


def latest(conn: Tx, target: str, since: str, checkout: str | None, machine: str | None = None) -> dict | None:
    """The newest run of `target` started at or after `since`, in `checkout` (on `machine`) when given."""
    return run_rows.latest(conn, target, since, checkout, machine)


def read_output(ws: Workspace, ref: str) -> bytes:
    ref = ref.strip()
    if not ref.startswith(blobs.REF_PREFIX):
        ref = blobs.REF_PREFIX + ref
    with ws.store.read() as conn:
        known = run_rows.has_output(conn, ref)
    if not known:
        raise errors.ProctorError(f"no recorded run has output {ref}; proctor run <target> records one")
    return blobs.get(ws.store, ref)


def to_json(run: dict) -> str:
    return json.dumps(run, sort_keys=True)
