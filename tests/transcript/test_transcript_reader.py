"""The incremental transcript reader knows no host: driven here by a made-up JSON Lines format
whose lines mean only "count me", over real files that grow, are replaced and are written half
a line at a time, it folds each line once, and only once the line is complete."""

from __future__ import annotations

import json
import os

import pytest

from proctor.transcript import incremental


class Tally:
    """The toy's state: the `n` of every line folded, in order."""

    def __init__(self) -> None:
        self.seen: list[int] = []
        self.answers: dict[str, str | None] = {}


@pytest.fixture
def toy():
    """A toy meaning, and the `n` of each line its apply saw (reset by taking it)."""
    applied: list[int] = []

    def apply(state: Tally, line: dict, before) -> None:
        applied.append(line["n"])
        state.seen.append(line["n"])
        if "answers" in line:  # look back for the line that asked, as a host finds a call
            asked = before((b'"asks":"' + line["answers"].encode() + b'"',))
            state.answers[line["answers"]] = asked["word"] if asked else None

    def restore(data: dict) -> Tally | None:
        seen = data.get("seen")
        if not (isinstance(seen, list) and all(type(n) is int for n in seen)):
            return None
        tally = Tally()
        tally.seen = seen
        tally.answers = dict(data.get("answers") or {})
        return tally

    meaning = incremental.Meaning(
        name="toy",
        version=1,
        new=Tally,
        dump=lambda state: {"seen": state.seen, "answers": state.answers},
        restore=restore,
        apply=apply,
    )

    def take() -> list[int]:
        taken = applied[:]
        applied.clear()
        return taken

    return meaning, take


def lines(*numbers: int, word: str = "w") -> bytes:
    """Lines of the toy format, each over 200 bytes: three fill the file's head (HEAD_BYTES),
    which the checkpoint's digest covers, so a file shorter than that is read again whole."""
    return b"".join(json.dumps({"n": n, "word": f"{word}{n}", "pad": "." * 200}).encode() + b"\n" for n in numbers)


def read(path, checkpoints, meaning) -> Tally:
    return incremental.read(str(path), str(checkpoints), meaning, 4096)


def test_a_second_read_folds_only_the_lines_appended(tmp_path, toy):
    meaning, applied = toy
    path, checkpoints = tmp_path / "made-up.jsonl", tmp_path / "cache"
    path.write_bytes(lines(1, 2, 3))
    assert read(path, checkpoints, meaning).seen == [1, 2, 3]
    assert applied() == [1, 2, 3]
    [saved] = os.listdir(checkpoints)
    assert saved.startswith("toy-"), "the meaning names its checkpoints"
    with open(path, "ab") as handle:
        handle.write(lines(4, 5))
    assert read(path, checkpoints, meaning).seen == [1, 2, 3, 4, 5], "resumed from the checkpoint"
    assert applied() == [4, 5], "only the appended lines are folded"
    assert read(path, checkpoints, meaning).seen == [1, 2, 3, 4, 5]
    assert applied() == [], "nothing new, nothing folded"
    assert incremental.read(str(path), None, meaning, 4096).seen == [1, 2, 3, 4, 5], "no checkpoint: all"
    assert applied() == [1, 2, 3, 4, 5]


def test_a_replaced_or_truncated_file_is_read_from_the_start(tmp_path, toy):
    meaning, applied = toy
    path, checkpoints = tmp_path / "made-up.jsonl", tmp_path / "cache"
    path.write_bytes(lines(1, 2, 3))
    read(path, checkpoints, meaning)
    applied()
    # the same file (inode), longer, but its head rewritten: the checkpoint is not trusted
    inode = os.stat(path).st_ino
    with open(path, "r+b") as handle:
        handle.write(lines(7, 8, 9, 10, word="x"))
    assert os.stat(path).st_ino == inode
    assert read(path, checkpoints, meaning).seen == [7, 8, 9, 10]
    assert applied() == [7, 8, 9, 10], "read again from the start, into a new state"
    # truncated under the checkpoint, then written on
    os.truncate(path, len(lines(7)))
    with open(path, "ab") as handle:
        handle.write(lines(11, word="x"))
    assert read(path, checkpoints, meaning).seen == [7, 11]
    assert applied() == [7, 11]
    # another file moved in at the path
    other = tmp_path / "other.jsonl"
    other.write_bytes(lines(7, 12, word="x"))
    os.replace(other, path)
    assert read(path, checkpoints, meaning).seen == [7, 12]
    assert applied() == [7, 12]


def test_a_half_written_last_line_waits_until_it_ends(tmp_path, toy):
    meaning, applied = toy
    path, checkpoints = tmp_path / "made-up.jsonl", tmp_path / "cache"
    path.write_bytes(lines(1, 2, 3))
    last = lines(4)
    with open(path, "ab") as handle:
        handle.write(last[:5])
    assert read(path, checkpoints, meaning).seen == [1, 2, 3]
    assert applied() == [1, 2, 3], "the half line is not applied"
    with open(path, "ab") as handle:
        handle.write(last[5:-1])  # all of it but its newline
    assert read(path, checkpoints, meaning).seen == [1, 2, 3]
    assert applied() == []
    with open(path, "ab") as handle:
        handle.write(b"\n" + lines(5)[:3])
    assert read(path, checkpoints, meaning).seen == [1, 2, 3, 4]
    assert applied() == [4], "applied once, whole, once it ended"
    with open(path, "ab") as handle:
        handle.write(lines(5)[3:])
    assert read(path, checkpoints, meaning).seen == [1, 2, 3, 4, 5]
    assert applied() == [5]


def test_a_line_looks_back_across_reads(tmp_path, toy):
    """`before` finds an earlier line, in the bytes of this read or in the file before them."""
    meaning, applied = toy
    path, checkpoints = tmp_path / "made-up.jsonl", tmp_path / "cache"
    path.write_bytes(b'{"n": 1, "asks":"q1", "word": "why"}\n' + lines(2, 3, 4))
    read(path, checkpoints, meaning)
    with open(path, "ab") as handle:
        handle.write(b'{"n": 5, "answers": "q1"}\n{"n": 6, "answers": "q2"}\n')
    state = read(path, checkpoints, meaning)
    assert applied() == [1, 2, 3, 4, 5, 6]
    assert state.answers == {"q1": "why", "q2": None}
