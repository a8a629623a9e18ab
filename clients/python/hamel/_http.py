"""HTTP/1.1 to the service over http.client: keep-alive, bearer token, gzip when the
server sends it, problem documents turned into HamelError."""

import gzip
import http.client
import json
import math
import socket
import time
import urllib.parse
import zlib

from .errors import HamelError

MAX_RETRY_AFTER_S = 60  # longest Retry-After honoured
RETRIES_503 = 5  # resends after 503 + Retry-After


class Transport:
    """One base URL and one kept-alive connection (a Client is used by one thread at a
    time; streams get a connection of their own)."""

    def __init__(self, url, token=None, timeout=60.0):
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname or u.query or u.fragment or "?" in url \
                or "#" in url:
            raise ValueError("hamel: the URL must be http://host[:port] or https://... (no ?query or #fragment), "
                             "not %r" % url)
        if token is not None and (not isinstance(token, str) or any(ord(ch) < 0x21 or ord(ch) == 0x7f
                                                                   for ch in token)):
            raise ValueError("hamel: the token must be printable characters without spaces")
        prefix = u.path.rstrip("/")
        if prefix.endswith("/v1"):  # the service's root: "http://host:8080/v1" would ask for /v1/v1/...
            prefix = prefix[:-3].rstrip("/")
        self.url = "%s://%s%s" % (u.scheme, u.netloc, prefix)
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = u.port
        self.prefix = prefix
        self.token = token
        self.timeout = timeout
        self._conn = None

    def _connect(self):
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)

    def headers(self, accept="application/json"):
        h = {"Accept": accept, "Accept-Encoding": "gzip", "User-Agent": "hamel-python/0.1"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        return h

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _send(self, conn, method, path, body, headers):
        data = None
        if body is not None:
            data = json.dumps(plain_json(body), allow_nan=False).encode("utf-8")
            headers = dict(headers, **{"Content-Type": "application/json"})
        conn.request(method, self.prefix + path, body=data, headers=headers)
        return conn.getresponse()

    def request(self, method, path, body=None, timeout=None):
        """Sends one request; returns (status, headers, parsed JSON body). A 4xx/5xx
        raises HamelError (a 503 with Retry-After is resent first)."""
        status, headers, raw = self.request_raw(method, path, body, timeout)
        return status, headers, _parse(raw, status, headers)

    def request_raw(self, method, path, body=None, timeout=None, accept="application/json"):
        """As request, but the 2xx body is returned as bytes (decoded from gzip): for
        answers that are files (POST /v1/code). A 4xx/5xx raises HamelError."""
        for attempt in range(RETRIES_503 + 1):
            status, headers, raw = self._exchange(method, path, body, timeout, accept)
            if status == 503 and attempt < RETRIES_503 and headers.get("retry-after"):
                try:
                    wait = float(headers["retry-after"])
                except ValueError:
                    wait = 1.0
                time.sleep(min(max(wait, 0.0), MAX_RETRY_AFTER_S))
                continue
            break
        if status >= 400:
            doc = _parse(raw, status, headers)
            if isinstance(doc, dict) and isinstance(doc.get("type"), str):
                raise HamelError(status, doc)
            raise HamelError(status, None, _not_a_problem(self.url, status, headers))
        return status, headers, raw

    def _exchange(self, method, path, body, timeout, accept="application/json"):
        hdrs = self.headers(accept)
        for fresh in (False, True):
            reused = self._conn is not None and not fresh
            if self._conn is None or fresh:
                self.close()
                self._conn = self._connect()
            wait = self.timeout if timeout is None else timeout  # a long poll's is longer
            self._conn.timeout = wait
            if self._conn.sock is not None:
                self._conn.sock.settimeout(wait)
            try:
                resp = self._send(self._conn, method, path, body, hdrs)
                raw = resp.read()
                headers = {k.lower(): v for k, v in resp.getheaders()}
                if resp.will_close:
                    self.close()
                return resp.status, headers, _decode(raw, headers)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                    http.client.CannotSendRequest, http.client.BadStatusLine) as e:
                self.close()
                if reused:
                    continue  # a kept-alive connection the server had closed: once more
                raise HamelError(0, None, "hamel: no answer from %s: %s" % (self.url, e)) from e
            except (OSError, socket.timeout, http.client.HTTPException) as e:  # IncompleteRead: cut off
                self.close()
                raise HamelError(0, None, "hamel: no answer from %s: %s" % (self.url, e)) from e
        raise HamelError(0, None, "hamel: no answer from %s" % self.url)

    def stream_lines(self, method, path, body, on_headers=None):
        """Sends one request on a connection of its own asking for NDJSON and yields each
        line's JSON as it arrives; on_headers(headers) sees the response's headers (lower-
        case names) first. A 4xx/5xx raises HamelError before the first line; a stream
        that breaks off (the server gone) raises HamelError with status 0."""
        conn = self._connect()
        try:
            try:
                resp = self._send(conn, method, path, body, self.headers("application/x-ndjson"))
            except (OSError, http.client.HTTPException) as e:
                raise HamelError(0, None, "hamel: no answer from %s: %s" % (self.url, e)) from e
            headers = {k.lower(): v for k, v in resp.getheaders()}
            if on_headers is not None:
                on_headers(headers)
            if resp.status >= 400 or resp.status == 202:
                raw = _decode(resp.read(), headers)
                doc = _parse(raw, resp.status, headers)
                if resp.status >= 400:
                    if isinstance(doc, dict) and isinstance(doc.get("type"), str):
                        raise HamelError(resp.status, doc)
                    raise HamelError(resp.status, None, _not_a_problem(self.url, resp.status, headers))
                raise HamelError(resp.status, None, "hamel: the server did not stream the batch")
            _wait_for_lines(conn.sock or getattr(getattr(resp.fp, "raw", None), "_sock", None), self.timeout)
            gz = zlib.decompressobj(31) if headers.get("content-encoding") == "gzip" else None
            buf = b""
            while True:
                try:
                    chunk = resp.read1(65536)
                except (OSError, http.client.HTTPException) as e:
                    raise HamelError(0, None, "hamel: the stream from %s broke off: %r" % (self.url, e)) from e
                if not chunk:
                    break
                if gz is not None:
                    chunk = gz.decompress(chunk)
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
            if gz is not None:
                buf += gz.flush()
            if buf.strip():
                yield json.loads(buf)
        finally:
            conn.close()


def _wait_for_lines(sock, timeout):
    """A batch stream's lines come as its runs finish, however long a run takes: once the
    answer has begun, reads wait without a timeout, and a server that is gone is found by
    TCP keepalive probes instead (after about twice `timeout` of silence from its host; a
    server process that ends closes the connection at once). Where the platform has no
    keepalive settings the read timeout stays (each line within `timeout`)."""
    if sock is None or timeout is None:
        return
    idle_opt = getattr(socket, "TCP_KEEPIDLE", None) or getattr(socket, "TCP_KEEPALIVE", None)  # Linux, macOS
    if idle_opt is None or not hasattr(socket, "TCP_KEEPINTVL") or not hasattr(socket, "TCP_KEEPCNT"):
        return
    try:
        idle = max(1, int(math.ceil(timeout)))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.setsockopt(socket.IPPROTO_TCP, idle_opt, idle)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, max(1, idle // 3))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
        sock.settimeout(None)
    except OSError:
        pass  # the read timeout stays


def _where(path, key):
    return "%s.%s" % (path, key) if path else str(key)


def plain_json(value, path=""):
    """`value` with numpy scalars and arrays as Python numbers and lists, tuples as
    lists: what json.dumps writes. A number that is not finite (NaN, Infinity, which
    JSON cannot carry) or a value that is not JSON is a ValueError naming its path
    ("initial.speeds.w", "runs[2].t_end")."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if hasattr(k, "tolist") and not isinstance(k, str):
                k = k.tolist()
            if k is None or isinstance(k, (bool, int, float)):  # as json.dumps writes such keys
                k = json.dumps(k)
            if not isinstance(k, str):
                raise ValueError("hamel: %s: a JSON object's keys are strings, not %r" % (_where(path, k), k))
            out[k] = plain_json(v, _where(path, k))
        return out
    if isinstance(value, (list, tuple)):
        return [plain_json(v, "%s[%d]" % (path, i)) for i, v in enumerate(value)]
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, (int, float)) and not hasattr(value, "tolist"):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("hamel: %s is %r: JSON has no NaN or Infinity (give a finite number)"
                             % (path or "the value", value))
        return value
    if hasattr(value, "tolist"):  # a numpy scalar or array (numpy.float32, int64, ndarray)
        return plain_json(value.tolist(), path)
    raise ValueError("hamel: %s: %s is not JSON (numbers, strings, booleans, None, lists, dicts)"
                     % (path or "the value", type(value).__name__))


def _not_a_problem(url, status, headers):
    return ("hamel: HTTP %d from %s with %s, not a problem document: is it the hamel service?"
            % (status, url, headers.get("content-type") or "no content type"))


def _decode(raw, headers):
    if headers.get("content-encoding") == "gzip":
        return gzip.decompress(raw)
    return raw


def _parse(raw, status, headers):
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        if status >= 400:
            return None
        raise HamelError(status, None, "hamel: the answer is not JSON (%s)" % headers.get("content-type", "?"))
