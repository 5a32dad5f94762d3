"""The symbol index's cache (proctor/store/symbol_cache.py): what it keeps comes back, another
layout's file is emptied rather than read, and a file that cannot be opened or read is worked
around by the index, never trusted."""

from __future__ import annotations

import os
import sqlite3

import pytest

from proctor.store.symbol_cache import CacheError, SymbolCache
from proctor.symbols import index as index_mod
from tests.support import git, make_repo

NAMES = [("Legacy", "3,9"), ("#inner", "4"), ("=Legacy", '[["Legacy","class",1,2]]')]


def test_round_trip(tmp_path):
    path = str(tmp_path / "symbols.db")
    cache = SymbolCache.open(path, 7)
    assert cache is not None
    assert cache.get("b1", "python", "v1") is None
    cache.put("b1", "python", "v1", '[["Legacy","class",1,2]]', None, NAMES)
    cache.put("b2", "python", "v1", "[]", "it does not parse", [("Other", "1")])
    cache.see("/checkout", '{"a.py":[[1,2,3,4],""]}')
    cache.close()

    cache = SymbolCache.open(path, 7)
    assert cache is not None
    defs, error, rows = cache.get("b1", "python", "v1") or ("", "", [])
    assert (defs, error, sorted(rows)) == ('[["Legacy","class",1,2]]', None, sorted(NAMES))
    assert cache.get("b1", "python", "v1", ["Legacy"]) == ('[["Legacy","class",1,2]]', None, [("Legacy", "3,9")])
    assert cache.get("b1", "python", "v2") is None, "another grammar's version is another key"
    assert cache.get("b2", "python", "v1") == ("[]", "it does not parse", [("Other", "1")])
    summaries, named = cache.many(["b1", "b2", "b3"], ["Legacy", "=Legacy"])
    assert sorted(summaries) == [("b1", "python", "v1", None), ("b2", "python", "v1", "it does not parse")]
    assert sorted(named) == sorted(
        [("b1", "python", "v1", "Legacy", "3,9"), ("b1", "python", "v1", "=Legacy", '[["Legacy","class",1,2]]')]
    )
    assert cache.seen("/checkout") == '{"a.py":[[1,2,3,4],""]}'
    assert cache.seen("/elsewhere") is None
    cache.close()


def test_many_spans_chunks(tmp_path):
    cache = SymbolCache.open(str(tmp_path / "symbols.db"), 1)
    assert cache is not None
    blobs = [f"b{i}" for i in range(1000)]
    for blob in blobs:
        cache.put(blob, "python", "v", "[]", None, [("N", "1")])
    summaries, named = cache.many(blobs, ["N"])
    assert len(summaries) == 1000 and len(named) == 1000
    cache.close()


def test_another_layout_is_emptied_not_read(tmp_path):
    path = str(tmp_path / "symbols.db")
    cache = SymbolCache.open(path, 7)
    assert cache is not None
    cache.put("b1", "python", "v1", "[]", None, NAMES)
    cache.see("/checkout", "{}")
    cache.close()

    cache = SymbolCache.open(path, 8)
    assert cache is not None
    assert cache.get("b1", "python", "v1") is None and cache.seen("/checkout") is None
    cache.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 8


def test_a_file_that_is_no_database(tmp_path):
    path = tmp_path / "symbols.db"
    path.write_bytes(b"not a database, " * 512)
    assert SymbolCache.open(str(path), 7) is None
    assert SymbolCache.open(str(tmp_path / "missing" / "symbols.db"), 7) is None


def test_a_table_gone_raises_the_caches_error(tmp_path):
    path = str(tmp_path / "symbols.db")
    cache = SymbolCache.open(path, 7)
    assert cache is not None
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE summaries")
    with pytest.raises(CacheError):
        cache.get("b1", "python", "v1")
    with pytest.raises(CacheError):
        cache.put("b1", "python", "v1", "[]", None, [])
    cache.close()
    cache.close()  # twice: harmless


def _repo(tmp_path) -> str:
    root = make_repo(tmp_path / "repo")
    with open(os.path.join(root, "legacy.py"), "w") as handle:
        handle.write("class Legacy:\n    pass\n\n\nLegacy()\n")
    git(root, "add", "legacy.py")
    git(root, "commit", "-qm", "legacy")
    return root


def test_the_index_works_around_a_corrupt_cache(tmp_path):
    pytest.importorskip("tree_sitter")
    root = _repo(tmp_path)
    cache_dir = str(tmp_path / "cache")
    with index_mod.Index(root, cache_dir) as index:
        first = index.ask(["Legacy"])
        assert index.parsed == 1
    with index_mod.Index(root, cache_dir) as index:
        assert index.ask(["Legacy"]).definitions("Legacy") == first.definitions("Legacy")
        assert index.parsed == 0, "a warm question parses nothing"

    with open(os.path.join(cache_dir, "symbols.db"), "r+b") as handle:
        handle.write(b"\0garbage" * 64)
    for name in os.listdir(cache_dir):
        if name.startswith("symbols.db-"):
            os.unlink(os.path.join(cache_dir, name))
    with index_mod.Index(root, cache_dir) as index:
        again = index.ask(["Legacy"])
        assert index.parsed == 1, "the summaries are computed again"
        assert again.definitions("Legacy") == first.definitions("Legacy")
        assert again.references("Legacy") == first.references("Legacy")


def test_the_index_rebuilds_another_layouts_cache(tmp_path):
    pytest.importorskip("tree_sitter")
    root = _repo(tmp_path)
    cache_dir = str(tmp_path / "cache")
    with index_mod.Index(root, cache_dir) as index:
        first = index.ask(["Legacy"])
    path = os.path.join(cache_dir, "symbols.db")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE summaries SET defs = '[]'")  # what another layout would mean by its rows
        db.execute("PRAGMA user_version = 1")
    with index_mod.Index(root, cache_dir) as index:
        again = index.ask(["Legacy"])
        assert index.parsed == 1
        assert again.definitions("Legacy") == first.definitions("Legacy") != []
    with sqlite3.connect(path) as db:
        layout = db.execute("PRAGMA user_version").fetchone()[0]
    assert layout == index_mod.SCHEMA_VERSION * 100 + int(index_mod.languages.QUERY_VERSION)
