package wsplugin

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goindex/goindex/dynamo/selector"
	"github.com/goindex/goindex/tests/c/fixture"
)

// writePluginReplica writes fixture.WriteRatesReplica's file at path.
func writePluginReplica(t *testing.T, path string, ready bool, recv time.Time) {
	t.Helper()
	if err := fixture.WriteRatesReplica(path, ready, recv); err != nil {
		t.Fatalf("WriteRatesReplica(%s): %v", path, err)
	}
}

// replicaCands are two workers: worker 2 holds 1280 of the 1600 prompt
// tokens behind a queue of 1000. At the config's rates (prefill 40
// tokens/ms, queue 20) the queue costs more than the cache saves (50 vs 32
// ms); at the DC's measured ones (prefill 10, queue 40 over 2 workers) it
// costs less (50 vs 128 ms).
var replicaCands = []selector.Candidate{
	{WorkerID: 1, HasCachedTokens: true, HasLoad: true, TotalKVBlocks: selector.Unavailable},
	{WorkerID: 2, HasCachedTokens: true, CachedTokens: 1280, HasLoad: true, ActivePrefillTokens: 1000, TotalKVBlocks: selector.Unavailable},
}

func replicaConfig(path string, dc int) string {
	return fmt.Sprintf(`{"prefill_tokens_per_ms": 40, "queue_tokens_per_ms": 20, "replica": %q, "dc": %d, "max_staleness_ms": 600000}`, path, dc)
}

// selectOnce runs one select over replicaCands and returns its status,
// index and message.
func selectOnce(st cU64) (wsStatus, cSize, string) {
	eb, buf := errBuf(512)
	idx := cSize(77)
	rc := dynamoSelectorSelect(st, newColumns(replicaCands, 1600).build(), &idx, eb)
	return rc, idx, errText(eb, buf)
}

// With a replica configured, the DC's measured rates decide: the choice is
// the one those rates give, not the config's.
func TestPlugin_ReplicaRatesSteerTheChoice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.replica")
	writePluginReplica(t, path, true, time.Now())
	if rc, idx, msg := selectOnce(pluginStateT(t, replicaConfig(path, 3))); rc != wsOK || idx != 1 {
		t.Errorf("select with the DC's measured rates = %d, index %d (%s); want OK, 1", rc, idx, msg)
	}
	// The same config without the replica: the config's rates choose 0.
	if rc, idx, msg := selectOnce(pluginStateT(t, `{"prefill_tokens_per_ms": 40, "queue_tokens_per_ms": 20}`)); rc != wsOK || idx != 0 {
		t.Errorf("select with the config's rates = %d, index %d (%s); want OK, 0", rc, idx, msg)
	}
}

// A replica the follower finds unusable makes select USE_DEFAULT with its
// verdict (dynamo/selector's tests go through every verdict), and a
// replica that appears later is attached at one of the follower's next
// checks.
func TestPlugin_ReplicaMissingIsUseDefaultUntilItAppears(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("not a replica "), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, config, detail string }{
		{"missing file", replicaConfig(filepath.Join(dir, "absent"), 3), "replica-missing: follow: no replica"},
		{"not a replica file", replicaConfig(garbage, 3), "replica-damaged"},
	} {
		st := pluginStateT(t, c.config)
		if rc, idx, msg := selectOnce(st); rc != wsUseDefault || idx != 77 || !strings.Contains(msg, c.detail) {
			t.Errorf("%s: select = %d, index %d, %q; want USE_DEFAULT mentioning %q", c.name, rc, idx, msg, c.detail)
		}
	}

	late := filepath.Join(dir, "late")
	st := pluginStateT(t, replicaConfig(late, 3))
	if rc, _, _ := selectOnce(st); rc != wsUseDefault {
		t.Fatalf("select before the replica exists = %d, want USE_DEFAULT", rc)
	}
	writePluginReplica(t, late, true, time.Now())
	deadline := time.Now().Add(20 * time.Second)
	for {
		rc, idx, msg := selectOnce(st)
		if rc == wsOK && idx == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("select after the replica appeared = %d, index %d (%s); want OK, 1 once the follower checks again", rc, idx, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
