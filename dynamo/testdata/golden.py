#!/usr/bin/env python3
"""Writes the golden wire messages of dynamo/testdata.

The msgpack encoder below is written from the msgpack specification alone
(smallest integer, string, bin, array and map forms, float64 for floats), the
rules rmp-serde and msgspec follow, so the goldens do not depend on the Go
library the decoders use. Run from this directory: python3 golden.py
"""
import json
import struct


def pack(v):
    if v is None:
        return b"\xc0"
    if v is True:
        return b"\xc3"
    if v is False:
        return b"\xc2"
    if isinstance(v, int):
        if v >= 0:
            if v < 0x80:
                return bytes([v])
            for code, fmt, lim in ((0xCC, ">B", 0xFF), (0xCD, ">H", 0xFFFF), (0xCE, ">I", 0xFFFFFFFF), (0xCF, ">Q", 2**64 - 1)):
                if v <= lim:
                    return bytes([code]) + struct.pack(fmt, v)
        if v >= -32:
            return struct.pack(">b", v)
        for code, fmt, lim in ((0xD0, ">b", -(2**7)), (0xD1, ">h", -(2**15)), (0xD2, ">i", -(2**31)), (0xD3, ">q", -(2**63))):
            if v >= lim:
                return bytes([code]) + struct.pack(fmt, v)
    if isinstance(v, float):
        return b"\xcb" + struct.pack(">d", v)
    if isinstance(v, str):
        b = v.encode()
        n = len(b)
        if n < 32:
            return bytes([0xA0 | n]) + b
        if n < 256:
            return b"\xd9" + bytes([n]) + b
        return b"\xda" + struct.pack(">H", n) + b
    if isinstance(v, bytes):
        n = len(v)
        if n < 256:
            return b"\xc4" + bytes([n]) + v
        return b"\xc5" + struct.pack(">H", n) + v
    if isinstance(v, (list, tuple)):
        n = len(v)
        head = bytes([0x90 | n]) if n < 16 else b"\xdc" + struct.pack(">H", n)
        return head + b"".join(pack(x) for x in v)
    if isinstance(v, dict):
        n = len(v)
        head = bytes([0x80 | n]) if n < 16 else b"\xde" + struct.pack(">H", n)
        return head + b"".join(pack(k) + pack(x) for k, x in v.items())
    raise TypeError(type(v))


def write(name, data):
    with open(name, "wb") as f:
        f.write(data)


U64MAX = 2**64 - 1

# CUR RouterEvents, in Rust field order (the JSON goldens are hand-written
# with the same content).
stored = {
    "worker_id": 7, "storage_tier": "device", "residency_domain": "worker",
    "event": {"event_id": 42, "data": {"stored": {"parent_hash": None, "start_position": None, "blocks": [
        {"block_hash": 9143094415614847814, "tokens_hash": 9143094415614847814, "mm_extra_info": None},
        {"block_hash": 9510318385840434533, "tokens_hash": 12124091508212882195,
         "mm_extra_info": {"mm_objects": [{"mm_hash": U64MAX, "offsets": [[0, 4]]}]}},
    ]}}, "dp_rank": 0},
}
removed = {
    "worker_id": 7, "storage_tier": "host_pinned",
    "event": {"event_id": 43, "data": {"removed": {"block_hashes": [9510318385840434533, U64MAX]}}, "dp_rank": 1},
}
cleared = {
    "worker_id": 7, "storage_tier": "device", "residency_domain": "cache_owner",
    "event": {"event_id": 44, "data": "cleared", "dp_rank": 0}, "session_id": "s-1",
}

def envelope(seq, payload, ns=None):
    e = {"topic": "kv-events", "publisher_id": 4503599627370495, "sequence": seq,
         "published_at": 1767225600000, "payload": payload}
    if ns is not None:
        e["published_at_ns"] = ns
    return pack(e)

write("envelope_stored.msgpack", envelope(0, pack(stored)))
write("envelope_removed.msgpack", envelope(1, pack(removed)))
write("envelope_cleared_ns.msgpack", envelope(2, pack(cleared), ns=1767225600000123456))

with open("json_g2025_stored.json", "rb") as f:
    g2025 = f.read().strip()
write("envelope_early.json", json.dumps(
    {"publisher_id": 99, "sequence": 5, "published_at": 1700000000000, "payload": list(g2025)},
    separators=(",", ":")).encode())

# vLLM positional batch: [ts, events, dp_rank]; hashes signed and unsigned.
toks = list(range(8))
write("zmq_vllm.msgpack", pack([1767225600.5, [
    ["BlockStored", [11, -2], None, toks, 4, None, "GPU", None],
    ["BlockRemoved", [11], "CPU"],
    ["AllBlocksCleared"],
], 3]))

# vLLM CUR: extra_keys, then the typed tail (group_idx, kind, window), a
# non-main group, and a batch without dp_rank (2 elements).
digest = "0123456789abcdef" * 4
write("zmq_vllm_cur.msgpack", pack([2.0, [
    ["BlockStored", [21, 22], 20, toks, 4, None, None, "adapter-a",
     [[digest, "adapter-a"], None], 0, "full_attention", None],
    ["BlockStored", [31], None, toks[:4], 4, None, None, None, None, 1, "sliding_window", 128],
    ["BlockRemoved", [21], None, 1],
]]))

# SGLang map form, EAGLE pairs, cache_salt; batch in map form.
write("zmq_sglang_map.msgpack", pack({"ts": 3, "events": [
    {"type": "BlockStored", "block_hashes": [41, 42], "parent_block_hash": None,
     "token_ids": [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [7, 8]],
     "block_size": 4, "lora_id": None, "medium": "GPU", "cache_salt": "tenant-a", "future_key": [1, 2]},
    {"type": "BlockRemoved", "block_hashes": [41], "medium": None},
], "dp_rank": 2}))

# Newer vLLM bytes hash (32-byte digest).
write("zmq_bytes_hash.msgpack", pack([4.0, [
    ["BlockRemoved", [bytes(range(32))], "GPU"],
], 0]))
