package dynamo

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"

	"github.com/goindex/goindex/goindex/kv"
)

// jsonFormat names Dynamo's JSON RouterEvent in errors.
const jsonFormat = "json router event"

// DecodeJSON decodes one JSON RouterEvent, in the G2025 shape (no
// storage_tier, residency_domain, start_position or mm_extra_info) or the CUR
// shape. Unknown keys are ignored and missing optional fields take their
// defaults (tier device, residency absent, dp_rank 0). Hashes accept the
// full u64 range and negative i64 literals (bit-reinterpreted); numbers never
// pass through float64. Errors are *DecodeError.
func DecodeJSON(b []byte) (RouterEvent, error) {
	if len(b) > MaxMessageBytes {
		return RouterEvent{}, &DecodeError{Format: jsonFormat, Err: &LimitError{What: "message bytes", Got: len(b), Min: 0, Max: MaxMessageBytes}}
	}
	var ev RouterEvent
	if err := decodeJSONEvent(b, &ev); err != nil {
		return RouterEvent{}, &DecodeError{Format: jsonFormat, Err: err}
	}
	return ev, nil
}

// JSON mirror types. Pointers tell absent or null from zero; RawMessage
// tells absent (nil) from null ("null").
type (
	jsonRouterEvent struct {
		WorkerID        *jsonU64        `json:"worker_id"`
		StorageTier     json.RawMessage `json:"storage_tier"`
		ResidencyDomain json.RawMessage `json:"residency_domain"`
		Event           *jsonCacheEvent `json:"event"`
		SessionID       *string         `json:"session_id"`
	}
	jsonCacheEvent struct {
		EventID *jsonU64        `json:"event_id"`
		Data    json.RawMessage `json:"data"`
		DpRank  *jsonU32        `json:"dp_rank"`
	}
	jsonStored struct {
		ParentHash    *jsonHash    `json:"parent_hash"`
		StartPosition *jsonU32     `json:"start_position"`
		Blocks        *[]jsonBlock `json:"blocks"`
	}
	jsonBlock struct {
		BlockHash   *jsonHash   `json:"block_hash"`
		TokensHash  *jsonHash   `json:"tokens_hash"`
		MMExtraInfo *jsonMMInfo `json:"mm_extra_info"`
	}
	jsonMMInfo struct {
		MMObjects *[]jsonMMObject `json:"mm_objects"`
	}
	jsonMMObject struct {
		MMHash  *jsonHash    `json:"mm_hash"`
		Offsets *[][]jsonU64 `json:"offsets"`
	}
	jsonRemoved struct {
		BlockHashes *[]jsonHash `json:"block_hashes"`
	}
)

// jsonU64 is a non-negative JSON integer literal up to 2^64−1.
type jsonU64 uint64

func (v *jsonU64) UnmarshalJSON(b []byte) error {
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return jsonTypeError(b, reflect.TypeFor[jsonU64]())
	}
	*v = jsonU64(n)
	return nil
}

// jsonU32 is a non-negative JSON integer literal up to 2^32−1.
type jsonU32 uint32

func (v *jsonU32) UnmarshalJSON(b []byte) error {
	n, err := strconv.ParseUint(string(b), 10, 32)
	if err != nil {
		return jsonTypeError(b, reflect.TypeFor[jsonU32]())
	}
	*v = jsonU32(n)
	return nil
}

// jsonHash is a 64-bit hash literal: 0..2^64−1, or a negative i64 whose bits
// are the hash (signed producers, the indexer HTTP API).
type jsonHash uint64

func (v *jsonHash) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) > 0 && s[0] == '-' {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return jsonTypeError(b, reflect.TypeFor[jsonHash]())
		}
		*v = jsonHash(n)
		return nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return jsonTypeError(b, reflect.TypeFor[jsonHash]())
	}
	*v = jsonHash(n)
	return nil
}

// jsonTypeError reports a literal our number types refuse as an
// *json.UnmarshalTypeError, to which encoding/json adds the field path
// ("blocks.block_hash") that jsonErr then puts in the message.
func jsonTypeError(b []byte, want reflect.Type) error {
	kind := "number"
	switch string(b[:min(len(b), 1)]) {
	case `"`:
		kind = "string"
	case "[":
		kind = "array"
	case "{":
		kind = "object"
	case "t", "f":
		kind = "bool"
	case "n":
		return &json.UnmarshalTypeError{Value: "null", Type: want}
	}
	const maxShown = 40
	if len(b) > maxShown {
		b = b[:maxShown]
	}
	return &json.UnmarshalTypeError{Value: kind + " " + string(b), Type: want}
}

func decodeJSONEvent(b []byte, out *RouterEvent) error {
	var j jsonRouterEvent
	if err := json.Unmarshal(b, &j); err != nil {
		return jsonErr(err)
	}
	if j.WorkerID == nil {
		return malformed("missing worker_id")
	}
	out.WorkerID = uint64(*j.WorkerID)
	if j.StorageTier != nil {
		out.StorageTier = wireTier(jsonString(j.StorageTier))
	}
	if j.ResidencyDomain != nil {
		out.Residency = wireResidency(jsonString(j.ResidencyDomain))
	}
	if j.SessionID != nil {
		out.SessionID = *j.SessionID
	}
	if j.Event == nil {
		return malformed("missing event")
	}
	return at("event", decodeJSONCacheEvent(j.Event, &out.Event))
}

func decodeJSONCacheEvent(j *jsonCacheEvent, out *CacheEvent) error {
	if j.EventID == nil {
		return malformed("missing event_id")
	}
	out.EventID = uint64(*j.EventID)
	if j.DpRank != nil {
		out.DpRank = uint32(*j.DpRank)
	}
	if j.Data == nil || isJSONNull(j.Data) {
		return malformed("missing data")
	}
	return at("data", decodeJSONData(j.Data, out))
}

// decodeJSONData decodes the externally tagged data enum: the bare string
// "cleared", or a one-entry object {"stored": …} / {"removed": …} /
// {"cleared": null}.
func decodeJSONData(raw json.RawMessage, out *CacheEvent) error {
	raw = bytes.TrimSpace(raw)
	if raw[0] == '"' {
		var tag string
		if err := json.Unmarshal(raw, &tag); err != nil {
			return jsonErr(err)
		}
		if tag != "cleared" {
			return malformed("unknown unit variant %q", tag)
		}
		out.Kind = kv.Cleared
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return malformed("want \"cleared\" or a one-entry object")
	}
	if len(m) != 1 {
		return malformed("want a one-entry object, got %d entries", len(m))
	}
	for tag, v := range m {
		switch tag {
		case "stored":
			out.Kind = kv.Stored
			return at("stored", decodeJSONStored(v, &out.Stored))
		case "removed":
			out.Kind = kv.Removed
			return at("removed", decodeJSONRemoved(v, out))
		case "cleared":
			if !isJSONNull(v) {
				return malformed("cleared carries a value")
			}
			out.Kind = kv.Cleared
			return nil
		default:
			return malformed("unknown variant %q", tag)
		}
	}
	return nil
}

func decodeJSONStored(raw json.RawMessage, out *StoreData) error {
	var j jsonStored
	if err := json.Unmarshal(raw, &j); err != nil {
		return jsonErr(err)
	}
	if j.ParentHash != nil {
		out.HasParent, out.Parent = true, uint64(*j.ParentHash)
	}
	if j.StartPosition != nil {
		out.HasStart, out.StartPosition = true, uint32(*j.StartPosition)
	}
	if j.Blocks == nil {
		return malformed("missing blocks")
	}
	blocks := *j.Blocks
	if len(blocks) > MaxBlocksPerEvent {
		return at("blocks", &LimitError{What: "blocks", Got: len(blocks), Min: 0, Max: MaxBlocksPerEvent})
	}
	out.Blocks = make([]StoredBlock, len(blocks))
	for i := range blocks {
		if err := decodeJSONBlock(&blocks[i], &out.Blocks[i]); err != nil {
			return at("blocks["+strconv.Itoa(i)+"]", err)
		}
	}
	return nil
}

func decodeJSONBlock(j *jsonBlock, out *StoredBlock) error {
	if j.BlockHash == nil {
		return malformed("missing block_hash")
	}
	if j.TokensHash == nil {
		return malformed("missing tokens_hash")
	}
	out.BlockHash, out.TokensHash = uint64(*j.BlockHash), uint64(*j.TokensHash)
	if j.MMExtraInfo == nil {
		return nil
	}
	if j.MMExtraInfo.MMObjects == nil {
		return at("mm_extra_info", malformed("missing mm_objects"))
	}
	objs := *j.MMExtraInfo.MMObjects
	if len(objs) > MaxMMObjectsPerBlock {
		return at("mm_extra_info", &LimitError{What: "mm objects", Got: len(objs), Min: 0, Max: MaxMMObjectsPerBlock})
	}
	info := &MMExtraInfo{Objects: make([]MMObject, len(objs))}
	for i, o := range objs {
		path := "mm_extra_info: mm_objects[" + strconv.Itoa(i) + "]"
		switch {
		case o.MMHash == nil:
			return at(path, malformed("missing mm_hash"))
		case o.Offsets == nil:
			return at(path, malformed("missing offsets"))
		case len(*o.Offsets) > MaxMMObjectsPerBlock:
			return at(path, &LimitError{What: "offsets", Got: len(*o.Offsets), Min: 0, Max: MaxMMObjectsPerBlock})
		}
		obj := MMObject{Hash: uint64(*o.MMHash), Offsets: make([][2]uint64, len(*o.Offsets))}
		for k, r := range *o.Offsets {
			if len(r) != 2 {
				return at(path, malformed("offsets[%d]: want [start, end], got %d values", k, len(r)))
			}
			obj.Offsets[k] = [2]uint64{uint64(r[0]), uint64(r[1])}
		}
		info.Objects[i] = obj
	}
	out.MM = info
	return nil
}

func decodeJSONRemoved(raw json.RawMessage, out *CacheEvent) error {
	var j jsonRemoved
	if err := json.Unmarshal(raw, &j); err != nil {
		return jsonErr(err)
	}
	if j.BlockHashes == nil {
		return malformed("missing block_hashes")
	}
	hs := *j.BlockHashes
	if len(hs) > MaxBlocksPerEvent {
		return at("block_hashes", &LimitError{What: "block hashes", Got: len(hs), Min: 0, Max: MaxBlocksPerEvent})
	}
	out.Removed = make([]uint64, len(hs))
	for i, h := range hs {
		out.Removed[i] = uint64(h)
	}
	return nil
}

func isJSONNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// jsonString reads a raw value as a string, saying whether it was one.
func jsonString(raw json.RawMessage) (string, bool) {
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err == nil && !isJSONNull(raw)
}

// jsonErr turns an encoding/json error into a malformed-input error, keeping
// the errors our own field types returned.
func jsonErr(err error) error {
	var me *malformedError
	if errors.As(err, &me) {
		return me
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return malformed("%s: want %s, got %s", te.Field, jsonWant(te.Type), te.Value)
	}
	return malformed("%v", err)
}

// jsonWant names what a Go type decodes from.
func jsonWant(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[jsonU64]():
		return "unsigned 64-bit integer"
	case reflect.TypeFor[jsonU32]():
		return "unsigned 32-bit integer"
	case reflect.TypeFor[jsonHash]():
		return "64-bit integer hash"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	}
	return t.Kind().String()
}

// AppendJSON appends e as one CUR-shape JSON RouterEvent to dst and returns
// it: worker_id, storage_tier, residency_domain (only when present), event
// {event_id, data, dp_rank}, session_id (only when non-empty); stored data
// always carries parent_hash, start_position and per-block mm_extra_info,
// null when absent. An event that fails Validate is not encoded.
func AppendJSON(dst []byte, e *RouterEvent) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return dst, err
	}
	dst = append(dst, `{"worker_id":`...)
	dst = strconv.AppendUint(dst, e.WorkerID, 10)
	if e.StorageTier == TierUnknown {
		dst = append(dst, `,"storage_tier":null`...)
	} else {
		dst = append(dst, `,"storage_tier":"`...)
		dst = append(dst, e.StorageTier.String()...)
		dst = append(dst, '"')
	}
	switch e.Residency {
	case ResidencyAbsent:
	case ResidencyUnsupported:
		dst = append(dst, `,"residency_domain":null`...)
	default:
		dst = append(dst, `,"residency_domain":"`...)
		dst = append(dst, e.Residency.String()...)
		dst = append(dst, '"')
	}
	c := &e.Event
	dst = append(dst, `,"event":{"event_id":`...)
	dst = strconv.AppendUint(dst, c.EventID, 10)
	dst = append(dst, `,"data":`...)
	switch c.Kind {
	case kv.Stored:
		dst = appendJSONStored(dst, &c.Stored)
	case kv.Removed:
		dst = append(dst, `{"removed":{"block_hashes":[`...)
		for i, h := range c.Removed {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendUint(dst, h, 10)
		}
		dst = append(dst, "]}}"...)
	case kv.Cleared:
		dst = append(dst, `"cleared"`...)
	}
	dst = append(dst, `,"dp_rank":`...)
	dst = strconv.AppendUint(dst, uint64(c.DpRank), 10)
	dst = append(dst, '}')
	if e.SessionID != "" {
		q, _ := json.Marshal(e.SessionID) // a string always marshals
		dst = append(dst, `,"session_id":`...)
		dst = append(dst, q...)
	}
	return append(dst, '}'), nil
}

func appendJSONStored(dst []byte, s *StoreData) []byte {
	dst = append(dst, `{"stored":{"parent_hash":`...)
	dst = appendJSONOptUint(dst, s.HasParent, s.Parent)
	dst = append(dst, `,"start_position":`...)
	dst = appendJSONOptUint(dst, s.HasStart, uint64(s.StartPosition))
	dst = append(dst, `,"blocks":[`...)
	for i := range s.Blocks {
		b := &s.Blocks[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"block_hash":`...)
		dst = strconv.AppendUint(dst, b.BlockHash, 10)
		dst = append(dst, `,"tokens_hash":`...)
		dst = strconv.AppendUint(dst, b.TokensHash, 10)
		dst = append(dst, `,"mm_extra_info":`...)
		dst = appendJSONMM(dst, b.MM)
		dst = append(dst, '}')
	}
	return append(dst, "]}}"...)
}

func appendJSONMM(dst []byte, m *MMExtraInfo) []byte {
	if m == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, `{"mm_objects":[`...)
	for i, o := range m.Objects {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"mm_hash":`...)
		dst = strconv.AppendUint(dst, o.Hash, 10)
		dst = append(dst, `,"offsets":[`...)
		for k, r := range o.Offsets {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '[')
			dst = strconv.AppendUint(dst, r[0], 10)
			dst = append(dst, ',')
			dst = strconv.AppendUint(dst, r[1], 10)
			dst = append(dst, ']')
		}
		dst = append(dst, "]}"...)
	}
	return append(dst, "]}"...)
}

func appendJSONOptUint(dst []byte, ok bool, v uint64) []byte {
	if !ok {
		return append(dst, "null"...)
	}
	return strconv.AppendUint(dst, v, 10)
}
