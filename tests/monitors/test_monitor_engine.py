"""The monitor engine without a server: follow-ups exact to the byte (32 KiB and 100 events as
delivered, header and prefixes included, no U+FFFD made by a cut), what waits for an agent
bounded with the drop said, a run's lines cut between characters, its caps and stderr kept as
head and tail, retention, the [monitors] settings, a command's clean environment, and a
monitor loop that survives a spawn failing with EMFILE (a real scheduler on a real store)."""

from __future__ import annotations

import asyncio
import errno
import os
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from proctor.monitors import retention, run
from proctor.store import Store, followups
from proctor.timeutil import iso, now

HEADER = re.compile(r"^Follow-up (\d+) from the monitors of job (\S+) \((\d+) events?\):$")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    made = Store(str(tmp_path_factory.mktemp("engine-store")))
    yield made
    made.close()


def _reset(store: Store, description: str = "ci") -> None:
    with store.write() as conn:
        for table in ("monitor_events", "followups", "monitor_runs", "monitors"):
            conn.execute(f"DELETE FROM {table}")
        conn.execute(
            "INSERT INTO monitors (id, job, command, interval, description, cwd, created, created_by) "
            "VALUES (1, 'j/k', 'x', 10, ?, '/', ?, 't')",
            (description, iso(now())),
        )


def _insert(store: Store, lines: list[str], job: str = "j/k") -> None:
    with store.write() as conn:
        conn.executemany(
            "INSERT INTO monitor_events (monitor, run, job, time, line, truncated) VALUES (1, 1, ?, ?, ?, 0)",
            [(job, iso(now()), line) for line in lines],
        )


def _followups(store: Store, job: str = "j/k") -> list[tuple]:
    with store.read() as conn:
        return conn.execute(
            "SELECT id, text, events, bytes FROM followups WHERE job = ? ORDER BY id", (job,)
        ).fetchall()


def _check(rows: list[tuple], job: str = "j/k", fffd_allowed: bool = False) -> None:
    for followup, text, events, size in rows:
        raw = text.encode("utf-8")
        assert len(raw) <= followups.MAX_BYTES, (followup, len(raw))
        assert size == len(raw), "bytes is the text's UTF-8 length"
        assert 1 <= events <= followups.MAX_EVENTS
        lines = text.split("\n")
        head = HEADER.match(lines[0])
        assert head and int(head.group(1)) == followup and head.group(2) == job and int(head.group(3)) == events
        body = [line for line in lines[1:] if not line.startswith("[proctor: ")]
        assert len(body) == events and all(line.startswith("[") and "(monitor 1): " in line for line in body)
        assert fffd_allowed or "\ufffd" not in text


# -- follow-ups, exact ---------------------------------------------------------------------------

# single characters of 1 to 4 UTF-8 bytes, so that a cut anywhere would split one
CHARS = st.sampled_from(["a", "Z", " ", "é", "ß", "€", "中", "😀", "𝄞", "\t", "\r"])
LINES = st.one_of(
    st.text(CHARS, max_size=40),
    st.builds(lambda c, n: c * n, CHARS, st.integers(0, 6000)),  # up to 24 KiB of one character
    st.builds(lambda c, n: c * n + run.LINE_MARKER, CHARS, st.integers(4000, 16384)),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(
    lines=st.lists(LINES, min_size=1, max_size=260),
    description=st.one_of(st.just("ci"), st.builds(lambda c, n: c * n, CHARS, st.integers(0, 3000))),
)
def test_followups_are_exact_to_the_byte(store, lines, description):
    _reset(store, description)
    _insert(store, lines)
    with store.write() as conn:
        made = followups.batch(conn, "j/k", waiting=None)
    rows = _followups(store)
    assert [r[0] for r in rows] == made and sum(r[2] for r in rows) == len(lines), "every event, once, in order"
    _check(rows)
    with store.read() as conn:
        order = [r[0] for r in conn.execute("SELECT followup FROM monitor_events ORDER BY id")]
    assert order == sorted(order), "events keep their order across follow-ups"
    for _id, text, _events, _size in rows:
        for line in text.split("\n")[1:]:
            if line.endswith(followups.CUT_MARKER):
                assert len(text.encode()) > followups.MAX_BYTES - 2 * 16384, "cut only when it could not fit"


def test_a_description_is_capped_and_an_oversized_event_cut_with_a_marker(store):
    _reset(store, "é" * 5000)
    _insert(store, ["😀" * 16384 + run.LINE_MARKER, "small"])  # 64 KiB of a 4-byte character
    with store.write() as conn:
        followups.batch(conn, "j/k", waiting=None)
    rows = _followups(store)
    _check(rows)
    first = rows[0][1].split("\n")[1]
    assert first.endswith(followups.CUT_MARKER) and ("é" * 199 + "…") in first and "é" * 201 not in first
    assert [r[2] for r in rows] == [1, 1]


def test_the_old_grouping_still_holds(store):
    """250 short lines and three of 20,000 bytes: 100, 100, 51, 1, 1 (the old cap test, on the
    real schema)."""
    _reset(store)
    _insert(store, [f"line {n}" for n in range(250)] + ["b" * 20000] * 3)
    with store.write() as conn:
        made = followups.batch(conn, "j/k")
    rows = _followups(store)
    assert [r[2] for r in rows] == [100, 100, 51, 1, 1] and len(made) == 5
    _check(rows)


def test_what_waits_is_bounded_and_the_drop_is_said(store):
    _reset(store)
    _insert(store, [f"early {n}" for n in range(2500)])  # 25 follow-ups' worth
    with store.write() as conn:
        made = followups.batch(conn, "j/k", waiting=10)
    rows = _followups(store)
    assert len(rows) == 10 and made == [r[0] for r in rows]
    assert "early 1500" in rows[0][1].split("\n")[2], "the newest 1,000 are kept"
    note = rows[0][1].split("\n")[1]
    assert note == followups.drop_note(1500, 10) and "1,500 older undelivered events" in note
    assert all("[proctor: " not in r[1] for r in rows[1:])
    _check(rows)
    with store.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM monitor_events").fetchone()[0] == 1000, "dropped events deleted"

    # the agent takes one (9 wait), 300 more come (12): the 2 oldest go
    with store.write() as conn:
        followups.mark_delivered(conn, rows[0][0], "test")
    _insert(store, [f"late {n}" for n in range(300)])
    with store.write() as conn:
        followups.batch(conn, "j/k", waiting=10)
    with store.read() as conn:
        waiting = conn.execute(
            "SELECT id, text, events, bytes FROM followups WHERE delivered IS NULL ORDER BY id"
        ).fetchall()
    assert len(waiting) == 10
    assert waiting[0][1].split("\n")[1] == followups.drop_note(200, 10), "only what went since the last one taken"
    _check(waiting)

    _insert(store, [f"later {n}" for n in range(200)])  # 12 again: the one with the note and the next go
    with store.write() as conn:
        followups.batch(conn, "j/k", waiting=10)
    with store.read() as conn:
        waiting = conn.execute(
            "SELECT id, text, events, bytes FROM followups WHERE delivered IS NULL ORDER BY id"
        ).fetchall()
    assert waiting[0][1].split("\n")[1] == followups.drop_note(400, 10), "a dropped note's count is carried"
    _check(waiting)


def test_the_note_fits_a_full_follow_up(store):
    _reset(store, "d" * 300)
    _insert(store, ["x" * 16000] * 40)
    with store.write() as conn:
        followups.batch(conn, "j/k", waiting=1)
    rows = _followups(store)
    assert len(rows) == 1 and rows[0][1].split("\n")[1].startswith("[proctor: 38 older")
    _check(rows)
    assert rows[0][3] > followups.MAX_BYTES - followups.NOTE_RESERVE - 16100, "it was full before the note"


def test_next_ready_and_mark_delivered_keep_their_signatures(store):
    _reset(store)
    _insert(store, ["one"])
    with store.write() as conn:
        followups.batch(conn, "j/k")
        ready = followups.next_ready(conn, "j/k")
        assert ready["text"].startswith(f"Follow-up {ready['id']} from the monitors of job j/k (1 event):")
        followups.mark_delivered(conn, ready["id"], "test")
        assert followups.next_ready(conn, "j/k") is None


# -- a run's lines ------------------------------------------------------------------------------


def _feed(data: bytes, step: int) -> tuple[list, run.RunResult]:
    result = run.RunResult("t")
    lines = run.Lines(result)
    out = []
    for start in range(0, len(data), step):
        out += lines.feed(data[start : start + step])
    return out + lines.end(), result


@settings(max_examples=80, deadline=None)
@given(char=CHARS.filter(lambda c: c not in "\r"), count=st.integers(1, 9000), step=st.integers(1, 70000))
def test_a_long_line_is_cut_between_characters(char, count, step):
    data = (char * count).encode() + b"\nafter\n"
    out, result = _feed(data, step)
    assert out[-1] == ("after", False)
    text, cut = out[0]
    assert "\ufffd" not in text
    assert cut == (len(data) - 7 > run.LINE_CAP)
    if cut:
        kept = text[: -len(run.LINE_MARKER)]
        assert text.endswith(run.LINE_MARKER) and run.LINE_CAP - 4 < len(kept.encode()) <= run.LINE_CAP
        assert kept == char * len(kept)
    assert result.lines == 2


def test_invalid_bytes_stay_visible():
    out, _ = _feed(b"bin\x00\xff\xfeary\n", 3)
    assert out == [("bin\x00\ufffd\ufffdary", False)]


def test_the_run_caps_and_their_markers():
    out, result = _feed(b"y\n" * 20000, 65536)
    assert len(out) == run.RUN_LINES + 1 and out[-1] == (run.LINES_MARKER, True)
    assert result.lines == run.RUN_LINES and result.capped and result.bytes == 2 * run.RUN_LINES
    out, result = _feed((b"z" * 1000 + b"\n") * 2000, 1 << 20)
    assert 1000 <= len(out) - 1 <= 1100 and out[-1] == (run.RUN_MARKER, True) and result.bytes >= run.RUN_CAP
    out, result = _feed(b"y\n" * run.RUN_LINES, 4096)
    assert len(out) == run.RUN_LINES and not result.capped, "no marker when nothing came past the cap"


def test_stderr_keeps_its_head_and_tail():
    kept = run._Stderr()
    kept.add(("é" * 3000).encode())
    kept.add(b"m" * 100000)
    kept.add(("€" * 2000).encode() + b"\nthe error at the end\n")
    text = kept.text()
    assert text.startswith("é" * 100) and text.endswith("the error at the end\n") and "\ufffd" not in text
    assert "bytes of stderr left out]" in text and len(text.encode()) < run.STDERR_KEEP + 100
    small = run._Stderr()
    small.add(b"oops\n")
    assert small.text() == "oops\n"


def test_a_monitor_gets_a_clean_environment():
    base = {
        "PATH": "/bin",
        "BAGGAGE": "proctor.lease=x",
        "PROCTOR_NONCE": "s",
        "PROCTOR_LEASE": "x",
        "PROCTOR_WORKER_TAG": "w",
        "PROCTOR_SERVER_DIR": "/d",
        "HOME": "/h",
    }
    env = run.monitor_env(base, 7, "card/a", "tag1")
    assert env == {
        "PATH": "/bin",
        "HOME": "/h",
        "PROCTOR_MONITOR": "7",
        "PROCTOR_MONITOR_JOB": "card/a",
        run.TAG: "tag1",
    }


# -- retention -----------------------------------------------------------------------------------


def test_retention_deletes_the_old_and_caps_the_rest(store, monkeypatch):
    _reset(store)
    old, fresh = iso(now() - 10 * 86400), iso(now())
    with store.write() as conn:
        conn.executemany(
            "INSERT INTO monitor_runs (monitor, started, ended) VALUES (1, ?, ?)",
            [(old, old)] * 5 + [(fresh, fresh)] * 3 + [(fresh, None)],
        )
        conn.executemany(
            "INSERT INTO followups (job, created, text, events, delivered) VALUES ('j/k', ?, 't', 1, ?)",
            [(old, old)] * 4 + [(fresh, fresh)] * 2 + [(fresh, None)],
        )
        conn.executemany(
            "INSERT INTO monitor_events (monitor, run, job, time, line, followup) VALUES (1, 1, ?, ?, 'l', ?)",
            [("j/k", old, 1)] * 6 + [("j/k", old, None)] + [("other", fresh, 2)] * 30,
        )
    deleted = retention.prune(store, keep=7 * 86400)
    assert deleted == {"monitor_events": 6, "monitor_runs": 5, "followups": 4}
    with store.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM monitor_events WHERE followup IS NULL").fetchone()[0] == 1, (
            "an event not yet grouped is never deleted"
        )
        assert conn.execute("SELECT COUNT(*) FROM monitor_runs WHERE ended IS NULL").fetchone()[0] == 1
    monkeypatch.setattr(retention, "KEEP_EVENTS", 10)
    monkeypatch.setattr(retention, "KEEP_RUNS", 2)
    monkeypatch.setattr(retention, "KEEP_FOLLOWUPS", 1)
    deleted = retention.prune(store, keep=7 * 86400)
    with store.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM monitor_events WHERE job = 'other'").fetchone()[0] == 10
        assert conn.execute("SELECT COUNT(*), COUNT(ended) FROM monitor_runs").fetchone() == (2, 1), (
            "the last two, the open one among them"
        )
        assert conn.execute("SELECT COUNT(*) FROM followups WHERE delivered IS NULL").fetchone()[0] == 1
    assert deleted["monitor_events"] == 20


# -- [monitors] in proctor.toml ------------------------------------------------------------------


def test_the_monitors_settings(tmp_path):
    from proctor import config as config_mod

    default = config_mod.parse(b"", str(tmp_path / "proctor.toml"), exists=False)
    assert default["monitors.keep"] == 7 * 86400 and default.settings["monitors.keep"].shown == "7d"
    assert default["monitors.max_waiting"] == 10
    given_ = config_mod.parse(b'[monitors]\nkeep = "36h"\nmax_waiting = 3\n', "p")
    assert given_["monitors.keep"] == 36 * 3600 and given_["monitors.max_waiting"] == 3 and not given_.problems
    bad = config_mod.parse(b'[monitors]\nkeep = "10s"\nmax_waiting = 0\nmystery = 1\n', "p")
    assert bad["monitors.keep"] == 3600 and bad["monitors.max_waiting"] == 1
    assert any("unknown key mystery in [monitors]" in p for p in bad.problems)
    assert any("[monitors] keep" in p and "clamped" in p for p in bad.problems)
    worse = config_mod.parse(b'[monitors]\nkeep = "soon"\n', "p")
    assert worse["monitors.keep"] == 7 * 86400 and "invalid" in worse.problems[0]


def test_config_show_prints_them(repo, proctor):
    shown = proctor("config", "show")
    assert re.search(r"^monitors\.keep\s+7d\s+default$", shown.out, re.M), shown.out
    assert re.search(r"^monitors\.max_waiting\s+10\s+default$", shown.out, re.M)


# -- a monitor loop that survives what its runs meet ------------------------------------------


def test_a_loop_survives_a_spawn_failing_with_emfile(repo, monkeypatch, capfd):
    """A real scheduler on a real store: the first two runs cannot start (EMFILE), each is
    logged and recorded as a failed run, and the third runs."""
    from proctor import api, process
    from proctor.monitors import scheduler as sched, store as mstore
    from proctor.paths import find_checkout, repo_state_dir

    api.fork({"id": "card", "write_paths": ["src/a.py"], "check": "test", "state": "running"}, cwd=repo)
    state_dir = repo_state_dir(find_checkout(repo))
    real_start = run.Run.start
    calls = []

    def failing_start(self):
        calls.append(time.monotonic())
        if len(calls) <= 2:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return real_start(self)

    monkeypatch.setattr(run.Run, "start", failing_start)
    was_subreaper = process.subreaper()

    async def scenario() -> list[tuple]:
        scheduler = sched.Scheduler(state_dir, repo, repo)
        await scheduler.start()
        try:
            with _Opened(state_dir) as conn:
                monitor = mstore.add(
                    conn, scheduler.config(), repo, "card", "echo alive", "10s", None, repo, True, "token"
                )
            scheduler.add(monitor)
            for _ in range(200):
                await asyncio.sleep(0.1)
                with _Opened(state_dir, write=False) as conn:
                    rows_ = conn.execute("SELECT exit_code, error, lines FROM monitor_runs ORDER BY id").fetchall()
                if len(rows_) >= 3 and rows_[2][0] == 0:
                    return rows_
            return rows_
        finally:
            await scheduler.stop()

    try:
        rows_ = asyncio.run(scenario())
    finally:
        process.set_subreaper(was_subreaper)
    assert [r[1] for r in rows_[:2]] == ["could not start the command: Too many open files"] * 2
    assert rows_[2][:3] == (0, None, 1), "the loop went on and the monitor ran"
    assert calls[2] - calls[0] < 8, "after a short backoff, not a full interval"
    err = capfd.readouterr().err
    assert err.count("proctor: monitor 1: could not start the command: Too many open files") == 2


class _Opened:
    def __init__(self, state_dir: str, write: bool = True) -> None:
        self.store, self.write = Store(state_dir), write

    def __enter__(self):
        self.context = self.store.write() if self.write else self.store.read()
        return self.context.__enter__()

    def __exit__(self, *info):
        try:
            return self.context.__exit__(*info)
        finally:
            self.store.close()
