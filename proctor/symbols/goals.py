"""Symbol goals, graded on the tree a job's checkout holds (`jobs-and-leases.md`, "Goals").

- `absent`: no definition of that exact name remains (a deleted `Legacy` is absent while
  `LegacyAdapter` exists);
- `present`: a definition of it exists;
- `unreferenced`: its definition still exists and nothing names it outside that definition;
  once the definition is gone the goal fails, since the graph counts references into a
  definition and a zero it cannot vouch for is not a pass;
- `changed` (the natural expectation): a definition of it was added, removed or edited since
  the job's checkpoint.

A name that is not an identifier, a file that could name it but will not parse, a text file in
a language proctor has no grammar for whose bytes hold it: the goal fails and says which.
Prose (Markdown, reStructuredText, plain text) names things without defining or referencing
them; a mention there is reported and decides nothing.

An ancestor's `absent` and `unreferenced` goals are graded on each descendant too, within the
descendant's write paths: a job that renames the callers in its own paths must leave none of
them behind, while the callers no job holds are the ancestor's to answer for.
"""

from __future__ import annotations

from proctor import claims as jpaths
from proctor import errors
from proctor.jobrecord import SYMBOL_NAME
from proctor.symbols import languages
from proctor.symbols.index import Answer, Index, names

SHOWN = 10  # subjects listed per kind of failure before "and N more"


EXPECT = ("changed", "present", "absent", "unreferenced")


def grade(
    index: Index,
    goal: dict,
    revision: str | None = None,
    changed: list[str] | None = None,
    diff_error: str | None = None,
    scope: list | None = None,
    handed: list[str] | None = None,
) -> tuple[bool, list[str]]:
    """(ok, subjects) for one symbol goal on `index`'s checkout. `changed` and `revision` (the
    paths changed since the checkpoint, and the checkpoint) grade `changed`; `scope` (claims)
    narrows the files graded to the paths they cover."""
    names = goal.get("symbols")
    if not isinstance(names, list) or not names:
        return False, ["the goal names no list of symbols, so there is nothing to observe"]
    expect = goal.get("expect") or "changed"
    if expect not in EXPECT:
        return False, [f"expect {expect!r} is not one of {', '.join(EXPECT)}"]
    bad = [n for n in names if not isinstance(n, str) or not SYMBOL_NAME.fullmatch(n)]
    if bad:
        return False, [f"{n!r} is not a name the symbol index can resolve (an identifier, or Scope.name)" for n in bad]
    try:
        if expect == "changed":
            return _changed(index, names, revision, changed, diff_error, set(handed or ()))
        whole = index.ask(names)
    except errors.ProctorError as exc:
        return False, [f"{exc.message}; an observation proctor could not make fails the goal"]
    # a directory's doubt (a link to one, a nested repository) is in scope where any path under it is
    answer = (
        whole
        if scope is None
        else Answer(
            whole.names,
            [
                m
                for m in whole.files
                if any(
                    jpaths.covers(c, m.path.rstrip("/")) or jpaths.covers(c, m.path.rstrip("/") + "/_") for c in scope
                )
            ],
        )
    )
    failing: list[str] = []
    passing: list[str] = []
    for name in names:
        ok, lines = _one(whole, answer, name, expect, index, scope)
        (passing if ok else failing).extend(lines)
    failing.extend(_doubts(answer, names, expect))
    notes = (
        [f"named in prose, which decides nothing: {_list([m.path for m in answer.prose()])}"] if answer.prose() else []
    )
    if failing:
        return False, failing + notes
    return True, passing + notes


def _one(whole: Answer, answer: Answer, name: str, expect: str, index: Index, scope) -> tuple[bool, list[str]]:
    """One name against `answer` (the files in scope); `whole` is the tree's answer, which
    says whether the definition still exists anywhere."""
    defs = answer.definitions(name)
    where = "within the job's write paths" if scope is not None else f"in {index.checkout}"
    if expect == "absent":
        if defs:
            return False, [f"{name} is still defined {where}: {_list([f'{p}:{d[2]} ({d[1]})' for p, d in defs])}"]
        macros = answer.in_macros(name)
        if macros:
            return False, [
                f"{name} appears inside a macro at {_list([f'{p}:{line}' for p, line in macros])}, "
                f"which may define it, and proctor does not expand macros"
            ]
        return True, [f"{name} is defined nowhere {where}"]
    if expect == "present":
        if not defs:
            return False, [f"{name} is defined nowhere {where}, so this goal is unmet"]
        return True, [f"{name} is defined in {_list([f'{p}:{d[2]}' for p, d in defs])}"]
    # unreferenced: graded while the definition exists, anywhere in the tree
    defs = whole.definitions(name)
    if not defs:
        return False, [
            f"{name} is no longer defined, so whether anything names it cannot be vouched for; "
            f"grade unreferenced while the definition exists, and declare absent for the job that "
            f"deletes it"
        ]
    in_scope = {m.path for m in answer.files}
    refs = [(p, line) for p, line in whole.references(name) if p in in_scope]
    if refs:
        return False, [f"{name} is still named {where}: {_list([f'{p}:{line}' for p, line in refs])}"]
    return True, [f"nothing names {name} {where} outside its definition ({_list([f'{p}:{d[2]}' for p, d in defs])})"]


def _doubts(answer: Answer, names: list[str], expect: str) -> list[str]:
    """What the answer could not read, said as why the goal cannot be vouched for."""
    out = []
    for m in answer.unreadable():
        out.append(f"{m.path} could name {', '.join(names)} but {m.error}, so the goal cannot be vouched for")
    unknown = answer.unknown()
    if unknown and expect in ("absent", "unreferenced"):
        for m in unknown[:SHOWN]:
            what = (
                "is prose that " + ", ".join(m.read_as_code) + " reads as code"
                if m.read_as_code
                else "is a binary file"
                if m.binary
                else "is in a language proctor has no grammar for"
            )
            out.append(
                f"{m.path} holds the text {', '.join(m.named)} and {what}, so whether it "
                f"{'defines' if expect == 'absent' else 'names'} the symbol cannot be told"
            )
        if len(unknown) > SHOWN:
            out.append(f"and {len(unknown) - SHOWN} more files with no grammar")
    return out


def _changed(
    index: Index,
    names: list[str],
    revision: str | None,
    changed: list[str] | None,
    diff_error: str | None,
    handed: set[str] | frozenset[str] = frozenset(),
) -> tuple[bool, list[str]]:
    if diff_error:
        return False, [f"{diff_error}, so whether {', '.join(names)} changed cannot be told"]
    if revision is None or changed is None:
        return False, ["the diff since the checkpoint could not be observed"]
    import os

    sources = [p for p in changed if languages.language_of(p)]
    before = index.summaries_at(revision, sources)
    after = {}
    for path in sources:
        full = os.path.join(index.checkout, path)
        if os.path.isfile(full):  # through a link: what the language reads there
            with open(full, "rb") as handle:
                after[path] = index.whole(path, handle.read())
    doubts = sorted({f"{m.path} {m.error}" for m in list(before.values()) + list(after.values()) if m.error})
    if doubts:  # a definition in a file that will not parse can neither be seen to change nor to stay
        return False, [f"whether {', '.join(names)} changed cannot be told: {d}" for d in doubts]
    failing, passing = [], []
    for name in names:
        old = _defs_of(before, name)
        new = _defs_of(after, name)
        differ = {p for p, *_ in set(old) ^ set(new)}
        if differ and differ <= handed:
            # the checkpoint is the commit; the job was handed uncommitted work in these files, so
            # whether the change is the holder's or the hand-over's cannot be told
            failing.append(
                f"{name} differs from {revision[:8]} only in {_list(sorted(differ))}, handed to the job "
                f"with uncommitted work at fork; whose change it is cannot be told, so this goal is unmet"
            )
            continue
        if sorted(old) != sorted(new):
            verb = "added" if not old else "removed" if not new else "edited"
            passing.append(f"{name} was {verb} since {revision[:8]} ({_list(sorted({p for p, *_ in old + new}))})")
        else:
            failing.append(
                f"{name} did not change since {revision[:8]}: no definition of it differs in the "
                f"{len(changed)} changed paths, so this goal is unmet"
            )
    if failing:
        return False, failing
    return True, passing


def _defs_of(mentions: dict, name: str) -> list[tuple]:
    return [
        (path, d[4], d[1], d[5])
        for path, m in mentions.items()
        for d in (m.summary or {}).get("defs", ())
        if names(d, name)
    ]


def _list(items: list[str]) -> str:
    shown = ", ".join(items[:SHOWN])
    return shown + (f", and {len(items) - SHOWN} more" if len(items) > SHOWN else "")
