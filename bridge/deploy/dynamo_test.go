package deploy

import (
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/goindex/goindex/dynamo/selector"
)

// boolSetting reads a boolean flag: --name or --name=v on the command line,
// else GOINDEX_<NAME> in the environment.
func boolSetting(inv Invocation, name string) bool {
	for _, a := range inv.Args {
		if a == "--"+name {
			return true
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			b, _ := strconv.ParseBool(v)
			return b
		}
	}
	b, _ := strconv.ParseBool(inv.Env["GOINDEX_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))])
	return b
}

// relayInvocations returns every `goindex relay` the examples run.
func relayInvocations(t *testing.T) []Invocation {
	t.Helper()
	invs, err := Invocations()
	if err != nil {
		t.Fatalf("Invocations: %v", err)
	}
	var out []Invocation
	for _, inv := range invs {
		if len(inv.Args) > 0 && inv.Args[0] == "relay" {
			out = append(out, inv)
		}
	}
	if len(out) == 0 {
		t.Fatal("the examples run no goindex relay")
	}
	return out
}

// Dynamo v1.3 and later publish KV events on the ZMQ event plane, found
// through discovery; a relay with none of the ZMQ sources hears only NATS
// subjects, where a stock Dynamo sends nothing. The Kubernetes examples
// follow Dynamo's Kubernetes discovery (DynamoWorkerMetadata), the systemd
// one Dynamo's default, etcd (ETCD_ENDPOINTS).
func TestRelays_IngestFromDynamoAsReleased(t *testing.T) {
	for _, inv := range relayInvocations(t) {
		kube, etcd := boolSetting(inv, "kube"), setting(inv, "etcd")
		if etcd == "" {
			etcd = inv.Env["ETCD_ENDPOINTS"]
		}
		switch {
		case strings.HasPrefix(inv.Source, "kubernetes/"):
			if !kube {
				t.Errorf("%s: no --kube (GOINDEX_KUBE=true): the relay finds no worker of Dynamo's Kubernetes discovery", inv.Source)
			}
		case strings.HasPrefix(inv.Source, "systemd/"):
			if etcd == "" {
				t.Errorf("%s: no --etcd (GOINDEX_ETCD or ETCD_ENDPOINTS): the relay finds no worker of Dynamo's etcd discovery", inv.Source)
			}
		default:
			if !kube && etcd == "" && setting(inv, "zmq-broker") == "" && setting(inv, "zmq-publisher") == "" {
				t.Errorf("%s: no ZMQ event-plane source (--kube, --etcd, --zmq-broker, --zmq-publisher)", inv.Source)
			}
		}
		for _, u := range strings.Split(etcd, ",") {
			if etcd == "" {
				break
			}
			if p, err := url.Parse(strings.TrimSpace(u)); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
				t.Errorf("%s: etcd endpoint %q, want http(s)://host:port as in ETCD_ENDPOINTS", inv.Source, u)
			}
		}
		if setting(inv, "zmq-broker-discover") != "" && etcd == "" {
			t.Errorf("%s: --zmq-broker-discover without --etcd", inv.Source)
		}
		for _, f := range []string{"namespace", "component", "endpoint"} {
			if setting(inv, f) == "" {
				t.Errorf("%s: --%s not set explicitly (it must name the workers' Dynamo %s)", inv.Source, f, f)
			}
		}
		if setting(inv, "nats") == "" {
			t.Errorf("%s: no --nats: the relay would publish to an embedded server no router site reaches", inv.Source)
		}
	}
}

// grants reports whether rule allows verb on resource of group.
func grants(rule PolicyRule, group, resource, verb string) bool {
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	return has(rule.APIGroups, group) && has(rule.Resources, resource) && has(rule.Verbs, verb)
}

// --kube lists and watches DynamoWorkerMetadata (nvidia.com) with the pod's
// service account token: each relay Deployment must run as a
// ServiceAccount bound to a Role that allows it.
func TestKubernetes_RelayServiceAccountMayWatchWorkerMetadata(t *testing.T) {
	objs, err := Kubernetes()
	if err != nil {
		t.Fatalf("Kubernetes: %v", err)
	}
	byKind := map[string]map[string]Object{}
	for _, o := range objs {
		if byKind[o.Kind] == nil {
			byKind[o.Kind] = map[string]Object{}
		}
		byKind[o.Kind][o.Metadata.Name] = o
	}
	kubeRelays := map[string]bool{}
	for _, inv := range relayInvocations(t) {
		if inv.Deployment != "" && boolSetting(inv, "kube") {
			kubeRelays[inv.Deployment] = true
		}
	}
	if len(kubeRelays) == 0 {
		t.Fatal("no relay Deployment uses --kube")
	}
	for name := range kubeRelays {
		d := byKind["Deployment"][name]
		sa := d.Spec.Template.Spec.ServiceAccountName
		if sa == "" {
			t.Errorf("Deployment %s: no serviceAccountName: the default account may not list DynamoWorkerMetadata", name)
			continue
		}
		if _, ok := byKind["ServiceAccount"][sa]; !ok {
			t.Errorf("Deployment %s: ServiceAccount %q is not in the examples", name, sa)
		}
		for _, verb := range []string{"get", "list", "watch"} {
			var ok bool
			for _, rb := range byKind["RoleBinding"] {
				bound := slices.ContainsFunc(rb.Subjects, func(s Subject) bool {
					return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == rb.Metadata.Namespace
				})
				role, found := byKind["Role"][rb.RoleRef.Name]
				if !bound || rb.RoleRef.Kind != "Role" || rb.RoleRef.APIGroup != "rbac.authorization.k8s.io" || !found ||
					role.Metadata.Namespace != rb.Metadata.Namespace {
					continue
				}
				ok = ok || slices.ContainsFunc(role.Rules, func(r PolicyRule) bool {
					return grants(r, "nvidia.com", "dynamoworkermetadatas", verb)
				})
			}
			if !ok {
				t.Errorf("Deployment %s: ServiceAccount %q is bound to no Role allowing %s on dynamoworkermetadatas (nvidia.com)", name, sa, verb)
			}
		}
	}
}

// policyInstance is one named policy of router-policy YAML.
type policyInstance struct {
	Name       string            `yaml:"name"`
	Type       string            `yaml:"type"`
	Parameters map[string]string `yaml:"parameters"`
}

// policyYAML is the part of router-policy YAML the checks read: the
// instance each worker role selects, and the instances.
type policyYAML struct {
	WorkerSelection struct {
		Aggregated string           `yaml:"aggregated"`
		Prefill    string           `yaml:"prefill"`
		Decode     string           `yaml:"decode"`
		Instances  []policyInstance `yaml:"instances"`
	} `yaml:"worker_selection"`
}

// goindexInstance returns the parameters of the policy instance of type
// goindex that every role selects.
func goindexInstance(t *testing.T, source string, text []byte) map[string]string {
	t.Helper()
	var p policyYAML
	if err := yaml.Unmarshal(text, &p); err != nil {
		t.Fatalf("%s: %v", source, err)
	}
	ws := p.WorkerSelection
	var params map[string]string
	for role, name := range map[string]string{"aggregated": ws.Aggregated, "prefill": ws.Prefill, "decode": ws.Decode} {
		i := slices.IndexFunc(ws.Instances, func(in policyInstance) bool { return in.Name == name })
		if i < 0 || ws.Instances[i].Type != "goindex" {
			t.Errorf("%s: worker_selection.%s = %q, want an instance of type goindex", source, role, name)
			continue
		}
		params = ws.Instances[i].Parameters
	}
	return params
}

// Released Dynamo loads no C plugin: goindex enters its frontend as the
// goindex-scorer crate linked in and chosen with --router-policy-config.
// The router site's frontend must name that YAML, mounted from a ConfigMap
// shaped as the crate's worker-selection.yaml, whose config the library
// accepts and whose replica is the consumer's and dc a relay's.
func TestKubernetes_FrontendSelectsTheGoindexScorer(t *testing.T) {
	objs, err := Kubernetes()
	if err != nil {
		t.Fatalf("Kubernetes: %v", err)
	}
	configMaps := map[string]map[string]string{}
	for _, o := range objs {
		if o.Kind == "ConfigMap" {
			configMaps[o.Metadata.Name] = o.Data
		}
	}
	pod, volumes := routerSitePod(t, objs)
	var frontend, consumer Container
	for _, c := range pod.Containers {
		switch c.Name {
		case "frontend":
			frontend = c
		case "consume":
			consumer = c
		}
	}
	if frontend.Name == "" || consumer.Name == "" {
		t.Fatal("dynamo-router-site: want containers frontend and consume")
	}
	mountAt := func(c Container, dir string) (string, bool) {
		for _, m := range c.VolumeMounts {
			if m.MountPath == dir {
				return m.Name, m.ReadOnly
			}
		}
		return "", false
	}
	env := map[string]string{}
	for _, e := range frontend.Env {
		env[e.Name] = e.Value
	}
	for _, k := range []string{"DYN_ROUTER_WORKER_SELECTOR_PLUGIN", "DYN_ROUTER_WORKER_SELECTOR_CONFIG"} {
		if _, ok := env[k]; ok {
			t.Errorf("frontend sets %s: no Dynamo release has that loader (its PRs were not merged) and a released frontend ignores it", k)
		}
	}
	if cmd := strings.Join(frontend.Command, " "); !strings.HasSuffix(cmd, "-m dynamo.frontend") {
		t.Errorf("frontend runs %q, want python3 -m dynamo.frontend", cmd)
	}
	if m := flagValue(frontend.Args, "router-mode"); m != "kv" {
		t.Errorf("frontend --router-mode %q, want kv", m)
	}
	policy := flagValue(frontend.Args, "router-policy-config")
	if !path.IsAbs(policy) {
		t.Fatalf("frontend --router-policy-config %q, want the absolute path of the goindex policy YAML", policy)
	}
	vol, ro := mountAt(frontend, path.Dir(policy))
	v, ok := volumes[vol]
	if vol == "" || !ro || !ok || v.ConfigMap == nil {
		t.Fatalf("frontend mounts %q at %s (read-only %v), want a ConfigMap volume read-only", vol, path.Dir(policy), ro)
	}
	cm, ok := configMaps[v.ConfigMap.Name]
	text, has := cm[path.Base(policy)]
	if !ok || !has {
		t.Fatalf("ConfigMap %q (in the examples: %v) has no key %q", v.ConfigMap.Name, ok, path.Base(policy))
	}
	params := goindexInstance(t, "ConfigMap "+v.ConfigMap.Name, []byte(text))
	shipped, err := os.ReadFile("../../dynamo/rust/goindex-scorer/worker-selection.yaml")
	if err != nil {
		t.Fatalf("the crate's policy YAML: %v", err)
	}
	want := goindexInstance(t, "goindex-scorer/worker-selection.yaml", shipped)
	if got, wantKeys := EnvNames(params), EnvNames(want); !slices.Equal(got, wantKeys) {
		t.Errorf("goindex policy parameters %v, the crate's YAML has %v", got, wantKeys)
	}
	cfg, err := selector.ParseConfig([]byte(params["config"]))
	if err != nil {
		t.Fatalf("goindex policy config %q: %v", params["config"], err)
	}
	if shm := flagValue(consumer.Args, "shm"); cfg.Replica != shm {
		t.Errorf("policy config replica %q, consumer --shm %q: want the consumer's replica", cfg.Replica, shm)
	}
	if cfg.Replica != "" {
		if v, _ := mountAt(frontend, path.Dir(cfg.Replica)); v == "" {
			t.Errorf("frontend mounts nothing at %s, where the policy's replica is", path.Dir(cfg.Replica))
		}
		dcs := map[string]string{}
		for _, inv := range relayInvocations(t) {
			dcs[setting(inv, "dc")] = inv.Source
		}
		if dc := strconv.FormatUint(*cfg.DC, 10); dcs[dc] == "" {
			t.Errorf("policy config dc %s is no relay's --dc (%v)", dc, EnvNames(dcs))
		}
	}
	if lib, ok := env["GOINDEX_LIBRARY"]; ok {
		libVol, libRO := mountAt(frontend, path.Dir(lib))
		if !path.IsAbs(lib) || libVol == "" || !libRO {
			t.Errorf("frontend GOINDEX_LIBRARY %q on volume %q (read-only %v), want an absolute path on a read-only volume", lib, libVol, libRO)
		}
		var filled bool
		for _, c := range pod.InitContainers {
			if v, _ := mountAt(c, path.Dir(lib)); v == libVol && strings.Contains(strings.Join(c.Command, " "), lib) {
				filled = true
			}
		}
		if !filled {
			t.Errorf("no init container puts %s into volume %q", lib, libVol)
		}
	}
}
