"""A minimal PostgreSQL client (protocol v3) on the standard library alone.

Why it exists: the guard runs as a hook process on every tool call of an agent, and on that
path only the standard library and proctor's core may be imported. `import psycopg` alone
costs ~130 ms; this module about one (_socket and struct; hashlib, hmac and ssl are imported
only when the server asks for a password or TLS).

What it does: libpq-style URLs and defaults (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD,
~/.pgpass), trust / cleartext / md5 / SCRAM-SHA-256 authentication, TLS (sslmode), and
`execute(sql, params)` over the extended query protocol with text-format values: `?`
placeholders become `$n`, results are converted by type OID. No pipelining, no COPY, no
binary format, no async notifications beyond what arrives with a query's results.
"""

import _socket  # not `socket`: its enum conversions cost ~3 ms at import, on every hook call
import os
import struct

__all__ = ["connect", "translate", "Connection", "Cursor", "PgError", "PgConnectError"]

_DEFAULT_SOCKET_DIRS = ("/var/run/postgresql", "/tmp")
_SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
_INT8 = 1 << 63
_I32 = struct.Struct("!i")
_I16 = struct.Struct("!h")


class PgError(Exception):
    """An error the server reported (ErrorResponse), or a protocol failure."""

    def __init__(self, message, sqlstate=None, detail=None, hint=None):
        self.message, self.sqlstate, self.detail, self.hint = message, sqlstate, detail, hint
        text = message + (f"\nDETAIL: {detail}" if detail else "") + (f"\nHINT: {hint}" if hint else "")
        super().__init__(text)


class PgConnectError(PgError):
    """The connection could not be made or was lost: refused, timed out, authentication failed."""


def _error(body, cls=PgError, prefix=""):
    fields = {}
    for part in body.split(b"\0"):
        if part:
            fields[chr(part[0])] = part[1:].decode("utf-8", "replace")
    return cls(prefix + fields.get("M", "unknown error"), fields.get("C"), fields.get("D"), fields.get("H"))


# -- `?` placeholders ------------------------------------------------------------------------

_translated: dict[str, str] = {}


def translate(sql):
    """`?` → `$1, $2, ...` outside quoted literals and identifiers, dollar quotes and comments."""
    out = _translated.get(sql)
    if out is not None:
        return out
    parts, count, start, i, n = [], 0, 0, 0, len(sql)
    while i < n:
        c = sql[i]
        if c == "?":
            count += 1
            parts += (sql[start:i], f"${count}")
            i = start = i + 1
        elif c == "'":  # '' inside is two adjacent literals as far as `?` is concerned
            escapes = i and sql[i - 1] in "eE" and not (i > 1 and (sql[i - 2].isalnum() or sql[i - 2] == "_"))
            i += 1
            while i < n and sql[i] != "'":
                i += 2 if escapes and sql[i] == "\\" else 1
            i += 1
        elif c == '"':
            end = sql.find('"', i + 1)
            i = n if end < 0 else end + 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith("/*", i):  # PostgreSQL's block comments nest
            depth, i = 1, i + 2
            while i < n and depth:
                if sql.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif sql.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "$" and not (i and (sql[i - 1].isalnum() or sql[i - 1] in "_$")):
            end = sql.find("$", i + 1)
            tag = sql[i : end + 1]
            if end > 0 and (tag == "$$" or (tag[1:-1].replace("_", "a").isalnum() and not tag[1].isdigit())):
                close = sql.find(tag, end + 1)
                i = n if close < 0 else close + len(tag)
            else:
                i += 1
        else:
            i += 1
    out = "".join(parts) + sql[start:] if count else sql
    if len(_translated) >= 1024:  # a long-lived process with many distinct statements starts afresh
        _translated.clear()
    _translated[sql] = out
    return out


# -- values ----------------------------------------------------------------------------------


def _encode(value):
    """(type OID, text bytes or None) for one parameter."""
    if value is None:
        return 0, None
    if isinstance(value, bool):
        return 20, b"1" if value else b"0"
    if isinstance(value, int):
        return (20 if -_INT8 <= value < _INT8 else 1700), b"%d" % value
    if isinstance(value, float):
        return 701, repr(float(value)).encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return 17, b"\\x" + bytes(value).hex().encode()
    return 0, str(value).encode()


def _numeric(raw):
    whole, _, frac = raw.partition(b".")
    if frac.strip(b"0") == b"" and whole[-1:].isdigit():
        return int(whole)
    return float(raw)


def _bytea(raw):
    if raw[:2] == b"\\x":
        return bytes.fromhex(raw[2:].decode())
    import re  # bytea_output = 'escape': \\ and \ooo

    return re.sub(rb"\\(\\|[0-7]{3})", lambda m: b"\\" if m[1] == b"\\" else bytes([int(m[1], 8)]), raw)


_CONVERT = {
    16: lambda raw: raw == b"t",
    17: _bytea,
    20: int,
    21: int,
    23: int,
    26: int,
    700: float,
    701: float,
    1700: _numeric,
}


# -- connection parameters -------------------------------------------------------------------


def _unquote(text):
    head, *parts = text.split("%")
    raw = bytearray(head.encode())
    for part in parts:
        hexa = part[:2]
        ok = len(hexa) == 2 and all(c in "0123456789abcdefABCDEF" for c in hexa)
        raw += bytes.fromhex(hexa) + part[2:].encode() if ok else ("%" + part).encode()
    return raw.decode("utf-8", "replace")


def _parse_url(url):
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("postgresql", "postgres"):
        raise PgConnectError(f"not a PostgreSQL URL (postgresql://...): {url.split('@')[-1]!r}")
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    params = {}
    if "@" in netloc:
        userinfo, _, netloc = netloc.rpartition("@")
        user, has_password, password = userinfo.partition(":")
        if user:
            params["user"] = _unquote(user)
        if has_password:
            params["password"] = _unquote(password)
    if netloc.startswith("["):  # [IPv6]:port
        host, _, port = netloc[1:].partition("]")
        port = port[1:]
    else:
        host, _, port = netloc.rpartition(":") if netloc.count(":") == 1 else (netloc, "", "")
    if host:
        params["host"] = _unquote(host)
    if port:
        params["port"] = port
    if path:
        params["dbname"] = _unquote(path)
    for pair in query.split("&"):
        if pair:
            key, _, value = pair.partition("=")
            params[_unquote(key)] = _unquote(value)
    return params


_KNOWN = (
    "host",
    "port",
    "user",
    "password",
    "dbname",
    "sslmode",
    "sslrootcert",
    "connect_timeout",
    "application_name",
    "options",
    "passfile",
)


def _passfile_password(path, host, port, dbname, user):
    """The password ~/.pgpass gives, as libpq reads it; "ignored" if the file is group/world-accessible."""
    try:
        st = os.stat(path)
        if st.st_mode & 0o170000 != 0o100000:  # not a plain file
            return None
        if st.st_mode & 0o077:
            return "ignored"
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    if host.startswith("/") and host == _DEFAULT_SOCKET_DIRS[0]:
        host = "localhost"
    wanted = (host, str(port), dbname, user)
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        fields, field, i = [], [], 0
        while i < len(line):
            if line[i] == "\\" and i + 1 < len(line):
                field.append(line[i + 1])
                i += 2
                continue
            if line[i] == ":" and len(fields) < 4:
                fields.append("".join(field))
                field = []
            else:
                field.append(line[i])
            i += 1
        fields.append("".join(field))
        if len(fields) == 5 and all(f == "*" or f == w for f, w in zip(fields, wanted)):
            return fields[4]
    return None


def _scram_proof(password, client_first_bare, server_first, nonce_prefix):
    """The client's final SCRAM-SHA-256 message and the server signature it must answer with."""
    import hashlib
    import hmac
    from binascii import a2b_base64, b2a_base64

    attrs = dict(item.split("=", 1) for item in server_first.split(","))
    nonce, salt, iterations = attrs["r"], a2b_base64(attrs["s"]), int(attrs["i"])
    if not nonce.startswith(nonce_prefix) or len(nonce) == len(nonce_prefix):
        raise PgConnectError("SCRAM: the server's nonce does not extend ours")
    if not password.isascii():  # SASLprep, in the part that matters for real passwords
        import unicodedata

        password = unicodedata.normalize("NFKC", password)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    without_proof = "c=biws,r=" + nonce
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(hashlib.sha256(client_key).digest(), auth_message, "sha256")
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    server_sig = hmac.digest(hmac.digest(salted, b"Server Key", "sha256"), auth_message, "sha256")
    return (
        f"{without_proof},p={b2a_base64(proof, newline=False).decode()}",
        "v=" + b2a_base64(server_sig, newline=False).decode(),
    )


def _msg(kind, body=b""):
    return kind + _I32.pack(len(body) + 4) + body


# -- the connection --------------------------------------------------------------------------


class Cursor:
    """The rows of one statement, already read."""

    def __init__(self, rows, rowcount, columns):
        self.rows, self.rowcount, self.columns, self._next = rows, rowcount, columns, 0

    def fetchone(self):
        if self._next < len(self.rows):
            self._next += 1
            return self.rows[self._next - 1]
        return None

    def fetchall(self):
        rest, self._next = self.rows[self._next :], len(self.rows)
        return rest

    def __iter__(self):
        return iter(self.fetchall())


class Connection:
    """One session. `status` is the last ReadyForQuery's: "I" idle, "T" in a transaction, "E" failed."""

    def __init__(self, params, timeout):
        self.params, self.timeout = params, timeout
        self.status, self.auth, self.notifications, self.parameters = None, "trust", [], {}
        self._sock, self._buf, self._pos = None, bytearray(), 0
        host, port = params["host"], params["port"]
        self.where = f"{host}/.s.PGSQL.{port}" if host.startswith("/") else f"{host}:{port}"
        wait = float(params.get("connect_timeout") or 0) or timeout  # libpq: at least 2 s; 0 is forever
        self._wait = None if wait <= 0 else max(wait, 2.0) if params.get("connect_timeout") else wait
        try:
            self._open(self._wait)
        except BaseException:
            self._drop()
            raise
        self._wait = timeout
        self._sock.settimeout(timeout)

    def _fail(self, what, exc=None):
        reason = f": {exc.strerror or exc}" if isinstance(exc, OSError) else ""
        return PgConnectError(f"PostgreSQL at {self.where}: {what}{reason}")

    def _open(self, timeout):
        p, host = self.params, self.params["host"]
        try:
            if host.startswith("/"):
                addresses = [(_socket.AF_UNIX, f"{host}/.s.PGSQL.{p['port']}")]
            else:
                addresses = [
                    (a[0], a[4])
                    for a in _socket.getaddrinfo(
                        host.encode("ascii") if host.isascii() else host.encode("idna"),  # bytes: no idna codec
                        int(p["port"]),
                        0,
                        _socket.SOCK_STREAM,
                    )
                ]
            for n, (family, address) in enumerate(addresses, 1):
                sock = self._sock = _socket.socket(family, _socket.SOCK_STREAM)
                sock.settimeout(timeout)
                try:
                    sock.connect(address)
                    break
                except OSError:
                    self._drop()
                    if n == len(addresses):
                        raise
            if family != _socket.AF_UNIX:
                sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
                if p["sslmode"] not in ("disable", "allow"):
                    self._start_tls(sock, p["sslmode"])
        except TimeoutError as exc:
            raise self._fail(f"timed out after {self._wait}s connecting; check the host, port and firewall") from exc
        except OSError as exc:
            raise self._fail(
                "could not connect; check that the server is running there and the host and port (URL, PGHOST, PGPORT)",
                exc,
            ) from exc
        startup = {"user": p["user"], "database": p["dbname"], "client_encoding": "UTF8"}
        for key in ("application_name", "options"):
            if p.get(key):
                startup[key] = p[key]
        startup.update(p["runtime"])
        body = _I32.pack(196608) + b"".join(k.encode() + b"\0" + str(v).encode() + b"\0" for k, v in startup.items())
        self._send(_I32.pack(len(body) + 5) + body + b"\0")
        self._authenticate()

    def _start_tls(self, sock, mode):
        sock.sendall(_I32.pack(8) + _I32.pack(80877103))
        answer = sock.recv(1)
        if answer != b"S":
            if mode == "prefer":
                return
            raise self._fail(f"the server does not accept SSL, and sslmode={mode} requires it")
        import socket
        import ssl

        sock = socket.socket(fileno=sock.detach())
        ctx = ssl.create_default_context(cafile=self.params.get("sslrootcert") or None)
        if mode in ("prefer", "require"):
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        elif mode == "verify-ca":
            ctx.check_hostname = False
        self._sock = ctx.wrap_socket(sock, server_hostname=self.params["host"])

    def _password(self):
        p = self.params
        password = p.get("password") or os.environ.get("PGPASSWORD")
        if not password:
            path = p.get("passfile") or os.environ.get("PGPASSFILE") or os.path.expanduser("~/.pgpass")
            password = _passfile_password(path, p["host"], p["port"], p["dbname"], p["user"])
            if password == "ignored":
                raise self._fail(
                    f"a password is required for user {p['user']!r}, and {path} is ignored: "
                    "it is readable by group or others (chmod 0600)"
                )
        if not password:
            raise self._fail(
                f"a password is required for user {p['user']!r} and none was given (the URL, PGPASSWORD or ~/.pgpass)"
            )
        return password

    def _authenticate(self):
        scram, expected = None, None  # expected: None, or the SCRAM exchange is not finished
        while True:
            kind, body = self._recv()
            if kind == "R":
                code = _I32.unpack_from(body)[0]
                if code == 0:
                    if expected is not None:
                        raise self._fail("SCRAM: the server ended authentication without proving it knows the password")
                elif code == 3:
                    self.auth = "password"
                    self._send(_msg(b"p", self._password().encode() + b"\0"))
                elif code == 5:
                    import hashlib

                    self.auth = "md5"
                    inner = hashlib.md5((self._password() + self.params["user"]).encode()).hexdigest()
                    outer = hashlib.md5(inner.encode() + body[4:8]).hexdigest()
                    self._send(_msg(b"p", b"md5" + outer.encode() + b"\0"))
                elif code == 10:
                    mechanisms = [m.decode() for m in body[4:].split(b"\0") if m]
                    if "SCRAM-SHA-256" not in mechanisms:
                        raise self._fail(
                            f"unsupported SASL mechanisms {mechanisms} (only SCRAM-SHA-256; "
                            "channel binding, SCRAM-SHA-256-PLUS, is not)"
                        )
                    self.auth = "scram-sha-256"
                    from binascii import b2a_base64

                    scram, expected = "n=,r=" + b2a_base64(os.urandom(18), newline=False).decode(), ""
                    first = ("n,," + scram).encode()
                    self._send(_msg(b"p", b"SCRAM-SHA-256\0" + _I32.pack(len(first)) + first))
                elif code == 11 and scram:
                    final, expected = _scram_proof(self._password(), scram, body[4:].decode(), scram[5:])
                    self._send(_msg(b"p", final.encode()))
                elif code == 12 and expected:
                    if body[4:].decode().split(",")[0] != expected:
                        raise self._fail("SCRAM: the server's signature is wrong (not the server it claims)")
                    expected = None
                else:
                    names = {2: "Kerberos", 7: "GSSAPI", 8: "GSSAPI", 9: "SSPI"}
                    raise self._fail(
                        f"unsupported authentication method {names.get(code, code)}; "
                        "use trust, password, md5 or scram-sha-256 in pg_hba.conf"
                    )
            elif kind == "E":
                error = _error(body, PgConnectError, f"PostgreSQL at {self.where}: ")
                if error.sqlstate == "28P01":
                    error.args = (
                        error.args[0] + f" (check the password for user {self.params['user']!r}: "
                        "the URL, PGPASSWORD or ~/.pgpass)",
                    )
                raise error
            elif kind == "Z":
                self.status = chr(body[0])
                return
            elif kind == "S":
                key, value = body.split(b"\0")[:2]
                self.parameters[key.decode()] = value.decode()
            # K (BackendKeyData), N (notice), v (NegotiateProtocolVersion): nothing to do

    def _send(self, data):
        try:
            self._sock.sendall(data)
        except OSError as exc:
            self._drop()
            raise self._fail("connection lost", exc) from exc

    def _recv(self):
        buf, pos = self._buf, self._pos
        while True:
            if len(buf) - pos >= 5:
                end = pos + 1 + _I32.unpack_from(buf, pos + 1)[0]
                if len(buf) >= end:
                    self._pos = end
                    return chr(buf[pos]), bytes(buf[pos + 5 : end])
            del buf[:pos]
            pos = self._pos = 0
            try:
                chunk = self._sock.recv(262144)
            except TimeoutError as exc:
                self._drop()
                raise self._fail(f"no answer within {self._wait}s; the connection is closed") from exc
            except OSError as exc:
                self._drop()
                raise self._fail("connection lost", exc) from exc
            if not chunk:
                self._drop()
                raise self._fail("the server closed the connection")
            buf += chunk

    def _drop(self):
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def execute(self, sql, params=()):
        """Run one statement; `?` (or `$n`) placeholders, values sent as text."""
        if self._sock is None:
            raise PgConnectError("the connection is closed")
        encoded = [_encode(v) for v in params]
        values = b"".join(_I32.pack(-1) if raw is None else _I32.pack(len(raw)) + raw for _, raw in encoded)
        self._send(
            _msg(
                b"P",
                b"\0"
                + translate(sql).encode()
                + b"\0"
                + _I16.pack(len(encoded))
                + b"".join(_I32.pack(oid) for oid, _ in encoded),
            )
            + _msg(b"B", b"\0\0\0\0" + _I16.pack(len(encoded)) + values + b"\0\0")
            + b"D\0\0\0\x06P\0"
            + b"E\0\0\0\x09\0\0\0\0\0"
            + b"S\0\0\0\x04"
        )
        try:
            return self._results()
        except PgError:
            raise
        except BaseException:  # interrupted mid-answer: what is left unread would answer the next query
            self._drop()
            raise

    def _results(self):
        rows, rowcount, columns, converters, error = [], -1, (), (), None
        unpack_from = _I32.unpack_from
        while True:
            kind, body = self._recv()
            if kind == "D":
                row, pos = [], 2
                for convert in converters:
                    size = unpack_from(body, pos)[0]
                    pos += 4
                    if size < 0:
                        row.append(None)
                    else:
                        row.append(convert(body[pos : pos + size]))
                        pos += size
                rows.append(tuple(row))
            elif kind == "T":
                columns, converters, pos = [], [], 2
                for _ in range(_I16.unpack_from(body)[0]):
                    end = body.index(b"\0", pos)
                    columns.append(body[pos:end].decode())
                    converters.append(_CONVERT.get(struct.unpack_from("!I", body, end + 7)[0], bytes.decode))
                    pos = end + 19
                columns = tuple(columns)
            elif kind == "C":
                last = body[:-1].rpartition(b" ")[2]
                rowcount = int(last) if last.isdigit() else -1
            elif kind == "E":
                error = _error(body)
            elif kind == "Z":
                self.status = chr(body[0])
                break
            elif kind == "A":
                channel, payload = body[4:].split(b"\0")[:2]
                self.notifications.append((channel.decode(), payload.decode()))
            elif kind == "S":
                key, value = body.split(b"\0")[:2]
                self.parameters[key.decode()] = value.decode()
            # 1 ParseComplete, 2 BindComplete, n NoData, I EmptyQuery, N notice: nothing to do
        if error is not None:
            raise error
        return Cursor(rows, rowcount, columns)

    @property
    def closed(self):
        return self._sock is None

    def close(self):
        if self._sock is not None:
            try:
                self._sock.sendall(b"X\0\0\0\x04")
            except OSError:
                pass
            self._drop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def connect(url, timeout=5.0, options=None):
    """Open a session. `options` overrides URL parameters (host, port, user, password, dbname,
    sslmode, ...); any other key is sent as a run-time parameter (e.g. search_path)."""
    params, runtime = {}, {}
    for key, value in {**_parse_url(url), **(options or {})}.items():
        (params if key in _KNOWN else runtime)[key] = value
    env = os.environ
    if not params.get("port"):
        params["port"] = env.get("PGPORT") or "5432"
    if not params.get("host"):
        params["host"] = env.get("PGHOST") or next(
            (d for d in _DEFAULT_SOCKET_DIRS if os.path.exists(f"{d}/.s.PGSQL.{params['port']}")), "localhost"
        )
    if not params.get("user"):
        params["user"] = env.get("PGUSER") or __import__("pwd").getpwuid(os.geteuid()).pw_name
    params["dbname"] = params.get("dbname") or env.get("PGDATABASE") or params["user"]
    params["sslmode"] = params.get("sslmode") or env.get("PGSSLMODE") or "prefer"
    if params["sslmode"] not in _SSL_MODES:
        raise PgConnectError(f"invalid sslmode {params['sslmode']!r} (one of {', '.join(_SSL_MODES)})")
    params.setdefault("connect_timeout", env.get("PGCONNECT_TIMEOUT"))
    params.setdefault("application_name", env.get("PGAPPNAME"))
    params["runtime"] = runtime
    return Connection(params, timeout)
