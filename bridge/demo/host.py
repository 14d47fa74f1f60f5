"""The demo's library host: loads libgoindex.so with ctypes in its own
process (never inside `goindex`: one Go runtime per process), opens a
global handle, attaches the consumer's shared-memory replica and, for every
prompt the demo wrote, probes every DC's cached depth and scores the DCs
under each policy from the replica's own load reports and RTTs.

Usage: python3 host.py --lib libgoindex.so --replica FILE --prompts FILE --out FILE

--prompts is the demo's JSON (block_size, dcs in lane order, prompts with
local_hashes, and show: how many of the first prompts to print); --out receives one JSON object: the library's depth per lane
and its choice per policy, for every prompt. The demo checks those against
the engines' exact caches and its own read of the replica.

Exit status: 0 done; 3 the library lacks global mode or attach_replica
(GOINDEX_EUNAVAILABLE), so the demo skips the stage; 1 anything else, with
the failing call named on stderr. Stdlib only, and goindex_ctypes.py (the
ctypes declarations of include/goindex.h), which the demo writes beside it.
"""

import argparse
import ctypes
import json
import os
import sys

import goindex_ctypes
from goindex_ctypes import Counters, Overlap, ScoreRequest, ScoreResult, size_t, u64

OK, EUNAVAILABLE = 0, -15
SKIP_EXIT = 3
POLICIES = [("ttft", 1), ("prefix-then-load", 2), ("load-only", 3), ("credit", 4)]


class Skip(Exception):
    """The library lacks a feature the stage needs."""


class Failed(Exception):
    """A call failed."""


# CALLS are the calls the host needs; a library without one is skipped.
CALLS = ["goindex_abi_version", "goindex_open", "goindex_close", "goindex_attach_replica", "goindex_probe",
         "goindex_score", "goindex_stats", "goindex_strerror", "goindex_last_error"]


def bind(path):
    try:
        return goindex_ctypes.bind(path, CALLS)
    except goindex_ctypes.MissingCall as e:
        raise Skip(str(e))


def check(lib, handle, what, rc):
    """Raises Skip for GOINDEX_EUNAVAILABLE and Failed for any other error."""
    if rc == OK:
        return
    name = (lib.goindex_strerror(rc) or b"?").decode()
    buf, need = ctypes.create_string_buffer(512), size_t(0)
    lib.goindex_last_error(handle, buf, len(buf), ctypes.byref(need))
    detail = buf.value.decode(errors="replace")
    msg = "%s: %s (%d)%s" % (what, name, rc, ": " + detail if detail else "")
    if rc == EUNAVAILABLE:
        raise Skip(msg)
    raise Failed(msg)


def run(args):
    with open(args.prompts) as f:
        spec = json.load(f)
    lib = bind(args.lib)
    print("libgoindex.so (ABI version %d) loaded into this host, pid %d: its own Go runtime, apart from goindex's" % (
        lib.goindex_abi_version(), os.getpid()))
    # Only keys every library generation knows: an unknown key is ECONFIG.
    cfg = json.dumps({"mode": "global", "block_size": spec["block_size"]}).encode()
    handle = u64(0)
    check(lib, 0, "goindex_open(mode global)", lib.goindex_open(cfg, len(cfg), ctypes.byref(handle)))
    h = handle.value
    try:
        path = args.replica.encode()
        check(lib, h, "goindex_attach_replica(%s)" % args.replica, lib.goindex_attach_replica(h, path, len(path)))
        st = Counters(struct_size=ctypes.sizeof(Counters))
        check(lib, h, "goindex_stats", lib.goindex_stats(h, ctypes.byref(st)))
        lanes = len(spec["dcs"])
        print("goindex_attach_replica: generation %d, %d lanes, %d ready, %d bytes mapped" % (
            st.replica_generation, st.members, st.lanes_ready, st.memory_bytes))
        if st.lanes_ready != lanes:
            raise Failed("goindex_stats: %d lanes ready, want %d" % (st.lanes_ready, lanes))
        names = {d["lane"]: d["name"] for d in spec["dcs"]}
        out = {"lanes_ready": st.lanes_ready, "generation": st.replica_generation, "prompts": []}
        overlaps = (Overlap * max(lanes, 1))()
        for p in spec["prompts"]:
            hashes = p["local_hashes"]
            arr = (u64 * max(len(hashes), 1))(*hashes)
            n = size_t(0)
            check(lib, h, "goindex_probe(%s)" % p["label"],
                  lib.goindex_probe(h, arr, len(hashes), overlaps, lanes, ctypes.byref(n)))
            depth = [0] * lanes
            for o in overlaps[:n.value]:
                if o.rank >= lanes:
                    raise Failed("goindex_probe(%s): lane %d of %d" % (p["label"], o.rank, lanes))
                depth[o.rank] = o.blocks
            res = {"label": p["label"], "depth": depth, "choice": {}}
            show = len(out["prompts"]) < spec.get("show", 0)
            if show:
                print("%s" % p["label"])
                print("  goindex_probe: %s" % ", ".join("%s %d" % (names[l], depth[l]) for l in range(lanes)))
            for pname, code in POLICIES:
                req = ScoreRequest(struct_size=ctypes.sizeof(ScoreRequest), policy=code, local_hashes=arr,
                                   n_hashes=len(hashes), random_seed=1)
                r = ScoreResult(struct_size=ctypes.sizeof(ScoreResult))
                check(lib, h, "goindex_score(%s, %s)" % (p["label"], pname),
                      lib.goindex_score(h, ctypes.byref(req), ctypes.byref(r)))
                res["choice"][pname] = {"lane": r.chosen, "dc": r.id, "eligible": r.eligible,
                                        "cached_blocks": r.cached_blocks, "cost": r.cost, "rtt_ms": r.rtt_ms,
                                        "queue_ms": r.queue_ms, "prefill_ms": r.prefill_ms}
                if not show:
                    continue
                # Only ttft's cost is in ms; the others rank by their own keys.
                cost = ""
                if pname == "ttft":
                    cost = ", TTFT %.1f = RTT %.1f + queue %.1f + prefill %.1f ms" % (
                        r.cost, r.rtt_ms, r.queue_ms, r.prefill_ms)
                print("  goindex_score %-16s -> %-4s (%d cached blocks%s; %d of %d DCs eligible)" % (
                    pname, names.get(r.chosen, "?"), r.cached_blocks, cost, r.eligible, lanes))
            out["prompts"].append(res)
    finally:
        rc = lib.goindex_close(h)
    check(lib, 0, "goindex_close", rc)
    with open(args.out, "w") as f:
        json.dump(out, f)
    print("handle closed; %d prompts probed and scored" % len(out["prompts"]))


def main():
    ap = argparse.ArgumentParser(description="goindex demo: probe and score from the replica through libgoindex.so")
    ap.add_argument("--lib", required=True)
    ap.add_argument("--replica", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    try:
        run(args)
    except Skip as e:
        print("library lacks what this stage needs: %s" % e)
        sys.exit(SKIP_EXIT)
    except (Failed, OSError) as e:
        print("host: %s" % e, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
