package dynamo

// activeLoadFormat names the ActiveLoad payload in errors.
const activeLoadFormat = "msgpack active load"

// maxActiveLoadBytes bounds one ActiveLoad payload: five small fields fit
// in under 128 bytes; the rest is room for keys a newer release adds.
const maxActiveLoadBytes = 4096

// ActiveLoad is Dynamo's worker load sample (its ActiveLoad, topic
// kv_metrics, dynamo-current §3): one (worker, dp rank)'s KV occupancy and
// scheduler load. Workers send KVUsedBlocks (and optionally
// ActiveDecodeBlocks); routers send the same type with their decode and
// prefill view. Each optional value comes with a Has flag: nil means the
// sender does not know it, never zero.
type ActiveLoad struct {
	WorkerID              uint64
	DpRank                uint32
	HasActiveDecodeBlocks bool
	ActiveDecodeBlocks    uint64
	HasActivePrefillToks  bool
	ActivePrefillTokens   uint64
	HasKVUsedBlocks       bool
	KVUsedBlocks          uint64
}

// DecodeActiveLoad decodes an ActiveLoad payload: a named msgpack map
// (rmp-serde, as on every event-plane transport) with worker_id required,
// dp_rank defaulting to 0, the three loads each an integer or nil, unknown
// keys skipped. Errors are *DecodeError.
func DecodeActiveLoad(b []byte) (ActiveLoad, error) {
	if len(b) > maxActiveLoadBytes {
		return ActiveLoad{}, &DecodeError{Format: activeLoadFormat, Err: &LimitError{What: "message bytes", Got: len(b), Min: 0, Max: maxActiveLoadBytes}}
	}
	m := newMPReader(b)
	var out ActiveLoad
	var haveWorker bool
	err := m.fields(maxStructFields, func(k string) error {
		switch k {
		case "worker_id":
			return m.present(&out.WorkerID, &haveWorker)
		case "dp_rank":
			return m.rank(&out.DpRank)
		case "active_decode_blocks":
			return m.optU64(&out.ActiveDecodeBlocks, &out.HasActiveDecodeBlocks)
		case "active_prefill_tokens":
			return m.optU64(&out.ActivePrefillTokens, &out.HasActivePrefillToks)
		case "kv_used_blocks":
			return m.optU64(&out.KVUsedBlocks, &out.HasKVUsedBlocks)
		}
		return m.skip()
	})
	if err == nil && !haveWorker {
		err = malformed("missing worker_id")
	}
	if err == nil {
		err = m.end()
	}
	if err != nil {
		return ActiveLoad{}, &DecodeError{Format: activeLoadFormat, Err: err}
	}
	return out, nil
}
