"""What an attempt must leave of the repository as it found it, outside its own work tree.

A worker shares the repository's git directory with the person: its refs, its config and
hooks, its object database. Before each attempt `Snapshot.take` records them; `settle` after
it (in `proctor work`, or in its watchdog when `proctor work` was killed) compares, puts back
what can be put back, and names every change, each of which fails the attempt:

- refs: every ref of the repository (branches, tags, notes, replace objects, the stash,
  remote-tracking refs) and HEAD of the person's checkout and of the attempt's worktree; a ref
  the attempt added is deleted again, a moved one is named (it may be the person's); a commit
  in the worktree undone by a reset still shows in its HEAD's reflog;
- files that change how git behaves: the repository's config and hooks, info/attributes and
  info/exclude, the object store's alternates, the attempt worktree's own admin files
  (commondir, gitdir, config.worktree), and the person's global git config, excludes and
  attributes, put back byte for byte;
- objects: a loose object whose content does not hash to its name (planted where git, which
  never rewrites an object it has, would take it for the blob or tree proctor commits) is
  deleted; a new pack that `git verify-pack` refuses, with its index, too.

Moves of a branch by `proctor work` landing another job meanwhile are not the attempt's: the
commits between are those the trail records as landed (`job_commit`). And `noticed` names the
files of the person's checkout that changed while the attempt ran.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import zlib

from proctor.vcs import git

WATCHED = (
    "config",
    "config.worktree",
    "hooks",
    "info/attributes",
    "info/exclude",
    "objects/info/alternates",
    "objects/info/http-alternates",
    "commondir",
)
WORKTREE_ADMIN = ("commondir", "gitdir", "config.worktree", "info/exclude")
MAX_KEPT = 1 << 20  # a watched file larger than this is named when changed, not put back


class Snapshot:
    def __init__(self, data: dict) -> None:
        self.data = data

    # ------------------------------------------------------------------ taking

    @classmethod
    def take(cls, root: str, common: str, worktree: str) -> "Snapshot":
        admin = _admin_dir(worktree)
        files: dict[str, list | None] = {}
        for base, names in ((common, WATCHED), (admin, WORKTREE_ADMIN)):
            if not base:
                continue
            for name in names:
                path = os.path.join(base, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    for entry in sorted(os.listdir(path)):
                        files[os.path.join(path, entry)] = _file(os.path.join(path, entry))
                elif os.path.lexists(path):
                    files[path] = _file(path)
                else:
                    files[path] = None
        for path in global_files(root):
            files[path] = _file(path) if os.path.lexists(path) else None
        loose, packs = _objects(common)
        # where each watched file's directory really is: a put-back never follows a link the attempt
        # put in its place (into the repository's .git, proctor's state)
        parents = {os.path.dirname(path): os.path.realpath(os.path.dirname(path)) for path in files}
        return cls(
            {
                "root": root,
                "common": common,
                "worktree": worktree,
                "admin": admin,
                "parents": parents,
                "checkout": _checkout_state(root),
                "refs": refs(root, worktree),
                "reflog": _lines(os.path.join(admin, "logs", "HEAD")) if admin else 0,
                "files": files,
                "loose": sorted(loose),
                "packs": sorted(packs),
                "format": git.run(root, "rev-parse", "--show-object-format", check=False).stdout.decode().strip()
                or "sha1",
            }
        )

    def save(self, path: str) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(self.data, handle)

    @classmethod
    def load(cls, path: str) -> "Snapshot":
        with open(path, encoding="utf-8") as handle:
            return cls(json.load(handle))

    # ------------------------------------------------------------------ settling

    def settle(self, excused=None) -> list[str]:
        """Put back what can be, delete what the attempt added; name every change.
        `excused(old, new)`: whether a ref's move from old to new is not the attempt's."""
        out = self._files() + self._refs(excused) + self._objects()
        admin = self.data.get("admin")
        if (
            admin
            and _lines(os.path.join(admin, "logs", "HEAD")) > self.data.get("reflog", 0)
            and not any("HEAD of the attempt's worktree" in line for line in out)
        ):
            out.append(
                "the attempt moved HEAD of its worktree and back (its reflog grew): a worker never commits, "
                "amends or resets; what it committed is not passed work"
            )
        return out

    def _files(self) -> list[str]:
        out = []
        before: dict = self.data["files"]
        now: dict = {}
        for path in list(before):
            now[path] = _file(path) if os.path.lexists(path) else None
        for base, names in ((self.data["common"], WATCHED), (self.data.get("admin"), WORKTREE_ADMIN)):
            if not base:
                continue
            for name in names:
                path = os.path.join(base, name)
                if os.path.isdir(path) and not os.path.islink(path) and name not in ("config", "commondir"):
                    for entry in os.listdir(path):
                        full = os.path.join(path, entry)
                        if full not in before:
                            now[full] = _file(full)
        for path in sorted(now):
            old, new = before.get(path), now[path]
            if (old or [None])[0] == (new or [None])[0]:
                continue
            how = "added" if old is None else "removed" if new is None else "rewritten"
            parent = os.path.dirname(path)
            recorded = (self.data.get("parents") or {}).get(parent, os.path.realpath(parent))
            if os.path.realpath(parent) != recorded:
                out.append(
                    f"the attempt put a link in place of {parent} (it leads to {os.path.realpath(parent)}): "
                    f"proctor touched nothing through it; look at it. A worker never touches git's hooks "
                    f"or config"
                )
                continue
            try:
                if old is None:
                    if os.path.isdir(path) and not os.path.islink(path):
                        shutil.rmtree(path)
                    else:
                        os.unlink(path)
                    back = "proctor removed it"
                elif old[1] is not None:
                    if os.path.lexists(path):
                        if os.path.isdir(path) and not os.path.islink(path):
                            shutil.rmtree(path)
                        else:
                            os.unlink(path)
                    with open(path, "wb") as handle:
                        handle.write(base64.b64decode(old[1]))
                    os.chmod(path, old[2])
                    back = "proctor put it back"
                else:
                    back = "proctor could not put it back; look at it"
            except OSError as exc:
                back = f"proctor could not put it back ({exc.strerror}); look at it"
            out.append(
                f"the attempt changed {self._shown(path)} ({how}; {back}): a worker never touches git's hooks or config"
            )
        return out

    def _shown(self, path: str) -> str:
        common = self.data["common"]
        if path.startswith(common.rstrip("/") + "/"):
            return ".git/" + path[len(common.rstrip("/")) + 1 :]
        return path

    def _refs(self, excused) -> list[str]:
        before: dict = self.data["refs"]
        now = refs(self.data["root"], self.data["worktree"])
        out = []
        for name in sorted(set(before) | set(now)):
            old, new = before.get(name), now.get(name)
            if old == new:
                continue
            old_sha, _, old_ref = (old or "").partition(" ")
            new_sha, _, new_ref = (new or "").partition(" ")
            if old is not None and new is not None and old_ref == new_ref and excused and excused(old_sha, new_sha):
                continue
            if old is None and name.startswith("refs/"):
                deleted = git.run(self.data["root"], "update-ref", "-d", name, new_sha, check=False).returncode == 0
                out.append(
                    f"the attempt added {name} ({new_sha[:12]}; "
                    f"{'proctor deleted it' if deleted else 'proctor could not delete it; look at it'}): a "
                    f"worker never commits, amends, resets or moves a ref; its commits are not passed work"
                )
                continue
            out.append(
                f"the attempt moved {name} from {(old_sha or 'nothing')[:12]} to {(new_sha or 'nothing')[:12]}: "
                f"a worker never commits, amends, resets or moves a ref; its commits are not passed work"
            )
        return out

    def _objects(self) -> list[str]:
        common, algo = self.data["common"], self.data.get("format") or "sha1"
        loose, packs = _objects(common)
        out = []
        for rel in sorted(loose - set(self.data["loose"])):
            path = os.path.join(common, "objects", rel)
            name = rel.replace("/", "")
            if not _sound(path, name, algo):
                try:
                    os.unlink(path)
                    back = "proctor deleted it"
                except OSError as exc:
                    back = f"proctor could not delete it ({exc.strerror})"
                out.append(
                    f"the attempt planted object {name[:12]} whose content is not what its name says "
                    f"({back}): git would have taken it for what proctor commits"
                )
        for pack in sorted(packs - set(self.data["packs"])):
            path = os.path.join(common, "objects", "pack", pack)
            checked = git.run(self.data["root"], "verify-pack", path[:-5] + ".idx", check=False)
            if checked.returncode != 0:
                for suffix in (".pack", ".idx", ".rev", ".keep", ".mtimes"):
                    try:
                        os.unlink(path[:-5] + suffix)
                    except OSError:
                        pass
                out.append(f"the attempt added pack {pack} that git's own check refuses (proctor deleted it)")
        return out

    def noticed(self) -> list[str]:
        """Files of the person's checkout that changed while the attempt ran. A worker writes its
        own worktree (the guard refuses it the person's); proctor cannot tell who wrote these,
        so it names them and lands nothing over them."""
        before = self.data.get("checkout") or {}
        now = _checkout_state(self.data["root"])
        changed = sorted(p for p in set(before) | set(now) if before.get(p) != now.get(p))
        return changed


def global_files(root: str) -> list[str]:
    """git's configuration outside the repository that steers what it commits and ignores:
    the person's global config, excludes and attributes (where git reads them)."""
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    paths = [
        os.path.join(home, ".gitconfig"),
        os.path.join(xdg, "git", "config"),
        os.path.join(xdg, "git", "ignore"),
        os.path.join(xdg, "git", "attributes"),
    ]
    for key in ("core.excludesFile", "core.attributesFile"):
        named = git.run(root, "config", "--path", "--get", key, check=False).stdout.decode().strip()
        if named:
            paths.append(os.path.expanduser(named))
    paths.append("/etc/gitconfig")  # the system file, where a worker running as root could write one
    # every file git reads its global and system config from, and every file those include
    # (include.path, includeIf.*.path), whether or not it exists yet: a worker that writes a file
    # the person's ~/.gitconfig includes steers git as surely as one that writes ~/.gitconfig
    listed = git.run(root, "config", "--list", "--show-origin", "--show-scope", check=False).stdout
    for line in listed.decode("utf-8", "replace").splitlines():
        scope, _, rest = line.partition("\t")
        origin, _, entry = rest.partition("\t")
        if scope not in ("global", "system") or not origin.startswith("file:"):
            continue
        where = origin[5:]
        paths.append(where)
        key, _, value = entry.partition("=")
        if key.startswith(("include.", "includeif.")) and key.endswith(".path") and value:
            value = os.path.expanduser(value)
            paths.append(value if os.path.isabs(value) else os.path.join(os.path.dirname(where), value))
    return list(dict.fromkeys(paths))


def _checkout_state(root: str) -> dict[str, str]:
    """The person's checkout as `git status` sees it: each changed or untracked path, its digest."""
    from proctor.vcs.checkpoint import handed_digest

    try:
        _revision, _branch, changed, untracked = git.status(root)
    except Exception:
        return {}
    return {
        os.fsdecode(p).rstrip("/"): handed_digest(os.path.join(root, os.fsdecode(p)))
        for p in (changed + untracked)[:5000]
    }


def refs(root: str, worktree: str) -> dict[str, str]:
    """Every ref of the repository, and HEAD of both checkouts (sha, and the branch it names)."""
    seen = {}
    listed = git.run(root, "for-each-ref", "--format=%(refname) %(objectname)", check=False).stdout
    for line in listed.decode("utf-8", "replace").splitlines():
        name, _, sha = line.partition(" ")
        seen[name] = sha
    for label, where in (("HEAD of your checkout", root), ("HEAD of the attempt's worktree", worktree)):
        head = git.run(where, "rev-parse", "-q", "--verify", "HEAD", check=False).stdout.decode().strip()
        branch = git.run(where, "symbolic-ref", "-q", "HEAD", check=False).stdout.decode().strip()
        seen[label] = f"{head} {branch}".strip()
    return seen


def _admin_dir(worktree: str) -> str | None:
    """The worktree's own directory under .git/worktrees (from its .git file)."""
    from proctor.paths import _read_gitdir_file

    found = _read_gitdir_file(os.path.join(worktree, ".git"), worktree)
    return os.path.realpath(found) if found else None


def _file(path: str) -> list:
    """[digest, base64 bytes or None, mode] of a watched file."""
    from proctor.vcs.checkpoint import handed_digest

    digest = handed_digest(path)
    data, mode = None, None
    try:
        if os.path.isfile(path) and not os.path.islink(path) and os.path.getsize(path) <= MAX_KEPT:
            with open(path, "rb") as handle:
                data = base64.b64encode(handle.read()).decode()
            mode = os.stat(path).st_mode & 0o7777
    except OSError:
        pass
    return [digest, data, mode]


def _objects(common: str) -> tuple[set[str], set[str]]:
    base = os.path.join(common, "objects")
    loose: set[str] = set()
    try:
        fans = os.listdir(base)
    except OSError:
        return loose, set()
    for fan in fans:
        if len(fan) != 2:
            continue
        try:
            loose.update(f"{fan}/{name}" for name in os.listdir(os.path.join(base, fan)))
        except OSError:
            continue
    try:
        packs = {p for p in os.listdir(os.path.join(base, "pack")) if p.endswith(".pack")}
    except OSError:
        packs = set()
    return loose, packs


def _sound(path: str, name: str, algo: str) -> bool:
    """Whether the loose object at `path` hashes to `name`."""
    try:
        with open(path, "rb") as handle:
            data = zlib.decompress(handle.read())
    except (OSError, zlib.error):
        return False
    return hashlib.new(algo.replace("-", ""), data).hexdigest() == name


def _lines(path: str) -> int:
    from proctor.jobs.verify import _line_count

    return _line_count(path)
