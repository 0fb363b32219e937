"""A loopback imitation of the Hugging Face hub, for `ferrox pull`'s tests.

Two servers on 127.0.0.1, each its own origin (another port is another host
to an HTTP client, so a token must not follow a redirect from one to the
other):

- the hub: GET /api/models/OWNER/REPO (model info with siblings, sizes and
  LFS sha256, as `?blobs=true` gives them) and GET
  /OWNER/REPO/resolve/main/FILE, answered with a 302 to the CDN carrying
  X-Linked-Etag (the file's SHA-256, quoted) and X-Linked-Size, as the real
  hub answers for LFS files;
- the CDN: GET /blobs/SHA?X-Amz-Signature=..., the bytes, with Range support
  (206 and Content-Range).

Digests are computed here with hashlib: the independent reference the pull is
checked against. Every request is recorded with its headers. Faults, each
taken once (`faults` is a list the tests fill): ("drop", n) sends the headers
of the whole answer, n bytes of body, then closes the connection; ("corrupt",
offset) flips one byte of the answer's body at that file offset.
"""
from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Recorded:
    def __init__(self, method: str, path: str, headers: dict[str, str]):
        self.method, self.path, self.headers = method, path, headers

    def header(self, name: str) -> str | None:
        for k, v in self.headers.items():
            if k.lower() == name.lower():
                return v
        return None


class FakeHub:
    def __init__(self):
        self.repos: dict[str, dict[str, bytes]] = {}
        self.tokens: dict[str, str] = {}  # repo -> the token it needs
        self.blobs: dict[str, bytes] = {}
        self.faults: list[tuple[str, int]] = []
        self.hub_requests: list[Recorded] = []
        self.cdn_requests: list[Recorded] = []
        self.published_sha: dict[tuple[str, str], str] = {}  # an override, for a lying hub
        self.lock = threading.Lock()
        self.hub = ThreadingHTTPServer(("127.0.0.1", 0), self._handler(self._hub_get, self.hub_requests))
        self.cdn = ThreadingHTTPServer(("127.0.0.1", 0), self._handler(self._cdn_get, self.cdn_requests))
        self.hub.daemon_threads = self.cdn.daemon_threads = True
        for server in (self.hub, self.cdn):
            threading.Thread(target=server.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.hub.server_address[1]}"

    @property
    def cdn_origin(self) -> str:
        return f"http://127.0.0.1:{self.cdn.server_address[1]}"

    def add(self, repo: str, files: dict[str, bytes], token: str | None = None) -> None:
        self.repos[repo] = dict(files)
        if token:
            self.tokens[repo] = token
        for data in files.values():
            self.blobs[hashlib.sha256(data).hexdigest()] = data

    def requests(self) -> int:
        return len(self.hub_requests) + len(self.cdn_requests)

    def close(self) -> None:
        for server in (self.hub, self.cdn):
            server.shutdown()
            server.server_close()

    # ---- the two origins -------------------------------------------------

    def _handler(self, get, log):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                with hub.lock:
                    log.append(Recorded("GET", self.path, dict(self.headers.items())))
                get(self)

            def do_HEAD(self):
                with hub.lock:
                    log.append(Recorded("HEAD", self.path, dict(self.headers.items())))
                self.send_error(405)

        return Handler

    def _send(self, h, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        h.send_response(status)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _authorized(self, h, repo: str) -> bool:
        need = self.tokens.get(repo)
        if need is None or h.headers.get("Authorization") == f"Bearer {need}":
            return True
        self._send(h, 401, b'{"error":"Invalid credentials in Authorization header"}',
                   {"Content-Type": "application/json", "X-Error-Code": "GatedRepo"})
        return False

    def _hub_get(self, h) -> None:
        path = h.path.split("?", 1)[0]
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+)", path)
        if m:
            repo = m.group(1)
            if repo not in self.repos:
                return self._send(h, 404, b'{"error":"Repository not found"}',
                                  {"Content-Type": "application/json", "X-Error-Code": "RepoNotFound"})
            if not self._authorized(h, repo):
                return
            siblings = [{"rfilename": name, "size": len(data),
                         "lfs": {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                                 "pointerSize": 134}}
                        for name, data in self.repos[repo].items()]
            return self._send(h, 200, json.dumps({"id": repo, "siblings": siblings}).encode(),
                              {"Content-Type": "application/json"})
        m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/main/(.+)", path)
        if m and m.group(1) in self.repos:
            repo, name = m.group(1), m.group(2)
            if not self._authorized(h, repo):
                return
            data = self.repos[repo].get(name)
            if data is None:
                return self._send(h, 404, b"Entry not found", {"X-Error-Code": "EntryNotFound"})
            sha = self.published_sha.get((repo, name), hashlib.sha256(data).hexdigest())
            location = f"{self.cdn_origin}/blobs/{hashlib.sha256(data).hexdigest()}?X-Amz-Signature=sig"
            return self._send(h, 302, b"", {"Location": location, "X-Linked-Etag": f'"{sha}"',
                                            "X-Linked-Size": str(len(data)), "ETag": '"gitsha"'})
        self._send(h, 404, b"Repository not found", {"X-Error-Code": "RepoNotFound"})

    def _cdn_get(self, h) -> None:
        m = re.fullmatch(r"/blobs/([0-9a-f]{64})", h.path.split("?", 1)[0])
        data = self.blobs.get(m.group(1)) if m else None
        if data is None:
            return self._send(h, 404, b"NoSuchKey")
        start, status, headers = 0, 200, {"Accept-Ranges": "bytes", "ETag": f'"{m.group(1)}"'}
        rng = h.headers.get("Range")
        if rng:
            r = re.fullmatch(r"bytes=(\d+)-", rng)
            start = int(r.group(1)) if r else 0
            if start >= len(data):
                return self._send(h, 416, b"", {"Content-Range": f"bytes */{len(data)}"})
            status = 206
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        body = bytearray(data[start:])
        with self.lock:
            fault = self.faults.pop(0) if self.faults else None
        if fault and fault[0] == "corrupt" and fault[1] >= start:
            body[fault[1] - start] ^= 0x5A
        if fault and fault[0] == "drop":
            h.send_response(status)
            for k, v in headers.items():
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(bytes(body[: fault[1]]))
            h.wfile.flush()
            h.connection.shutdown(socket.SHUT_RDWR)
            h.close_connection = True
            return
        self._send(h, status, bytes(body), headers)
