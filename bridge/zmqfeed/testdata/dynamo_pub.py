#!/usr/bin/python3
"""A Dynamo event-plane publisher for the zmqfeed tests, built field by field
from the spec (dynamo-current §1.3–1.5) with Debian's python3-zmq (libzmq)
and python3-msgpack: 4-part messages [topic, publisher id u64 BE, sequence
u64 BE, 5-byte header (version 1, u32 BE length) + msgpack EventEnvelope].

  dynamo_pub.py --bind tcp://127.0.0.1:0        a direct-mode PUB socket
  dynamo_pub.py --brokers 2                      N XSUB/XPUB proxies; the PUB
                                                 socket connects to every XSUB

It prints its endpoints on the first stdout line ("pub=<ep>" or
"xpub=<ep>;<ep>"), then reads one JSON command per stdin line:
  {"op": "send", "msg": M}   send M once, print "ok"
  {"op": "warm", "msg": M}   send M every 10 ms until the next command
  {"op": "quit"}
M: {"pub": id, "seq": n, "topic": "kv-events", "payload": events-or-load,
    optional "frame_topic", "frame_pub", "frame_seq", "env_topic",
    "parts" (how many of the 4 parts to send), "version" (header byte)}.
A payload that is a list is sent as a v1.4+ batch, a map as one value.
"""
import argparse
import json
import os
import select
import struct
import sys
import threading
import time

import msgpack
import zmq


def frames(m):
    topic = m.get("topic", "kv-events")
    env = msgpack.packb({
        "publisher_id": m["pub"], "sequence": m["seq"], "published_at": int(time.time() * 1000),
        "topic": m.get("env_topic", topic),
        "payload": msgpack.packb(m["payload"], use_bin_type=True),
    }, use_bin_type=True)
    parts = [
        m.get("frame_topic", topic).encode(),
        struct.pack(">Q", m.get("frame_pub", m["pub"])),
        struct.pack(">Q", m.get("frame_seq", m["seq"])),
        struct.pack(">BI", m.get("version", 1), len(env)) + env,
    ]
    return parts[: m.get("parts", 4)]


def proxy(ctx, xsub, xpub):
    try:
        zmq.proxy(xsub, xpub)
    except zmq.ContextTerminated:
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bind")
    ap.add_argument("--brokers", type=int, default=0)
    args = ap.parse_args()
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    if args.bind:
        pub.bind(args.bind)
        print("pub=" + pub.getsockopt_string(zmq.LAST_ENDPOINT), flush=True)
    else:
        xpubs = []
        for _ in range(args.brokers):
            xsub, xpub = ctx.socket(zmq.XSUB), ctx.socket(zmq.XPUB)
            xsub.bind("tcp://127.0.0.1:0")
            xpub.bind("tcp://127.0.0.1:0")
            pub.connect(xsub.getsockopt_string(zmq.LAST_ENDPOINT))
            xpubs.append(xpub.getsockopt_string(zmq.LAST_ENDPOINT))
            threading.Thread(target=proxy, args=(ctx, xsub, xpub), daemon=True).start()
        print("xpub=" + ";".join(xpubs), flush=True)
    warm = None
    while True:
        if warm is not None:
            pub.send_multipart(frames(warm))
            ready, _, _ = select.select([sys.stdin], [], [], 0.01)
            if not ready:
                continue
        line = sys.stdin.readline()
        if not line:
            break
        cmd = json.loads(line)
        warm = None
        if cmd["op"] == "quit":
            break
        if cmd["op"] == "warm":
            warm = cmd["msg"]
        elif cmd["op"] == "send":
            pub.send_multipart(frames(cmd["msg"]))
            print("ok", flush=True)


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # the proxy threads hold sockets: do not wait on the context
