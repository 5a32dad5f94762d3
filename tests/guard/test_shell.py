"""The guard's shell reading: writes found by parsing, quoted strings and heredocs are data; a
read is only what proctor knows reads; a write it cannot name is unknown, never silent."""

from __future__ import annotations

import os
import random
import subprocess
import time

import pytest

from proctor.guard.shell import ParseError, is_read, parse, writes


@pytest.mark.parametrize(
    "script, expected",
    [
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
        ("sed -i.bak -e s/a/b/ f", ["/r/f", "/r/f.bak"]),
        ("sed 's/a/b/' src/x.py", []),
        ("perl -pi -e 's/x/y/' f.txt", ["/r/f.txt"]),
        ("git checkout -- src/a.py src/b.py", ["/r/src/a.py", "/r/src/b.py"]),
        ("git checkout main", []),
        ("git restore src/a.py", ["/r/src/a.py"]),
        ("git rm -q old.py", ["/r/old.py"]),
        ("bash -c 'touch made.txt && rm gone.txt'", ["/r/made.txt", "/r/gone.txt"]),
        ("sh -ec 'echo x > inner'", ["/r/inner"]),
        ("eval 'echo x > evaled'", ["/r/evaled"]),
        ("cd sub; echo x >> file.log", ["/r/file.log"]),
        ("cd sub && echo x >> file.log", []),
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
    ],
)
def test_writes(script, expected):
    assert writes(script, "/r").paths == expected


def test_unknown_writes_are_reported():
    found = writes("rm -rf $DIR/build; for f in a b; do touch $f; done", "/r")
    assert found.paths == [] and len(found.unknown) == 2


def test_unparseable_shell_is_unknown_not_a_crash():
    found = writes("echo 'unterminated", "/r")
    assert found.paths == [] and found.unknown


def test_heredoc_bodies_are_kept_as_data():
    found = writes('proctor job fork --stdin <<\'EOF\'\n{"id": "x", "parent": "p"}\nEOF', "/r")
    assert found.heredocs == ['{"id": "x", "parent": "p"}']
    assert found.commands == [["proctor", "job", "fork", "--stdin"]]


def test_copy_into_existing_directory(tmp_path):
    (tmp_path / "dest").mkdir()
    assert writes("cp a.txt dest", str(tmp_path)).paths == [os.path.join(str(tmp_path), "dest", "a.txt")]


def test_reads():
    assert is_read("cat a | grep b | wc -l", "/r")
    assert not is_read("cat a > b", "/r")
    assert not is_read("rm $X", "/r")


def test_parse_commands():
    commands, nested = parse("A=1 ls -l && echo $(date) | tee x &")
    assert [c.argv for c in commands] == [["A=1", "ls", "-l"], ["echo", "$(date)"], ["tee", "x"]]
    assert commands[-1].background and nested == ["date"]


@pytest.mark.parametrize(
    "script, expected",
    [
        ("echo x >& src/b.py", ["/r/src/b.py"]),
        ("echo x 2>&1", []),
        ("bash <<'EOF'\necho x > src/b.py\nEOF", ["/r/src/b.py"]),
        ("timeout -s KILL 60 rm gone", ["/r/gone"]),
        ("env -u FOO rm x", ["/r/x"]),
        ("ionice -c 3 rm y", ["/r/y"]),
        ("flock 9 tee src/b.py", ["/r/src/b.py"]),
        ("git checkout HEAD src/b.py", ["/r/src/b.py"]),
        ("git -C src checkout -- a.py", ["/r/src/a.py"]),
        ("(cd src); echo x > a.py", ["/r/a.py"]),
        ("(cd / && echo x > a.py)", ["/a.py"]),
        ("pushd / && touch p.txt && popd && touch q.txt", ["/p.txt", "/r/q.txt"]),
        ("cp -rt src a b", ["/r/src/a", "/r/src/b"]),
        (
            "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: src/b.py\n@@\n-x\n+y\n*** End Patch\nEOF",
            ["/r/src/b.py"],
        ),
        ("git checkout -b feature", []),
        ("git stash list", []),
        ("git reset HEAD~1", []),
    ],
)
def test_writes_the_review_found(script, expected):
    assert writes(script, "/r").paths == expected


@pytest.mark.parametrize(
    "script",
    [
        "cat rm.sh | sh",
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
        'eval "$CMD"',
    ],
)
def test_writes_proctor_cannot_name_are_unknown(script):
    assert writes(script, "/r").unknown, script


# -- 1. a read is something proctor knows reads ------------------------------------------------


@pytest.mark.parametrize(
    "script",
    [
        "ls -la src",
        "cat a | grep b | wc -l",
        "rg -n foo src",
        "head -n 5 f; tail -n 5 f",
        "echo hi",
        "printf '%s' x",
        "pwd",
        "true",
        ":",
        "test -f x && [ -d y ]",
        "stat f",
        "file f",
        "du -sh .",
        "df -h",
        "diff a b",
        "cmp a b",
        "cut -c1-3 f",
        "tr a-z A-Z < f",
        "jq .x f.json",
        "sort f | uniq -c",
        "uniq f",
        "sed -n 1p f",
        "sed 's/a/b/' f",
        "awk '{print $1}' f",
        "awk '$3 > 100 {print}' f",
        "awk '/a|b/ {n++} END {print n}' f",
        "find . -name '*.py'",
        "find src -type f -newer x",
        "find . -exec grep -l foo {} +",
        "git status",
        "git log --oneline -5",
        "git diff HEAD~1",
        "git show HEAD:f",
        "git blame f",
        "git rev-parse HEAD",
        "git ls-files",
        "git grep foo",
        "git branch",
        "git branch -a --contains HEAD",
        "git stash list",
        "git stash show",
        "git remote -v",
        "git config --get user.name",
        "git config --list",
        "git config user.name",
        "git -C src status",
        "git --no-pager log -1",
        "git tag",
        "git tag -l 'v*'",
        "git describe --always",
        "ps aux",
        "which python3",
        "type ls",
        "command -v sed",
        "date",
        "sleep 1",
        "env",
        "printenv PATH",
        "basename /a/b",
        "dirname /a/b",
        "realpath x",
        "readlink -f x",
        "tree src",
        "xxd f",
        "od -c f",
        "sha256sum f",
        "sha256sum -c sums",
        "md5sum f",
        "wc -l < f",
        "echo x > /dev/null 2>&1",
        "ls 2>/dev/null",
        "cat <<'EOF'\nx\nEOF",
        "grep x <<< 'y'",
        "cd src && ls",
        "cd /tmp; pwd",
        "export A=1; echo $A",
        "x=1; y=$((x + 1)); echo $y",
        "for f in *.py; do wc -l $f; done",
        "while read l; do echo $l; done < f",
        "if [ -d x ]; then ls x; fi",
        "case $x in a) echo a;; *) echo b;; esac",
        "[[ a > b ]]",
        "(( 3 > 2 ))",
        "echo $(ls)",
        'echo "$(git status)"',
        "bash -c 'ls; pwd'",
        "sh -c 'cat f'",
        "eval 'echo hi'",
        "bash <<'EOF'\nls\nEOF",
        "xargs grep foo < list",
        "find . -name '*.py' | xargs wc -l",
        "tail -f log &",
        "python3 --version",
        "node --version",
        "yes | head -1",
        "tar -tf a.tar",
        "unzip -l a.zip",
        "gzip -c f > /dev/null",
        "zcat f.gz",
        "source .venv/bin/activate && which python",
        "proctor ls jobs",
        "proctor describe rules",
        "proctor job --help",
        "git diff | cat",
        "f() { ls; }; f",
        "alias ll='ls -l'",
        "set -e",
        "shopt -s globstar",
        "trap 'echo bye' EXIT",
        "wait",
        "read -r x < f",
        "env | sort",
        "timeout 5 cat f",
        "nice ls",
        "watch -n 5 ls",
        "sudo ls",
        "awk 'BEGIN{system(\"ls\")}'",
        "nohup sleep 1 > /dev/null 2>&1 &",
        "time ls",
        "! grep -q x f",
    ],
)
def test_reads_proctor_knows(script):
    found = writes(script, "/r")
    assert is_read(script, "/r"), (script, found.paths, found.unknown)
    assert found.read and not found.paths and not found.unknown


@pytest.mark.parametrize(
    "script",
    [
        "npm install",
        "npm test",
        "make",
        "make -n",
        "pytest",
        "python -m pytest -q",
        "cargo build",
        "pip install x",
        "git push",
        "git commit -m x",
        "git add .",
        "git fetch",
        "git stash",
        "git branch -d old",
        "git branch new",
        "git branch -m a b",
        "git tag v1",
        "git remote add o url",
        "git config user.name me",
        "git checkout main",
        "python3 x.py",
        "node x.js",
        "./run.sh",
        "docker ps",
        "kill 1234",
        "curl https://example.invalid",
        "sort -o out f",
        "sort --output=out f",
        "uniq in out",
        "xxd in out",
        "tree -o out",
        "sed -i s/a/b/ f",
        "sed -n 'w out' f",
        "sed 's/a/b/w out' f",
        "awk '{print > \"out\"}' f",
        "awk '{print | \"sh\"}' f",
        "awk 'BEGIN{system(\"make\")}'",
        "find . -delete",
        "find . -exec rm {} +",
        "find . -fprint out",
        "date -s now",
        "hostname x",
        "echo > f",
        "echo $(touch x)",
        "bash -c 'touch x'",
        "eval 'touch x'",
        "bash <<'EOF'\ntouch x\nEOF",
        "watch touch x",
        "sudo touch x",
        "cat f | bash",
        "env rm x",
        "ls > out",
        "ls | tee out",
        "rg --pre cat x",
        "git diff --output=d.patch",
        "git log --output l",
        "bc",
        "cat > f <<'EOF'\nx\nEOF",
        "proctor job exit j1",
        "exec 3> f",
        "git -c core.pager=less log",
        "PAGER=./x git log",
        "mkdir d",
        "ls; rm x",
        "ls && python3 -c 1",
        "proctor run test",
        "proctor init",
        "command rm x",
        "[ -f x ] || touch x",
        "f() { touch x; }; f",
        "source ~/.bashrc",
    ],
)
def test_not_reads(script):
    assert not is_read(script, "/r"), script


# -- 2. an unknown write is advised, never silent -------------------------------------------------


@pytest.mark.parametrize(
    "script, says",
    [
        ("pytest", "pytest: a program proctor does not know; it cannot tell what it writes"),
        ("npm install", "npm: a program proctor does not know"),
        ("cargo build --release", "cargo: a program proctor does not know"),
        ("./script.sh", "./script.sh: a program proctor does not know"),
        ("/opt/tools/bin/cat x", "/opt/tools/bin/cat: a program proctor does not know"),
        ("python -c 'import os'", "python -c: runs code"),
        ("python3 - <<'EOF'\nopen('x', 'w')\nEOF", "python3: runs code from its standard input"),
        ("python3 x.py", "python3 x.py: runs a script"),
        ("python3.11 -m pytest", "python3.11 -m pytest: runs a module"),
        ("node -e 'x'", "node -e: runs code"),
        ("perl -e 'unlink 1'", "perl -e: runs perl code"),
        ("perl x.pl", "perl x.pl: runs a perl script"),
        ("ruby -e 'x'", "ruby -e: runs code"),
        ("bash w.sh", "bash w.sh: runs a script file"),
        ("sh -x w.sh arg", "sh w.sh: runs a script file"),
        ("source f", "source f: runs a file in this shell"),
        (". ./f", ". ./f: runs a file in this shell"),
        ("cat w.sh | bash", "bash: runs a script from its standard input"),
        ("make -j4", "make: runs build recipes"),
        ("tar -xzf a.tgz", "tar -x: extracts members proctor cannot list"),
        ("tar xf a.tar", "tar -x: extracts members proctor cannot list"),
        ("unzip a.zip", "unzip: extracts members proctor cannot list"),
        ("patch -p1 < fix.diff", "patch: applies a diff proctor does not read"),
        ("git apply fix.patch", "git apply fix.patch: applies a diff"),
        ("git stash pop", "git stash pop: rewrites files across the work tree"),
        ("git stash apply", "git stash apply: rewrites files across the work tree"),
        ("git reset --hard HEAD~1", "git reset --hard: rewrites files across the work tree"),
        ("git clean -fdx", "git clean: removes untracked files"),
        ("git merge other", "git merge: rewrites files"),
        ("git pull", "git pull: rewrites files"),
        ("git checkout-index -a -f", "git checkout-index -a: rewrites files"),
        ("git format-patch -1", "git format-patch: writes patch files"),
        ("git frobnicate", "git frobnicate: a git command proctor does not know"),
        ("rm -rf $BUILD/out", "rm $BUILD/out: a path held in a variable"),
        ('echo x > "$OUT"', "> $OUT: a path held in a variable"),
        ("touch $(mktemp -u)", "touch $(mktemp -u): a path a command prints"),
        ("curl -O https://h/", "curl -O https://h/: saves under a name the server gives"),
        ("curl -OJ https://h/x", "curl -O: saves under a name the server gives"),
        ("wget https://h/a -r", "wget: saves under names the server gives"),
        ("find . -delete", "find . -delete: removes what it matches"),
        ("find src -exec rm {} +", "rm {}: a name find produces"),
        ("find -L src -exec touch {} +", "touch {}: a name find produces through a followed link"),
        ("ls | xargs rm", "rm {}: names xargs reads from its input"),
        ("ls | xargs -0 sed -i s/a/b/", "sed -i {}: names xargs reads from its input"),
        ("ls | xargs -I{} cp {} dest/", "cp dest/{}: names xargs reads from its input"),
        ("$CMD x", "$CMD: a command named by an expansion"),
        ('eval "$X"', "eval $X: a script built from an expansion"),
        ('sh -c "$X"', "sh -c $X: a script built from an expansion"),
        ("D=x; cd $D && touch f", "touch f: after a cd proctor cannot follow"),
        ("sed -f prog.sed -i f", "sed -f prog.sed: a script file proctor does not read"),
        ("sed 's/a/b/e' f", "sed s///e: runs what it makes as a command"),
        ("awk -f prog.awk f", "awk -f prog.awk: a program file proctor does not read"),
        ("awk '{print > $1}' f", "awk: prints to a file named at run time"),
        ("perl -i -pe 'system(\"rm x\")' f", "perl -i: its script may write other files"),
        ("printf 'w x\\n' | ed f", "ed: reads its commands from its input"),
        ("proctor work j1", "proctor work: proctor cannot tell what it writes"),
        ("BASH_ENV=./x.sh bash -c true", "BASH_ENV=./x.sh: makes later programs run it"),
        ("export PATH=bin:$PATH; ls", "PATH=bin:$PATH: programs may be found in the work tree"),
        ("LD_PRELOAD=./x.so ls", "LD_PRELOAD=./x.so: makes later programs run it"),
        ("git -c core.pager='rm x' log", "git -c core.pager=rm x: a setting that runs a program"),
        ("git -c alias.x='!rm y' x", "git -c alias.x=!rm y: a setting that runs a program"),
        ("git config core.hooksPath hooks", "git config core.hooksPath: a setting that runs a program"),
        ("echo {1..100000}", "a brace expansion too large to judge"),
        ("f() { f; }; f", "f: a function calling itself"),
        ("alias t='touch x'\nt", "t: an alias, run only where the shell expands aliases"),
        ("hash -p ./evil ls", "hash -p: makes a name run another file"),
        ("sudo -s", "sudo -s: an interactive shell"),
        ("echo 'unterminated", "unparseable shell"),
    ],
)
def test_unknown_writes_say_why(script, says):
    found = writes(script, "/r")
    assert any(says in u for u in found.unknown), (script, found.unknown, found.paths)
    assert not found.read
    assert all(len(u) <= 120 for u in found.unknown), found.unknown


def test_unknown_descriptions_are_counted_past_a_few():
    found = writes("; ".join(f"rm $X{i}" for i in range(40)), "/r")
    assert len(found.unknown) == 13 and found.unknown[-1] == "and 28 more writes proctor cannot name"


# -- 3. more writers and wrappers, named --------------------------------------------------------


@pytest.mark.parametrize(
    "script, expected",
    [
        ("curl -sS -o out.json https://h/x", ["/r/out.json"]),
        ("curl --output=out https://h/x", ["/r/out"]),
        ("curl -so - https://h/x", []),
        ("curl -D headers -c jar https://h/x", ["/r/headers", "/r/jar"]),
        ("curl -sO https://h/dir/file.tgz?x=1", ["/r/file.tgz"]),
        ("curl --output-dir dl -O https://h/f.txt", ["/r/dl/f.txt"]),
        ("wget -O page.html https://h/", ["/r/page.html"]),
        ("wget -q https://h/a/b.tar", ["/r/b.tar"]),
        ("wget -qO- https://h/", []),
        ("sort -o out.txt in.txt", ["/r/out.txt"]),
        ("sort -uo out.txt in.txt", ["/r/out.txt"]),
        ("sort in.txt --output out.txt", ["/r/out.txt"]),
        ("split -l 10 big.txt parts/p_", ["/r/parts/p_aa"]),
        ("split -d -a 3 big.txt", ["/r/x000"]),
        ("csplit -f part f /x/", ["/r/part00"]),
        ("fallocate -l 1M disk.img", ["/r/disk.img"]),
        ("ed -s f.txt <<'EOF'\n1d\nw\nq\nEOF", ["/r/f.txt"]),
        ("ed -s f.txt <<'EOF'\na\nw not-a-write\n.\nw other.txt\nq\nEOF", ["/r/other.txt"]),
        ("ed -s f.txt <<< q", []),
        ("patch f.c fix.diff", ["/r/f.c"]),
        ("patch -o out.c f.c fix.diff", ["/r/out.c"]),
        ("patch -p1 <<'EOF'\n--- a/src/x.c\n+++ b/src/x.c\n@@ -1 +1 @@\n-a\n+b\nEOF", ["/r/src/x.c"]),
        ("sed --expression=s/a/b/ -i f", ["/r/f"]),
        ("sed -e s/a/b/ -i f g", ["/r/f", "/r/g"]),
        ("sed -n 'w out.txt' f", ["/r/out.txt"]),
        ("sed 's/a/b/w changed.txt' f", ["/r/changed.txt"]),
        ("sed -e '/x/W first.txt' f", ["/r/first.txt"]),
        ("sed '1e touch made' f", ["/r/made"]),
        ("sed -i'bak/*' s/a/b/ f", ["/r/f", "/r/bak/f"]),
        ("sed --sandbox 's/a/b/w x' f", []),
        ("git checkout-index --prefix=export/ -a", ["/r/export"]),
        ("git checkout-index -f -- a.c", ["/r/a.c"]),
        ("git checkout-index --prefix=out/ a.c", ["/r/out/a.c"]),
        ("git config --file cfg a.b c", ["/r/cfg"]),
        ("git config -f cfg --get a.b", []),
        ("rsync -a src/ backup/", ["/r/backup"]),
        ("rsync -a src/ host:backup/", []),
        ("rsync -av --log-file=r.log src/ dst", ["/r/r.log", "/r/dst"]),
        ("awk -i inplace '{print}' f g", ["/r/f", "/r/g"]),
        ("gawk --include=inplace -v x=1 '{print}' f", ["/r/f"]),
        ("awk '{print > \"out.txt\"}' f", ["/r/out.txt"]),
        ("awk '{print $1 >> \"/r/log\"}' f", ["/r/log"]),
        ("awk 'BEGIN { system(\"touch made\") }'", ["/r/made"]),
        ("awk '{print | \"cat > piped\"}' f", ["/r/piped"]),
        ("awk '{print (a > b)}' f", []),
        ("gzip f.txt", ["/r/f.txt.gz", "/r/f.txt"]),
        ("gzip -k f.txt", ["/r/f.txt.gz"]),
        ("gunzip f.txt.gz", ["/r/f.txt", "/r/f.txt.gz"]),
        ("gzip -d a.tgz", ["/r/a.tar", "/r/a.tgz"]),
        ("bzip2 f", ["/r/f.bz2", "/r/f"]),
        ("xz -d f.xz", ["/r/f", "/r/f.xz"]),
        ("zstd f", ["/r/f.zst"]),
        ("zstd --rm f", ["/r/f.zst", "/r/f"]),
        ("gzip -r dir", ["/r/dir"]),
        ("tar -xf a.tar -C out", ["/r/out"]),
        ("tar -C out -xzf a.tgz", ["/r/out"]),
        ("tar xzf a.tgz -C out", ["/r/out"]),
        ("tar -xf a.tar src/x.c", ["/r/src/x.c"]),
        ("tar -czf a.tgz src", ["/r/a.tgz"]),
        ("tar cf a.tar src", ["/r/a.tar"]),
        ("tar -cf - src | tar -xf - -C dst", ["/r/dst"]),
        ("unzip -q a.zip -d out", ["/r/out"]),
        ("unzip -o a.zip src/x.c", ["/r/src/x.c"]),
        ("zip -r a.zip src", ["/r/a.zip"]),
        ("zip -m a.zip f", ["/r/a.zip", "/r/f"]),
        ("ln -s ../target link", ["/r/link"]),
        ("ln -sf /etc/passwd f", ["/r/f"]),
        ("ln a b", ["/r/b"]),
        ("ln -t dir a b", ["/r/dir/a", "/r/dir/b"]),
        ("link a b", ["/r/b"]),
        ("cp --target-directory=d a b", ["/r/d/a", "/r/d/b"]),
        ("cp --target d a", ["/r/d/a"]),
        ("cp -tdir a", ["/r/dir/a"]),
        ("install -d a b", ["/r/a", "/r/b"]),
        ("install -Dm644 f /r/etc/f", ["/r/etc/f"]),
        ("chmod -x f", ["/r/f"]),
        ("chmod -R -w d", ["/r/d"]),
        ("chmod --reference=a b", ["/r/b"]),
        ("chown -R me:me d", ["/r/d"]),
        ("mkfifo p", ["/r/p"]),
        ("mktemp -d work.XXXX", ["/r/work.XXXX"]),
        ("mktemp -p out", ["/r/out/tmp.XXXXXXXXXX"]),
        ("touch -c missing-here", []),
        ("truncate -s 0 -c missing-here", []),
        ("dd if=a of=b", ["/r/b"]),
        ("dd if=a of=/dev/null", []),
        ("tee -a a b < x", ["/r/a", "/r/b"]),
        ("strace -o trace.log ls", ["/r/trace.log"]),
        ("/usr/bin/time -o t.txt ls", ["/r/t.txt"]),
        ("script -q -c ls log.txt", ["/r/log.txt"]),
        ("script -qc ls", ["/r/typescript"]),
        ("iconv -f utf-8 -t ascii -o out f", ["/r/out"]),
        ("xxd -r dump bin", ["/r/bin"]),
        ("uniq in out", ["/r/out"]),
        ("tree -o listing.txt", ["/r/listing.txt"]),
        ("find . -fprint list.txt", ["/r/list.txt"]),
        ("find . -fprintf list.txt '%p'", ["/r/list.txt"]),
        ("find . -name x -fls l", ["/r/l"]),
        ("git diff --output=d.patch", ["/r/d.patch"]),
        ("git archive -o a.tar HEAD", ["/r/a.tar"]),
        ("git bundle create b.bundle HEAD", ["/r/b.bundle"]),
        ("git format-patch -o patches -3", ["/r/patches"]),
        ("git worktree add ../wt", ["/wt"]),
        ("git clone https://h/x/repo.git", ["/r/repo"]),
        ("git clone https://h/x/repo.git there", ["/r/there"]),
        ("git init sub", ["/r/sub"]),
        ("git clean -fd build", ["/r/build"]),
        ("git stash push -- a.c", ["/r/a.c"]),
        ("git restore --staged a.c", []),
        ("git restore --staged --worktree a.c", ["/r/a.c"]),
        ("git rm --cached a.c", []),
        ("git merge-file a.c base.c other.c", ["/r/a.c"]),
        (
            "git apply <<'EOF'\ndiff --git a/src/x.c b/src/x.c\n--- a/src/x.c\n+++ b/src/x.c\n@@ -1 +1 @@\n-a\n+b\nEOF",
            ["/r/src/x.c"],
        ),
        ("git apply --cached fix.patch", []),
        ("git apply --check fix.patch", []),
        ("history -w hist.txt", ["/r/hist.txt"]),
    ],
)
def test_more_writers_are_named(script, expected):
    found = writes(script, "/r")
    assert found.paths == expected, (script, found.paths, found.unknown)


@pytest.mark.parametrize(
    "script, expected",
    [
        ("bash -c -- 'touch x'", ["/r/x"]),
        ("bash -o pipefail -c 'touch x'", ["/r/x"]),
        ("bash -lc 'touch x'", ["/r/x"]),
        ("sh -c 'touch \"$1\"' sh y", ["/r/y"]),
        ("env -S 'touch x'", ["/r/x"]),
        ("env -S'touch x' y", ["/r/x", "/r/y"]),
        ("env --split-string='touch x'", ["/r/x"]),
        ("env -C /tmp touch x", ["/tmp/x"]),
        ("env -i A=1 B=2 touch x", ["/r/x"]),
        ("exec -a name touch x", ["/r/x"]),
        ("exec touch x", ["/r/x"]),
        ("flock -c 'touch x' 9", ["/r/x"]),
        ("flock -n 9 touch x", ["/r/x"]),
        ("flock -w 3 9 -c 'touch x'", ["/r/x"]),
        ("script -qc 'touch x' /dev/null", ["/r/x"]),
        ("script -q -e -c 'touch x' /dev/null", ["/r/x"]),
        ("taskset 0x1 touch x", ["/r/x"]),
        ("taskset -c 0-3 touch x", ["/r/x"]),
        ("chrt -f 10 touch x", ["/r/x"]),
        ("coproc touch x", ["/r/x"]),
        ("coproc worker { touch x; }", ["/r/x"]),
        ("coproc ( touch x )", ["/r/x"]),
        ("trap 'touch x' EXIT", ["/r/x"]),
        ("trap -- 'rm y' INT TERM", ["/r/y"]),
        ("watch 'touch x'", ["/r/x"]),
        ("watch -n 5 touch x", ["/r/x"]),
        ("watch -x touch x", ["/r/x"]),
        ("git --work-tree=/w checkout -- a.c", ["/w/a.c"]),
        ("git --work-tree /w checkout -- a.c", ["/w/a.c"]),
        ("git --git-dir=/g/.git --work-tree=/w checkout main -- a.c", ["/w/a.c"]),
        ("git --work-tree=/w reset --hard", ["/w"]),
        ("GIT_WORK_TREE=/w git checkout -- a.c", ["/w/a.c"]),
        ("git -C / checkout -- a.c", ["/a.c"]),
        ("git -c color.ui=never --no-pager -C / rm a.c", ["/a.c"]),
        ("git --namespace ns -c a.b=c restore a.c", ["/r/a.c"]),
        ("command -p touch x", ["/r/x"]),
        ("builtin eval 'touch x'", ["/r/x"]),
        ("busybox rm x", ["/r/x"]),
        ("toybox touch x", ["/r/x"]),
        ("sudo -u root -E touch x", ["/r/x"]),
        ("sudo -D /tmp touch x", ["/tmp/x"]),
        ("doas -u root rm x", ["/r/x"]),
        ("nice -10 rm x", ["/r/x"]),
        ("nohup setsid stdbuf -oL timeout -k 5 10 ionice -c2 -n7 chronic rm x", ["/r/x"]),
        ("xargs -n1 -P4 -- touch x < list", ["/r/x"]),
        ("su -c 'touch x' root", ["/r/x"]),
        ("npx -c 'touch x'", ["/r/x"]),
        ("time -p touch x", ["/r/x"]),
        ("! touch x", ["/r/x"]),
        ("sudo -e /r/etc.conf", ["/r/etc.conf"]),
    ],
)
def test_wrappers_are_seen_through(script, expected):
    found = writes(script, "/r")
    assert [p for p in found.paths] == expected, (script, found.paths, found.unknown)


def test_flock_creates_its_lock_file(tmp_path):
    lock = tmp_path / "lock"
    assert writes(f"flock {lock} tee out", str(tmp_path)).paths == [str(lock), str(tmp_path / "out")]
    lock.write_text("")
    assert writes(f"flock {lock} tee out", str(tmp_path)).paths == [str(tmp_path / "out")]


@pytest.fixture
def tree(tmp_path):
    """A work tree: src/ (a.py, sub/), plan/w1/ (todo, link -> ../../src/a.py, srcdir -> ../../src), docs/."""
    root = tmp_path / "repo"
    for d in ("src/sub", "plan/w1", "docs"):
        (root / d).mkdir(parents=True)
    (root / "src" / "a.py").write_text("a\n")
    (root / "plan" / "w1" / "todo").write_text("t\n")
    os.symlink("../../src/a.py", root / "plan" / "w1" / "link")
    os.symlink("../../src", root / "plan" / "w1" / "srcdir")
    return str(root)


def rel(found, root):
    return [p[len(root) + 1 :] if p.startswith(root + "/") else p for p in found.paths]


@pytest.mark.parametrize(
    "script, expected",
    [
        ("cd src && touch x", ["src/x"]),
        ("cd src; touch x", ["src/x"]),
        ("cd nope; touch x", ["x"]),
        ("cd nope && touch x", []),
        ("cd nope || touch x", ["x"]),
        ("cd nope 2>/dev/null || exit; touch x", []),
        ("cd src || exit; touch x", ["src/x"]),
        ("cd src && cd - && touch x", ["x"]),
        ("cd src; cd ~-; touch x", ["x"]),
        ("cd src; cd plan; touch x", ["src/x"]),
        ("cd src | true; touch x", ["x"]),
        ("cd src & touch x", ["x"]),
        ("cd src & wait; touch x", ["x"]),
        ("(cd src; touch x); touch y", ["src/x", "y"]),
        ("(cd src) && touch x", ["x"]),
        ("{ cd src; } | cat; touch x", ["x"]),
        ("{ cd src; } > o; touch x", ["o", "src/x"]),
        ("{ cd src; touch x; } &", ["src/x"]),
        ("cd src && touch x &", ["src/x"]),
        ("mkdir -p new/d; cd new/d; touch x", ["new/d", "new/d/x"]),
        ("mkdir new && cd new && touch x", ["new", "new/x"]),
        ("pushd src && touch p && popd && touch q", ["src/p", "q"]),
        ("pushd src; pushd ../docs; popd; touch x", ["src/x"]),
        ("cd plan/w1/srcdir && touch x", ["plan/w1/srcdir/x"]),
        ("cd plan/w1/srcdir && touch ../x", ["x"]),
        ("cd plan/w1/srcdir/.. && touch x", ["plan/w1/x"]),
        ("cd -P plan/w1/srcdir && touch x", ["src/x"]),
        ("f() { cd src; }; f; touch x", ["src/x"]),
        ("eval 'cd src'; touch x", ["src/x"]),
        ("bash -c 'cd src'; touch x", ["x"]),
        ("echo $(cd src) > o; touch x", ["o", "x"]),
        ("cd src; echo $(touch x)", ["src/x"]),
        ("cd src && echo hi > >(cat > x)", ["src/x"]),
        ("cd src; cat > x <<EOF\n$(touch y)\nEOF", ["src/y", "src/x"]),
        ("if cd src; then touch x; fi", ["src/x"]),
        ("if cd nope; then touch x; else touch y; fi", ["y"]),
        ("true || touch x", []),
        ("false && touch x", []),
        ("false || touch x", ["x"]),
        ("if false; then touch x; fi", []),
        ("if true; then touch x; else touch y; fi", ["x"]),
        ("if [ -f src/a.py ]; then touch x; else touch y; fi", ["x"]),
        ("[ -d nope ] && touch x", []),
        ("[ -d src ] && touch x", ["src/../x"][:0] + ["x"]),
        ("while false; do touch x; done", []),
        ("until true; do touch x; done", []),
        ("exit 0; touch x", []),
        ("true; exit; touch x", []),
        ("(exit); touch x", ["x"]),
        ("[ -f src/a.py ] && exit; touch x", []),
        ("tar -xf a.tar -C out && cd out/sub && touch ../../x", ["out", "x"]),
        ("cp -r src copy; cd copy/sub; touch x", ["copy", "copy/sub/x"]),
        ("HOME=$PWD/src; cd ~ && touch x", ["src/x"]),
        ("HOME=$PWD; cd; touch x", ["x"]),
        ("CDPATH=src cd sub && touch x", []),
    ],
)
def test_the_directory_a_command_runs_in(tree, script, expected):
    found = writes(script, tree)
    assert rel(found, tree) == expected, (script, found.paths, found.unknown)


def test_cd_dash_with_no_previous_directory_is_unknown():
    found = writes("cd -; touch x", "/r")
    assert found.paths == [] and any("after a cd proctor cannot follow" in u for u in found.unknown)


def test_git_checkout_of_a_path_or_a_branch(tree):
    assert rel(writes("git checkout src/a.py", tree), tree) == ["src/a.py"]
    assert rel(writes("git checkout .", tree), tree) == [tree]
    found = writes("git checkout no-such-path", tree)
    assert found.paths == [] and "rewrites files across the work tree" in found.unknown[0]


def test_sed_bsd_in_place_form(tree):
    assert rel(writes("sed -i '' 's/a/b/' src/a.py", tree), tree) == ["src/a.py"]
    assert rel(writes("sed -i '' src/a.py", tree), tree) == ["src/a.py"], "GNU reads '' as the script"
    assert rel(writes("sed -i .bak 's/a/b/' src/a.py", tree), tree) == ["src/a.py", "src/a.py.bak"]


@pytest.mark.parametrize(
    "script, expected",
    [
        ("perl -i -pe 's/a/b/' f", ["/r/f"]),
        ("perl -pi -e 's/a/b/' f g", ["/r/f", "/r/g"]),
        ("perl -i.orig -pe 's/a/b/' f", ["/r/f", "/r/f.orig"]),
        ("perl -pie 's/a/b/' f", ["/r/f", "/r/fe"]),
        ("perl -i -pe1 src/*.c", ["/r/src/*.c"]),
        ("perl -0777 -i -pe 's/a/b/g' f", ["/r/f"]),
        ("perl -ni -e 'print unless /x/' f", ["/r/f"]),
    ],
)
def test_perl_in_place_writes_its_files_not_its_script(script, expected):
    assert writes(script, "/r").paths == expected


# -- 4. parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "script, expected",
    [
        ("echo ${x:-$(touch a)}", ["/r/a"]),
        ('echo "${x:-$(touch a)}"', ["/r/a"]),
        ("echo ${x:=`touch a`}", ["/r/a"]),
        ("echo ${x//y/$(touch a)}", ["/r/a"]),
        ("echo $(( $(touch a; echo 1) + 1 ))", ["/r/a"]),
        ("echo $(( x + $(( $(touch a) )) ))", ["/r/a"]),
        ("(( $(touch a) ))", ["/r/a"]),
        ("echo $[ $(touch a) + 1 ]", ["/r/a"]),
        ("cat <<EOF\n$(touch a)\nEOF", ["/r/a"]),
        ("cat <<EOF\n`touch a`\nEOF", ["/r/a"]),
        ("cat <<EOF\n${x:-$(touch a)}\nEOF", ["/r/a"]),
        ("cat <<-EOF\n\t$(touch a)\n\tEOF", ["/r/a"]),
        ("cat <<'EOF'\n$(touch a)\nEOF", []),
        ('cat <<"EOF"\n`touch a`\nEOF', []),
        ("cat <<\\EOF\n$(touch a)\nEOF", []),
        ("cat <<E\\OF\n$(touch a)\nEOF", []),
        ("cat <<EOF\n\\$(touch a)\nEOF", []),
        ("cat <<A; cat <<B\n$(touch a)\nA\n$(touch b)\nB", ["/r/a", "/r/b"]),
        ("x=$(cat <<EOF\n$(touch a)\nEOF\n)", ["/r/a"]),
        ('echo "$(echo ")")" > b', ["/r/b"]),
        ("echo \"$(echo ')')\" > b", ["/r/b"]),
        ('echo "$(echo "$(touch a)")"', ["/r/a"]),
        ("echo $(echo '$(touch no)') > b", ["/r/b"]),
        ("echo $(case x in x) touch a;; esac)", ["/r/a"]),
        ("echo $(case x in (x) touch a;; esac) > b", ["/r/a", "/r/b"]),
        ("echo `echo \\`touch a\\``", ["/r/a"]),
        ("echo '$(touch no)' \"\\$(touch no)\" \\$\\(touch no\\)", []),
        ("[[ a > b ]]", []),
        ("[[ $x < y && -f z ]] && echo", []),
        ("[[ $(touch a) ]]", ["/r/a"]),
        ("[[ a =~ ^(b|c)$ ]]", []),
        ("(( 3 > 2 ))", []),
        ("(( x >= 2 )) && echo > b", ["/r/b"]),
        ("((cd / && touch a) )", ["/a"]),
        ("for ((i = 0; i < 3; i++)); do echo > b; done", ["/r/b"]),
        ("for x in a b; do touch $x; done", []),
        ("for x in $(touch a); do :; done", ["/r/a"]),
        ("select x in a b; do touch c; done", ["/r/c"]),
        ("case $(touch a) in b) ;; esac", ["/r/a"]),
        ("case x in a|b) touch c;; *) touch d;; esac", ["/r/c", "/r/d"]),
        ("case x in\n  a) touch c\n  ;;\nesac", ["/r/c"]),
        ("arr=(a $(touch b) c); touch d", ["/r/b", "/r/d"]),
        ("declare -a arr=(x y) && touch d", ["/r/d"]),
        ("echo a # ; touch no", []),
        ("echo a#b > c", ["/r/c"]),
        ("touch {a,b}.txt", ["/r/a.txt", "/r/b.txt"]),
        ("touch src/{a,b/{c,d}}", ["/r/src/a", "/r/src/b/c", "/r/src/b/d"]),
        ("touch f{1..3}", ["/r/f1", "/r/f2", "/r/f3"]),
        ("touch '{a,b}'", ["/r/{a,b}"]),
        ("touch {a}", ["/r/{a}"]),
        ("touch ~/x", [os.path.expanduser("~/x")]),
        ("touch '~/x'", ["/r/~/x"]),
        ("touch ~+/x", ["/r/x"]),
        ('touch "$PWD/x" ${PWD}/y $HOME/z', ["/r/x", "/r/y", os.path.expanduser("~/z")]),
        ("touch '$PWD/x'", ["/r/$PWD/x"]),
        ("echo $'\\x72\\x6d' > a", ["/r/a"]),
        ('f() { touch "$1"; }; f a', ["/r/a"]),
        ('set -- a b; touch "$2"', ["/r/b"]),
        ("f() { touch x; }", []),
        ("function g { touch x; }; g", ["/r/x"]),
        ("function g() { touch x; }; g", ["/r/x"]),
        ("g() ( touch x ); g", ["/r/x"]),
        ("echo > a\\\nb", ["/r/ab"]),
        ("echo x >a;echo y>b", ["/r/a", "/r/b"]),
        ("echo 2>&1>a", ["/r/a"]),
        ("exec {fd}>log", ["/r/log"]),
        ("cmd 3<>rw", ["/r/rw"]),
    ],
)
def test_parsing(script, expected):
    found = writes(script, "/r")
    assert found.paths == expected, (script, found.paths, found.unknown)


def test_a_fifty_megabyte_command_is_judged_in_time():
    body = ("x" * 79 + "\n") * (50 * 1024 * 1024 // 80)
    for script in (
        "cat > big.txt <<'EOF'\n" + body + "EOF\n",
        "cat > big.txt <<EOF\n" + body + "EOF\n",
        "echo '" + body + "' > big.txt",
    ):
        started = time.monotonic()
        found = writes(script, "/r")
        assert time.monotonic() - started < 5
        assert found.paths == ["/r/big.txt"] and not found.unknown


@pytest.mark.parametrize(
    "script",
    [
        "echo " + "a " * (25 * 1024 * 1024),
        "true; " * (8 * 1024 * 1024),
        "echo " + "$a" * (25 * 1024 * 1024),
        "echo $'" + "\\x41" * (12 * 1024 * 1024) + "'",
        "(" * 200_000,
        "((" * 100_000,
        "echo " + "${x:-" * 10_000 + "}" * 10_000,
        "a(){ touch x; }; " + "".join(f"f{i + 1}(){{ f{i}; f{i}; }}; " for i in range(30)).replace("f0", "a") + "f30",
    ],
)
def test_a_command_too_large_to_judge_is_unknown_in_time(script):
    started = time.monotonic()
    found = writes(script, "/r")
    assert time.monotonic() - started < 5
    assert found.unknown and not found.read


def test_ten_thousand_paths_are_named_in_time():
    names = [f"src/f{i}.py" for i in range(10_000)]
    for script in (
        "rm " + " ".join(names),
        "; ".join(f"echo > {n}" for n in names),
        "cp " + " ".join(names) + " dest/",
    ):
        started = time.monotonic()
        found = writes(script, "/r")
        assert time.monotonic() - started < 5
        assert len(found.paths) == 10_000 and not found.unknown


def test_random_text_never_crashes_the_reader():
    rng = random.Random(11)
    alphabet = list("abc xyz/.-_=$`'\"\\(){}[]<>|&;!#*?~\n\t0123456789") + [
        "$(",
        "${",
        "<<",
        "EOF",
        "\n",
        "[[",
        "]]",
        "((",
        "))",
        "case ",
        " in ",
        "esac",
        "for ",
        "do ",
        "done",
        "if ",
        "fi",
        ";;",
    ]
    for _ in range(6000):
        script = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60)))
        found = writes(script, "/r")
        assert not any("failed to read" in u or "too large" in u for u in found.unknown), (script, found.unknown)
        try:
            parse(script)
        except ParseError:
            pass


# -- 5. aliases of a leased file ------------------------------------------------------------------


@pytest.mark.parametrize(
    "script, expected",
    [
        # a relative target is read from the link's directory (plan/src/a.py, where a write fails: there is
        # no plan/src) -- and, in case the writer meant it from the cwd, src/a.py
        ("ln -s src/a.py plan/x && echo hi > plan/x", ["plan/x", "src/a.py"]),
        ("ln -s ../src/a.py plan/x && echo hi > plan/x", ["plan/x", "src/a.py"]),
        ("ln -s $PWD/src/a.py plan/x; echo hi > plan/x", ["plan/x", "src/a.py"]),
        ("ln -sr src/a.py plan/x; echo hi > plan/x", ["plan/x", "src/a.py"]),
        ("ln src/a.py plan/y; echo > plan/y", ["plan/y", "src/a.py"]),
        ("link src/a.py plan/y; truncate -s0 plan/y", ["plan/y", "src/a.py"]),
        ("cp -l src/a.py plan/y && sed -i --follow-symlinks s/a/b/ plan/y", ["plan/y", "src/a.py"]),
        ("cp -al src plan/m && echo >> plan/m/a.py", ["plan/m", "plan/m/a.py", "src/a.py"]),
        ("cp -s $PWD/src/a.py plan/s && tee plan/s < x", ["plan/s", "src/a.py"]),
        ("ln -s ../src plan/d && touch plan/d/n", ["plan/d", "plan/d/n", "src/n"]),
        ("ln -s ../src plan/d && touch plan/d/sub/n", ["plan/d", "plan/d/sub/n", "src/sub/n"]),
        (
            "ln -s ../src plan/d && mkdir plan/d/new && touch plan/d/new/n",
            ["plan/d", "plan/d/new", "src/new", "plan/d/new/n", "src/new/n"],
        ),
        ("ln -s ../src/a.py plan/x; mv plan/x plan/z; echo > plan/z", ["plan/x", "plan/z", "src/a.py"]),
        ("ln -s ../src/a.py plan/x; cd plan; echo > x", ["plan/x", "src/a.py"]),
        ("ln -s src/a.py l1; ln -s l1 l2; echo > l2", ["l1", "l2", "src/a.py"]),
        ("ln -s ../src/a.py plan/x; echo > plan/y", ["plan/x", "plan/y"]),
        ("ln -s src/a.py x; rm x", ["x"]),
    ],
)
def test_links_made_in_the_same_call_are_followed(tree, script, expected):
    found = writes(script, tree)
    assert rel(found, tree) == expected, (script, found.paths, found.unknown)


@pytest.mark.parametrize(
    "script, expected",
    [
        ("echo > /proc/self/cwd/src/b.py", ["/r/src/b.py"]),
        ("cd /tmp && echo > /proc/self/cwd/x", ["/tmp/x"]),
        ("echo > /proc/$$/cwd/src/b.py", ["/r/src/b.py"]),
        ('touch "/proc/$$/cwd/a" /proc/thread-self/cwd/b', ["/r/a", "/r/b"]),
        ("cd /proc/self/cwd/src 2>/dev/null; touch x", ["/r/x"]),
        ("echo x > /proc/self/fd/1", []),
    ],
)
def test_proc_self_cwd_is_the_commands_own_directory(script, expected):
    found = writes(script, "/r")
    assert found.paths == expected, (script, found.paths, found.unknown)


def test_what_is_replaced_rather_than_written_through(tree):
    found = writes(
        "rm plan/w1/link; mv a plan/w1/b; sed -i s/a/b/ c; ln -sf x d; touch -h e; cp f g; "
        "echo > h; sed -i --follow-symlinks s/a/b/ i; rm -r plan/w1/srcdir/",
        tree,
    )
    assert sorted(rel_path[len(tree) + 1 :] for rel_path in found.no_follow) == [
        "a",
        "c",
        "d",
        "e",
        "plan/w1/b",
        "plan/w1/link",
    ]


@pytest.mark.parametrize(
    "script",
    [
        "echo > /proc/1/cwd/src/b.py",
        "echo > /proc/self/root/r/src/b.py",
        "touch /proc/$PPID/cwd/x",
        "ln -s $T plan/x; echo > plan/x",
    ],
)
def test_other_process_directories_and_unknown_link_targets_are_unknown(script):
    found = writes(script, "/r")
    assert found.unknown and not found.read, (script, found.paths)


def test_links_in_a_real_tree(tree):
    assert rel(writes("echo x > plan/w1/lin*", tree), tree) == ["plan/w1/link", "plan/w1/lin*"]
    assert rel(writes("ln -s ../../src/a.py plan/w1/al && echo x > plan/w1/al", tree), tree) == [
        "plan/w1/al",
        "src/a.py",
    ]
    assert rel(writes("ln -sfn ../../docs plan/w1/srcdir && touch plan/w1/srcdir/y", tree), tree)[:3] == [
        "plan/w1/srcdir",
        "plan/w1/srcdir/y",
        "docs/y",
    ]
    assert rel(writes("ln -sf ../../docs plan/w1/srcdir", tree), tree) == ["plan/w1/srcdir/docs"]


# -- adversarial: ways a worker could hide a write ---------------------------------------------


@pytest.mark.parametrize(
    "script, expected",
    [
        ("command -p rm src/x", "/r/src/x"),
        ("\\rm src/x", "/r/src/x"),
        ("r''m src/x", "/r/src/x"),
        ('r""m src/x', "/r/src/x"),
        ("$'\\x72\\x6d' src/x", "/r/src/x"),
        ("$'\\162\\155' src/x", "/r/src/x"),
        ('"$(printf rm)" src/x', None),
        ("/bin/rm src/x", "/r/src/x"),
        ("/usr/bin/env rm src/x", "/r/src/x"),
        ("busybox rm src/x", "/r/src/x"),
        ("{rm,src/x}", "/r/src/x"),
        ("find . -name x -exec rm {} +", None),
        ("find . -name x -execdir rm {} \\;", None),
        ("find . -ok rm {} \\;", None),
        ("xargs -0 rm < list", None),
        ("xargs -I% mv % /r/src/ < list", None),
        ("tee >(cat > src/x) < /dev/null", "/r/src/x"),
        ("cat <(touch src/x)", "/r/src/x"),
        ("diff <(rm src/x) y", "/r/src/x"),
        ("exec 3>src/x", "/r/src/x"),
        ("exec 3>&- 4>src/x", "/r/src/x"),
        (">src/x", "/r/src/x"),
        ("{ echo; } > src/x", "/r/src/x"),
        ("( echo ) >> src/x", "/r/src/x"),
        ("while read l; do :; done > src/x < f", "/r/src/x"),
        ("bash <<< 'rm src/x'", "/r/src/x"),
        ("bash -s <<'EOF'\nrm src/x\nEOF", "/r/src/x"),
        ("sh <<EOF\nrm src/x\nEOF", "/r/src/x"),
        ("cp --target-directory=src y", "/r/src/y"),
        ("cp --target=src y", "/r/src/y"),
        ("mv -t src y", "/r/src/y"),
        ("f(){ touch src/x; }; f", "/r/src/x"),
        ("ls() { rm src/x; }; ls", "/r/src/x"),
        ("shopt -s expand_aliases\nalias ls='rm src/x'\nls", "/r/src/x"),
        ("IFS=/; x=rm/src/x; $x", None),
        ("x=rm; $x src/x", None),
        ("${RM:-rm} src/x", None),
        ("`echo rm` src/x", None),
        ("eval rm src/x", "/r/src/x"),
        ('eval "r""m src/x"', "/r/src/x"),
        ("env -S'rm src/x'", "/r/src/x"),
        ("BASH_ENV=src/evil.sh bash -c :", None),
        ("PATH=.:$PATH ls", None),
        ("git -c core.fsmonitor='rm src/x' status", None),
        ("git -c diff.external=./x diff", None),
        ("GIT_EXTERNAL_DIFF=./x git diff", None),
        ("GIT_EDITOR='rm src/x' git commit", None),
        ("git config core.hooksPath .h && git commit -m x", None),
        ("cat > /proc/self/cwd/src/x", "/r/src/x"),
        ("echo > /proc/$$/cwd/src/x", "/r/src/x"),
        ("sed 's/a/b/e' f", None),
        ("sed -n '1e rm src/x' f", "/r/src/x"),
        ("sed -n 'w src/x' f", "/r/src/x"),
        ("awk 'BEGIN{system(\"rm src/x\")}'", "/r/src/x"),
        ("awk '{print | \"sh\"}'", None),
        ("awk '{print > \"src/x\"}'", "/r/src/x"),
        ("awk '{\"rm src/x\" | getline}'", "/r/src/x"),
        ("perl -i -pe 'system(\"rm x\")' f", None),
        ("trap 'rm src/x' EXIT", "/r/src/x"),
        ("coproc rm src/x", "/r/src/x"),
        ("watch rm src/x", "/r/src/x"),
        ("timeout 1 rm src/x", "/r/src/x"),
        ("exec -a ls rm src/x", "/r/src/x"),
        ("builtin eval 'rm src/x'", "/r/src/x"),
        ("time rm src/x", "/r/src/x"),
        ("(rm src/x) &", "/r/src/x"),
        ("rm src/x | cat", "/r/src/x"),
        ('echo "$(rm src/x)"', "/r/src/x"),
        ("echo $((1 + $(rm src/x)))", "/r/src/x"),
        ("x=$(rm src/x)", "/r/src/x"),
        ("export X=$(rm src/x)", "/r/src/x"),
        ("local x=`rm src/x`", "/r/src/x"),
        ("echo ${x:-$(rm src/x)}", "/r/src/x"),
        ("cat <<EOF\n$(rm src/x)\nEOF", "/r/src/x"),
        ("[[ -n $(rm src/x) ]]", "/r/src/x"),
        ("case $(rm src/x) in *) ;; esac", "/r/src/x"),
        ("for i in $(rm src/x); do :; done", "/r/src/x"),
        ("if rm src/x; then :; fi", "/r/src/x"),
        ("while rm src/x; do break; done", "/r/src/x"),
        ("true && rm src/x", "/r/src/x"),
        ("[ -f /nonexistent ] || rm src/x", "/r/src/x"),
        ("false || rm src/x", "/r/src/x"),
        ("rm src/\\x", "/r/src/x"),
        ("rm 'src'/\"x\"", "/r/src/x"),
        ("rm -- src/x", "/r/src/x"),
        ("rm -rf src/x/", "/r/src/x"),
        ("rm ./src//x", "/r/src/x"),
        ("rm src/y/../x", "/r/src/x"),
        ("touch -- src/x", "/r/src/x"),
        ("dd of=src/x", "/r/src/x"),
        ("sort -o src/x f", "/r/src/x"),
        ("git checkout HEAD -- src/x", "/r/src/x"),
        ("git restore --source HEAD src/x", "/r/src/x"),
        ("unbuffer rm src/x", "/r/src/x"),
        ("caffeinate -i rm src/x", "/r/src/x"),
        ("eatmydata rm src/x", "/r/src/x"),
        ("python3 -c 'import os; os.remove(\"src/x\")'", None),
        ("node -e 'fs.rmSync(\"src/x\")'", None),
        ("make clean", None),
        ("npm run clean", None),
        ("./clean.sh", None),
        ("source clean.sh", None),
        ("git stash && git stash drop", None),
        ("cat list | sh", None),
        ("x='$(rm src/x)'; echo ${x@P}", None),
        ("command_not_found_handle() { rm src/x; }; jq .", None),
        ("cat <<'EOF' | bash\nrm src/x\nEOF", "/r/src/x"),
        ("echo 'rm src/x' | sh", "/r/src/x"),
        ("printf 'rm src/x\\n' | bash -s", "/r/src/x"),
        ("[[ -n x ]] > src/x", "/r/src/x"),
        ("(( 1 )) >> src/x", "/r/src/x"),
        ("rm $(cat list)", None),
        ('rm "$F"', None),
    ],
)
def test_hidden_writes_are_never_silent(script, expected):
    found = writes(script, "/r")
    assert not found.read, script
    if expected is None:
        assert found.unknown, (script, found.paths)
    else:
        assert expected in found.paths, (script, found.paths, found.unknown)


# -- what other rules read: .commands, .simple, .heredocs ---------------------------------------


def test_commands_and_simple_keep_their_shape():
    found = writes("nohup npm run dev > log 2>&1 & timeout 5 watch -n 1 ls; env A=1 sudo proctor ls", "/r")
    assert found.commands == [["npm", "run", "dev"], ["ls"], ["proctor", "ls"]]
    raw, argv, background = found.simple[0]
    assert raw == ["nohup", "npm", "run", "dev"] and argv == ["npm", "run", "dev"] and background
    raw, argv, background = found.simple[1]
    assert raw[-len(argv) :] == argv and "watch" in raw[: len(raw) - len(argv)] and not background
    assert found.simple[-1][1] == ["proctor", "ls"]


def test_background_covers_the_whole_list():
    commands, _ = parse("cd x && make &")
    assert [c.background for c in commands] == [True, True]
    commands, _ = parse("a | b; c")
    assert [c.background for c in commands] == [False, False, False]


def test_parse_raises_on_what_it_cannot_read():
    with pytest.raises(ParseError):
        parse("echo $(")
    with pytest.raises(ParseError):
        parse("echo " + "a " * (25 * 1024 * 1024))


# -- the second adversarial review (tests/guard/test_guard_adversary.py): bash as the oracle ------------


@pytest.mark.parametrize(
    "script, expected",
    [
        # a new branch at another start point checks that point out; where HEAD is, the tree stays
        ("git checkout -q -b x other", None),
        ("git checkout -bx other", None),
        ("git checkout -B x other", None),
        ("git checkout --orphan x other", None),
        ("git switch -c x other", None),
        ("git switch -C x other", None),
        ("git checkout -b x", []),
        ("git checkout -b x HEAD", []),
        ("git switch -c x", []),
        # extglob: one word up to its `)`, a `#` inside no comment
        ("shopt -s extglob\necho !(#) > src/eg", ["src/eg"]),
        ("shopt -s extglob\ncase x in @(y|#)) ;; esac; touch src/eg2", ["src/eg2"]),
        ("shopt -s extglob\nrm src/@(a|b)", None),
        ("echo x@(y|#) > src/eg3", ["src/eg3"]),
        # a bare CR is part of a word
        ("echo x\r# > src/crh", ["src/crh"]),
        ("cd src\r; touch x", ["x"]),
        # descriptors holding a directory
        ("exec 3<src; echo x > /dev/fd/3/fd1", ["src/fd1"]),
        ("exec 3<src; echo x > /proc/self/fd/3/fd2", ["src/fd2"]),
        ("{ echo x > /dev/fd/3/fd3; } 3<src", ["src/fd3"]),
        ("echo x < src > /dev/stdin/f", ["src/f"]),
        ("echo x > /dev/stdin/f < src", None),
        ("exec 3<src; cd /dev/fd/3 && touch y", ["src/y"]),
        ("exec 3<src; echo x > /dev/./fd/3/f; echo > /dev/fd/3/../z", ["src/f", "z"]),
        ("exec 3<src 4<&3 3<&-; echo x > /dev/fd/4/g", ["src/g"]),
        ("exec 3<src; exec 3<&-; echo x > /dev/fd/3/h", None),
        ("echo x > /dev/fd/4/f", None),
        ("echo x > /proc/1/fd/1", None),
        # HOME and TMPDIR for one command, and a relative HOME
        ("HOME=$PWD/src bash -c 'touch ~/h1'", ["src/h1"]),
        ("HOME=$PWD/docs eval 'touch ~/h3'", ["docs/h3"]),
        ("env HOME=$PWD/docs bash -c 'touch ~/h4'", ["docs/h4"]),
        ("HOME=$PWD/docs env bash -c 'touch $HOME/h5'", ["docs/h5"]),
        ("cd src/sub; HOME=..; cd; touch h6", ["src/h6"]),
        ("TMPDIR=$PWD/src mktemp", ["src/tmp.XXXXXXXXXX"]),
        ("TMPDIR=src mktemp -t x.XXXX", ["src/x.XXXX"]),
        ("TMPDIR=src mktemp -p docs x.XXXX", ["docs/x.XXXX"]),
        ("mktemp -t x.XXXX; mktemp", []),
        # the working directory as bash has it
        ("pushd -n plan/w1 > /dev/null; touch src/pn", ["src/pn"]),
        ("pushd -n src > /dev/null; touch plan/w1/pdn", ["plan/w1/pdn"]),
        ("pushd -n src; popd; touch x", ["src/x"]),
        ("f() { cd plan/w1; }; unset -f f; f 2>/dev/null; touch src/un", ["src/un"]),
        ("f() { touch src/fn; }; unset -f f; f 2>/dev/null; touch plan/w1/ok", ["plan/w1/ok"]),
        ("f() { touch src/fn; }; unset f; f", ["src/fn"]),
        ("enable -n exit; exit 2>/dev/null; touch src/ex", ["src/ex"]),
        ("f() { cd src; return; cd ../plan/w1; }; f; touch fr", ["src/fr"]),
        ("f() { if true; then return; fi; touch src/no; }; f; touch y", ["y"]),
        ("return; touch x", ["x"]),
        ("for i in 1; do cd src; break; cd ../plan/w1; done; touch br", ["src/br"]),
        ("for i in 1; do for j in 2; do break 2; done; cd src; done; touch b", ["b"]),
        ("for i in 1; do eval break; cd src; done; touch e", ["e"]),
        ("while true; do cd src; continue; touch no; done; touch w", ["src/w"]),
        ("break; touch x", ["x"]),
        ("f() { break; cd src; }; for i in 1; do f; done; touch f", ["src/f"]),
        ("for i in 1; do (break; touch l); done", ["l"]),
        # which branch of a case runs is not known: an exit, return or break in one may not run
        ("case $x in a) exit;; esac; touch y", ["y"]),
        ("for i in 1; do case $i in 1) break;; esac; cd src; done; touch z", ["src/z"]),
        ("f() { case $1 in a) return;; esac; cd src; }; f b; touch w", ["src/w"]),
        # a [[ ]] decides nothing it cannot know: the status before it is not its status
        ("false; if [[ -f x ]]; then touch y; fi", ["y"]),
        ("cd plan/w1/srcdir && cd -P .. && touch cdp", ["cdp"]),
        ("set -P; cd plan/w1/srcdir/..; touch sp", ["sp"]),
        ("set -o physical; cd plan/w1/srcdir/..; touch sp2", ["sp2"]),
        ("set -P; set +P; cd plan/w1/srcdir/..; touch lp", ["plan/w1/lp"]),
        ("cd -P plan/w1/srcdir && cd -L .. && touch l2", ["l2"]),
        # cp -P, -a, -d, -r copy a symbolic link as a link
        ("cp -P plan/w1/link plan/w1/lc && echo x >> plan/w1/lc", ["plan/w1/lc", "src/a.py"]),
        ("cp -a plan/w1/link plan/w1/lc2 && echo x > plan/w1/lc2", ["plan/w1/lc2", "src/a.py"]),
        ("cp -d plan/w1/srcdir plan/w1/sd && touch plan/w1/sd/n", ["plan/w1/sd", "plan/w1/sd/n", "src/n"]),
        ("cp -r plan/w1 plan/bk; echo x > plan/bk/link", ["plan/bk", "plan/bk/link", "src/a.py"]),
        # a copy one level deeper: the same relative link leads elsewhere (plan/src/a.py, where no write lands)
        ("cp -r plan/w1 plan/w1/bk; echo x > plan/w1/bk/link", ["plan/w1/bk", "plan/w1/bk/link"]),
        ("cp plan/w1/link plan/w1/lc4 && echo x > plan/w1/lc4", ["plan/w1/lc4"]),
        ("cp -L -r plan/w1 plan/w1/bk2; echo x > plan/w1/bk2/link", ["plan/w1/bk2", "plan/w1/bk2/link"]),
        # NUL ends a $'...' string; bytes and lone surrogates stay as the file system gets them
        ("echo hi > $'src/b.py\\x00'", ["src/b.py"]),
        ("echo hi > $'src/b.py\\0'", ["src/b.py"]),
        ("touch $'src/new\\c@x'y", ["src/newy"]),
        ("touch $'src/\\xc3\\xa9'", ["src/\u00e9"]),
        ("touch $'src/\\xff'", ["src/\udcff"]),
        ("touch $'src/\\ud800'", ["src/\udced\udca0\udc80"]),
        ("touch src/a\x00b", ["src/ab"]),
        ("touch src/\ud800", ["src/\ufffd"]),
        # git's global configuration and a template's hooks
        ("HOME=$PWD/docs git maintenance register", ["docs/.gitconfig"]),
        ("HOME=$PWD/docs git config --global user.name x", ["docs/.gitconfig"]),
        ("git maintenance register --config-file plan/c", ["plan/c"]),
        # this tree has no .git: git init makes one (in a checkout, .git is there and is git's own)
        ("git init -q --template=plan/w1/tpl", [".git", ".git/hooks"]),
        # git makes plan/g itself (HEAD, config, objects/), not only its hooks: git is the oracle
        ("git init --template plan/w1/tpl --separate-git-dir=plan/g sub", ["sub", "plan/g", "plan/g/hooks"]),
        ("git init --bare --template=t b", ["b", "b/hooks"]),
        ("git init -q", [".git"]),
        ("f() { touch src/cg2; }; compgen -F f x", ["src/cg2"]),
        ("compgen -W '$(touch src/cw)' x", ["src/cw"]),
        ("mapfile -C 'cd src' -c 1 a < f; touch m", ["src/m"]),
    ],
)
def test_the_second_review(tree, script, expected):
    found = writes(script, tree)
    assert not found.read, script
    if expected is None:
        assert found.unknown, (script, found.paths)
    else:
        assert rel(found, tree) == expected, (script, found.paths, found.unknown)
        for path in found.paths:
            os.path.lexists(path)  # never a string os functions refuse


def test_home_and_tmpdir_set_for_one_command_are_not_kept():
    assert writes("git maintenance register", "/r").paths == [os.path.expanduser("~/.gitconfig")]
    assert writes("HOME=/h true; touch ~/x", "/r").paths == [os.path.expanduser("~/x")]
    assert writes("env HOME=/h true; touch ~/x", "/r").paths == [os.path.expanduser("~/x")]
    assert writes("TMPDIR=/r/src true; mktemp", "/r").paths == []
    assert writes("export HOME=/h; touch ~/x", "/r").paths == ["/h/x"]
    found = writes("echo x > /dev/fd/1; echo y > /proc/self/fd/2", "/r")
    assert found.paths == [] and found.read


@pytest.mark.parametrize(
    "script",
    [
        # code run by builtins proctor reads as reads
        "mapfile -C 'touch src/mf' -c 1 a <<< x",
        "readarray -C 'touch src/mf2' -c 1 a < plan/w1/list",
        "compgen -C 'touch src/cg' x",
        "compgen -F g x",
        # a subscript that runs a command when bash evaluates it
        "let 'a[$(touch src/ar1)]=1'",
        "x='a[$(touch src/ar2)]'; echo $((x))",
        "x='a[$(touch src/ar3)]'; [[ $x -eq 0 ]]",
        "test -v 'a[$(touch src/ar4)]'",
        "[[ -v 'a[$(touch src/ar4)]' ]]",
        "printf -v 'a[$(touch src/ar5)]' %s x",
        "read 'a[$(touch src/ar6)]' <<< x",
        "declare -i n; n='a[$(touch src/ar7)]'",
        "x='a[$(touch src/ar8)]'; a=(1 2); echo ${a[x]}",
        "x='a[$(touch src/ar9)]'; echo ${PWD:x:1}",
        "unset 'a[$(touch src/ar10)]'",
        "declare 'a[$(touch src/ar11)]=1'",
        # git options and transports that run a program
        "git ls-remote --upload-pack='touch src/lsr; git-upload-pack' .",
        "git ls-remote -u 'touch src/lsr' .",
        "git fetch -q --upload-pack='touch src/fup' .",
        "git push -q --receive-pack='touch src/rp' . HEAD:refs/heads/zz",
        "git push -q --exec='touch src/rp2' . HEAD:zz",
        "git archive --remote=. --exec='touch src/arx' HEAD",
        "git fetch-pack --exec='touch src/fp' .",
        "git -c protocol.ext.allow=always ls-remote origin",
        "GIT_ALLOW_PROTOCOL=ext git ls-remote origin",
        "git ls-remote 'ext::sh -c touch% src/ext'",
        "git clone --origin=o ext::x y",
        "git config remote.o.uploadpack 'touch src/x'",
        # a builtin turned off, a function maybe removed
        "enable -n cd; cd src",
        "f() { :; }; unset f; f",
    ],
)
def test_more_code_proctor_cannot_see_is_unknown(script):
    found = writes(script, "/r")
    assert found.unknown and not found.read, (script, found.paths)


@pytest.mark.parametrize(
    "script",
    [
        "let i++",
        "x=1; echo $((x + 1))",
        "read -r line < f",
        "printf -v x %s y",
        "mapfile -t lines < f",
        "compgen -W 'a b' a",
        "unset x",
        "git ls-remote origin",
        "[[ -v x ]]",
        "test -v 'a[1]'",
    ],
)
def test_their_plain_forms_stay_reads(script):
    found = writes(script, "/r")
    assert found.read and not found.unknown, (script, found.paths, found.unknown)


def test_named_holds_every_path_a_script_mentions(tree):
    def named(script):
        return [p[len(tree) + 1 :] if p.startswith(tree + "/") else p for p in writes(script, tree).named]

    assert named("cat < /s/server/token") == ["/s/server/token"]
    assert named("x=$(</s/server/token); echo $x") == ["/s/server/token"]
    assert named("while read l; do echo $l; done < /s/token") == ["/s/token", "l"]
    assert named("cat /s/server/tok* /s/serve?/token") == ["/s/server/tok*", "/s/serve?/token"]
    assert named("cd src && cat a.py") == ["src", "src/a.py"]
    assert named("cd plan/w1/srcdir && cat ../x") == ["plan/w1/srcdir", "x"]
    assert named("grep -r --file=/s/p . docs") == ["/s/p", tree, "docs"]
    assert named('for f in /s/server/*; do cat "$f"; done') == ["/s/server/*"]
    assert named("env -C /s cat token") == ["/s", "cat", "token", "/s/token"]
    assert named("cat <<< /s/x; cat <<EOF\n/s/y\nEOF") == []
    assert named("exec 3<src; cat /dev/fd/3/a.py") == ["src", "src/a.py"]
    assert named("echo x > out 2>&1") == ["out", "x"]
    assert len(writes("cat " + " ".join(f"f{i}" for i in range(5000)), tree).named) == 2000


def test_git_init_in_a_checkout_writes_its_own_store_only_when_new(tmp_path):
    """git init with no directory: in a checkout's top, .git is there already and is git's own
    (nothing written but a template's hooks); in a subdirectory it makes a nested repository;
    bare, it writes right where it runs."""
    root = tmp_path / "repo"
    (root / "sub").mkdir(parents=True)
    git_init = subprocess.run(["git", "init", "-q", str(root)], capture_output=True)
    assert git_init.returncode == 0, git_init.stderr
    top, sub = str(root), str(root / "sub")
    assert writes("git init -q", top).paths == []
    assert writes("git init -q", sub).paths == [os.path.join(sub, ".git")]
    assert writes("git init --bare", sub).paths == [sub]
    assert writes("git --bare init", sub).paths == [sub]
    assert writes("git --git-dir=g2 init", top).paths == [os.path.join(top, "g2")]
    assert writes("GIT_DIR=g3 git init", top).paths == [os.path.join(top, "g3")]
    assert writes("git init --shared newrepo", top).paths == [os.path.join(top, "newrepo")]
