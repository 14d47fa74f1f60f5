package demo

import (
	"time"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/goindex/kv"
)

// RouterEvent returns ev as the device-tier Dynamo RouterEvent a worker of
// member ev.Member would publish: the inverse of dynamo.RouterEvent.KV for
// worker-resident events. The result shares ev's Removed slice.
func RouterEvent(ev *kv.Event) dynamo.RouterEvent {
	re := dynamo.RouterEvent{
		WorkerID:    ev.Member.Worker,
		StorageTier: dynamo.TierDevice,
		Event:       dynamo.CacheEvent{EventID: ev.EventID, Kind: ev.Kind, DpRank: ev.Member.Rank},
	}
	switch ev.Kind {
	case kv.Stored:
		s := &re.Event.Stored
		s.HasParent, s.Parent = ev.HasParent, ev.Parent
		s.HasStart, s.StartPosition = ev.HasStart, ev.StartPosition
		s.Blocks = make([]dynamo.StoredBlock, len(ev.Blocks))
		for i, b := range ev.Blocks {
			s.Blocks[i] = dynamo.StoredBlock{BlockHash: b.External, TokensHash: b.Local}
		}
	case kv.Removed:
		re.Event.Removed = ev.Removed
	}
	return re
}

// Publisher numbers one worker's event-plane envelopes the way Dynamo's
// publisher does: a fixed publisher id and a sequence counting from 0.
// Not safe for concurrent use.
type Publisher struct {
	id   uint64
	next uint64
}

// NewPublisher returns a Publisher with the given publisher id.
func NewPublisher(id uint64) *Publisher { return &Publisher{id: id} }

// AppendEnvelope appends ev as the next msgpack EventEnvelope (topic
// kv-events, payload the msgpack RouterEvent, published_at = now) to dst and
// returns it. An event dynamo cannot encode consumes no sequence number.
func (p *Publisher) AppendEnvelope(dst []byte, ev *dynamo.RouterEvent, now time.Time) ([]byte, error) {
	payload, err := dynamo.AppendMsgpack(nil, ev)
	if err != nil {
		return dst, err
	}
	env := dynamo.Envelope{Topic: dynamo.EventTopic, PublisherID: p.id, Sequence: p.next,
		PublishedAtMs: uint64(now.UnixMilli()), Payload: payload}
	p.next++
	return dynamo.AppendEnvelope(dst, &env), nil
}
