package dynkv

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"strconv"
	"strings"
	"time"
)

// The SENTINEL command, so that a client configured for Sentinel
// (Dynamo's valkey_sentinel_urls and valkey_sentinel_master_name, or any
// Sentinel-aware Redis or Valkey client) can be pointed at goindex dynkv:
// the server answers as a Sentinel monitoring one primary, itself, under
// Config.SentinelMaster, with no replicas and no other Sentinels. A client
// then asks for the primary's address and connects to it, which is the
// same server. Which Sentinel queries Dynamo's client sends is
// [unverified], so the ones clients use are all answered: MASTERS and
// MASTER (redis-py, redis-rs), GET-MASTER-ADDR-BY-NAME (go-redis, ioredis,
// fred), REPLICAS/SLAVES, SENTINELS, CKQUORUM, MYID, and Valkey 8's
// PRIMARY spellings. There is no failover: the primary never changes. A
// client may subscribe to Sentinel's event channels (SUBSCRIBE,
// PSUBSCRIBE and their UNSUBSCRIBEs, and PING while subscribed, answered
// as Sentinel answers them); nothing is ever published on them.

// sentinelDownAfterMs and the other configuration figures reported for the
// primary are Sentinel's defaults (sentinel.conf), reported so that a
// client parsing them finds the fields it expects.
const (
	sentinelDownAfterMs     = 30000
	sentinelFailoverTimeout = 180000
)

// newRunID returns a run id in Valkey's form: 40 hex digits.
func newRunID() string {
	var b [20]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return hex.EncodeToString(b[:])
}

// primaryAddr is the address the sentinel reports for the primary: the
// configured SentinelAnnounce, else the address the client reached this
// server at (a client that can reach the sentinel can reach the primary
// there: they are one process).
func (s *Server) primaryAddr(st *connState) (host, port string) {
	addr := s.cfg.SentinelAnnounce
	if addr == "" {
		addr = st.local
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, "6379"
	}
	return host, port
}

// sentinel runs SENTINEL subcommand [args].
func (s *Server) sentinel(st *connState, args [][]byte) reply {
	if s.cfg.SentinelMaster == "" {
		return errText("ERR goindex dynkv answers SENTINEL only when started with --sentinel-master NAME")
	}
	if len(args) < 2 {
		return wrongArity("sentinel")
	}
	sub := strings.ToUpper(string(args[1]))
	named := func() (reply, bool) { // the subcommand's one argument, a primary's name
		if len(args) != 3 {
			return wrongArity("sentinel|" + sub), false
		}
		if string(args[2]) != s.cfg.SentinelMaster {
			return errText("ERR No such master with that name"), false
		}
		return reply{}, true
	}
	switch sub {
	case "MASTERS", "PRIMARIES":
		if len(args) != 2 {
			return wrongArity("sentinel|" + sub)
		}
		return reply{kind: replyArray, array: []reply{s.primaryState(st)}}
	case "MASTER", "PRIMARY":
		if r, ok := named(); !ok {
			return r
		}
		return s.primaryState(st)
	case "GET-MASTER-ADDR-BY-NAME", "GET-PRIMARY-ADDR-BY-NAME":
		if len(args) != 3 {
			return wrongArity("sentinel|" + sub)
		}
		if string(args[2]) != s.cfg.SentinelMaster {
			return reply{kind: replyNullArray} // as Sentinel answers for a name it does not monitor
		}
		host, port := s.primaryAddr(st)
		return reply{kind: replyArray, array: []reply{bulk([]byte(host)), bulk([]byte(port))}}
	case "REPLICAS", "SLAVES", "SENTINELS":
		if r, ok := named(); !ok {
			return r
		}
		return reply{kind: replyArray}
	case "CKQUORUM":
		if r, ok := named(); !ok {
			return r
		}
		return status("OK 1 usable Sentinels. Quorum and failover authorization can be reached")
	case "MYID":
		if len(args) != 2 {
			return wrongArity("sentinel|" + sub)
		}
		return bulk([]byte(s.runID))
	}
	return errText("ERR unknown subcommand '" + string(args[1]) + "'. Try SENTINEL HELP.")
}

// primaryState is the primary's entry of SENTINEL MASTERS: Sentinel's
// field names, every value a bulk string, flags "master" (up, not down).
func (s *Server) primaryState(st *connState) reply {
	host, port := s.primaryAddr(st)
	fields := []string{
		"name", s.cfg.SentinelMaster,
		"ip", host,
		"port", port,
		"runid", s.runID,
		"flags", "master",
		"link-pending-commands", "0",
		"link-refcount", "1",
		"last-ping-sent", "0",
		"last-ok-ping-reply", "0",
		"last-ping-reply", "0",
		"down-after-milliseconds", strconv.Itoa(sentinelDownAfterMs),
		"info-refresh", "0",
		"role-reported", "master",
		"role-reported-time", strconv.FormatInt(time.Since(s.started).Milliseconds(), 10),
		"config-epoch", "0",
		"num-slaves", "0",
		"num-other-sentinels", "0",
		"quorum", "1",
		"failover-timeout", strconv.Itoa(sentinelFailoverTimeout),
		"parallel-syncs", "1",
	}
	arr := make([]reply, len(fields))
	for i, f := range fields {
		arr[i] = bulk([]byte(f))
	}
	return reply{kind: replyArray, array: arr}
}

// maxSubscriptions bounds the channels and patterns one connection
// subscribes to: Sentinel clients follow a handful of event channels.
const maxSubscriptions = 1024

// subscription is a connection's Sentinel event subscriptions: nothing is
// ever published on them (the primary never fails over), but a client
// that follows Sentinel's events (+switch-master and the like) subscribes
// before it goes on, and a refusal would stop it.
type subscription struct {
	channels, patterns map[string]struct{}
}

// count is how many channels and patterns are subscribed.
func (sub *subscription) count() int { return len(sub.channels) + len(sub.patterns) }

// pubsub runs SUBSCRIBE, PSUBSCRIBE, UNSUBSCRIBE and PUNSUBSCRIBE as
// Sentinel does: one reply per channel, each with the connection's
// subscription count after it; UNSUBSCRIBE without a channel leaves every
// one, and with none subscribed answers a null channel.
func (s *Server) pubsub(st *connState, name string, args [][]byte) reply {
	kind := strings.ToLower(name)
	sub := &st.sub
	set := &sub.channels
	if name == "PSUBSCRIBE" || name == "PUNSUBSCRIBE" {
		set = &sub.patterns
	}
	confirm := func(channel []byte) reply {
		return reply{kind: replyArray, array: []reply{bulk([]byte(kind)), bulk(channel), integer(int64(sub.count()))}}
	}
	var out []reply
	if name == "UNSUBSCRIBE" || name == "PUNSUBSCRIBE" {
		names := args[1:]
		if len(names) == 0 {
			for ch := range *set {
				names = append(names, []byte(ch))
			}
			if len(names) == 0 {
				return reply{kind: replySeq, array: []reply{confirm(nil)}}
			}
		}
		for _, ch := range names {
			delete(*set, string(ch))
			out = append(out, confirm(ch))
		}
		return reply{kind: replySeq, array: out}
	}
	if len(args) < 2 {
		return wrongArity(name)
	}
	if *set == nil {
		*set = map[string]struct{}{}
	}
	for _, ch := range args[1:] {
		if _, ok := (*set)[string(ch)]; !ok && sub.count() >= maxSubscriptions {
			out = append(out, errText("ERR goindex dynkv: at most "+strconv.Itoa(maxSubscriptions)+" subscriptions a connection"))
			continue
		}
		(*set)[string(ch)] = struct{}{}
		out = append(out, confirm(ch))
	}
	return reply{kind: replySeq, array: out}
}

// subscribedRefusal is the reply to a command other than the subscription
// commands, PING, QUIT and RESET while a connection is subscribed, naming
// it as Sentinel does (a subcommand as "command|subcommand").
func subscribedRefusal(name string, args [][]byte) reply {
	full := strings.ToLower(name)
	if (name == "SENTINEL" || name == "CLIENT" || name == "CONFIG" || name == "COMMAND") && len(args) > 1 {
		full += "|" + strings.ToLower(string(args[1]))
	}
	return errText("ERR Can't execute '" + full + "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")
}
