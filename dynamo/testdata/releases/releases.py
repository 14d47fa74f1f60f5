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
  v1.7-residency-mixed.msgpack    payload: one batch mixing what the primary index takes
                                  with what Dynamo's residency rules refuse or route to
                                  lower tiers (see MIXED below)
"""
import os
import sys

import msgpack

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
PUBLISHER = (1 << 53) - 1  # publisher ids are masked to 53 bits since 1.4
MS = 1767225600000
NIL = object()  # an explicit nil, unlike None (the field omitted)
# A cache owner's state_source. CacheOwnerId's exact serde shape is
# [unverified]; decoders skip the field, so any map stands for it.
OWNER = {"pool": {"dc_id": 1, "indexer_domain": "kv"}, "slot": "slot-0"}


def envelope(seq, payload, topic="kv-events"):
    return msgpack.packb({"publisher_id": PUBLISHER, "sequence": seq, "published_at": MS,
                          "topic": topic, "payload": payload}, use_bin_type=True)


def head(worker, tier, residency):
    ev = {"worker_id": worker}
    if tier is not None:
        ev["storage_tier"] = tier
    if residency is not None:
        ev["residency_domain"] = None if residency is NIL else residency
    return ev


def stored(worker, event_id, parent, blocks, rank=0, tier=None, residency=None, session=None, source=None):
    ev = head(worker, tier, residency)
    ev["event"] = {"event_id": event_id, "data": {"stored": {
        "parent_hash": parent, "start_position": None,
        "blocks": [{"block_hash": b, "tokens_hash": t, "mm_extra_info": None} for b, t in blocks]}},
        "dp_rank": rank}
    if source is not None:
        ev["state_source"] = source
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


def clear(worker, event_id, tier=None, residency=None, source=None):
    ev = head(worker, tier, residency)
    ev["event"] = {"event_id": event_id, "data": "cleared", "dp_rank": 0}
    if source is not None:
        ev["state_source"] = source
    return ev


# What Dynamo's RouterEvent::targets_primary makes of each: the primary index
# takes 1, 7, 9 and 10 (a clear without residency_domain clears every domain,
# whatever its tier); 5 and 8 belong to a cache owner's lower tiers; 2, 3, 4
# and 6 are unsupported and skipped alone.
MIXED = [
    stored(8, 1, None, [(0x1801, 0xE1)], tier="device", residency="worker"),               # 1
    stored(8, 2, 0x1801, [(0x1802, 0xE2)], tier="device", residency=NIL),                  # 2 nil domain
    stored(8, 3, 0x1801, [(0x1803, 0xE3)], tier="device", residency="tenant"),             # 3 unknown domain
    stored(8, 4, None, [(0x1804, 0xE4)], tier="device", residency="cache_owner", source=OWNER),  # 4 owner on device
    stored(8, 5, None, [(0x1805, 0xE5)], tier="host_pinned", residency="cache_owner", source=OWNER),  # 5
    stored(8, 6, None, [(0x1806, 0xE6)], tier="cxl"),                                      # 6 unknown tier
    stored(9, 7, None, [(0x1901, 0xF1), (0x1902, 0xF2)], tier="device", residency="worker"),  # 7
    clear(9, 8, tier="device", residency="cache_owner", source=OWNER),                     # 8 owner-domain clear
    stored(10, 9, None, [(0x1A01, 0xA9)], tier="device"),                                  # 9
    clear(10, 10, tier="disk"),                                                            # 10 legacy clear
]


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
    "v1.7-residency-mixed.msgpack": envelope(4, pack(MIXED)),  # kv_metrics sequences apart
}
for name, data in files.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
