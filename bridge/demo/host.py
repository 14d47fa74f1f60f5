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
the failing call named on stderr. Stdlib only.
"""

import argparse
import ctypes
import json
import os
import sys

OK, EUNAVAILABLE = 0, -15
SKIP_EXIT = 3
POLICIES = [("ttft", 1), ("prefix-then-load", 2), ("load-only", 3), ("credit", 4)]

u64, u32, size_t = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_size_t
P64, PSZ = ctypes.POINTER(u64), ctypes.POINTER(size_t)


class Overlap(ctypes.Structure):
    _fields_ = [("id", u64), ("rank", u32), ("blocks", u32)]


class Candidate(ctypes.Structure):
    _fields_ = [("id", u64), ("rank", u32), ("flags", u32), ("active_prefill_tokens", u64),
                ("active_decode_blocks", u64), ("capacity_blocks", u64), ("rtt_ms", ctypes.c_double)]


class ScoreRequest(ctypes.Structure):
    _fields_ = [("struct_size", u32), ("policy", u32), ("local_hashes", P64), ("n_hashes", size_t),
                ("isl_tokens", u64), ("candidates", ctypes.POINTER(Candidate)), ("n_candidates", size_t),
                ("temperature", ctypes.c_double), ("random_seed", u64)]


class ScoreResult(ctypes.Structure):
    _fields_ = [("struct_size", u32), ("chosen", ctypes.c_int32), ("id", u64), ("rank", u32), ("eligible", u32),
                ("cached_blocks", u64), ("cached_tokens", u64), ("cost", ctypes.c_double),
                ("rtt_ms", ctypes.c_double), ("queue_ms", ctypes.c_double), ("prefill_ms", ctypes.c_double)]


class Counters(ctypes.Structure):
    # The 96-byte layout of the first header: the library fills at most
    # struct_size bytes, so this works with later, longer layouts too.
    _fields_ = [("struct_size", u32), ("mode", u32)] + [(n, u64) for n in (
        "blocks", "members", "lanes_ready", "memory_bytes", "capacity_omissions", "events_applied",
        "events_rejected", "probes", "frames_applied", "frames_rejected", "replica_generation")]


class Skip(Exception):
    """The library lacks a feature the stage needs."""


class Failed(Exception):
    """A call failed."""


def bind(path):
    lib = ctypes.CDLL(path)
    sigs = {
        "goindex_abi_version": (u32, []),
        "goindex_open": (ctypes.c_int, [ctypes.c_char_p, size_t, P64]),
        "goindex_close": (ctypes.c_int, [u64]),
        "goindex_attach_replica": (ctypes.c_int, [u64, ctypes.c_char_p, size_t]),
        "goindex_probe": (ctypes.c_int, [u64, P64, size_t, ctypes.POINTER(Overlap), size_t, PSZ]),
        "goindex_score": (ctypes.c_int, [u64, ctypes.POINTER(ScoreRequest), ctypes.POINTER(ScoreResult)]),
        "goindex_stats": (ctypes.c_int, [u64, ctypes.POINTER(Counters)]),
        "goindex_strerror": (ctypes.c_char_p, [ctypes.c_int]),
        "goindex_last_error": (ctypes.c_int, [u64, ctypes.c_char_p, size_t, PSZ]),
    }
    for name, (res, args) in sigs.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise Skip("%s does not export %s" % (path, name))
        fn.restype, fn.argtypes = res, args
    return lib


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
