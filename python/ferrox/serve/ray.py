"""ferrox replicas behind Ray Serve (docs/scale-out.md).

    applications:
    - name: ferrox
      import_path: ferrox.serve.ray:app_builder
      args: {model: /models/gemma-3-270m-q4_k_m.gguf, threads: 1, parallel: 4}

Two deployments:

- `FerroxReplica` (many): each runs one native `ferrox serve` as a child on a
  loopback port and relays requests to it. The native server already does
  continuous batching, admission limits, the SIGTERM drain and the metrics, so
  the replica adds none of its own. Health is the child's /ready; routing stats
  are the child's queue and KV gauges; scale-down stops the child with SIGTERM.
- `FerroxIngress` (the HTTP ingress): takes the OpenAI routes, picks a replica
  through a `DeploymentHandle` whose router is `HeadroomRouter`, retries a
  request on another replica as long as nothing of its answer has reached the
  client, and ends a stream cut short with an error event the client sees.

Nothing here logs a prompt or an answer: only paths, statuses and errors.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import defaultdict
from typing import Any, AsyncIterator, Optional

import httpx
from ray import serve
from ray.serve.config import RequestRouterConfig
from ray.serve.request_router import PendingRequest, ReplicaID, RequestRouter, RunningReplica
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from . import _headroom
from ._coalesce import coalesced
from ._child import ChildServer
from ._settings import FerroxSettings, SettingsError

__all__ = ["FerroxIngress", "FerroxReplica", "HeadroomRouter", "app_builder", "build_app",
           "SettingsError"]

log = logging.getLogger("ray.serve")

# The routes relayed, by method. Everything else is 404 at the ingress.
ROUTES = {
    "POST": ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages",
             "/v1/messages/count_tokens"),
    "GET": ("/v1/models",),
}
# Request headers the child needs; Host is the child's own loopback address.
FORWARDED = ("authorization", "x-api-key", "content-type", "x-request-id", "origin",
             "anthropic-version", "accept")
RETURNED = ("content-type", "retry-after", "x-request-id", "www-authenticate")

# Replicas this process saw fail, by unique id -> until (monotonic): the ingress
# marks them, HeadroomRouter (same process: the handle's router) ranks them
# last until their next health report says otherwise.
_failed_until: dict[str, float] = {}
_AVOID_S = 5.0


class ReplicaUnavailable(RuntimeError):
    """Raised by a replica before the first byte of an answer: safe to retry elsewhere."""

    def __init__(self, replica: str, why: str):
        super().__init__(replica, why)  # both in args: the exception is pickled across actors
        self.replica = replica

    def __str__(self) -> str:
        return f"replica {self.args[0]}: {self.args[1]}"


class HeadroomRouter(RequestRouter):
    """Ranks replicas by ferrox's own queue and KV gauges (`_headroom.rank`)."""

    def initialize_state(self, **kwargs: Any) -> None:
        self._in_flight: dict[str, int] = defaultdict(int)

    async def choose_replicas(self, candidate_replicas: list[RunningReplica],
                              pending_request: Optional[PendingRequest] = None
                              ) -> list[list[RunningReplica]]:
        now = time.monotonic()

        def stats_of(r: RunningReplica):
            if _failed_until.get(r.replica_id.unique_id, 0) > now:
                return {"ready": False}
            return r.routing_stats

        return _headroom.rank(candidate_replicas, stats_of,
                              lambda r: self._in_flight[r.replica_id.unique_id])

    def on_request_routed(self, pending_request: PendingRequest, replica_id: ReplicaID,
                          result: Any) -> None:
        self._in_flight[replica_id.unique_id] += 1

    def on_request_completed(self, replica_id: ReplicaID, internal_request_id: str) -> None:
        uid = replica_id.unique_id
        self._in_flight[uid] = max(0, self._in_flight[uid] - 1)


@serve.deployment(
    name="FerroxReplica",
    max_ongoing_requests=16,
    health_check_period_s=2,
    health_check_timeout_s=10,
    graceful_shutdown_wait_loop_s=1,
    graceful_shutdown_timeout_s=60,
    request_router_config=RequestRouterConfig(
        request_router_class="ferrox.serve.ray:HeadroomRouter",
        request_routing_stats_period_s=1,
        request_routing_stats_timeout_s=5),
)
class FerroxReplica:
    """One `ferrox serve` child and a relay to it."""

    def __init__(self, settings: dict):
        self._settings = FerroxSettings.from_mapping(settings)
        self._id = serve.get_replica_context().replica_id.unique_id
        self._child = ChildServer(self._settings)
        self._child.start()
        timeout = httpx.Timeout(self._settings.request_timeout + 30, connect=5)
        self._client = httpx.AsyncClient(base_url=self._child.base, timeout=timeout)
        log.info("ferrox replica %s: ferrox serve pid %d on 127.0.0.1:%d", self._id,
                 self._child.proc.pid, self._child.port)

    async def check_health(self) -> None:
        if not self._child.alive():
            raise RuntimeError(f"ferrox serve exited with status {self._child.proc.returncode}")
        status = await asyncio.to_thread(self._child.ready_status)
        if status != 200:
            raise RuntimeError(f"ferrox serve /ready answered {status}")

    async def record_routing_stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = {"ready": False, "parallel": self._settings.parallel}
        if not self._child.alive():
            return stats
        try:
            r = await self._client.get("/metrics", headers=self._child.auth_headers(), timeout=3)
            r.raise_for_status()
            stats.update(_headroom.parse_gauges(r.text), ready=True)
        except (httpx.HTTPError, KeyError, ValueError) as e:
            log.warning("ferrox replica %s: /metrics: %s", self._id, e)
        return stats

    async def relay(self, method: str, path: str, body: bytes,
                    headers: dict[str, str]) -> AsyncIterator[Any]:
        """Yields a head {status, headers, body, replica, stream} once the child's
        first bytes are here (a whole answer, unless it is a stream), then the
        stream's further chunks. Fails with ReplicaUnavailable before the head."""
        if not self._child.alive():
            raise ReplicaUnavailable(self._id, "its ferrox serve has exited")
        request = self._client.build_request(method, path, content=body or None, headers=headers)
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError as e:
            raise ReplicaUnavailable(self._id, f"ferrox serve did not answer ({type(e).__name__})")
        try:
            head = {"status": response.status_code, "replica": self._id,
                    "headers": {k: v for k, v in response.headers.items() if k.lower() in RETURNED}}
            head["stream"] = response.headers.get("content-type", "").startswith("text/event-stream")
            chunks = response.aiter_raw()
            try:
                if head["stream"]:
                    head["body"] = await chunks.__anext__()
                else:
                    head["body"] = await response.aread()
            except StopAsyncIteration:
                head["body"] = b""
            except httpx.HTTPError as e:
                raise ReplicaUnavailable(self._id, f"ferrox serve broke off ({type(e).__name__})")
            yield head
            if head["stream"]:
                interval = self._settings.stream_interval_ms / 1000
                # An httpx error here reaches the ingress mid-stream.
                async with contextlib.aclosing(coalesced(chunks, interval)) as joined:
                    async for chunk in joined:
                        yield chunk
        finally:
            await response.aclose()

    def __del__(self) -> None:
        # Serve calls this once the replica has no requests left (scale-down,
        # replacement, shutdown): ferrox drains whatever is still in it.
        child, self._child = getattr(self, "_child", None), None  # once: Serve, then the GC
        if child is not None:
            code = child.stop(child.settings.drain_timeout + 10)
            log.info("ferrox replica %s: ferrox serve exited with %s", getattr(self, "_id", "?"), code)


def _error_body(path: str, status: int, message: str) -> bytes:
    if path.startswith("/v1/messages"):
        kind = "overloaded_error" if status == 503 else "api_error"
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    return json.dumps({"error": {"message": message, "type": "server_error", "param": None,
                                 "code": status}}).encode()


def _stream_error_event(path: str, message: str) -> bytes:
    body = _error_body(path, 502, message).decode()
    if path.startswith("/v1/messages"):
        return f"event: error\ndata: {body}\n\n".encode()
    if path.startswith("/v1/responses"):
        return f"event: error\ndata: {body}\n\n".encode()
    return f"data: {body}\n\n".encode()


@serve.deployment(name="FerroxIngress", max_ongoing_requests=1024,
                  ray_actor_options={"num_cpus": 0})
class FerroxIngress:
    """The OpenAI routes over HTTP, relayed to the replica with the most headroom."""

    def __init__(self, replicas, settings: dict):
        self._replicas = replicas
        self._settings = FerroxSettings.from_mapping(settings)

    async def __call__(self, request: Request) -> Response:
        path = request.url.path
        if path not in ROUTES.get(request.method, ()):
            known = any(path in paths for paths in ROUTES.values())
            status = 405 if known else 404
            return Response(_error_body(path, status, f"{request.method} {path} is not served here"),
                            status_code=status, media_type="application/json")
        length = int(request.headers.get("content-length") or 0)
        if length > self._settings.proxy_max_body_bytes:
            return Response(_error_body(path, 413, f"the body is {length} bytes; at most "
                                        f"{self._settings.proxy_max_body_bytes} are taken"),
                            status_code=413, media_type="application/json")
        body = await _bounded_body(request, self._settings.proxy_max_body_bytes)
        if body is None:
            return Response(_error_body(path, 413, "the body is over "
                                        f"{self._settings.proxy_max_body_bytes} bytes"),
                            status_code=413, media_type="application/json")
        headers = {k: v for k, v in request.headers.items() if k.lower() in FORWARDED}
        head, stream, why = await self._first_answer(request.method, path, body, headers)
        if head is None:
            return Response(_error_body(path, 503, f"no replica could take the request: {why}"),
                            status_code=503, headers={"Retry-After": "1"},
                            media_type="application/json")
        out_headers = dict(head["headers"], **{"x-ferrox-replica": head["replica"]})
        if not head["stream"]:
            return Response(head["body"], status_code=head["status"], headers=out_headers)
        return StreamingResponse(self._relay_stream(path, head, stream),
                                 status_code=head["status"], headers=out_headers)

    async def _first_answer(self, method: str, path: str, body: bytes, headers: dict):
        """The head of an answer, retried on another replica while nothing has
        reached the client: a replica whose child is gone or broke off, a
        replica that died, or a 503 (a draining or full child)."""
        why = ""
        deadline = time.monotonic() + self._settings.request_timeout + 30
        for attempt in range(self._settings.attempts):
            stream = self._replicas.options(stream=True).relay.remote(method, path, body, headers)
            try:
                head = await asyncio.wait_for(stream.__anext__(),
                                              max(1.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                stream.cancel()
                return None, None, "timed out"
            except Exception as e:  # the replica's own failure, or Ray's (its actor died)
                cause = _cause(e)
                if isinstance(cause, ReplicaUnavailable):
                    _failed_until[cause.replica] = time.monotonic() + _AVOID_S
                why = f"{type(cause).__name__}: {cause}"
                log.warning("ferrox ingress: %s %s attempt %d failed before the first byte: %s",
                            method, path, attempt + 1, why)
                await asyncio.sleep(_backoff(attempt))
                continue
            if head["status"] == 503 and attempt + 1 < self._settings.attempts:
                stream.cancel()
                _failed_until[head["replica"]] = time.monotonic() + _AVOID_S
                why = "503 from every replica tried"
                await asyncio.sleep(_backoff(attempt))
                continue
            return head, stream, ""
        return None, None, why

    async def _relay_stream(self, path: str, head: dict, stream) -> AsyncIterator[bytes]:
        yield head["body"]
        try:
            async for chunk in stream:
                yield chunk
        except Exception as e:  # the child or the replica died mid-stream
            cause = _cause(e)
            _failed_until[head["replica"]] = time.monotonic() + _AVOID_S
            log.warning("ferrox ingress: a stream from replica %s broke off: %s", head["replica"],
                        type(cause).__name__)
            # An error event the client sees, and no [DONE]: never a silent truncation.
            yield _stream_error_event(path, "the replica serving this stream failed mid-answer "
                                      f"({type(cause).__name__}); the answer is incomplete")


def _backoff(attempt: int) -> float:
    """0.25 s, doubling, at most 2 s: the default 6 attempts span ~6 s, past the
    3 failed health checks (3 x health_check_period_s) after which Serve drops a
    dead replica; until then a routing pass begun before the failure may still
    offer it."""
    return min(2.0, 0.25 * 2**attempt)


def _cause(e: BaseException) -> BaseException:
    """The user exception inside Ray's wrapper (RayTaskError subclasses it), or e."""
    inner = getattr(e, "cause", None)
    return inner if isinstance(inner, BaseException) else e


async def _bounded_body(request: Request, limit: int) -> Optional[bytes]:
    parts, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            return None
        parts.append(part)
    return b"".join(parts)


def build_app(args: dict, replica_options: Optional[dict] = None):
    """The application: `args` are the ferrox settings (checked here, before any
    replica starts); `replica_options` override FerroxReplica's Serve options
    (num_replicas, autoscaling_config, ...). A config file's `deployments:` do
    the same."""
    settings = FerroxSettings.from_mapping(args)
    options: dict[str, Any] = {"ray_actor_options": {"num_cpus": settings.threads},
                               "max_ongoing_requests": 2 * settings.parallel,
                               "graceful_shutdown_timeout_s": settings.drain_timeout + 30}
    options.update(replica_options or {})
    replicas = FerroxReplica.options(**options).bind(settings.as_dict())
    return FerroxIngress.bind(replicas, settings.as_dict())


def app_builder(args: dict):
    """The `import_path` of a Serve config file: `ferrox.serve.ray:app_builder`."""
    return build_app(dict(args))
