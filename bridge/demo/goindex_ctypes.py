"""ctypes declarations of include/goindex.h: its structs and the signature
of every goindex_* call, written once for both Python hosts of
libgoindex.so, the demo's library host (host.py, beside which the demo
writes this file) and the ABI suite tests/python/test_abi.py, whose layout
step checks these structs against the sizes the header documents.

Structs carrying struct_size may be the header's latest: the library fills
at most struct_size bytes of goindex_counters, and earlier libraries of ABI
version 1 accept a longer one too. Stdlib only.
"""

import ctypes

u64, u32, size_t = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_size_t
P64, P32, PSZ, PCH = ctypes.POINTER(u64), ctypes.POINTER(u32), ctypes.POINTER(size_t), ctypes.c_char_p


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
                ("rtt_ms", ctypes.c_double), ("queue_ms", ctypes.c_double), ("prefill_ms", ctypes.c_double),
                ("flags", u32), ("degraded", u32)]


class Counters(ctypes.Structure):
    _fields_ = [("struct_size", u32), ("mode", u32)] + [(n, u64) for n in (
        "blocks", "members", "lanes_ready", "memory_bytes", "capacity_omissions", "events_applied",
        "events_rejected", "probes", "frames_applied", "frames_rejected", "replica_generation", "frames_ignored",
        "degraded_scores")] + [("replica_state", u32), ("reserved", u32)] + [(n, u64) for n in (
        "lanes_bad", "integrity_failures", "replica_faults")]


# SIGNATURES maps every goindex_* call to its (restype, argtypes).
SIGNATURES = {
    "goindex_abi_version": (u32, []),
    "goindex_open": (ctypes.c_int, [PCH, size_t, P64]),
    "goindex_close": (ctypes.c_int, [u64]),
    "goindex_insert": (ctypes.c_int, [u64, u64, u32, u64, P64, P64, P64, size_t]),
    "goindex_insert_tokens": (ctypes.c_int, [u64, u64, u32, u64, P64, P64, size_t, P32, size_t, PCH, size_t, PCH, size_t]),
    "goindex_remove": (ctypes.c_int, [u64, u64, u32, u64, P64, size_t]),
    "goindex_clear": (ctypes.c_int, [u64, u64, u32, u64]),
    "goindex_remove_worker": (ctypes.c_int, [u64, u64]),
    "goindex_remove_rank": (ctypes.c_int, [u64, u64, u32]),
    "goindex_hash_tokens": (ctypes.c_int, [u64, P32, size_t, PCH, size_t, PCH, size_t, P64, size_t, PSZ]),
    "goindex_probe": (ctypes.c_int, [u64, P64, size_t, ctypes.POINTER(Overlap), size_t, PSZ]),
    "goindex_probe_batch": (ctypes.c_int, [u64, P64, PSZ, size_t, ctypes.POINTER(Overlap), size_t, PSZ, PSZ]),
    "goindex_score": (ctypes.c_int, [u64, ctypes.POINTER(ScoreRequest), ctypes.POINTER(ScoreResult)]),
    "goindex_apply_frame": (ctypes.c_int, [u64, ctypes.c_char_p, size_t]),
    "goindex_attach_replica": (ctypes.c_int, [u64, PCH, size_t]),
    "goindex_set_rtt": (ctypes.c_int, [u64, u64, ctypes.c_double]),
    "goindex_stats": (ctypes.c_int, [u64, ctypes.POINTER(Counters)]),
    "goindex_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "goindex_last_error": (ctypes.c_int, [u64, ctypes.c_char_p, size_t, PSZ]),
}


class MissingCall(Exception):
    """The library does not export a call the host binds."""


def bind(path, names=SIGNATURES):
    """Loads the library at path and declares the calls names (default:
    every call); raises MissingCall for one it does not export."""
    lib = ctypes.CDLL(path)
    for name in names:
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise MissingCall("%s does not export %s" % (path, name))
        fn.restype, fn.argtypes = SIGNATURES[name]
    return lib
