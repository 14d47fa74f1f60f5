#!/usr/bin/python3
"""A Dynamo event-plane publisher for the zmqfeed tests, built field by field
from the spec (dynamo-current §1.3–1.5) with Debian's python3-zmq (libzmq)
and python3-msgpack: 4-part messages [topic, publisher id u64 BE, sequence
u64 BE, 5-byte header (version 1, u32 BE length) + msgpack EventEnvelope].

  dynamo_pub.py --bind tcp://127.0.0.1:0        a direct-mode PUB socket
                                                 (tcp://[::1]:0: on IPv6, with
                                                 ZMQ_IPV6 set)
  dynamo_pub.py --bind tcp://127.0.0.1:0 --count N
                                                 N of them (N workers), each
                                                 on a port of its own
  dynamo_pub.py --brokers 2                      N XSUB/XPUB proxies and one
                                                 publisher socket connected to
                                                 each XSUB: a message goes
                                                 through each in turn, as a PUB
                                                 connected to every XSUB sends
                                                 one copy down each pipe

It prints its endpoints on the first stdout line ("pub=<ep>[;<ep>...]" or
"xpub=<ep>;<ep>"), then reads one JSON command per stdin line:
  {"op": "send", "msg": M}   send M once, print "ok"
  {"op": "warm", "msg": M}   send M every 10 ms until the next command; M
                             may be a list, all of it sent each round
  {"op": "burst", "msg": [M, ...]}
                             send each M in turn, pausing up to 1 ms after
                             about one in eight of them, print "ok"
  {"op": "subscribed", "msg": {"topic": T}}
                             (broker mode) wait until every broker has
                             passed on a subscription matching topic T, so
                             the next message through it is delivered;
                             print "ok"
  {"op": "quit"}
M: {"pub": id, "seq": n, "topic": "kv-events", "payload": events-or-load,
    optional "sock" (which of the --count sockets sends it, default 0),
    "broker" (broker mode: send through that broker alone, as if the
    others lost it),
    "frame_topic", "frame_pub", "frame_seq", "env_topic",
    "parts" (how many of the 4 parts to send), "version" (header byte)}.
A payload that is a list is sent as a v1.4+ batch, a map as one value.
"""
import argparse
import json
import os
import random
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


def send(socks, only, m):
    if "broker" in m:
        only[m["broker"]].send_multipart(frames(m))
    elif only:
        for s in only:
            s.send_multipart(frames(m))
    else:
        socks[m.get("sock", 0)].send_multipart(frames(m))


def subscribed(only, subs, topic):
    """Waits until each broker's socket got a subscription that topic
    matches. The sockets are XPUBs (a PUB that also reads subscriptions);
    subs holds what each one got so far."""
    deadline = time.monotonic() + 30
    for s, got in zip(only, subs):
        while not any(topic.startswith(g) for g in got):
            left = deadline - time.monotonic()
            if left <= 0 or not s.poll(int(left * 1000)):
                raise SystemExit("no subscription to %r through every broker" % topic)
            msg = s.recv()
            if msg[:1] == b"\x01":
                got.add(msg[1:].decode())


def proxy(ctx, xsub, xpub):
    try:
        zmq.proxy(xsub, xpub)
    except zmq.ContextTerminated:
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bind")
    ap.add_argument("--brokers", type=int, default=0)
    ap.add_argument("--count", type=int, default=1)
    args = ap.parse_args()
    ctx = zmq.Context()
    ctx.set(zmq.MAX_SOCKETS, max(1023, 2 * args.count + 8))
    socks = []
    for _ in range(args.count if args.bind else 0):
        s = ctx.socket(zmq.PUB)
        s.setsockopt(zmq.LINGER, 0)
        if "[" in args.bind:
            s.setsockopt(zmq.IPV6, 1)  # libzmq binds an IPv6 address only with it
        socks.append(s)
    only, subs = [], []
    if args.bind:
        for s in socks:
            s.bind(args.bind)
        print("pub=" + ";".join(s.getsockopt_string(zmq.LAST_ENDPOINT) for s in socks), flush=True)
    else:
        xpubs = []
        for _ in range(args.brokers):
            xsub, xpub = ctx.socket(zmq.XSUB), ctx.socket(zmq.XPUB)
            xsub.bind("tcp://127.0.0.1:0")
            xpub.bind("tcp://127.0.0.1:0")
            alone = ctx.socket(zmq.XPUB)
            alone.setsockopt(zmq.LINGER, 0)
            alone.connect(xsub.getsockopt_string(zmq.LAST_ENDPOINT))
            only.append(alone)
            subs.append(set())
            xpubs.append(xpub.getsockopt_string(zmq.LAST_ENDPOINT))
            threading.Thread(target=proxy, args=(ctx, xsub, xpub), daemon=True).start()
        print("xpub=" + ";".join(xpubs), flush=True)
    warm = None
    while True:
        if warm is not None:
            for m in warm:
                send(socks, only, m)
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
            warm = cmd["msg"] if isinstance(cmd["msg"], list) else [cmd["msg"]]
        elif cmd["op"] == "burst":
            rnd = random.Random(len(cmd["msg"]))
            for m in cmd["msg"]:
                send(socks, only, m)
                if rnd.random() < 0.125:
                    time.sleep(rnd.random() / 1000)
            print("ok", flush=True)
        elif cmd["op"] == "subscribed":
            subscribed(only, subs, cmd["msg"]["topic"])
            print("ok", flush=True)
        elif cmd["op"] == "send":
            send(socks, only, cmd["msg"])
            print("ok", flush=True)


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # the proxy threads hold sockets: do not wait on the context
