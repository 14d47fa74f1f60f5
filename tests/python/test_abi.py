"""The Python ctypes host suite of libgoindex.so (run by tests/python/run.sh).

Steps, each named on failure:
  - layout: the ctypes structs have the sizes include/goindex.h documents;
  - scenarios: the dynamo-compat §3.5 rows and regressions, as in tests/c;
  - bad arguments: every failure path of every call;
  - differential: random workloads against a pure-Python port of the §3.6
    reference model (held / reachable per member); for the exact index every
    probe depth and score must equal the model's reach_len;
  - plugin: Dynamo's worker-selector plugin through its descriptor, inputs
    laid out at dynamo-compat §5a's offsets;
  - global: the frames and replica scripts of tests/c/fixture (relay frames
    through goindex_apply_frame, a replica file through
    goindex_attach_replica and its next generation), line by line as
    tests/c/global_test.c runs them;
  - the end: every handle the suite opened is closed.

Constants come from the header itself; its structs and call signatures
from bridge/demo/goindex_ctypes.py, which the demo's library host uses too
(the layout step checks them for both). External hashes are the opaque
SplitMix64 prefix fold of tests/c/chain.h. Stdlib only.

Environment: GOINDEX_BUILD (directory holding libgoindex.so, required),
GOINDEX_FIXTURE (the tests/c/fixture command; run.sh builds it),
GOINDEX_SEED (first differential seed, default 1), GOINDEX_SEEDS (seed
count, default 6), GOINDEX_STEPS (steps per seed, default 300).
"""

import ctypes
import math
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The header's structs and signatures, shared with the demo's host.
sys.path.insert(0, os.path.join(HERE, "..", "..", "bridge", "demo"))
import goindex_ctypes  # noqa: E402
from goindex_ctypes import Candidate, Counters, Overlap, ScoreRequest, ScoreResult, size_t, u32, u64  # noqa: E402

HEADER = os.path.join(HERE, "..", "..", "include", "goindex.h")
M64 = (1 << 64) - 1


def header_constants(path):
    """Returns every integer #define GOINDEX_* of the header."""
    consts = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"#define (GOINDEX_\w+) (\(?-?[0-9][0-9u <()]*\)?)", line)
            if m:
                consts[m.group(1)] = int(eval(m.group(2).replace("u", ""), {"__builtins__": {}}))
    return consts


K = header_constants(HEADER)
OK, EINVAL, EHANDLE, ECONFIG = K["GOINDEX_OK"], K["GOINDEX_EINVAL"], K["GOINDEX_EHANDLE"], K["GOINDEX_ECONFIG"]
ETOOBIG, EBUFFER, EPARENT, ESEQUENCE = K["GOINDEX_ETOOBIG"], K["GOINDEX_EBUFFER"], K["GOINDEX_EPARENT"], K["GOINDEX_ESEQUENCE"]
ENOTFOUND, ENOCANDIDATE, EMODE = K["GOINDEX_ENOTFOUND"], K["GOINDEX_ENOCANDIDATE"], K["GOINDEX_EMODE"]
EFRAME, EREPLICA = K["GOINDEX_EFRAME"], K["GOINDEX_EREPLICA"]
MAX_BLOCKS, MAX_TOKENS, MAX_NAME = K["GOINDEX_MAX_BLOCKS"], K["GOINDEX_MAX_TOKENS"], K["GOINDEX_MAX_NAME_BYTES"]


def load(build):
    return goindex_ctypes.bind(os.path.join(build, "libgoindex.so"))


# ---- identities (tests/c/chain.h) ----

def mix64(z):
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & M64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


CHAIN_ROOT = 0xD1B54A32D192ED03


def chain(locals_):
    out, prev = [], CHAIN_ROOT
    for v in locals_:
        prev = mix64(prev ^ mix64(v))
        out.append(prev)
    return out


def arr64(vals):
    return (u64 * max(len(vals), 1))(*vals)


class Suite:
    """Checks that name their step; counts failures and keeps going."""

    def __init__(self, lib):
        self.lib, self.step, self.failures, self.opened = lib, "setup", 0, []

    def check(self, cond, msg):
        if not cond:
            self.failures += 1
            print(f"FAIL [{self.step}] {msg}", file=sys.stderr)
        return cond

    def name(self, rc):
        return self.lib.goindex_strerror(rc).decode()

    def rc(self, got, want, what):
        return self.check(got == want, f"{what} = {got} ({self.name(got)}), want {want} ({self.name(want)})")

    def last_error(self, h):
        buf = ctypes.create_string_buffer(1024)
        self.rc(self.lib.goindex_last_error(h, buf, len(buf), None), OK, f"goindex_last_error({h})")
        return buf.value.decode()

    def expect_error(self, h, fragment):
        msg = self.last_error(h)
        self.check(fragment in msg, f"last_error({h}) = {msg!r}, want it to mention {fragment!r}")

    def open(self, cfg="{}"):
        h = u64(0)
        b = cfg.encode()
        rc = self.lib.goindex_open(b, len(b), ctypes.byref(h))
        if rc != OK:
            raise SystemExit(f"FAIL [{self.step}] goindex_open({cfg}) = {rc}: {self.last_error(0)}")
        self.check(all(o < h.value for o in self.opened), f"goindex_open returned {h.value}, not above every earlier handle")
        self.opened.append(h.value)
        return h.value

    def close(self, h):
        self.rc(self.lib.goindex_close(h), OK, f"goindex_close({h})")

    # events in the §3.5 helper convention, on member (w, r)
    def store(self, h, w, r, prefix, blocks, event_id=0):
        ext = chain(list(prefix) + list(blocks))
        parent = ctypes.byref(u64(ext[len(prefix) - 1])) if prefix else None
        return self.lib.goindex_insert(h, w, r, event_id, parent, arr64(ext[len(prefix):]), arr64(blocks), len(blocks))

    def remove_ext(self, h, w, r, exts):
        return self.lib.goindex_remove(h, w, r, 0, arr64(exts), len(exts))

    def probe(self, h, q, cap=64):
        out, n = (Overlap * cap)(), size_t(0)
        rc = self.lib.goindex_probe(h, arr64(q), len(q), out, cap, ctypes.byref(n))
        self.rc(rc, OK, f"goindex_probe({len(q)} hashes)")
        return [(o.id, o.rank, o.blocks) for o in out[:n.value]]

    def expect(self, h, q, want):
        got = " ".join(f"{i}/{r}={d}" for i, r, d in self.probe(h, q))
        self.check(got == want, f"goindex_probe({q[:8]}{'…' if len(q) > 8 else ''}) = {got!r}, want {want!r}")

    def stats(self, h):
        c = Counters(struct_size=ctypes.sizeof(Counters))
        self.rc(self.lib.goindex_stats(h, ctypes.byref(c)), OK, f"goindex_stats({h})")
        return c


# ---- scenarios: ops tables in the §3.5 convention ----
# ("s", w, r, prefix, blocks[, rc]) store; ("x", w, r, vals, positions[, rc]) remove chain positions;
# ("c", w, r) cleared; ("W", w) remove_worker; ("R", w, r) remove_rank; ("q", query, "w/r=d ...") probe.

R = lambda a, b: list(range(a, b + 1))  # noqa: E731

SCENARIOS = [
    ("store, query, miss, duplicate", "{}", [
        ("q", [1, 2, 3], ""), ("s", 0, 0, [], [1, 2, 3]), ("q", [1, 2, 3], "0/0=3"), ("q", [1, 2, 999], "0/0=2"),
        ("s", 0, 0, [], [1, 2, 3]), ("q", [1, 2, 3], "0/0=3")]),
    ("continue below a parent, remove tail, remove all", "{}", [
        ("s", 0, 0, [], [1, 2, 3]), ("s", 0, 0, [1, 2, 3], [4, 5]), ("q", R(1, 5), "0/0=5"), ("q", [1, 2, 3], "0/0=3"),
        ("x", 0, 0, R(1, 5), [3, 4]), ("q", R(1, 5), "0/0=3"), ("x", 0, 0, [1, 2, 3], [0, 1, 2]), ("q", [1, 2, 3], "")]),
    ("mid-chain removal", "{}", [
        ("s", 0, 0, [], R(1, 5)), ("x", 0, 0, R(1, 5), [2]), ("q", R(1, 5), "0/0=2"), ("q", [1, 2], "0/0=2"),
        ("s", 0, 0, [1, 2], [3]), ("q", R(1, 5), "0/0=3"), ("s", 0, 0, [1, 2, 3], [4, 5]), ("q", R(1, 5), "0/0=5")]),
    ("two workers diverge; unheld parent rejected", "{}", [
        ("s", 1, 0, [], [1, 2, 3]), ("s", 2, 0, [], [1, 2, 3]), ("s", 1, 0, [1, 2, 3], [4, 5, 6]),
        ("q", R(1, 6), "1/0=6 2/0=3"), ("s", 2, 0, [1, 2, 3], [7, 8]), ("q", [1, 2, 3, 7, 8], "1/0=3 2/0=5"),
        ("q", R(1, 6), "1/0=6 2/0=3"), ("s", 2, 0, R(1, 6), [9, 10], EPARENT), ("q", R(1, 6) + [9, 10], "1/0=6 2/0=3")]),
    ("a worker catches up", "{}", [
        ("s", 1, 0, [], R(1, 6)), ("s", 2, 0, [], [1, 2, 3]), ("s", 2, 0, [1, 2, 3], [4, 5, 6]),
        ("s", 2, 0, R(1, 6), [7, 8, 9]), ("q", R(1, 9), "1/0=6 2/0=9")]),
    ("siblings", "{}", [("s", 0, 0, [], [1, 2]), ("s", 1, 0, [], [1, 3]), ("q", [1], "0/0=1 1/0=1"), ("q", [1, 2], "0/0=2 1/0=1")]),
    ("remove_worker", "{}", [("s", 0, 0, [], [1, 2, 3]), ("s", 1, 0, [], [1, 2, 3]), ("W", 0), ("q", [1, 2, 3], "1/0=3")]),
    ("store then remove", "{}", [("s", 0, 0, [], [1, 2, 3]), ("x", 0, 0, [1, 2, 3], [0, 1, 2]), ("q", [1, 2, 3], "")]),
    ("cleared, then re-store", "{}", [
        ("s", 0, 0, [], [1, 2, 3]), ("s", 1, 0, [], [1, 2, 3]), ("c", 0, 0), ("q", [1, 2, 3], "1/0=3"),
        ("s", 0, 0, [], [1, 2, 3]), ("q", [1, 2, 3], "0/0=3 1/0=3")]),
    ("three ranks", "{}", [("s", 0, 2, [], [1, 2, 3]), ("s", 0, 0, [], [1, 2, 3]), ("s", 0, 1, [], [1, 2, 3]),
                           ("q", [1, 2, 3], "0/0=3 0/1=3 0/2=3")]),
    ("remove_rank", "{}", [("s", 7, 0, [], [1, 2, 3]), ("s", 7, 1, [], [1, 2, 3]), ("R", 7, 0), ("q", [1, 2, 3], "7/1=3")]),
    ("cleared with dp_rank (scope rank)", '{"clear_scope": "rank"}', [
        ("s", 0, 0, [], [1, 2, 3]), ("s", 0, 1, [], [1, 2, 3]), ("c", 0, 0), ("q", [1, 2, 3], "0/1=3")]),
    ("cleared with dp_rank (scope worker)", '{"clear_scope": "worker"}', [
        ("s", 0, 0, [], [1, 2, 3]), ("s", 0, 1, [], [1, 2, 3]), ("c", 0, 0), ("q", [1, 2, 3], "")]),
    ("no effect", "{}", [
        ("s", 0, 0, [], [1, 2, 3]), ("W", 999), ("q", [1, 2, 3], "0/0=3"), ("x", 0, 0, [999, 998], [0, 1], ENOTFOUND),
        ("q", [1, 2, 3], "0/0=3"), ("q", [], ""), ("q", [999, 998], "")]),
    ("disjoint chains", "{}", [
        ("s", 0, 0, [], [1, 2, 3]), ("s", 0, 0, [], [100, 101, 102]), ("q", [1, 2, 3], "0/0=3"),
        ("q", [100, 101, 102], "0/0=3"), ("q", [1, 100], "0/0=1")]),
    ("[1..100] minus positions 79..99", "{}", [("s", 0, 0, [], R(1, 100)), ("x", 0, 0, R(1, 100), R(79, 99)), ("q", R(1, 100), "0/0=79")]),
    ("[1..128] with one position replaced", "{}", [("s", 0, 0, [], R(1, 128))] + [
        ("q", R(1, 128)[:p] + [10 ** 6] + R(1, 128)[p + 1:], f"0/0={p}") for p in (31, 32, 33, 63, 64, 65, 95, 96, 97)]),
    ("20 chained 10-block events", "{}", [("s", 0, 0, R(1, 10 * e), R(10 * e + 1, 10 * e + 10)) for e in range(20)] + [
        ("q", R(1, 200), "0/0=200"), ("q", R(1, 75), "0/0=75")]),
    ("shared prefix then diverging", "{}", [
        ("s", 0, 0, [], R(1, 30)), ("s", 1, 0, [], R(1, 30)), ("s", 0, 0, R(1, 30), R(31, 60)),
        ("s", 1, 0, R(1, 30), R(131, 160)), ("q", R(1, 30), "0/0=30 1/0=30"), ("q", R(1, 60), "0/0=60 1/0=30")]),
    ("regression shrunk-5", "{}", [
        ("s", 0, 0, [], [1, 2, 3]), ("s", 0, 0, [1], [4]), ("x", 0, 0, [1], [0]), ("s", 0, 0, [], [1, 2]),
        ("x", 0, 0, [1, 2, 3], [2, 1]), ("q", [1, 2], "0/0=1")]),
]


def run_ops(s, h, ops):
    for op in ops:
        kind, args = op[0], op[1:]
        if kind == "s":
            w, r, prefix, blocks = args[:4]
            s.rc(s.store(h, w, r, prefix, blocks), args[4] if len(args) > 4 else OK, f"store({w}/{r}, {prefix[-1:]}→{blocks[:4]})")
        elif kind == "x":
            w, r, vals, pos = args[:4]
            ext = chain(vals)
            s.rc(s.remove_ext(h, w, r, [ext[p] for p in pos]), args[4] if len(args) > 4 else OK, f"remove({w}/{r}, positions {pos[:4]})")
        elif kind == "c":
            s.rc(s.lib.goindex_clear(h, args[0], args[1], 0), OK, f"clear({args})")
        elif kind == "W":
            s.rc(s.lib.goindex_remove_worker(h, args[0]), OK, f"remove_worker({args[0]})")
        elif kind == "R":
            s.rc(s.lib.goindex_remove_rank(h, args[0], args[1]), OK, f"remove_rank({args})")
        else:
            s.expect(h, args[0], args[1])


def scenarios(s):
    for name, cfg, ops in SCENARIOS:
        s.step = f"scenario: {name}"
        h = s.open(cfg)
        run_ops(s, h, ops)
        s.close(h)

    s.step = "scenario: stats of a store, a duplicate and a removal"
    h = s.open()
    run_ops(s, h, [("s", 0, 0, [], [1, 2, 3]), ("s", 0, 0, [], [1, 2, 3]), ("s", 0, 0, [1, 2, 3], [4, 5]),
                   ("x", 0, 0, R(1, 5), [3, 4]), ("q", R(1, 5), "0/0=3")])
    c = s.stats(h)
    s.check((c.mode, c.blocks, c.members, c.events_applied, c.events_rejected, c.probes) == (1, 3, 1, 4, 0, 1),
            f"stats = mode {c.mode} blocks {c.blocks} members {c.members} applied {c.events_applied} "
            f"rejected {c.events_rejected} probes {c.probes}, want 1 3 1 4 0 1")
    s.close(h)

    s.step = "hash vectors V4, V15, V17, V19 and insert_tokens"
    h = s.open('{"block_size": 4}')
    toks = (u32 * 8)(*range(8))
    out, n = (u64 * 4)(), size_t(0)
    for lora, ns, want in [(b"", b"", [9143094415614847814, 12124091508212882195]), (b"adapter-a", b"", [6665157333201000639]),
                           (b"", b"tenant-a", [17009624042690211646]), (b"adapter-a", b"tenant-a", [8269515957840517240])]:
        k = len(want) * 4
        s.rc(s.lib.goindex_hash_tokens(h, toks, k, lora, len(lora), ns, len(ns), out, 4, ctypes.byref(n)), OK, f"hash_tokens({lora}, {ns})")
        s.check(list(out[:n.value]) == want, f"hash_tokens(0..{k - 1}, lora {lora}, ns {ns}) = {list(out[:n.value])}, want {want}")
        ext = chain(want)
        s.rc(s.lib.goindex_insert_tokens(h, len(lora) + len(ns), 0, 0, None, arr64(ext), len(want), toks, k, lora, len(lora), ns, len(ns)),
             OK, "insert_tokens")
        s.expect(h, want, f"{len(lora) + len(ns)}/0={len(want)}")
    s.close(h)


# ---- bad arguments ----

def bad_arguments(s):
    L = s.lib
    n, h0 = size_t(0), u64(0)
    s.step = "bad arguments: goindex_open"
    s.rc(L.goindex_open(b"{}", 2, None), EINVAL, "goindex_open(handle_out NULL)")
    s.rc(L.goindex_open(None, 3, ctypes.byref(h0)), EINVAL, "goindex_open(NULL config, 3)")
    s.rc(L.goindex_open(b"{}", K["GOINDEX_MAX_CONFIG_BYTES"] + 1, ctypes.byref(h0)), ETOOBIG, "goindex_open(oversize)")
    for cfg, frag in [("{", "bad config"), ('{"mdoe": 1}', "mdoe"), ('{"mode": "x"}', "mode"), ('{"lanes": 99}', "lanes 99"),
                      ('{"block_size": -1}', "block_size"), ('{"clear_scope": "all"}', "clear_scope"), ('{"max_kicks": 0}', "max_kicks"),
                      ('{"policy": "fastest"}', "policy"), ('{"seed": "7"}', "seed"), ('{"expected_blocks_per_lane": 0}', "expected_blocks"),
                      ('{"prefill_tokens_per_ms": 0}', "prefill"), ('{} 1', "after the config")]:
        b = cfg.encode()
        s.rc(L.goindex_open(b, len(b), ctypes.byref(h0)), ECONFIG, f"goindex_open({cfg})")
        s.expect_error(0, frag)
    for cfg, frag in [('{"mode": "global", "dcs": [4, 4]}', "twice"), ('{"mode": "global", "buckets": 3}', "buckets"),
                      ('{"max_staleness_ms": 0}', "max_staleness_ms")]:
        b = cfg.encode()
        s.rc(L.goindex_open(b, len(b), ctypes.byref(h0)), ECONFIG, f"goindex_open({cfg})")
        s.expect_error(0, frag)

    s.step = "bad arguments: events"
    h = s.open('{"block_size": 2}')
    one, toks = arr64([1]), (u32 * 4)(1, 2, 3, 4)
    cases = [
        ("insert NULL external", L.goindex_insert(h, 0, 0, 0, None, None, one, 1), EINVAL),
        ("insert NULL local", L.goindex_insert(h, 0, 0, 0, None, one, None, 1), EINVAL),
        ("insert oversize", L.goindex_insert(h, 0, 0, 0, None, one, one, MAX_BLOCKS + 1), ETOOBIG),
        ("insert unheld parent", L.goindex_insert(h, 0, 0, 0, ctypes.byref(u64(5)), one, one, 1), EPARENT),
        ("insert_tokens NULL tokens", L.goindex_insert_tokens(h, 0, 0, 0, None, one, 1, None, 2, None, 0, None, 0), EINVAL),
        ("insert_tokens short", L.goindex_insert_tokens(h, 0, 0, 0, None, one, 1, toks, 1, None, 0, None, 0), EINVAL),
        ("insert_tokens oversize tokens", L.goindex_insert_tokens(h, 0, 0, 0, None, one, 1, toks, MAX_TOKENS + 1, None, 0, None, 0), ETOOBIG),
        ("insert_tokens NULL lora", L.goindex_insert_tokens(h, 0, 0, 0, None, one, 1, toks, 2, None, 1, None, 0), EINVAL),
        ("insert_tokens long lora", L.goindex_insert_tokens(h, 0, 0, 0, None, one, 1, toks, 2, b"x", MAX_NAME + 1, None, 0), ETOOBIG),
        ("insert_tokens NULL namespace", L.goindex_insert_tokens(h, 0, 0, 0, None, one, 1, toks, 2, None, 0, None, 1), EINVAL),
        ("insert_tokens long namespace", L.goindex_insert_tokens(h, 0, 0, 0, None, one, 1, toks, 2, None, 0, b"x", MAX_NAME + 1), ETOOBIG),
        ("insert_tokens NULL external", L.goindex_insert_tokens(h, 0, 0, 0, None, None, 1, toks, 2, None, 0, None, 0), EINVAL),
        ("remove NULL", L.goindex_remove(h, 0, 0, 0, None, 1), EINVAL),
        ("remove oversize", L.goindex_remove(h, 0, 0, 0, one, MAX_BLOCKS + 1), ETOOBIG),
        ("remove unknown", L.goindex_remove(h, 0, 0, 0, one, 1), ENOTFOUND),
    ]
    for what, got, want in cases:
        s.rc(got, want, what)
    s.expect_error(h, "goindex_remove: ")

    s.step = "bad arguments: hash_tokens, probe, probe_batch"
    out = (u64 * 1)()
    ov = (Overlap * 1)()
    run_ops(s, h, [("s", 0, 0, [], [1]), ("s", 1, 0, [], [1])])
    lens, counts = (size_t * 2)(1, 1), (size_t * 2)()
    cases = [
        ("hash_tokens NULL tokens", L.goindex_hash_tokens(h, None, 4, None, 0, None, 0, out, 1, ctypes.byref(n)), EINVAL),
        ("hash_tokens oversize", L.goindex_hash_tokens(h, toks, MAX_TOKENS + 1, None, 0, None, 0, out, 1, ctypes.byref(n)), ETOOBIG),
        ("hash_tokens NULL lora", L.goindex_hash_tokens(h, toks, 4, None, 2, None, 0, out, 1, ctypes.byref(n)), EINVAL),
        ("hash_tokens long namespace", L.goindex_hash_tokens(h, toks, 4, None, 0, b"x", MAX_NAME + 1, out, 1, ctypes.byref(n)), ETOOBIG),
        ("hash_tokens NULL out", L.goindex_hash_tokens(h, toks, 4, None, 0, None, 0, None, 1, ctypes.byref(n)), EINVAL),
        ("hash_tokens NULL written", L.goindex_hash_tokens(h, toks, 4, None, 0, None, 0, out, 1, None), EINVAL),
        ("hash_tokens small", L.goindex_hash_tokens(h, toks, 4, None, 0, None, 0, out, 1, ctypes.byref(n)), EBUFFER),
    ]
    for what, got, want in cases:
        s.rc(got, want, what)
    s.check(n.value == 2, f"hash_tokens into 1 slot: written {n.value}, want 2 needed")
    cases = [
        ("probe NULL hashes", L.goindex_probe(h, None, 1, ov, 1, ctypes.byref(n)), EINVAL),
        ("probe oversize", L.goindex_probe(h, one, MAX_BLOCKS + 1, ov, 1, ctypes.byref(n)), ETOOBIG),
        ("probe NULL out", L.goindex_probe(h, one, 1, None, 1, ctypes.byref(n)), EINVAL),
        ("probe NULL written", L.goindex_probe(h, one, 1, ov, 1, None), EINVAL),
        ("probe small", L.goindex_probe(h, one, 1, ov, 1, ctypes.byref(n)), EBUFFER),
    ]
    for what, got, want in cases:
        s.rc(got, want, what)
    s.check(n.value == 2, f"probe into 1 slot: written {n.value}, want 2 needed")
    s.expect_error(h, "needs 2 entries, capacity 1")
    two = arr64([1, 1])
    huge = (size_t * 17)(*([MAX_BLOCKS] * 17))
    cases = [
        ("batch NULL hashes", L.goindex_probe_batch(h, None, lens, 2, ov, 1, counts, ctypes.byref(n)), EINVAL),
        ("batch NULL lengths", L.goindex_probe_batch(h, two, None, 2, ov, 1, counts, ctypes.byref(n)), EINVAL),
        ("batch NULL counts", L.goindex_probe_batch(h, two, lens, 2, ov, 1, None, ctypes.byref(n)), EINVAL),
        ("batch NULL out", L.goindex_probe_batch(h, two, lens, 2, None, 1, counts, ctypes.byref(n)), EINVAL),
        ("batch NULL written", L.goindex_probe_batch(h, two, lens, 2, ov, 1, counts, None), EINVAL),
        ("batch too many queries", L.goindex_probe_batch(h, two, lens, K["GOINDEX_MAX_BATCH"] + 1, ov, 1, counts, ctypes.byref(n)), ETOOBIG),
        ("batch total too big", L.goindex_probe_batch(h, two, huge, 17, ov, 1, counts, ctypes.byref(n)), ETOOBIG),
        ("batch small", L.goindex_probe_batch(h, two, lens, 2, ov, 1, counts, ctypes.byref(n)), EBUFFER),
    ]
    for what, got, want in cases:
        s.rc(got, want, what)
    s.check(n.value == 4, f"probe_batch into 1 slot: written {n.value}, want 4 needed")

    s.step = "bad arguments: score"
    cand = Candidate(id=0, flags=K["GOINDEX_CAND_LOAD"])
    res = ScoreResult(struct_size=ctypes.sizeof(ScoreResult))

    def req(**kw):
        base = dict(struct_size=ctypes.sizeof(ScoreRequest), policy=K["GOINDEX_POLICY_LOAD_ONLY"], local_hashes=one,
                    n_hashes=1, candidates=ctypes.pointer(cand), n_candidates=1)
        base.update(kw)
        return ScoreRequest(**base)

    s.rc(L.goindex_score(h, ctypes.byref(req()), ctypes.byref(res)), OK, "score(valid)")
    short = ScoreResult(struct_size=8)
    bad_cand = Candidate(flags=16)
    nan_rtt = Candidate(flags=K["GOINDEX_CAND_RTT"] | K["GOINDEX_CAND_LOAD"], rtt_ms=math.nan)
    cases = [
        ("NULL request", L.goindex_score(h, None, ctypes.byref(res)), EINVAL),
        ("NULL result", L.goindex_score(h, ctypes.byref(req()), None), EINVAL),
        ("short result", L.goindex_score(h, ctypes.byref(req()), ctypes.byref(short)), EINVAL),
        ("short request", L.goindex_score(h, ctypes.byref(req(struct_size=4)), ctypes.byref(res)), EINVAL),
        ("policy 9", L.goindex_score(h, ctypes.byref(req(policy=9)), ctypes.byref(res)), EINVAL),
        ("temperature -1", L.goindex_score(h, ctypes.byref(req(temperature=-1.0)), ctypes.byref(res)), EINVAL),
        ("temperature inf", L.goindex_score(h, ctypes.byref(req(temperature=math.inf)), ctypes.byref(res)), EINVAL),
        ("unknown flags", L.goindex_score(h, ctypes.byref(req(candidates=ctypes.pointer(bad_cand))), ctypes.byref(res)), EINVAL),
        ("NaN rtt", L.goindex_score(h, ctypes.byref(req(candidates=ctypes.pointer(nan_rtt))), ctypes.byref(res)), EINVAL),
        ("NULL hashes", L.goindex_score(h, ctypes.byref(req(local_hashes=None)), ctypes.byref(res)), EINVAL),
        ("oversize hashes", L.goindex_score(h, ctypes.byref(req(n_hashes=MAX_BLOCKS + 1)), ctypes.byref(res)), ETOOBIG),
        ("NULL candidates", L.goindex_score(h, ctypes.byref(req(candidates=None)), ctypes.byref(res)), EINVAL),
        ("oversize candidates", L.goindex_score(h, ctypes.byref(req(n_candidates=K["GOINDEX_MAX_CANDIDATES"] + 1)), ctypes.byref(res)), ETOOBIG),
        ("oversize isl", L.goindex_score(h, ctypes.byref(req(isl_tokens=MAX_TOKENS + 1)), ctypes.byref(res)), ETOOBIG),
    ]
    for what, got, want in cases:
        s.rc(got, want, f"score({what})")
    # No candidate eligible: fail open (the first, degraded), except for a
    # host with the 72-byte result of earlier headers.
    if s.rc(L.goindex_score(h, ctypes.byref(req(policy=K["GOINDEX_POLICY_TTFT"])), ctypes.byref(res)), OK, "score(no eligible)"):
        s.check((res.flags, res.degraded, res.chosen, res.eligible) == (K["GOINDEX_SCORE_DEGRADED"], K["GOINDEX_DEGRADED_SIGNALS_STALE"], 0, 0),
                f"score(no eligible): flags {res.flags} degraded {res.degraded} chosen {res.chosen} eligible {res.eligible}, want degraded signals-stale, 0, 0")
    v1 = ScoreResult(struct_size=ScoreResult.flags.offset)
    s.rc(L.goindex_score(h, ctypes.byref(req(policy=K["GOINDEX_POLICY_TTFT"])), ctypes.byref(v1)), ENOCANDIDATE, "score(no eligible, 72-byte result)")

    s.step = "bad arguments: apply_frame, attach_replica, stats, last_error, strerror"
    cases = [
        ("apply_frame NULL", L.goindex_apply_frame(h, None, 3), EINVAL),
        ("apply_frame oversize", L.goindex_apply_frame(h, b"x", K["GOINDEX_MAX_FRAME_BYTES"] + 1), ETOOBIG),
        ("apply_frame on an exact handle", L.goindex_apply_frame(h, b"xyz", 3), EMODE),
        ("set_rtt on an exact handle", L.goindex_set_rtt(h, 1, 1.0), EMODE),
        ("set_rtt NaN", L.goindex_set_rtt(h, 1, float("nan")), EINVAL),
        ("attach_replica NULL", L.goindex_attach_replica(h, None, 3), EINVAL),
        ("attach_replica oversize", L.goindex_attach_replica(h, b"/x", MAX_NAME + 1), ETOOBIG),
        ("attach_replica on an exact handle", L.goindex_attach_replica(h, b"/x", 2), EMODE),
        ("stats NULL", L.goindex_stats(h, None), EINVAL),
        ("stats small", L.goindex_stats(h, ctypes.byref(Counters(struct_size=4))), EINVAL),
        ("last_error NULL buffer", L.goindex_last_error(h, None, 4, None), EINVAL),
    ]
    for what, got, want in cases:
        s.rc(got, want, what)
    L.goindex_stats(h, None)
    full = "goindex_stats: ffi: invalid argument: stats is NULL"
    buf, need = ctypes.create_string_buffer(b"z" * 16, 16), size_t(0)
    s.rc(L.goindex_last_error(h, buf, 8, ctypes.byref(need)), OK, "last_error(8 bytes)")
    s.check(buf.raw[:9] == b"goindex\x00z" and need.value == len(full) + 1,
            f"last_error into 8 bytes = {buf.raw[:9]!r}, needed {need.value}; want b'goindex\\x00z', {len(full) + 1}")
    s.check(s.last_error(h) == full, f"last_error = {s.last_error(h)!r}, want {full!r}")
    names = {L.goindex_strerror(c) for c in range(-15, 1)}
    s.check(len(names) == 16 and b"unknown error" not in names, f"strerror names are not 16 distinct known names: {names}")
    s.check(L.goindex_strerror(-99) == b"unknown error", "strerror(-99) is not 'unknown error'")
    s.close(h)

    s.step = "bad arguments: closed, zero and unknown handles"
    c = Counters(struct_size=ctypes.sizeof(Counters))
    for bad in (0, h, M64):
        cases = [
            ("insert", L.goindex_insert(bad, 0, 0, 0, None, one, one, 1)),
            ("insert_tokens", L.goindex_insert_tokens(bad, 0, 0, 0, None, one, 1, toks, 4, None, 0, None, 0)),
            ("remove", L.goindex_remove(bad, 0, 0, 0, one, 1)), ("clear", L.goindex_clear(bad, 0, 0, 0)),
            ("remove_worker", L.goindex_remove_worker(bad, 0)), ("remove_rank", L.goindex_remove_rank(bad, 0, 0)),
            ("hash_tokens", L.goindex_hash_tokens(bad, toks, 4, None, 0, None, 0, out, 1, ctypes.byref(n))),
            ("probe", L.goindex_probe(bad, one, 1, ov, 1, ctypes.byref(n))),
            ("probe_batch", L.goindex_probe_batch(bad, two, lens, 2, ov, 1, counts, ctypes.byref(n))),
            ("score", L.goindex_score(bad, ctypes.byref(req()), ctypes.byref(res))),
            ("apply_frame", L.goindex_apply_frame(bad, b"x", 1)), ("attach_replica", L.goindex_attach_replica(bad, b"x", 1)),
            ("set_rtt", L.goindex_set_rtt(bad, 1, 1.0)),
            ("stats", L.goindex_stats(bad, ctypes.byref(c))), ("close", L.goindex_close(bad)),
        ]
        if bad:
            cases.append(("last_error", L.goindex_last_error(bad, buf, 16, None)))
        for what, got in cases:
            s.rc(got, EHANDLE, f"{what}(handle {bad})")


# ---- differential against the §3.6 reference model ----

class Model:
    """dynamo-compat §3.6: per member, held (ext → parent ext or None) and
    reachable (prefix-closed)."""

    def __init__(self, clear_worker):
        self.members, self.clear_worker = {}, clear_worker

    def store(self, m, parent, exts):
        held, reach = self.members.setdefault(m, ({}, set()))
        ok = parent is None or parent in reach
        p = parent
        for e in exts:
            held[e] = p
            if ok:
                reach.add(e)
            p = e

    def remove(self, m, exts):
        held, reach = self.members.get(m, ({}, set()))
        cut = False
        for e in exts:
            held.pop(e, None)
            if e in reach:
                reach.discard(e)
                cut = True
        if cut:
            def rooted(e):
                while e is not None:
                    if e not in reach or e not in held:
                        return False
                    e = held[e]
                return True
            for e in [e for e in reach if not rooted(e)]:
                reach.discard(e)

    def clear(self, m):
        for k in list(self.members):
            if k == m or (self.clear_worker and k[0] == m[0]):
                self.members[k] = ({}, set())

    def lens(self, m, ext):
        held, reach = self.members[m]
        h = next((i for i, e in enumerate(ext) if e not in held), len(ext))
        r = next((i for i, e in enumerate(ext) if e not in reach), len(ext))
        return h, r


def differential(s, mode):
    """Exact mode: every probe equals reach_len. ckf mode: the harness bounds,
    reach_len <= depth <= held_len (a ckf removal does not orphan descendants,
    and collisions in lanes sized for 4096 blocks are vanishingly rare)."""
    first = int(os.environ.get("GOINDEX_SEED", "1"))
    seeds = int(os.environ.get("GOINDEX_SEEDS", "6"))
    steps = int(os.environ.get("GOINDEX_STEPS", "300"))
    for seed in range(first, first + seeds):
        clear_worker = seed % 2 == 0
        scope = "worker" if clear_worker else "rank"
        s.step = f"differential {mode} seed {seed} (GOINDEX_SEED={seed} GOINDEX_SEEDS=1, clear_scope {scope})"
        before = s.failures
        rng = random.Random(seed)
        extra = ', "lanes": 8, "expected_blocks_per_lane": 4096' if mode == "ckf" else ""
        h = s.open('{"mode": "%s", "clear_scope": "%s"%s}' % (mode, scope, extra))
        model = Model(clear_worker)
        # A pool of sequences sharing system prefixes and documents (spec §3.7 in miniature).
        systems = [[rng.getrandbits(64) for _ in range(rng.randint(1, 3))] for _ in range(3)]
        docs = [[rng.getrandbits(64) for _ in range(rng.randint(0, 6))] for _ in range(4)]
        pool = [systems[i % 3] + docs[i % 4] + [rng.getrandbits(64) for _ in range(rng.randint(1, 3))] for i in range(12)]
        workers = [10, 11, 12]
        ranks = [(w, r) for w in workers for r in range(1 + seed % 2)]
        for step in range(steps):
            m = rng.choice(ranks)
            op = rng.random()
            if op < 0.6:
                seq = rng.choice(pool)
                ext = chain(seq)
                start = model.lens(m, ext)[1] if m in model.members else 0
                if rng.random() < 0.25:
                    start = rng.randrange(len(seq))  # maybe below an unheld or unreachable parent
                end = rng.randint(start, len(seq)) if start < len(seq) else len(seq)
                if end == start:
                    continue
                parent = ext[start - 1] if start else None
                rc = s.store(h, m[0], m[1], seq[:start], seq[start:end], step)
                held, reach = model.members.get(m, ({}, set()))
                applies = parent is None or parent in reach
                if applies:
                    s.rc(rc, OK, f"step {step}: store({m}, from {start} to {end}) below a reachable parent")
                elif mode == "exact":
                    s.check(rc in (OK, EPARENT), f"step {step}: store below an unreachable parent = {rc}")
                else:
                    s.check(rc in (OK, EPARENT, ESEQUENCE), f"step {step}: ckf store below an unreachable parent = {rc}")
                if rc == OK:
                    model.store(m, parent, ext[start:end])
            elif op < 0.85:
                held = list(model.members.get(m, ({}, set()))[0])
                gone = rng.sample(held, min(len(held), rng.randint(1, 3)))
                unknown = rng.random() < 0.1 or not gone
                if unknown:
                    gone.append(rng.getrandbits(64))
                rng.shuffle(gone)
                rc = s.remove_ext(h, m[0], m[1], gone)
                if mode == "exact":
                    s.rc(rc, ENOTFOUND if unknown else OK, f"step {step}: remove({m}, {len(gone)} hashes)")
                else:
                    s.check(rc in (OK, ENOTFOUND), f"step {step}: ckf remove({m}) = {rc}")
                model.remove(m, gone)
            elif op < 0.94:
                s.rc(s.lib.goindex_clear(h, m[0], m[1], step), OK, f"step {step}: clear({m})")
                model.clear(m)
            elif op < 0.98:
                s.rc(s.lib.goindex_remove_rank(h, m[0], m[1]), OK, f"step {step}: remove_rank({m})")
                model.members.pop(m, None)
            else:
                s.rc(s.lib.goindex_remove_worker(h, m[0]), OK, f"step {step}: remove_worker({m[0]})")
                for k in [k for k in model.members if k[0] == m[0]]:
                    del model.members[k]
            for seq in rng.sample(pool, 4):
                q = seq[:rng.randint(1, len(seq))]
                ext = chain(q)
                want = {k: model.lens(k, ext) for k in model.members}
                got = {(i, r): d for i, r, d in s.probe(h, q)}
                for k in set(got) | set(want):
                    held_len, reach_len = want.get(k, (0, 0))
                    d = got.get(k, 0)
                    if mode == "exact":
                        s.check(d == reach_len, f"step {step}: probe of {len(q)} blocks: member {k} = {d}, want reach_len {reach_len} (held_len {held_len})")
                    else:
                        s.check(reach_len <= d <= held_len, f"step {step}: ckf probe of {len(q)} blocks: member {k} = {d}, want within [{reach_len}, {held_len}]")
                if mode == "exact" and want and s.failures == before:
                    score_check(s, h, q, want, step)
            if s.failures > before:
                break
        s.close(h)


def score_check(s, h, q, want, step):
    """prefix-then-load over equally loaded members must take a deepest one."""
    members = sorted(want)
    cands = (Candidate * len(members))(*[Candidate(id=w, rank=r, flags=K["GOINDEX_CAND_LOAD"]) for w, r in members])
    req = ScoreRequest(struct_size=ctypes.sizeof(ScoreRequest), policy=K["GOINDEX_POLICY_PREFIX_THEN_LOAD"], local_hashes=arr64(q),
                       n_hashes=len(q), candidates=cands, n_candidates=len(members), random_seed=step + 1)
    res = ScoreResult(struct_size=ctypes.sizeof(ScoreResult))
    s.rc(s.lib.goindex_score(h, ctypes.byref(req), ctypes.byref(res)), OK, f"step {step}: score")
    best = max(r for _, r in want.values())
    chosen = members[res.chosen]
    s.check((res.id, res.rank) == chosen and res.cached_blocks == want[chosen][1] == best,
            f"step {step}: score chose {chosen} with cached {res.cached_blocks}, want a member at reach_len {best}")


# ---- Dynamo's worker-selector plugin (dynamo-compat §5a), through ctypes ----

class ByteSlice(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("len", size_t)]


class ErrorBuffer(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("capacity", size_t), ("written", size_t)]


class WsLoad(ctypes.Structure):
    _fields_ = [("active_prefill_tokens", u64), ("active_decode_blocks", u64), ("additional_active_blocks", u64)]


class WsColumns(ctypes.Structure):
    _fields_ = [("struct_size", u32), ("reserved", u32), ("provided_inputs", u64)] + [
        (n, ctypes.c_void_p) for n in ("worker_ids", "dp_ranks", "cached_tokens", "cache_tiers", "loads", "capacities",
                                       "routing", "default_costs", "default_kv_overlaps", "default_decode_loads")]


class WsInput(ctypes.Structure):
    _fields_ = [("struct_size", u32), ("candidate_format", u32), ("flags", u32), ("block_size", u32),
                ("selection_mode", u32), ("reserved", u32), ("isl_tokens", u64), ("expected_output_tokens", u64),
                ("request_id", ByteSlice), ("session_id", ByteSlice), ("candidate_columns", ctypes.POINTER(WsColumns)),
                ("candidate_count", size_t)]


CREATE = ctypes.CFUNCTYPE(ctypes.c_int32, ByteSlice, u32, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ErrorBuffer))
SELECT = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(WsInput), ctypes.POINTER(size_t), ctypes.POINTER(ErrorBuffer))
DESTROY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
REQUIRED = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(u64), ctypes.POINTER(ErrorBuffer))


class Descriptor(ctypes.Structure):
    _fields_ = [("abi_version", u32), ("struct_size", u32), ("create", CREATE), ("select", SELECT), ("destroy", DESTROY),
                ("required_candidate_inputs", REQUIRED)]


def plugin(s):
    """The plugin as a columnar host calls it: offsets, a ttft choice, USE_DEFAULT for anything it cannot use."""
    s.step = "plugin: layouts of §5a"
    for cls, size in [(ByteSlice, 16), (ErrorBuffer, 24), (WsLoad, 24), (WsColumns, 96), (WsInput, 88), (Descriptor, 40)]:
        s.check(ctypes.sizeof(cls) == size, f"sizeof({cls.__name__}) = {ctypes.sizeof(cls)}, the spec says {size}")
    for cls, field, off in [(WsInput, "isl_tokens", 24), (WsInput, "candidate_columns", 72), (WsInput, "candidate_count", 80),
                            (WsColumns, "loads", 48), (WsColumns, "default_decode_loads", 88)]:
        s.check(getattr(cls, field).offset == off, f"{cls.__name__}.{field} at {getattr(cls, field).offset}, the spec says {off}")
    entry = s.lib.dynamo_worker_selector_plugin_v1
    entry.restype, entry.argtypes = ctypes.POINTER(Descriptor), []
    d = entry().contents
    s.step = "plugin: descriptor and create"
    s.check(d.abi_version == 1 and d.struct_size == 40, f"descriptor abi_version {d.abi_version}, struct_size {d.struct_size}")
    buf = ctypes.create_string_buffer(256)
    err = ErrorBuffer(ctypes.cast(buf, ctypes.c_void_p), 256, 0)
    cfg = b'{"prefill_tokens_per_ms": 10}'
    cbuf = ctypes.create_string_buffer(cfg, len(cfg))
    state = ctypes.c_void_p()
    s.rc(d.create(ByteSlice(ctypes.cast(cbuf, ctypes.c_void_p), len(cfg)), 1, ctypes.byref(state), ctypes.byref(err)), 0, "plugin create")
    bad = ctypes.c_void_p(1)
    s.check(d.create(ByteSlice(None, 0), 9, ctypes.byref(bad), ctypes.byref(err)) == 1 and not bad.value, "create(role 9) is not INVALID_INPUT with a NULL state")
    need = u64(0)
    s.check(d.required_candidate_inputs(state, ctypes.byref(need), None) == 0 and need.value == 0x1B, f"required inputs {need.value:#x}, want 0x1b")

    s.step = "plugin: select over columns"
    # 1600 prompt tokens at 10 tokens/ms: 160 ms uncached, 32 ms with 1280 cached, 96 with 640.
    ids, cached = (u64 * 3)(11, 22, 33), (u64 * 3)(0, 1280, 640)
    ranks, loads = (u32 * 3)(0, 0, 0), (WsLoad * 3)()
    caps = (u64 * 6)(*([M64] * 6))
    cols = WsColumns(struct_size=96, provided_inputs=0x1B, worker_ids=ctypes.addressof(ids), dp_ranks=ctypes.addressof(ranks),
                     cached_tokens=ctypes.addressof(cached), loads=ctypes.addressof(loads), capacities=ctypes.addressof(caps))
    inp = WsInput(struct_size=88, candidate_format=1, block_size=16, isl_tokens=1600, candidate_columns=ctypes.pointer(cols), candidate_count=3)
    idx = size_t(99)

    def select():
        idx.value = 99
        return d.select(state, ctypes.byref(inp), ctypes.byref(idx), ctypes.byref(err))

    s.check(select() == 0 and idx.value == 1, f"select chose {idx.value}, want 1 (1280 cached tokens)")
    loads[1].active_prefill_tokens = 2000  # 200 ms of queue on worker 22
    s.check(select() == 0 and idx.value == 2, f"select with worker 22 queued chose {idx.value}, want 2")
    inp.candidate_count = 0
    s.check(select() == 4 and idx.value == 99, "zero candidates is not USE_DEFAULT (4)")
    inp.candidate_count = 3
    cols.provided_inputs = 0x13  # no load column
    s.check(select() == 4, "a missing load column is not USE_DEFAULT (4)")
    cols.provided_inputs = 0x1B
    cols.loads = None  # provided but NULL
    s.check(select() == 4 and b"loads" in buf.raw[:err.written], f"a NULL provided column is not USE_DEFAULT: {buf.raw[:err.written]!r}")
    cols.loads = ctypes.addressof(loads)
    inp.struct_size = 80
    s.check(select() == 4 and err.written <= 256, "input struct_size 80 is not USE_DEFAULT")
    inp.struct_size = 88
    s.check(select() == 0, "select after the malformed calls does not work")
    d.destroy(state)
    s.check(select() == 4, "select on a destroyed state is not USE_DEFAULT")


# ---- global mode: the fixture's scripts (tests/c/fixture/script.go) ----

def script_lines(text, variant):
    """Yields (line number, words) of the lines of variant (0: no variants)."""
    current = 0
    for no, line in enumerate(text.split("\n"), 1):
        w = line.split(" ")
        if not line or w[0] == "config":
            continue
        if w[0] == "variant":
            current = int(w[1])
        elif current == variant:
            yield no, w


def run_script(s, h, text, variant):
    L = s.lib
    for no, w in script_lines(text, variant):
        op = w[0]
        s.step = f"global: script line {no} ({op} {w[1] if len(w) > 1 else ''})"
        if op == "apply":
            frame = bytes.fromhex(w[3])
            s.rc(L.goindex_apply_frame(h, frame, len(frame)), int(w[2]), f"goindex_apply_frame({len(frame)} bytes) [{s.last_error(h)}]")
        elif op == "rtt":
            s.rc(L.goindex_set_rtt(h, int(w[1]), float(w[2])), OK, "goindex_set_rtt")
        elif op == "probe":
            n = int(w[2])
            q = [int(x) for x in w[3:3 + n]]
            k, rest = int(w[3 + n]), w[4 + n:]
            want = " ".join(f"{rest[3 * e]}/{rest[3 * e + 1]}={rest[3 * e + 2]}" for e in range(k))
            s.expect(h, q, want)
        elif op == "score":
            n = int(w[3])
            q = [int(x) for x in w[4:4 + n]]
            want, lane, dc, eligible, degraded = (int(x) for x in w[4 + n:9 + n])
            req = ScoreRequest(struct_size=ctypes.sizeof(ScoreRequest), policy=int(w[2]), local_hashes=arr64(q), n_hashes=n, random_seed=1)
            res = ScoreResult(struct_size=ctypes.sizeof(ScoreResult))
            rc = L.goindex_score(h, ctypes.byref(req), ctypes.byref(res))
            if s.rc(rc, want, "goindex_score over the ready lanes") and rc == OK:
                s.check((res.chosen, res.id, res.rank, res.eligible, res.degraded, res.flags) ==
                        (lane, dc, lane, eligible, degraded, K["GOINDEX_SCORE_DEGRADED"] if degraded else 0),
                        f"goindex_score chose lane {res.chosen} (DC {res.id}) of {res.eligible}, degraded {res.degraded} (flags {res.flags}); "
                        f"want lane {lane} (DC {dc}) of {eligible}, degraded {degraded}")
            if degraded:
                v1 = ScoreResult(struct_size=ScoreResult.flags.offset)
                s.rc(L.goindex_score(h, ctypes.byref(req), ctypes.byref(v1)), ENOCANDIDATE, "goindex_score with a 72-byte result")
        elif op == "stats":
            c = s.stats(h)
            got = (c.lanes_ready, c.frames_applied, c.frames_rejected, c.frames_ignored, c.replica_generation)
            s.check(got == tuple(int(x) for x in w[1:6]) and c.mode == 3,
                    f"goindex_stats (lanes_ready, applied, rejected, ignored, generation) = {got}, mode {c.mode}; want {tuple(w[1:6])}, mode 3")
        else:
            s.check(False, f"unknown script op {op!r}")


def script_config(text):
    return next(line[len("config "):] for line in text.split("\n") if line.startswith("config "))


def global_mode(s, build):
    import subprocess
    import tempfile
    fixture = os.environ.get("GOINDEX_FIXTURE")
    s.step = "global: the fixture"
    if not s.check(bool(fixture) and os.path.exists(fixture), f"GOINDEX_FIXTURE={fixture!r} is not the fixture command (run.sh builds it)"):
        return
    with tempfile.TemporaryDirectory() as tmp:
        frames = os.path.join(tmp, "frames.script")
        subprocess.run([fixture, "frames", frames], check=True)
        text = open(frames).read()
        h = s.open(script_config(text))
        run_script(s, h, text, 0)
        s.step = "global: a 96-byte goindex_counters (before frames_ignored) gets its fields only"
        raw = (ctypes.c_uint8 * 104)(*([0xCD] * 104))
        ctypes.c_uint32.from_buffer(raw, 0).value = 96
        s.rc(s.lib.goindex_stats(h, ctypes.cast(raw, ctypes.POINTER(Counters))), OK, "goindex_stats(struct_size 96)")
        s.check(bytes(raw[96:]) == b"\xcd" * 8 and ctypes.c_uint32.from_buffer(raw, 0).value == 96 and raw[4] == 3,
                f"stats into a 96-byte struct wrote past it or changed struct_size: {bytes(raw[88:])!r}")
        s.close(h)

        replica, rscript = os.path.join(tmp, "replica"), os.path.join(tmp, "replica.script")
        subprocess.run([fixture, "replica", replica, "1", rscript], check=True)
        text = open(rscript).read()
        h = s.open(script_config(text))
        s.step = "global: attach the replica file"
        s.rc(s.lib.goindex_attach_replica(h, replica.encode(), len(replica)), OK, f"goindex_attach_replica({replica}) [{s.last_error(h)}]")
        run_script(s, h, text, 1)
        subprocess.run([fixture, "replica", replica, "2"], check=True)
        run_script(s, h, text, 2)
        s.step = "global: bad replica files and frames on an attached handle"
        with open(os.path.join(tmp, "foreign"), "wb") as f:
            f.write(b"not a replica " * 100)
        for path, want in [(os.path.join(tmp, "foreign"), EREPLICA), (os.path.join(tmp, "missing"), EREPLICA), (tmp, EREPLICA)]:
            s.rc(s.lib.goindex_attach_replica(h, path.encode(), len(path)), want, f"goindex_attach_replica({path})")
        s.rc(s.lib.goindex_apply_frame(h, b"x", 1), EMODE, "goindex_apply_frame on an attached handle")
        s.check(s.stats(h).replica_generation == 2, "the failed attaches changed the mapped generation")
        s.close(h)


def main():
    build = os.environ.get("GOINDEX_BUILD")
    if not build:
        raise SystemExit("tests/python: GOINDEX_BUILD must name the directory holding libgoindex.so")
    s = Suite(load(build))
    s.step = "layout"
    for cls, size in [(Overlap, 16), (Candidate, 48), (ScoreRequest, 64), (ScoreResult, 80), (Counters, 144)]:
        s.check(ctypes.sizeof(cls) == size, f"sizeof({cls.__name__}) = {ctypes.sizeof(cls)}, header says {size}")
    s.check(s.lib.goindex_abi_version() == K["GOINDEX_ABI_VERSION"], "goindex_abi_version() differs from the header")
    scenarios(s)
    bad_arguments(s)
    differential(s, "exact")
    differential(s, "ckf")
    global_mode(s, build)
    plugin(s)
    s.step = "the end: no handle is left open"
    c = Counters(struct_size=ctypes.sizeof(Counters))
    for h in s.opened:
        s.rc(s.lib.goindex_stats(h, ctypes.byref(c)), EHANDLE, f"goindex_stats({h}) after the suite")
    if s.failures:
        raise SystemExit(f"tests/python: {s.failures} checks failed")
    print(f"tests/python: all checks passed ({len(s.opened)} handles opened and closed)")


if __name__ == "__main__":
    main()
