"""Which replica has the most headroom, from ferrox's own gauges.

A replica reports what its `ferrox serve` says on /metrics
(`ferrox:num_requests_waiting`, `ferrox:num_requests_running`,
`ferrox:kv_cache_usage_perc`) and whether its /ready is 200. The router adds the
requests it sent since (the gauges are sampled once a period, so a burst would
otherwise all go to the replica that looked idle) and ranks by

    load = max(waiting + running, in flight from this router) / parallel
           + kv_cache_usage_perc

lowest first: a replica with free sequences and an empty cache comes first, a
queue counts as much as a full cache. Replicas not ready (a dead child, a
drain, a request just failed there) are left out while any replica is ready. Pure functions: the tests call them without Ray.
"""
from __future__ import annotations

import random
from typing import Mapping, Optional

GAUGES = {
    "ferrox:num_requests_waiting": "waiting",
    "ferrox:num_requests_running": "running",
    "ferrox:kv_cache_usage_perc": "kv",
}


def parse_gauges(text: str) -> dict[str, float]:
    """The three gauges from a Prometheus text page; KeyError naming a missing one."""
    found: dict[str, float] = {}
    for line in text.splitlines()[:100000]:  # a bounded page: ferrox's is ~100 lines
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        if name in GAUGES:
            found[GAUGES[name]] = float(value)
    missing = [name for name, key in GAUGES.items() if key not in found]
    if missing:
        raise KeyError(f"/metrics lacks {missing}")
    return found


def load_score(stats: Optional[Mapping], in_flight: int) -> tuple[int, float]:
    """(tier, load): tier 0 for a ready replica, 1 for one that is not; load as above."""
    if not stats:  # a new replica before its first report: only what this router sent
        return 0, float(in_flight)
    if not stats.get("ready", False):
        return 1, float(in_flight)
    parallel = max(1, int(stats.get("parallel", 1)))
    queued = stats.get("waiting", 0.0) + stats.get("running", 0.0)
    return 0, max(queued, in_flight) / parallel + stats.get("kv", 0.0)


def rank(candidates: list, stats_of, in_flight_of) -> list[list]:
    """The candidates, one per rank, most headroom first; ties in random order, so
    idle replicas share a trickle of short requests instead of one taking all.
    Replicas not ready are left out while any is ready: a full ready replica is
    worth waiting for (Serve's router backs off and asks again), a dead one only
    fails the request at once."""
    scored = sorted(((load_score(stats_of(c), in_flight_of(c)), random.random(), i)
                     for i, c in enumerate(candidates)))
    if scored and scored[0][0][0] == 0:
        scored = [s for s in scored if s[0][0] == 0]
    return [[candidates[i]] for _, _, i in scored]
