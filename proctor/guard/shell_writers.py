"""The writer tables: per program, which of its arguments write which paths.

_WRAPPERS (env, sudo, nice, timeout, xargs, ... : where the wrapped command starts), _BUILTINS
(cd, eval, source, alias, set, read, printf -v, unset, return, break, exit, ...: what a builtin
does to the shell's state), the read list (_READS) and the programs run as code (_INTERPRETERS,
_BUILDERS, _CODE_VARIABLES, _COMMAND_VARIABLES), and _PROGRAMS: a handler per program whose
arguments decide what it writes (tee, cp, mv, ln, rm, sed -i, perl -i, awk, find, sort -o, dd,
curl -o, tar, unzip, gzip, patch, split, ed, mktemp, git, proctor, apply_patch, ...). A handler
records what it finds on the judge it is given (proctor.guard.shell_judge); one that records
nothing leaves its command a read. Also here: the GNU option reader the handlers share (_getopt,
_options), and the readers of patches and diffs (patch_paths, patch_edits, diff_paths).
It imports the lexer's types, never the judge (whose type it names for the type checker only).
Core: the standard library only, and cheap at import, because the hook runs it on every tool call.
"""

from __future__ import annotations

import os
import re

from proctor.guard.shell_lexer import (
    Command,
    ParseError,
    Word,
    _is_assignment,
    _Parser,
    _r,
    _subscript_code,
    _TooLarge,
    _unquoted_glob,
)

# true only for the type checker (mypy reads a name TYPE_CHECKING as true): no import at run time
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Literal

    from proctor.guard.shell_judge import _Judge


_SYSTEM_DIRS = frozenset(
    (
        "/bin",
        "/sbin",
        "/usr/bin",
        "/usr/sbin",
        "/usr/local/bin",
        "/usr/local/sbin",
        "/opt/homebrew/bin",
        "/opt/local/bin",
        "/run/current-system/sw/bin",
    )
)


class _Exit(Exception):
    """A definite `exit`: the shell running it ends there."""


class _Return(Exception):
    """A definite `return` in a function: its body ends there, in `state` (cwd, oldpwd)."""

    def __init__(self) -> None:
        super().__init__()
        self.state: tuple | None = None


class _Break(Exception):
    """A definite `break` or `continue` of `levels` loops."""

    def __init__(self, levels: int) -> None:
        super().__init__()
        self.levels = levels
        self.state: tuple | None = None  # where an eval's break left the shell


def patch_paths(patch: str) -> list[str]:
    """Files an apply_patch body touches (`*** Update File: path`, Add, Delete, Move to)."""
    paths = []
    for line in patch.split("\n"):  # apply_patch splits on \n alone and trims a header line
        line = line.strip()
        for marker in ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "):
            if line.startswith(marker) and line[len(marker) :].strip():
                paths.append(line[len(marker) :].strip())
    return paths


def patch_edits(patch: str) -> dict[str, list[tuple[str, str]] | None]:
    """Per file an apply_patch body updates in place, its hunks as (old text, new text) pairs
    (context and removed lines; context and added lines); None for a file it adds, deletes or
    moves, or a hunk with no old line to find it by: a whole-file write."""
    out: dict[str, list[tuple[str, str]] | None] = {}
    current: str | None = None
    old: list[str] = []
    new: list[str] = []

    def close() -> None:
        if current is not None and (old or new):
            hunks = out.get(current)
            if hunks is not None:
                if not old:
                    out[current] = None
                else:
                    hunks.append(("\n".join(old), "\n".join(new)))
        old.clear()
        new.clear()

    last_update: str | None = None
    for line in patch.split("\n"):  # as apply_patch reads it: \n alone ends a line
        header = line.strip()
        if header.startswith(
            (
                "*** Add File: ",
                "*** Update File: ",
                "*** Delete File: ",
                "*** Move to: ",
                "*** End of File",
                "*** Begin Patch",
                "*** End Patch",
            )
        ):
            close()
            if header.startswith("*** End of File"):
                continue  # a marker inside the file's hunks: the file goes on
            current = None
            line = header
            for marker in ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "):
                path = line[len(marker) :].strip() if line.startswith(marker) else ""
                if not path:
                    continue
                if marker == "*** Update File: ":
                    current = last_update = path
                    out.setdefault(path, [])
                else:
                    out[path] = None
                    if marker == "*** Move to: " and last_update is not None:
                        out[last_update] = None  # a moved file is written whole under its new name
            continue
        if current is None:
            continue
        if line.startswith("@@"):
            close()
        elif line[:1] in (" ", "-"):
            old.append(line[1:])
            if line[:1] == " ":
                new.append(line[1:])
        elif line[:1] == "+":
            new.append(line[1:])
        elif line == "":
            old.append("")
            new.append("")
    close()
    return out


def diff_paths(diff: str, strip: int | None) -> list[str] | None:
    """Files a unified diff (or a git diff) changes, with `strip` leading components taken off
    (patch -p); None when a name cannot be read (no -p given to patch, or /dev/null both sides)."""
    out: list[str] = []
    old = None
    for line in diff.split("\n"):
        if line.startswith("--- "):
            old = line[4:].split("\t")[0].strip()
        elif line.startswith("+++ ") and old is not None:
            new = line[4:].split("\t")[0].strip()
            for name in (old, new):
                if name == "/dev/null":
                    continue
                if name.startswith('"'):
                    return None
                if strip is None:
                    return None
                parts = name.split("/")
                if strip >= len(parts):
                    return None
                name = "/".join(parts[strip:])
                if name and name not in out:
                    out.append(name)
            old = None
    return out


def _program(text: str) -> str | None:
    """The program a command word runs: its name, or the basename of a path in a system
    directory; None for any other path (a program proctor cannot know)."""
    if "/" not in text:
        return text
    head, _, base = text.rpartition("/")
    head = os.path.normpath(head or "/")
    if head in _SYSTEM_DIRS or (head.startswith("/nix/store/") and head.endswith("/bin")) or base == "proctor":
        return base
    return None


def _getopt(
    args: list[Word],
    short_values: str = "",
    long_values: tuple = (),
    long_optional: tuple = (),
    short_optional: str = "",
) -> tuple[list[tuple[str, Word | None]], list[Word]]:
    """GNU-style options anywhere among `args`: ([(option, value)], operands). A long option may
    be abbreviated to any unambiguous prefix of one in long_values or long_optional."""
    opts: list[tuple[str, Word | None]] = []
    operands: list[Word] = []
    i, n = 0, len(args)
    while i < n:
        word = args[i]
        t = word.text
        if t == "--":
            operands.extend(args[i + 1 :])
            break
        if t.startswith("--") and len(t) > 2:
            name, eq, value = t.partition("=")
            name = _long(name, long_values + long_optional)
            if eq:
                opts.append((name, Word(value, word.dynamic, word.quoted)))
            elif name in long_values and i + 1 < n:
                opts.append((name, args[i + 1]))
                i += 1
            else:
                opts.append((name, None))
            i += 1
            continue
        if t.startswith("-") and len(t) > 1:
            i += 1
            for k in range(1, len(t)):
                ch = t[k]
                if ch in short_values:
                    if k + 1 < len(t):
                        opts.append(("-" + ch, Word(t[k + 1 :], word.dynamic, word.quoted)))
                    elif i < n:
                        opts.append(("-" + ch, args[i]))
                        i += 1
                    else:
                        opts.append(("-" + ch, None))
                    break
                if ch in short_optional:
                    opts.append(("-" + ch, Word(t[k + 1 :], word.dynamic, word.quoted) if k + 1 < len(t) else None))
                    break
                opts.append(("-" + ch, None))
            continue
        operands.append(word)
        i += 1
    return opts, operands


def _long(name: str, known: tuple) -> str:
    if name in known:
        return name
    matches = [k for k in known if k.startswith(name)]
    return matches[0] if len(matches) == 1 and len(name) > 3 else name


def _options(
    words: list[Word], i: int, short_values: str = "", long_values: tuple = ()
) -> tuple[list[tuple[str, Word | None]], int]:
    """A wrapper's options from words[i], up to its first operand or past `--`: (options, index)."""
    opts: list[tuple[str, Word | None]] = []
    n = len(words)
    while i < n:
        word = words[i]
        t = word.text
        if word.dynamic and t.startswith("-"):
            return opts, i
        if t == "--":
            return opts, i + 1
        if t.startswith("--") and len(t) > 2:
            name, eq, value = t.partition("=")
            name = _long(name, long_values)
            if eq:
                opts.append((name, Word(value, word.dynamic, word.quoted)))
                i += 1
            elif name in long_values:
                opts.append((name, words[i + 1] if i + 1 < n else None))
                i += 2
            else:
                opts.append((name, None))
                i += 1
            continue
        if t.startswith("-") and len(t) > 1:
            i += 1
            for k in range(1, len(t)):
                if t[k] in short_values:
                    if k + 1 < len(t):
                        opts.append(("-" + t[k], Word(t[k + 1 :], word.dynamic, word.quoted)))
                    else:
                        opts.append(("-" + t[k], words[i] if i < n else None))
                        i += 1
                    break
                opts.append(("-" + t[k], None))
            continue
        return opts, i
    return opts, i


def _has(opts: list[tuple[str, Word | None]], *names: str) -> bool:
    return any(o in names for o, _ in opts)


def _value(opts: list[tuple[str, Word | None]], *names: str) -> Word | None:
    out = None
    for o, v in opts:
        if o in names:
            out = v
    return out


# -- wrappers: (judge, words, index after the wrapper, cwd) -> (words, index of the wrapped
#    command, cwd, how) or None when nothing more runs --------------------------------------


def _wrapper(short_values: str = "", long_values: tuple = (), operands: int = 0, how: str | None = None):
    def unwrap(j: _Judge, words: list[Word], i: int, cwd):
        _, i = _options(words, i, short_values, long_values)
        return words, i + operands, cwd, how

    return unwrap


def _w_env(j: _Judge, words: list[Word], i: int, cwd):
    while i < len(words):
        word = words[i]
        t = word.text
        if word.dynamic and t.startswith("-"):
            j.unknown(f"env {t}: options held in a variable")
            return None
        if t == "--":
            i += 1
            break
        value = None
        if t in ("-C", "--chdir", "-S", "--split-string", "-u", "--unset"):
            value = words[i + 1] if i + 1 < len(words) else None
            consumed = 2
        elif t.startswith(("--chdir=", "--split-string=", "--unset=")):
            value, consumed = Word(t.split("=", 1)[1], word.dynamic, word.quoted), 1
            t = t.split("=", 1)[0]
        elif t.startswith(("-C", "-S", "-u")) and len(t) > 2:
            value, consumed = Word(t[2:], word.dynamic, word.quoted), 1
            t = t[:2]
        elif t.startswith("-") and len(t) > 1:
            i += 1
            continue
        elif _is_assignment(word):
            j.assign(word, cwd, None, standalone=False)
            i += 1
            continue
        else:
            break
        if value is None:
            return words, len(words), cwd, None
        if t in ("-C", "--chdir"):
            cwd = j.directory(value, cwd)
        elif t in ("-S", "--split-string"):
            if value.dynamic:
                j.unknown(f"env -S {value.text[:40]}: a command built from an expansion")
                return None
            try:
                parsed = _Parser(value.text, j.budget).parse()
            except ParseError:
                j.unknown(f"env -S {value.text[:40]}: unreadable")
                return None
            split = [w for c in parsed if c.kind == "simple" for w in c.words]
            words = words[:i] + split + words[i + consumed :]
            continue
        i += consumed
    return words, i, cwd, None


def _w_sudo(j: _Judge, words: list[Word], i: int, cwd):
    opts, i = _options(
        words,
        i,
        "CDghpRrTtUu",
        (
            "--chdir",
            "--close-from",
            "--group",
            "--host",
            "--prompt",
            "--chroot",
            "--role",
            "--type",
            "--command-timeout",
            "--other-user",
            "--user",
        ),
    )
    for o, v in opts:
        if o in ("-D", "--chdir") and v is not None:
            cwd = j.directory(v, cwd)
        if o in ("-R", "--chroot"):
            cwd = None
    if _has(opts, "-e", "--edit"):
        for word in words[i:]:
            j.write(word, cwd, "sudo -e")
        return None
    while i < len(words) and _is_assignment(words[i]):
        j.assign(words[i], cwd, None, standalone=False)
        i += 1
    if i >= len(words):
        if _has(opts, "-s", "--shell", "-i", "--login"):
            j.unknown("sudo -s: an interactive shell; proctor cannot tell what it writes")
        elif not _has(opts, "-l", "--list", "-V", "--version", "-h", "--help"):
            j.quiet()
        return None
    if _has(opts, "-l", "--list"):
        return None
    return words, i, cwd, None


def _w_flock(j: _Judge, words: list[Word], i: int, cwd):
    opts, i = _options(words, i, "wEc", ("--timeout", "--conflict-exit-code", "--command"))
    script = _value(opts, "-c", "--command")
    if i < len(words) and script is None:
        lock = words[i]
        i += 1
        if not lock.text.isdigit():
            path = j.target(lock, cwd, "flock")
            if path and not os.path.exists(path):
                j.add(path)
        more, i = _options(words, i, "wEc", ("--timeout", "--conflict-exit-code", "--command"))
        script = _value(more, "-c", "--command")
    if script is not None:
        return [script], 0, cwd, "script"
    return words, i, cwd, None


def _w_xargs(j: _Judge, words: list[Word], i: int, cwd):
    opts, i = _options(
        words,
        i,
        "adEILnPs",
        ("--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"),
    )
    replace = None
    for o, v in opts:
        if o in ("-I",) and v is not None:
            replace = v.text
        elif o in ("-i", "--replace"):
            replace = "{}" if v is None else v.text
    if i >= len(words):
        return words + [Word("echo")], i, cwd, "xargs"
    if replace:
        words = words[:i] + [
            Word(w.text, True, w.quoted, w.raw, why="names xargs reads from its input") if replace in w.text else w
            for w in words[i:]
        ]
        return words, i, cwd, "xargs -I"
    return words, i, cwd, "xargs"


def _w_watch(j: _Judge, words: list[Word], i: int, cwd):
    opts, i = _options(words, i, "nq", ("--interval", "--equexit"))
    if _has(opts, "-x", "--exec"):
        return words, i, cwd, None
    return words[i:], 0, cwd, "script"


def _w_script(j: _Judge, words: list[Word], i: int, cwd):
    opts, operands = _getopt(
        words[i:],
        "cBEIOTmo",
        (
            "--command",
            "--log-io",
            "--echo",
            "--log-in",
            "--log-out",
            "--log-timing",
            "--logging-format",
            "--output-limit",
        ),
    )
    for o, v in opts:
        if o in ("-B", "-I", "-O", "-T", "--log-io", "--log-in", "--log-out", "--log-timing") and v is not None:
            j.write(v, cwd, "script")
    j.write(operands[0] if operands else Word("typescript"), cwd, "script")
    command = _value(opts, "-c", "--command")
    if command is None:
        j.unknown("script: an interactive shell; proctor cannot tell what it writes")
        return None
    return [command], 0, cwd, "script"


def _w_taskset(j: _Judge, words: list[Word], i: int, cwd):
    opts, i = _options(words, i)
    if _has(opts, "-p", "--pid"):
        j.quiet()
        return None
    return words, i + 1, cwd, None


def _w_chrt(j: _Judge, words: list[Word], i: int, cwd):
    opts, i = _options(words, i, "TPD", ("--sched-runtime", "--sched-period", "--sched-deadline"))
    if _has(opts, "-p", "--pid", "-m", "--max"):
        j.quiet()
        return None
    return words, i + 1, cwd, None


def _w_ionice(j: _Judge, words: list[Word], i: int, cwd):
    opts, i = _options(words, i, "cnpPu", ("--class", "--classdata", "--pid", "--pgid", "--uid"))
    if _has(opts, "-p", "-P", "-u", "--pid", "--pgid", "--uid"):
        j.quiet()
        return None
    return words, i, cwd, None


def _w_time(j: _Judge, words: list[Word], i: int, cwd):
    opts, i = _options(words, i, "of", ("--output", "--format"))
    out = _value(opts, "-o", "--output")
    if out is not None:
        j.write(out, cwd, "time -o", stream=True)
    return words, i, cwd, None


def _w_trace(j: _Judge, words: list[Word], i: int, cwd):
    opts, i = _options(
        words,
        i,
        "abeEIoOpPsSuUX",
        ("--output", "--expr", "--attach", "--string-limit", "--user", "--env", "--trace-path", "--columns"),
    )
    for o, v in opts:
        if o in ("-o", "--output") and v is not None:
            j.write(v, cwd, "strace -o", stream=True)
    if _has(opts, "-p", "--attach") and i >= len(words):
        j.quiet()
        return None
    return words, i, cwd, None


def _w_su(j: _Judge, words: list[Word], i: int, cwd):
    opts, operands = _getopt(
        words[i:], "cgGsuw", ("--command", "--group", "--supp-group", "--shell", "--user", "--whitelist-environment")
    )
    command = _value(opts, "-c", "--command")
    if command is not None:
        return [command], 0, cwd, "script"
    if words[i - 1].text.endswith("runuser") and "--" in [w.text for w in words[i:]]:
        k = [w.text for w in words].index("--", i)
        return words, k + 1, cwd, None
    j.unknown(f"{words[i - 1].text}: an interactive shell; proctor cannot tell what it writes")
    return None


def _w_npx(j: _Judge, words: list[Word], i: int, cwd):
    opts, i = _options(words, i, "pc", ("--package", "--call"))
    command = _value(opts, "-c", "--call")
    if command is not None:
        return [command], 0, cwd, "script"
    return words, i, cwd, None


def _w_exec(j: _Judge, words: list[Word], i: int, cwd):
    _, i = _options(words, i, "a")
    return words, i, cwd, "exec"


def _w_command(j: _Judge, words: list[Word], i: int, cwd):
    opts, i = _options(words, i)
    if _has(opts, "-v", "-V"):
        return None
    return words, i, cwd, "exec"


def _w_busybox(j: _Judge, words: list[Word], i: int, cwd):
    if i < len(words) and words[i].text.startswith("-"):
        return None
    return words, i, cwd, "exec"


_WRAPPERS = {
    "env": _w_env,
    "sudo": _w_sudo,
    "doas": _wrapper("uC"),
    "nice": _wrapper("n", ("--adjustment",)),
    "nohup": _wrapper(),
    "setsid": _wrapper(),
    "stdbuf": _wrapper("ioe", ("--input", "--output", "--error")),
    "timeout": _wrapper("sk", ("--signal", "--kill-after"), operands=1),
    "gtimeout": _wrapper("sk", ("--signal", "--kill-after"), operands=1),
    "ionice": _w_ionice,
    "chrt": _w_chrt,
    "taskset": _w_taskset,
    "flock": _w_flock,
    "xargs": _w_xargs,
    "watch": _w_watch,
    "script": _w_script,
    "time": _w_time,
    "strace": _w_trace,
    "ltrace": _w_trace,
    "su": _w_su,
    "runuser": _w_su,
    "npx": _w_npx,
    "bunx": _w_npx,
    "pnpx": _w_npx,
    "exec": _w_exec,
    "command": _w_command,
    "builtin": _wrapper(how="exec"),
    "busybox": _w_busybox,
    "toybox": _w_busybox,
    "unbuffer": _wrapper(),
    "chronic": _wrapper(),
    "caffeinate": _wrapper("tw"),
    "eatmydata": _wrapper(),
    "catchsegv": _wrapper(),
}


# -- builtins: (judge, name, args, command, cwd, oldpwd, sure) -> new (cwd, oldpwd) or None ---


def _b_cd(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    physical = j.physical
    stay = False  # pushd -n, popd -n: the stack changes, the directory does not
    operands: list[Word] = []
    for k, word in enumerate(args):
        if word.text == "--":
            operands = args[k + 1 :]
            break
        if (
            word.text.startswith("-")
            and len(word.text) > 1
            and not word.dynamic
            and not (name != "cd" and word.text[1:].isdigit())
        ):
            for ch in word.text[1:]:
                if ch in "PL":
                    physical = ch == "P"
                elif ch == "n" and name != "cd":
                    stay = True
            continue
        operands = args[k:]
        break
    j.status = True
    if name == "popd":
        if stay:
            if j.dirstack and not operands:
                j.dirstack.pop()
            return None
        if any(w.text.startswith(("+", "-")) for w in args):
            return None, cwd
        if not j.dirstack:
            j.status = False
            return None
        return j.dirstack.pop(), cwd
    if name == "pushd":
        if not operands:
            if not j.dirstack:
                j.status = False
                return None
            new = j.dirstack.pop()
            j.dirstack.append(cwd)
            return new, cwd
        if operands[0].text.startswith(("+", "-")) and operands[0].text[1:].isdigit():
            return None if stay else (None, cwd)
    target = operands[0] if operands else None
    if target is None:
        if j.home == "":
            return None
        new = None if j.home is None else j.directory(Word(j.home), cwd)
    elif target.text == "-" and not target.quoted:
        new = oldpwd
    elif target.text == "" and not target.dynamic:
        return None
    elif (
        j.cdpath
        and not target.dynamic
        and not target.text.startswith(("/", "./", "../"))
        and target.text not in (".", "..")
    ):
        new = None
    else:
        new = j.directory(target, cwd)
    if new is not None and stay:
        j.dirstack.append(new)
        return None
    if new is not None:
        if physical:
            # cd -P: links resolved before `..` is taken
            if (
                target is not None
                and not target.dynamic
                and cwd is not None
                and not target.text.startswith("/")
                and target.text != "-"
            ):
                new = os.path.realpath(cwd.rstrip("/") + "/" + target.text)
            else:
                new = os.path.realpath(new)
        if not os.path.isdir(new) and new not in j.made:
            probe = new
            while probe not in ("/", "") and probe not in j.found._seen:
                probe = os.path.dirname(probe)
            if not j.found.unknown and probe in ("/", ""):
                j.status = False
                return None  # a cd that fails leaves the shell where it was
            j.status = None  # an earlier write (into a directory above it, or unnamed) may have made it
    else:
        j.status = None
    if name == "pushd":
        j.dirstack.append(cwd)
    return new, cwd


def _b_eval(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    if any(w.dynamic for w in args):
        j.unknown(f"eval {' '.join(w.text for w in args)[:60]}: a script built from an expansion")
        return None
    return j.script(" ".join(w.text for w in args), cwd, oldpwd, child=False)


def _b_source(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    if args and not args[0].dynamic and os.path.basename(args[0].text) in ("activate", "activate.sh"):
        return None  # a virtualenv's activate sets variables
    shown = args[0].text if args else ""
    j.unknown(f"{name} {shown}: runs a file in this shell; proctor cannot tell what it writes")
    return None


def _b_alias(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    for word in args:
        if name == "unalias":
            if word.text == "-a":
                j.aliases.clear()
            j.aliases.pop(word.text, None)
        elif "=" in word.text and not word.text.startswith("-"):
            alias, _, value = word.text.partition("=")
            j.aliases[alias] = (value, word.dynamic, j.script_id, command.line)
    j.status = True
    return None


def _b_shopt(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    texts = [w.text for w in args]
    if "expand_aliases" in texts and "-s" in texts:
        j.expand_aliases = True
    elif "expand_aliases" in texts and "-u" in texts:
        j.expand_aliases = False
    j.status = True
    return None


def _b_set(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    texts = [w.text for w in args]
    for k, t in enumerate(texts):
        if t == "--" or t[:1] not in ("-", "+") or len(t) < 2:
            break
        if "o" in t[1:] and k + 1 < len(texts) and texts[k + 1] == "physical":
            j.physical = t[0] == "-"
        if "P" in t[1:]:
            j.physical = t[0] == "-"
    if "--" in texts:
        rest = args[texts.index("--") + 1 :]
        j.positional = None if any(w.dynamic for w in rest) else [w.text for w in rest]
    j.status = True
    return None


def _b_declare(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    for word in args:
        if word.text[:1] in ("-", "+"):
            continue
        if _subscript_code(word.text.split("=", 1)[0]):
            j.unknown(f"{name} {word.text[:40]}: a subscript that runs a command")
        elif _is_assignment(word) or _r().assignment.match(word.text):
            j.assign(word, cwd, oldpwd, standalone=True)
        elif _subscript_code(word.text):
            j.unknown(f"{name} {word.text[:40]}: a subscript that runs a command")
    j.status = True
    return None


def _names(j: _Judge, name: str, words: list[Word]) -> None:
    """Variable names a builtin sets or reads: a subscript in one runs a command bash evaluates."""
    for word in words:
        if word is not None and _subscript_code(word.text):
            j.unknown(f"{name} {word.text[:40]}: a subscript that runs a command; proctor cannot tell what it writes")


def _b_read(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    opts, operands = _getopt(args, "adinNptu")
    _names(j, name, operands + [v for o, v in opts if o == "-a" and v is not None])
    j.status = None
    return None


def _b_printf(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    if args and args[0].text.startswith("-v"):
        variable = Word(args[0].text[2:]) if len(args[0].text) > 2 else (args[1] if len(args) > 1 else None)
        _names(j, "printf -v", [variable] if variable is not None else [])
        if any(_subscript_code(w.text) for w in args[1:]):
            j.unknown("printf -v: a value whose subscript runs a command when arithmetic reads it")
    j.status = None
    return None


def _b_let(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    _names(j, name, args)
    j.status = None
    return None


def _b_unset(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    functions = variables = False
    for word in args:
        t = word.text
        if t[:1] == "-" and len(t) > 1 and not word.dynamic:
            functions = functions or "f" in t
            variables = variables or "v" in t
            continue
        if word.dynamic:
            if not variables:
                j.unknown(f"unset {t[:40]}: a name held in a variable")
            continue
        _names(j, name, [word])
        if functions:
            j.functions.pop(t, None)
            j.unset_maybe.discard(t)
        elif not variables:
            if t in j.functions:
                j.unset_maybe.add(t)  # a variable of that name goes first, else the function
            if t == "HOME":
                j.home = None
            elif t == "TMPDIR":
                j.tmpdir = False
    j.status = True
    return None


def _b_return(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    if j.in_function and sure and command.scope == () and not command.background and command.next_op not in ("|", "|&"):
        raise _Return()
    return None


def _b_break(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    levels = int(args[0].text) if args and args[0].text.isdigit() and int(args[0].text) > 0 else 1
    if (
        j.loops
        and sure
        and command.scope == ()
        and not command.background
        and command.next_op not in ("|", "|&")
        and not (args and args[0].dynamic)
    ):
        raise _Break(levels)  # continue too: a body judged once ends there either way
    return None


def _b_mapfile(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    opts, operands = _getopt(args, "dnOsucC")
    _names(j, name, operands)
    callback = _value(opts, "-C")
    j.status = None
    if callback is None:
        return None
    if callback.dynamic:
        j.unknown(f"{name} -C {callback.text[:40]}: a callback built from an expansion")
        return None
    # bash evals the callback with the index and the line read appended
    return j.script(callback.text + ' "$MAPFILE_INDEX" "$MAPFILE_LINE"', cwd, oldpwd, child=False)


def _b_compgen(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    opts, _ = _getopt(args, "oAGWFCXPSV")
    j.status = None
    state = None
    for o, v in opts:
        if v is None:
            continue
        if o == "-W" and ("$" in v.text or "`" in v.text):
            # the word list is expanded: its substitutions run
            try:
                scanner = _Parser(v.text, j.budget, extglob=j.extglob)
                scanner._expansions()
            except ParseError:
                j.unknown(f"compgen -W {v.text[:40]}: a word list proctor cannot read")
                continue
            for sub in scanner.subs:
                j.run(sub, cwd, oldpwd)
        elif o == "-C":
            if v.dynamic:
                j.unknown(f"compgen -C {v.text[:40]}: a command built from an expansion")
            else:
                j.script(v.text + ' "$COMP_COMMAND" "$COMP_WORD" "$COMP_PREVIOUS"', cwd, oldpwd, child=True)
        elif o == "-F":
            if not v.dynamic and v.text in j.functions:
                state = j.call(v.text, [Word("$COMP_WORD", True)] * 3, cwd, oldpwd)
            else:
                j.unknown(f"compgen -F {v.text[:40]}: runs a function proctor has not seen")
    return state


def _b_trap(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    ops = [w for w in args if w.text not in ("--",)]
    if not ops or ops[0].text in ("-l", "-p", "-P", "-") or len(ops) < 2:
        return None
    action = ops[0]
    if action.dynamic:
        j.unknown(f"trap {action.text[:40]}: a handler built from an expansion")
    elif action.text:
        j.script(action.text, cwd, oldpwd, child=True)
    return None


def _b_exit(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    if sure and command.scope == () and not command.background and command.next_op not in ("|", "|&"):
        raise _Exit()
    return None


def _b_hash(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    if any(w.text.startswith("-") and "p" in w.text for w in args):
        j.unknown("hash -p: makes a name run another file; proctor cannot tell what it writes")
    return None


def _b_enable(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    if any(w.text.startswith("-") and "f" in w.text for w in args):
        j.unknown("enable -f: loads a builtin from a file; proctor cannot tell what it writes")
        return None
    j.quiet()
    off = any(w.text.startswith("-") and "n" in w.text for w in args)
    for word in args:
        if word.text.startswith("-"):
            continue
        if word.dynamic:
            j.unknown(f"enable {word.text[:40]}: a builtin named by an expansion")
        elif off:
            j.disabled.add(word.text)
        else:
            j.disabled.discard(word.text)
    return None


def _b_history(j: _Judge, name: str, args: list[Word], command: Command, cwd, oldpwd, sure):
    opts, operands = _getopt(args, "d")
    if opts:
        j.quiet()
        for word in operands:
            j.write(word, cwd, "history")
    return None


_BUILTINS = {
    "cd": _b_cd,
    "pushd": _b_cd,
    "popd": _b_cd,
    "eval": _b_eval,
    "source": _b_source,
    ".": _b_source,
    "alias": _b_alias,
    "unalias": _b_alias,
    "shopt": _b_shopt,
    "set": _b_set,
    "export": _b_declare,
    "declare": _b_declare,
    "typeset": _b_declare,
    "local": _b_declare,
    "readonly": _b_declare,
    "read": _b_read,
    "printf": _b_printf,
    "let": _b_let,
    "unset": _b_unset,
    "return": _b_return,
    "break": _b_break,
    "continue": _b_break,
    "mapfile": _b_mapfile,
    "readarray": _b_mapfile,
    "compgen": _b_compgen,
    "trap": _b_trap,
    "exit": _b_exit,
    "hash": _b_hash,
    "enable": _b_enable,
    "history": _b_history,
}

# The read list, part one: programs and builtins that write nothing and run nothing whatever
# their arguments. Part two is the readers in _PROGRAMS whose arguments decide (a handler that
# records no write leaves a read a read), _GIT_READS, and proctor's own read commands.
_READS = frozenset(
    """
    ls dir vdir cat tac head tail wc grep egrep fgrep zgrep zcat bzcat xzcat zstdcat lzcat ag ack echo printf
    pwd true false : test [ stat du df diff diff3 cmp comm cut tr jq paste join nl fold fmt column rev
    expand unexpand strings hexdump od basename dirname realpath readlink which whereis type ps pgrep pidof
    sleep id whoami groups logname users who uname uptime nproc free arch tty locale getconf seq expr factor
    numfmt cal printenv md5sum sha1sum sha224sum sha256sum sha384sum sha512sum b2sum cksum sum shasum md5 look
    lsblk lscpu help times jobs dirs wait getopts shift yes
    logout umask ulimit caller complete compopt disown fg bg suspend
""".split()
)

_INTERPRETERS = frozenset(
    """
    python python3 python2 pypy pypy3 ipython node nodejs deno bun ts-node tsx perl ruby irb php lua luajit
    Rscript R julia tclsh wish osascript pwsh powershell groovy java jshell scala kotlin swift elixir iex erl
    escript racket guile sbcl clisp ghci runghc runhaskell expect
""".split()
)

_BUILDERS = frozenset(("make", "gmake", "bmake", "ninja"))

# Variables through which a later program runs code proctor cannot read.
_CODE_VARIABLES = frozenset(
    """
    BASH_ENV ENV LD_PRELOAD LD_AUDIT PROMPT_COMMAND PS4 PERL5OPT PERL5LIB RUBYOPT NODE_OPTIONS PYTHONSTARTUP
    EDITOR VISUAL GIT_EDITOR GIT_SEQUENCE_EDITOR GIT_EXTERNAL_DIFF GIT_SSH GIT_SSH_COMMAND GIT_ASKPASS
    SSH_ASKPASS GIT_EXEC_PATH GIT_TEMPLATE_DIR GIT_CONFIG GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT
    GIT_CONFIG_GLOBAL GIT_CONFIG_SYSTEM GIT_PROXY_COMMAND GIT_PAGER PAGER MANPAGER LESSOPEN LESSCLOSE
    SHELLOPTS BASHOPTS
""".split()
)
_COMMAND_VARIABLES = frozenset(
    ("EDITOR", "VISUAL", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER", "PAGER", "MANPAGER")
)


# -- programs: (judge, name, args, cwd, command) -------------------------------------------


def _h_tee(j: _Judge, name, args, cwd, command):
    _, operands = _getopt(args, long_optional=("--output-error",))
    for word in operands:
        j.write(word, cwd, "tee", stream=True)


def _copy_like(j: _Judge, name, args, cwd, command):
    """cp, mv, install, ln: each source lands in the destination (or in a directory)."""
    j.quiet()
    short = {"cp": "St", "mv": "St", "ln": "St", "install": "gmoSt"}.get(name, "St")
    opts, operands = _getopt(
        args,
        short,
        (
            "--target-directory",
            "--suffix",
            "--mode",
            "--owner",
            "--group",
            "--strip-program",
            "--sparse",
            "--no-preserve",
        ),
        ("--backup", "--reflink", "--preserve", "--context", "--update"),
    )
    if _has(opts, "--strip-program"):
        j.unknown("install --strip-program: runs a program; proctor cannot tell what it writes")
    if name == "install" and _has(opts, "-d", "--directory"):
        for word in operands:
            j.write(word, cwd, "install -d")
        return
    target_dir = _value(opts, "-t", "--target-directory")
    no_target = _has(opts, "-T", "--no-target-directory")
    if (
        name == "ln"
        and _has(opts, "-n", "--no-dereference")
        and len(operands) >= 2
        and not operands[-1].dynamic
        and cwd is not None
    ):
        # -n: a link to a directory is replaced, not entered
        no_target = no_target or os.path.islink(os.path.join(cwd, operands[-1].text))
    symbolic = name == "ln" and _has(opts, "-s", "--symbolic") or name == "cp" and _has(opts, "-s", "--symbolic-link")
    hard = name == "ln" and not symbolic or name == "cp" and _has(opts, "-l", "--link")
    relative = _has(opts, "-r", "--relative") and name == "ln"
    if target_dir is not None:
        sources, destination, into_dir = operands, target_dir, True
    elif len(operands) >= 2:
        sources, destination = operands[:-1], operands[-1]
        into_dir = len(sources) > 1 or destination.text.endswith("/")
    elif name == "ln" and len(operands) == 1:
        sources, destination, into_dir = operands, Word("."), True
    else:
        return
    no_clobber = name in ("cp", "mv") and (
        _has(opts, "-n", "--no-clobber") or any(o == "--update" and v is not None and v.text == "none" for o, v in opts)
    )
    # cp writes through a link at its destination; mv, ln and install replace it
    follow = name == "cp" and not _has(opts, "--remove-destination")
    # cp -P, -d, -a (and -r without -L or -H) copy a symbolic link as a link: a write through the copy
    # lands where the link leads, read from the copy's own directory
    as_links = (
        name == "cp"
        and not symbolic
        and not hard
        and not _has(opts, "-L", "--dereference")
        and (
            _has(opts, "-P", "--no-dereference", "-d", "-a", "--archive")
            or (_has(opts, "-r", "-R", "--recursive") and not _has(opts, "-H"))
        )
    )
    for source in sources:
        base = os.path.basename(source.text.rstrip("/")) or source.text
        if into_dir:
            landed = Word(
                destination.text.rstrip("/") + "/" + base,
                destination.dynamic or source.dynamic,
                raw=destination.raw,
                why=destination.why or source.why,
            )
        else:
            landed = destination
        if no_clobber and not landed.dynamic:
            existing = j.target(landed, cwd, name, into=None if into_dir or no_target else base)
            if existing and os.path.lexists(existing) and existing not in j.made:
                continue  # -n: an existing destination is left alone
        path = j.write(landed, cwd, name, into=None if into_dir or no_target else base, follow=follow)
        if name == "mv":
            moved = j.write(source, cwd, "mv", follow=False)
            if moved and path and moved in j.links:
                j.links[path] = j.links[moved]
        if path and (symbolic or hard):
            j.link(path, source, cwd, symbolic, relative)
        elif path and as_links and not source.dynamic:
            j.copied_links(path, source, cwd)


def _h_link(j: _Judge, name, args, cwd, command):
    _, operands = _getopt(args)
    if len(operands) == 2:
        path = j.write(operands[1], cwd, "link")
        if path:
            j.link(path, operands[0], cwd, False, False)


def _operands_writer(
    short_values: str = "",
    long_values: tuple = (),
    skip: int = 0,
    follow: bool = True,
    no_create: str = "",
    no_follow: str = "",
):
    def handler(j: _Judge, name, args, cwd, command):
        j.quiet()
        opts, operands = _getopt(args, short_values, long_values)
        missing_ok = no_create and any(o in no_create.split() for o, _ in opts)
        follows = follow and not (no_follow and any(o in no_follow.split() for o, _ in opts))
        for word in operands[skip:]:
            if missing_ok and not word.dynamic:
                path = j.target(word, cwd, name)
                if path and not os.path.lexists(path) and path not in j.made:
                    continue
            j.write(word, cwd, name, follow=follows)

    return handler


def _h_chmod(j: _Judge, name, args, cwd, command):
    """chmod/chown/chgrp MODE FILE...: a mode like -x is an operand, not an option."""
    j.quiet()
    flags = {
        "-R",
        "-c",
        "-f",
        "-v",
        "-h",
        "-H",
        "-L",
        "-P",
        "--recursive",
        "--changes",
        "--silent",
        "--quiet",
        "--verbose",
        "--dereference",
        "--no-dereference",
        "--preserve-root",
        "--no-preserve-root",
    }
    operands: list[Word] = []
    reference = False
    k = 0
    while k < len(args):
        t = args[k].text
        if t == "--":
            operands.extend(args[k + 1 :])
            break
        if t in flags or (
            t.startswith("-") and len(t) > 1 and all(ch in ("Rcfv" if name == "chmod" else "RcfvhHLP") for ch in t[1:])
        ):
            k += 1
            continue
        if t.startswith("--reference") or t.startswith("--from"):
            reference = reference or t.startswith("--reference")
            k += 1 if "=" in t else 2
            continue
        operands.append(args[k])
        k += 1
    for word in operands[0 if reference else 1 :]:
        j.write(word, cwd, name)


def _h_sed(j: _Judge, name, args, cwd, command):
    scripts: list[Word] = []
    script_files = False
    follow_links = False
    in_place: str | None = None
    sandbox = False
    operands: list[Word] = []
    bsd_suffix: Word | None = None
    i, n = 0, len(args)
    while i < n:
        word = args[i]
        t = word.text
        if t == "--":
            operands.extend(args[i + 1 :])
            break
        if t.startswith("--") and len(t) > 2:
            key, eq, value = t.partition("=")
            key = _long(
                key,
                (
                    "--expression",
                    "--file",
                    "--in-place",
                    "--line-length",
                    "--sandbox",
                    "--separate",
                    "--follow-symlinks",
                ),
            )
            if key in ("--expression", "--file"):
                val = Word(value, word.dynamic) if eq else (args[i + 1] if i + 1 < n else Word(""))
                i += 1 if eq else 2
                if key == "--file":
                    j.unknown(f"sed -f {val.text}: a script file proctor does not read")
                    script_files = True
                else:
                    scripts.append(val)
                continue
            if key == "--in-place":
                in_place = value if eq else ""
            elif key == "--sandbox":
                sandbox = True
            elif key == "--follow-symlinks":
                follow_links = True
            elif key == "--line-length" and not eq:
                i += 1
            i += 1
            continue
        if t.startswith("-") and len(t) > 1:
            i += 1
            for k in range(1, len(t)):
                ch = t[k]
                if ch in "efl":
                    val = Word(t[k + 1 :], word.dynamic) if k + 1 < len(t) else (args[i] if i < n else Word(""))
                    if k + 1 >= len(t):
                        i += 1
                    if ch == "e":
                        scripts.append(val)
                    elif ch == "f":
                        j.unknown(f"sed -f {val.text}: a script file proctor does not read")
                        script_files = True
                    break
                if ch == "i":
                    in_place = t[k + 1 :]
                    if (
                        k + 1 == len(t)
                        and i < n
                        and not args[i].dynamic
                        and re.fullmatch(r"(\.[\w.~-]*)?", args[i].text)
                    ):
                        bsd_suffix = args[i]
                    break
            continue
        operands.append(word)
        i += 1
    e_scripts = list(scripts)

    def split(ops: list[Word]) -> tuple[list[Word], list[Word]]:
        return (ops, e_scripts) if e_scripts or script_files else (ops[1:], ops[:1])

    files, to_read = split(operands)
    if bsd_suffix is not None:
        # `sed -i '' SCRIPT FILE` is BSD's suffix, a word of its own; GNU reads '' as the script.
        # A file either reading names counts (GNU's only when it exists: they are sed's to open).
        k = next(k for k, w in enumerate(operands) if w is bsd_suffix)
        bsd_files, bsd_read = split(operands[:k] + operands[k + 1 :])
        for word in files:
            if not word.dynamic and all(word is not w for w in bsd_files):
                path = j.target(word, cwd, "sed -i")
                if path and os.path.lexists(path):
                    bsd_files.append(word)
        files = bsd_files
        to_read = to_read + [w for w in bsd_read if all(w is not x for x in to_read)]
    for script in to_read:
        if script.dynamic:
            j.unknown(f"sed {script.text[:40]}: a script built from an expansion")
        elif not sandbox:
            _sed_script(j, script.text, cwd)
    if in_place is not None:
        suffix = in_place or (bsd_suffix.text if bsd_suffix is not None else "")
        for word in files:
            path = j.write(word, cwd, "sed -i", follow=follow_links)
            if path and suffix:
                j.add(_backup(path, suffix))


def _backup(path: str, suffix: str) -> str:
    if "*" in suffix:
        made = suffix.replace("*", os.path.basename(path))
        return os.path.normpath(os.path.join(os.path.dirname(path), made))
    return path + suffix


def _sed_script(j: _Judge, script: str, cwd) -> None:
    """The commands of a sed script that write files (w, W, s///w) or run commands (e, s///e)."""
    i, n = 0, len(script)

    def rest_of_line(k: int) -> tuple[str, int]:
        end = script.find("\n", k)
        end = n if end < 0 else end
        return script[k:end].strip(), end

    def skip_regex(k: int, delim: str) -> int:
        while k < n and script[k] != delim:
            if script[k] == "\\":
                k += 1
            elif script[k] == "\n":
                return n
            k += 1
        return k + 1

    while i < n:
        while i < n and script[i] in " \t\n;":
            i += 1
        if i >= n:
            return
        # an address or two
        for _ in range(2):
            while i < n and script[i] in " \t":
                i += 1
            if i < n and script[i] == "/":
                i = skip_regex(i + 1, "/")
                while i < n and script[i] in "IM":
                    i += 1
            elif i < n and script[i] == "\\" and i + 1 < n:
                i = skip_regex(i + 2, script[i + 1])
                while i < n and script[i] in "IM":
                    i += 1
            else:
                while i < n and (script[i].isdigit() or script[i] in "$~+"):
                    i += 1
            if i < n and script[i] == ",":
                i += 1
                continue
            break
        while i < n and script[i] in " \t!":
            i += 1
        if i >= n:
            return
        c = script[i]
        i += 1
        if c in "{}=dDgGhHlnNpPqQxzF":
            while i < n and script[i].isdigit():
                i += 1
            continue
        if c == "#" or c == ":":
            _, i = rest_of_line(i)
            continue
        if c in "btTv":
            while i < n and script[i] not in ";\n}":
                i += 1
            continue
        if c in "aic":
            _, i = rest_of_line(i)
            while i < n and script[i - 1] == "\\":
                _, i = rest_of_line(i + 1)
            continue
        if c in "rR":
            _, i = rest_of_line(i)
            continue
        if c in "wW":
            target, i = rest_of_line(i)
            j.write(Word(target), cwd, f"sed {c}", stream=True)
            continue
        if c == "e":
            command, i = rest_of_line(i)
            if command:
                j.script(command, cwd, None, child=True)
            else:
                j.unknown("sed e: runs its pattern space as a command; proctor cannot tell what it writes")
            continue
        if c in "sy" and i < n:
            delim = script[i]
            i = skip_regex(i + 1, delim)
            i = skip_regex(i, delim)
            if c == "s":
                while i < n and script[i] in "gpiImMe0123456789w":
                    if script[i] == "e":
                        j.unknown("sed s///e: runs what it makes as a command; proctor cannot tell what it writes")
                    if script[i] == "w":
                        target, i = rest_of_line(i + 1)
                        j.write(Word(target), cwd, "sed s///w", stream=True)
                        break
                    i += 1
            continue
        return  # an unknown command: sed refuses the script


def _h_perl(j: _Judge, name, args, cwd, command):
    scripts: list[str] = []
    in_place: str | None = None
    modules = False
    i, n = 0, len(args)
    while i < n:
        t = args[i].text
        if t == "--":
            i += 1
            break
        if not t.startswith("-") or t == "-":
            break
        i += 1
        if t in ("-v", "-V", "--version", "--help", "-h") and n == 1:
            return
        k = 1
        while k < len(t):
            ch = t[k]
            if ch in "eE":
                if k + 1 < len(t):
                    scripts.append(t[k + 1 :])
                elif i < n:
                    scripts.append(args[i].text)
                    i += 1
                break
            if ch == "i":
                in_place = t[k + 1 :]
                break
            if ch in "MmIdDxC0lF":
                if ch in "Mm":
                    modules = True
                if ch == "I" and k + 1 >= len(t) and i < n:
                    i += 1
                break
            k += 1
    operands = args[i:]
    if not scripts:
        j.unknown(
            f"perl {operands[0].text if operands else '-'}: runs a perl script; proctor cannot tell what it writes"
        )
        files = operands[1:]
    else:
        files = operands
    if in_place is None:
        if scripts:
            j.unknown("perl -e: runs perl code proctor cannot read; it cannot tell what it writes")
        return
    risky = re.compile(
        r"\b(system|exec|open|sysopen|unlink|rename|link|symlink|mkdir|rmdir|truncate|chmod|"
        r"chown|utime|qx|syscall|fork|pipe|kill|require|use|do|eval|glob|readpipe|socket|dump)\b|`"
        r"|\$\^I|<\*"
    )
    if modules or any(risky.search(s) for s in scripts) or any(w.dynamic for w in args[:i]):
        j.unknown("perl -i: its script may write other files; proctor cannot tell")
    for word in files:
        path = j.write(word, cwd, "perl -i", follow=False)
        if path and in_place:
            j.add(_backup(path, in_place))


def _h_awk(j: _Judge, name, args, cwd, command):
    programs: list[Word] = []
    in_place = False
    sandbox = False
    i, n = 0, len(args)
    while i < n:
        word = args[i]
        t = word.text
        if t == "--":
            i += 1
            break
        if not t.startswith("-") or t == "-":
            break
        i += 1
        if t.startswith("--"):
            key, eq, value = t.partition("=")
            key = _long(
                key,
                (
                    "--field-separator",
                    "--assign",
                    "--file",
                    "--source",
                    "--include",
                    "--load",
                    "--exec",
                    "--dump-variables",
                    "--pretty-print",
                    "--profile",
                    "--sandbox",
                ),
            )
            if (
                key in ("--field-separator", "--assign", "--file", "--source", "--include", "--load", "--exec")
                and not eq
            ):
                value = args[i].text if i < n else ""
                i += 1
            if key == "--source":
                programs.append(Word(value, word.dynamic))
            elif key in ("--file", "--exec"):
                j.unknown(f"{name} -f {value}: a program file proctor does not read")
            elif key == "--include":
                if value in ("inplace", "inplace.awk"):
                    in_place = True
                else:
                    j.unknown(f"{name} -i {value}: loads awk code proctor does not read")
            elif key == "--load":
                j.unknown(f"{name} -l {value}: loads an extension; proctor cannot tell what it writes")
            elif key in ("--dump-variables", "--pretty-print", "--profile"):
                default = "awkvars.out" if key == "--dump-variables" else "awkprof.out"
                j.write(Word(value or default), cwd, f"{name} {key}", stream=True)
            elif key == "--sandbox":
                sandbox = True
            continue
        ch = t[1]
        value = t[2:]
        if ch in "FvfeEilW":
            if not value:
                value = args[i].text if i < n else ""
                i += 1
            if ch == "e":
                programs.append(Word(value))
            elif ch in "fE":
                j.unknown(f"{name} -{ch} {value}: a program file proctor does not read")
            elif ch == "i":
                if value in ("inplace", "inplace.awk"):
                    in_place = True
                else:
                    j.unknown(f"{name} -i {value}: loads awk code proctor does not read")
            elif ch == "l":
                j.unknown(f"{name} -l {value}: loads an extension; proctor cannot tell what it writes")
            elif ch == "W" and value.startswith("exec"):
                j.unknown(f"{name} -W {value}: a program file proctor does not read")
        elif ch in "dop":
            default = "awkvars.out" if ch == "d" else "awkprof.out"
            j.write(Word(value or default), cwd, f"{name} -{ch}", stream=True)
        elif ch == "S":
            sandbox = True
    operands = args[i:]
    if not programs and operands:
        programs.append(operands[0])
        operands = operands[1:]
    for program in programs:
        if program.dynamic:
            j.unknown(f"{name} {program.text[:40]}: a program built from an expansion")
        elif not sandbox:
            _awk_program(j, name, program.text, cwd)
    if in_place:
        for word in operands:
            if not _is_assignment(word):
                j.write(word, cwd, f"{name} -i inplace", follow=False)


_AWK_OPERAND_BEFORE = frozenset(
    (
        "",
        "(",
        ",",
        "{",
        "}",
        ";",
        "!",
        "~",
        "!~",
        "&&",
        "||",
        "?",
        ":",
        "=",
        "==",
        "!=",
        "<",
        "<=",
        ">",
        ">=",
        "+",
        "-",
        "*",
        "/",
        "%",
        "^",
        "\n",
        "in",
        "print",
        "printf",
        "return",
        "+=",
        "-=",
        "*=",
        "/=",
        "%=",
        "^=",
        "&",
        "|",
        "getline",
    )
)
_AWK_STRING = r'"(?:[^"\\\n]|\\.)*"'


def _awk_string(literal: str) -> str:
    body = literal[1:-1]
    if "\\" not in body:
        return body
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def _awk_program(j: _Judge, name: str, program: str, cwd) -> None:
    """Writes and commands in an awk program: print > "file", print | "cmd", "cmd" | getline,
    system("cmd"), @include and @load. A comparison `a > b` outside print is no write."""
    token = re.compile(
        r"[ \t\r]*(?:(#[^\n]*)|(" + _AWK_STRING + r")|(@?[A-Za-z_][A-Za-z0-9_]*)|"
        r"(\d+\.?\d*)|(\\\n)|(\|\||&&|>>|>=|<=|==|!=|\|&|!~|\+\+|--|[-+*/%^]=|\n|\S))"
    )
    call = re.compile(r"\s*\(\s*(" + _AWK_STRING + r")\s*\)")
    pos, n = 0, len(program)
    previous = ""
    last_string: str | None = None
    print_depth: int | None = None
    depth = 0
    redirect: str | None = None
    while pos < n:
        j.budget.left -= 1
        if j.budget.left < 0:
            raise _TooLarge()
        m = token.match(program, pos)
        if m is None:
            break
        pos = m.end()
        comment, string, ident, number, continuation, op = m.groups()
        if comment is not None or continuation is not None:
            continue
        if op == "/" and previous in _AWK_OPERAND_BEFORE:
            k = pos
            while k < n and program[k] not in "/\n":
                k += 2 if program[k] == "\\" else 1
            pos = k + 1
            previous = "regex"
            continue
        if redirect is not None:
            if string is not None:
                if redirect == "|":
                    j.script(_awk_string(string), cwd, None, child=True)
                else:
                    j.write(Word(_awk_string(string)), cwd, f"{name} print {redirect}", stream=True)
            elif redirect == "|":
                j.unknown(f"{name}: pipes to a command built at run time; proctor cannot tell what it writes")
            else:
                j.unknown(f"{name}: prints to a file named at run time; proctor cannot tell which")
            redirect = None
        if ident is not None:
            if ident in ("@include", "@load"):
                j.unknown(f"{name} {ident}: loads code proctor does not read")
            elif ident in ("print", "printf"):
                print_depth = depth
            elif ident == "system":
                c = call.match(program, pos)
                if c is not None:
                    j.script(_awk_string(c.group(1)), cwd, None, child=True)
                    pos = c.end()
                else:
                    j.unknown(f"{name} system(): runs a command built at run time; proctor cannot tell what it writes")
            previous = ident
            last_string = None
            continue
        if string is not None or number is not None:
            previous = "value"
            last_string = string
            continue
        if op in ("(", "["):
            depth += 1
        elif op in (")", "]"):
            depth -= 1
        elif op in (";", "{", "}", "\n"):
            print_depth = None
        elif op in ("|", "|&"):
            if op == "|&":
                j.unknown(f"{name} |&: runs a coprocess; proctor cannot tell what it writes")
            elif program[pos:].lstrip().startswith("getline"):
                if last_string is not None and previous == "value":
                    j.script(_awk_string(last_string), cwd, None, child=True)
                else:
                    j.unknown(f"{name}: reads from a command built at run time; proctor cannot tell what it writes")
            else:
                redirect = "|"
        elif op in (">", ">>") and print_depth is not None and depth == print_depth:
            redirect = op
        previous = op or ""
        last_string = None
    if redirect is not None:
        j.unknown(f"{name}: an awk program proctor cannot read to its end")


def _h_find(j: _Judge, name, args, cwd, command):
    i, n = 0, len(args)
    follow = False
    while i < n and (args[i].text in ("-H", "-L", "-P") or args[i].text.startswith(("-D", "-O"))):
        follow = follow or args[i].text == "-L"
        i += 2 if args[i].text == "-D" else 1
    starts: list[Word] = []
    while i < n and not args[i].text.startswith("-") and args[i].text not in ("(", ")", "!", ","):
        starts.append(args[i])
        i += 1
    shown = " ".join(w.text for w in starts) or "."
    takes_value = {
        "-name",
        "-iname",
        "-path",
        "-ipath",
        "-wholename",
        "-iwholename",
        "-regex",
        "-iregex",
        "-lname",
        "-ilname",
        "-type",
        "-xtype",
        "-size",
        "-perm",
        "-user",
        "-group",
        "-uid",
        "-gid",
        "-links",
        "-inum",
        "-samefile",
        "-newer",
        "-anewer",
        "-cnewer",
        "-maxdepth",
        "-mindepth",
        "-mtime",
        "-mmin",
        "-atime",
        "-amin",
        "-ctime",
        "-cmin",
        "-used",
        "-fstype",
        "-context",
        "-printf",
        "-regextype",
        "-files0-from",
    }
    while i < n:
        t = args[i].text
        if t == "-follow":
            follow = True
        elif t == "-delete":
            j.unknown(f"find {shown} -delete: removes what it matches; proctor cannot name it")
        elif t in ("-fprint", "-fprint0", "-fls", "-fprintf"):
            if i + 1 < n:
                j.write(args[i + 1], cwd, f"find {t}", stream=True)
            i += 2 if t == "-fprintf" else 1
        elif t in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i + 1
            while end < n and not (args[end].text == ";" or (args[end].text == "+" and args[end - 1].text == "{}")):
                end += 1
            why = "a name find produces" + (" through a followed link" if follow else "")
            words = [Word(w.text, True, w.quoted, w.raw, why=why) if "{}" in w.text else w for w in args[i + 1 : end]]
            if words:
                before = j.acts
                j.sub_command(words, cwd if t in ("-exec", "-ok") else None, None)
                if j.acts == before:
                    j.status = None
            i = end
        elif t in takes_value or (t.startswith("-newer") and len(t) == 8):
            i += 1
        i += 1


def _h_sort(j: _Judge, name, args, cwd, command):
    opts, _ = _getopt(
        args,
        "kotST",
        (
            "--key",
            "--output",
            "--field-separator",
            "--buffer-size",
            "--temporary-directory",
            "--batch-size",
            "--parallel",
            "--random-source",
            "--compress-program",
            "--files0-from",
            "--sort",
        ),
    )
    for o, v in opts:
        if o in ("-o", "--output") and v is not None:
            j.write(v, cwd, "sort -o", stream=True)
        elif o == "--compress-program":
            j.unknown(
                f"sort --compress-program={v.text if v else ''}: runs a program; proctor cannot tell what it writes"
            )


def _second_operand_output(short_values: str, long_values: tuple = ()):
    def handler(j: _Judge, name, args, cwd, command):
        _, operands = _getopt(args, short_values, long_values)
        if len(operands) >= 2 and operands[1].text != "-":
            j.write(operands[1], cwd, name, stream=True)

    return handler


def _option_output(short_values: str, outputs: tuple, long_values: tuple = ()):
    def handler(j: _Judge, name, args, cwd, command):
        opts, _ = _getopt(args, short_values, long_values)
        for o, v in opts:
            if o in outputs and v is not None:
                j.write(v, cwd, f"{name} {o}", stream=True)

    return handler


def _h_date(j: _Judge, name, args, cwd, command):
    opts, _ = _getopt(args, "dfrs", ("--date", "--file", "--reference", "--set"), ("--iso-8601", "--rfc-3339"))
    if _has(opts, "-s", "--set"):
        j.quiet()


def _h_hostname(j: _Judge, name, args, cwd, command):
    opts, operands = _getopt(args, "F", ("--file",))
    if operands or _has(opts, "-F", "--file"):
        j.quiet()


def _h_rg(j: _Judge, name, args, cwd, command):
    for word in args:
        if word.text == "--pre" or word.text.startswith("--pre="):
            j.unknown("rg --pre: runs a preprocessor; proctor cannot tell what it writes")


def _h_file(j: _Judge, name, args, cwd, command):
    if any(w.text == "-C" or w.text == "--compile" for w in args):
        j.unknown("file -C: compiles a magic file; proctor cannot tell where")


def _h_quiet(j: _Judge, name, args, cwd, command):
    j.quiet()


def _h_dd(j: _Judge, name, args, cwd, command):
    for word in args:
        if word.text.startswith("of="):
            j.write(
                Word(
                    word.text[3:], word.dynamic, word.quoted, word.raw[3:] if word.raw.startswith("of=") else word.raw
                ),
                cwd,
                "dd of=",
                stream=True,
            )


def _h_curl(j: _Judge, name, args, cwd, command):
    j.quiet()
    opts, operands = _getopt(
        args,
        "AbcCdDeEFHKmoPQrtTuUwxXyYz",
        (
            "--output",
            "--dump-header",
            "--cookie-jar",
            "--trace",
            "--trace-ascii",
            "--stderr",
            "--etag-save",
            "--libcurl",
            "--hsts",
            "--alt-svc",
            "--output-dir",
            "--config",
            "--write-out",
            "--cookie",
            "--data",
            "--header",
            "--user-agent",
            "--request",
            "--url",
            "--upload-file",
            "--form",
            "--user",
            "--proxy",
            "--max-time",
            "--range",
        ),
    )
    out_dir = _value(opts, "--output-dir")
    remote = _has(opts, "-O", "--remote-name", "--remote-name-all")
    for o, v in opts:
        if v is None:
            continue
        if o in ("-o", "--output"):
            if v.text != "-":
                if out_dir is not None and not v.text.startswith("/"):
                    v = Word(out_dir.text.rstrip("/") + "/" + v.text, v.dynamic or out_dir.dynamic)
                j.write(v, cwd, f"curl {o}", stream=True)
        elif o in (
            "-D",
            "--dump-header",
            "-c",
            "--cookie-jar",
            "--trace",
            "--trace-ascii",
            "--stderr",
            "--etag-save",
            "--libcurl",
            "--hsts",
            "--alt-svc",
        ):
            if v.text != "-":
                j.write(v, cwd, f"curl {o}", stream=True)
        elif o in ("-K", "--config"):
            j.unknown(f"curl -K {v.text}: options from a file proctor does not read")
        elif o in ("-w", "--write-out") and "%output{" in v.text:
            j.unknown("curl -w %output{}: writes a file named in its format; proctor cannot tell which")
    if remote:
        urls = [w for w in operands] + [v for o, v in opts if o == "--url" and v is not None]
        if _has(opts, "-J", "--remote-header-name") or not urls or any(w.dynamic for w in urls):
            j.unknown("curl -O: saves under a name the server gives; proctor cannot tell which")
            return
        for url in urls:
            location = url.text.split("?", 1)[0].split("#", 1)[0].split("://", 1)[-1]
            base = location.rsplit("/", 1)[-1] if "/" in location else ""
            if not base:
                j.unknown(f"curl -O {url.text}: saves under a name the server gives; proctor cannot tell which")
                continue
            path = base if out_dir is None else out_dir.text.rstrip("/") + "/" + base
            j.write(Word(path, out_dir is not None and out_dir.dynamic), cwd, "curl -O", stream=True)


def _h_wget(j: _Judge, name, args, cwd, command):
    j.quiet()
    opts, operands = _getopt(
        args,
        "OoaPiUeTtwYlAR",
        (
            "--output-document",
            "--output-file",
            "--append-output",
            "--directory-prefix",
            "--input-file",
            "--user-agent",
            "--execute",
            "--timeout",
            "--tries",
            "--wait",
            "--level",
            "--accept",
            "--reject",
            "--header",
            "--post-data",
        ),
    )
    document = _value(opts, "-O", "--output-document")
    for o, v in opts:
        if o in ("-o", "--output-file", "-a", "--append-output") and v is not None:
            j.write(v, cwd, f"wget {o}", stream=True)
        if o in ("-e", "--execute"):
            j.unknown("wget -e: runs wgetrc commands proctor does not read")
    if _has(opts, "--spider"):
        return
    if document is not None:
        if document.text != "-":
            j.write(document, cwd, "wget -O", stream=True)
        return
    prefix = _value(opts, "-P", "--directory-prefix")
    if (
        _has(opts, "-r", "--recursive", "-m", "--mirror", "-p", "--page-requisites", "-i", "--input-file")
        or not operands
        or any(w.dynamic for w in operands)
    ):
        if prefix is not None:
            j.write(prefix, cwd, "wget -P")
        else:
            j.unknown("wget: saves under names the server gives; proctor cannot tell which")
        return
    for url in operands:
        base = (
            url.text.split("?", 1)[0].split("#", 1)[0].rsplit("/", 1)[-1] if "/" in url.text.split("://", 1)[-1] else ""
        )
        path = (base or "index.html") if prefix is None else prefix.text.rstrip("/") + "/" + (base or "index.html")
        j.write(Word(path, prefix is not None and prefix.dynamic), cwd, "wget", stream=True)


def _h_rsync(j: _Judge, name, args, cwd, command):
    j.quiet()
    opts, operands = _getopt(
        args,
        "efTBM",
        (
            "--rsh",
            "--rsync-path",
            "--filter",
            "--exclude",
            "--include",
            "--exclude-from",
            "--include-from",
            "--files-from",
            "--temp-dir",
            "--partial-dir",
            "--backup-dir",
            "--log-file",
            "--write-batch",
            "--only-write-batch",
            "--suffix",
            "--compare-dest",
            "--copy-dest",
            "--link-dest",
            "--chmod",
            "--chown",
            "--timeout",
            "--bwlimit",
            "--max-size",
            "--min-size",
            "--port",
            "--out-format",
            "--password-file",
            "--remote-option",
        ),
    )
    if _has(opts, "-n", "--dry-run", "--list-only"):
        return
    for o, v in opts:
        if (
            o
            in (
                "--temp-dir",
                "-T",
                "--partial-dir",
                "--backup-dir",
                "--log-file",
                "--write-batch",
                "--only-write-batch",
            )
            and v is not None
        ):
            j.write(v, cwd, f"rsync {o}")
    if len(operands) < 2:
        return
    destination = operands[-1]
    if ":" in destination.text.split("/", 1)[0] or destination.text.startswith("rsync://"):
        return
    j.write(destination, cwd, "rsync")
    if _has(opts, "--remove-source-files"):
        for word in operands[:-1]:
            if ":" not in word.text.split("/", 1)[0]:
                j.write(word, cwd, "rsync --remove-source-files", follow=False)


def _h_scp(j: _Judge, name, args, cwd, command):
    j.quiet()
    opts, operands = _getopt(args, "cFiJloPSXD")
    if _has(opts, "-S"):
        j.unknown("scp -S: runs a program; proctor cannot tell what it writes")
    if len(operands) >= 2 and ":" not in operands[-1].text.split("/", 1)[0]:
        j.write(operands[-1], cwd, "scp")


def _h_tar(j: _Judge, name, args, cwd, command):
    """tar: -x writes its members into -C DIR (or unknown ones into the cwd), -c its archive."""
    words = list(args)
    if words and not words[0].text.startswith("-") and not words[0].dynamic:
        # the old form: `tar xzf a.tgz` -- letters whose values follow in order
        letters = words[0].text
        values = [w for w in words[1:]]
        rebuilt: list[Word] = []
        k = 0
        for ch in letters:
            rebuilt.append(Word("-" + ch))
            if ch in "fCTXbgHKLNVI" and k < len(values):
                rebuilt.append(values[k])
                k += 1
        words = rebuilt + values[k:]
    opts, operands = _getopt(
        words,
        "fCTXbgHKLNVIF",
        (
            "--file",
            "--directory",
            "--files-from",
            "--exclude-from",
            "--blocking-factor",
            "--listed-incremental",
            "--format",
            "--starting-file",
            "--tape-length",
            "--newer",
            "--label",
            "--use-compress-program",
            "--info-script",
            "--to-command",
            "--index-file",
            "--exclude",
            "--transform",
            "--owner",
            "--group",
            "--mode",
            "--mtime",
            "--strip-components",
            "--checkpoint-action",
            "--new-volume-script",
            "--rsh-command",
        ),
        ("--checkpoint", "--backup"),
    )
    names = {o for o, _ in opts}
    for o, v in opts:
        if (
            o in ("--to-command", "--info-script", "-F", "--new-volume-script", "--rsh-command")
            or (o == "--checkpoint-action" and v is not None and "exec" in v.text)
            or (o in ("-I", "--use-compress-program") and v is not None and " " in v.text)
        ):
            j.unknown(f"tar {o}: runs a command; proctor cannot tell what it writes")
        if o == "--index-file" and v is not None:
            j.write(v, cwd, "tar --index-file", stream=True)
    archive = _value(opts, "-f", "--file")
    directory = cwd
    for o, v in opts:
        if o in ("-C", "--directory") and v is not None:
            directory = j.directory(v, directory)
    extract = names & {"-x", "--extract", "--get"}
    create = names & {
        "-c",
        "--create",
        "-r",
        "--append",
        "-u",
        "--update",
        "-A",
        "--catenate",
        "--concatenate",
        "--delete",
    }
    if extract:
        if names & {"-O", "--to-stdout"}:
            return
        j.quiet()
        if names & {"-C", "--directory"}:
            if directory is None:
                j.unknown("tar -x -C: into a directory held in a variable")
            else:
                j.add(directory)
            return
        members = [w for w in operands if not w.dynamic]
        if members and len(members) == len(operands) and not names & {"--wildcards", "-T", "--files-from"}:
            for word in members:
                j.write(word, directory, "tar -x", follow=False)
            return
        j.unknown("tar -x: extracts members proctor cannot list; proctor cannot tell what it writes")
        return
    if create:
        if archive is not None and archive.text != "-":
            j.write(archive, cwd, "tar -c", stream=True)
        elif archive is None:
            j.quiet()  # the archive goes to $TAPE, or the default device
        if names & {"--remove-files"}:
            for word in operands:
                j.write(word, directory, "tar --remove-files", follow=False)


def _h_unzip(j: _Judge, name, args, cwd, command):
    words = list(args)
    excluded = False
    opts: list[str] = []
    directory: Word | None = None
    operands: list[Word] = []
    k = 0
    while k < len(words):
        t = words[k].text
        if t == "-d" and k + 1 < len(words):
            directory = words[k + 1]
            k += 2
            continue
        if t.startswith("-d") and len(t) > 2:
            directory = Word(t[2:], words[k].dynamic)
        elif t == "-x":
            excluded = True
        elif t.startswith("-"):
            opts.append(t)
            excluded = False
        elif not excluded:
            operands.append(words[k])
        k += 1
    flags = "".join(o[1:] for o in opts)
    if any(ch in flags for ch in "lvtzZpcT") or "-Z" in opts:
        return
    j.quiet()
    if directory is not None:
        j.write(directory, cwd, "unzip -d")
        return
    members = operands[1:]
    if members and not any(w.dynamic or _unquoted_glob(w.raw) for w in members):
        for word in members:
            j.write(Word(os.path.basename(word.text)) if "j" in flags else word, cwd, "unzip")
        return
    j.unknown("unzip: extracts members proctor cannot list; proctor cannot tell what it writes")


def _h_zip(j: _Judge, name, args, cwd, command):
    j.quiet()
    opts, operands = _getopt(
        args,
        "bntxiPZsO",
        (
            "--temp-path",
            "--suffixes",
            "--exclude",
            "--include",
            "--password",
            "--compression-method",
            "--split-size",
            "--output-file",
            "--unzip-command",
        ),
    )
    if any(w.text.startswith(("-TT", "--unzip-command")) for w in args):
        j.unknown("zip -TT: runs a command; proctor cannot tell what it writes")
    out = _value(opts, "-O", "--output-file")
    if operands:
        archive = operands[0]
        if "." not in os.path.basename(archive.text) and not archive.dynamic:
            archive = Word(archive.text + ".zip", raw=archive.raw)
        j.write(out if out is not None else archive, cwd, "zip", stream=archive.text == "-")
    if _has(opts, "-m", "--move"):
        for word in operands[1:]:
            j.write(word, cwd, "zip -m", follow=False)


_COMPRESSED = {
    "gzip": (".gz", ("-d", "--decompress", "--uncompress")),
    "bzip2": (".bz2", ("-d", "--decompress")),
    "xz": (".xz", ("-d", "--decompress", "--uncompress")),
    "lzma": (".lzma", ("-d", "--decompress")),
    "zstd": (".zst", ("-d", "--decompress", "--uncompress")),
    "lz4": (".lz4", ("-d", "--decompress")),
    "compress": (".Z", ("-d",)),
    "lzip": (".lz", ("-d", "--decompress")),
}
_DECOMPRESSORS = {
    "gunzip": "gzip",
    "bunzip2": "bzip2",
    "unxz": "xz",
    "unlzma": "lzma",
    "unzstd": "zstd",
    "lz4cat": "lz4",
    "uncompress": "compress",
}


def _h_compress(j: _Judge, name, args, cwd, command):
    """gzip and its kin replace each operand by a new name (or write -o FILE)."""
    tool = _DECOMPRESSORS.get(name, name)
    suffix, decompress_flags = _COMPRESSED[tool]
    opts, operands = _getopt(args, "SoTbBLCFM" if tool in ("zstd", "lz4") else "So", ("--suffix", "--output"))
    names = {o for o, _ in opts}
    if names & {"-c", "--stdout", "--to-stdout", "-t", "--test", "-l", "--list"} or not operands:
        return
    j.quiet()
    decompress = name in _DECOMPRESSORS or bool(names & set(decompress_flags))
    out = _value(opts, "-o", "--output")
    if out is not None:
        j.write(out, cwd, f"{name} -o")
    suffix = (_value(opts, "-S", "--suffix") or Word(suffix)).text
    keeps = tool in ("zstd", "lz4") and not names & {"--rm"} or bool(names & {"-k", "--keep"})
    for word in operands:
        if word.text == "-":
            continue
        if names & {"-r", "--recursive"}:
            j.write(word, cwd, name, follow=False)
            continue
        if out is None:
            if decompress:
                base = word.text
                for known in (suffix, ".tgz", ".taz", ".tbz2", ".txz", ".gz", ".z", ".Z", ".bz2", ".xz", ".zst"):
                    if base.endswith(known):
                        base = base[: -len(known)] + (".tar" if known.startswith(".t") and len(known) > 3 else "")
                        break
                made = Word(base, word.dynamic, raw=word.raw)
            else:
                made = Word(word.text + suffix, word.dynamic, raw=word.raw)
            j.write(made, cwd, name, follow=False)
        if not keeps:
            j.write(word, cwd, name, follow=False)


def _h_patch(j: _Judge, name, args, cwd, command):
    j.quiet()
    opts, operands = _getopt(
        args,
        "iodpBYzrDFVg",
        (
            "--input",
            "--output",
            "--directory",
            "--strip",
            "--prefix",
            "--basename-prefix",
            "--suffix",
            "--reject-file",
            "--ifdef",
            "--fuzz",
            "--version-control",
            "--get",
            "--quoting-style",
            "--backup-if-mismatch",
        ),
    )
    if _has(opts, "--dry-run", "-C", "--check"):
        return
    directory = cwd
    for o, v in opts:
        if o in ("-d", "--directory") and v is not None:
            directory = j.directory(v, directory)
        if o in ("-r", "--reject-file") and v is not None and v.text != "-":
            j.write(v, directory, "patch -r")
    out = _value(opts, "-o", "--output")
    if out is not None:
        if out.text != "-":
            j.write(out, cwd, "patch -o")
        return
    if operands:
        j.write(operands[0], directory, "patch")
        return
    strip = _value(opts, "-p", "--strip")
    if _value(opts, "-i", "--input") is None and command.stdin_script is not None and not command.stdin_dynamic:
        names = diff_paths(command.stdin_script, int(strip.text) if strip and strip.text.isdigit() else None)
        if names:
            for path in names:
                j.write(Word(path), directory, "patch")
            return
    j.unknown("patch: applies a diff proctor does not read; it cannot tell what it writes")


def _h_split(j: _Judge, name, args, cwd, command):
    j.quiet()
    opts, operands = _getopt(
        args,
        "abClnt",
        (
            "--suffix-length",
            "--bytes",
            "--line-bytes",
            "--lines",
            "--number",
            "--separator",
            "--additional-suffix",
            "--filter",
        ),
        ("--numeric-suffixes", "--hex-suffixes"),
    )
    if _has(opts, "--filter"):
        j.unknown("split --filter: runs a command; proctor cannot tell what it writes")
        return
    length = _value(opts, "-a", "--suffix-length")
    width = int(length.text) if length is not None and length.text.isdigit() else 2
    first = "0" * width if _has(opts, "-d", "-x", "--numeric-suffixes", "--hex-suffixes") else "a" * width
    extra = _value(opts, "--additional-suffix")
    prefix = operands[1] if len(operands) > 1 else Word("x")
    j.write(
        Word(
            prefix.text + first + (extra.text if extra else ""),
            prefix.dynamic or bool(extra and extra.dynamic),
            raw=prefix.raw,
        ),
        cwd,
        "split",
    )


def _h_csplit(j: _Judge, name, args, cwd, command):
    j.quiet()
    opts, _ = _getopt(args, "bfn", ("--suffix-format", "--prefix", "--digits"))
    prefix = _value(opts, "-f", "--prefix") or Word("xx")
    digits = _value(opts, "-n", "--digits")
    width = int(digits.text) if digits is not None and digits.text.isdigit() else 2
    j.write(Word(prefix.text + "0" * width, prefix.dynamic, raw=prefix.raw), cwd, "csplit")


def _h_ed(j: _Judge, name, args, cwd, command):
    j.quiet()
    _, operands = _getopt(args, "p", ("--prompt",))
    script = command.stdin_script
    if script is None or command.stdin_dynamic:
        for word in operands[:1]:
            j.write(word, cwd, "ed")
        j.unknown(f"{name}: reads its commands from its input; proctor cannot tell what else they write")
        return
    text_mode = False
    for line in script.split("\n"):
        line = line.strip()
        if text_mode:
            text_mode = line != "."
            continue
        if re.fullmatch(r"[0-9,.$;'+-]*[aic]", line):
            text_mode = True
            continue
        m = re.match(r"[0-9,.$;'a-z+-]*?([wW]q?|[eErR]|!)\s*(.*)$", line)
        if m is None:
            continue
        letter, rest = m.groups()
        if letter == "!" or rest.startswith("!"):
            j.unknown(f"{name} !: runs a command; proctor cannot tell what it writes")
        elif letter[0] in "wW" and rest:
            j.write(Word(rest), cwd, "ed w")
        elif letter[0] in "wW":
            for word in operands[:1]:
                j.write(word, cwd, "ed w")


def _h_mktemp(j: _Judge, name, args, cwd, command):
    opts, operands = _getopt(args, "p", ("--suffix",), ("--tmpdir",))
    if _has(opts, "-u", "--dry-run"):
        return
    j.quiet()
    directory = _value(opts, "-p", "--tmpdir")
    if directory is not None and not directory.text and not directory.dynamic:
        directory = None
    template = operands[0] if operands else Word("tmp.XXXXXXXXXX")
    if operands and not _has(opts, "-p", "--tmpdir", "-t"):
        j.write(template, cwd, "mktemp")
        return
    # in a directory: -t takes $TMPDIR before -p; otherwise -p, then $TMPDIR, then /tmp
    env = j.tmpdir  # False: as the environment has it (outside the work tree); None: unknown
    if env is None and (_has(opts, "-t") or directory is None):
        j.unknown("mktemp: a file in a TMPDIR held in a variable")
        return
    base = Word(env) if env and (_has(opts, "-t") or directory is None) else directory
    if base is None:
        return  # /tmp, or the TMPDIR the shell has
    j.write(Word(base.text.rstrip("/") + "/" + template.text, base.dynamic or template.dynamic), cwd, "mktemp")


def _h_fallocate(j: _Judge, name, args, cwd, command):
    j.quiet()
    _, operands = _getopt(args, "lo", ("--length", "--offset"))
    for word in operands[-1:]:
        j.write(word, cwd, "fallocate")


def _h_git(j: _Judge, name, args, cwd, command):
    _git(j, args, cwd, command)


def _h_proctor(j: _Judge, name, args, cwd, command):
    operands = [w.text for w in args if not w.text.startswith("-")]
    if not operands or any(w.text in ("--help", "-h", "--version") for w in args):
        return
    sub, more = operands[0], operands[1:2]
    if (
        sub in ("ls", "describe", "query", "session", "config", "vcs", "doctor")
        or (sub == "monitor" and more in (["list"], ["events"]))
        or (sub == "server" and more == ["status"])
    ):
        return
    if sub in ("job", "monitor", "server", "hook", "run"):
        j.quiet()  # proctor's store; `run` runs a target of proctor.toml, which lease-gate judges
        return
    j.unknown(f"proctor {sub}: proctor cannot tell what it writes")


def _h_apply_patch(j: _Judge, name, args, cwd, command):
    j.quiet()
    body = command.stdin_script if command.stdin_script is not None else " ".join(w.text for w in args)
    if command.stdin_dynamic or any(w.dynamic for w in args):
        j.unknown("apply_patch: a patch built from an expansion; proctor cannot name what it writes")
        return
    for path in patch_paths(body):
        j.write(Word(path), cwd, "apply_patch")


_PROGRAMS = {
    "apply_patch": _h_apply_patch,
    "tee": _h_tee,
    "cp": _copy_like,
    "mv": _copy_like,
    "install": _copy_like,
    "ln": _copy_like,
    "link": _h_link,
    "rm": _operands_writer(follow=False),
    "rmdir": _operands_writer(follow=False),
    "unlink": _operands_writer(follow=False),
    "shred": _operands_writer("ns", ("--iterations", "--size", "--random-source")),
    "touch": _operands_writer(
        "drt", ("--date", "--reference", "--time"), no_create="-c --no-create", no_follow="-h --no-dereference"
    ),
    "mkdir": _operands_writer("m", ("--mode",)),
    "mkfifo": _operands_writer("m", ("--mode",)),
    "mknod": _operands_writer("m", ("--mode",)),
    "truncate": _operands_writer("sr", ("--size", "--reference"), no_create="-c --no-create"),
    "fallocate": _h_fallocate,
    "chmod": _h_chmod,
    "chown": _h_chmod,
    "chgrp": _h_chmod,
    "sed": _h_sed,
    "gsed": _h_sed,
    "perl": _h_perl,
    "awk": _h_awk,
    "gawk": _h_awk,
    "mawk": _h_awk,
    "nawk": _h_awk,
    "find": _h_find,
    "dd": _h_dd,
    "sort": _h_sort,
    "uniq": _second_operand_output("fsw", ("--skip-fields", "--skip-chars", "--check-chars")),
    "xxd": _second_operand_output("cglosn", ("-cols", "-groupsize", "-len", "-seek", "-name")),
    "tree": _option_output("LPIHTo", ("-o",)),
    "iconv": _option_output("fto", ("-o", "--output"), ("--from-code", "--to-code", "--output")),
    "base64": _option_output("wio", ("-o", "--output"), ("--wrap", "--input", "--output")),
    "base32": _option_output("wio", ("-o", "--output"), ("--wrap", "--input", "--output")),
    "sdiff": _option_output("ow", ("-o", "--output"), ("--output", "--width")),
    "date": _h_date,
    "hostname": _h_hostname,
    "rg": _h_rg,
    "file": _h_file,
    "kill": _h_quiet,
    "pkill": _h_quiet,
    "killall": _h_quiet,
    "renice": _h_quiet,
    "sync": _h_quiet,
    "curl": _h_curl,
    "wget": _h_wget,
    "rsync": _h_rsync,
    "scp": _h_scp,
    "tar": _h_tar,
    "gtar": _h_tar,
    "bsdtar": _h_tar,
    "unzip": _h_unzip,
    "zip": _h_zip,
    "patch": _h_patch,
    "split": _h_split,
    "csplit": _h_csplit,
    "ed": _h_ed,
    "red": _h_ed,
    "mktemp": _h_mktemp,
    "git": _h_git,
    "proctor": _h_proctor,
    **{tool: _h_compress for tool in list(_COMPRESSED) + list(_DECOMPRESSORS)},
}


# -- git ------------------------------------------------------------------------------------

_GIT_READS = frozenset(
    """
    status log diff show blame annotate rev-parse ls-files ls-tree shortlog describe cat-file rev-list
    for-each-ref show-ref merge-base name-rev var whatchanged count-objects check-ignore check-attr
    check-ref-format check-mailmap ls-remote version help show-branch cherry range-diff diff-tree diff-files
    diff-index verify-commit verify-tag verify-pack fsck get-tar-commit-id grep request-pull
""".split()
)
_GIT_QUIET = frozenset(
    """
    add commit fetch push gc prune repack update-ref update-index symbolic-ref replace commit-tree hash-object
    mktree mktag pack-refs prune-packed maintenance credential rerere fetch-pack send-pack unpack-objects
    index-pack pack-objects multi-pack-index commit-graph
""".split()
)
_GIT_TREE_WIDE = frozenset(
    (
        "merge",
        "rebase",
        "pull",
        "cherry-pick",
        "revert",
        "am",
        "switch",
        "bisect",
        "submodule",
        "sparse-checkout",
        "read-tree",
        "checkout-index",
        "mergetool",
        "filter-branch",
        "stash",
        "reset",
        "clean",
        "apply",
        "checkout",
    )
)
_GIT_CODE_KEYS = frozenset(
    (
        "command",
        "textconv",
        "driver",
        "cmd",
        "clean",
        "smudge",
        "process",
        "program",
        "helper",
        "path",
        "hookspath",
        "fsmonitor",
        "editor",
        "pager",
        "sshcommand",
        "askpass",
        "external",
        "packobjectshook",
        "gitproxy",
        "worktree",
        "templatedir",
        "tool",
        "trustexitcode",
        "uploadpack",
        "receivepack",
    )
)


def _git_key_runs_code(key: str) -> bool:
    key = key.lower()
    return (
        key.startswith(("alias.", "pager.", "includeif.", "include."))
        or key.rsplit(".", 1)[-1] in _GIT_CODE_KEYS
        or (key.startswith("protocol.") and key.endswith(".allow"))
        or "ext::" in key
    )


def _git(j: _Judge, args: list[Word], cwd: str | None, command: Command) -> None:
    """git: its global options (_git_globals), the programs its arguments name (_git_named_programs),
    then its subcommand's handler in _GIT_SUBCOMMANDS (one it does not list is _git_unknown)."""
    parsed = _git_globals(j, args, cwd)
    if parsed is None:
        return
    i, cwd, work_tree = parsed
    if i >= len(args):
        return
    sub_word = args[i]
    if sub_word.dynamic:
        j.unknown(f"git {sub_word.text}: a git command held in a variable")
        return
    g = _Git(j, sub_word.text, args[i + 1 :], cwd, work_tree, command)
    _git_named_programs(g)
    _git_environment_files(j, cwd)
    if g.sub == "init":
        _git_init(g, args[:i])
        return
    _GIT_SUBCOMMANDS.get(g.sub, _git_unknown)(g)


# The variables that name a file git writes: its index, its object store, its traces (a trace
# is a file when its value is an absolute path; 1, 2, true or a number is a stream)
_GIT_FILE_VARIABLES = ("GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY")
_GIT_TRACE_VARIABLES = (
    "GIT_TRACE",
    "GIT_TRACE_SETUP",
    "GIT_TRACE_PERFORMANCE",
    "GIT_TRACE_REFS",
    "GIT_TRACE_PACKET",
    "GIT_TRACE_PACK_ACCESS",
    "GIT_TRACE_CURL",
    "GIT_TRACE_SHALLOW",
    "GIT_TRACE_FSMONITOR",
    "GIT_TRACE2",
    "GIT_TRACE2_EVENT",
    "GIT_TRACE2_PERF",
)


def _prefixed(j: _Judge, name: str) -> Word | None:
    """The value the command's own assignment gives `name` (`NAME=value git ...`), or None."""
    assigned = j.prefix.get(name)
    return None if assigned is None else Word(assigned.text.split("=", 1)[1], assigned.dynamic)


def _git_environment_files(j: _Judge, cwd: str | None) -> None:
    """The files the command's own variables name for git to write. A relative index or object
    directory is resolved by git against where its setup leaves it, which proctor does not follow:
    unknown."""
    for name in _GIT_FILE_VARIABLES + _GIT_TRACE_VARIABLES:
        value = _prefixed(j, name)
        if value is None:
            continue
        if value.text.startswith("/") or value.dynamic:
            j.write(value, cwd, f"git with {name}")
        elif name in _GIT_FILE_VARIABLES and value.text:
            j.unknown(f"git with {name}={value.text[:40]}: a relative path git resolves itself; proctor cannot name it")


class _Git:
    """One git command past its global options, as its subcommand's handler sees it: the judge, the
    subcommand and its arguments, the directory it runs in (after -C), its work tree (False: the
    default tree; None: one held in a variable) and `base`, where its pathspecs resolve."""

    __slots__ = ("j", "sub", "rest", "texts", "cwd", "work_tree", "base", "command")

    def __init__(
        self,
        j: _Judge,
        sub: str,
        rest: list[Word],
        cwd: str | None,
        work_tree: str | None | Literal[False],
        command: Command,
    ) -> None:
        self.j = j
        self.sub = sub
        self.rest = rest
        self.texts = [w.text for w in rest]
        self.cwd = cwd
        self.work_tree = work_tree
        self.command = command
        # where pathspecs resolve: the cwd, or the --work-tree's top when the cwd is outside it
        base = cwd
        if work_tree is None:
            base = None
        elif work_tree is not False and (cwd is None or not (cwd == work_tree or cwd.startswith(work_tree + "/"))):
            base = work_tree
        self.base = base

    def whole_tree(self, what: str) -> None:
        """A rewrite across the work tree: the tree, or unknown when it cannot be named."""
        j, work_tree = self.j, self.work_tree
        if work_tree is False:
            j.unknown(f"git {what}: rewrites files across the work tree; proctor cannot name them")
        elif work_tree is None:
            j.unknown(f"git {what}: rewrites files in a work tree held in a variable")
        else:
            j.add(work_tree)

    def outputs(self, *options: str, values: tuple = ()) -> None:
        """The files the given output options name (-o, --output), written, in any spelling
        getopt reads (-oFILE, --output FILE). `-` is a file of that name, not stdout: git writes
        `diff --output=-` and `archive -o -` to ./-. `values`: the subcommand's other options
        that take a value, so that a value is never read as an option."""
        longs = tuple(o for o in options if o.startswith("--"))
        opts, _ = _getopt(self.rest, "o" if "-o" in options else "", longs + values)
        for o, v in opts:
            if o in options and v is not None:
                self.j.write(v, self.cwd, f"git {self.sub} {o}", stream=True)


def _git_globals(
    j: _Judge, args: list[Word], cwd: str | None
) -> tuple[int, str | None, str | None | Literal[False]] | None:
    """git's global options: where the subcommand starts, the cwd after -C, and the work tree
    (GIT_WORK_TREE, --work-tree; False: the default tree). None when nothing more is judged
    (--version, --help, an option held in a variable). A -c setting that runs a program is unknown."""
    i, n = 0, len(args)
    work_tree: str | None | Literal[False] = False  # False: the default tree
    prefix_tree = _prefixed(j, "GIT_WORK_TREE")
    if prefix_tree is not None:
        work_tree = j.directory(prefix_tree, cwd)
    while i < n:
        word = args[i]
        t = word.text
        if word.dynamic and t.startswith("-"):
            j.unknown(f"git {t}: options held in a variable")
            return None
        if t == "-C" and i + 1 < n:
            cwd = j.directory(args[i + 1], cwd)
            i += 2
            continue
        if t in ("-c", "--config-env") and i + 1 < n or t.startswith("--config-env="):
            setting = args[i + 1].text if "=" not in t else t.split("=", 1)[1]
            if _git_key_runs_code(setting.split("=", 1)[0]) or "ext::" in setting:
                j.unknown(f"git -c {setting[:40]}: a setting that runs a program; proctor cannot tell what it writes")
            i += 1 if "=" in t else 2
            continue
        if t in ("--work-tree", "--git-dir", "--namespace", "--super-prefix", "--list-cmds") and i + 1 < n:
            if t == "--work-tree":
                work_tree = j.directory(args[i + 1], cwd)
            i += 2
            continue
        if t.startswith("--work-tree="):
            work_tree = j.directory(Word(t.split("=", 1)[1], word.dynamic), cwd)
            i += 1
            continue
        if t.startswith("--exec-path="):
            j.unknown("git --exec-path: runs git commands from another directory; proctor cannot tell what they write")
        if t in ("--version", "-v", "--help", "-h", "--html-path", "--man-path", "--info-path"):
            return None
        if t.startswith("-"):
            i += 1
            continue
        break
    return i, cwd, work_tree


def _git_named_programs(g: _Git) -> None:
    """A program named on the command line, whatever the subcommand: --upload-pack, --receive-pack
    and --exec (or a prefix of them), `-u` of ls-remote and clone, and the ext:: transport."""
    sub = g.sub
    for t in g.texts:
        option = t.split("=", 1)[0]
        if (
            (len(option) > 4 and any(o.startswith(option) for o in ("--upload-pack", "--receive-pack", "--exec")))
            or (option == "-u" and sub in ("ls-remote", "clone"))
            or t.startswith("ext::")
            or "=ext::" in t
        ):
            g.j.unknown(
                f"git {sub} {t[:40]}: runs a program named on its command line; proctor cannot tell what it writes"
            )


def _git_output(g: _Git) -> None:
    """diff, log, show, whatchanged, range-diff: reads, but for --output."""
    g.outputs("--output")


def _git_grep(g: _Git) -> None:
    opts, _ = _getopt(g.rest, "", (), ("--open-files-in-pager",), "O")
    if _has(opts, "-O", "--open-files-in-pager"):
        g.j.unknown("git grep -O: opens a pager; proctor cannot tell what it writes")


def _git_read(g: _Git) -> None:
    """_GIT_READS: nothing written, but for --output, which diff-tree, diff-index, diff-files,
    rev-list, shortlog, blame and annotate take too (a file named `-` included)."""
    g.outputs("--output")


def _git_maintenance(g: _Git) -> None:
    j, rest, texts, cwd = g.j, g.rest, g.texts, g.cwd
    if texts[:1] not in (["register"], ["unregister"], ["start"], ["stop"]):
        _git_quiet(g)  # `maintenance run` and the rest: git's own store, as _GIT_QUIET lists it
        return
    j.quiet()
    opts, _ = _getopt(rest[1:], "", ("--config-file", "--scheduler"))
    file = _value(opts, "--config-file")
    if file is not None:
        j.write(file, cwd, f"git maintenance {texts[0]} --config-file")
    else:
        _git_global_config(j, f"git maintenance {texts[0]}", cwd)
    if texts[0] in ("start", "stop"):
        j.unknown(
            f"git maintenance {texts[0]}: changes the scheduler's tasks (crontab, systemd, launchd); "
            f"proctor cannot name them"
        )


def _git_quiet(g: _Git) -> None:
    """_GIT_QUIET: writes git's own store, nothing in the work tree."""
    g.j.quiet()


def _git_branch(g: _Git) -> None:
    opts, operands = _getopt(
        g.rest,
        "",
        (
            "--contains",
            "--no-contains",
            "--merged",
            "--no-merged",
            "--points-at",
            "--sort",
            "--format",
            "--set-upstream-to",
        ),
        ("--abbrev", "--column", "--color"),
    )
    listing = not operands or _has(opts, "-l", "--list")
    if not listing or _has(
        opts,
        "-d",
        "-D",
        "-m",
        "-M",
        "-c",
        "-C",
        "--delete",
        "--move",
        "--copy",
        "-u",
        "--set-upstream-to",
        "--unset-upstream",
        "--edit-description",
        "-f",
        "--force",
    ):
        g.j.quiet()


def _git_tag(g: _Git) -> None:
    opts, operands = _getopt(
        g.rest,
        "mFu",
        (
            "--message",
            "--file",
            "--local-user",
            "--contains",
            "--no-contains",
            "--points-at",
            "--sort",
            "--format",
            "--merged",
            "--no-merged",
        ),
    )
    if operands and not _has(opts, "-l", "--list", "-v", "--verify"):
        g.j.quiet()
    elif _has(opts, "-d", "--delete"):
        g.j.quiet()


def _git_remote(g: _Git) -> None:
    if g.texts[:1] not in ([], ["-v"], ["--verbose"], ["show"], ["get-url"]):
        g.j.quiet()


def _git_notes(g: _Git) -> None:
    if g.texts[:1] not in ([], ["list"], ["show"]):
        g.j.quiet()


def _git_reflog(g: _Git) -> None:
    texts = g.texts
    if texts[:1] not in ([], ["show"], ["exists"]) and not (texts and texts[0].startswith("-")):
        g.j.quiet()
    else:
        g.outputs("--output")  # `reflog [show]` is log's reading: its --output writes


def _git_worktree(g: _Git) -> None:
    j, texts, cwd = g.j, g.texts, g.cwd
    opts, operands = _getopt(g.rest[1:], "bB", ("--reason",))
    action = texts[0] if texts else ""
    if action == "list":
        return
    j.quiet()
    if action == "add" and operands:
        j.write(operands[0], cwd, "git worktree add")
    elif action in ("remove", "move"):
        for word in operands[:2]:
            j.write(word, cwd, f"git worktree {action}", follow=False)


def _git_init(g: _Git, global_options: list[Word]) -> None:
    """git init: the new repository's directory (the cwd's .git, or the cwd itself when bare),
    its separate git directory, and the template's hooks."""
    j, cwd = g.j, g.cwd
    j.quiet()
    opts, operands = _getopt(
        g.rest,
        "b",
        ("--template", "--separate-git-dir", "--object-format", "--initial-branch", "--ref-format"),
        ("--shared", "--bare", "--quiet"),  # --shared[=perms] takes no separate value
    )
    named = _getopt(global_options, "C", ("--git-dir", "--work-tree", "--namespace"), ("--bare",))[0]
    bare = _has(opts, "--bare") or _has(named, "--bare")
    git_dir = _value(named, "--git-dir") or _value(opts, "--separate-git-dir") or _prefixed(j, "GIT_DIR")
    if operands:
        j.write(operands[0], cwd, "git init")
    elif git_dir is None and bare:
        j.write(Word("."), cwd, "git init --bare")  # HEAD, config, objects/ ... right here
    elif git_dir is None and (cwd is None or not os.path.lexists(os.path.join(cwd, ".git"))):
        j.write(Word(".git"), cwd, "git init")  # a new repository (a nested one, in a checkout)
    # else: the checkout's own .git, initialised again, is git's own store (the template aside)
    if git_dir is not None:
        j.write(git_dir, cwd, "git init")
    template = _value(opts, "--template")
    if template is not None and template.text:
        # the template's hooks are copied into the repository's git directory
        if git_dir is None:
            top = operands[0] if operands else Word(".")
            git_dir = top if bare else Word(top.text.rstrip("/") + "/.git", top.dynamic)
        j.write(Word(git_dir.text.rstrip("/") + "/hooks", git_dir.dynamic), cwd, "git init --template")


def _git_clone(g: _Git) -> None:
    j, cwd = g.j, g.cwd
    j.quiet()
    opts, operands = _getopt(
        g.rest,
        "objuc",
        (
            "--origin",
            "--branch",
            "--upload-pack",
            "--reference",
            "--depth",
            "--shallow-since",
            "--shallow-exclude",
            "--config",
            "--template",
            "--separate-git-dir",
            "--jobs",
            "--filter",
            "--server-option",
            "--bundle-uri",
            "--reference-if-able",
        ),
    )
    for o, v in opts:
        if o in ("-c", "--config") and v is not None and _git_key_runs_code(v.text.split("=", 1)[0]):
            j.unknown(f"git clone -c {v.text[:40]}: a setting that runs a program")
        if o in ("-u", "--upload-pack", "--template"):
            j.unknown(f"git clone {o}: runs a program; proctor cannot tell what it writes")
    if len(operands) >= 2:
        j.write(operands[1], cwd, "git clone")
    elif operands:
        url = operands[0].text.rstrip("/")
        base = url.rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        base = base[:-4] if base.endswith(".git") else base
        j.write(Word(base or "repository", operands[0].dynamic), cwd, "git clone")


# The options git archive reads before the rest, -o and --output among them (builtin/archive.c's
# first pass, which keeps every other option and its value for later): `--prefix -ofile` writes
# file, for --prefix takes no value there; `--remote -ofile` does not.
_GIT_ARCHIVE_VALUES = ("--remote", "--exec")


def _git_archive(g: _Git) -> None:
    """git archive: the archive to -o/--output (attached or not), else to stdout."""
    g.outputs("-o", "--output", values=_GIT_ARCHIVE_VALUES)


def _git_bundle(g: _Git) -> None:
    j, rest, texts = g.j, g.rest, g.texts
    if texts[:1] == ["create"] and len(rest) > 1:
        _, operands = _getopt(rest[1:])
        if operands:
            j.write(operands[0], g.cwd, "git bundle create", stream=True)
    elif texts[:1] not in (["verify"], ["list-heads"]):
        j.quiet()


def _git_format_patch(g: _Git) -> None:
    j = g.j
    if "--stdout" in g.texts:
        return
    j.quiet()
    opts, _ = _getopt(g.rest, "o", ("--output-directory",))
    directory = _value(opts, "-o", "--output-directory")
    if directory is not None:
        j.write(directory, g.cwd, "git format-patch -o")
    else:
        j.unknown("git format-patch: writes patch files named after commits; proctor cannot name them")


def _git_merge_file(g: _Git) -> None:
    texts = g.texts
    _, operands = _getopt(g.rest, "L")
    if "-p" not in texts and "--stdout" not in texts and operands:
        g.j.write(operands[0], g.base, "git merge-file")


def _git_rm(g: _Git) -> None:
    j = g.j
    opts, operands = _getopt(g.rest, "", ("--pathspec-from-file",))
    if _has(opts, "--pathspec-from-file"):
        j.unknown("git rm --pathspec-from-file: removes paths listed in a file; proctor cannot name them")
    if _has(opts, "--cached", "-n", "--dry-run"):
        j.quiet()
        return
    _git_pathspecs(g, operands, "git rm")
    if not operands:
        j.quiet()


def _git_mv(g: _Git) -> None:
    _copy_like(
        g.j,
        "mv",
        [w for w in g.rest if w.text not in ("-k", "-f", "-n", "-v", "--dry-run", "--verbose")],
        g.base,
        g.command,
    )


def _git_stash(g: _Git) -> None:
    j, rest, texts = g.j, g.rest, g.texts
    action = texts[0] if texts and not texts[0].startswith("-") else "push"
    if action in ("list", "show"):
        g.outputs("--output")  # log's and diff's reading: their --output writes
        return
    j.quiet()
    if action in ("drop", "clear", "create", "store"):
        return
    if action in ("push", "save") and "--" in texts:
        for word in rest[texts.index("--") + 1 :]:
            j.write(word, g.base, "git stash push --")
        return
    g.whole_tree(f"stash {action}" if texts and not texts[0].startswith("-") else "stash")


def _git_reset(g: _Git) -> None:
    g.j.quiet()
    # git takes any unambiguous prefix of a long option (`--har`): getopt expands the ones named
    opts, _ = _getopt(g.rest, "", ("--pathspec-from-file",), ("--hard", "--merge", "--keep"))
    tree = next((o for o, _v in opts if o in ("--hard", "--merge", "--keep")), None)
    if tree is not None:
        g.whole_tree("reset " + tree)


def _git_clean(g: _Git) -> None:
    j = g.j
    opts, operands = _getopt(g.rest, "e", ("--exclude",))
    if _has(opts, "-n", "--dry-run"):
        return
    j.quiet()
    if _has(opts, "-i", "--interactive"):
        j.unknown("git clean -i: asks which files to remove; proctor cannot name them")
    if operands:
        _git_pathspecs(g, operands, "git clean")
    else:
        j.unknown("git clean: removes untracked files under the current directory; proctor cannot name them")


def _git_checkout_index(g: _Git) -> None:
    j, base, cwd = g.j, g.base, g.cwd
    j.quiet()
    opts, operands = _getopt(g.rest, "", ("--prefix", "--stage"), ("--all", "--stdin", "--temp", "--force", "--index"))
    prefix = _value(opts, "--prefix")
    if _has(opts, "--temp"):
        j.unknown("git checkout-index --temp: writes temporary files proctor cannot name")
        return
    if _has(opts, "-a", "--all", "--stdin") or not operands:
        if prefix is not None:
            j.write(prefix, cwd, "git checkout-index --prefix")
        elif _has(opts, "-a", "--all", "--stdin"):
            g.whole_tree("checkout-index -a")
        return
    for word in operands:
        target = Word(prefix.text + word.text, prefix.dynamic or word.dynamic) if prefix is not None else word
        j.write(target, base if prefix is None else cwd, "git checkout-index")


def _git_read_tree(g: _Git) -> None:
    g.j.quiet()
    # -u updates the work tree, alone or clustered with other short flags (-mu, -um)
    if any(t.startswith("-") and not t.startswith("--") and "u" in t[1:] for t in g.texts):
        g.whole_tree("read-tree -u")


def _git_switch(g: _Git) -> None:
    g.j.quiet()
    opts, operands = _getopt(
        g.rest, "cC", ("--create", "--force-create", "--orphan"), ("--discard-changes", "--force", "--merge")
    )
    if (
        _has(opts, "-c", "-C", "--create", "--force-create")
        and (not operands or operands[0].text in ("HEAD", "@"))
        and not _has(opts, "-f", "--discard-changes", "--force", "-m", "--merge")
    ):
        return  # a new branch where HEAD is; one at another start point checks that out
    g.whole_tree("switch" + (f" {operands[0].text}" if operands else ""))


def _git_bisect(g: _Git) -> None:
    if g.texts[:1] in (["log"], ["visualize"], ["view"], ["terms"]):
        g.outputs("--output")  # view and visualize are log's reading: its --output writes
        return
    g.j.quiet()
    g.whole_tree("bisect")


def _git_submodule(g: _Git) -> None:
    texts = g.texts
    if texts[:1] in ([], ["status"], ["summary"]):
        return
    g.j.quiet()
    g.j.unknown(f"git submodule {texts[0]}: writes submodules' files; proctor cannot name them")


def _git_sparse_checkout(g: _Git) -> None:
    if g.texts[:1] == ["list"]:
        return
    g.j.quiet()
    g.whole_tree("sparse-checkout")


def _git_tree_wide(g: _Git) -> None:
    """The rest of _GIT_TREE_WIDE (merge, rebase, pull, ...): a rewrite across the work tree."""
    g.j.quiet()
    g.whole_tree(g.sub)


def _git_unknown(g: _Git) -> None:
    g.j.unknown(f"git {g.sub}: a git command proctor does not know; it cannot tell what it writes")


def _git_pathspecs(g: _Git, words: list[Word], who: str) -> None:
    """Paths a command writes, given as git pathspecs: a literal one is that path; one with magic
    (`:!x`, `:/x`, `:(glob)...`) or a glob, which git matches against every tracked file at any
    depth, names no path proctor can list, so the whole tree may be written."""
    for word in words:
        if not word.dynamic and (word.text.startswith(":") or any(ch in word.text for ch in "*?[")):
            g.whole_tree(f"{who.split(' ', 1)[1]} {word.text[:40]}")
        else:
            g.j.write(word, g.base, who, follow=False)


def _git_checkout(g: _Git) -> None:
    """checkout and restore."""
    j, sub, rest, texts, base = g.j, g.sub, g.rest, g.texts, g.base
    opts, operands = _getopt(
        rest,
        "bBsU",
        ("--orphan", "--source", "--conflict", "--pathspec-from-file", "--unified"),
        ("--force", "--worktree", "--staged", "--patch", "--detach", "--merge"),  # flags: their prefixes
    )
    j.quiet()
    if _has(opts, "--pathspec-from-file"):
        j.unknown(f"git {sub} --pathspec-from-file: paths listed in a file; proctor cannot name them")
        return
    if _has(opts, "-p", "--patch"):
        j.unknown(f"git {sub} -p: asks which hunks to take; proctor cannot name them")
    if sub == "restore" and _has(opts, "-S", "--staged") and not _has(opts, "-W", "--worktree"):
        return
    force = _has(opts, "-f", "--force")
    if "--" in texts:
        paths = rest[texts.index("--") + 1 :]
        if paths or sub == "restore":
            _git_pathspecs(g, paths, f"git {sub} --")
            return
        # `git checkout <rev> --` names no path: the words before it are a revision, never a path
        if operands and not _has(opts, "-b", "-B", "--orphan") or force:
            g.whole_tree(f"checkout {operands[0].text if operands else '-f'} --")
            return
    if sub == "restore":
        _git_pathspecs(g, operands, "git restore")
        return
    if _has(opts, "-b", "-B", "--orphan"):
        if (not operands or operands[0].text in ("HEAD", "@")) and not force:
            return  # a new branch where HEAD is: the tree stays as it is (-f would undo its changes)
        g.whole_tree(f"checkout -b <branch> {operands[0].text if operands else 'HEAD'}")  # checked out
        return
    if len(operands) >= 2:
        _git_pathspecs(g, operands[1:], "git checkout <rev> path")
        return
    if operands:
        word = operands[0]
        path = None if word.dynamic or base is None else j.target(word, base, "git checkout")
        if path and os.path.lexists(path):
            j.write(word, base, "git checkout", follow=False)
            return
        g.whole_tree(f"checkout {word.text}")
        return
    if _has(opts, "-f", "--force"):
        g.whole_tree("checkout -f")


def _git_apply(g: _Git) -> None:
    j, rest, base, command = g.j, g.rest, g.base, g.command
    opts, operands = _getopt(
        rest,
        "pC",
        ("--exclude", "--include", "--directory", "--whitespace", "--build-fake-ancestor"),
        ("--apply", "--check", "--stat", "--numstat", "--summary", "--cached", "--index", "--reject"),
    )
    if _has(opts, "--check", "--stat", "--numstat", "--summary") and not _has(opts, "--apply"):
        return
    j.quiet()
    if _has(opts, "--cached") and not _has(opts, "--index"):
        return
    strip = _value(opts, "-p")
    directory = _value(opts, "--directory")
    if (
        not operands
        and command.stdin_script is not None
        and not command.stdin_dynamic
        and (strip is None or strip.text.isdigit())
    ):
        names = diff_paths(command.stdin_script, int(strip.text) if strip is not None else 1)
        if names:
            for name in names:
                path = (directory.text.rstrip("/") + "/" + name) if directory is not None else name
                j.write(Word(path, directory is not None and directory.dynamic), base, "git apply")
            return
    shown = operands[0].text if operands else "-"
    j.unknown(f"git apply {shown}: applies a diff proctor does not read; it cannot tell what it writes")


def _git_config(g: _Git) -> None:
    j, rest, texts, cwd = g.j, g.rest, g.texts, g.cwd
    writes = ("--unset", "--unset-all", "--remove-section", "--rename-section", "--add", "--replace-all", "--edit")
    opts, operands = _getopt(
        rest,
        "f",
        ("--file", "--blob", "--type", "--default", "--comment"),
        writes + ("--global", "--system", "--local", "--worktree", "--list", "--get", "--get-all", "--get-regexp"),
    )
    reads = (
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "-l",
        "--list",
        "--get-color",
        "--get-colorbool",
        "--show-origin",
        "--show-scope",
        "--name-only",
    )
    if _has(opts, *reads) or operands[:1] in ([Word("get")],) or texts[:1] in (["get"], ["list"]):
        return
    if operands and operands[0].text in ("get", "list"):
        return
    if len(operands) == 1 and not _has(opts, "-e", *writes):
        return  # `git config KEY` reads it
    if _has(opts, "-e", "--edit"):
        j.unknown("git config -e: opens an editor; proctor cannot tell what it writes")
        return
    j.quiet()
    keys = operands[1:2] if operands and operands[0].text in ("set", "unset") else operands[:1]
    for key in keys:
        if _git_key_runs_code(key.text):
            j.unknown(f"git config {key.text}: a setting that runs a program; proctor cannot tell what it writes")
    file = _value(opts, "-f", "--file")
    if file is not None:
        j.write(file, cwd, "git config --file")
    elif _has(opts, "--global"):
        _git_global_config(j, "git config --global", cwd)
    elif _has(opts, "--system"):
        j.write(Word("/etc/gitconfig"), cwd, "git config --system")


def _git_global_config(j: _Judge, who: str, cwd: str | None) -> None:
    """git's global configuration, written: ~/.gitconfig (and the XDG file, when git uses it), with
    the HOME the command runs under."""
    if j.home is None:
        j.unknown(f"{who}: writes ~/.gitconfig under a HOME held in a variable")
        return
    home = j.home.rstrip("/")
    path = j.write(Word(home + "/.gitconfig"), cwd, who)
    xdg = os.environ.get("XDG_CONFIG_HOME") or home + "/.config"
    if path and not os.path.exists(path) and os.path.exists(os.path.join(cwd or "/", xdg, "git/config")):
        j.write(Word(xdg + "/git/config"), cwd, who)


def _git_subcommands(
    order: Iterable[tuple[Iterable[str], Callable[[_Git], None]]],
) -> dict[str, Callable[[_Git], None]]:
    """Each name's handler: the first entry of `order` that lists it."""
    table: dict[str, Callable[[_Git], None]] = {}
    for names, handler in order:
        for name in names:
            table.setdefault(name, handler)
    return table


# Each subcommand's handler, found in one look-up where an if-chain once tested them in this order.
# A name in two entries keeps the first (setdefault), as the chain's first branch won: diff, log and
# show write --output though _GIT_READS lists them, grep's -O is checked before the reads,
# maintenance before the rest of _GIT_QUIET (falling back to it), and checkout, stash, reset, ...
# their own handlers before _GIT_TREE_WIDE. A name in none is _git_unknown. The programs named on
# the command line (_git_named_programs) are checked before any of them. init is judged in _git
# itself, for it reads git's global options too (--bare, --git-dir).
_GIT_SUBCOMMANDS = _git_subcommands(
    (
        (("diff", "log", "show", "whatchanged", "range-diff"), _git_output),
        (("grep",), _git_grep),
        (_GIT_READS, _git_read),
        (("maintenance",), _git_maintenance),
        (_GIT_QUIET, _git_quiet),
        (("branch",), _git_branch),
        (("tag",), _git_tag),
        (("remote",), _git_remote),
        (("notes",), _git_notes),
        (("reflog",), _git_reflog),
        (("worktree",), _git_worktree),
        (("config",), _git_config),
        (("clone",), _git_clone),
        (("archive",), _git_archive),
        (("bundle",), _git_bundle),
        (("format-patch",), _git_format_patch),
        (("merge-file",), _git_merge_file),
        (("checkout", "restore"), _git_checkout),
        (("rm",), _git_rm),
        (("mv",), _git_mv),
        (("stash",), _git_stash),
        (("reset",), _git_reset),
        (("clean",), _git_clean),
        (("apply",), _git_apply),
        (("checkout-index",), _git_checkout_index),
        (("read-tree",), _git_read_tree),
        (("switch",), _git_switch),
        (("bisect",), _git_bisect),
        (("submodule",), _git_submodule),
        (("sparse-checkout",), _git_sparse_checkout),
        (_GIT_TREE_WIDE, _git_tree_wide),
    )
)
