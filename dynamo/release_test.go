package dynamo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/goindex/goindex/goindex/kv"
)

// debianPython is Debian's interpreter, which has python3-msgpack (build.sh
// DEBS); the python3 on PATH may be a shim without it.
const debianPython = "/usr/bin/python3"

// TestReleases_FixturesAreWhatPythonMsgpackWrites regenerates the release
// fixtures with Debian's python3-msgpack and requires the committed bytes:
// the decoders are tested on a real msgpack library's output, not ours.
func TestReleases_FixturesAreWhatPythonMsgpackWrites(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command(debianPython, filepath.Join("testdata", "releases", "releases.py"), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("releases.py: %v\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.msgpack"))
	if len(files) != 6 {
		t.Fatalf("releases.py wrote %d fixtures, want 6", len(files))
	}
	for _, f := range files {
		got, _ := os.ReadFile(f)
		want := golden(t, filepath.Join("releases", filepath.Base(f)))
		if !bytes.Equal(got, want) {
			t.Errorf("releases.py %s = %x, committed %x", filepath.Base(f), got, want)
		}
	}
}

func stored1(worker uint64, id uint64, rank uint32, tier StorageTier, res Residency, session string, blocks ...[2]uint64) RouterEvent {
	ev := RouterEvent{WorkerID: worker, StorageTier: tier, Residency: res, SessionID: session,
		Event: CacheEvent{EventID: id, Kind: kv.Stored, DpRank: rank}}
	for _, b := range blocks {
		ev.Event.Stored.Blocks = append(ev.Event.Stored.Blocks, StoredBlock{BlockHash: b[0], TokensHash: b[1]})
	}
	return ev
}

// TestDecodeMessage_EveryReleaseShape decodes one message per released
// payload shape without being told the release: a single event (v1.3), a
// batch (v1.4), residency and other tiers (v1.5), session ids and both
// forms of the cleared variant (v1.7).
func TestDecodeMessage_EveryReleaseShape(t *testing.T) {
	cases := []struct {
		file string
		seq  uint64
		want []RouterEvent
	}{
		{"v1.3-component-single.msgpack", 0, []RouterEvent{stored1(3, 1, 0, TierDevice, ResidencyAbsent, "", [2]uint64{0x1301, 0xA1}, [2]uint64{0x1302, 0xA2})}},
		{"v1.4-endpoint-batch.msgpack", 1, []RouterEvent{
			stored1(4, 1, 1, TierDevice, ResidencyAbsent, "", [2]uint64{0x1401, 0xB1}, [2]uint64{0x1402, 0xB2}, [2]uint64{0x1403, 0xB3}),
			{WorkerID: 4, Event: CacheEvent{EventID: 2, Kind: kv.Removed, Removed: []uint64{0x1403}, DpRank: 1}},
		}},
		{"v1.5-endpoint-residency.msgpack", 2, []RouterEvent{
			stored1(5, 1, 0, TierDevice, ResidencyWorker, "", [2]uint64{0x1501, 0xC1}),
			stored1(5, 2, 0, TierHostPinned, ResidencyWorker, "", [2]uint64{0x1502, 0xC2}),
			{WorkerID: 6, Residency: ResidencyWorker, Event: CacheEvent{EventID: 3, Kind: kv.Cleared}},
		}},
		{"v1.7-endpoint-session.msgpack", 3, []RouterEvent{
			{WorkerID: 7, Residency: ResidencyWorker, Event: CacheEvent{EventID: 1, Kind: kv.Cleared}},
			stored1(7, 2, 0, TierDevice, ResidencyWorker, "s-9", [2]uint64{0x1701, 0xD1}, [2]uint64{0x1702, 0xD2}),
		}},
	}
	for _, c := range cases {
		env, evs, err := DecodeMessage(golden(t, filepath.Join("releases", c.file)))
		if err != nil {
			t.Errorf("DecodeMessage(%s): %v", c.file, err)
			continue
		}
		if env.PublisherID != 1<<53-1 || env.Sequence != c.seq || env.Topic != EventTopic || env.PublishedAtMs != 1767225600000 {
			t.Errorf("DecodeMessage(%s) envelope = %+v, want publisher 2^53-1, sequence %d, topic kv-events", c.file, env, c.seq)
		}
		if !reflect.DeepEqual(evs, c.want) {
			t.Errorf("DecodeMessage(%s) events =\n%+v\nwant\n%+v", c.file, evs, c.want)
		}
	}
}

// TestDecodeMessage_UnsupportedEventsAreLeftToTheCaller decodes a batch in
// which Dynamo's residency rules refuse some events (python3-msgpack
// bytes): the message decodes whole, each event keeps what its wire said,
// and TargetsPrimary sorts them as Dynamo's router does.
func TestDecodeMessage_UnsupportedEventsAreLeftToTheCaller(t *testing.T) {
	_, evs, err := DecodeMessage(golden(t, filepath.Join("releases", "v1.7-residency-mixed.msgpack")))
	if err != nil {
		t.Fatalf("DecodeMessage: %v", err)
	}
	want := []struct {
		tier      StorageTier
		residency Residency
		primary   bool
		err       error
	}{
		{TierDevice, ResidencyWorker, true, nil},
		{TierDevice, ResidencyUnsupported, false, ErrUnsupportedResidency},
		{TierDevice, ResidencyUnsupported, false, ErrUnsupportedResidency},
		{TierDevice, ResidencyCacheOwner, false, ErrUnsupportedResidency},
		{TierHostPinned, ResidencyCacheOwner, false, nil},
		{TierUnknown, ResidencyAbsent, false, ErrUnknownStorageTier},
		{TierDevice, ResidencyWorker, true, nil},
		{TierDevice, ResidencyCacheOwner, false, nil},
		{TierDevice, ResidencyAbsent, true, nil},
		{TierDisk, ResidencyAbsent, true, nil},
	}
	if len(evs) != len(want) {
		t.Fatalf("decoded %d events, want %d", len(evs), len(want))
	}
	for i, w := range want {
		ev := &evs[i]
		primary, err := ev.TargetsPrimary()
		if ev.Event.EventID != uint64(i+1) || ev.StorageTier != w.tier || ev.Residency != w.residency || primary != w.primary || !errors.Is(err, w.err) || (err == nil) != (w.err == nil) {
			t.Errorf("event %d: id %d, tier %v, residency %q, TargetsPrimary %v, %v; want id %d, %v, %q, %v, %v",
				i, ev.Event.EventID, ev.StorageTier, ev.Residency, primary, err, i+1, w.tier, w.residency, w.primary, w.err)
		}
	}
	// Re-encoded, an unsupported residency stays unsupported (written as
	// nil, as Dynamo writes an invalid one).
	b, err := AppendMsgpackEvents(nil, evs[:5])
	if err != nil {
		t.Fatalf("AppendMsgpackEvents: %v", err)
	}
	back, err := DecodeMsgpackEvents(b)
	if err != nil || !reflect.DeepEqual(back, evs[:5]) {
		t.Errorf("round trip = %+v, %v; want %+v", back, err, evs[:5])
	}
	// The JSON decoder reads the same fields the same way.
	for in, want := range map[string][2]uint8{
		`{"worker_id":1,"residency_domain":null,"event":{"event_id":1,"data":"cleared"}}`:                                   {uint8(TierDevice), uint8(ResidencyUnsupported)},
		`{"worker_id":1,"residency_domain":3,"event":{"event_id":1,"data":"cleared"}}`:                                      {uint8(TierDevice), uint8(ResidencyUnsupported)},
		`{"worker_id":1,"residency_domain":"rack","event":{"event_id":1,"data":"cleared"}}`:                                 {uint8(TierDevice), uint8(ResidencyUnsupported)},
		`{"worker_id":1,"storage_tier":"ssd","event":{"event_id":1,"data":"cleared"}}`:                                      {uint8(TierUnknown), uint8(ResidencyAbsent)},
		`{"worker_id":1,"storage_tier":null,"event":{"event_id":1,"data":"cleared"}}`:                                       {uint8(TierUnknown), uint8(ResidencyAbsent)},
		`{"worker_id":1,"storage_tier":"unknown","residency_domain":"cache_owner","event":{"event_id":1,"data":"cleared"}}`: {uint8(TierUnknown), uint8(ResidencyCacheOwner)},
	} {
		ev, err := DecodeJSON([]byte(in))
		if err != nil || uint8(ev.StorageTier) != want[0] || uint8(ev.Residency) != want[1] {
			t.Errorf("DecodeJSON(%s) = tier %v, residency %q, %v; want %v, %q", in, ev.StorageTier, ev.Residency, err, StorageTier(want[0]), Residency(want[1]))
		}
	}
}

func TestDecodeActiveLoad_ReleaseFixture(t *testing.T) {
	env, err := DecodeEnvelope(golden(t, filepath.Join("releases", "v1.6-active-load.msgpack")))
	if err != nil || env.Topic != MetricsTopic {
		t.Fatalf("DecodeEnvelope(v1.6-active-load) = %+v, %v; want topic kv_metrics", env, err)
	}
	got, err := DecodeActiveLoad(env.Payload)
	want := ActiveLoad{WorkerID: 4, DpRank: 1, HasKVUsedBlocks: true, KVUsedBlocks: 321}
	if err != nil || got != want {
		t.Errorf("DecodeActiveLoad = %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range [][]byte{{0x80}, {0x81, 0xa9, 'w', 'o', 'r', 'k', 'e', 'r', '_', 'i', 'd', 0xa1, 'x'}, {0x91, 0x01}, make([]byte, maxActiveLoadBytes+1)} {
		if _, err := DecodeActiveLoad(bad); err == nil {
			t.Errorf("DecodeActiveLoad(%x) = nil error, want one", bad[:min(len(bad), 16)])
		}
	}
}

// planeFrames builds an event-plane message by the spec's layout.
func planeFrames(topic string, pub, seq uint64, envelope []byte) [][]byte {
	return [][]byte{[]byte(topic), binary.BigEndian.AppendUint64(nil, pub), binary.BigEndian.AppendUint64(nil, seq), frame(envelope)}
}

func TestDecodePlane_FramesAndIdentity(t *testing.T) {
	env := golden(t, filepath.Join("releases", "v1.4-endpoint-batch.msgpack")) // publisher 2^53-1, sequence 1
	const pub = 1<<53 - 1
	scope := Scope{Namespace: "dyn.ns", Component: "backend", Endpoint: "generate"}
	m, err := DecodePlane(planeFrames(EventTopic, pub, 1, env))
	if err != nil || m.PublisherID != pub || m.Sequence != 1 || m.Topic != EventTopic {
		t.Fatalf("DecodePlane = %+v, %v", m, err)
	}
	if err := m.CheckIdentity(scope, EventTopic, pub); err != nil {
		t.Errorf("CheckIdentity(direct, discovered) = %v", err)
	}
	if err := m.CheckIdentity(scope, EventTopic, 0); err != nil {
		t.Errorf("CheckIdentity(direct, any publisher) = %v", err)
	}
	broker, err := DecodePlane(planeFrames(scope.Subject(EventTopic), pub, 1, env))
	if err != nil || broker.CheckIdentity(scope, EventTopic, 0) != nil || PlaneTopic(broker.Topic) != EventTopic {
		t.Errorf("broker-mode frame 0 %q: %v / %v", broker.Topic, err, broker.CheckIdentity(scope, EventTopic, 0))
	}
	mismatches := []struct {
		name   string
		frames [][]byte
		pub    uint64
		topic  string
	}{
		{"frame publisher", planeFrames(EventTopic, pub-1, 1, env), 0, EventTopic},
		{"frame sequence", planeFrames(EventTopic, pub, 2, env), 0, EventTopic},
		{"discovered publisher", planeFrames(EventTopic, pub, 1, env), 77, EventTopic},
		{"frame topic", planeFrames("kv-event", pub, 1, env), 0, EventTopic},
		{"other scope's subject", planeFrames(Scope{Namespace: "x", Component: "backend"}.Subject(EventTopic), pub, 1, env), 0, EventTopic},
		{"envelope topic", planeFrames(MetricsTopic, pub, 1, env), 0, MetricsTopic},
	}
	for _, c := range mismatches {
		m, err := DecodePlane(c.frames)
		if err != nil {
			t.Errorf("%s: DecodePlane: %v", c.name, err)
			continue
		}
		if err := m.CheckIdentity(scope, c.topic, c.pub); !errors.Is(err, ErrIdentity) {
			t.Errorf("%s: CheckIdentity = %v, want ErrIdentity", c.name, err)
		}
	}
	good := planeFrames(EventTopic, pub, 1, env)
	bad := []struct {
		name   string
		frames [][]byte
		want   error
	}{
		{"3 frames", good[:3], ErrFrameCount},
		{"5 frames", append(append([][]byte{}, good...), nil), ErrFrameCount},
		{"7-byte publisher", [][]byte{good[0], good[1][1:], good[2], good[3]}, ErrFrameHeader},
		{"9-byte sequence", [][]byte{good[0], good[1], append([]byte{0}, good[2]...), good[3]}, ErrFrameHeader},
		{"no header", [][]byte{good[0], good[1], good[2], env}, ErrFrameHeader},
		{"version 2", [][]byte{good[0], good[1], good[2], append([]byte{2}, good[3][1:]...)}, ErrFrameHeader},
		{"short payload", [][]byte{good[0], good[1], good[2], good[3][:len(good[3])-1]}, ErrFrameHeader},
		{"header only", [][]byte{good[0], good[1], good[2], good[3][:4]}, ErrFrameHeader},
		{"framed twice", [][]byte{good[0], good[1], good[2], frame(good[3])}, ErrFrameHeader},
	}
	for _, c := range bad {
		if _, err := DecodePlane(c.frames); !errors.Is(err, c.want) {
			t.Errorf("%s: DecodePlane = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestScope_SubjectsAndChannelPrefixes(t *testing.T) {
	cases := []struct{ name, got, want string }{
		{"namespace", Scope{Namespace: "dynamo"}.Subject(MetricsTopic), "namespace.dynamo.kv_metrics"},
		{"component", Scope{Namespace: "dynamo", Component: "backend"}.Subject(EventTopic), "namespace.dynamo.component.backend.kv-events"},
		{"endpoint", Scope{Namespace: "dynamo", Component: "backend", Endpoint: "generate"}.Subject(EventTopic),
			"namespace.dynamo.component.backend.endpoint.generate.kv-events"},
		{"endpoint escaped", Scope{Namespace: "a.b", Component: "c d", Endpoint: "gen.x"}.Subject(EventTopic),
			"namespace.a%2Eb.component.c%20d.endpoint.gen%2Ex.kv-events"},
		{"endpoint ignored without component", Scope{Namespace: "n", Endpoint: "e"}.Subject(EventTopic), "namespace.n.kv-events"},
		{"channel prefix", Scope{Namespace: "dynamo", Component: "backend", Endpoint: "generate"}.ChannelPrefix(EventTopic),
			"v1/event_channels/namespace/dynamo/component/backend/endpoint/generate/topic/kv-events/"},
		{"channel prefix component", Scope{Namespace: "a.b", Component: "backend"}.ChannelPrefix(MetricsTopic),
			"v1/event_channels/namespace/a%2Eb/component/backend/topic/kv_metrics/"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
}
