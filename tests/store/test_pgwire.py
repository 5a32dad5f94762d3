"""pgwire.py, the guard's standard-library PostgreSQL client, against a real server
(tests/store/pgcluster.py): every authentication path, types, placeholders, errors, transactions."""

from __future__ import annotations

import subprocess
import sys

import pytest

from proctor.store import pgwire
from proctor.store.pgwire import PgConnectError, PgError, translate
from tests.store.pgcluster import PASSWORD, USER, _free_port, require_cluster


@pytest.fixture(scope="session")
def cluster():
    return require_cluster()


@pytest.fixture(autouse=True)
def no_pg_env(monkeypatch, tmp_path):
    for key in (
        "PGHOST",
        "PGPORT",
        "PGUSER",
        "PGDATABASE",
        "PGPASSWORD",
        "PGPASSFILE",
        "PGSSLMODE",
        "PGCONNECT_TIMEOUT",
        "PGAPPNAME",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture
def conn(cluster):
    with pgwire.connect(cluster.url(tcp=False)) as connection:
        yield connection


# -- authentication ----------------------------------------------------------------------------


def test_trust_over_the_unix_socket(cluster):
    with pgwire.connect(cluster.url(tcp=False)) as conn:
        assert conn.auth == "trust" and conn.status == "I"
        assert conn.execute("SELECT current_user, inet_server_addr()").fetchone() == (USER, None)
    # the socket directory as ?host=, the port as ?port=
    url = f"postgresql://{USER}@/postgres?host={cluster.socket_dir}&port={cluster.port}"
    with pgwire.connect(url) as conn:
        assert conn.auth == "trust"
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_defaults_come_from_the_environment(cluster, monkeypatch):
    monkeypatch.setenv("PGHOST", cluster.socket_dir)
    monkeypatch.setenv("PGPORT", str(cluster.port))
    monkeypatch.setenv("PGUSER", USER)
    monkeypatch.setenv("PGDATABASE", "template1")
    with pgwire.connect("postgres://") as conn:
        assert conn.execute("SELECT current_database(), current_user").fetchone() == ("template1", USER)


def test_scram_over_tcp(cluster):
    with pgwire.connect(cluster.url(), options={"application_name": "pgwire-test"}) as conn:
        assert conn.auth == "scram-sha-256"
        assert conn.execute("SELECT current_setting('application_name')").fetchone() == ("pgwire-test",)
        assert conn.parameters["server_encoding"] == "UTF8"


def test_scram_with_a_wrong_password(cluster):
    with pytest.raises(PgConnectError) as caught:
        pgwire.connect(cluster.url(password="wrong"))
    assert caught.value.sqlstate == "28P01"
    assert "authentication failed" in str(caught.value) and f"127.0.0.1:{cluster.port}" in str(caught.value)


def test_no_password_at_all(cluster):
    with pytest.raises(PgConnectError, match="a password is required"):
        pgwire.connect(cluster.url(password=None))


def test_password_from_pgpassword(cluster, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    with pgwire.connect(cluster.url(password=None)) as conn:
        assert conn.auth == "scram-sha-256"


def _role(cluster, name, encryption, method, password):
    cluster.add_hba(f"host all {name} 127.0.0.1/32 {method}")
    with pgwire.connect(cluster.url(tcp=False)) as conn:
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = ?", (name,)).fetchall():
            conn.execute(f"SET password_encryption = '{encryption}'")
            conn.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
        stored = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = ?", (name,)).fetchone()[0]
    assert stored.startswith("md5" if encryption == "md5" else "SCRAM-SHA-256$")


def test_md5(cluster):
    _role(cluster, "proctor_md5", "md5", "md5", "md5-secret")
    with pgwire.connect(cluster.url(user="proctor_md5", password="md5-secret")) as conn:
        assert conn.auth == "md5"
        assert conn.execute("SELECT current_user").fetchone() == ("proctor_md5",)
    with pytest.raises(PgConnectError, match="authentication failed") as caught:
        pgwire.connect(cluster.url(user="proctor_md5", password="nope"))
    assert caught.value.sqlstate == "28P01"


def test_cleartext_password(cluster):
    _role(cluster, "proctor_clear", "scram-sha-256", "password", "clear-secret")
    with pgwire.connect(cluster.url(user="proctor_clear", password="clear-secret")) as conn:
        assert conn.auth == "password"
        assert conn.execute("SELECT current_user").fetchone() == ("proctor_clear",)


def test_unicode_password_over_scram(cluster):
    _role(cluster, "proctor_uni", "scram-sha-256", "scram-sha-256", "pässwörd✓")
    with pgwire.connect(cluster.url(user="proctor_uni", password="p%C3%A4ssw%C3%B6rd%E2%9C%93")) as conn:
        assert conn.auth == "scram-sha-256"


def test_passfile_honoured_only_when_private(cluster, tmp_path, monkeypatch):
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"# comment\notherhost:*:*:*:nope\n127.0.0.1:{cluster.port}:*:{USER}:{PASSWORD}\n")
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    passfile.chmod(0o600)
    with pgwire.connect(cluster.url(password=None)) as conn:
        assert conn.auth == "scram-sha-256"
    passfile.chmod(0o644)
    with pytest.raises(PgConnectError, match="chmod 0600"):
        pgwire.connect(cluster.url(password=None))
    # ~/.pgpass when PGPASSFILE is unset
    monkeypatch.delenv("PGPASSFILE")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".pgpass").write_text(f"*:*:*:*:{PASSWORD}\n")
    (home / ".pgpass").chmod(0o400)
    with pgwire.connect(cluster.url(password=None)) as conn:
        assert conn.auth == "scram-sha-256"


def test_passfile_matching(tmp_path):
    path = tmp_path / "pgpass"
    path.write_text("db\\:host:5432:*:u:first\n*:5433:app:*:pa\\:ss\\\\word:with:colons\nlocalhost:5432:*:u:socket\n")
    path.chmod(0o600)
    match = pgwire._passfile_password
    assert match(str(path), "db:host", "5432", "x", "u") == "first"
    assert match(str(path), "anything", "5433", "app", "me") == "pa:ss\\word:with:colons"
    assert match(str(path), "anything", "5433", "other", "me") is None
    assert match(str(path), "/var/run/postgresql", "5432", "x", "u") == "socket"  # the default socket dir
    assert match(str(path), "/elsewhere", "5432", "x", "u") is None
    assert match(str(tmp_path / "missing"), "h", "1", "d", "u") is None


def test_refused_port_names_host_and_port():
    port = _free_port()
    with pytest.raises(PgConnectError) as caught:
        pgwire.connect(f"postgresql://u:p@127.0.0.1:{port}/db", timeout=2)
    assert f"127.0.0.1:{port}" in str(caught.value) and "refused" in str(caught.value).lower()


def test_missing_database_and_ssl_required(cluster):
    with pytest.raises(PgConnectError) as caught:
        pgwire.connect(cluster.url("no_such_db"))
    assert caught.value.sqlstate == "3D000"
    with pytest.raises(PgConnectError, match="does not accept SSL"):
        pgwire.connect(cluster.url() + "?sslmode=require")
    with pgwire.connect(cluster.url() + "?sslmode=disable&connect_timeout=3") as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_read_timeout_closes_the_connection(cluster):
    conn = pgwire.connect(cluster.url(tcp=False), timeout=0.3)
    with pytest.raises(PgConnectError, match="no answer within"):
        conn.execute("SELECT pg_sleep(2)")
    assert conn.closed
    with pytest.raises(PgConnectError, match="closed"):
        conn.execute("SELECT 1")


def test_url_parsing():
    parse = pgwire._parse_url
    assert parse("postgresql://us%40er:p%3Aw@db.example:6543/my%20db?sslmode=require&application_name=x") == {
        "user": "us@er",
        "password": "p:w",
        "host": "db.example",
        "port": "6543",
        "dbname": "my db",
        "sslmode": "require",
        "application_name": "x",
    }
    assert parse("postgres://%2Fvar%2Frun%2Fpostgresql/db") == {"host": "/var/run/postgresql", "dbname": "db"}
    assert parse("postgresql://[::1]:5433/db") == {"host": "::1", "port": "5433", "dbname": "db"}
    assert parse("postgresql:///db?host=/tmp/sock") == {"dbname": "db", "host": "/tmp/sock"}
    with pytest.raises(PgConnectError):
        parse("mysql://x/y")


# -- queries -----------------------------------------------------------------------------------


def test_types_round_trip(conn):
    every_byte = bytes(range(256))
    row = conn.execute(
        "SELECT ?, ?, ?, ?, ?, ?, ?, ?",
        (7, 2**62 + 5, -1.25, True, "héllo ✓ 🎉 'quoted' \\ back", every_byte, None, ""),
    ).fetchone()
    assert row == (7, 2**62 + 5, -1.25, 1, "héllo ✓ 🎉 'quoted' \\ back", every_byte, None, "")
    row = conn.execute(
        "SELECT 12.50::numeric, 12.00::numeric, -3::numeric, 'NaN'::numeric, true, false, "
        "3::int2, 4::int4, 'x'::name, 'y'::varchar, '{\"a\": 1}'::jsonb, 1.5::float4, "
        "'t'::char, 99::oid"
    ).fetchone()
    assert row == (
        12.5,
        12,
        -3,
        pytest.approx(float("nan"), nan_ok=True),
        True,
        False,
        3,
        4,
        "x",
        "y",
        '{"a": 1}',
        1.5,
        "t",
        99,
    )
    assert [type(v) for v in row[:3]] == [float, int, int]
    assert conn.execute("SELECT ?::numeric", (10**30,)).fetchone() == (10**30,)
    assert conn.execute("SELECT ?", (float("inf"),)).fetchone() == (float("inf"),)


def test_types_through_a_table(conn):
    conn.execute("CREATE TEMP TABLE t (i BIGINT, f DOUBLE PRECISION, s TEXT, b BYTEA, n BIGINT)")
    values = (-(2**63), 1e-300, "ünïcødé\n\ttab", bytes(range(256)) * 4, None)
    conn.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?)", values)
    assert conn.execute("SELECT * FROM t").fetchall() == [values]
    assert conn.execute("SELECT * FROM t").columns == ("i", "f", "s", "b", "n")
    conn.execute("SET bytea_output = 'escape'")
    assert conn.execute("SELECT b FROM t").fetchone() == (values[3],)


def test_translate_leaves_quoted_question_marks():
    sql = (
        "SELECT '?', 'it''s ?', \"col?\", E'\\'?', $$ ? $$, $tag$ ? $tag$, ? -- ? here\n"
        "/* ? /* nested ? */ ? */ FROM x WHERE a = ? AND b = $1"
    )
    assert translate(sql) == sql.replace(", ? --", ", $1 --").replace("a = ?", "a = $2")
    assert translate("SELECT 1") == "SELECT 1"
    assert translate(sql) is translate(sql)  # cached


def test_question_marks_inside_literals_at_runtime(conn):
    assert conn.execute("SELECT '?', ?, 'it''s ?', ? /* ? */", ("a", 2)).fetchone() == ("?", "a", "it's ?", 2)


def test_error_keeps_the_connection_usable(conn):
    conn.execute("CREATE TEMP TABLE u (k INT PRIMARY KEY)")
    conn.execute("INSERT INTO u VALUES (?)", (1,))
    with pytest.raises(PgError) as caught:
        conn.execute("INSERT INTO u VALUES (?)", (1,))
    error = caught.value
    assert error.sqlstate == "23505" and "duplicate key" in error.message and "(k)=(1)" in error.detail
    assert not isinstance(error, PgConnectError)
    assert conn.status == "I"
    assert conn.execute("SELECT count(*) FROM u").fetchone() == (1,)
    with pytest.raises(PgError) as caught:
        conn.execute("SELEKT 1")
    assert caught.value.sqlstate == "42601"
    assert conn.execute("SELECT 2").fetchone() == (2,)


def test_transaction_status(conn):
    assert conn.status == "I"
    conn.execute("BEGIN")
    assert conn.status == "T"
    conn.execute("CREATE TEMP TABLE tx (v INT)")
    with pytest.raises(PgError):
        conn.execute("SELECT 1/0")
    assert conn.status == "E"
    with pytest.raises(PgError) as caught:
        conn.execute("SELECT 1")
    assert caught.value.sqlstate == "25P02"
    conn.execute("ROLLBACK")
    assert conn.status == "I"
    with pytest.raises(PgError):
        conn.execute("SELECT * FROM tx")  # rolled back


def test_rowcount(conn):
    conn.execute("CREATE TEMP TABLE r (v INT)")
    assert conn.execute("INSERT INTO r SELECT generate_series(1, 5)").rowcount == 5
    assert conn.execute("UPDATE r SET v = v + 10 WHERE v <= ?", (3,)).rowcount == 3
    assert conn.execute("DELETE FROM r WHERE v > 100").rowcount == 0
    assert conn.execute("SELECT v FROM r ORDER BY v").rowcount == 5
    assert conn.execute("SET work_mem = '8MB'").rowcount == -1
    cursor = conn.execute("INSERT INTO r VALUES (?) RETURNING v", (42,))
    assert cursor.rowcount == 1 and cursor.fetchone() == (42,) and cursor.fetchone() is None


def test_ten_thousand_rows(conn):
    cursor = conn.execute("SELECT g, 'row ' || g, g * 0.5 FROM generate_series(1, 10000) g")
    assert cursor.rowcount == 10000
    assert cursor.fetchone() == (1, "row 1", 0.5)
    rest = list(cursor)
    assert len(rest) == 9999 and rest[-1] == (10000, "row 10000", 5000)
    assert cursor.fetchall() == []


def test_notifications_are_kept(conn):
    conn.execute("LISTEN chan")
    conn.execute("SELECT pg_notify('chan', 'hello')")
    assert conn.notifications == [("chan", "hello")]


def test_empty_statement_and_close(cluster):
    conn = pgwire.connect(cluster.url(tcp=False))
    assert conn.execute("").fetchall() == []
    conn.close()
    conn.close()
    assert conn.closed


def test_import_is_light():
    """The guard's hook may import pgwire: no socket/ssl/hashlib/psycopg at import time."""
    code = (
        "import sys, proctor.store; before = set(sys.modules); import proctor.store.pgwire; "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    added = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())
    assert not added & {"socket", "ssl", "hashlib", "hmac", "psycopg", "typing", "dataclasses", "urllib.parse"}
