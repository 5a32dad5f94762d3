"""The guard's shell reading: writes found by parsing, quoted strings and heredocs are data."""

from __future__ import annotations

import os

import pytest

from proctor.guard.shell import is_read_only, parse, writes


@pytest.mark.parametrize("script, expected", [
    ("echo hi > out.txt", ["/r/out.txt"]),
    ("echo hi >> log 2> err.txt", ["/r/log", "/r/err.txt"]),
    ("echo 'rm -rf /; > x'", []),
    ('echo "quoted > not a redirect"', []),
    ("cat <<'EOF' > gen.py\nrm -rf important\n> notreal\nEOF\necho done", ["/r/gen.py"]),
    ("cat <<-EOF\n\trm x\n\tEOF\n", []),
    ("FOO=1 env BAR=2 sudo -u root nice -n 5 tee -a log.txt other.txt < in", ["/r/log.txt", "/r/other.txt"]),
    ("cp a.py b.py dest/", ["/r/dest/a.py", "/r/dest/b.py"]),
    ("mv old.py new.py", ["/r/new.py", "/r/old.py"]),
    ("cp -t out a b", ["/r/out/a", "/r/out/b"]),
    ("sed -i 's/a/b/' src/x.py src/y.py", ["/r/src/x.py", "/r/src/y.py"]),
    ("sed -i.bak -e s/a/b/ f", ["/r/f"]),
    ("sed 's/a/b/' src/x.py", []),
    ("perl -pi -e 's/x/y/' f.txt", ["/r/f.txt"]),
    ("git checkout -- src/a.py src/b.py", ["/r/src/a.py", "/r/src/b.py"]),
    ("git checkout main", []),
    ("git restore src/a.py", ["/r/src/a.py"]),
    ("git rm -q old.py", ["/r/old.py"]),
    ("bash -c 'touch made.txt && rm gone.txt'", ["/r/made.txt", "/r/gone.txt"]),
    ("sh -ec 'echo x > inner'", ["/r/inner"]),
    ("eval 'echo x > evaled'", ["/r/evaled"]),
    ("cd sub && echo x >> file.log", ["/r/sub/file.log"]),
    ("echo $(touch inner.txt) ok", ["/r/inner.txt"]),
    ("echo `touch tick.txt`", ["/r/tick.txt"]),
    ("timeout 10 dd if=/dev/zero of=disk.img bs=1M count=1", ["/r/disk.img"]),
    ("ls -la | grep foo > /dev/null 2>&1", []),
    ("(cd /tmp && touch t)", ["/tmp/t"]),
    ("chmod +x script.sh", ["/r/script.sh"]),
    ("mkdir -p a/b && touch a/b/c", ["/r/a/b", "/r/a/b/c"]),
    ("rm -rf -- -weird", ["/r/-weird"]),
    ("truncate -s 0 big.log", ["/r/big.log"]),
    ("xargs rm < list", []),
    ("npm test &", []),
    ("# just a comment > x", []),
    ("echo a\\\n > cont.txt", ["/r/cont.txt"]),
    ("printf '%s' x 1>out1", ["/r/out1"]),
    ("cmd &> both.log", ["/r/both.log"]),
])
def test_writes(script, expected):
    assert writes(script, "/r").paths == expected


def test_unknown_writes_are_reported():
    found = writes("rm -rf $DIR/build; for f in a b; do touch $f; done", "/r")
    assert found.paths == [] and len(found.unknown) == 2


def test_unparseable_shell_is_unknown_not_a_crash():
    found = writes("echo 'unterminated", "/r")
    assert found.paths == [] and found.unknown


def test_heredoc_bodies_are_kept_as_data():
    found = writes("proctor job fork --stdin <<'EOF'\n{\"id\": \"x\", \"parent\": \"p\"}\nEOF", "/r")
    assert found.heredocs == ['{"id": "x", "parent": "p"}']
    assert found.commands == [["proctor", "job", "fork", "--stdin"]]


def test_copy_into_existing_directory(tmp_path):
    (tmp_path / "dest").mkdir()
    assert writes("cp a.txt dest", str(tmp_path)).paths == [os.path.join(str(tmp_path), "dest", "a.txt")]


def test_reads():
    assert is_read_only("cat a | grep b | wc -l", "/r")
    assert not is_read_only("cat a > b", "/r")
    assert not is_read_only("rm $X", "/r")


def test_parse_commands():
    commands, nested = parse("A=1 ls -l && echo $(date) | tee x &")
    assert [c.argv for c in commands] == [["A=1", "ls", "-l"], ["echo", "$(date)"], ["tee", "x"]]
    assert commands[-1].background and nested == ["date"]


@pytest.mark.parametrize("script, expected", [
    ("echo x >& src/b.py", ["/r/src/b.py"]),
    ("echo x 2>&1", []),
    ("bash <<'EOF'\necho x > src/b.py\nEOF", ["/r/src/b.py"]),
    ("timeout -s KILL 60 rm gone", ["/r/gone"]),
    ("env -u FOO rm x", ["/r/x"]),
    ("ionice -c 3 rm y", ["/r/y"]),
    ("flock /tmp/l tee src/b.py", ["/r/src/b.py"]),
    ("git checkout HEAD src/b.py", ["/r/src/b.py"]),
    ("git -C src checkout -- a.py", ["/r/src/a.py"]),
    ("(cd src); echo x > a.py", ["/r/a.py"]),
    ("(cd src && echo x > a.py)", ["/r/src/a.py"]),
    ("pushd src && touch p.txt && popd && touch q.txt", ["/r/src/p.txt", "/r/q.txt"]),
    ("cp -rt src a b", ["/r/src/a", "/r/src/b"]),
    ("apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: src/b.py\n@@\n-x\n+y\n*** End Patch\nEOF", ["/r/src/b.py"]),
    ("git checkout -b feature", []),
    ("git stash list", []),
    ("git reset HEAD~1", []),
])
def test_writes_the_review_found(script, expected):
    assert writes(script, "/r").paths == expected


@pytest.mark.parametrize("script", [
    "echo 'rm src/b.py' | sh",
    "c=rm; $c src/b.py",
    'sh -c "$X"',
    "echo src/b.py | xargs rm",
    "xargs rm < list",
    "find . -name b.py -delete",
    "git reset --hard",
    "git stash",
    "git checkout main",
    "git apply fix.patch",
    "D=src; cd $D && echo x > a.py",
    "eval \"$CMD\"",
])
def test_writes_proctor_cannot_name_are_unknown(script):
    assert writes(script, "/r").unknown, script
