package cluster

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
)

// Mode is a node's cluster mode (--cluster).
type Mode uint8

const (
	// Off: a standalone server; cluster commands are refused and keys are
	// not checked.
	Off Mode = iota
	// On: the node serves the slots a slot map gives it, answers MOVED or
	// forwards for the others, and answers CLUSTERDOWN until it has a map.
	On
	// Emulated: one node owning every slot, announcing the address each
	// client connected to, so cluster clients can be pointed at a single
	// node in development.
	Emulated
)

// ParseMode reads --cluster's value: off, on or emulated.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "off":
		return Off, nil
	case "on":
		return On, nil
	case "emulated":
		return Emulated, nil
	}
	return Off, fmt.Errorf("cluster mode %q: want off, on or emulated", s)
}

// String is the mode as --cluster spells it.
func (m Mode) String() string {
	switch m {
	case On:
		return "on"
	case Emulated:
		return "emulated"
	}
	return "off"
}

// RedisMode is what HELLO's mode and INFO's redis_mode report: "cluster"
// in On and Emulated modes (redis-py and ioredis check it), else
// "standalone".
func (m Mode) RedisMode() string {
	if m == Off {
		return "standalone"
	}
	return "cluster"
}

// Config is a node's cluster settings, fixed at start.
type Config struct {
	Mode Mode
	// SelfID is this node's id (40 lower-case hex digits): how it finds
	// itself in a map. See LoadOrCreateNodeID.
	SelfID string
	// Announce, if set, is the host:port this node tells clients it is at
	// (--cluster-announce-addr). In Emulated mode it replaces the address
	// the client connected to; in On mode the map says where every node
	// is, and Announce is only what CLUSTER NODES shows before a map
	// arrives.
	Announce string
	// HandOver: a slot a new map gives another node that was in the old
	// map too is handed over with its keys' state (move.go) rather than
	// switched at once. The node must then run the hand-over.
	HandOver bool
}

// Conn is what a cluster reply depends on about the client's connection.
type Conn struct {
	Proto int  // 2 or 3
	TLS   bool // the client is on TLS: tell it TLS ports
	// LocalAddr is the server's side of the client's connection: the
	// address the client dialled, which Emulated mode announces. A
	// zero value (a Unix socket) falls back to 127.0.0.1 and port 0.
	LocalAddr netip.AddrPort
}

// State is a node's cluster state: its mode and id, and the slot map it
// holds. Readers take a View (one atomic load, no lock) and use it for a
// whole command; Apply replaces the view, serialized by a mutex. Safe for
// concurrent use.
type State struct {
	cfg          Config
	announceHost string
	announcePort int
	mu           sync.Mutex // held by Apply and by changes of move states
	view         atomic.Pointer[View]
	// Gate: see move.go. Connections hold it while they run commands for
	// slots this node is handing over.
	Gate Gate
}

// NewState checks cfg and returns the node's state: in On mode with no
// map yet, in Emulated mode owning every slot.
func NewState(cfg Config) (*State, error) {
	s := &State{cfg: cfg}
	if cfg.Mode != Off && !validID(cfg.SelfID) {
		return nil, fmt.Errorf("cluster node id %q is not 40 lower-case hex digits", clip([]byte(cfg.SelfID)))
	}
	if cfg.Announce != "" {
		host, port, err := SplitAddr(cfg.Announce)
		if err != nil {
			return nil, fmt.Errorf("--cluster-announce-addr: %v", err)
		}
		s.announceHost, s.announcePort = host, port
	}
	v := &View{mode: cfg.Mode, selfID: cfg.SelfID, self: -1,
		announceHost: s.announceHost, announcePort: s.announcePort}
	if cfg.Mode == Emulated {
		// Host and port are placeholders that the replies replace per
		// connection (View.node); the map itself must be valid.
		m, err := NewMap(1, []Node{{ID: cfg.SelfID, Host: "127.0.0.1", Port: 6379, Slots: []Range{{0, Slots - 1}}}})
		if err != nil {
			return nil, err
		}
		v.m, v.self = m, 0
	}
	s.view.Store(v)
	return s, nil
}

// View returns the current view. It does not allocate.
func (s *State) View() *View { return s.view.Load() }

// Apply makes m the node's map if its version is above the current one.
// The same version with equal contents is accepted and changes nothing
// (changed is false), so re-pushing a map or reloading an unchanged file
// is harmless; an older version wraps ErrOlderMap and the same version
// with other contents wraps ErrMapConflict. Only On mode takes maps.
func (s *State) Apply(m *Map) (changed bool, err error) {
	if s.cfg.Mode != On {
		return false, fmt.Errorf("a cluster map is only taken with --cluster on (this node is %s)", s.cfg.Mode)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.view.Load()
	if cur.m != nil {
		switch {
		case cur.mv != nil && cur.mv.resume != nil && !(m.version == cur.m.version && m.Equal(cur.m)):
			return false, fmt.Errorf("slots are being handed over to another node (a pause of milliseconds): push the map again")
		case m.version < cur.m.version:
			return false, fmt.Errorf("%w: version %d, the node holds version %d", ErrOlderMap, m.version, cur.m.version)
		case m.version == cur.m.version && m.Equal(cur.m):
			return false, nil
		case m.version == cur.m.version:
			return false, fmt.Errorf("%w: version %d; give a changed map a higher version", ErrMapConflict, m.version)
		}
	}
	next := *cur
	next.m, next.self = m, m.Index(s.cfg.SelfID)
	if s.cfg.HandOver {
		next.mv = computeMoves(cur.m, m, s.cfg.SelfID)
	}
	s.view.Store(&next)
	return true, nil
}

// SetConfig parses data as a slot map and applies it: RL.CLUSTER
// SETCONFIG's operation, and a reload of --cluster-config.
func (s *State) SetConfig(data []byte) (changed bool, err error) {
	m, err := ParseMap(data)
	if err != nil {
		return false, err
	}
	return s.Apply(m)
}

// View is a snapshot of a node's cluster state, immutable and safe for
// concurrent use. Every method is cheap; Route does not allocate.
type View struct {
	mode         Mode
	selfID       string
	announceHost string
	announcePort int
	m            *Map   // nil: no map yet (On mode)
	self         int    // this node's index in m, or -1
	mv           *moves // slots moving to or from this node; nil: none
}

// Mode is the node's cluster mode.
func (v *View) Mode() Mode { return v.mode }

// SelfID is this node's id (CLUSTER MYID).
func (v *View) SelfID() string { return v.selfID }

// Map is the map the node holds, or nil (On mode before a map arrives,
// and Off mode). In Emulated mode it is the one-node map whose address the
// replies replace per connection.
func (v *View) Map() *Map { return v.m }

// Version is the map's version, 0 with no map.
func (v *View) Version() uint64 {
	if v.m == nil {
		return 0
	}
	return v.m.version
}

// OK reports whether the node serves requests (cluster_state:ok): it has a
// map, which covers every slot.
func (v *View) OK() bool { return v.m != nil }

// ConfigJSON is RL.CLUSTER GETCONFIG's reply: the map in canonical JSON,
// or nil with no map. In Emulated mode there is no map to show.
func (v *View) ConfigJSON() []byte {
	if v.m == nil || v.mode != On {
		return nil
	}
	b, _ := v.m.MarshalJSON() // cannot fail: plain strings and numbers
	return b
}

// node returns node i as told to the client on c: in Emulated mode, this
// node at the announced address or the address c dialled.
func (v *View) node(i int, c Conn) Node {
	n := *v.m.Node(i)
	if v.mode == Emulated {
		n.Host, n.Port = v.selfAddr(c)
		n.TLSPort = 0
	}
	return n
}

// selfAddr is where this node is, for the client on c: the announced
// address, else the address c dialled.
func (v *View) selfAddr(c Conn) (host string, port int) {
	if v.announceHost != "" {
		return v.announceHost, v.announcePort
	}
	if !c.LocalAddr.IsValid() {
		return "127.0.0.1", 0
	}
	return c.LocalAddr.Addr().Unmap().String(), int(c.LocalAddr.Port())
}

// Action is what a node does with a keyed command.
type Action uint8

const (
	// Serve: this node owns the slot (or cluster mode is off); run the
	// command here.
	Serve Action = iota
	// Moved: answer Decision.Redirect's MOVED; the client retries at the
	// owner and updates its slot table.
	Moved
	// Forward: relay the command to Decision.Owner and return its reply.
	Forward
	// Down: answer Decision.Err (CLUSTERDOWN).
	Down
	// ServeMoving: serve it here, holding State.Gate: the slot is being
	// handed over to its new owner (see move.go).
	ServeMoving
	// Wait: the slot's state is being copied to its new owner; wait for
	// View.Resumed, then route again with the new view.
	Wait
	// Ask: answer Decision.Redirect's ASK to the slot's old owner, which
	// serves it until it has handed it over to this node.
	Ask
)

// Decision is what View.Route decided for one slot.
type Decision struct {
	Action Action
	Slot   uint16
	Owner  *Node // the slot's owner (Moved, Forward); nil otherwise
	Err    error // Down's error
}

// MayForward is the rule for Route's forward argument: relay a command
// for a slot owned elsewhere, rather than answer MOVED, only when
// forwarding is on (--cluster-forward), the command is one that stock
// cluster clients cannot route by key themselves (clientRoutes false: the
// rlserver-only commands RL.* and CL.THROTTLE, which ioredis sends to any
// node, and every request of the gRPC and HTTP front ends, which have no
// client to redirect), it did not itself arrive from a peer node (which
// would let two nodes with different maps pass it back and forth), and it
// is not queued in a transaction (which runs on one node). Commands every
// client routes get MOVED, which also corrects the client's slot table; a
// forward would hide a stale table and cost a hop per request for good.
func MayForward(enabled, clientRoutes, fromPeer, inTransaction bool) bool {
	return enabled && !clientRoutes && !fromPeer && !inTransaction
}

// Route decides what this node does with a command whose keys hash to
// slot (see KeysSlot). forward says whether the caller may relay it rather
// than redirect (MayForward). Route does not allocate.
func (v *View) Route(slot uint16, forward bool) Decision {
	switch {
	case v.mode != On:
		return Decision{Action: Serve, Slot: slot}
	case v.m == nil:
		return Decision{Action: Down, Slot: slot, Err: ErrClusterDown}
	}
	if v.mv != nil {
		switch v.mv.state[slot] {
		case outgoing:
			return Decision{Action: ServeMoving, Slot: slot}
		case paused:
			return Decision{Action: Wait, Slot: slot}
		case incoming:
			// The old owner, at its address in the new map.
			from := v.m.Node(v.m.Index(v.mv.prev.Node(v.mv.prev.Owner(slot)).ID))
			if forward {
				return Decision{Action: Forward, Slot: slot, Owner: from}
			}
			return Decision{Action: Ask, Slot: slot, Owner: from}
		}
	}
	o := v.m.Owner(slot)
	if o == v.self {
		return Decision{Action: Serve, Slot: slot}
	}
	r := Decision{Action: Moved, Slot: slot, Owner: v.m.Node(o)}
	if forward {
		r.Action = Forward
	}
	return r
}

// Redirect is the MOVED error for a Moved decision (ASK for an Ask
// decision), for a client on TLS or not.
func (r Decision) Redirect(tls bool) *RedirectError {
	return &RedirectError{Ask: r.Action == Ask, Slot: r.Slot, Addr: string(r.Owner.appendRedirectAddr(nil, tls))}
}

// AppendMoved appends the wire form of a Moved decision's reply
// ("-MOVED 12182 127.0.0.1:17003\r\n") to dst without allocating beyond
// dst's growth; the same in RESP2 and RESP3.
func (r Decision) AppendMoved(dst []byte, tls bool) []byte {
	dst = append(dst, '-')
	dst = appendRedirect(dst, false, r.Slot, "")
	dst = r.Owner.appendRedirectAddr(dst, tls)
	return append(dst, '\r', '\n')
}

// HandsOver reports whether the node hands moving slots over with their
// state (Config.HandOver): its connections must then hold Gate while they
// run keyed commands.
func (s *State) HandsOver() bool { return s.cfg.HandOver }
