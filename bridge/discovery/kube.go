package discovery

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/goindex/goindex/dynamo"
	"github.com/goindex/goindex/internal/backoff"
)

// In-cluster defaults (a pod's service account).
const (
	serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	// MaxKubeResponseBytes bounds one list response or watch event.
	MaxKubeResponseBytes = 64 << 20
	// kubeRecordDepth bounds how deep a resource's data is searched for
	// event channels.
	kubeRecordDepth = 8
)

// KubeConfig configures Kube. Every field has an in-cluster default.
type KubeConfig struct {
	// APIServer is the API server's URL; optional; default:
	// https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT.
	APIServer string
	// Namespace is the Kubernetes namespace of the workers' resources;
	// optional; default: the pod's own (service account namespace file).
	Namespace string
	// TokenFile and CAFile authenticate to the API server; optional;
	// defaults: the service account's token and CA ("" token: none).
	TokenFile, CAFile string
	// Scope is the pool's endpoint scope; required.
	Scope dynamo.Scope
	// Client overrides the HTTP client (tests); optional.
	Client *http.Client
	// RequestTimeout bounds one list (the watch stream is not bounded);
	// optional; default: DefaultRequestTimeout.
	RequestTimeout time.Duration
	// CheckEvery spaces the checks, while watching, that the API server
	// still answers (a list of at most one resource); a failed check ends
	// the watch and lists again. Optional; default: DefaultCheckEvery.
	CheckEvery time.Duration
	// RetryDelay is the wait before listing again after a failed list or
	// an interrupted watch; it doubles with each failure in a row up to
	// MaxRetryDelay, each wait jittered between half and all of it
	// (internal/backoff), and a list that succeeds resets it. Optional;
	// default: 1s.
	RetryDelay time.Duration
	// Workers follows the workers serving the pool's endpoint instead of
	// its event channels, as EtcdConfig.Workers does: each endpoint
	// instance record in a resource's data is a Publisher with Worker set,
	// gone when the record or its resource (deleted with the pod) goes.
	Workers bool
	// Logger receives skipped records and retries; optional.
	Logger *slog.Logger
}

// Kube follows the DynamoWorkerMetadata resources (group nvidia.com,
// version v1alpha1) through the API server's list and watch: with the
// Kubernetes discovery backend each worker pod publishes its discovery
// metadata as JSON in the resource's data, and there is no etcd
// (dynamo-current §1.7). Where in that JSON the event channels sit is
// [unverified], and so is whether data is an object or a JSON string and
// whether it sits under spec: every EventChannel record found within
// kubeRecordDepth levels of data or spec.data counts, as an object or a
// string (Dynamo's v1.2 fixture has an object at spec.data.event_channels).
// A channel counts when its scope, its "scope" field or, from v1.2 workers,
// its flat namespace and component, is one the pool reads (the same as
// Etcd's), a KV event source record ("type":"EventSource") when it
// names an endpoint of the pool's component; EndpointId is accepted as {namespace, component, name} or
// as "ns.comp.ep" (optionally "dyn://"-prefixed), also [unverified].
type Kube struct {
	cfg    KubeConfig
	client *http.Client
	token  string                           // the token last read from TokenFile (by Watch, or its check while a stream is read)
	scopes map[dynamo.Scope]map[string]bool // scope → topics read
	health health
}

// NewKube reads the in-cluster defaults that cfg leaves open; it does no
// network I/O.
func NewKube(cfg KubeConfig) (*Kube, error) {
	if err := checkPoolScope(cfg.Scope); err != nil {
		return nil, err
	}
	if cfg.APIServer == "" {
		host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
		if host == "" || port == "" {
			return nil, fmt.Errorf("%w: no API server: not in a cluster (KUBERNETES_SERVICE_HOST unset)", ErrBadConfig)
		}
		cfg.APIServer = "https://" + net.JoinHostPort(host, port)
		if cfg.TokenFile == "" {
			cfg.TokenFile = serviceAccountDir + "/token"
		}
		if cfg.CAFile == "" {
			cfg.CAFile = serviceAccountDir + "/ca.crt"
		}
	}
	if cfg.Namespace == "" {
		b, err := os.ReadFile(serviceAccountDir + "/namespace")
		if err != nil {
			return nil, fmt.Errorf("%w: no Kubernetes namespace given and none in the service account: %v", ErrBadConfig, err)
		}
		cfg.Namespace = strings.TrimSpace(string(b))
	}
	cfg.RequestTimeout, cfg.CheckEvery, cfg.Logger = sourceDefaults(cfg.RequestTimeout, cfg.CheckEvery, cfg.Logger)
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = retryEvery
	}
	k := &Kube{cfg: cfg, client: cfg.Client}
	if cfg.TokenFile != "" {
		b, err := os.ReadFile(cfg.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("%w: token: %v", ErrBadConfig, err)
		}
		k.token = strings.TrimSpace(string(b))
	}
	if k.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if cfg.CAFile != "" {
			pem, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, fmt.Errorf("%w: CA: %v", ErrBadConfig, err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%w: CA %s holds no certificate", ErrBadConfig, cfg.CAFile)
			}
			tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		k.client = &http.Client{Transport: tr}
	}
	sc := cfg.Scope
	component := dynamo.Scope{Namespace: sc.Namespace, Component: sc.Component}
	k.scopes = map[dynamo.Scope]map[string]bool{
		sc:                        {dynamo.EventTopic: true, dynamo.MetricsTopic: true},
		component:                 {dynamo.EventTopic: true},
		{Namespace: sc.Namespace}: {dynamo.MetricsTopic: true},
	}
	k.health.name = k.String()
	return k, nil
}

// Health implements Source.
func (k *Kube) Health() error { return k.health.state() }

// String names the source in logs.
func (k *Kube) String() string {
	return "kubernetes DynamoWorkerMetadata in " + k.cfg.Namespace + " at " + k.cfg.APIServer
}

func (k *Kube) resourceURL(query url.Values) string {
	u := strings.TrimSuffix(k.cfg.APIServer, "/") + "/apis/nvidia.com/v1alpha1/namespaces/" +
		url.PathEscape(k.cfg.Namespace) + "/dynamoworkermetadatas"
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	return u
}

func (k *Kube) get(ctx context.Context, query url.Values) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.resourceURL(query), nil)
	if err != nil {
		return nil, err
	}
	// The kubelet rotates a projected service account token in place
	// (within the hour in clusters that do not extend its expiry): read
	// the file again for every request, keeping the last token read when
	// the file cannot be.
	if k.cfg.TokenFile != "" {
		if b, err := os.ReadFile(k.cfg.TokenFile); err == nil {
			k.token = strings.TrimSpace(string(b))
		} else {
			k.cfg.Logger.Warn("kubernetes token not read again; using the last one", "file", k.cfg.TokenFile, "err", err)
		}
	}
	if k.token != "" {
		req.Header.Set("Authorization", "Bearer "+k.token)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, &statusError{code: resp.StatusCode, body: strings.TrimSpace(string(b))}
	}
	return resp, nil
}

// statusError is a non-200 answer of the API server.
type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string { return fmt.Sprintf("api server: %d %s", e.code, e.body) }

// kubeObject is the part of a DynamoWorkerMetadata resource read here.
type kubeObject struct {
	Metadata struct {
		Name            string `json:"name"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Data json.RawMessage `json:"data"`
	Spec struct {
		Data json.RawMessage `json:"data"`
	} `json:"spec"`
}

// Watch lists the resources, then watches them from the list's resource
// version; an expired version (410) or an ended stream lists again, and
// so does a failed check. A failed list (the API server unreachable, or
// refusing the token: 401, 403) is retried with backoff, the token read
// again each time (rotation, a fixed RBAC binding); each distinct failure
// is logged once, and so is the list that ends it. Watch returns only
// when ctx ends.
func (k *Kube) Watch(ctx context.Context, fn func(Update)) error {
	known := map[string]map[string]Publisher{} // resource name → key → publisher
	retry := backoff.Backoff{First: k.cfg.RetryDelay, Max: MaxRetryDelay}
	for ctx.Err() == nil {
		rv, err := k.list(ctx, known, fn)
		failed := err != nil
		if !failed {
			retry.Reset()
			if ended := k.health.succeeded(true); ended != nil {
				k.cfg.Logger.Info("kubernetes discovery listed again", "after", ended)
			}
			err = k.follow(ctx, rv, known, fn)
			failed = errors.As(err, new(*checkError))
		}
		if ctx.Err() != nil {
			return nil
		}
		wait := retry.Next()
		if failed {
			if k.health.failed(err) {
				k.cfg.Logger.Warn("kubernetes discovery failing; retrying with backoff", "err", err)
			}
		} else {
			retry.Reset() // an ended watch is no failure: the next list waits RetryDelay too
			k.cfg.Logger.Warn("kubernetes discovery interrupted; listing again", "err", err)
		}
		backoff.Sleep(ctx, wait)
	}
	return nil
}

func (k *Kube) list(ctx context.Context, known map[string]map[string]Publisher, fn func(Update)) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RequestTimeout)
	defer cancel()
	resp, err := k.get(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("list: %w", err)
	}
	defer resp.Body.Close()
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Items []kubeObject `json:"items"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxKubeResponseBytes)).Decode(&l); err != nil {
		return "", fmt.Errorf("list: %w", err)
	}
	seen := map[string]bool{}
	for i := range l.Items {
		seen[l.Items[i].Metadata.Name] = true
		k.apply(&l.Items[i], false, known, fn)
	}
	for name := range known {
		if !seen[name] {
			k.apply(&kubeObject{Metadata: struct {
				Name            string `json:"name"`
				ResourceVersion string `json:"resourceVersion"`
			}{Name: name}}, true, known, fn)
		}
	}
	return l.Metadata.ResourceVersion, nil
}

// follow applies the watch stream's events from resource version rv until
// the stream ends or a check of the API server fails (a server gone
// silent does not end a stream).
func (k *Kube) follow(ctx context.Context, rv string, known map[string]map[string]Publisher, fn func(Update)) error {
	wctx, cancel := context.WithCancelCause(ctx)
	var checks sync.WaitGroup
	defer func() { cancel(nil); checks.Wait() }()
	resp, err := k.get(wctx, url.Values{"watch": {"true"}, "resourceVersion": {rv}, "allowWatchBookmarks": {"true"}})
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer resp.Body.Close()
	checks.Go(func() {
		k.health.checkEvery(wctx, k.cfg.CheckEvery, k.cfg.RequestTimeout, func(c context.Context) error {
			r, err := k.get(c, url.Values{"limit": {"1"}})
			if err == nil {
				_, err = io.Copy(io.Discard, io.LimitReader(r.Body, MaxKubeResponseBytes))
				r.Body.Close()
			}
			return err
		}, cancel)
	})
	err = k.stream(resp.Body, known, fn)
	if ce := (*checkError)(nil); errors.As(context.Cause(wctx), &ce) {
		return ce
	}
	return err
}

// stream applies the events of one watch stream until it ends.
func (k *Kube) stream(body io.Reader, known map[string]map[string]Publisher, fn func(Update)) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), MaxKubeResponseBytes)
	for sc.Scan() {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("watch event: %w", err)
		}
		switch ev.Type {
		case "ADDED", "MODIFIED", "DELETED":
			var obj kubeObject
			if err := json.Unmarshal(ev.Object, &obj); err != nil {
				k.cfg.Logger.Warn("kubernetes resource skipped", "err", err)
				continue
			}
			k.apply(&obj, ev.Type == "DELETED", known, fn)
		case "ERROR":
			return fmt.Errorf("watch: %s", ev.Object)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	return errWatchEnded
}

// apply reconciles one resource's publishers with what was known of it.
func (k *Kube) apply(obj *kubeObject, deleted bool, known map[string]map[string]Publisher, fn func(Update)) {
	name := obj.Metadata.Name
	now := map[string]Publisher{}
	if !deleted {
		for _, raw := range []json.RawMessage{obj.Data, obj.Spec.Data} {
			k.collect(name, raw, 0, now)
		}
	}
	old := known[name]
	for key, p := range old {
		if _, ok := now[key]; !ok {
			fn(Update{Publisher: p, Gone: true})
		}
	}
	for key, p := range now {
		if old[key] != p {
			fn(Update{Publisher: p})
		}
	}
	if len(now) == 0 {
		delete(known, name)
	} else {
		known[name] = now
	}
}

// collect finds EventChannel records in raw (an object, an array, or a
// string holding JSON) down to kubeRecordDepth levels.
func (k *Kube) collect(resource string, raw json.RawMessage, depth int, out map[string]Publisher) {
	if len(raw) == 0 || depth > kubeRecordDepth {
		return
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil && strings.HasPrefix(strings.TrimSpace(s), "{") {
			k.collect(resource, json.RawMessage(s), depth+1, out)
		}
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) == nil {
			for _, it := range items {
				k.collect(resource, it, depth+1, out)
			}
		}
	case '{':
		var fields map[string]json.RawMessage
		if json.Unmarshal(raw, &fields) != nil {
			return
		}
		if k.cfg.Workers {
			if k.instance(resource, raw, fields, out) {
				return
			}
		} else {
			switch string(fields["type"]) {
			case `"EventChannel"`:
				k.channel(resource, raw, fields, out)
				return
			case `"EventSource"`:
				k.kvSource(resource, raw, out)
				return
			}
		}
		for _, v := range fields {
			k.collect(resource, v, depth+1, out)
		}
	}
}

// channel adds one EventChannel record, if it is one of the pool's.
func (k *Kube) channel(resource string, raw json.RawMessage, fields map[string]json.RawMessage, out map[string]Publisher) {
	c, err := parseChannel(raw)
	if err != nil || (c.endpoint == "" && !c.nats()) || (c.nats() && !c.hasID) {
		if err != nil {
			k.cfg.Logger.Warn("kubernetes record skipped", "resource", resource, "err", err)
		}
		return
	}
	scope, err := channelScope(fields)
	if err != nil {
		k.cfg.Logger.Warn("kubernetes record skipped", "resource", resource, "err", err)
		return
	}
	if !k.scopes[scope][c.topic] {
		return
	}
	key := fmt.Sprintf("%s/%s/%s/%x", resource, scope.Subject(c.topic), c.endpoint, c.id)
	out[key] = Publisher{Key: key, Endpoint: c.endpoint, NATS: c.nats(), PublisherID: c.id, Scope: scope, Topic: c.topic}
}

// kvSource adds one KV event source record of the pool's component.
func (k *Kube) kvSource(resource string, raw json.RawMessage, out map[string]Publisher) {
	p, err := kvSourcePublisher("", raw, k.cfg.Scope)
	if err != nil {
		if !errors.Is(err, errOtherScope) {
			k.cfg.Logger.Warn("kubernetes record skipped", "resource", resource, "err", err)
		}
		return
	}
	p.Key = fmt.Sprintf("%s/source/%x/%d/%x", resource, p.WorkerID, p.DPRank, p.PublisherID)
	out[p.Key] = p
}

// instance adds one endpoint instance record of the pool's endpoint
// (Workers) and reports whether raw was an instance record: tagged
// "type":"Endpoint", or untagged with an instance_id and an endpoint
// (the tag's presence is [unverified]).
func (k *Kube) instance(resource string, raw json.RawMessage, fields map[string]json.RawMessage, out map[string]Publisher) bool {
	tagged := string(fields["type"]) == `"Endpoint"`
	if !tagged && (fields["type"] != nil || fields["instance_id"] == nil || fields["endpoint"] == nil) {
		return false
	}
	var names struct {
		Namespace string `json:"namespace"`
		Component string `json:"component"`
		Endpoint  string `json:"endpoint"`
	}
	if json.Unmarshal(raw, &names) != nil {
		return tagged
	}
	sc := k.cfg.Scope
	if names.Namespace != sc.Namespace || names.Component != sc.Component || names.Endpoint != sc.Endpoint {
		return true
	}
	id, err := parseInstance(raw, "")
	if err != nil {
		k.cfg.Logger.Warn("kubernetes record skipped", "resource", resource, "err", err)
		return true
	}
	key := fmt.Sprintf("%s/%x", resource, id)
	out[key] = Publisher{Key: key, Worker: true, WorkerID: id, Scope: sc}
	return true
}

// channelScope reads an EventChannel record's scope: its "scope" field
// (EventScope), or else the flat "namespace" and "component" fields that
// v1.2 workers write instead, component "" meaning namespace scope
// (ai-dynamo/dynamo lib/runtime/src/discovery/kube/fixtures/v1_2_dwm.json,
// commit a5a710a: "dynamo"/"backend" kv-events and "dynamo"/"" kv_metrics,
// both over NATS).
func channelScope(fields map[string]json.RawMessage) (dynamo.Scope, error) {
	if raw := fields["scope"]; raw != nil && string(raw) != "null" {
		return parseScope(raw)
	}
	var sc dynamo.Scope
	if err := json.Unmarshal(fields["namespace"], &sc.Namespace); err != nil || sc.Namespace == "" {
		return dynamo.Scope{}, fmt.Errorf("%w: no scope and no namespace", ErrBadRecord)
	}
	if raw := fields["component"]; raw != nil && json.Unmarshal(raw, &sc.Component) != nil {
		return dynamo.Scope{}, fmt.Errorf("%w: component %s", ErrBadRecord, raw)
	}
	return sc, nil
}

// parseScope reads an EventScope: {"kind":"namespace","name":…},
// {"kind":"component","namespace":…,"component":…} or
// {"kind":"endpoint","endpoint":EndpointId}.
func parseScope(raw json.RawMessage) (dynamo.Scope, error) {
	var s struct {
		Kind      string          `json:"kind"`
		Name      string          `json:"name"`
		Namespace string          `json:"namespace"`
		Component string          `json:"component"`
		Endpoint  json.RawMessage `json:"endpoint"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return dynamo.Scope{}, fmt.Errorf("%w: scope: %v", ErrBadRecord, err)
	}
	switch s.Kind {
	case "namespace":
		return dynamo.Scope{Namespace: s.Name}, nil
	case "component":
		return dynamo.Scope{Namespace: s.Namespace, Component: s.Component}, nil
	case "endpoint":
		return parseEndpointID(s.Endpoint)
	}
	return dynamo.Scope{}, fmt.Errorf("%w: scope kind %q", ErrBadRecord, s.Kind)
}

// parseEndpointID reads an EndpointId as {namespace, component, name} or
// "ns.comp.ep" / "dyn://ns.comp.ep".
func parseEndpointID(raw json.RawMessage) (dynamo.Scope, error) {
	var id struct {
		Namespace string `json:"namespace"`
		Component string `json:"component"`
		Name      string `json:"name"`
	}
	if json.Unmarshal(raw, &id) == nil && id.Namespace != "" {
		return dynamo.Scope{Namespace: id.Namespace, Component: id.Component, Endpoint: id.Name}, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		parts := strings.Split(strings.TrimPrefix(s, "dyn://"), ".")
		if len(parts) == 3 {
			return dynamo.Scope{Namespace: parts[0], Component: parts[1], Endpoint: parts[2]}, nil
		}
	}
	return dynamo.Scope{}, fmt.Errorf("%w: endpoint id %s", ErrBadRecord, raw)
}
