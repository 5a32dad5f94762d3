"""The store broker: a sandboxed worker's `proctor` commands, run by `proctor work` for it.

With `[sandbox] workers = true` a worker's Landlock domain narrows proctor's state (the SQLite
store, its blobs, the run outputs) with its checkout, so no process of the worker can open the
store and rewrite a row, its own job's or another's. It still files its result, runs its check
and is judged by its hook through proctor: every `proctor` a process of the worker starts finds
PROCTOR_BROKER in its environment and hands its argv, its working directory, its environment
and its stdin, stdout and stderr (the descriptors themselves, over SCM_RIGHTS) to the broker
`proctor work` keeps for the attempt (`forward`, the only part the hook loads). The broker
starts the command as a process of its own (`Broker`):

- in a Landlock domain of its own, the worker's grant with proctor's state added: what the
  command writes in the checkout, and what anything it starts writes, is no more than the
  worker could write;
- as the worker's job: BAGGAGE is set here, and the command reads it back as the claim it
  inherited (jobs/lease.py), whatever the worker claims, flags or binds;
- with proctor's environment, not the worker's: PATH (the git proctor runs), HOME, the state
  directory and the store's URL stay proctor's. Of the worker's variables only those that say
  what a command judges pass (a host's hook variables, the terminal, the locale); the targets
  the command runs get the worker's whole environment, and run sandboxed beneath it with
  proctor's state narrowed whatever the checkout's proctor.toml says (runs.sandboxed);
- from proctor's own interpreter (`-E -P -B`, and `-s` unless proctor lives in the user site: no
  PYTHON* variable, no module from the working directory, no bytecode written), whose files, with the git proctor
  runs, the worker's domain narrows (`interpreter_regions`): the worker cannot change the code
  the broker runs for it;
- never `proctor work`, `server` or `store` (REFUSED, refused by the command itself): those
  start processes that write the store.

Only a process of the attempt is served: the kernel names the peer (SO_PEERCRED), and it must
be in the attempt's cgroup or descend from its worker. The sockets live in proctor's state
directory, which every sandboxed worker and target is denied: none can take another's place.
"""

from __future__ import annotations

import os
import struct
import sys

TYPE_CHECKING = False  # no `typing` import at run time: the hook's path
if TYPE_CHECKING:
    import socket

ENV = "PROCTOR_BROKER"  # the socket a worker's proctor hands its commands to
BROKERED = "PROCTOR_BROKERED"  # set on a command the broker runs: the job it runs for
CLIENT_ENV = "PROCTOR_BROKER_ENV"  # the worker's own environment (JSON), for the targets it runs
REFUSED = ("work", "server", "store")
MAX_REQUEST = 8 << 20
NOT_SERVED = -(1 << 30)  # the answer to a process that is not of the attempt

# The worker's variables a brokered command reads: what it judges (a host's hook), how it
# prints. Never PATH, HOME, PYTHON*, GIT_*, LD_*, the state directory or the store's URL.
PASS = frozenset(
    {
        "TERM",
        "COLUMNS",
        "LINES",
        "NO_COLOR",
        "FORCE_COLOR",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TRACEPARENT",
        "TRACESTATE",
        "PROCTOR_WORKER_HOOK",
        "PROCTOR_BUSY_TIMEOUT",
    }
)
PASS_PREFIXES = ("CLAUDE_", "GEMINI_", "CODEX_", "OPENCODE_", "LC_")

# (job id) -> the socket of the broker serving it in this process: read by the pinned hook
SERVING: dict[str, str] = {}

_SUN_PATH = 107  # sockaddr_un's path, less its terminating NUL


def socket_for(state_dir: str, job_id: str) -> str:
    """The broker socket of `job_id`'s attempts: in the state directory, denied to every
    sandboxed process."""
    import hashlib

    return os.path.join(state_dir, "brokers", hashlib.sha256(job_id.encode("utf-8")).hexdigest()[:16])


def _address(sock, path: str, bind: bool) -> None:
    """connect (or bind) `sock` to `path`, through /proc/self/fd when the path is longer than a
    socket address holds."""
    if len(os.fsencode(path)) <= _SUN_PATH:
        (sock.bind if bind else sock.connect)(path)
        return
    fd = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        where = f"/proc/self/fd/{fd}/{os.path.basename(path)}"
        (sock.bind if bind else sock.connect)(where)
    finally:
        os.close(fd)


# -- the worker's side: hand the command over ---------------------------------------------------


def forward(argv: list[str]) -> int:
    """Run `proctor argv` through the broker PROCTOR_BROKER names; its exit status."""
    import json
    import socket

    path = os.environ[ENV]
    try:
        cwd = os.getcwd()
    except OSError as exc:
        sys.stderr.write(f"proctor: the working directory is gone ({exc.strerror}); cd into the checkout\n")
        return 2
    request = json.dumps({"argv": argv, "cwd": cwd, "env": dict(os.environ)}).encode("utf-8", "surrogateescape")
    fds = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            fds.append(os.open(os.devnull, os.O_RDWR))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        _address(sock, path, bind=False)
        try:
            socket.send_fds(sock, [struct.pack("!I", len(request))], fds)
            sock.sendall(request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the request was read: its answer says so
        answer = b""
        while len(answer) < 4:
            chunk = sock.recv(4 - len(answer))
            if not chunk:
                break
            answer += chunk
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        sys.stderr.write(
            f"proctor: this process's proctor commands go through the broker of the `proctor work` that runs its "
            f"worker ({ENV}={path}), which cannot be reached ({exc.strerror or exc}): the attempt has ended. "
            f"Outside a worker, unset {ENV}\n"
        )
        return 2
    finally:
        sock.close()
    if len(answer) < 4:
        sys.stderr.write("proctor: the broker ended before the command did (proctor work stopped the attempt)\n")
        return 2
    status = struct.unpack("!i", answer)[0]
    if status == NOT_SERVED:
        sys.stderr.write(
            f"proctor: the broker at {path} serves only the processes of its worker's attempt, and "
            f"this process is not of the attempt (nothing ran). Outside a worker, unset {ENV}\n"
        )
        return 2
    return status


# -- proctor work's side: run it -----------------------------------------------------------------

_RUNS_FROM: list[str] | None = None


def interpreter_regions(keep_writable: tuple[str, ...] = ()) -> list[str]:
    """What a brokered command runs from, narrowed in every sandboxed worker's domain: the
    interpreter (its executable and, in a virtual environment, the environment), every
    directory of the sys.path it starts with (asked of it, with the broker's flags), the shared
    libraries it loads, proctor's own package, every directory of proctor's PATH, and git's
    exec path. A directory holding one of
    `keep_writable` (the worker's worktree) is left out: narrowing it would deny the worker its
    own tree."""
    global _RUNS_FROM
    if _RUNS_FROM is None:
        _RUNS_FROM = _runs_from()
    inside = [os.path.realpath(path) for path in keep_writable]
    return [
        region
        for region in _RUNS_FROM
        if not any(path == region or path.startswith(region.rstrip("/") + "/") for path in inside)
    ]


def _runs_from() -> list[str]:
    import json
    import shutil
    import subprocess

    import proctor

    out = {os.path.realpath(sys.executable), os.path.dirname(os.path.realpath(proctor.__file__))}
    if sys.prefix != sys.base_prefix:
        out.add(os.path.realpath(sys.prefix))
    try:
        started = subprocess.run(
            [sys.executable, *_interpreter_flags(), "-c", "import json, sys; print(json.dumps(sys.path))"],
            capture_output=True,
            text=True,
            timeout=30,
            env={"PATH": os.defpath},
        )
        paths = json.loads(started.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        paths = sys.path
    out.update(os.path.realpath(entry) for entry in paths if isinstance(entry, str) and entry and os.path.exists(entry))
    # the shared libraries this interpreter has loaded (libpython, libc, sqlite's): what a brokered
    # command loads too, wherever its Python was installed
    try:
        with open("/proc/self/maps") as handle:
            for line in handle:
                mapped = line.split(maxsplit=5)
                if len(mapped) == 6 and mapped[5].startswith("/") and ".so" in mapped[5]:
                    where = mapped[5].strip()
                    if os.path.isfile(where):
                        out.add(os.path.realpath(where))
    except OSError:
        pass
    # every directory of the PATH proctor finds its programs on (git, sh, the checks' tools): a
    # program the worker put first on it would run outside its domain, or with the store writable
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if directory and os.path.isabs(directory) and os.path.isdir(directory):
            out.add(os.path.realpath(directory))
    git = shutil.which("git")
    if git:
        out.add(os.path.realpath(git))
        try:
            exec_path = subprocess.run([git, "--exec-path"], capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            exec_path = ""
        if exec_path and os.path.isdir(exec_path):
            out.add(os.path.realpath(exec_path))
    return sorted(out)


def _interpreter_flags() -> list[str]:
    """-E (no PYTHON* variable) -P (no working-directory module) -B (no bytecode written), and
    -s (no user site) unless proctor is installed there."""
    import site

    import proctor

    flags = ["-E", "-P", "-B"]  # -B: it writes no bytecode where the worker's domain denies it
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if not user or not os.path.realpath(proctor.__file__).startswith(os.path.realpath(user) + os.sep):
        flags.append("-s")
    return flags


KEPT_GIT_KEYS = ("user.name", "user.email", "safe.directory")


def person_git_config() -> list[tuple[str, str]]:
    """The person's global and system git config a brokered command still needs (who commits,
    which directories are trusted), read when the broker starts, before the worker runs: the
    rest of it, which the worker may have rewritten by then, is not read."""
    import subprocess

    kept: list[tuple[str, str]] = []
    for key in KEPT_GIT_KEYS:
        try:
            out = subprocess.run(
                ["git", "config", "--get-all", key], capture_output=True, text=True, timeout=10, cwd="/"
            )
        except (OSError, subprocess.SubprocessError):
            continue
        kept.extend((key, value) for value in out.stdout.splitlines() if value)
    return kept


def command_word(argv: list[str]) -> str | None:
    """The command group `argv` runs (its first word that is no option)."""
    return next((word for word in argv if not word.startswith("-")), None)


class Broker:
    """Serves one attempt: `boxed` (runs.Sandboxed) is the domain its commands run in, `env`
    the environment they start from, `allowed(pid)` whether a peer is the attempt's."""

    def __init__(self, path: str, job_id: str, root: str, boxed, env: dict, allowed) -> None:
        self.path, self.job_id, self.root, self.boxed = path, job_id, os.path.realpath(root), boxed
        self.base, self.allowed = env, allowed
        self.flags = _interpreter_flags()
        from proctor.vcs import git

        self.git_kept = git.PERSON_CONFIG if git.PERSON_CONFIG is not None else person_git_config()
        self._sock: socket.socket | None = None
        self._children: set = set()
        self._threads: list = []
        self._closing = False
        self.served = 0
        self.pids: set[int] = set()
        self.refused: list[str] = []

    def start(self) -> "Broker":
        import socket
        import threading

        os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        try:
            os.unlink(self.path)  # a socket an earlier attempt left (the directory is proctor's alone)
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        _address(sock, self.path, bind=True)
        os.chmod(self.path, 0o600)
        sock.listen(64)
        self._sock = sock
        SERVING[self.job_id] = self.path
        thread = threading.Thread(target=self._accept, name="proctor-broker", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def _accept(self) -> None:
        import threading

        sock = self._sock
        assert sock is not None  # start() sets it before it starts this thread, and nothing clears it
        while not self._closing:
            try:
                conn, _ = sock.accept()
            except OSError:
                return  # closed
            thread = threading.Thread(target=self._serve, args=(conn,), name="proctor-broker-command", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, conn) -> None:
        import socket

        fds: list[int] = []
        try:
            pid, uid, _ = struct.unpack(
                "3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            )
            if uid != os.getuid() or not self.allowed(pid):
                # asked before a byte is read: a process outside the attempt holds no thread
                self.refused.append(f"process {pid} is not of the attempt")
                try:
                    conn.sendall(struct.pack("!i", NOT_SERVED))
                except OSError:
                    pass
                return
            conn.settimeout(30)  # the request follows its connection at once
            head, fds, _, _ = socket.recv_fds(conn, 4, 3)
            if len(head) != 4 or len(fds) != 3:
                return
            length = struct.unpack("!I", head)[0]
            if length > MAX_REQUEST:
                return
            data = b""
            while len(data) < length:
                chunk = conn.recv(min(1 << 16, length - len(data)))
                if not chunk:
                    return
                data += chunk
            conn.settimeout(None)
            status = self._run(pid, uid, data, fds, conn)
            try:
                conn.sendall(struct.pack("!i", status))
            except OSError:
                pass
        except Exception:  # noqa: BLE001 - a malformed request ends its connection, never the broker
            pass
        finally:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
            conn.close()

    def _refuse(self, stderr_fd: int, message: str) -> int:
        self.refused.append(message)
        try:
            os.write(stderr_fd, f"proctor: {message}\n".encode("utf-8", "replace"))
        except OSError:
            pass
        return 2

    def _run(self, pid: int, uid: int, data: bytes, fds: list[int], conn) -> int:
        import json

        if uid != os.getuid() or not self.allowed(pid):
            return self._refuse(
                fds[2],
                f"process {pid} is not of the attempt this broker serves ({self.job_id}); "
                f"it runs only the commands of that job's worker",
            )
        try:
            request = json.loads(data.decode("utf-8", "surrogateescape"))
            argv, cwd, client = request["argv"], request["cwd"], request["env"]
            if not (
                isinstance(argv, list)
                and all(isinstance(a, str) and "\0" not in a for a in argv)
                and isinstance(cwd, str)
                and "\0" not in cwd
                and isinstance(client, dict)
                and all(
                    isinstance(k, str) and isinstance(v, str) and "\0" not in k + v and "=" not in k
                    for k, v in client.items()
                )
            ):
                raise ValueError("malformed")
        except (ValueError, KeyError, TypeError, RecursionError):
            return self._refuse(fds[2], "the broker could not read the command it was handed")
        real = os.path.realpath(cwd)
        if not (real == self.root or real.startswith(self.root + os.sep)) or not os.path.isdir(real):
            return self._refuse(fds[2], f"a worker's proctor runs in its own checkout ({self.root}), not {cwd}")
        return self._spawn(argv, real, self.env_for(client), fds, conn)

    def env_for(self, client: dict) -> dict:
        """The command's environment: the worker's as proctor made it, the worker's variables
        that say what it judges, the job pinned, and the worker's own for its targets."""
        import json

        from proctor.jobrecord import BAGGAGE_KEY

        env = dict(self.base)
        for key, value in client.items():
            if key not in env and (key in PASS or key.startswith(PASS_PREFIXES)):
                env[key] = value
        # the worker's BAGGAGE is never merged (a member it encodes could decode to another job):
        # the command's is the one proctor started the worker with, naming its job alone
        env["BAGGAGE"] = f"{BAGGAGE_KEY}={self.job_id}"
        # git reads no config of the person's (a filter or attributes file the worker planted in
        # ~/.gitconfig would run with the store writable): the repository's own, which the
        # worker's domain denies it, is what a command needs
        env["GIT_CONFIG_GLOBAL"] = os.devnull
        env["GIT_CONFIG_NOSYSTEM"] = "1"
        count = int(env.get("GIT_CONFIG_COUNT") or 0) if (env.get("GIT_CONFIG_COUNT") or "0").isdigit() else 0
        for key, value in self.git_kept:  # the person's name and trusted directories, read before the worker ran
            env[f"GIT_CONFIG_KEY_{count}"], env[f"GIT_CONFIG_VALUE_{count}"] = key, value
            count += 1
        if count:
            env["GIT_CONFIG_COUNT"] = str(count)
        env.pop(ENV, None)
        env[BROKERED] = self.job_id
        env[CLIENT_ENV] = json.dumps(client)
        return self.boxed.env(env)

    def _spawn(self, argv: list[str], cwd: str, env: dict, fds: list[int], conn) -> int:
        import select
        import socket
        import subprocess

        from proctor.process import child_setup, kill_group

        setup = child_setup(None)

        def preexec() -> None:
            setup()
            self.boxed.preexec()

        try:
            child = subprocess.Popen(
                [sys.executable, *self.flags, "-m", "proctor", *argv],
                cwd=cwd,
                env=env,
                stdin=fds[0],
                stdout=fds[1],
                stderr=fds[2],
                start_new_session=True,
                preexec_fn=preexec,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return self._refuse(fds[2], f"the broker could not start the command in the worker's sandbox ({exc})")
        self.served += 1
        self.pids.add(child.pid)  # whose domains the kernel's denials name
        self._children.add(child)
        try:
            exited = os.pidfd_open(child.pid)  # readable when the child exits: no polling interval
        except OSError:
            exited = None
        try:
            for fd in fds:  # the child holds them now: the worker's end sees EOF when it exits
                os.close(fd)
            fds.clear()
            while child.poll() is None:
                # the worker's proctor gone (its host timed the hook out, the attempt stopped):
                # its command goes with it
                ready, _, _ = select.select(
                    [conn] + ([exited] if exited is not None else []), [], [], 0.5 if exited is not None else 0.05
                )
                if conn in ready and not conn.recv(1, socket.MSG_DONTWAIT):
                    kill_group(child)
                    break
                if self._closing:
                    kill_group(child)
                    break
            code = child.wait()
        finally:
            self._children.discard(child)
            if exited is not None:
                os.close(exited)
        return code if code >= 0 else 128 - code

    def close(self) -> None:
        """Stop serving: no new command; every running one ended with its process group."""
        from proctor.process import kill_group

        self._closing = True
        SERVING.pop(self.job_id, None)
        if self._sock is not None:
            try:
                self._sock.shutdown(2)
            except OSError:
                pass
            self._sock.close()
        for child in list(self._children):
            kill_group(child)
        import time

        deadline = time.monotonic() + 5  # for all of them: a thread still reading gives up on its own
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        try:
            os.unlink(self.path)
        except OSError:
            pass
