"""The worker runner's parts, each alone: the line framer (workers/framer.py), the stops and the
outcome table (workers/stops.py), and the process toolkit's spawn and sweep (process.py)."""

from __future__ import annotations

import os
import time

import pytest

from proctor import process
from proctor.workers import framer, stops
from proctor.workers.executors import Event
from proctor.workers.runner import Attempt, Limits

# -- the framer --------------------------------------------------------------------------------


class Every:
    """A parser fed every line."""

    def __init__(self) -> None:
        self.fed: list[str] = []

    def feed(self, line: str) -> list:
        self.fed.append(line)
        return [Event("step", text=line)]


class Tail(Every):
    TAIL = 2


class Relevant(Every):
    RELEVANT = (b"hit",)

    def __init__(self) -> None:
        super().__init__()
        self.skimmed: list[bytes] = []

    def skim(self, data: bytes, start: int, end: int) -> None:
        self.skimmed.append(data[start:end])


def framed(parser, reads: list[bytes]) -> tuple[Attempt, list[bool], list]:
    attempt = Attempt(started=0)
    handled: list = []
    lines = framer.Framer(parser, attempt, handled.extend)
    completed = [lines.chunk(read) for read in reads]
    lines.finish()
    return attempt, completed, handled


def test_a_line_split_across_reads_is_fed_once_whole_and_the_last_partial_line_at_the_end():
    parser = Every()
    attempt, completed, handled = framed(parser, [b'{"a"', b':1}\n{"b"', b":2}\nlast"])
    assert parser.fed == ['{"a":1}', '{"b":2}', "last"]
    assert completed == [False, True, True]  # only a whole line counts as output
    assert attempt.lines == 3 and attempt.last_line == "last"
    assert [event.text for event in handled] == parser.fed  # the parser's events are handed on


def test_crlf_lines_are_counted_and_fed_with_their_carriage_return():
    parser = Every()
    attempt, _completed, _handled = framed(parser, [b"one\r\ntwo\r\n"])
    assert parser.fed == ["one\r", "two\r"]
    assert attempt.lines == 2 and attempt.last_line == "two\r"


def test_a_line_longer_than_a_read_is_held_until_its_newline():
    parser = Every()
    long = b"x" * 25
    reads = [long[i : i + 10] for i in range(0, len(long), 10)] + [b"\nnext\n"]
    attempt, completed, _handled = framed(parser, reads)
    assert completed == [False, False, False, True]
    assert parser.fed == ["x" * 25, "next"]
    assert attempt.lines == 2 and attempt.last_line == "next"


def test_a_line_past_max_line_is_cut_and_counted(monkeypatch):
    monkeypatch.setattr(framer, "MAX_LINE", 8)
    parser = Every()
    attempt, completed, _handled = framed(parser, [b"0123456", b"789ab", b"c\n"])
    assert completed == [False, True, True]
    assert parser.fed == ["0123456789ab", "c"]  # what follows the cut is the next line
    assert attempt.lines == 2


def test_tail_feeds_only_the_last_lines_of_each_read():
    parser = Tail()
    attempt, _completed, _handled = framed(parser, [b"1\n2\n3\n4\n5\n", b"6\n"])
    assert parser.fed == ["4", "5", "6"]
    assert attempt.lines == 6 and attempt.last_line == "6"


@pytest.mark.parametrize("padding", [0, 5000])  # short reads: Python's find; long ones: libc's
def test_relevant_feeds_the_marked_lines_and_skims_the_rest(padding):
    parser = Relevant()
    filler = b"f" * padding
    data = b"a" + filler + b"\nhit one\nb\nc\nhit two\nd\n"
    attempt, _completed, _handled = framed(parser, [data])
    assert parser.fed == ["hit one", "hit two"]
    assert parser.skimmed == [b"a" + filler + b"\n", b"b\nc\n", b"d\n"]
    assert attempt.lines == 6 and attempt.last_line == "d"


def test_relevant_with_no_marker_in_a_read_skims_it_whole():
    parser = Relevant()
    attempt, _completed, _handled = framed(parser, [b"a\nb\n"])
    assert parser.fed == [] and parser.skimmed == [b"a\nb\n"]
    assert attempt.lines == 2


# -- the stops, on a fake clock ----------------------------------------------------------------

GRACES = stops.Graces(fatal=20.0, spend_floor=5.0)


def clock(**state) -> stops.Clock:
    return stops.Clock(**{"started": 100.0, "last_output": 100.0, **state})


def test_idle_fires_at_the_limit_after_the_last_output_and_not_after_the_final_reply():
    limits = Limits(idle=60, grace=30)
    assert stops.due(clock(last_output=130.0), limits, GRACES) == (190.0, "idle")
    after_final = clock(final_at=150.0, idle_applies=False)
    assert stops.idle(after_final, limits, GRACES) is None
    assert stops.due(after_final, limits, GRACES) == (180.0, "grace")


def test_a_step_after_the_final_reply_hands_back_to_the_idle_clock():
    limits = Limits(idle=60, grace=5)
    carried_on = clock(last_output=150.0)  # final_at cleared, idle_applies again
    assert stops.due(carried_on, limits, GRACES) == (210.0, "idle")


def test_the_wall_clock_fires_from_the_start_whatever_the_output():
    limits = Limits(idle=600, grace=30, wall=120)
    assert stops.due(clock(last_output=200.0), limits, GRACES) == (220.0, "wall")
    assert stops.wall(clock(), Limits(idle=600, grace=30), GRACES) is None


def test_a_fatal_error_leaves_its_grace():
    limits = Limits(idle=600, grace=30)
    assert stops.due(clock(fatal_at=110.0), limits, GRACES) == (130.0, "fatal")
    assert stops.due(clock(fatal_at=110.0), limits, stops.Graces(fatal=1.0, spend_floor=5.0)) == (111.0, "fatal")


def test_spend_crossed_before_the_final_reply_stops_at_once():
    limits = Limits(idle=600, grace=30, spend=1.0)
    state = clock(spend_crossed=True, spend_before_final=True, final_at=150.0, idle_applies=False)
    assert stops.due(state, limits, GRACES) == (float("-inf"), "spend")
    assert stops.due(clock(spend_crossed=True), limits, GRACES) == (float("-inf"), "spend")
    assert stops.reason("spend", state, limits, GRACES, 1.5, "") == "stopped: spend $1.50 past max_spend_usd $1"


def test_spend_crossed_after_the_final_reply_keeps_the_floor_at_most_the_grace():
    state = clock(spend_crossed=True, final_at=150.0, idle_applies=False)
    assert stops.due(state, Limits(idle=600, grace=30, spend=1.0), GRACES) == (155.0, "spend")
    assert stops.due(state, Limits(idle=600, grace=2, spend=1.0), GRACES) == (
        152.0,
        "grace",
    )  # a tie: grace (relabelled)
    assert (
        stops.reason("spend", state, Limits(idle=600, grace=30, spend=1.0), GRACES, 2.0, "")
        == "stopped: spend $2.00 past max_spend_usd $1, after the final reply"
    )


def test_drained_follows_the_exit_and_ties_go_alphabetically():
    limits = Limits(idle=600, grace=30)
    assert stops.due(clock(exited_at=120.0), limits, GRACES) == (121.0, "drained")
    # the same moment: min over (moment, kind), as the watch always took it
    assert stops.due(clock(last_output=-479.0, exited_at=120.0), limits, GRACES) == (121.0, "drained")
    assert stops.due(clock(final_at=91.0, idle_applies=False, exited_at=120.0), limits, GRACES) == (121.0, "drained")


def test_no_stop_applies_without_a_limit_or_a_moment():
    assert stops.due(clock(idle_applies=False), Limits(idle=60, grace=30), GRACES) is None


def test_the_reasons_say_each_stop():
    limits = Limits(idle=90, grace=2.5, wall=3600)
    assert stops.reason("idle", clock(), limits, GRACES, 0, "") == "stopped: no output for 1.5 minutes"
    assert stops.reason("grace", clock(), limits, GRACES, 0, "") == "stopped: 2.5 s after the final reply"
    assert stops.reason("wall", clock(), limits, GRACES, 0, "") == "stopped: wall clock of 60 minutes"
    assert (
        stops.reason("fatal", clock(), limits, GRACES, 0, "fatal error: boom")
        == "stopped: 20 s after a fatal error (fatal error: boom)"
    )


# -- the outcome table -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stop", "replied", "before", "expected"),
    [
        (None, True, False, ("finished", None, None)),
        (None, False, False, ("aborted", None, None)),
        ("grace", True, False, ("finished", True, None)),
        ("spend", True, False, ("finished", True, None)),  # after the final reply: counts
        ("spend", True, True, ("aborted", False, None)),  # crossed before it
        ("spend", False, False, ("aborted", False, None)),
        ("idle", False, False, ("aborted", False, True)),
        ("idle", True, False, ("aborted", False, True)),
        ("fatal", False, False, ("aborted", False, True)),
        ("wall", True, False, ("aborted", True, None)),
        ("wall", False, False, ("aborted", True, None)),
    ],
)
def test_each_row_of_the_outcome_table(stop, replied, before, expected):
    assert tuple(stops.row(stop, replied, before)) == expected


def test_the_grace_window_ended_past_the_spend_is_the_spends_stop():
    assert stops.relabel(("grace", "g"), True, 3.0, 1.0) == (
        "spend",
        "stopped: spend $3.00 past max_spend_usd $1, after the final reply",
    )
    assert stops.relabel(("grace", "g"), False, 3.0, 1.0) == ("grace", "g")
    assert stops.relabel(("idle", "i"), True, 3.0, 1.0) == ("idle", "i")


# -- spawn and sweep ---------------------------------------------------------------------------


def _comm_and_state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            raw = handle.read()
    except OSError as exc:
        return f"gone ({exc.strerror})"
    return raw[raw.index("(") : raw.rindex(")") + 3]


def _children(pid: int) -> dict[int, str]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return {int(child): _comm_and_state(int(child)) for child in handle.read().split()}
    except OSError:
        return {}


def test_spawn_tags_and_sweep_ends_the_group_the_setsid_child_and_the_tag(tmp_path):
    tag = ("PROCTOR_TEST_PARTS_TAG", f"t{os.getpid()}-{time.monotonic_ns()}")
    script = "setsid sleep 60 </dev/null >/dev/null 2>&1 & sleep 60 & echo started; wait"
    proc, group = process.spawn(
        ["/bin/sh", "-c", script], str(tmp_path), dict(os.environ), tag, f"proctor-test-{tag[1]}"
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == b"started\n"
    # the shell, its sleep, the setsid'd sleep; a generous bound: a process half-way through its
    # exec reads with an empty environment, and a loaded machine can hold it there for seconds
    deadline = time.monotonic() + 30
    while len(process.tagged(*tag)) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    seen = {pid: _comm_and_state(pid) for pid in process.tagged(*tag)}
    assert len(seen) >= 3, f"tagged: {seen}; the shell's children: {_children(proc.pid)}"
    stopped: list[bool] = []
    tree = process.Tree(proc.pid)
    process.sweep(proc, tree, tag, group, 0.2, on_stop=lambda: stopped.append(True))
    assert stopped == [True]  # it was running: stopped, not only reaped
    assert proc.returncode is not None
    assert process.tagged(*tag) == []
    if group is not None:
        assert not os.path.isdir(group.path)
    proc.stdout.close()
    proc.stderr.close()


def test_spawn_leaves_no_cgroup_behind_when_it_cannot_start(tmp_path):
    tag = ("PROCTOR_TEST_PARTS_TAG", f"f{os.getpid()}-{time.monotonic_ns()}")
    name = f"proctor-test-{tag[1]}"
    with pytest.raises(OSError):
        process.spawn([str(tmp_path / "missing")], str(tmp_path), dict(os.environ), tag, name)
    home = process.cgroup_home()
    if home is not None:
        assert not os.path.isdir(os.path.join(home[1], name))
