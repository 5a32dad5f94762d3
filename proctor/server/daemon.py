"""Starting, stopping and finding the server. One server per repository store: its files
live in `<state dir>/server/` (token, mode 0600; server.json with pid, port and version; a
lock held while it runs, so a second one refuses to start; its log).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
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
    return path


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


def request(ws: Workspace, method: str, path: str, body: dict | None = None, nonce: str | None = None,
            timeout: float = 30) -> dict:
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
            raise errors.ProctorError(f"cannot read the server token at {token_path(ws)}; restart the server "
                                      f"(proctor server stop; proctor server start)") from None
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
        raise errors.ProctorError(error.get("message") or f"the server answered {exc.code}",
                                  error.get("code")) from None
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
    argv = [sys.executable, "-I", "-m", "proctor", "server", "start", "--foreground"]
    if port:
        argv += ["--port", str(port)]
    # The server is the workspace's, not the worker's that may have started it: it drops the
    # worker's tag (a worker's stop ends every process carrying it), and it names its state
    # directory, whose server.json records its pid, so a worker's stop spares it (runner.py).
    # the server is nobody's worker: a BAGGAGE or secret it started with would make every
    # monitor it runs, for any job, act as that job's worker
    env = {k: v for k, v in os.environ.items()
           if k not in ("PROCTOR_WORKER_TAG", "BAGGAGE", "PROCTOR_NONCE", "PROCTOR_LEASE")}
    env["PROCTOR_SERVER_DIR"] = server_dir(ws)
    with open(log, "ab") as handle:
        subprocess.Popen(argv, cwd=ws.root, env=env, stdin=subprocess.DEVNULL, stdout=handle, stderr=handle,
                         start_new_session=True)
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


def serve(ws: Workspace, port: int | None) -> None:
    """Run the server in this process until SIGTERM or SIGINT."""
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
            raise errors.ProctorError(f"a server for this repository is running already{where}; "
                                      f"proctor server status shows it") from None
        raise
    port = port or _free_port()
    token = ensure_token(token_path(ws))
    repo_root = repository_root(ws.root, ws.checkout.common_dir)
    state = State(ws.root, ws.state_dir, repo_root, token, port)
    ws.store  # the store exists and is migrated before anything runs
    info_path = os.path.join(directory, "server.json")

    @contextlib.asynccontextmanager
    async def lifespan(app):
        scheduler = Scheduler(ws.state_dir, ws.root, repo_root)
        state.scheduler = scheduler
        await scheduler.start()
        keeper = asyncio.ensure_future(_keep_token(token_path(ws), token))
        _write_info(info_path, {"pid": os.getpid(), "port": port, "version": __version__, "ready": True,
                                "root": ws.root, "started": time.time(),
                                "url": f"http://127.0.0.1:{port}/api/v1/", "console": f"http://127.0.0.1:{port}/"})
        try:
            yield
        finally:
            keeper.cancel()
            await scheduler.stop()  # every monitor command and its descendants ended and reaped
            with contextlib.suppress(OSError):
                os.unlink(info_path)

    config = uvicorn.Config(build(state, lifespan), host="127.0.0.1", port=port, log_level="warning",
                            lifespan="on", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    state.shutdown = lambda: setattr(server, "should_exit", True)
    server.run()
    os.close(lock)


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
