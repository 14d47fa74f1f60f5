package zmqfeed

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/goindex/goindex/bridge/discovery"
	"github.com/goindex/goindex/bridge/relay"
	"github.com/goindex/goindex/dynamo"
)

// FeedsConfig is every ZMQ source of one pool, as goindex relay's flags
// name them.
type FeedsConfig struct {
	Scope dynamo.Scope // the pool's endpoint scope; required with any source
	// Etcd are the etcd endpoints publishers are discovered at; none: no
	// etcd discovery. EtcdCredentials are what a secured etcd asks for.
	// With Broker, discovery (etcd or Kube) follows the workers serving
	// the pool's endpoint instead (broker-mode publishers register no
	// channel): a worker whose instance record goes has its blocks
	// dropped.
	Etcd            []string
	EtcdCredentials discovery.EtcdCredentials
	// Kube discovers publishers in Kubernetes DynamoWorkerMetadata
	// resources (in-cluster) of KubeNamespace ("": the pod's own).
	Kube          bool
	KubeNamespace string
	// FileStore is the directory of Dynamo's file-store discovery
	// (DYN_FILE_KV, for workers started with --discovery-backend file)
	// publishers are discovered in; "": none.
	FileStore string
	// Publishers are static worker PUB endpoints; PublisherExpiry is
	// PlaneConfig's (0: never).
	Publishers      []string
	PublisherExpiry time.Duration
	// Broker is DYN_ZMQ_BROKER_URL's form, xsub=…,xpub=… ("": none); its
	// xpub endpoints are subscribed to.
	Broker string
	// FindBrokers is DYN_ZMQ_BROKER_ENABLED: without Broker, the brokers
	// are looked up in etcd (their channel records of component
	// zmq_broker in the pool's namespace, which Dynamo's broker writes
	// only there) and subscribed to as Broker's; it needs Etcd.
	FindBrokers bool
	// Engine is an engine without Dynamo (Endpoint and Replay ""): none.
	Engine EngineConfig
	// MaxMessageBytes bounds one inbound part of every feed and RecvHWM
	// the messages each socket queues; 0: the defaults.
	MaxMessageBytes int64
	RecvHWM         int
	Logger          *slog.Logger // optional; default: discard
}

// Feeds builds the pool's feeds: the engine's, then one Plane per
// discovery source (etcd, Kubernetes, then the file store), then one Plane for the static
// publishers and brokers together. No source gives no feed. An invalid
// source is an error (ErrBadConfig, or discovery's own) and builds
// nothing.
func Feeds(cfg FeedsConfig) ([]relay.Feed, error) {
	var planes []PlaneConfig
	findBrokers := cfg.FindBrokers && cfg.Broker == ""
	brokerMode := cfg.Broker != "" || findBrokers
	if findBrokers && len(cfg.Etcd) == 0 {
		return nil, fmt.Errorf("%w: looking the ZMQ brokers up (DYN_ZMQ_BROKER_ENABLED) needs etcd: Dynamo's brokers register only there; "+
			"give --etcd, or the brokers with --zmq-broker", ErrBadConfig)
	}
	if len(cfg.Etcd) > 0 {
		e, err := discovery.NewEtcd(discovery.EtcdConfig{Endpoints: cfg.Etcd, Scope: cfg.Scope,
			Workers: brokerMode, EtcdCredentials: cfg.EtcdCredentials, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		pc := PlaneConfig{Discovery: e}
		if findBrokers {
			pc.FindBrokers = e
		}
		planes = append(planes, pc)
	}
	if cfg.Kube {
		k, err := discovery.NewKube(discovery.KubeConfig{Namespace: cfg.KubeNamespace, Scope: cfg.Scope,
			Workers: brokerMode, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		planes = append(planes, PlaneConfig{Discovery: k})
	}
	if cfg.FileStore != "" {
		d, err := discovery.NewDir(discovery.DirConfig{Root: cfg.FileStore, Scope: cfg.Scope, Workers: brokerMode, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		planes = append(planes, PlaneConfig{Discovery: d})
	}
	static := PlaneConfig{PublisherExpiry: cfg.PublisherExpiry}
	for _, ep := range cfg.Publishers {
		static.Publishers = append(static.Publishers, discovery.Publisher{Endpoint: ep})
	}
	if cfg.Broker != "" {
		_, xpub, err := ParseBrokerURL(cfg.Broker)
		if err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
		static.Brokers = xpub
		if len(cfg.Etcd) == 0 && !cfg.Kube && cfg.FileStore == "" && cfg.Logger != nil {
			cfg.Logger.Warn("broker mode without discovery (--etcd, --kube or --file-kv): a worker that leaves keeps its blocks " +
				"until the relay restarts, since brokers do not forward a publisher's departure")
		}
	}
	if len(static.Publishers) > 0 || len(static.Brokers) > 0 {
		planes = append(planes, static)
	}
	var feeds []relay.Feed
	if cfg.Engine.Endpoint != "" || cfg.Engine.Replay != "" {
		ec := cfg.Engine
		ec.MaxMessageBytes, ec.RecvHWM, ec.Logger = cfg.MaxMessageBytes, cfg.RecvHWM, cfg.Logger
		e, err := NewEngine(ec)
		if err != nil {
			return nil, err
		}
		feeds = append(feeds, e)
	}
	for _, pc := range planes {
		pc.Scope, pc.MaxMessageBytes, pc.RecvHWM, pc.Logger = cfg.Scope, cfg.MaxMessageBytes, cfg.RecvHWM, cfg.Logger
		plane, err := NewPlane(pc)
		if err != nil {
			return nil, err
		}
		feeds = append(feeds, plane)
	}
	return feeds, nil
}
