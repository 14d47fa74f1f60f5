#!/usr/bin/python3
"""CBI1 fixtures, written from Dynamo's protocol README (the CBI1 payload
section of dynamo-llm's kv_dc_relay/wan/grpc/protocol/README.md), not from
goindex's encoder: struct.pack for the little-endian layout and
python3-xxhash (Debian) for the body checksum, the low 32 bits of unseeded
XXH3-64. Usage: gen_fixtures.py DIR writes the frames and expected.json
there; the Go tests compare them with the committed testdata byte for byte
and decode each one."""
import json
import os
import struct
import sys

import xxhash

SEED = 0x5DEECE66D1B54A33
BUCKETS = 8
DC = 3


def frame(flags, epoch, body):
    header = b"CBI1" + struct.pack("<HHBBHQQQQ", 1, flags, 16, 4, 1, SEED, BUCKETS, DC, epoch)
    checksum = xxhash.xxh3_64_intdigest(body) & 0xFFFFFFFF
    return header + struct.pack("<I", checksum) + body


def chunk(epoch, index, count, offset, words):
    return frame(1, epoch, struct.pack("<IIQ", index, count, offset) + b"".join(struct.pack("<Q", w) for w in words))


def delta(epoch, base, images):
    body = struct.pack("<QI", base, len(images)) + b"".join(struct.pack("<IQ", b, w) for b, w in images)
    return frame(2, epoch, body)


def main(out):
    # Slots [0x1234, 0, 0xabcd, 1] pack, least-significant first, into one word.
    word = 0x1234 | 0xABCD << 32 | 1 << 48
    words = [word, 0, 0xFFFF_0001_0002_0003, 0, 0, 0x00000000_0000_BEEF, 0, 1 << 63]
    fixtures = {
        "snapshot_chunk0.cbi1": (chunk(7, 0, 2, 0, words[:4]), {"kind": "chunk", "epoch": 7, "index": 0, "count": 2, "offset": 0, "words": words[:4]}),
        "snapshot_chunk1.cbi1": (chunk(7, 1, 2, 4, words[4:]), {"kind": "chunk", "epoch": 7, "index": 1, "count": 2, "offset": 4, "words": words[4:]}),
        "delta.cbi1": (delta(8, 7, [(2, 0), (5, word), (7, 0xDEAD)]), {"kind": "delta", "epoch": 8, "base": 7, "images": [[2, 0], [5, word], [7, 0xDEAD]]}),
        "delta_empty.cbi1": (delta(9, 8, []), {"kind": "delta", "epoch": 9, "base": 8, "images": []}),
    }
    expected = {"seed": SEED, "bucket_count": BUCKETS, "dc_id": DC, "frames": {}}
    for name, (data, meta) in fixtures.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        expected["frames"][name] = meta
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
