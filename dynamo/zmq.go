package dynamo

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"

	"github.com/goindex/goindex/goindex/kv"
)

// zmqFormat names the engines' ZMQ KVEventBatch in errors.
const zmqFormat = "zmq batch"

// ZMQConfig configures the engine-event decoder.
type ZMQConfig struct {
	// FoldByteHashes accepts block hashes sent as msgpack bin (newer vLLM
	// may emit bytes) by folding their low 8 bytes big-endian, the same as
	// vLLM's int.from_bytes(digest, "big") & (2^64−1); optional; default:
	// false (rejected with ErrByteHash, as Dynamo's decoder does).
	FoldByteHashes bool
}

// EngineBatch is one decoded vLLM/SGLang KVEventBatch (dynamo-compat §2.6).
// Topic and Sequence come from the ZMQ frames (DecodeZMQ only).
type EngineBatch struct {
	Topic     string
	Sequence  uint64
	Timestamp float64
	// HasDpRank and DpRank carry data_parallel_rank; when present it
	// overrides the rank the source was registered with.
	HasDpRank bool
	DpRank    uint32
	Events    []EngineEvent
	// Ignored counts the events tagged "Ignored", which current Dynamo
	// accepts and drops without giving them an event id; they are not in
	// Events.
	Ignored int
}

// EngineEvent is one engine KV event before Dynamo's normalization: the
// fields of BlockStored, BlockRemoved or AllBlocksCleared (Kind), as sent.
type EngineEvent struct {
	Kind        kv.Kind
	BlockHashes []uint64 // engine (external) hashes, bit-reinterpreted to u64
	HasParent   bool
	Parent      uint64
	TokenIDs    []uint32 // EAGLE pairs already flattened
	Eagle       bool     // token_ids came as [a, b] pairs
	BlockSize   uint64
	Medium      string // "" when absent or nil
	LoRAName    string // "" when absent or nil
	// CacheSalt is the cache namespace salting tokens_hash: the map form's
	// cache_salt or SGLang's {cache_salt} slot, else the one Dynamo's vLLM
	// handler tags in the first block's extra_keys (see extraKeys); "" when
	// none.
	CacheSalt string
	// BlockMM holds per-block multimodal info, from block_mm_infos or else
	// derived from extra_keys; nil when the event carries none.
	BlockMM       []*MMExtraInfo
	HasGroup      bool
	GroupIdx      uint32
	HasSpecKind   bool
	SpecKind      string // kv_cache_spec_kind
	SlidingWindow uint32 // kv_cache_spec_sliding_window; 0 when absent
	HasLocality   bool
	Locality      string // LOCAL, REMOTE, …
}

// DecodeZMQ decodes one engine ZMQ message: exactly three frames (topic,
// 8-byte big-endian sequence, msgpack KVEventBatch payload). Errors are
// *DecodeError (ErrFrameCount for a wrong frame count).
func DecodeZMQ(frames [][]byte, cfg ZMQConfig) (EngineBatch, error) {
	if len(frames) != 3 {
		return EngineBatch{}, &DecodeError{Format: zmqFormat, Err: detailed(ErrFrameCount, "%d, want 3", len(frames))}
	}
	if len(frames[0]) > MaxStringBytes {
		return EngineBatch{}, &DecodeError{Format: zmqFormat, Err: &LimitError{What: "topic bytes", Got: len(frames[0]), Min: 0, Max: MaxStringBytes}}
	}
	if len(frames[1]) != 8 {
		return EngineBatch{}, &DecodeError{Format: zmqFormat, Err: malformed("sequence frame has %d bytes, want 8", len(frames[1]))}
	}
	b, err := DecodeEngineBatch(frames[2], cfg)
	if err != nil {
		return EngineBatch{}, err
	}
	b.Topic = string(frames[0])
	b.Sequence = binary.BigEndian.Uint64(frames[1])
	return b, nil
}

// DecodeEngineBatch decodes a KVEventBatch payload: the msgspec array form
// [ts, events, dp_rank] (2 elements, or 3 and more; extras ignored) or the
// map form {ts, events, data_parallel_rank | dp_rank}. Each event is a
// positional array with its tag first or a map with a "type" key; see
// EngineEvent. An event tagged "Ignored", which current Dynamo decodes and
// drops, is counted in Ignored and left out of Events; any other unknown tag
// fails the batch, as it does in Dynamo. Errors are *DecodeError.
func DecodeEngineBatch(payload []byte, cfg ZMQConfig) (EngineBatch, error) {
	if len(payload) > MaxMessageBytes {
		return EngineBatch{}, &DecodeError{Format: zmqFormat, Err: &LimitError{What: "message bytes", Got: len(payload), Min: 0, Max: MaxMessageBytes}}
	}
	d := engineDecoder{mpReader: newMPReader(payload), cfg: cfg}
	var b EngineBatch
	err := d.batch(&b)
	if err == nil {
		err = d.end()
	}
	if err != nil {
		return EngineBatch{}, &DecodeError{Format: zmqFormat, Err: err}
	}
	return b, nil
}

type engineDecoder struct {
	*mpReader
	cfg ZMQConfig
}

func (d *engineDecoder) batch(out *EngineBatch) error {
	c, err := d.peek()
	if err != nil {
		return err
	}
	if isMapCode(c) {
		var haveTS, haveEvents bool
		err := d.fields(maxStructFields, func(k string) error {
			var err error
			switch k {
			case "ts":
				out.Timestamp, err = d.float()
				haveTS = err == nil
				return err
			case "events":
				haveEvents = true
				return d.events(out)
			case "data_parallel_rank", "dp_rank":
				return d.batchRank(out)
			}
			return d.skip()
		})
		switch {
		case err != nil:
			return err
		case !haveTS:
			return malformed("missing ts")
		case !haveEvents:
			return malformed("missing events")
		}
		return nil
	}
	n, err := d.arrayLen(math.MaxInt32)
	if err != nil {
		return err
	}
	if n < 2 {
		return malformed("batch has %d elements, want [ts, events, dp_rank?]", n)
	}
	if out.Timestamp, err = d.float(); err != nil {
		return at("ts", err)
	}
	if err := at("events", d.events(out)); err != nil {
		return err
	}
	if n >= 3 {
		if err := at("data_parallel_rank", d.batchRank(out)); err != nil {
			return err
		}
	}
	for range n - 3 {
		if err := d.skip(); err != nil {
			return err
		}
	}
	return nil
}

func (d *engineDecoder) batchRank(out *EngineBatch) error {
	if isNil, err := d.nextNil(); err != nil || isNil {
		return err
	}
	v, err := d.u32()
	out.HasDpRank, out.DpRank = err == nil, v
	return err
}

func (d *engineDecoder) events(out *EngineBatch) error {
	n, err := d.arrayLen(MaxEventsPerBatch)
	if err != nil {
		return err
	}
	out.Events = make([]EngineEvent, 0, d.capacity(n, minEngineEventBytes))
	for i := range n {
		var ev EngineEvent
		if err := d.event(&ev); err != nil {
			return at("["+strconv.Itoa(i)+"]", err)
		}
		if ev.Kind == ignoredKind {
			out.Ignored++
			continue
		}
		out.Events = append(out.Events, ev)
	}
	return nil
}

// minEngineEventBytes is the shortest encoded event that is kept,
// ["BlockRemoved", []]: an EngineEvent is about 200 bytes decoded, so events
// are allocated only as far as the bytes left could hold them.
const minEngineEventBytes = 15

// ignoredTag is the event tag current Dynamo decodes and then drops (its
// RawKvEvent::Ignored); event marks such an event with ignoredKind, the zero
// kv.Kind, and events leaves it out.
const (
	ignoredTag  = "Ignored"
	ignoredKind = kv.Kind(0)
)

func (d *engineDecoder) event(out *EngineEvent) error {
	c, err := d.peek()
	if err != nil {
		return err
	}
	if isMapCode(c) {
		return d.mapEvent(out)
	}
	n, err := d.arrayLen(math.MaxInt32)
	if err != nil {
		return err
	}
	if n == 0 {
		return malformed("empty event array, want the tag first")
	}
	tag, err := d.str()
	if err != nil {
		return at("tag", err)
	}
	p := positional{d: d, left: n - 1}
	switch tag {
	case "BlockStored":
		out.Kind = kv.Stored
		err = p.stored(out)
	case "BlockRemoved":
		out.Kind = kv.Removed
		err = p.removed(out)
	case "AllBlocksCleared":
		out.Kind = kv.Cleared
	case ignoredTag:
		out.Kind = ignoredKind
	default:
		return malformed("unknown event tag %q", tag)
	}
	if err != nil {
		return at(tag, err)
	}
	return p.skipRest()
}

// positional walks the elements of a positional event after its tag.
type positional struct {
	d    *engineDecoder
	left int
	idx  int // position of the next element (tag = 0)
}

// next reports whether another element exists and advances past it in the
// count; the caller must consume it.
func (p *positional) next() bool {
	if p.left == 0 {
		return false
	}
	p.left--
	p.idx++
	return true
}

func (p *positional) path() string { return "[" + strconv.Itoa(p.idx) + "]" }

// required consumes the next element with fn, or reports it missing.
func (p *positional) required(name string, fn func() error) error {
	if !p.next() {
		return malformed("missing %s", name)
	}
	return at(p.path()+" "+name, fn())
}

// optional consumes the next element with fn, if any; nil counts as absent
// and is consumed here.
func (p *positional) optional(name string, fn func() error) error {
	if !p.next() {
		return nil
	}
	if isNil, err := p.d.nextNil(); err != nil || isNil {
		return err
	}
	return at(p.path()+" "+name, fn())
}

func (p *positional) skipRest() error {
	for p.next() {
		if err := p.d.skip(); err != nil {
			return at(p.path(), err)
		}
	}
	return nil
}

func (p *positional) stored(out *EngineEvent) error {
	d := p.d
	if err := p.required("block_hashes", func() error { return d.hashes(&out.BlockHashes) }); err != nil {
		return err
	}
	if err := p.optional("parent_block_hash", func() error {
		v, err := d.hash()
		out.HasParent, out.Parent = err == nil, v
		return err
	}); err != nil {
		return err
	}
	if err := p.required("token_ids", func() error { return d.tokens(out) }); err != nil {
		return err
	}
	if err := p.required("block_size", func() error {
		v, err := d.u64()
		out.BlockSize = v
		return err
	}); err != nil {
		return err
	}
	steps := []struct {
		name string
		fn   func() error
	}{
		{"lora_id", d.skip}, // read and discarded, as Dynamo does
		{"medium", d.strInto(&out.Medium)},
		{"lora_name", func() error { return d.loraSlot(out) }},
		{"extra_keys", func() error {
			// Dynamo's positional form takes the namespace from extra_keys
			// alone (lib/kv-router/src/zmq_wire/deserialize.rs); SGLang's
			// {cache_salt} slot in position 7 (dynamo-compat §2.6) keeps
			// precedence here.
			ns, err := d.extraKeys(out, true)
			if out.CacheSalt == "" {
				out.CacheSalt = ns
			}
			return err
		}},
	}
	for _, s := range steps {
		if err := p.optional(s.name, s.fn); err != nil {
			return err
		}
	}
	return p.tail(out, true)
}

func (p *positional) removed(out *EngineEvent) error {
	d := p.d
	if err := p.required("block_hashes", func() error { return d.hashes(&out.BlockHashes) }); err != nil {
		return err
	}
	if err := p.optional("medium", d.strInto(&out.Medium)); err != nil {
		return err
	}
	return p.tail(out, false)
}

// tail parses the optional trailing fields after extra_keys (stored) or
// medium (removed). Their layout changed over releases, and the positional
// slot of locality is [unverified] in the spec, so two forms are accepted:
//
//   - Fixed (current Dynamo, append-only): at least four elements whose
//     types fit group_idx int|nil, kv_cache_spec_kind str|nil,
//     kv_cache_spec_sliding_window int|nil, locality str|nil, ownership
//     str|nil (read and discarded); later elements are skipped. Here any
//     locality string counts, so an unknown one is dropped as non-local.
//   - Legacy, for anything else (older vLLM omitted unused slots; some tuples
//     carry block_mm_infos): by type, as Dynamo did. Nil is skipped; the
//     first integer is group_idx, the second kv_cache_spec_sliding_window;
//     the first list (stored only) is block_mm_infos; the strings "LOCAL"
//     and "REMOTE" are locality, recognised by value; the first other string
//     is kv_cache_spec_kind. Anything else is skipped.
func (p *positional) tail(out *EngineEvent, stored bool) error {
	if p.fixedTail() {
		return p.fixedTailFields(out)
	}
	d := p.d
	ints := 0
	var haveMM bool
	for p.next() {
		c, err := d.peek()
		if err != nil {
			return err
		}
		switch {
		case isNilCode(c):
			err = d.skip()
		case isIntCode(c) && ints < 2:
			var v uint32
			v, err = d.u32()
			if ints == 0 {
				out.HasGroup, out.GroupIdx = err == nil, v
			} else {
				out.SlidingWindow = v
			}
			ints++
		case isStrCode(c):
			var s string
			s, err = d.str()
			switch {
			case s == "LOCAL" || s == "REMOTE":
				if !out.HasLocality {
					out.HasLocality, out.Locality = true, s
				}
			case !out.HasSpecKind:
				out.HasSpecKind, out.SpecKind = true, s
			}
		case stored && isArrayCode(c) && !haveMM:
			haveMM = true
			err = d.blockMMInfos(out)
		default:
			err = d.skip()
		}
		if err != nil {
			return at(p.path(), err)
		}
	}
	return nil
}

// fixedTailSlots is how many trailing slots the fixed layout names, and
// fixedTailMin how many must be present for it to apply.
const (
	fixedTailSlots = 5
	fixedTailMin   = 4
)

// fixedTail reports whether the remaining elements fit the fixed trailing
// layout (see tail). It reads ahead and rewinds; an element it cannot skip
// makes it report false, leaving the error to the legacy parse.
func (p *positional) fixedTail() bool {
	if p.left < fixedTailMin {
		return false
	}
	d := p.d
	pos := d.mark()
	defer d.rewind(pos)
	for i := range min(p.left, fixedTailSlots) {
		c, err := d.peek()
		if err != nil {
			return false
		}
		wantInt := i == 0 || i == 2 // group_idx, kv_cache_spec_sliding_window
		if !isNilCode(c) && (wantInt && !isIntCode(c) || !wantInt && !isStrCode(c)) {
			return false
		}
		if d.skip() != nil {
			return false
		}
	}
	return true
}

// fixedTailFields reads the fixed trailing layout; elements after it are
// left to the caller's skipRest.
func (p *positional) fixedTailFields(out *EngineEvent) error {
	d := p.d
	slots := [fixedTailSlots]struct {
		name string
		fn   func() error
	}{
		{"group_idx", func() error {
			v, err := d.u32()
			out.HasGroup, out.GroupIdx = err == nil, v
			return err
		}},
		{"kv_cache_spec_kind", func() error {
			s, err := d.str()
			out.HasSpecKind, out.SpecKind = err == nil, s
			return err
		}},
		{"kv_cache_spec_sliding_window", func() error {
			v, err := d.u32()
			out.SlidingWindow = v
			return err
		}},
		{"locality", func() error {
			s, err := d.str()
			out.HasLocality, out.Locality = err == nil, s
			return err
		}},
		{"ownership", d.skip}, // read and discarded, as Dynamo does
	}
	for _, s := range slots {
		if err := p.optional(s.name, s.fn); err != nil {
			return err
		}
	}
	return nil
}

// mapEvent decodes SGLang's map form {"type": tag, field: value, …}.
func (d *engineDecoder) mapEvent(out *EngineEvent) error {
	var tag string
	var haveHashes, haveTokens, haveSize bool
	var blockMM, haveSalt bool
	extraKeys := int64(-1) // offset of the last non-nil extra_keys value
	err := d.fields(maxStructFields, func(k string) error {
		var err error
		if isNil, err := d.nextNil(); err != nil || isNil {
			return err
		}
		switch k {
		case "type":
			tag, err = d.str()
		case "block_hashes":
			haveHashes = true
			err = d.hashes(&out.BlockHashes)
		case "parent_block_hash":
			out.Parent, err = d.hash()
			out.HasParent = err == nil
		case "token_ids":
			haveTokens = true
			err = d.tokens(out)
		case "block_size":
			out.BlockSize, err = d.u64()
			haveSize = err == nil
		case "medium":
			out.Medium, err = d.str()
		case "lora_name":
			out.LoRAName, err = d.str()
		case "cache_salt":
			out.CacheSalt, err = d.str()
			haveSalt = err == nil
		case "block_mm_infos":
			blockMM = true
			err = d.blockMMInfos(out)
		case "extra_keys":
			// Parsed after the map: it needs lora_name, which may follow.
			extraKeys = d.mark()
			err = d.skip()
		case "group_idx":
			out.GroupIdx, err = d.u32()
			out.HasGroup = err == nil
		case "kv_cache_spec_kind":
			out.SpecKind, err = d.str()
			out.HasSpecKind = err == nil
		case "kv_cache_spec_sliding_window":
			out.SlidingWindow, err = d.u32()
		case "locality":
			out.Locality, err = d.str()
			out.HasLocality = err == nil
		default:
			err = d.skip()
		}
		return err
	})
	if err != nil {
		return err
	}
	if extraKeys >= 0 {
		end := d.mark()
		d.rewind(extraKeys)
		ns, err := d.extraKeys(out, !blockMM) // block_mm_infos wins, whatever the key order
		if err != nil {
			return at("extra_keys", err)
		}
		d.rewind(end)
		// A non-nil cache_salt wins even when empty, as in Dynamo's map
		// form (lib/kv-router/src/zmq_wire/deserialize.rs: cache_salt, or
		// else extra_keys_to_cache_namespace).
		if !haveSalt {
			out.CacheSalt = ns
		}
	}
	switch tag {
	case "BlockStored":
		out.Kind = kv.Stored
		switch {
		case !haveHashes:
			return malformed("BlockStored: missing block_hashes")
		case !haveTokens:
			return malformed("BlockStored: missing token_ids")
		case !haveSize:
			return malformed("BlockStored: missing block_size")
		}
	case "BlockRemoved":
		out.Kind = kv.Removed
		if !haveHashes {
			return malformed("BlockRemoved: missing block_hashes")
		}
	case "AllBlocksCleared":
		out.Kind = kv.Cleared
	case ignoredTag:
		out.Kind = ignoredKind
	case "":
		return malformed("missing type")
	default:
		return malformed("unknown event type %q", tag)
	}
	return nil
}

// strInto returns a step that reads a string into dst.
func (d *engineDecoder) strInto(dst *string) func() error {
	return func() error {
		var err error
		*dst, err = d.str()
		return err
	}
}

// hash reads one block hash: any msgpack integer (bit-reinterpreted), or
// with FoldByteHashes a bin folded big-endian over its low 8 bytes.
func (d *engineDecoder) hash() (uint64, error) {
	c, err := d.peek()
	if err != nil {
		return 0, err
	}
	if !isBinCode(c) {
		v, _, err := d.intBits()
		return v, err
	}
	if !d.cfg.FoldByteHashes {
		return 0, ErrByteHash
	}
	b, err := d.bin(MaxStringBytes)
	if err != nil {
		return 0, err
	}
	var v uint64
	for _, x := range b[max(0, len(b)-8):] {
		v = v<<8 | uint64(x)
	}
	return v, nil
}

func (d *engineDecoder) hashes(dst *[]uint64) error {
	n, err := d.arrayLen(MaxBlocksPerEvent)
	if err != nil {
		return err
	}
	hs := make([]uint64, n)
	for i := range hs {
		if hs[i], err = d.hash(); err != nil {
			return at("["+strconv.Itoa(i)+"]", err)
		}
	}
	*dst = hs
	return nil
}

// tokens reads token_ids: a list of u32, or EAGLE's list of [a, b] pairs,
// flattened to every pair's first token plus the last pair's second.
func (d *engineDecoder) tokens(out *EngineEvent) error {
	n, err := d.arrayLen(MaxTokensPerEvent)
	if err != nil {
		return err
	}
	if n == 0 {
		out.TokenIDs = []uint32{}
		return nil
	}
	c, err := d.peek()
	if err != nil {
		return err
	}
	out.Eagle = isArrayCode(c)
	if !out.Eagle {
		ts := make([]uint32, n)
		for i := range ts {
			if ts[i], err = d.u32(); err != nil {
				return at("["+strconv.Itoa(i)+"]", err)
			}
		}
		out.TokenIDs = ts
		return nil
	}
	ts := make([]uint32, n+1)
	for i := range n {
		var pair [2]uint64
		if err := d.pair(&pair, math.MaxUint32); err != nil {
			return at("["+strconv.Itoa(i)+"]", err)
		}
		ts[i], ts[i+1] = uint32(pair[0]), uint32(pair[1])
	}
	out.TokenIDs = ts
	return nil
}

// loraSlot reads position 7: a lora_name string, or SGLang's map
// {cache_salt, lora_name}.
func (d *engineDecoder) loraSlot(out *EngineEvent) error {
	c, err := d.peek()
	if err != nil {
		return err
	}
	if !isMapCode(c) {
		out.LoRAName, err = d.str()
		return err
	}
	return d.fields(maxStructFields, func(k string) error {
		var dst *string
		switch k {
		case "cache_salt":
			dst = &out.CacheSalt
		case "lora_name":
			dst = &out.LoRAName
		default:
			return d.skip()
		}
		s, _, err := d.optStr()
		*dst = s
		return err
	})
}

// blockMMInfos reads block_mm_infos: per block, nil or
// {mm_objects: [{mm_hash, offsets}]}.
func (d *engineDecoder) blockMMInfos(out *EngineEvent) error {
	n, err := d.arrayLen(MaxBlocksPerEvent)
	if err != nil {
		return err
	}
	infos := make([]*MMExtraInfo, n)
	for i := range infos {
		if infos[i], err = d.mmExtraInfo(); err != nil {
			return at("["+strconv.Itoa(i)+"]", err)
		}
	}
	out.BlockMM = infos
	return nil
}

// cacheSaltPrefix tags the cache salt Dynamo's vLLM handler passes to vLLM,
// which carries it in the first block's extra_keys; it must match
// _DYNAMO_CACHE_SALT_PREFIX in Dynamo's components/src/dynamo/vllm/handlers.py
// (ai-dynamo/dynamo lib/kv-router/src/zmq_wire/extra_keys.rs,
// DYNAMO_CACHE_SALT_PREFIX).
const cacheSaltPrefix = "dynamo-cache-salt:"

// extraKeys reads vLLM's extra_keys, per block nil or a list of items, the
// way Dynamo's lib/kv-router/src/zmq_wire/extra_keys.rs does. It returns the
// cache namespace: the text after cacheSaltPrefix of the first non-empty
// tagged string in the first block, where the first string equal to
// out.LoRAName is the LoRA name and is passed over (so a LoRA name that
// itself starts with the tag is not a salt). With mm it also sets
// out.BlockMM: a bare string counts only as a canonical 64-hex mm
// identifier, never when it equals out.LoRAName (a LoRA name may be 64 hex
// digits), because extra_keys also carries LoRA names, cache salts and
// prompt-embedding hashes; an [identifier, start_offset] pair (vLLM ≥ 0.19)
// is an mm identifier by construction and maps by MMIdentifierHash. Other
// items are ignored. Blocks without identifiers get nil; an event with none
// at all gets no BlockMM.
func (d *engineDecoder) extraKeys(out *EngineEvent, mm bool) (namespace string, err error) {
	n, err := d.arrayLen(MaxBlocksPerEvent)
	if err != nil {
		return "", err
	}
	infos := make([]*MMExtraInfo, n)
	var found bool
	for i := range infos {
		ns := &namespace // vLLM puts the salt in the first block only
		if i > 0 {
			ns = nil
		}
		if infos[i], err = d.blockExtraKeys(out.LoRAName, ns); err != nil {
			return "", at("["+strconv.Itoa(i)+"]", err)
		}
		found = found || infos[i] != nil
	}
	if found && mm {
		out.BlockMM = infos
	}
	return namespace, nil
}

// blockExtraKeys reads one block's extra_keys (see extraKeys), setting
// *namespace unless namespace is nil.
func (d *engineDecoder) blockExtraKeys(lora string, namespace *string) (*MMExtraInfo, error) {
	if isNil, err := d.nextNil(); err != nil || isNil {
		return nil, err
	}
	n, err := d.arrayLen(MaxMMObjectsPerBlock)
	if err != nil {
		return nil, err
	}
	loraLeft := lora // the first item equal to the LoRA name is not a salt
	var objs []MMObject
	for range n {
		c, err := d.peek()
		if err != nil {
			return nil, err
		}
		var h uint64
		var ok bool
		if isStrCode(c) {
			s, err := d.str()
			if err != nil {
				return nil, err
			}
			if namespace != nil && *namespace == "" {
				if loraLeft != "" && s == loraLeft {
					loraLeft = ""
				} else if ns, tagged := strings.CutPrefix(s, cacheSaltPrefix); tagged {
					*namespace = ns
				}
			}
			if s != lora {
				h, ok = hexDigestHash(s)
			}
		} else if h, ok, err = d.extraKeyItem(); err != nil {
			return nil, err
		}
		if ok {
			objs = append(objs, MMObject{Hash: h})
		}
	}
	if len(objs) == 0 {
		return nil, nil
	}
	return &MMExtraInfo{Objects: objs}, nil
}

// extraKeyItem maps one extra_keys item other than a bare string to an mm
// hash, if it is an [identifier, start_offset] pair: a string and an
// integer (Dynamo's ExtraKeyItem, lib/kv-router/src/zmq_wire/types.rs, has
// no other pair; Dynamo refuses the whole event on another shape, where
// this passes over the item).
func (d *engineDecoder) extraKeyItem() (uint64, bool, error) {
	c, err := d.peek()
	if err != nil {
		return 0, false, err
	}
	if !isArrayCode(c) {
		return 0, false, d.skip()
	}
	n, err := d.arrayLen(MaxMMObjectsPerBlock)
	if err != nil {
		return 0, false, err
	}
	var h uint64
	var ok bool
	for i := range n {
		c, err := d.peek()
		if err != nil {
			return 0, false, err
		}
		switch {
		case i == 0 && n == 2 && isStrCode(c):
			s, err := d.str()
			if err != nil {
				return 0, false, err
			}
			h, ok = MMIdentifierHash(s)
			continue
		case i == 1 && !isIntCode(c):
			ok = false // not an offset
		}
		if err := d.skip(); err != nil {
			return 0, false, err
		}
	}
	return h, ok, nil
}
