package deploy

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// files holds the shipped examples, so tests (and tools) read exactly what
// is in the tree.
//
//go:embed kubernetes/*.yaml systemd/*.service systemd/*.env
var files embed.FS

// Object is the part of a Kubernetes object the checks read: its kind and
// name, a ConfigMap's data, a Role's rules, a RoleBinding's role and
// subjects, and a Deployment's replicas, strategy and Pod template.
type Object struct {
	// Source is the file the object came from.
	Source   string `yaml:"-"`
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	Data     map[string]string `yaml:"data"`
	Rules    []PolicyRule      `yaml:"rules"`
	RoleRef  RoleRef           `yaml:"roleRef"`
	Subjects []Subject         `yaml:"subjects"`
	Spec     struct {
		Replicas *int `yaml:"replicas"`
		Strategy struct {
			Type string `yaml:"type"`
		} `yaml:"strategy"`
		Template struct {
			Spec PodSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// PolicyRule is one rule of a Role: verbs allowed on resources of API
// groups.
type PolicyRule struct {
	APIGroups []string `yaml:"apiGroups"`
	Resources []string `yaml:"resources"`
	Verbs     []string `yaml:"verbs"`
}

// RoleRef is the role a RoleBinding grants.
type RoleRef struct {
	APIGroup string `yaml:"apiGroup"`
	Kind     string `yaml:"kind"`
	Name     string `yaml:"name"`
}

// Subject is one holder of a RoleBinding's role; a ServiceAccount without
// a namespace is in the RoleBinding's.
type Subject struct {
	Kind      string `yaml:"kind"`
	Name      string `yaml:"name"`
	Namespace string `yaml:"namespace"`
}

// PodSpec is the part of a Pod template the checks read.
type PodSpec struct {
	ServiceAccountName            string      `yaml:"serviceAccountName"`
	TerminationGracePeriodSeconds *int        `yaml:"terminationGracePeriodSeconds"`
	InitContainers                []Container `yaml:"initContainers"`
	Containers                    []Container `yaml:"containers"`
	Volumes                       []Volume    `yaml:"volumes"`
}

// Container is the part of a container the checks read.
type Container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string    `yaml:"name"`
		Value     string    `yaml:"value"`
		ValueFrom yaml.Node `yaml:"valueFrom"`
	} `yaml:"env"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
	} `yaml:"envFrom"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

// Volume is a Pod volume: an emptyDir (Medium "Memory" for /dev/shm), a
// Secret or a ConfigMap.
type Volume struct {
	Name     string `yaml:"name"`
	EmptyDir *struct {
		Medium    string `yaml:"medium"`
		SizeLimit string `yaml:"sizeLimit"`
	} `yaml:"emptyDir"`
	Secret *struct {
		SecretName string `yaml:"secretName"`
	} `yaml:"secret"`
	ConfigMap *struct {
		Name string `yaml:"name"`
	} `yaml:"configMap"`
}

// Kubernetes parses every document of every shipped kubernetes/*.yaml file,
// rejecting unknown-to-YAML syntax and empty documents.
func Kubernetes() ([]Object, error) {
	names, err := fs.Glob(files, "kubernetes/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	var out []Object
	for _, name := range names {
		data, err := files.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("deploy: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for i := 0; ; i++ {
			var o Object
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("deploy: %s document %d: %w", name, i, err)
			}
			if o.Kind == "" || o.Metadata.Name == "" {
				return nil, fmt.Errorf("deploy: %s document %d: no kind or name", name, i)
			}
			o.Source = name
			out = append(out, o)
		}
	}
	return out, nil
}

// Unit is a parsed systemd unit file: section name → key → values (a key
// may repeat).
type Unit struct {
	// Source is the unit's file name.
	Source   string
	Sections map[string]map[string][]string
}

// Value returns the last value of key in section, or "".
func (u Unit) Value(section, key string) string {
	v := u.Sections[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// Units parses every shipped systemd/*.service file as INI: comments (#, ;),
// [Section] headers and Key=Value lines; anything else is an error.
func Units() ([]Unit, error) {
	names, err := fs.Glob(files, "systemd/*.service")
	if err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	var out []Unit
	for _, name := range names {
		data, err := files.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("deploy: %w", err)
		}
		u, err := parseUnit(name, data)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// parseUnit parses one unit file's INI text.
func parseUnit(name string, data []byte) (Unit, error) {
	u := Unit{Source: name, Sections: map[string]map[string][]string{}}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || l[0] == '#' || l[0] == ';':
		case l[0] == '[' && l[len(l)-1] == ']':
			section = l[1 : len(l)-1]
			u.Sections[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || section == "" || strings.TrimSpace(k) == "" {
				return Unit{}, fmt.Errorf("deploy: %s:%d: want Key=Value inside a section, got %q", name, line, l)
			}
			k = strings.TrimSpace(k)
			u.Sections[section][k] = append(u.Sections[section][k], strings.TrimSpace(v))
		}
	}
	return u, nil
}

// EnvFile parses a shipped systemd/*.env file (KEY=VALUE lines and
// comments) into a map.
func EnvFile(name string) (map[string]string, error) {
	data, err := files.ReadFile(path.Join("systemd", name))
	if err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("deploy: %s:%d: want KEY=VALUE, got %q", name, line, l)
		}
		out[k] = v
	}
	return out, nil
}

// Invocation is one goindex command line a shipped example runs.
type Invocation struct {
	// Source names the file and the object or unit it comes from.
	Source string
	// Deployment is the Kubernetes Deployment running it ("" for a unit).
	Deployment string
	// Args is the command line after the binary: the subcommand first.
	Args []string
	// Env holds the GOINDEX_* settings given by the environment (literal
	// values, and ConfigMap or EnvironmentFile entries).
	Env map[string]string
}

// Binary is where the examples install the goindex binary.
const Binary = "/usr/local/bin/goindex"

// Invocations returns every goindex command line of the shipped examples:
// each container whose command is Binary (with its env and envFrom
// ConfigMaps resolved) and each unit's ExecStart (with its EnvironmentFile,
// and systemd's %d specifier replaced by /run/credentials/<unit>).
func Invocations() ([]Invocation, error) {
	objs, err := Kubernetes()
	if err != nil {
		return nil, err
	}
	configMaps := map[string]map[string]string{}
	for _, o := range objs {
		if o.Kind == "ConfigMap" {
			configMaps[o.Metadata.Name] = o.Data
		}
	}
	var out []Invocation
	for _, o := range objs {
		if o.Kind != "Deployment" {
			continue
		}
		for _, c := range o.Spec.Template.Spec.Containers {
			if len(c.Command) != 1 || c.Command[0] != Binary {
				continue
			}
			inv := Invocation{Source: fmt.Sprintf("%s: %s %s, container %s", o.Source, o.Kind, o.Metadata.Name, c.Name),
				Deployment: o.Metadata.Name, Args: c.Args, Env: map[string]string{}}
			for _, ef := range c.EnvFrom {
				if ef.ConfigMapRef == nil {
					continue
				}
				cm, ok := configMaps[ef.ConfigMapRef.Name]
				if !ok {
					return nil, fmt.Errorf("deploy: %s: ConfigMap %q is not in the examples", inv.Source, ef.ConfigMapRef.Name)
				}
				for k, v := range cm {
					inv.Env[k] = v
				}
			}
			for _, e := range c.Env {
				inv.Env[e.Name] = e.Value
			}
			out = append(out, inv)
		}
	}
	units, err := Units()
	if err != nil {
		return nil, err
	}
	for _, u := range units {
		exec := strings.Fields(u.Value("Service", "ExecStart"))
		if len(exec) == 0 || exec[0] != Binary {
			return nil, fmt.Errorf("deploy: %s: ExecStart does not run %s", u.Source, Binary)
		}
		unit := path.Base(u.Source)
		inv := Invocation{Source: u.Source, Env: map[string]string{}}
		for _, a := range exec[1:] {
			inv.Args = append(inv.Args, strings.ReplaceAll(a, "%d", "/run/credentials/"+unit))
		}
		for _, ef := range u.Sections["Service"]["EnvironmentFile"] {
			env, err := EnvFile(path.Base(strings.TrimPrefix(ef, "-")))
			if err != nil {
				return nil, fmt.Errorf("deploy: %s: EnvironmentFile %s: %w", u.Source, ef, err)
			}
			for k, v := range env {
				inv.Env[k] = v
			}
		}
		out = append(out, inv)
	}
	return out, nil
}

// EnvNames returns the keys of env, sorted.
func EnvNames(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k := range env {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
