"""The sandbox: the kernel's boundary on what a run under a lease may write (Landlock).

The guard is a seatbelt for hosts that opted in; this is the boundary itself, and it reads the
same job row rather than a second declaration. When `[sandbox] mode` is not off and the acting
lease resolves to a live row with a parent and write paths, a target run (and, with `[sandbox]
workers = true`, a worker) gets a filesystem WRITE grant of exactly:

- the row's write paths, resolved against the checkout: a glob grants what it matches now (a
  glob that matches nothing grants nothing); a literal path that does not exist yet grants the
  nearest directory above it that does;
- the workspace cache directory and a private temp directory (every child's TMPDIR);
- everything outside the checkout, as it was (`/dev/null`, the tool caches): the row declares a
  boundary inside the checkout, and reads are untouched everywhere.

A deny path inside a granted directory costs that directory: its grant is replaced by grants on
its children, down to the deny path. A read-only row narrows the checkout to the cache and the
temp directory. Nothing narrows for a root job, an id naming no live row, a writable row with
no write paths, or mode off.

From Landlock ABI 6 the domain is also scoped for signals: its processes cannot signal a process
outside it (the proctor judging the run, the server, the person's programs).

Landlock grants, it never subtracts, so "everything outside the checkout" is spelled as a grant
on each entry beside the path from / down to the checkout (its "spine"). The price: nothing new
can be made directly in a directory of that spine (a file straight in /tmp when the checkout is
under /tmp); the private TMPDIR is where a run's temporary files go.

The rules are built in the parent and the child only calls prctl and landlock_restrict_self
between fork and exec (`Ruleset.preexec`); nothing here is imported on the hook's path.

Denials: Landlock (ABI 7) reports a refused access to the kernel's audit log, when audit is on,
as an AUDIT_LANDLOCK_ACCESS record naming the domain, what blocked it and the path, after an
AUDIT_LANDLOCK_DOMAIN record naming the pid that made the domain (the run's child).
`AuditWatch` reads those records over the audit netlink socket (CAP_AUDIT_READ, audit enabled)
while a run lasts; where it cannot, the run record still says it ran sandboxed and with which
grant, so a reader can tell whose boundary a failure hit.
"""

from __future__ import annotations

import ctypes
import os
import re
import select
import shutil
import socket
import stat
import struct
import sys
import tempfile
import threading
import time

from proctor import claims, errors

TYPE_CHECKING = False  # `typing` only for the checker: proctor's commands import this module
if TYPE_CHECKING:
    from typing import TypeGuard

MODES = ("off", "landlock", "auto")

# linux/landlock.h
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_LOG_NEW_EXEC_ON = 1 << 1  # ABI 7: report denials after execve (the target is a new program)
_PR_SET_NO_NEW_PRIVS = 38

WRITE_FILE, REMOVE_DIR, REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
MAKE_CHAR, MAKE_DIR, MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = (1 << n for n in range(6, 13))
REFER, TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3

_AUDIT_GET, _AUDIT_NLGRP_READLOG = 1000, 1
_AUDIT_LANDLOCK_ACCESS, _AUDIT_LANDLOCK_DOMAIN = 1423, 1424


def write_rights(abi: int) -> tuple[int, int]:
    """(rights on a directory, rights on a file) that make up "write" at Landlock `abi`."""
    directory = (
        WRITE_FILE
        | REMOVE_DIR
        | REMOVE_FILE
        | MAKE_CHAR
        | MAKE_DIR
        | MAKE_REG
        | MAKE_SOCK
        | MAKE_FIFO
        | MAKE_BLOCK
        | MAKE_SYM
    )
    file = WRITE_FILE
    if abi >= 2:
        directory |= REFER
    if abi >= 3:
        directory |= TRUNCATE
        file |= TRUNCATE
    return directory, file


_libc = None


def _syscall():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc


def kernel_abi() -> int:
    """The Landlock ABI this kernel offers; 0 where it offers none (too old, built without it,
    turned off at boot, or refused by a seccomp filter)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        libc = _syscall()
    except OSError:
        return 0
    version = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return int(version) if version > 0 else 0


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _RulesetAttrScoped(ctypes.Structure):  # ABI 6: the scopes a domain is confined to
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


_SCOPE_SIGNAL = 1 << 1  # no signal to a process outside the domain (proctor, the server, the person's)


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


# -- the mode -------------------------------------------------------------------------------------


class Mode:
    """What `[sandbox] mode` comes to on this kernel: `active` when runs are narrowed."""

    def __init__(self, configured: str, abi: int) -> None:
        self.configured, self.abi = configured, abi
        self.active = configured != "off" and abi > 0


def kernel_offers(abi: int) -> str:
    """What this kernel offers, as config show and doctor say it."""
    return f"this kernel offers Landlock ABI {abi}" if abi else "this kernel offers no Landlock"


_told_auto = False


def mode_for(config) -> Mode:
    """The mode `config` asks for, on this kernel. `landlock` where the kernel has none refuses
    (PRC3061); `auto` runs unsandboxed and says so once on stderr."""
    global _told_auto
    configured = config["sandbox.mode"]
    if configured == "off":
        return Mode("off", 0)
    mode = Mode(configured, kernel_abi())
    if mode.abi:
        return mode
    if configured == "landlock":
        raise errors.ProctorError(
            '[sandbox] mode = "landlock" but this kernel offers no Landlock (Linux 5.13 or later, with '
            'landlock among its LSMs); nothing ran. Set mode = "auto" to run unsandboxed where the kernel '
            'has none, or "off"',
            errors.SANDBOX_UNAVAILABLE,
        )
    if not _told_auto:
        _told_auto = True
        sys.stderr.write(
            'proctor: [sandbox] mode = "auto": this kernel offers no Landlock, so runs are not sandboxed\n'
        )
    return mode


# -- the grant ------------------------------------------------------------------------------------


class Grant:
    """What a run under job `job` may write: `paths` inside the narrowed `regions`, everything
    outside them, and the private `tmpdir`."""

    def __init__(
        self, job: str, regions: list[str], paths: list[str], tmpdir: str, skipped: list[str], read_only: bool
    ) -> None:
        self.job, self.regions, self.paths, self.tmpdir = job, regions, paths, tmpdir
        self.skipped, self.read_only = skipped, read_only

    def record(self, abi: int) -> dict:
        """The run record's `sandbox` entry."""
        out = {
            "mode": "landlock",
            "abi": abi,
            "job": self.job,
            "narrowed": self.regions,
            "grant": self.paths,
            "tmpdir": self.tmpdir,
            "read_only": self.read_only,
        }
        if self.skipped:
            out["not_granted"] = self.skipped
        return out

    def cleanup(self) -> None:
        shutil.rmtree(self.tmpdir, ignore_errors=True)


def narrows(job: dict | None) -> TypeGuard[dict]:
    """Whether a run acting for `job` is narrowed: a live row with a parent, and write paths or
    read_only."""
    from proctor.jobrecord import is_live

    if not job or not is_live(job.get("state", "")) or not job.get("parent"):
        return False
    return bool(job.get("read_only")) or bool(job.get("write_paths"))


def plan(job: dict, checkout: str, cache_dir: str, extra_regions: tuple[str, ...] = ()) -> Grant:
    """The grant for a run acting for `job` in `checkout` (call only where `narrows(job)`)."""
    root = os.path.realpath(checkout)
    regions = [root] + [os.path.realpath(r) for r in extra_regions if r]
    tmpdir = private_tmpdir()
    skipped: list[str] = []
    granted: set[str] = set()  # repository-relative
    if not job.get("read_only"):
        for raw in job.get("write_paths") or []:
            granted.update(_resolve(raw, root, skipped, literal_walks_up=True))
        denied: set[str] = set()
        for raw in job.get("deny_paths") or []:
            denied.update(_resolve(raw, root, [], literal_walks_up=False, keep_missing=True))
        for deny in sorted(denied):
            granted = _carve(granted, deny, root)
        # the repository's own .git (its hooks, its refs) is never granted, even when a literal
        # path's nearest existing directory is the checkout's root
        granted = _carve(granted, ".git", root)
    paths = sorted(os.path.join(root, rel) if rel != "." else root for rel in granted)
    for extra in (cache_dir, tmpdir):
        if extra:
            os.makedirs(extra, exist_ok=True)
            paths.append(os.path.realpath(extra))
    return Grant(job["id"], regions, paths, tmpdir, skipped, bool(job.get("read_only")))


def private_tmpdir() -> str:
    """A run's own TMPDIR, granted to it and removed after it."""
    return tempfile.mkdtemp(prefix=f"proctor-sandbox-{os.getuid()}-")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def inside_any(path: str, regions) -> bool:
    """Whether real path `path` lies in any of `regions` (resolved here)."""
    return any(_inside(path, os.path.realpath(region)) for region in regions)


def _safe(rel: str, root: str) -> bool:
    """Whether `rel` names itself under `root`: no directory on the way is a symlink, so a grant
    on it is a grant on what the row names and nothing a link points at."""
    lexical = os.path.normpath(os.path.join(root, rel))
    parent = os.path.dirname(lexical)
    return os.path.realpath(parent) == parent and _inside(lexical, root)


def _resolve(raw: str, root: str, skipped: list[str], literal_walks_up: bool, keep_missing: bool = False) -> set[str]:
    """The repository-relative paths entry `raw` names now: a glob's existing matches; a literal
    path, or (missing) the nearest existing directory above it, or itself with keep_missing."""
    text, _declaration, _ = claims.split_entry(raw)  # a declaration claim grants its file
    rel = claims.normalize(text, root)
    if rel is None:
        skipped.append(f"{raw}: outside the checkout")
        return set()
    claim = claims.Claim(rel)
    if claim.glob:
        found = set()
        for match, _ in claims.walk_glob(root, rel, prune_matched=True):
            if _safe(match, root):
                found.add(match)
            else:
                skipped.append(f"{match}: reached through a symlink")
        return found
    full = os.path.join(root, rel) if rel != "." else root
    if os.path.lexists(full):
        if not _safe(rel, root) or os.path.islink(full):
            skipped.append(f"{rel}: a symlink, or reached through one")
            return set()
        return {rel}
    if keep_missing:
        return {rel}
    if not literal_walks_up:
        return set()
    probe = rel
    while probe not in ("", "."):
        probe = os.path.dirname(probe)
        full = os.path.join(root, probe) if probe else root
        if os.path.isdir(full) and not os.path.islink(full):
            if not _safe(probe or ".", root):
                skipped.append(f"{rel}: its nearest directory {probe or '.'} is reached through a symlink")
                return set()
            return {probe or "."}
    return {"."}


def _carve(granted: set[str], deny: str, root: str) -> set[str]:
    """`granted` with `deny` taken out: a grant that is `deny` goes; a grant on a directory
    holding it is replaced by grants on its children, level by level down to `deny`."""
    out = set()
    for grant in granted:
        if grant == deny or (deny == "." or grant.startswith(deny + "/")):
            continue  # the deny path is the grant, or holds it
        if grant != "." and not deny.startswith(grant + "/"):
            out.add(grant)
            continue
        # descend from grant toward deny
        parts = deny.split("/") if grant == "." else deny[len(grant) + 1 :].split("/")
        here = grant
        for part in parts:
            directory = os.path.join(root, here) if here != "." else root
            try:
                names = os.listdir(directory)
            except OSError:
                break
            for name in names:
                child = name if here == "." else f"{here}/{name}"
                if name != part and child != ".git":
                    out.add(child)
            here = part if here == "." else f"{here}/{part}"
            if not os.path.isdir(os.path.join(root, here)) or os.path.islink(os.path.join(root, here)):
                break
    return out


# -- the ruleset ----------------------------------------------------------------------------------


class Ruleset:
    """A Landlock ruleset built in the parent; `preexec` enforces it in a child before exec."""

    def __init__(self, grant: Grant, abi: int) -> None:
        self.abi = abi
        self.fd = -1
        libc = _syscall()
        directory, file = write_rights(abi)
        # from ABI 6 the domain's processes may signal only processes inside it: a run cannot
        # stop or kill the proctor that judges it, the server, or anything of the person's
        attr = _RulesetAttrScoped(directory, 0, _SCOPE_SIGNAL) if abi >= 6 else _RulesetAttr(directory)
        fd = libc.syscall(
            _SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0)
        )
        if fd < 0:
            raise OSError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
        self.fd = int(fd)
        self.rules = 0
        try:
            for path in _outside(grant.regions):
                self._add(path, directory, file)
            for path in grant.paths:
                self._add(path, directory, file, exact=True)
        except BaseException:
            self.close()
            raise

    def _add(self, path: str, directory: int, file: int, exact: bool = False) -> None:
        """Grant `path`; with `exact` (a real path plan() resolved) only if what was opened is
        that path still: O_NOFOLLOW guards the last component only, and a directory on the way
        swapped for a link since plan() (to .git, say) would carry the grant there."""
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return  # gone since it was listed: nothing to grant
        try:
            if exact and os.readlink(f"/proc/self/fd/{fd}") != path:
                return  # reached through a link now: grant nothing rather than what it leads to
            mode = os.fstat(fd).st_mode
            if stat.S_ISLNK(mode):
                return  # a symlink grants nothing: writes through it land on its target
            access = directory if stat.S_ISDIR(mode) else file
            attr = _PathBeneath(access, fd)
            if (
                _syscall().syscall(_SYS_ADD_RULE, self.fd, _RULE_PATH_BENEATH, ctypes.byref(attr), ctypes.c_uint32(0))
                != 0
            ):
                code = ctypes.get_errno()
                raise OSError(code, f"landlock_add_rule {path}: {os.strerror(code)}")
            self.rules += 1
        finally:
            os.close(fd)

    def preexec(self) -> None:
        """In the child, between fork and exec: no new privileges, then the ruleset. Raises
        when either fails: subprocess then starts nothing and raises SubprocessError in the
        parent, so a run meant to be sandboxed never runs without it, and says why."""
        libc = _syscall()
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        flags = _LOG_NEW_EXEC_ON if self.abi >= 7 else 0
        if libc.syscall(_SYS_RESTRICT_SELF, self.fd, ctypes.c_uint32(flags)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _outside(regions: list[str]) -> list[str]:
    """Every entry beside the path from / to each region: granted whole, so what lies outside
    the regions stays writable as it was."""
    spine: set[str] = set()
    for region in regions:
        probe = region
        while True:
            spine.add(probe)
            parent = os.path.dirname(probe)
            if parent == probe:
                break
            probe = parent
    out = []
    for directory in sorted(spine):
        if directory in regions:
            continue
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            path = os.path.join(directory, name)
            if path not in spine:
                out.append(path)
    return out


def env_for(grant: Grant, env: dict) -> dict:
    """The child's environment: its TMPDIR (and TMP, TEMP) the grant's private temp dir."""
    out = dict(env)
    for key in ("TMPDIR", "TMP", "TEMP"):
        out[key] = grant.tmpdir
    return out


# -- denials, as the kernel reports them ---------------------------------------------------------


class AuditWatch:
    """Landlock's denial records from the kernel's audit log, read while a run lasts. `open`
    returns None where they cannot be read (audit off, or no CAP_AUDIT_READ); `why` says which."""

    why = ""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.records: list[tuple[int, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    @classmethod
    def open(cls) -> "AuditWatch | None":
        enabled = _audit_enabled()
        if enabled is not True:
            cls.why = (
                "the kernel's audit is off (auditctl -e 1 turns it on)"
                if enabled is False
                else "the kernel's audit status cannot be read"
            )
            return None
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, 9)  # NETLINK_AUDIT
            sock.bind((0, _AUDIT_NLGRP_READLOG))
        except OSError as exc:
            cls.why = f"the audit log cannot be read here ({exc.strerror or exc}; it takes CAP_AUDIT_READ)"
            return None
        return cls(sock)

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self.sock], [], [], 0.1)
                if not ready:
                    continue
                data = self.sock.recv(1 << 16)
            except OSError:
                return
            offset = 0
            while offset + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, offset)
                if length < 16:
                    break
                if kind in (_AUDIT_LANDLOCK_ACCESS, _AUDIT_LANDLOCK_DOMAIN):
                    text = data[offset + 16 : offset + length].split(b"\0", 1)[0].decode("utf-8", "replace")
                    self.records.append((kind, text))
                offset += (length + 3) & ~3

    def still_on(self) -> bool:
        """Whether the kernel's audit is on still: a process that turned it off during the run
        (root's) leaves no record of what it did after, so no count can be vouched for."""
        return _audit_enabled() is True

    def denials(self, pids: set[int], since: float | None = None, settle: float = 0.15) -> list[dict]:
        """The denials of the domains the processes `pids` made, once `settle` seconds passed
        since the run ended (monotonic `since`; now when None): the kernel's audit thread hands
        the records on after the denial. Stops reading."""
        wait = settle - (time.monotonic() - since) if since is not None else settle
        if wait > 0:
            time.sleep(wait)
        self._stop.set()
        self._thread.join(timeout=1)
        self.sock.close()
        domains = set()
        for kind, text in self.records:
            if kind == _AUDIT_LANDLOCK_DOMAIN:
                fields = _fields(text)
                if (
                    fields.get("status") == "allocated"
                    and fields.get("pid", "").isdigit()
                    and int(fields["pid"]) in pids
                ):
                    domains.add(fields.get("domain"))
        out = []
        for kind, text in self.records:
            if kind == _AUDIT_LANDLOCK_ACCESS:
                fields = _fields(text)
                if fields.get("domain") in domains:
                    out.append(
                        {
                            "blockers": fields.get("blockers", ""),
                            "path": fields.get("path"),
                            "domain": fields.get("domain"),
                        }
                    )
        return out


_FIELD = re.compile(r'(\w+)=("(?:[^"]*)"|\S+)')


def _fields(text: str) -> dict[str, str]:
    out = {}
    for key, value in _FIELD.findall(text):
        if value.startswith('"'):
            value = value[1:-1]
        elif key == "path" and re.fullmatch(r"[0-9A-Fa-f]+", value) and len(value) % 2 == 0:
            try:
                value = bytes.fromhex(value).decode("utf-8", "surrogateescape")  # audit hex-encodes odd names
            except ValueError:
                pass
        out[key] = value
    return out


def _audit_enabled() -> bool | None:
    """Whether the kernel's audit is on: AUDIT_GET over a netlink socket; None when unreadable."""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, 9)
    except OSError:
        return None
    try:
        sock.settimeout(1)
        sock.bind((0, 0))
        sock.send(struct.pack("=IHHII", 16, _AUDIT_GET, 1, 1, 0))  # NLM_F_REQUEST
        data = sock.recv(1 << 16)
        length, kind = struct.unpack_from("=IH", data, 0)
        if kind != _AUDIT_GET or length < 24:
            return None  # an error reply (no CAP_AUDIT_CONTROL, say)
        return struct.unpack_from("=I", data, 20)[0] != 0  # audit_status.enabled
    except OSError:
        return None
    finally:
        sock.close()


def denial_reporting() -> str:
    """One line for doctor: whether the kernel's denials reach proctor's trail here."""
    enabled = _audit_enabled()
    if enabled is True:
        try:
            with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, 9) as sock:
                sock.bind((0, _AUDIT_NLGRP_READLOG))
            return "recorded on the trail (the kernel's audit log is on and readable)"
        except OSError as exc:
            return f"not recorded: the audit log cannot be read ({exc.strerror or exc}; it takes CAP_AUDIT_READ)"
    if enabled is False:
        return "not recorded: the kernel's audit is off (auditctl -e 1); each run record names its grant"
    return "not recorded: the kernel's audit status cannot be read; each run record names its grant"


__all__ = [
    "MODES",
    "Mode",
    "mode_for",
    "kernel_abi",
    "kernel_offers",
    "inside_any",
    "narrows",
    "plan",
    "Grant",
    "Ruleset",
    "AuditWatch",
    "env_for",
    "denial_reporting",
]
