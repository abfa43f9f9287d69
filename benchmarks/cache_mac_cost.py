"""Client CPU of the keyed MAC on Redis cache entries (issue 29): per step and per read.

Run: ``python benchmarks/cache_mac_cost.py`` (no server needed: the tier's argument building
and parsing are timed without a round trip). Prints, per thread length:

* ``tag_step_us``: building a write-through of one new message on top of a kept hash chain
  (what a durable step adds in the background, whatever the thread's length);
* ``full_tag_us``: tagging the complete record (a fill, or a write-through that does not
  append);
* ``verify_us``: verifying an entry read from Redis (hashing its strings, before decoding);
* ``decode_us``: decoding the same rows (what a read from Redis costs anyway), for scale.
"""

from __future__ import annotations

import json
import timeit

import orjson

from tenxgraph.core.state import Message
from tenxgraph.records import StoredCheckpoint
from tenxgraph.storage import serde
from tenxgraph.storage._cache_mac import EntryMac
from tenxgraph.storage.redis import _FMT_B, RedisCache, _owner


def _best_us(fn: object, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6  # type: ignore[arg-type]


def _record(version: int, count: int, values: bytes) -> StoredCheckpoint:
    return StoredCheckpoint(
        thread_id="t",
        user_id="u",
        version=version,
        values=values,
        ranges=((1, count + 1),),
        messages=None,
        next_seq=count + 1,
        status="running",
        created_at=1.7e9 + version,
    )


def measure(tier: RedisCache, mac: EntryMac, n: int) -> dict[str, float]:
    """The four timings (microseconds) at ``n`` messages."""
    blob = serde.encode_message(Message.text_message("a question " + "x" * 200))
    values = orjson.dumps({"context_summary": None, "execution_meta": {"step": 3}})
    full = _record(1, n, values)
    full.messages = [blob] * n
    put = tier._put_args(full, None, None, None, mac)
    assert put is not None
    tier._keep_chain("t", put[2])
    step = _record(2, n + 1, values)
    rows = [(n + 1, blob)]
    body = b",".join(full.messages)
    lens = ",".join(str(len(b)) for b in full.messages).encode()
    fields = (b"1", values, b"[[1,2]]", b"2", b"running", b"1700000001.0")
    owner = _owner("u").encode()

    def verify() -> None:
        hr, hl = EntryMac.hashes(body, lens)
        mac.tag(_FMT_B, "t", owner, fields, hr.digest(), hl.digest())

    reps = max(1, 2000 // n)
    return {
        "messages": n,
        "tag_step_us": round(
            _best_us(lambda: tier._put_args(step, rows, 1.7e9 + 1, None, mac), 2000), 2
        ),
        "full_tag_us": round(
            _best_us(lambda: tier._put_args(full, None, None, None, mac), reps), 1
        ),
        "verify_us": round(_best_us(verify, reps), 1),
        "decode_us": round(_best_us(lambda: serde.decode_message_array(body, n), reps), 1),
    }


def main() -> None:
    tier = RedisCache("redis://127.0.0.1:6379/0", mac_key=b"k" * 32)
    mac = EntryMac(b"k" * 32)
    for n in (10, 1000, 10000):
        print(json.dumps(measure(tier, mac, n)))


if __name__ == "__main__":
    main()
