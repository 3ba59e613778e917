package cluster

import (
	"errors"
	"io"
	"sort"
	"strconv"
)

// The CLUSTER replies, built as RESP bytes appended to a caller's buffer in
// the protocol of the client's connection (Conn.Proto), in the shapes a
// real Redis 7.0.15 cluster sends (testdata/redis-7.0.15 holds captures;
// replies_test.go compares byte for byte). The builders only read the
// View; wrong arity and unknown subcommands are the command table's to
// answer.

// writer appends RESP to b in protocol proto (2 or 3).
type writer struct {
	b     []byte
	proto int
}

func (w *writer) header(prefix byte, n int) {
	w.b = append(w.b, prefix)
	w.b = strconv.AppendInt(w.b, int64(n), 10)
	w.b = append(w.b, '\r', '\n')
}

func (w *writer) array(n int) { w.header('*', n) }

// mapHeader starts a map of n pairs: RESP3's map, or a flat array of 2n
// elements in RESP2, as Redis writes maps to RESP2 clients.
func (w *writer) mapHeader(n int) {
	if w.proto == 3 {
		w.header('%', n)
	} else {
		w.header('*', 2*n)
	}
}

func (w *writer) integer(n int) {
	w.b = append(w.b, ':')
	w.b = strconv.AppendInt(w.b, int64(n), 10)
	w.b = append(w.b, '\r', '\n')
}

func (w *writer) bulk(s string) {
	w.header('$', len(s))
	w.b = append(w.b, s...)
	w.b = append(w.b, '\r', '\n')
}

func (w *writer) bulkBytes(s []byte) {
	w.header('$', len(s))
	w.b = append(w.b, s...)
	w.b = append(w.b, '\r', '\n')
}

// verbatim writes text: RESP3's verbatim string of format txt (as Redis
// answers CLUSTER INFO, CLUSTER NODES and INFO to RESP3 clients), or a bulk
// string in RESP2.
func (w *writer) verbatim(text []byte) {
	if w.proto != 3 {
		w.bulkBytes(text)
		return
	}
	w.header('=', len(text)+4)
	w.b = append(w.b, "txt:"...)
	w.b = append(w.b, text...)
	w.b = append(w.b, '\r', '\n')
}

// runs calls f for each maximal run of consecutive slots with one owner, in
// slot order, as CLUSTER SLOTS lists them. It walks the owners' sorted
// ranges, not every slot.
func (m *Map) runs(f func(r Range, owner int)) {
	for s := 0; s < Slots; {
		o := int(m.owner[s])
		rs := m.nodes[o].Slots
		// The owner's range holding s: the last one starting at or before s.
		i := sort.Search(len(rs), func(i int) bool { return int(rs[i].Start) > s }) - 1
		f(Range{uint16(s), rs[i].End}, o)
		s = int(rs[i].End) + 1
	}
}

// AppendSlots appends CLUSTER SLOTS's reply: per run of slots, [start, end,
// node], each node [host, port, id, metadata], metadata a map holding
// hostname when the node has one (RESP2: a flat array), empty otherwise.
// With no map it is an empty array.
func (v *View) AppendSlots(dst []byte, c Conn) []byte {
	w := writer{dst, c.Proto}
	if v.m == nil {
		w.array(0)
		return w.b
	}
	n := 0
	v.m.runs(func(Range, int) { n++ })
	w.array(n)
	v.m.runs(func(r Range, o int) {
		node := v.node(o, c)
		w.array(3)
		w.integer(int(r.Start))
		w.integer(int(r.End))
		w.array(4)
		w.bulk(node.Host)
		w.integer(node.clientPort(c.TLS))
		w.bulk(node.ID)
		if node.Hostname != "" {
			w.mapHeader(1)
			w.bulk("hostname")
			w.bulk(node.Hostname)
		} else {
			w.mapHeader(0)
		}
	})
	return w.b
}

// AppendShards appends CLUSTER SHARDS's reply: one shard per node (there
// are no replicas), in the map's order, each a map of slots (a flat list
// start1, end1, start2, end2...) and nodes (the one node's details, fields
// in Redis's order). With no map it is an empty array.
func (v *View) AppendShards(dst []byte, c Conn) []byte {
	w := writer{dst, c.Proto}
	if v.m == nil {
		w.array(0)
		return w.b
	}
	w.array(v.m.Len())
	for i := range v.m.Len() {
		node := v.node(i, c)
		w.mapHeader(2)
		w.bulk("slots")
		w.array(2 * len(node.Slots))
		for _, r := range node.Slots {
			w.integer(int(r.Start))
			w.integer(int(r.End))
		}
		w.bulk("nodes")
		w.array(1)
		fields := 7
		if node.TLSPort != 0 {
			fields++
		}
		if node.Hostname != "" {
			fields++
		}
		w.mapHeader(fields)
		w.bulk("id")
		w.bulk(node.ID)
		w.bulk("port")
		w.integer(node.Port)
		if node.TLSPort != 0 {
			w.bulk("tls-port")
			w.integer(node.TLSPort)
		}
		w.bulk("ip")
		w.bulk(node.Host)
		w.bulk("endpoint")
		w.bulk(node.Host)
		if node.Hostname != "" {
			w.bulk("hostname")
			w.bulk(node.Hostname)
		}
		w.bulk("role")
		w.bulk("master")
		w.bulk("replication-offset")
		w.integer(0)
		w.bulk("health")
		w.bulk("online")
	}
	return w.b
}

// AppendNodes appends CLUSTER NODES's reply: one line per node, each ended
// by "\n", as a bulk string (RESP3: a verbatim string):
//
//	<id> <host>:<port>@<bus port>[,<hostname>] <flags> - <ping sent> <pong received> <epoch> connected <slots>...
//
// rlserver has no cluster bus, so the bus port is 0 and the ping and pong
// times are 0; every node's epoch is the map's version; flags are
// "myself,master" for this node and "master" for the others. With no map
// the reply is this node's line alone, owning nothing.
func (v *View) AppendNodes(dst []byte, c Conn) []byte {
	var text []byte
	if v.m == nil {
		host, port := v.selfAddr(c)
		text = appendNodeLine(text, &Node{ID: v.selfID, Host: host, Port: port}, true, 0, c.TLS)
	} else {
		for i := range v.m.Len() {
			node := v.node(i, c)
			text = appendNodeLine(text, &node, i == v.self, v.m.version, c.TLS)
		}
	}
	w := writer{dst, c.Proto}
	w.verbatim(text)
	return w.b
}

func appendNodeLine(b []byte, n *Node, self bool, epoch uint64, tls bool) []byte {
	b = append(b, n.ID...)
	b = append(b, ' ')
	b = n.appendRedirectAddr(b, tls)
	b = append(b, "@0"...)
	if n.Hostname != "" {
		b = append(b, ',')
		b = append(b, n.Hostname...)
	}
	if self {
		b = append(b, " myself,master"...)
	} else {
		b = append(b, " master"...)
	}
	b = append(b, " - 0 0 "...)
	b = strconv.AppendUint(b, epoch, 10)
	b = append(b, " connected"...)
	for _, r := range n.Slots {
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(r.Start), 10)
		if r.End != r.Start {
			b = append(b, '-')
			b = strconv.AppendInt(b, int64(r.End), 10)
		}
	}
	return append(b, '\n')
}

// RulesInfo is what CLUSTER INFO reports of the node's rule set, so that
// operators (and rlserver cluster check) see nodes whose rules differ.
type RulesInfo struct {
	Version uint64 // the rule set's version (rl_rules_version)
	// Digest names the rule set's contents (rl_rules_digest); equal
	// digests mean equal rules whatever the versions. Empty: not shown.
	Digest string
}

// AppendInfo appends CLUSTER INFO's reply: Redis's fields in Redis's order
// (cluster_state ok with a map, fail without; the slot counts; the node
// counts; epochs, which are the map's version; zero message counts, as
// there is no bus), then rlserver's: rl_cluster_mode,
// rl_cluster_map_version, rl_rules_version and rl_rules_digest. A bulk
// string of "field:value\r\n" lines (RESP3: a verbatim string).
func (v *View) AppendInfo(dst []byte, c Conn, rules RulesInfo) []byte {
	state, assigned, known, size := "fail", 0, 1, 0
	epoch, myEpoch := v.Version(), uint64(0)
	if v.m != nil {
		state, assigned, known = "ok", Slots, v.m.Len()
		for i := range v.m.Len() {
			if len(v.m.nodes[i].Slots) > 0 {
				size++
			}
		}
		if v.self >= 0 {
			myEpoch = epoch
		}
	}
	var t []byte
	t = infoLine(t, "cluster_state", state)
	t = infoInt(t, "cluster_slots_assigned", uint64(assigned))
	t = infoInt(t, "cluster_slots_ok", uint64(assigned))
	t = infoInt(t, "cluster_slots_pfail", 0)
	t = infoInt(t, "cluster_slots_fail", 0)
	t = infoInt(t, "cluster_known_nodes", uint64(known))
	t = infoInt(t, "cluster_size", uint64(size))
	t = infoInt(t, "cluster_current_epoch", epoch)
	t = infoInt(t, "cluster_my_epoch", myEpoch)
	t = infoInt(t, "cluster_stats_messages_sent", 0)
	t = infoInt(t, "cluster_stats_messages_received", 0)
	t = infoInt(t, "total_cluster_links_buffer_limit_exceeded", 0)
	t = infoLine(t, "rl_cluster_mode", v.mode.String())
	t = infoInt(t, "rl_cluster_map_version", v.Version())
	t = infoInt(t, "rl_rules_version", rules.Version)
	if rules.Digest != "" {
		t = infoLine(t, "rl_rules_digest", rules.Digest)
	}
	w := writer{dst, c.Proto}
	w.verbatim(t)
	return w.b
}

func infoLine(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, ':')
	b = append(b, value...)
	return append(b, '\r', '\n')
}

func infoInt(b []byte, name string, value uint64) []byte {
	b = append(b, name...)
	b = append(b, ':')
	b = strconv.AppendUint(b, value, 10)
	return append(b, '\r', '\n')
}

// WriteInfoSection writes the fields of INFO's "# Cluster" section (the
// caller writes the heading, as for its other sections): cluster_enabled,
// 1 in On and Emulated modes. redis-py's RedisCluster refuses a node whose
// INFO lacks a true cluster_enabled.
func WriteInfoSection(w io.StringWriter, mode Mode) {
	if mode == Off {
		w.WriteString("cluster_enabled:0\r\n")
	} else {
		w.WriteString("cluster_enabled:1\r\n")
	}
}

// AppendMyID appends CLUSTER MYID's reply: this node's id, a bulk string.
func (v *View) AppendMyID(dst []byte, c Conn) []byte {
	w := writer{dst, c.Proto}
	w.bulk(v.selfID)
	return w.b
}

// AppendKeySlot appends CLUSTER KEYSLOT's reply: key's slot, an integer.
func AppendKeySlot(dst []byte, key []byte) []byte {
	w := writer{b: dst}
	w.integer(int(KeySlot(key)))
	return w.b
}

// Errors of the CLUSTER subcommands that take a slot, in Redis's words
// (the protocol layer prefixes "ERR ").
var (
	// ErrNotInteger: the slot is not an integer.
	ErrNotInteger = errors.New("value is not an integer or out of range")
	// ErrInvalidSlot: the slot is an integer outside 0..16383.
	ErrInvalidSlot = redisWords("Invalid slot")
)

// ParseSlot reads a slot argument as Redis does: a decimal integer (an
// optional '-', no '+', no spaces, no leading zeros but "0") in
// 0..Slots-1. Not an integer wraps nothing and is ErrNotInteger; out of
// range is ErrInvalidSlot.
func ParseSlot(arg []byte) (uint16, error) {
	n, ok := parseInt64(arg)
	if !ok {
		return 0, ErrNotInteger
	}
	if n < 0 || n >= Slots {
		return 0, ErrInvalidSlot
	}
	return uint16(n), nil
}

// parseInt64 parses a decimal integer as Redis's string2ll: an optional
// '-', then digits without leading zeros (except "0" itself), fitting an
// int64.
func parseInt64(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	d := b
	if neg {
		d = b[1:]
	}
	// 19 digits cannot overflow a uint64; every 20-digit number is out of
	// an int64's range anyway.
	if len(d) == 0 || len(d) > 19 || (d[0] == '0' && (len(d) > 1 || neg)) {
		return 0, false
	}
	var u uint64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case neg && u <= 1<<63:
		return -int64(u), true
	case !neg && u < 1<<63:
		return int64(u), true
	}
	return 0, false
}

// AppendCountKeysInSlot appends CLUSTER COUNTKEYSINSLOT's reply: the count
// of keys in the slot arg names, from count (which the keyspace answers).
// A bad slot returns ParseSlot's error and appends nothing.
func AppendCountKeysInSlot(dst []byte, arg []byte, count func(slot uint16) int) ([]byte, error) {
	slot, err := ParseSlot(arg)
	if err != nil {
		return dst, err
	}
	w := writer{b: dst}
	w.integer(count(slot))
	return w.b, nil
}
