#!/usr/bin/python3
"""A vLLM/SGLang-shaped KV-event publisher for the zmqfeed tests, with
Debian's python3-zmq and python3-msgpack, following vLLM's
ZmqEventPublisher protocol: a PUB socket sending [topic, sequence u64 BE,
msgpack KVEventBatch], and a ROUTER replay socket that answers
[identity, "", start u64 BE] with [identity, "", sequence, batch] for every
buffered batch from start on, then [identity, "", -1 as i64 BE, ""].

  engine_pub.py --bind tcp://127.0.0.1:0 --replay tcp://127.0.0.1:0 [--buffer N] [--topic T]

An address in brackets (tcp://[::1]:0) is bound with ZMQ_IPV6 set.

It prints "pub=<ep>;<replay ep>" first, then reads one JSON command per
stdin line:
  {"op": "send", "msg": {"batch": B, "skip": false}}  buffer B as the next sequence and
                                             publish it unless skip; print "ok"
  {"op": "warm"}                             publish empty batches, each a new
                                             sequence, every 10 ms until the next command
  {"op": "quit"}
B is msgpack-encoded as given: vLLM's array form [ts, [event, …], dp_rank]
or a map form; events as tagged arrays or maps.
"""
import argparse
import collections
import json
import os
import sys
import time

import msgpack
import zmq

END = (-1).to_bytes(8, "big", signed=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bind", required=True)
    ap.add_argument("--replay")
    ap.add_argument("--buffer", type=int, default=10000)
    ap.add_argument("--topic", default="")
    args = ap.parse_args()
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    if "[" in args.bind:
        pub.setsockopt(zmq.IPV6, 1)  # libzmq binds an IPv6 address only with it
    pub.bind(args.bind)
    eps = [pub.getsockopt_string(zmq.LAST_ENDPOINT)]
    router = None
    if args.replay:
        router = ctx.socket(zmq.ROUTER)
        router.setsockopt(zmq.LINGER, 0)
        if "[" in args.replay:
            router.setsockopt(zmq.IPV6, 1)
        router.bind(args.replay)
        eps.append(router.getsockopt_string(zmq.LAST_ENDPOINT))
    print("pub=" + ";".join(eps), flush=True)
    buffered = collections.deque(maxlen=args.buffer)
    topic = args.topic.encode()
    seq = 0

    def publish(payload, skip=False):
        nonlocal seq
        buffered.append((seq, payload))
        if not skip:
            pub.send_multipart([topic, seq.to_bytes(8, "big"), payload])
        seq += 1

    poller = zmq.Poller()
    poller.register(sys.stdin.fileno(), zmq.POLLIN)
    if router is not None:
        poller.register(router, zmq.POLLIN)
    warm = False
    while True:
        events = dict(poller.poll(10 if warm else 1000))
        if router is not None and router in events:
            ident, _, start = router.recv_multipart()
            first = int.from_bytes(start, "big")
            for s, payload in list(buffered):
                if s >= first:
                    router.send_multipart([ident, b"", s.to_bytes(8, "big"), payload])
            router.send_multipart([ident, b"", END, b""])
        if sys.stdin.fileno() not in events:
            if warm:
                publish(msgpack.packb([time.time(), [], 0]))
            continue
        line = sys.stdin.readline()
        if not line:
            break
        cmd = json.loads(line)
        warm = False
        if cmd["op"] == "quit":
            break
        if cmd["op"] == "warm":
            warm = True
        elif cmd["op"] == "send":
            m = cmd["msg"]
            publish(msgpack.packb(m["batch"], use_bin_type=True), m.get("skip", False))
            print("ok", flush=True)


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)
