package dynamo

import (
	"math"
	"strconv"

	"github.com/goindex/goindex/goindex/kv"
)

// msgpackFormat names the msgpack RouterEvent payload in errors.
const msgpackFormat = "msgpack router event"

// DecodeMsgpack decodes one msgpack RouterEvent in rmp-serde's named
// encoding (the event-plane payload, dynamo-compat §2.5): structs are maps
// keyed by field name, None is nil, the data enum is a one-entry map
// {"stored": …} / {"removed": …} or the bare string "cleared". Unknown keys
// are skipped, missing optional fields take their defaults, hashes may be
// signed or unsigned (bit-reinterpreted). Errors are *DecodeError.
func DecodeMsgpack(b []byte) (RouterEvent, error) {
	if len(b) > MaxMessageBytes {
		return RouterEvent{}, &DecodeError{Format: msgpackFormat, Err: &LimitError{What: "message bytes", Got: len(b), Min: 0, Max: MaxMessageBytes}}
	}
	m := newMPReader(b)
	var ev RouterEvent
	err := m.routerEvent(&ev)
	if err == nil {
		err = m.end()
	}
	if err != nil {
		return RouterEvent{}, &DecodeError{Format: msgpackFormat, Err: err}
	}
	return ev, nil
}

// DecodeMsgpackEvents decodes an event-plane payload of either shape
// Dynamo released (dynamo-current §2.1): one RouterEvent map per message
// (v1.3 and older) or an array of RouterEvent maps (Vec<RouterEvent>, v1.4
// on; upstream sends at most 128 per message, MaxEventsPerBatch bounds it
// here). The shape is told by the first byte, a map or an array header, so
// no version needs to be configured. Errors are *DecodeError; an event that
// does not decode fails the whole payload, as in Dynamo, while one that
// decodes but is unsupported (see TargetsPrimary) is returned for the
// caller to skip.
func DecodeMsgpackEvents(b []byte) ([]RouterEvent, error) {
	if len(b) > MaxMessageBytes {
		return nil, &DecodeError{Format: msgpackFormat, Err: &LimitError{What: "message bytes", Got: len(b), Min: 0, Max: MaxMessageBytes}}
	}
	m := newMPReader(b)
	c, err := m.peek()
	if err != nil {
		return nil, &DecodeError{Format: msgpackFormat, Err: err}
	}
	var out []RouterEvent
	if isArrayCode(c) {
		out, err = m.routerEvents()
	} else {
		out = make([]RouterEvent, 1)
		err = m.routerEvent(&out[0])
	}
	if err == nil {
		err = m.end()
	}
	if err != nil {
		return nil, &DecodeError{Format: msgpackFormat, Err: err}
	}
	return out, nil
}

// minRouterEventBytes is the shortest RouterEvent map a decoder accepts
// ({worker_id: 0, event: {event_id: 0, data: "cleared"}}): events are
// allocated only as far as the bytes left could hold them.
const minRouterEventBytes = 40

func (m *mpReader) routerEvents() ([]RouterEvent, error) {
	n, err := m.arrayLen(MaxEventsPerBatch)
	if err != nil {
		return nil, err
	}
	out := make([]RouterEvent, 0, m.capacity(n, minRouterEventBytes))
	for i := range n {
		var ev RouterEvent
		if err := m.routerEvent(&ev); err != nil {
			return nil, at("["+strconv.Itoa(i)+"]", err)
		}
		out = append(out, ev)
	}
	return out, nil
}

// AppendMsgpackEvents appends events as the v1.4+ batched payload (a msgpack
// array of named RouterEvents) to dst and returns it; an event that fails
// Validate is not encoded and dst comes back as it was.
func AppendMsgpackEvents(dst []byte, events []RouterEvent) ([]byte, error) {
	w := newMPWriter(dst)
	w.arrayLen(len(events))
	out := w.bytes()
	for i := range events {
		var err error
		if out, err = AppendMsgpack(out, &events[i]); err != nil {
			return dst, err
		}
	}
	return out, nil
}

// fields walks a map, calling fn for each key with the reader positioned at
// the value; fn must consume the value (skip what it does not know).
func (m *mpReader) fields(maxEntries int, fn func(key string) error) error {
	n, err := m.mapLen(maxEntries)
	if err != nil {
		return err
	}
	for range n {
		k, err := m.mapKey()
		if err != nil {
			return err
		}
		if err := fn(k); err != nil {
			return at(k, err)
		}
	}
	return nil
}

// rank reads a dp_rank: a u32, or nil for the default rank 0.
func (m *mpReader) rank(dst *uint32) error {
	if isNil, err := m.nextNil(); err != nil || isNil {
		return err
	}
	v, err := m.u32()
	*dst = v
	return err
}

// maxStructFields bounds the entries of a map that mirrors a struct; the
// widest (RouterEvent) has six known fields, the rest are skipped unknowns.
const maxStructFields = 64

func (m *mpReader) routerEvent(out *RouterEvent) error {
	var haveWorker, haveEvent bool
	err := m.fields(maxStructFields, func(k string) error {
		switch k {
		case "worker_id":
			return m.present(&out.WorkerID, &haveWorker)
		case "storage_tier":
			s, isString, err := m.anyStr()
			out.StorageTier = wireTier(s, isString)
			return err
		case "residency_domain":
			s, isString, err := m.anyStr()
			out.Residency = wireResidency(s, isString)
			return err
		case "event":
			haveEvent = true
			return m.cacheEvent(&out.Event)
		case "session_id":
			s, _, err := m.optStr()
			out.SessionID = s
			return err
		}
		return m.skip()
	})
	switch {
	case err != nil:
		return err
	case !haveWorker:
		return malformed("missing worker_id")
	case !haveEvent:
		return malformed("missing event")
	}
	return nil
}

func (m *mpReader) cacheEvent(out *CacheEvent) error {
	var haveID, haveData bool
	err := m.fields(maxStructFields, func(k string) error {
		switch k {
		case "event_id":
			v, err := m.u64()
			out.EventID, haveID = v, err == nil
			return err
		case "data":
			haveData = true
			return m.eventData(out)
		case "dp_rank":
			return m.rank(&out.DpRank)
		}
		return m.skip()
	})
	switch {
	case err != nil:
		return err
	case !haveID:
		return malformed("missing event_id")
	case !haveData:
		return malformed("missing data")
	}
	return nil
}

// eventData decodes the externally tagged data enum.
func (m *mpReader) eventData(out *CacheEvent) error {
	c, err := m.peek()
	if err != nil {
		return err
	}
	if !isMapCode(c) {
		tag, err := m.str()
		if err != nil {
			return err
		}
		if tag != "cleared" {
			return malformed("unknown unit variant %q", tag)
		}
		out.Kind = kv.Cleared
		return nil
	}
	n, err := m.mapLen(1)
	if err != nil {
		return err
	}
	if n != 1 {
		return malformed("want a one-entry variant map, got %d entries", n)
	}
	tag, err := m.mapKey()
	if err != nil {
		return err
	}
	switch tag {
	case "stored":
		out.Kind = kv.Stored
		return at("stored", m.stored(&out.Stored))
	case "removed":
		out.Kind = kv.Removed
		return at("removed", m.removed(out))
	case "cleared":
		if isNil, err := m.nextNil(); err != nil || !isNil {
			return at("cleared", malformed("unit variant carries a value"))
		}
		out.Kind = kv.Cleared
		return nil
	}
	return malformed("unknown variant %q", tag)
}

func (m *mpReader) optHash() (bool, uint64, error) {
	if isNil, err := m.nextNil(); err != nil || isNil {
		return false, 0, err
	}
	v, _, err := m.intBits()
	return err == nil, v, err
}

func (m *mpReader) stored(out *StoreData) error {
	var haveBlocks bool
	err := m.fields(maxStructFields, func(k string) error {
		var err error
		switch k {
		case "parent_hash":
			out.HasParent, out.Parent, err = m.optHash()
			return err
		case "start_position":
			if isNil, err := m.nextNil(); err != nil || isNil {
				return err
			}
			out.StartPosition, err = m.u32()
			out.HasStart = err == nil
			return err
		case "blocks":
			haveBlocks = true
			return m.blocks(out)
		}
		return m.skip()
	})
	if err == nil && !haveBlocks {
		err = malformed("missing blocks")
	}
	return err
}

func (m *mpReader) blocks(out *StoreData) error {
	n, err := m.arrayLen(MaxBlocksPerEvent)
	if err != nil {
		return err
	}
	out.Blocks = make([]StoredBlock, 0, m.capacity(n, minStoredBlockBytes))
	for i := range n {
		var b StoredBlock
		if err := m.block(&b); err != nil {
			return at("["+strconv.Itoa(i)+"]", err)
		}
		out.Blocks = append(out.Blocks, b)
	}
	return nil
}

// minStoredBlockBytes is the shortest encoded stored block, a map of
// block_hash and tokens_hash with one-byte values.
const minStoredBlockBytes = 26

func (m *mpReader) block(out *StoredBlock) error {
	var haveBlock, haveTokens bool
	err := m.fields(maxStructFields, func(k string) error {
		var err error
		switch k {
		case "block_hash":
			out.BlockHash, _, err = m.intBits()
			haveBlock = err == nil
			return err
		case "tokens_hash":
			out.TokensHash, _, err = m.intBits()
			haveTokens = err == nil
			return err
		case "mm_extra_info":
			out.MM, err = m.mmExtraInfo()
			return err
		}
		return m.skip()
	})
	switch {
	case err != nil:
		return err
	case !haveBlock:
		return malformed("missing block_hash")
	case !haveTokens:
		return malformed("missing tokens_hash")
	}
	return nil
}

// mmExtraInfo decodes nil or {mm_objects: [{mm_hash, offsets: [[s, e], …]}]};
// mm_objects, mm_hash and offsets are required, as serde requires them.
func (m *mpReader) mmExtraInfo() (*MMExtraInfo, error) {
	if isNil, err := m.nextNil(); err != nil || isNil {
		return nil, err
	}
	info := &MMExtraInfo{}
	var have bool
	err := m.fields(maxStructFields, func(k string) error {
		if k != "mm_objects" {
			return m.skip()
		}
		have = true
		n, err := m.arrayLen(MaxMMObjectsPerBlock)
		if err != nil {
			return err
		}
		info.Objects = make([]MMObject, n)
		for i := range info.Objects {
			if err := m.mmObject(&info.Objects[i]); err != nil {
				return at("["+strconv.Itoa(i)+"]", err)
			}
		}
		return nil
	})
	if err == nil && !have {
		err = malformed("missing mm_objects")
	}
	return info, err
}

func (m *mpReader) mmObject(out *MMObject) error {
	var haveHash, haveOffsets bool
	err := m.fields(maxStructFields, func(k string) error {
		var err error
		switch k {
		case "mm_hash":
			out.Hash, _, err = m.intBits()
			haveHash = err == nil
			return err
		case "offsets":
			haveOffsets = true
			n, err := m.arrayLen(MaxMMObjectsPerBlock)
			if err != nil {
				return err
			}
			out.Offsets = make([][2]uint64, n)
			for i := range out.Offsets {
				if err := m.pair(&out.Offsets[i], math.MaxUint64); err != nil {
					return at("["+strconv.Itoa(i)+"]", err)
				}
			}
			return nil
		}
		return m.skip()
	})
	switch {
	case err != nil:
		return err
	case !haveHash:
		return malformed("missing mm_hash")
	case !haveOffsets:
		return malformed("missing offsets")
	}
	return nil
}

// pair reads a two-element integer array, each value ≤ max.
func (m *mpReader) pair(out *[2]uint64, max uint64) error {
	// Any length is read so that a wrong one is a shape error, not a limit.
	n, err := m.arrayLen(math.MaxInt32)
	if err != nil {
		return err
	}
	if n != 2 {
		return malformed("want a pair, got %d values", n)
	}
	for i := range out {
		if out[i], err = m.uint(max); err != nil {
			return err
		}
	}
	return nil
}

func (m *mpReader) removed(out *CacheEvent) error {
	var have bool
	err := m.fields(maxStructFields, func(k string) error {
		if k != "block_hashes" {
			return m.skip()
		}
		have = true
		n, err := m.arrayLen(MaxBlocksPerEvent)
		if err != nil {
			return err
		}
		out.Removed = make([]uint64, n)
		for i := range out.Removed {
			if out.Removed[i], _, err = m.intBits(); err != nil {
				return at("["+strconv.Itoa(i)+"]", err)
			}
		}
		return nil
	})
	if err == nil && !have {
		err = malformed("missing block_hashes")
	}
	return err
}

// AppendMsgpack appends e to dst in rmp-serde's named encoding, exactly as
// Dynamo's publisher writes the event-plane payload, and returns it: a map
// {worker_id, storage_tier, [residency_domain,] event: {event_id, data,
// dp_rank}[, session_id]}; stored data {parent_hash, start_position, blocks:
// [{block_hash, tokens_hash, mm_extra_info}]} with nil for None; integers in
// their smallest unsigned form; TierUnknown and ResidencyUnsupported as nil
// (they decode back to themselves). An event that fails Validate is not
// encoded.
func AppendMsgpack(dst []byte, e *RouterEvent) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return dst, err
	}
	w := newMPWriter(dst)
	n := 3
	if e.Residency != ResidencyAbsent {
		n++
	}
	if e.SessionID != "" {
		n++
	}
	w.mapLen(n)
	w.str("worker_id")
	w.uint(e.WorkerID)
	w.str("storage_tier")
	if e.StorageTier == TierUnknown {
		w.null()
	} else {
		w.str(e.StorageTier.String())
	}
	switch e.Residency {
	case ResidencyAbsent:
	case ResidencyUnsupported:
		w.str("residency_domain")
		w.null()
	default:
		w.str("residency_domain")
		w.str(e.Residency.String())
	}
	c := &e.Event
	w.str("event")
	w.mapLen(3)
	w.str("event_id")
	w.uint(c.EventID)
	w.str("data")
	switch c.Kind {
	case kv.Stored:
		w.writeStored(&c.Stored)
	case kv.Removed:
		w.mapLen(1)
		w.str("removed")
		w.mapLen(1)
		w.str("block_hashes")
		w.arrayLen(len(c.Removed))
		for _, h := range c.Removed {
			w.uint(h)
		}
	case kv.Cleared:
		w.str("cleared")
	}
	w.str("dp_rank")
	w.uint(uint64(c.DpRank))
	if e.SessionID != "" {
		w.str("session_id")
		w.str(e.SessionID)
	}
	return w.bytes(), nil
}

func (w *mpWriter) writeStored(s *StoreData) {
	w.mapLen(1)
	w.str("stored")
	w.mapLen(3)
	w.str("parent_hash")
	w.optUint(s.HasParent, s.Parent)
	w.str("start_position")
	w.optUint(s.HasStart, uint64(s.StartPosition))
	w.str("blocks")
	w.arrayLen(len(s.Blocks))
	for i := range s.Blocks {
		b := &s.Blocks[i]
		w.mapLen(3)
		w.str("block_hash")
		w.uint(b.BlockHash)
		w.str("tokens_hash")
		w.uint(b.TokensHash)
		w.str("mm_extra_info")
		if b.MM == nil {
			w.null()
			continue
		}
		w.mapLen(1)
		w.str("mm_objects")
		w.arrayLen(len(b.MM.Objects))
		for _, o := range b.MM.Objects {
			w.mapLen(2)
			w.str("mm_hash")
			w.uint(o.Hash)
			w.str("offsets")
			w.arrayLen(len(o.Offsets))
			for _, r := range o.Offsets {
				w.arrayLen(2)
				w.uint(r[0])
				w.uint(r[1])
			}
		}
	}
}
