"""A caller's door to the server's monitor API: the job's secret, or the person's token.

With PROCTOR_NONCE (the job's secret, handed to the agent that works the job) a call is
scoped to that job's monitors, runs and follow-ups, whatever job it names; without it, the
server token is used, and it is refused to a caller that works a job: under a lease, or
beneath a process started under one. The CLI's `proctor monitor` and the MCP door's monitor
tools both call through here.
"""

from __future__ import annotations

import os


def call(
    method: str,
    path: str,
    body: dict | None = None,
    orchestrator: bool = False,
    cwd: str | None = None,
    environ: dict | None = None,
) -> dict:
    from proctor import errors
    from proctor.jobs.lease import ORCHESTRATOR, resolve
    from proctor.server import daemon
    from proctor.workspace import Workspace

    env = os.environ if environ is None else environ
    nonce = env.get("PROCTOR_NONCE") or None
    with Workspace(cwd) as ws:
        if nonce is None:
            # an agent manages monitors with its job's secret, scoped to that job; the server
            # token is a person's, and so refused to a caller under a lease, and to one beneath a
            # process that works a job (`env -u` changes only the child's environment)
            with ws.store.read() as conn:
                # `environ`, not `env`: resolve reads os.environ itself when it is None
                caller = resolve(conn, ws.root, ORCHESTRATOR if orchestrator else None, environ)
            if caller.lease:
                raise errors.Refused(
                    [
                        (
                            errors.NOT_YOUR_JOB,
                            f"{caller.whence()}; manage its monitors with the job's secret in PROCTOR_NONCE (proctor job "
                            f"exec prints it){caller.remedy()}",
                        )
                    ]
                )
            daemon.refuse_leased(
                ws,
                orchestrator,
                "use the server token",
                "a process that works a job manages that job's monitors with its secret in "
                "PROCTOR_NONCE (proctor job exec prints it), which scopes it to them",
            )
        return daemon.request(ws, method, path, body, nonce=nonce)
