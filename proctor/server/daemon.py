"""Starting, stopping and finding the server. One server per repository store: its files
live in `<state dir>/server/` (mode 0700: the token, mode 0600; server.json with pid, port,
version and the digest of the code it runs; a lock held while it runs, so a second one refuses
to start; its log, mode 0600).

Also who may act as the person who runs it. The server token is a person's: a process that
works a job of this store, or runs beneath one, is refused it (`lineage`), and so are
`proctor server start` and `stop`. A leased process is recognised by what it cannot undo: the
environment an ancestor was started with (/proc/<pid>/environ: BAGGAGE naming a job of this
store, or a job's secret in PROCTOR_NONCE), a `proctor work` of this repository above it (the
subreaper its orphans reparent to), this server above it (a monitor's command), or a worker's
cgroup it lives in. The server finds the process at the other end of a token's connection
(`peer_pids`: its socket's owner, through /proc) and asks the same question of it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from proctor import __version__, errors
from proctor.paths import write_atomic
from proctor.workspace import Workspace


def server_dir(ws: Workspace) -> str:
    path = os.path.join(ws.state_dir, "server")
    os.makedirs(path, mode=0o700, exist_ok=True)
    _tighten(path, 0o700)
    return path


def _tighten(path: str, mode: int) -> None:
    """Take group's and others' bits off `path` (made wider by an older proctor or a umask)."""
    with contextlib.suppress(OSError):
        if os.stat(path).st_mode & 0o077:
            os.chmod(path, mode)


def token_path(ws: Workspace) -> str:
    return os.path.join(server_dir(ws), "token")


def ensure_token(path: str, token: str | None = None) -> str:
    """The server token: read, or written with mode 0600 when missing."""
    if token is None:
        try:
            with open(path, encoding="ascii") as handle:
                existing = handle.read().strip()
            if existing:
                return existing
        except OSError:
            pass
        token = os.urandom(24).hex()
    write_atomic(path, token + "\n", mode=0o600)
    return token


def _lock_held(directory: str) -> bool:
    """Whether a server holds this repository's lock (a pid alone may be somebody else's now)."""
    try:
        fd = os.open(os.path.join(directory, "server.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def info(ws: Workspace) -> dict | None:
    directory = server_dir(ws)
    path = os.path.join(directory, "server.json")
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int) or not _lock_held(directory):
        with contextlib.suppress(OSError):
            os.unlink(path)  # left behind by a server that is gone
        return None
    return data


def request(
    ws: Workspace, method: str, path: str, body: dict | None = None, nonce: str | None = None, timeout: float = 30
) -> dict:
    """Call the running server's API; raise ProctorError with the server's own message."""
    running = info(ws)
    if running is None:
        raise errors.ProctorError("the server is not running; start it with proctor server start")
    headers = {"Content-Type": "application/json", "Host": f"127.0.0.1:{running['port']}"}
    if nonce:
        headers["Authorization"] = f"Nonce {nonce}"
    else:
        try:
            with open(token_path(ws), encoding="ascii") as handle:
                headers["Authorization"] = f"Bearer {handle.read().strip()}"
        except OSError:
            raise errors.ProctorError(
                f"cannot read the server token at {token_path(ws)}; restart the server "
                f"(proctor server stop; proctor server start)"
            ) from None
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{running['port']}{path}", data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            payload = json.loads(exc.read())
        except ValueError:
            payload = {}
        error = payload.get("error") or {}
        refusals = payload.get("refusals")
        if refusals:
            raise errors.Refused([(r["code"], r["message"]) for r in refusals]) from None
        raise errors.ProctorError(
            error.get("message") or f"the server answered {exc.code}", error.get("code")
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        raise errors.ProctorError(f"cannot reach the server on port {running['port']}: {exc}") from None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_background(ws: Workspace, port: int | None) -> dict:
    running = info(ws)
    if running is not None:
        return {**running, "already": True}
    log = os.path.join(server_dir(ws), "server.log")
    # isolated (-I): what runs is the installed proctor, never a package in the directory it is
    # started from; the runner spares only a server started so (runner._workspace_server)
    # --orchestrator: the caller was judged already (refuse_leased); the server it starts runs
    # in the same checkout, whose record would otherwise refuse it; --detached: its output is
    # the log below, which gets no login link (the caller asks the server for one)
    argv = [sys.executable, "-I", "-m", "proctor", "server", "start", "--foreground", "--orchestrator", "--detached"]
    if port:
        argv += ["--port", str(port)]
    # The server is the workspace's, not the worker's that may have started it: it drops the
    # worker's tag (a worker's stop ends every process carrying it), and it names its state
    # directory, whose server.json records its pid, so a worker's stop spares it (runner.py).
    # the server is nobody's worker: a BAGGAGE or secret it started with would make every
    # monitor it runs, for any job, act as that job's worker
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PROCTOR_WORKER_TAG", "BAGGAGE", "PROCTOR_NONCE", "PROCTOR_LEASE")
    }
    env["PROCTOR_SERVER_DIR"] = server_dir(ws)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "ab") as handle:
        subprocess.Popen(
            argv, cwd=ws.root, env=env, stdin=subprocess.DEVNULL, stdout=handle, stderr=handle, start_new_session=True
        )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        running = info(ws)
        if running is not None and running.get("ready"):
            return running
        time.sleep(0.05)
    tail = ""
    with contextlib.suppress(OSError), open(log, encoding="utf-8", errors="replace") as handle:
        tail = handle.read()[-600:]
    raise errors.ProctorError(f"the server did not come up within 20 s; its log ({log}) ends: {tail.strip()}")


def _running(pid: int) -> bool:
    """Whether `pid` still runs. A zombie has ended: a server a worker started is adopted by
    `proctor work` (a child subreaper), which reaps it only when it gets to it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def stop(ws: Workspace, timeout: float = 30) -> bool:
    running = info(ws)
    if running is None:
        return False
    try:
        os.kill(running["pid"], signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _running(running["pid"]):
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(running["pid"], signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(server_dir(ws), "server.json"))
    return True


def serve(ws: Workspace, port: int | None, announce=None) -> None:
    """Run the server in this process until SIGTERM or SIGINT. `announce(running, login_url,
    seconds)`, when given, is called once the server listens: what server.json records, and a
    one-time console login link good for `seconds` (a person's `server start --foreground`; the
    server `server start` detaches writes its log, which gets no link)."""
    import asyncio

    import uvicorn

    from proctor.monitors.scheduler import Scheduler
    from proctor.monitors.store import repository_root
    from proctor.server.app import State, build

    directory = server_dir(ws)
    lock = os.open(os.path.join(directory, "server.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            running = info(ws)
            where = f" (pid {running['pid']}, port {running['port']})" if running else ""
            raise errors.ProctorError(
                f"a server for this repository is running already{where}; proctor server status shows it"
            ) from None
        raise
    port = port or _free_port()
    token = ensure_token(token_path(ws))
    repo_root = repository_root(ws.root, ws.checkout.common_dir)
    state = State(ws.root, ws.state_dir, repo_root, token, port)
    _ = ws.store  # the store exists and is migrated before anything runs
    _tighten(ws.state_dir, 0o700)  # the store, its trail's blobs and the server's files are the person's
    for name in ("proctor.db", "proctor.db-wal", "proctor.db-shm", "proctor.db.lock", "server/server.log"):
        _tighten(os.path.join(ws.state_dir, name), 0o600)
    code = code_digest()
    info_path = os.path.join(directory, "server.json")

    @contextlib.asynccontextmanager
    async def lifespan(app):
        scheduler = Scheduler(ws.state_dir, ws.root, repo_root)
        state.scheduler = scheduler
        await scheduler.start()
        keeper = asyncio.ensure_future(_keep_token(token_path(ws), token))
        running = {
            "pid": os.getpid(),
            "port": port,
            "version": __version__,
            "code": code,
            "ready": True,
            "root": ws.root,
            "started": time.time(),
            "url": f"http://127.0.0.1:{port}/api/v1/",
            "console": f"http://127.0.0.1:{port}/",
            "mcp": f"http://127.0.0.1:{port}/mcp",
        }
        _write_info(info_path, running)
        herald = asyncio.ensure_future(_announce_when_listening(server, state, running, announce)) if announce else None
        try:
            yield
        finally:
            keeper.cancel()
            if herald is not None:
                herald.cancel()
            await scheduler.stop()  # every monitor command and its descendants ended and reaped
            with contextlib.suppress(OSError):
                os.unlink(info_path)

    config = uvicorn.Config(
        build(state, lifespan),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    state.shutdown = lambda: setattr(server, "should_exit", True)
    try:
        server.run()
    except KeyboardInterrupt:
        pass  # Ctrl-C: uvicorn shut down in order (monitors ended, server.json gone), then raised it again
    finally:
        os.close(lock)


async def _announce_when_listening(server, state, running: dict, announce) -> None:
    """Tell the person who started the server in the foreground where it is, once it accepts
    connections (uvicorn binds its socket after the lifespan has started)."""
    import asyncio

    while not server.started:
        await asyncio.sleep(0.02)
    code, seconds = state.login_codes.issue()
    with contextlib.suppress(OSError):  # a terminal gone (a closed pipe) stops no server
        announce(running, f"http://127.0.0.1:{state.port}/login?code={code}", seconds)


async def _keep_token(path: str, token: str) -> None:
    """A token file removed while the server runs is written again (same token)."""
    import asyncio

    while True:
        await asyncio.sleep(2)
        if not os.path.exists(path):
            with contextlib.suppress(OSError):
                ensure_token(path, token)


def _write_info(path: str, data: dict) -> None:
    write_atomic(path, json.dumps(data))


# -- the code a server runs -------------------------------------------------------------------


def code_digest() -> str:
    """sha256 over the installed proctor package's source (.py and .html files: relative path,
    length and contents, in sorted order). A server records it at start; `server status`
    compares it with the installed one's, so an edited or reinstalled proctor is noticed when
    the version string did not move. About 110 files, 1 MB: a few milliseconds."""
    import proctor

    base = os.path.dirname(os.path.abspath(proctor.__file__))
    digest = hashlib.sha256()
    found: list[str] = []
    for directory, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        found.extend(os.path.join(directory, f) for f in files if f.endswith((".py", ".html")))
    for path in sorted(found):
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            data = b"\0unreadable"
        rel = os.path.relpath(path, base).encode("utf-8", "surrogateescape")
        digest.update(len(rel).to_bytes(4, "big") + rel + len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


# -- who is calling: a person, or a process that works a job -----------------------------------

_WORKER_CGROUP = re.compile(r"proctor-[0-9a-f]{24}")


def _proc(pid: int, name: str) -> bytes | None:
    try:
        with open(f"/proc/{pid}/{name}", "rb") as handle:
            return handle.read()
    except OSError:
        return None


def alive(pid: int) -> bool:
    """Whether process `pid` still runs: there, and neither a zombie nor dead."""
    stat = _proc(pid, "stat")
    if stat is None:
        return False
    fields = stat[stat.rfind(b")") + 2 :].split()
    return bool(fields) and fields[0] not in (b"Z", b"X", b"x")


def _claims(environ: bytes | None) -> tuple[list[str], list[str]]:
    """(jobs BAGGAGE's proctor.lease names, secrets PROCTOR_NONCE holds) in an environment."""
    from proctor.jobrecord import BAGGAGE_KEY, parse_baggage

    jobs, nonces = [], []
    for item in (environ or b"").split(b"\0"):
        if item.startswith(b"BAGGAGE="):
            job = parse_baggage(item[8:].decode("utf-8", "replace")).get(BAGGAGE_KEY)
            if job:
                jobs.append(job)
        elif item.startswith(b"PROCTOR_NONCE=") and len(item) > 14:
            nonces.append(item[14:].decode("utf-8", "replace").strip())
    return jobs, nonces


def _runner_here(pid: int, state_dir: str) -> bool:
    """Whether process `pid` is a `proctor work` of the repository whose state is `state_dir`
    (its orphans, double-forked and setsid'd, reparent to it: it is a child subreaper)."""
    argv = (_proc(pid, "cmdline") or b"").split(b"\0")
    words = [w.decode("utf-8", "replace") for w in argv]
    is_work = any(
        (os.path.basename(w) == "proctor" or (w == "proctor" and i > 0 and words[i - 1] == "-m"))
        and words[i + 1 : i + 2] == ["work"]
        for i, w in enumerate(words)
    )
    if not is_work:
        return False
    from proctor.paths import find_checkout, repo_state_dir

    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
        return os.path.realpath(repo_state_dir(find_checkout(cwd), create=False)) == os.path.realpath(state_dir)
    except (OSError, errors.ProctorError):
        return False


def _cgroup_members(pid: int, limit: int = 256) -> list[int]:
    """The processes of the worker cgroup (`proctor-<tag>`, runner.py) process `pid` lives in
    or below, or []: a process cannot leave it short of writing to a cgroup.procs file."""
    text = (_proc(pid, "cgroup") or b"").decode("utf-8", "surrogateescape")
    path = next((line[3:] for line in text.splitlines() if line.startswith("0::")), "")
    parts = path.split("/")
    index = next((i for i, part in enumerate(parts) if _WORKER_CGROUP.fullmatch(part)), None)
    if index is None:
        return []
    group = "/".join(parts[: index + 1])
    from proctor.process import _unescape, cgroup_pids

    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
            mounts = handle.read().splitlines()
    except OSError:
        return []
    for line in mounts:
        left, separator, right = line.partition(" - ")
        fields = left.split()
        if not separator or not right.startswith("cgroup2 ") or len(fields) < 5:
            continue
        root, point = _unescape(fields[3]).rstrip("/"), _unescape(fields[4])
        if group == root or group.startswith(root + "/"):
            return cgroup_pids(os.path.normpath(point + group[len(root) :]))[:limit]
    return []


def lineage(conn, pid: int, state_dir: str, server_pid: int | None = None, checkouts: bool = True) -> str | None:
    """Why process `pid` acts for a job of this store (whose state is `state_dir`, read through
    `conn`; with None, a store that cannot be read, any job counts), or None: it
    or an ancestor was started with BAGGAGE naming one of its jobs or with one of its jobs'
    secret, a `proctor work` of this repository or this server (`server_pid`) is above it, or
    it lives in a worker's cgroup whose processes carry either, or (`checkouts`) it or an
    ancestor works in a checkout `proctor job exec` bound to a job in flight. Jobs of other stores do not
    count: a worker of one repository may run another repository's server and its tests.
    None where there is no /proc."""
    if not os.path.isdir("/proc/self"):
        return None
    jobs: list[tuple[str, str]] = []
    nonces: list[tuple[str, str]] = []
    current, seen = pid, set()
    while current > 1 and current not in seen:
        seen.add(current)
        stat = _proc(current, "stat")
        if stat is None:
            break
        name = stat[stat.find(b"(") + 1 : stat.rfind(b")")].decode("utf-8", "replace")
        who = f"process {current} ({name})"
        if current != pid and server_pid is not None and current == server_pid:
            return f"process {pid} runs beneath this server ({who}): a monitor's command acts for the job it belongs to"
        if current != pid and _runner_here(current, state_dir):
            return f"process {pid} runs beneath {who}, a proctor work whose worker it is"
        found_jobs, found_nonces = _claims(_proc(current, "environ"))
        jobs += [(job, who) for job in found_jobs]
        nonces += [(nonce, who) for nonce in found_nonces]
        try:
            current = int(stat[stat.rfind(b")") + 2 :].split()[1])
        except (ValueError, IndexError):
            break
    for member in _cgroup_members(pid):
        found_jobs, found_nonces = _claims(_proc(member, "environ"))
        where = f"process {member}, in the worker's cgroup process {pid} lives in,"
        jobs += [(job, where) for job in found_jobs]
        nonces += [(nonce, where) for nonce in found_nonces]
    from proctor.store import rows

    for job, who in jobs:
        if conn is None or rows.exists(conn, job):
            return f"{who} was started with BAGGAGE proctor.lease={job}: it works that job"
    bound = _bound_checkout(conn, sorted(seen)) if checkouts else None
    if bound:
        return bound
    for nonce, who in nonces:
        if conn is None:
            return f"{who} was started with a job's secret in PROCTOR_NONCE: it works that job"
        digest = hashlib.sha256(nonce.encode("utf-8", "surrogateescape")).hexdigest()
        found = rows.job_by_secret_digest(conn, digest)
        if found:
            return f"{who} was started with job {found}'s secret in PROCTOR_NONCE: it works that job"
    return None


def _bound_checkout(conn, pids: list[int]) -> str | None:
    """A process working in a checkout that `proctor job exec` bound to a job in flight acts
    under that job, whatever its environment says (jobs/lease.py reads the same record)."""
    if conn is None:
        return None
    from proctor.errors import ProctorError
    from proctor.paths import find_checkout
    from proctor.store.rows import bound_job, checkout_scope

    looked: set[str] = set()
    for pid in pids:
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd in looked:
            continue
        looked.add(cwd)
        try:
            root = os.path.realpath(find_checkout(cwd).root)
        except (ProctorError, OSError):
            continue
        job = bound_job(conn, checkout_scope(root))
        if job:
            return f"process {pid} works in {root}, the checkout proctor job exec bound to {job}: it works that job"
    return None


def peer_pids(client_port: int, server_port: int) -> list[int] | None:
    """The processes holding the client end of a loopback TCP connection to `server_port`
    from `client_port` (its socket's inode in /proc/net/tcp, then the file descriptors of the
    socket owner's processes); [] when the connection is not there; None when /proc/net/tcp
    does not show this server's own listening socket either (a /proc that does not tell, as
    WSL 1's or gVisor's may not): nothing can be known there."""
    inode = uid = None
    listening = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii", errors="replace") as handle:
                lines = handle.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10:
                continue
            try:
                local, remote = int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16)
            except (IndexError, ValueError):
                continue
            if local == server_port and fields[3] == "0A":
                listening = True
            elif local == client_port and remote == server_port and fields[9] != "0":
                inode, uid = fields[9], int(fields[7])
        if inode:
            break
    if inode is None:
        return [] if listening else None
    target = f"socket:[{inode}]"
    holders = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{entry}/fd/{fd}") == target:
                    holders.append(int(entry))
                    break
            except OSError:
                continue
    return holders


def refuse_leased(
    ws: Workspace, orchestrator: bool, doing: str, remedy: str, code: str = errors.SERVER_LEASED_CALLER
) -> None:
    """Refuse this command (`doing`) to a caller that acts under a lease (any tier: --lease,
    BAGGAGE, the checkout's record, an ancestor's BAGGAGE) or whose lineage works a job."""
    from proctor.jobs.lease import ORCHESTRATOR, resolve

    running = info(ws)
    server_pid = running["pid"] if running else None

    def judge(conn) -> str | None:
        caller = resolve(conn, ws.root, ORCHESTRATOR if orchestrator else None)
        if caller.lease:
            return caller.whence() + caller.remedy()
        # --orchestrator is the CLI's way out of the checkout's record (resolve honours it);
        # the server's check of a token's caller has no such flag to read
        return lineage(conn, os.getpid(), ws.state_dir, server_pid, checkouts=not orchestrator)

    try:
        with ws.store.read() as conn:
            why = judge(conn)
    except errors.StoreError:  # a store it cannot read stops nobody from stopping the server
        why = judge(None)
    if why:
        raise errors.Refused([(code, f"refused to {doing}: {why}; {remedy}")])
