"""Errors and refusal codes. The codes proctor says no with are defined here: the PRC family,
the monitors' named codes (MONITOR_*, FOLLOWUP_NOT_FOUND), the server's HTTP doors' codes
(SERVER_LEASED_CALLER, TOO_LARGE, ...) and STORE_BUSY.

Exit codes: 0 success; 1 a status (refused, rejected, failed, every reason
named); 2 proctor could not answer (usage, unreadable input, no usable store).

Every refusal carries a stable code, what was refused, and the remedy. A code is never
reused for another meaning; README.md's "Exit codes and refusals" table lists the PRC codes.
"""

from __future__ import annotations

# Codes taken from the specification.
WRITE_PATH_IS_DIRECTORY = "PRC3018"
CLAIM_UNGRADABLE = "PRC3031"
FILE_SHARED_ACROSS_CHECKOUTS = "PRC3032"
# Codes proctor adds, continuing the family.
WORKSPACE_LOAD_FILE = "PRC3033"
MAX_DEPTH = "PRC3034"
MAX_LIVE = "PRC3035"
NOTHING_TO_GRADE = "PRC3036"
CHECK_UNKNOWN_TARGET = "PRC3037"
CHECK_IS_GATE = "PRC3038"
EMPTY_WRITE_SET = "PRC3039"
HASH_AMBIGUOUS = "PRC3040"
PATH_OUTSIDE_REPO = "PRC3041"
NOT_YOUR_JOB = "PRC3042"
CHILD_EXCEEDS_PARENT = "PRC3043"
BAD_RECORD = "PRC3044"
UNKNOWN_JOB = "PRC3045"
READ_ONLY_WITH_PATHS = "PRC3046"
NOT_LIVE = "PRC3047"
BAD_GOAL = "PRC3048"
LEASE_HELD = "PRC3049"
BAD_JOB_ID = "PRC3050"
UNKNOWN_RUN = "PRC3051"
BLOB_MISSING = "PRC3052"
BAD_ENTRY = "PRC3053"
NOT_FILED = "PRC3054"
EVIDENCE_NOT_THIS_JOB = "PRC3056"  # a cited run that cannot speak for the job
WORKTREE_UNMADE = "PRC3057"  # job exec --worktree could not make the worktree
CHECKPOINT_TAKES_NO_PATH = "PRC3055"
STORE_NOT_EMPTY = "PRC3058"  # store migrate into a store that already holds rows
STORE_MOVE_MISMATCH = "PRC3059"  # store migrate counted a table differently on the two sides
CHECKOUT_ELSEWHERE = "PRC3060"  # a job's checkout is on another machine than the caller's
SANDBOX_UNAVAILABLE = "PRC3061"  # [sandbox] mode = "landlock" on a kernel that offers none
SANDBOX_FAILED = "PRC3062"  # the sandbox could not be built for a run that must have it
DIFF_TAKES_STDIN = "PRC3063"  # proctor diff given a revision: the diff comes on stdin
NOT_A_REVISION = "PRC3064"  # graph diff --rev names no commit
BROKER_REFUSED = "PRC3065"  # a sandboxed worker's command that starts what would write the store
UNKNOWN_COLUMN = "PRC3066"  # job move to a column [board] does not declare

# The monitors' codes (proctor/monitors), named as the monitor spec names them.
MONITOR_UNSANDBOXED_ACK_REQUIRED = "MONITOR_UNSANDBOXED_ACK_REQUIRED"
MONITOR_INTERVAL_INVALID = "MONITOR_INTERVAL_INVALID"
MONITOR_CWD_OUTSIDE_CARD = "MONITOR_CWD_OUTSIDE_CARD"
MONITOR_LIMIT_REACHED = "MONITOR_LIMIT_REACHED"
MONITOR_CARD_INACTIVE = "MONITOR_CARD_INACTIVE"
MONITOR_NOT_FOUND = "MONITOR_NOT_FOUND"
MONITOR_OUT_OF_SCOPE = "MONITOR_OUT_OF_SCOPE"
FOLLOWUP_NOT_FOUND = "FOLLOWUP_NOT_FOUND"
MONITOR_SANDBOXED_JOB = "MONITOR_SANDBOXED_JOB"

# The server's codes (proctor/server): what its HTTP doors answer before, or instead of, a verb.
SERVER_LEASED_CALLER = "SERVER_LEASED_CALLER"  # the token (or a console session) from a process that works a job
TOO_LARGE = "TOO_LARGE"  # a request body over its limit (413)
BODY_TIMEOUT = "BODY_TIMEOUT"  # a request body that did not arrive in time (408)
BAD_JSON = "BAD_JSON"  # a request body that is not a JSON object
BAD_HOST = "BAD_HOST"  # a Host header that does not name this loopback server (421)
CROSS_SITE = "CROSS_SITE"  # a state-changing request from another origin, or not JSON (403)
UNAUTHORIZED = "UNAUTHORIZED"  # no token, console session or job's secret (401)
ROUTE_UNLISTED = "ROUTE_UNLISTED"  # a route the server's table of who may call it does not name (500)
TOO_MANY_STREAMS = "TOO_MANY_STREAMS"  # every event stream slot taken (503)
TOKEN_ONLY = "TOKEN_ONLY"  # a login link asked for by other than the token's holder (403)
BAD_ACTION = "BAD_ACTION"  # a console action the server does not know, or without its job or column
METHOD = "METHOD"  # an /mcp request that is not one POSTed JSON-RPC message (405)

EXIT_OK = 0
EXIT_STATUS = 1
EXIT_CANNOT_ANSWER = 2


class ProctorError(Exception):
    """proctor could not answer: bad usage, unreadable input, an unusable store (exit 2)."""

    exit_code = EXIT_CANNOT_ANSWER

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    def lines(self) -> list[str]:
        prefix = f"{self.code}: " if self.code else ""
        return [prefix + self.message]

    def to_json(self) -> dict:
        return {"error": {"code": self.code, "message": self.message}}


class Refused(ProctorError):
    """A request proctor read and refused (exit 1). Holds every reason, each with its code."""

    exit_code = EXIT_STATUS

    def __init__(self, reasons: list[tuple[str, str]]) -> None:
        if not reasons:
            raise ValueError("a refusal needs at least one reason")
        self.reasons = reasons
        code, message = reasons[0]
        super().__init__(message, code)

    def lines(self) -> list[str]:
        return [f"{code}: {message}" for code, message in self.reasons]

    def to_json(self) -> dict:
        return {
            "error": {"code": self.code, "message": self.message},
            "refusals": [{"code": c, "message": m} for c, m in self.reasons],
        }


class StoreError(ProctorError):
    """The store cannot be used: locked, corrupt, or written by a newer proctor (exit 2)."""


STORE_BUSY = "STORE_BUSY"  # the server's answer (the API's 503, the MCP door's tool error)


def busy(exc: StoreError) -> ProctorError | None:
    """A store another process held past the wait, as the server answers it: busy, not broken."""
    if "locked" in exc.message:
        return ProctorError(f"the store is busy: {exc.message}", STORE_BUSY)
    return None
