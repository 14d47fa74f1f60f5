package chaos

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// natsServer is one nats-server process: the router site's hub (it
// accepts leaf nodes) or a DC's leaf (JetStream in its own domain, joined
// to the hub through the DC's link). Its ports are chosen once, so a
// restarted server comes back where its clients reconnect.
type natsServer struct {
	*proc
	port int // client port
}

// freePort returns a loopback port nobody listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("chaos: pick a port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// url returns the server's client URL.
func (s *natsServer) url() string { return "nats://127.0.0.1:" + strconv.Itoa(s.port) }

// newHub configures the hub: clients on one port, leaf nodes on another
// (returned), no JetStream (the DCs' assets live in their leaves'
// domains).
func newHub(r *run) (*natsServer, int, error) {
	port, err := freePort()
	if err != nil {
		return nil, 0, err
	}
	leaf, err := freePort()
	if err != nil {
		return nil, 0, err
	}
	conf := fmt.Sprintf("listen: \"127.0.0.1:%d\"\nserver_name: \"hub\"\nleafnodes { listen: \"127.0.0.1:%d\" }\n", port, leaf)
	s, err := newNATS(r, "nats-hub", port, conf)
	return s, leaf, err
}

// newLeaf configures DC d's leaf: JetStream in domain dcN with its store
// in the run's directory, one remote to the hub through link (host:port).
func newLeaf(r *run, d *dc, link string) (*natsServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	store := filepath.Join(r.dir, d.name+"-js")
	conf := fmt.Sprintf("listen: \"127.0.0.1:%d\"\nserver_name: %q\n"+
		"jetstream { store_dir: %q, domain: %q }\n"+
		"leafnodes { reconnect: \"100ms\", remotes: [ { url: \"nats-leaf://%s\" } ] }\n",
		port, d.name, store, d.jsDomain(), link)
	return newNATS(r, "nats-"+d.name, port, conf)
}

func newNATS(r *run, name string, port int, conf string) (*natsServer, error) {
	path := filepath.Join(r.dir, name+".conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, fmt.Errorf("chaos: %s config: %w", name, err)
	}
	p, err := newProc(r.dir, name, r.bin("nats-server"), []string{"-c", path}, r.died)
	if err != nil {
		return nil, err
	}
	return &natsServer{proc: p, port: port}, nil
}

// up starts the server and waits until it accepts a client.
func (s *natsServer) up(ctx context.Context) error {
	if err := s.start(); err != nil {
		return err
	}
	err := poll(ctx, startWait, func() error {
		if !s.alive() {
			return errExited
		}
		nc, err := nats.Connect(s.url(), nats.Timeout(time.Second))
		if err != nil {
			return err
		}
		nc.Close()
		return nil
	})
	if err != nil {
		return fmt.Errorf("chaos: %s: %w; its last output:\n%s", s.name, err, indent(s.tail(12)))
	}
	return nil
}
