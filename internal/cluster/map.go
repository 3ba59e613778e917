package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
)

// Limits of a slot map, so that a pushed map cannot make a node hold
// unbounded memory.
const (
	// MaxNodes is the most nodes a map may list (Redis Cluster's own
	// practical bound).
	MaxNodes = 1000
	// MaxMapBytes bounds a map's JSON text. The largest useful map, every
	// slot a range of its own over MaxNodes nodes, is about 0.5 MiB.
	MaxMapBytes = 4 << 20
	// noOwner marks a slot with no owner in a table under construction.
	noOwner = 0xFFFF
)

// Range is a run of slots, Start through End inclusive, 0 <= Start <= End
// < Slots. In JSON it is a two-element array [start, end].
type Range struct{ Start, End uint16 }

// Len is the number of slots in r.
func (r Range) Len() int { return int(r.End) - int(r.Start) + 1 }

// MarshalJSON writes r as [start, end].
func (r Range) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, "[%d,%d]", r.Start, r.End), nil
}

// UnmarshalJSON reads [start, end], refusing any other shape and slots
// outside 0..Slots-1.
func (r *Range) UnmarshalJSON(b []byte) error {
	var v []int64
	if err := json.Unmarshal(b, &v); err != nil || len(v) != 2 {
		return fmt.Errorf("slot range %s: want [start, end], two integers", clip(b))
	}
	if v[0] < 0 || v[1] >= Slots || v[0] > v[1] {
		return fmt.Errorf("slot range [%d, %d]: want 0 <= start <= end <= %d", v[0], v[1], Slots-1)
	}
	r.Start, r.End = uint16(v[0]), uint16(v[1])
	return nil
}

// Node is one node of a slot map: who it is, where clients reach it, and
// the slots it owns.
type Node struct {
	// ID names the node: 40 lower-case hex digits, like a Redis node id,
	// unique in the map. A node knows its own id (State's self) and finds
	// itself in a map by it.
	ID string `json:"id"`
	// Host is the address clients are told (in MOVED, ASK and CLUSTER
	// SLOTS): an IP address or a DNS name, never empty and never an
	// unspecified address such as 0.0.0.0.
	Host string `json:"host"`
	// Port is the port clients are told, 1..65535.
	Port int `json:"port"`
	// TLSPort, if not 0, is told to clients connected over TLS instead of
	// Port, as Redis does with tls-port.
	TLSPort int `json:"tls_port,omitempty"`
	// Hostname, if set, is reported beside Host (CLUSTER SLOTS metadata,
	// CLUSTER SHARDS, CLUSTER NODES) for clients that prefer names; it is
	// not used for routing.
	Hostname string `json:"hostname,omitempty"`
	// ForwardAddr, if set, is the host:port other nodes use to forward
	// requests to this node when it differs from what clients are told
	// (a container network name behind a published port).
	ForwardAddr string `json:"forward_addr,omitempty"`
	// Slots are the runs of slots the node owns, sorted and merged once
	// the map is validated. A node may own none.
	Slots []Range `json:"slots"`
}

// ClientAddr is host:port as a client dials it: Port, or TLSPort for a
// client on TLS when the node has one.
func (n *Node) ClientAddr(tls bool) string {
	return net.JoinHostPort(n.Host, strconv.Itoa(n.clientPort(tls)))
}

// appendRedirectAddr appends host:port as MOVED and ASK give it: the host
// bare even when it is an IPv6 address ("::1:6381"), as Redis writes it;
// clients split at the last ':' (redis-cli, go-redis, redis-py), and
// redis-cli 7.0 would not resolve a bracketed "[::1]".
func (n *Node) appendRedirectAddr(dst []byte, tls bool) []byte {
	dst = append(dst, n.Host...)
	dst = append(dst, ':')
	return strconv.AppendInt(dst, int64(n.clientPort(tls)), 10)
}

// PeerAddr is host:port other nodes forward to: ForwardAddr if set, else
// the client address.
func (n *Node) PeerAddr(tls bool) string {
	if n.ForwardAddr != "" {
		return n.ForwardAddr
	}
	return n.ClientAddr(tls)
}

func (n *Node) clientPort(tls bool) int {
	if tls && n.TLSPort != 0 {
		return n.TLSPort
	}
	return n.Port
}

// SlotCount is the number of slots n owns.
func (n *Node) SlotCount() int {
	c := 0
	for _, r := range n.Slots {
		c += r.Len()
	}
	return c
}

// Map is a validated slot map: a version, the nodes, and which node owns
// each slot. Every slot has exactly one owner. A Map is immutable once
// made (by ParseMap or NewMap) and safe for concurrent use; the nodes its
// methods return must not be modified.
type Map struct {
	version uint64
	nodes   []Node
	// owner[slot] is the index in nodes of the slot's owner.
	owner [Slots]uint16
}

// mapJSON is a map's JSON form.
type mapJSON struct {
	// Version orders maps: a node accepts a map only if its version is
	// above the one it holds (or equal, with equal contents). It starts at
	// 1; 0 means "no map".
	Version uint64 `json:"version"`
	Nodes   []Node `json:"nodes"`
}

// ParseMap decodes and validates a slot map's JSON (the --cluster-config
// file, or RL.CLUSTER SETCONFIG's argument). Unknown fields are refused,
// so that a misspelt field is not silently ignored. Errors wrap
// ErrInvalidMap.
func ParseMap(data []byte) (*Map, error) {
	if len(data) > MaxMapBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrInvalidMap, len(data), MaxMapBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var mj mapJSON
	if err := dec.Decode(&mj); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidMap, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: text after the map's closing brace", ErrInvalidMap)
	}
	return NewMap(mj.Version, mj.Nodes)
}

// NewMap validates nodes and makes a map of them at version. It copies
// nodes, sorting and merging each node's slot ranges. Errors wrap
// ErrInvalidMap and name the first rule broken:
//
//   - version is at least 1;
//   - 1 to MaxNodes nodes, with unique ids of 40 lower-case hex digits;
//   - hosts, hostnames and forward addresses that clients and nodes can
//     dial (see validHost), ports in 1..65535, no two nodes at one address;
//   - every slot owned by exactly one node.
func NewMap(version uint64, nodes []Node) (*Map, error) {
	m := &Map{version: version, nodes: make([]Node, len(nodes))}
	for i := range nodes {
		m.nodes[i] = nodes[i]
		m.nodes[i].Slots = normalize(nodes[i].Slots)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidMap, err)
	}
	return m, nil
}

// normalize returns rs sorted and with adjacent or overlapping runs merged,
// in a new slice. Overlaps are found by validate before merging hides
// them, from the original ranges.
func normalize(rs []Range) []Range {
	out := slices.Clone(rs)
	slices.SortFunc(out, func(a, b Range) int { return int(a.Start) - int(b.Start) })
	merged := out[:0]
	for _, r := range out {
		if n := len(merged); n > 0 && int(r.Start) <= int(merged[n-1].End)+1 {
			merged[n-1].End = max(merged[n-1].End, r.End)
			continue
		}
		merged = append(merged, r)
	}
	if len(merged) == 0 {
		return []Range{} // "slots": [] in JSON, not null
	}
	return slices.Clip(merged)
}

func (m *Map) validate() error {
	if m.version == 0 {
		return fmt.Errorf("version must be at least 1")
	}
	if len(m.nodes) == 0 || len(m.nodes) > MaxNodes {
		return fmt.Errorf("%d nodes; a map lists 1 to %d", len(m.nodes), MaxNodes)
	}
	ids := make(map[string]int, len(m.nodes))
	addrs := make(map[string]int, 2*len(m.nodes))
	for i := range m.nodes {
		n := &m.nodes[i]
		if err := validNode(n); err != nil {
			return fmt.Errorf("node %d: %v", i, err)
		}
		if j, dup := ids[n.ID]; dup {
			return fmt.Errorf("nodes %d and %d have the same id %s", j, i, n.ID)
		}
		ids[n.ID] = i
		for _, a := range []string{n.ClientAddr(false), n.ClientAddr(true)} {
			if j, dup := addrs[a]; dup && j != i {
				return fmt.Errorf("nodes %d and %d are both at %s", j, i, a)
			}
			addrs[a] = i
		}
	}
	return m.buildOwners()
}

// buildOwners fills the owner table, refusing a slot owned twice or not at
// all. It reads the normalized ranges: a slot listed twice by one node
// was merged, which is harmless, so only two nodes claiming it is an error.
func (m *Map) buildOwners() error {
	for s := range m.owner {
		m.owner[s] = noOwner
	}
	for i := range m.nodes {
		for _, r := range m.nodes[i].Slots {
			for s := int(r.Start); s <= int(r.End); s++ {
				if o := m.owner[s]; o != noOwner {
					return fmt.Errorf("slot %d is owned by both node %d (%s) and node %d (%s)",
						s, o, m.nodes[o].ID, i, m.nodes[i].ID)
				}
				m.owner[s] = uint16(i)
			}
		}
	}
	for s := 0; s < Slots; s++ {
		if m.owner[s] != noOwner {
			continue
		}
		e := s
		for e+1 < Slots && m.owner[e+1] == noOwner {
			e++
		}
		if e == s {
			return fmt.Errorf("slot %d is owned by no node; every slot 0-%d must have one owner", s, Slots-1)
		}
		return fmt.Errorf("slots %d-%d are owned by no node; every slot 0-%d must have one owner", s, e, Slots-1)
	}
	return nil
}

func validNode(n *Node) error {
	if !validID(n.ID) {
		return fmt.Errorf("id %q is not 40 lower-case hex digits", clip([]byte(n.ID)))
	}
	if err := validHost(n.Host); err != nil {
		return fmt.Errorf("host: %v", err)
	}
	if n.Port < 1 || n.Port > 65535 {
		return fmt.Errorf("port %d is out of range 1-65535", n.Port)
	}
	if n.TLSPort != 0 && (n.TLSPort < 1 || n.TLSPort > 65535 || n.TLSPort == n.Port) {
		return fmt.Errorf("tls_port %d is out of range 1-65535 or equals port", n.TLSPort)
	}
	if n.Hostname != "" && !validHostname(n.Hostname) {
		return fmt.Errorf("hostname %q: want letters, digits, '-' and '.', at most 255 bytes", clip([]byte(n.Hostname)))
	}
	if n.ForwardAddr != "" {
		if err := validAddr(n.ForwardAddr); err != nil {
			return fmt.Errorf("forward_addr: %v", err)
		}
	}
	return nil
}

// ValidNodeID reports whether id is a node id: 40 lower-case hex digits.
func ValidNodeID(id string) bool { return validID(id) }

func validID(id string) bool {
	if len(id) != 40 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// validHost accepts what every cluster client can dial and what fits the
// replies it appears in: an IP address that is not unspecified (0.0.0.0
// or ::, which a client would read as itself) and has no zone, or a DNS
// name (validHostname). Empty hosts are refused: redis-cli 7.0 follows
// "MOVED 3999 :6381" to a host it cannot resolve, and ioredis skips such
// a node.
func validHost(h string) error {
	if h == "" {
		return fmt.Errorf("empty; clients must be told a host to dial")
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		if ip.IsUnspecified() {
			return fmt.Errorf("%s is unspecified; announce the address clients dial", h)
		}
		if ip.Zone() != "" {
			return fmt.Errorf("%s has a zone, which clients cannot be told", h)
		}
		return nil
	}
	if !validHostname(h) {
		return fmt.Errorf("%q is neither an IP address nor a DNS name (letters, digits, '-' and '.')", clip([]byte(h)))
	}
	return nil
}

// validHostname accepts DNS names as Redis's cluster-announce-hostname
// does: letters, digits, '-' and '.', 1 to 255 bytes.
func validHostname(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// validAddr checks a host:port.
func validAddr(addr string) error {
	_, _, err := SplitAddr(addr)
	return err
}

// SplitAddr splits and checks a node address, host:port ("[::1]:6380" for
// IPv6), by the rules of a map's host and port: what
// --cluster-announce-addr and `rlserver cluster create` take.
func SplitAddr(addr string) (host string, port int, err error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not host:port", clip([]byte(addr)))
	}
	if err := validHost(host); err != nil {
		return "", 0, err
	}
	p, ok := atoi(ps)
	if !ok || p < 1 || p > 65535 {
		return "", 0, fmt.Errorf("port %q is out of range 1-65535", clip([]byte(ps)))
	}
	return host, p, nil
}

// Version is the map's version, at least 1.
func (m *Map) Version() uint64 { return m.version }

// Len is the number of nodes.
func (m *Map) Len() int { return len(m.nodes) }

// Node returns node i, 0 <= i < Len(), in the order the map lists them. It
// must not be modified.
func (m *Map) Node(i int) *Node { return &m.nodes[i] }

// Owner returns the index of slot's owner. slot must be below Slots.
func (m *Map) Owner(slot uint16) int { return int(m.owner[slot]) }

// Index returns the index of the node with id, or -1.
func (m *Map) Index(id string) int {
	for i := range m.nodes {
		if m.nodes[i].ID == id {
			return i
		}
	}
	return -1
}

// MarshalJSON writes the map in its canonical form: nodes in the map's
// order, each node's ranges sorted and merged, no optional field that is
// unset. ParseMap reads it back to an Equal map.
func (m *Map) MarshalJSON() ([]byte, error) {
	return json.Marshal(mapJSON{Version: m.version, Nodes: m.nodes})
}

// Equal reports whether a and b have the same version and the same nodes
// (compared by id, in any order) owning the same slots.
func (a *Map) Equal(b *Map) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.version != b.version || len(a.nodes) != len(b.nodes) {
		return false
	}
	for i := range a.nodes {
		j := b.Index(a.nodes[i].ID)
		if j < 0 || !sameNode(&a.nodes[i], &b.nodes[j]) {
			return false
		}
	}
	return true
}

func sameNode(a, b *Node) bool {
	return a.ID == b.ID && a.Host == b.Host && a.Port == b.Port && a.TLSPort == b.TLSPort &&
		a.Hostname == b.Hostname && a.ForwardAddr == b.ForwardAddr && slices.Equal(a.Slots, b.Slots)
}

// EvenMap assigns the slots to nodes in contiguous runs of nearly equal
// size, in the order given, as redis-cli --cluster create does (three
// nodes get 0-5460, 5461-10922, 10923-16383). Slots already in nodes are
// ignored. It validates the result like NewMap.
func EvenMap(version uint64, nodes []Node) (*Map, error) {
	n := len(nodes)
	if n == 0 || n > MaxNodes {
		return nil, fmt.Errorf("%w: %d nodes; a map lists 1 to %d", ErrInvalidMap, n, MaxNodes)
	}
	out := make([]Node, n)
	for i := range nodes {
		out[i] = nodes[i]
		// Node i starts at i*Slots/n rounded to the nearest slot.
		start := (2*i*Slots + n) / (2 * n)
		end := (2*(i+1)*Slots+n)/(2*n) - 1
		out[i].Slots = []Range{{uint16(start), uint16(end)}}
	}
	return NewMap(version, out)
}

// atoi parses a port: 1 to 5 decimal digits, nothing else.
func atoi(s string) (int, bool) {
	if len(s) == 0 || len(s) > 5 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// clip shortens b for an error message, so that a huge bad value does not
// make a huge error.
func clip(b []byte) string {
	const most = 64
	if len(b) > most {
		return string(b[:most]) + "..."
	}
	return string(b)
}

// checkConsistency verifies a Map's invariants (tests and the fuzzer call
// it on every map made): every slot's owner is a node, the owner table and
// the nodes' ranges say the same, each node's ranges are sorted, disjoint
// and not adjacent (normalized), ids are unique.
func (m *Map) checkConsistency() error {
	if m.version == 0 || len(m.nodes) == 0 || len(m.nodes) > MaxNodes {
		return fmt.Errorf("version %d with %d nodes", m.version, len(m.nodes))
	}
	var seen [Slots]bool
	ids := map[string]bool{}
	for i := range m.nodes {
		n := &m.nodes[i]
		if ids[n.ID] || !validID(n.ID) {
			return fmt.Errorf("node %d: id %q repeated or invalid", i, n.ID)
		}
		ids[n.ID] = true
		for j, r := range n.Slots {
			if r.Start > r.End || r.End >= Slots || (j > 0 && int(n.Slots[j-1].End)+1 >= int(r.Start)) {
				return fmt.Errorf("node %d: ranges %v not normalized", i, n.Slots)
			}
			for s := int(r.Start); s <= int(r.End); s++ {
				if seen[s] || int(m.owner[s]) != i {
					return fmt.Errorf("slot %d: owner table says %d, node %d lists it", s, m.owner[s], i)
				}
				seen[s] = true
			}
		}
	}
	for s, ok := range seen {
		if !ok {
			return fmt.Errorf("slot %d is in no node's ranges", s)
		}
	}
	return nil
}
