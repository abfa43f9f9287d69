"""Load-balancer chaos, bounded for CI: HAProxy in front of three ``tenxgraph serve`` processes
on one Postgres schema and one Redis prefix; a driver sends turns over many threads (half of
them streamed) with a 10xGraph client's retry loop while a random server is SIGKILLed every
1.5 s and restarted.

Asserted: every acknowledged turn is stored, no message is stored twice, turns are stored in the
order sent, and every broken stream was resumed with no chunk lost or repeated; and the run did
kill servers and did break streams (else it proved nothing). The full size (2,000 turns over 200
threads) is ``benchmarks/server_chaos.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _lb_chaos import chaos_env, run_chaos
from _lb_cluster import haproxy_path

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _needs_haproxy() -> None:
    if haproxy_path() is None:
        pytest.fail("haproxy is not installed; run scripts/services.sh", pytrace=False)


def test_chaos_behind_haproxy_loses_and_duplicates_nothing(
    tmp_path: Path, pg_dsn: str, pg_schema: str, redis_url: str, redis_prefix: str
) -> None:
    env = chaos_env(pg_dsn, pg_schema, redis_url, redis_prefix)
    counts, cluster = run_chaos(
        tmp_path, env, threads=50, turns=30, kill_every_s=1.0, deadline_s=120
    )
    summary = counts.summary()
    print(summary)  # the counts, shown with pytest -s or -rP
    where = f"{summary}\n{cluster.logs(1500)}\n{summary}"
    assert counts.turns_sent == 50 * 30
    assert counts.turns_given_up == 0, where
    assert counts.turns_acknowledged == counts.turns_sent, where
    assert counts.turns_lost == 0, where
    assert counts.duplicates == 0, where
    assert counts.out_of_order_threads == 0, where
    assert counts.turns_stored >= counts.turns_acknowledged, where
    assert counts.streams_lost_chunk == 0, where
    assert counts.streams_repeated_chunk == 0, where
    assert counts.streams_resumed == counts.streams_broken, where
    # The run exercised what it claims to: servers died under load, streams broke.
    assert counts.kills >= 3, where
    assert counts.streams_broken >= 1, where
