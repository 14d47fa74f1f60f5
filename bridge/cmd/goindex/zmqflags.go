package main

import (
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/goindex/goindex/bridge/discovery"
	"github.com/goindex/goindex/bridge/zmqfeed"
	"github.com/goindex/goindex/dynamo"
)

// zmqPlaneFlags are the inputs of Dynamo's ZMQ event plane that relay and
// record share: discovery (etcd, with its credentials, Kubernetes or the
// file store), static publishers and brokers.
type zmqPlaneFlags struct {
	etcd, etcdUser, etcdPassword, etcdCA, etcdCert, etcdKey *string
	kube                                                    *bool
	kubeNamespace, fileKV, publishers, broker               *string
	findBrokers                                             *bool
	maxBytes                                                *int64
	recvHWM                                                 *int
}

func addZMQPlaneFlags(fs *flag.FlagSet) zmqPlaneFlags {
	return zmqPlaneFlags{
		etcd:         fs.String("etcd", os.Getenv("ETCD_ENDPOINTS"), "ZMQ event plane: discover publishers in etcd at these comma-separated URLs (default: $ETCD_ENDPOINTS)"),
		etcdUser:     fs.String("etcd-user", os.Getenv("ETCD_AUTH_USERNAME"), "etcd authentication: user name, with --etcd-password (default: $ETCD_AUTH_USERNAME)"),
		etcdPassword: fs.String("etcd-password", os.Getenv("ETCD_AUTH_PASSWORD"), "etcd authentication: password (default: $ETCD_AUTH_PASSWORD; prefer it or --config to the command line)"),
		etcdCA:       fs.String("etcd-ca", os.Getenv("ETCD_AUTH_CA"), "etcd TLS: PEM file of the CAs that sign etcd's certificate (default: $ETCD_AUTH_CA; https:// endpoints without it: the system's roots)"),
		etcdCert:     fs.String("etcd-cert", os.Getenv("ETCD_AUTH_CLIENT_CERT"), "etcd mutual TLS: client certificate PEM file, with --etcd-key (default: $ETCD_AUTH_CLIENT_CERT)"),
		etcdKey:      fs.String("etcd-key", os.Getenv("ETCD_AUTH_CLIENT_KEY"), "etcd mutual TLS: client key PEM file (default: $ETCD_AUTH_CLIENT_KEY)"),
		kube: fs.Bool("kube", strings.EqualFold(strings.TrimSpace(os.Getenv("DYN_DISCOVERY_BACKEND")), "kubernetes"),
			"ZMQ event plane: discover publishers in Kubernetes DynamoWorkerMetadata resources (in-cluster; default: $DYN_DISCOVERY_BACKEND=kubernetes)"),
		kubeNamespace: fs.String("kube-namespace", "", "Kubernetes namespace of the workers' resources (default: the pod's own)"),
		fileKV: fs.String("file-kv", fileStoreDefault(os.Getenv("DYN_DISCOVERY_BACKEND"), os.Getenv("DYN_FILE_KV")),
			"ZMQ event plane: discover publishers in Dynamo's file store at this directory, as its workers started with "+
				"--discovery-backend file write it (default: with $DYN_DISCOVERY_BACKEND=file, $DYN_FILE_KV or $TMPDIR/dynamo_store_kv, as Dynamo's; else none)"),
		publishers: fs.String("zmq-publisher", "", "ZMQ event plane: comma-separated worker PUB endpoints (tcp://host:port) to subscribe to"),
		broker:     fs.String("zmq-broker", os.Getenv("DYN_ZMQ_BROKER_URL"), "ZMQ event plane: broker mode, xsub=<url>[;<url>…],xpub=<url>[;<url>…] (default: $DYN_ZMQ_BROKER_URL)"),
		findBrokers: fs.Bool("zmq-broker-discover", truthy(os.Getenv("DYN_ZMQ_BROKER_ENABLED")),
			"ZMQ event plane: broker mode with the brokers looked up in etcd (their zmq_broker records in the pool's namespace), as DYN_ZMQ_BROKER_ENABLED does (default: $DYN_ZMQ_BROKER_ENABLED); --zmq-broker wins"),
		maxBytes: fs.Int64("zmq-max-message-bytes", zmqfeed.DefaultMaxMessageBytes, "ZMQ: largest message part taken; a peer sending more is disconnected"),
		recvHWM: fs.Int("zmq-recv-hwm", zmqfeed.DefaultRecvHWM, "ZMQ: messages queued per publisher while this process is behind; past it the publisher's "+
			"messages are dropped (a sequence gap). Dynamo's own subscriber queues 100000; the memory one publisher can hold is "+
			"about this times its message size"),
	}
}

// config returns the feeds' configuration for the workers of scope.
func (z zmqPlaneFlags) config(scope dynamo.Scope, log *slog.Logger) zmqfeed.FeedsConfig {
	return zmqfeed.FeedsConfig{Scope: scope, Etcd: splitList(*z.etcd),
		EtcdCredentials: discovery.EtcdCredentials{Username: *z.etcdUser, Password: *z.etcdPassword, CAFile: *z.etcdCA,
			CertFile: *z.etcdCert, KeyFile: *z.etcdKey},
		Kube: *z.kube, KubeNamespace: *z.kubeNamespace, FileStore: *z.fileKV, Publishers: splitList(*z.publishers), Broker: *z.broker,
		FindBrokers: *z.findBrokers, MaxMessageBytes: *z.maxBytes, RecvHWM: *z.recvHWM, Logger: log}
}

// warnIfNATSOnly logs, when no ZMQ source was given (feeds is 0) and
// $DYN_EVENT_PLANE (eventPlane) is not "nats", that Dynamo publishes over
// ZMQ by default since v1.3: such a process hears the NATS subjects only,
// where a default deployment sends nothing.
func warnIfNATSOnly(log *slog.Logger, feeds int, eventPlane string) bool {
	if feeds > 0 || strings.EqualFold(strings.TrimSpace(eventPlane), "nats") {
		return false
	}
	log.Warn("no ZMQ event-plane source: only NATS subjects are read, but Dynamo v1.3 and later publish KV events over ZMQ "+
		"unless DYN_EVENT_PLANE=nats; give --etcd (or $ETCD_ENDPOINTS), --kube, --file-kv, --zmq-publisher or --zmq-broker",
		"DYN_EVENT_PLANE", eventPlane)
	return true
}

// fileStoreDefault is the file store Dynamo's own processes use: with the
// file discovery backend, $DYN_FILE_KV or $TMPDIR/dynamo_store_kv
// (lib/runtime storage/kv.rs); with any other backend, none.
func fileStoreDefault(backend, dir string) string {
	if !strings.EqualFold(strings.TrimSpace(backend), "file") {
		return ""
	}
	if dir != "" {
		return dir
	}
	return filepath.Join(os.TempDir(), "dynamo_store_kv")
}

// truthy reads an environment flag as Dynamo does: 1, true, yes or on, in
// any case (its older releases took only "true").
func truthy(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}
