package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/goindex/goindex/bridge/zmqfeed"
	"github.com/goindex/goindex/dynamo"
)

// zmqConfigFrom parses args into the ZMQ plane flags and returns the feeds'
// configuration they make.
func zmqConfigFrom(t *testing.T, args ...string) (etcd []string, user, broker string, findBrokers bool) {
	t.Helper()
	cfg := zmqFeedsFrom(t, args...)
	return cfg.Etcd, cfg.EtcdCredentials.Username, cfg.Broker, cfg.FindBrokers
}

// zmqFeedsFrom parses args into the ZMQ plane flags and returns the whole
// configuration they make.
func zmqFeedsFrom(t *testing.T, args ...string) zmqfeed.FeedsConfig {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	z := addZMQPlaneFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		t.Fatalf("parseFlags(%q): %v", args, err)
	}
	return z.config(dynamo.Scope{Namespace: "n", Component: "c", Endpoint: "e"}, slog.New(slog.DiscardHandler))
}

// TestZMQFlags_FileStoreFollowsDynamosBackend: --file-kv defaults to the
// file store Dynamo's own processes use, only when its discovery backend
// is the file store; --kube is on by default when the backend is
// Kubernetes.
func TestZMQFlags_FileStoreFollowsDynamosBackend(t *testing.T) {
	t.Setenv("TMPDIR", "/scratch")
	cases := []struct{ backend, dir, flag, want string }{
		{"file", "/shared/kv", "", "/shared/kv"},
		{"File", "", "", "/scratch/dynamo_store_kv"},
		{"etcd", "/shared/kv", "", ""},
		{"", "/shared/kv", "", ""},
		{"etcd", "", "--file-kv=/mine", "/mine"},
		{"file", "/shared/kv", "--file-kv=", ""},
	}
	for _, c := range cases {
		t.Setenv("DYN_DISCOVERY_BACKEND", c.backend)
		t.Setenv("DYN_FILE_KV", c.dir)
		var args []string
		if c.flag != "" {
			args = append(args, c.flag)
		}
		if got := zmqFeedsFrom(t, args...).FileStore; got != c.want {
			t.Errorf("DYN_DISCOVERY_BACKEND=%q DYN_FILE_KV=%q %v: file store %q, want %q", c.backend, c.dir, args, got, c.want)
		}
	}
	for backend, want := range map[string]bool{"kubernetes": true, " Kubernetes ": true, "etcd": false, "file": false, "": false} {
		t.Setenv("DYN_DISCOVERY_BACKEND", backend)
		if got := zmqFeedsFrom(t).Kube; got != want {
			t.Errorf("DYN_DISCOVERY_BACKEND=%q: Kubernetes discovery %v, want %v", backend, got, want)
		}
	}
	t.Setenv("DYN_DISCOVERY_BACKEND", "kubernetes")
	if zmqFeedsFrom(t, "--kube=false").Kube {
		t.Error("--kube=false beside DYN_DISCOVERY_BACKEND=kubernetes: Kubernetes discovery on")
	}
}

// TestZMQFlags_DynamoEnvironmentSetsTheDefaults sets the variables a Dynamo
// deployment already carries: they become the ZMQ plane's defaults, a
// GOINDEX_ variable beats them and the command line beats both.
func TestZMQFlags_DynamoEnvironmentSetsTheDefaults(t *testing.T) {
	t.Setenv("ETCD_ENDPOINTS", "http://etcd-a:2379,http://etcd-b:2379")
	t.Setenv("ETCD_AUTH_USERNAME", "dyn")
	t.Setenv("DYN_ZMQ_BROKER_URL", "xsub=tcp://b:5555,xpub=tcp://b:5556")
	t.Setenv("DYN_ZMQ_BROKER_ENABLED", "On")
	etcd, user, broker, find := zmqConfigFrom(t)
	if !slices.Equal(etcd, []string{"http://etcd-a:2379", "http://etcd-b:2379"}) || user != "dyn" ||
		broker != "xsub=tcp://b:5555,xpub=tcp://b:5556" || !find {
		t.Errorf("from Dynamo's environment: etcd %q, user %q, broker %q, discover brokers %v", etcd, user, broker, find)
	}
	t.Setenv("GOINDEX_ETCD", "http://goindex-etcd:2379")
	if etcd, _, _, _ = zmqConfigFrom(t); !slices.Equal(etcd, []string{"http://goindex-etcd:2379"}) {
		t.Errorf("GOINDEX_ETCD beside ETCD_ENDPOINTS: etcd %q, want GOINDEX_ETCD's", etcd)
	}
	if etcd, _, _, _ = zmqConfigFrom(t, "--etcd=http://flag:2379"); !slices.Equal(etcd, []string{"http://flag:2379"}) {
		t.Errorf("--etcd beside both variables: etcd %q, want the flag's", etcd)
	}
	for v, want := range map[string]bool{"1": true, "TRUE": true, " yes ": true, "on": true, "0": false, "false": false, "": false, "enabled": false} {
		t.Setenv("DYN_ZMQ_BROKER_ENABLED", v)
		if _, _, _, find = zmqConfigFrom(t); find != want {
			t.Errorf("DYN_ZMQ_BROKER_ENABLED=%q: discover brokers %v, want %v", v, find, want)
		}
	}
}

// TestRelayFlags_ReplicaSyncDefaultsToDynamosVariable reads relay's help
// under DYN_ROUTER_REPLICA_SYNC: the flag's default follows it.
func TestRelayFlags_ReplicaSyncDefaultsToDynamosVariable(t *testing.T) {
	for v, want := range map[string]bool{"true": true, "0": false} {
		t.Setenv("DYN_ROUTER_REPLICA_SYNC", v)
		var stdout, stderr bytes.Buffer
		_ = dispatch(context.Background(), []string{"relay", "--help"}, &stdout, &stderr)
		usage, ok := helpFlags(stdout.String() + stderr.String())["router-replica-sync"]
		if !ok {
			t.Fatalf("relay --help lists no --router-replica-sync")
		}
		if got := strings.Contains(usage, "(default true)"); got != want {
			t.Errorf("DYN_ROUTER_REPLICA_SYNC=%s: --router-replica-sync usage %q, want default true: %v", v, usage, want)
		}
	}
}
