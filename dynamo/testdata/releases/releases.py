#!/usr/bin/python3
"""Writes one event-plane message per Dynamo release shape (dynamo-current
§1.5, §2.1–2.3, §3) with Debian's python3-msgpack, so the Go decoders meet
bytes they did not encode. Each message is the bare msgpack EventEnvelope a
NATS subscriber receives; the ZMQ transport adds frames around the same
bytes. Run from anywhere: /usr/bin/python3 releases.py [OUTDIR]

Files:
  v1.3-component-single.msgpack   payload: one RouterEvent map (no residency)
  v1.4-endpoint-batch.msgpack     payload: [stored, removed] (Vec<RouterEvent>)
  v1.5-endpoint-residency.msgpack payload: [stored worker, host_pinned stored, cleared]
  v1.7-endpoint-session.msgpack   payload: [stored with session_id, {"cleared": nil}]
  v1.6-active-load.msgpack        topic kv_metrics, payload: ActiveLoad
"""
import os
import sys

import msgpack

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
PUBLISHER = (1 << 53) - 1  # publisher ids are masked to 53 bits since 1.4
MS = 1767225600000


def envelope(seq, payload, topic="kv-events"):
    return msgpack.packb({"publisher_id": PUBLISHER, "sequence": seq, "published_at": MS,
                          "topic": topic, "payload": payload}, use_bin_type=True)


def stored(worker, event_id, parent, blocks, rank=0, tier=None, residency=None, session=None):
    ev = {"worker_id": worker}
    if tier is not None:
        ev["storage_tier"] = tier
    if residency is not None:
        ev["residency_domain"] = residency
    ev["event"] = {"event_id": event_id, "data": {"stored": {
        "parent_hash": parent, "start_position": None,
        "blocks": [{"block_hash": b, "tokens_hash": t, "mm_extra_info": None} for b, t in blocks]}},
        "dp_rank": rank}
    if session is not None:
        ev["session_id"] = session
    return ev


def removed(worker, event_id, hashes, rank=0):
    return {"worker_id": worker, "storage_tier": "device",
            "event": {"event_id": event_id, "data": {"removed": {"block_hashes": hashes}}, "dp_rank": rank}}


def cleared(worker, event_id, form, rank=0):
    data = "cleared" if form == "str" else {"cleared": None}
    return {"worker_id": worker, "storage_tier": "device", "residency_domain": "worker",
            "event": {"event_id": event_id, "data": data, "dp_rank": rank}}


def pack(v):
    return msgpack.packb(v, use_bin_type=True)


files = {
    "v1.3-component-single.msgpack": envelope(0, pack(stored(3, 1, None, [(0x1301, 0xA1), (0x1302, 0xA2)]))),
    "v1.4-endpoint-batch.msgpack": envelope(1, pack([
        stored(4, 1, None, [(0x1401, 0xB1), (0x1402, 0xB2), (0x1403, 0xB3)], rank=1, tier="device"),
        removed(4, 2, [0x1403], rank=1),
    ])),
    "v1.5-endpoint-residency.msgpack": envelope(2, pack([
        stored(5, 1, None, [(0x1501, 0xC1)], tier="device", residency="worker"),
        stored(5, 2, None, [(0x1502, 0xC2)], tier="host_pinned", residency="worker"),
        cleared(6, 3, "str"),
    ])),
    "v1.7-endpoint-session.msgpack": envelope(3, pack([
        cleared(7, 1, "map"),
        stored(7, 2, None, [(0x1701, 0xD1), (0x1702, 0xD2)], tier="device", residency="worker", session="s-9"),
    ])),
    "v1.6-active-load.msgpack": envelope(4, pack({"worker_id": 4, "dp_rank": 1, "active_decode_blocks": None,
                                                  "active_prefill_tokens": None, "kv_used_blocks": 321}),
                                         topic="kv_metrics"),
}
for name, data in files.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
