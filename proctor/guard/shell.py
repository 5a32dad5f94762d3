"""Reading a shell command for what it writes, and whether it is a read: a real parse, never a
regex over the string.

Parsing. A tokenizer that knows quoting (single, double, $'...'), escapes, comments, operators,
redirections and here-documents turns a script into simple commands, each tagged with the
subshell scope it runs in (( ), a pipeline element, a background list). Every substitution is
parsed where it runs: $( ), backticks, <( ), >( ), and those inside ${x:-$(...)}, $(( )) and
unquoted here-document bodies. A quoted string, a quoted here-document's body, [[ ]] and (( ))
are data or tests, never commands or redirections. Words are cut as bash cuts them: a bare CR
is part of a word (`x\r#` starts no comment), an extended glob (`@(a|#)`, `!(x)` once the
script names extglob) is one word up to its `)`, a $'...' string ends at a NUL it decodes, and
bytes that are no UTF-8 (`\xff`, a lone `\ud800`) are kept as surrogate escapes, so that os
functions take every path; a NUL in the script itself is dropped, a lone surrogate replaced.

Judging. Each simple command is expanded (braces, ~, $PWD and $HOME), unwrapped (env -S/-C,
sudo, nice, timeout, xargs, flock, watch, script -c, taskset, exec -a, command, busybox, ...)
and looked up:
- the read list: _READS (programs that write nothing whatever their arguments), and the
  readers of _PROGRAMS whose arguments decide (sed without -i or w, awk without print > or
  system(), sort without -o, find without -delete or -exec of a writer, tar -t, git status,
  proctor ls, ...): a handler that records nothing leaves its command a read. A script of
  nothing else, with no redirection to a file, `is_read`;
- a writer whose targets it names (redirections, tee, cp/mv/ln/install, rm, touch, sed -i,
  perl -i, dd, curl -o, tar -C, git checkout -- path, ...): those paths, resolved against the
  directory the command runs in (cd, cd -, pushd/popd, a cd that fails, env -C, git -C and
  --work-tree); `no_follow` holds those it removes or replaces rather than writes through;
- a program known to write nothing in the work tree (git commit, kill, proctor job ...): no
  read, and nothing to name;
- anything else -- an interpreter, a script file, a build tool, a program proctor does not
  know, a path held in a variable -- is `unknown`, with a short reason: never silently nothing.
Shell functions run their bodies where they are called (until a definite `return`; `unset -f`
removes one), aliases expand once expand_aliases is on, `true`/`false`/`test` on literal words
decide &&, || and if, a definite `exit` ends the script (unless `enable -n` turned it off) and a
definite `break`/`continue` its loop. cd follows bash: `pushd -n` moves nothing, `cd -P` and
`set -P` resolve links before `..`, a HOME or TMPDIR prefixed to a command holds for it alone
(`HOME=x bash -c 'touch ~/y'`, `TMPDIR=d mktemp`). Links made in the same call (ln, ln -s,
cp -l/-s, and the symbolic links cp -P/-a/-r copies as links) are followed: a write through one
names its target too; /proc/self/cwd and /proc/$$/cwd are the command's own directory, and
/dev/fd/N/... a directory the script holds open on N (`exec 3<dir`). Code bash runs where a
reader is expected is unknown or judged: mapfile -C and compgen -C/-F/-W, a subscript that runs
a command (`a[$(cmd)]` reaching let, read, printf -v, test -v, unset, declare, or arithmetic
through a variable's value), git's --upload-pack/--receive-pack/--exec and ext:: transport.

`named` lists every path the script mentions, read or written (its words, and its redirections'
targets, `< f` and `$(< f)` included), resolved where each command runs, a glob as its pattern:
for rules that refuse a read (proctor's server token).

A script too large to judge within a fixed budget of steps is `unknown` ("too large to judge").
Core: the standard library only, and cheap at import (the regular expressions are compiled on
first use), because the hook runs it on every tool call.

Layout. This module is the public face (Writes, writes, is_read, and parse, ParseError, Word,
Command, patch_paths, patch_edits, diff_paths re-exported); the work is done in
proctor.guard.shell_lexer (the lexer and parser: text into Commands of Words),
proctor.guard.shell_writers (the writer tables: wrappers, builtins, the read list and a handler
per program) and proctor.guard.shell_judge (the judge walking the commands with the shell's
state). The lexer imports neither of the others; the writer tables import the lexer's types.
"""

from __future__ import annotations

from proctor.guard.shell_judge import _Judge
from proctor.guard.shell_lexer import Command, ParseError, Word, _clean, _TooLarge, parse
from proctor.guard.shell_writers import diff_paths, patch_edits, patch_paths

__all__ = [
    "Command",
    "ParseError",
    "Word",
    "Writes",
    "diff_paths",
    "is_read",
    "parse",
    "patch_edits",
    "patch_paths",
    "writes",
]


class Writes:
    """What a script writes: resolved paths (absolute), descriptions of writes it cannot name,
    and whether it is a read (every command on the read list, no redirection to a file)."""

    __slots__ = (
        "paths",
        "unknown",
        "commands",
        "stdins",
        "heredocs",
        "simple",
        "read",
        "no_follow",
        "named",
        "_seen",
        "_unknown_seen",
        "_more",
        "_named_seen",
    )

    def __init__(self) -> None:
        self.simple: list[tuple[list[str], list[str], bool]] = []  # (argv with wrappers, argv, background)
        self.heredocs: list[str] = []  # here-document bodies: data, kept for rules that read records
        self.paths: list[str] = []
        self.unknown: list[str] = []  # descriptions of writes whose target proctor cannot name
        self.commands: list[list[str]] = []  # every simple command's argv, wrappers removed
        # beside each of `commands`: the text it reads on standard input when that is its own
        # here-document or here-string with nothing expanded in it, else None (a pipe, a file,
        # an expansion, or the terminal)
        self.stdins: list[str | None] = []
        self.read = True  # nothing but reads proctor knows
        # paths whose last component is removed or replaced, not written through (rm, mv, ln -f,
        # sed -i, ...): a symbolic link there is the link itself, not where it leads
        self.no_follow: set[str] = set()
        # every path the script names, read or written: its words and its redirections' targets
        # (`< f` and `$(< f)` included), absolute, resolved where each command runs; a glob kept
        # as its pattern. At most _MAX_NAMED.
        self.named: list[str] = []
        self._seen: set[str] = set()
        self._unknown_seen: set[str] = set()
        self._more = 0
        self._named_seen: set[str] = set()


def writes(script: str, cwd: str, depth: int = 0) -> Writes:
    """Every path `script` writes, resolved against `cwd` (and any `cd` along the way); what it
    may write but cannot be named in `.unknown`; whether it is nothing but reads in `.read`."""
    script = _clean(script)
    found = Writes()
    judge = _Judge(found)
    judge.depth = depth
    try:
        judge.script(script, cwd, None, child=True)
    except _TooLarge:
        judge.unknown(f"a command too large to judge ({len(script)} bytes)")
    except RecursionError:
        judge.unknown("a command nested too deeply to judge")
    except Exception as exc:  # never a crash in the hook: what cannot be read is unknown
        judge.unknown(f"a command proctor failed to read ({type(exc).__name__})")
    if found._more:
        found.unknown.append(f"and {found._more} more writes proctor cannot name")
    return found


def is_read(script: str, cwd: str) -> bool:
    """Whether `script` is a read: every command it runs (substitutions, bash -c, eval and
    here-document shells included) is on proctor's read list, its arguments checked, and no
    redirection writes a file."""
    return writes(script, cwd).read
