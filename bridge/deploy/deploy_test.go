package deploy

import (
	"path"
	"strings"
	"testing"
)

// flagValue returns the value of --name=value in args, or "".
func flagValue(args []string, name string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// setting returns a flag's value from the command line, else from the
// GOINDEX_* environment.
func setting(inv Invocation, name string) string {
	if v := flagValue(inv.Args, name); v != "" {
		return v
	}
	return inv.Env["GOINDEX_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))]
}

func TestKubernetes_RelayPerDCAgreesOnThePoolFormat(t *testing.T) {
	invs, err := Invocations()
	if err != nil {
		t.Fatalf("Invocations: %v", err)
	}
	objs, err := Kubernetes()
	if err != nil {
		t.Fatalf("Kubernetes: %v", err)
	}
	relays := map[string]Object{}
	for _, o := range objs {
		if o.Kind == "Deployment" && strings.HasPrefix(o.Metadata.Name, "goindex-relay-") {
			relays[o.Metadata.Name] = o
		}
	}
	if len(relays) < 2 {
		t.Fatalf("relay Deployments = %d, want one per DC (at least 2)", len(relays))
	}
	for name, o := range relays {
		if o.Spec.Replicas == nil || *o.Spec.Replicas != 1 || o.Spec.Strategy.Type != "Recreate" {
			t.Errorf("%s: replicas %v, strategy %q; want 1 and Recreate (one producer per pool)", name, o.Spec.Replicas, o.Spec.Strategy.Type)
		}
		if g := o.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g < 10 {
			t.Errorf("%s: terminationGracePeriodSeconds %v, want ≥ 10 s to drain", name, g)
		}
	}
	dcs := map[string]string{}
	format := map[string]string{}
	n := 0
	for _, inv := range invs {
		if len(inv.Args) == 0 || inv.Args[0] != "relay" || !strings.HasPrefix(inv.Source, "kubernetes/") {
			continue
		}
		n++
		dc := setting(inv, "dc")
		if dc == "" || dc == "0" {
			t.Errorf("%s: no --dc", inv.Source)
		} else if prev, dup := dcs[dc]; dup {
			t.Errorf("%s: --dc %s already used by %s", inv.Source, dc, prev)
		}
		dcs[dc] = inv.Source
		for _, f := range []string{"domain", "seed", "expected-blocks", "prefix"} {
			v := setting(inv, f)
			if v == "" {
				t.Errorf("%s: --%s not set explicitly (every DC of a domain must agree)", inv.Source, f)
			}
			if prev, ok := format[f]; ok && prev != v {
				t.Errorf("%s: --%s %q, another relay has %q", inv.Source, f, v, prev)
			}
			format[f] = v
		}
	}
	if n != len(relays) {
		t.Errorf("relay invocations = %d, relay Deployments = %d", n, len(relays))
	}
}

func TestKubernetes_ConsumerSidecarSharesShmWithTheFrontend(t *testing.T) {
	objs, err := Kubernetes()
	if err != nil {
		t.Fatalf("Kubernetes: %v", err)
	}
	pod, volumes := routerSitePod(t, objs)
	containers := map[string]Container{}
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		containers[c.Name] = c
	}
	mount := func(c Container, at string) (string, bool) {
		for _, m := range c.VolumeMounts {
			if m.MountPath == at {
				return m.Name, m.ReadOnly
			}
		}
		return "", false
	}
	frontend, consumer := containers["frontend"], containers["consume"]
	if frontend.Name == "" || consumer.Name == "" {
		t.Fatalf("containers %v, want frontend and consume", EnvNames(map[string]string{frontend.Name: "", consumer.Name: ""}))
	}
	fv, _ := mount(frontend, "/dev/shm")
	cv, cro := mount(consumer, "/dev/shm")
	if fv == "" || fv != cv || cro {
		t.Errorf("/dev/shm: frontend mounts %q, consumer %q (read-only %v); want one shared volume, writable by the consumer", fv, cv, cro)
	}
	if v := volumes[cv]; v.EmptyDir == nil || v.EmptyDir.Medium != "Memory" {
		t.Errorf("volume %q behind /dev/shm = %+v, want an emptyDir of medium Memory", cv, v)
	}
	if shm := flagValue(consumer.Args, "shm"); path.Dir(shm) != "/dev/shm" {
		t.Errorf("consumer --shm %q, want a file in the shared /dev/shm", shm)
	}
	if len(consumer.Command) != 1 || consumer.Command[0] != Binary || len(consumer.Args) == 0 || consumer.Args[0] != "consume" {
		t.Errorf("consumer runs %v %v, want %s consume …", consumer.Command, consumer.Args, Binary)
	}
	if r := containers["route"]; r.Name != "" {
		if v, _ := mount(r, "/dev/shm"); v != cv || path.Dir(flagValue(r.Args, "replica")) != "/dev/shm" {
			t.Errorf("route mounts %q at /dev/shm with --replica %q, want the consumer's volume and file", v, flagValue(r.Args, "replica"))
		}
	}
	for _, c := range pod.Containers {
		for _, m := range c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok {
				t.Errorf("container %s mounts volume %q, which the Pod does not define", c.Name, m.Name)
			}
		}
	}
}

func TestSystemd_UnitsHaveTheRequiredKeys(t *testing.T) {
	units, err := Units()
	if err != nil {
		t.Fatalf("Units: %v", err)
	}
	if len(units) != 2 {
		t.Fatalf("units = %d, want goindex-relay.service and goindex-consume.service", len(units))
	}
	want := map[string]map[string]string{
		"Unit":    {"Description": "", "After": "network-online.target", "Wants": "network-online.target"},
		"Service": {"ExecStart": Binary + " ", "KillSignal": "SIGTERM", "Restart": "on-failure", "User": "goindex", "TimeoutStopSec": ""},
		"Install": {"WantedBy": "multi-user.target"},
	}
	for _, u := range units {
		for section, keys := range want {
			for k, prefix := range keys {
				v := u.Value(section, k)
				if v == "" || !strings.HasPrefix(v, prefix) {
					t.Errorf("%s: [%s] %s = %q, want a value starting %q", u.Source, section, k, v, prefix)
				}
			}
		}
		if strings.Contains(u.Source, "consume") && u.Value("Service", "PrivateDevices") == "yes" {
			t.Errorf("%s: PrivateDevices=yes hides the replica in /dev/shm from routers", u.Source)
		}
		for _, ef := range u.Sections["Service"]["EnvironmentFile"] {
			if _, err := EnvFile(path.Base(strings.TrimPrefix(ef, "-"))); err != nil {
				t.Errorf("%s: EnvironmentFile %s: %v", u.Source, ef, err)
			}
		}
	}
}

func TestParseUnit_RejectsLinesOutsideTheINIShape(t *testing.T) {
	for _, text := range []string{"ExecStart=/bin/true\n", "[Service]\nExecStart /bin/true\n", "[Service]\n=x\n"} {
		if _, err := parseUnit("bad.service", []byte(text)); err == nil {
			t.Errorf("parseUnit(%q) = nil error, want one naming the line", text)
		}
	}
	u, err := parseUnit("ok.service", []byte("# c\n[Service]\nEnvironment=A=1\nEnvironment=B=2\n"))
	if err != nil || len(u.Sections["Service"]["Environment"]) != 2 || u.Value("Service", "Environment") != "B=2" {
		t.Errorf("parseUnit(two Environment lines) = %+v, %v; want both kept, the last as Value", u, err)
	}
}

// routerSitePod returns the pod of the router site's Deployment and its
// volumes by name.
func routerSitePod(t *testing.T, objs []Object) (PodSpec, map[string]Volume) {
	t.Helper()
	for _, o := range objs {
		if o.Kind == "Deployment" && o.Metadata.Name == "dynamo-router-site" {
			pod := o.Spec.Template.Spec
			volumes := map[string]Volume{}
			for _, v := range pod.Volumes {
				volumes[v.Name] = v
			}
			return pod, volumes
		}
	}
	t.Fatal("no Deployment dynamo-router-site")
	return PodSpec{}, nil
}
