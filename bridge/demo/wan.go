package demo

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goindex/goindex/bridge/natslink"
	"github.com/goindex/goindex/goindex/relayproto"
)

// linkChunkBytes is the most a link reads at once; linkQueueChunks bounds
// the chunks in flight per direction (at 32 KiB each, 8 MiB), beyond which
// the reader waits: the link's bandwidth-delay product.
const (
	linkChunkBytes  = 32 << 10
	linkQueueChunks = 256
)

// link is a loopback TCP proxy that delivers every byte a fixed one-way
// latency after it arrived, in both directions, preserving order: a WAN
// path between a DC's leaf server and the router site's hub.
type link struct {
	ln     net.Listener
	target string
	oneWay time.Duration

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// newLink listens on a free loopback port and forwards to target.
func newLink(target string, oneWay time.Duration) (*link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: link listen: %w", err)
	}
	l := &link{ln: ln, target: target, oneWay: oneWay, conns: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// addr returns the host:port the link listens on.
func (l *link) addr() string { return l.ln.Addr().String() }

func (l *link) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", l.target)
		if err != nil {
			c.Close()
			continue
		}
		if !l.track(c, up) {
			return
		}
		l.wg.Add(2)
		go l.pipe(c, up)
		go l.pipe(up, c)
	}
}

// track registers a connection pair unless the link is closing.
func (l *link) track(cs ...net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		l.conns[c] = struct{}{}
	}
	return true
}

type chunk struct {
	due  time.Time
	data []byte
}

// pipe copies src to dst, each chunk oneWay after it was read. When either
// side fails, both connections close (the peer sees a cut WAN link).
func (l *link) pipe(src, dst net.Conn) {
	defer l.wg.Done()
	q := make(chan chunk, linkQueueChunks)
	go func() {
		defer close(q)
		for {
			b := make([]byte, linkChunkBytes)
			n, err := src.Read(b)
			if n > 0 {
				q <- chunk{due: time.Now().Add(l.oneWay), data: b[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.due))
		if _, err := dst.Write(c.data); err != nil {
			break
		}
	}
	src.Close()
	dst.Close()
	for range q { // let the reader finish after the close
	}
}

// close stops accepting, cuts every connection and waits for the pipes.
func (l *link) close() {
	l.mu.Lock()
	l.closed = true
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	l.ln.Close()
	l.wg.Wait()
}

// site is one DC of the demo: its id, grid RTT to the router site, leaf
// NATS server (own JetStream domain) and the delayed link to the hub.
type site struct {
	name      string
	id        relayproto.DCID
	rtt       time.Duration // grid RTT to the router site
	jsDomain  string
	component string // the Dynamo component its workers publish under
	leaf      *natslink.Server
	link      *link
}

// wan is the demo's NATS topology: a hub at the router site (where the
// consumer connects) and one leaf server per DC (where its relay and
// workers connect), each leaf joined to the hub through a link delayed by
// half the DC's RTT each way.
type wan struct {
	hub   *natslink.Server
	sites []*site
}

// startWAN starts the hub, then per site a delayed link and a leaf server
// whose JetStream store lives under dir, and waits until every leaf is
// connected to the hub.
func startWAN(ctx context.Context, dir string, sites []*site, wait time.Duration) (*wan, error) {
	hub, err := natslink.Start(natslink.ServerConfig{Name: "hub", Leaf: true})
	if err != nil {
		return nil, err
	}
	w := &wan{hub: hub}
	leafAddr := strings.TrimPrefix(hub.LeafURL(), "nats-leaf://")
	for _, s := range sites {
		if s.link, err = newLink(leafAddr, s.rtt/2); err != nil {
			w.close()
			return nil, err
		}
		s.jsDomain = "dc" + strconv.FormatUint(uint64(s.id), 10)
		s.leaf, err = natslink.Start(natslink.ServerConfig{Name: s.name, JetStream: true, JSDomain: s.jsDomain,
			StoreDir: filepath.Join(dir, "nats-"+s.name), LeafRemotes: []string{"nats-leaf://" + s.link.addr()},
			LeafReconnect: 100 * time.Millisecond})
		if err != nil {
			s.link.close()
			s.link = nil
			w.close()
			return nil, err
		}
		w.sites = append(w.sites, s)
	}
	err = poll(ctx, wait, 10*time.Millisecond, func() error {
		if n := hub.NATS().NumLeafNodes(); n != len(sites) {
			return fmt.Errorf("%d of %d leaf servers joined the hub", n, len(sites))
		}
		return nil
	})
	if err != nil {
		w.close()
		return nil, checkf("%v", err)
	}
	return w, nil
}

// close shuts every server and link down.
func (w *wan) close() {
	for _, s := range w.sites {
		s.leaf.Shutdown()
		s.link.close()
	}
	w.hub.Shutdown()
}

// siteID is the DC id of the i-th site: 1, 2, … (relay --dc, consume --dcs,
// route --dc ID:NAME=URL all use it).
func siteID(i int) relayproto.DCID { return relayproto.DCID(i + 1) }
