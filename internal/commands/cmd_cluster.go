package commands

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"

	"github.com/rlserver/rlserver/internal/cluster"
	"github.com/rlserver/rlserver/internal/cluster/forward"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/service"
)

// ClusterConfig wires a Handler into Redis Cluster mode (docs/cluster.md).
// A nil *ClusterConfig in Config is cluster mode off: no command is
// checked for its slot, and the CLUSTER commands are refused.
type ClusterConfig struct {
	// State is the node's cluster state: its mode (On or Emulated), its id
	// and the slot map it holds.
	State *cluster.State
	// Forward, if set, relays rlserver's own commands (which stock cluster
	// clients cannot route) for a slot owned elsewhere to the owner
	// (--cluster-forward); nil answers MOVED to every command.
	Forward *forward.Pool
	// Peers, if set, reaches the other nodes to broadcast RL.RULE SET and
	// DEL (cmd_cluster_rules.go); nil applies them to this node alone.
	// The same pool as Forward when forwarding is on.
	Peers *forward.Pool
	// TLS: the server serves TLS, so clients are told the nodes' TLS
	// ports and peers are reached on them.
	TLS bool
	// Accepted, if set, is called with each map RL.CLUSTER SETCONFIG
	// accepted and that changed the node's map (to save it, and to drop
	// pooled connections to nodes no longer in it). Its error is logged;
	// the map stays accepted.
	Accepted func(m *cluster.Map) error

	handingOver sync.Mutex   // one hand-over at a time
	lastPause   atomic.Int64 // ns the last hand-over held its slots
}

// clusterConn is a connection's cluster state, in its session.
type clusterConn struct {
	// peer: the connection is another node's (RL.CLUSTER PEER): its
	// commands are never forwarded again.
	peer bool
	// In a transaction, the slot of the keys queued so far (txKeyed says
	// whether there was one) and whether two queued commands' keys hash
	// to different slots, which EXEC then refuses with CROSSSLOT.
	txKeyed, txCross bool
	txSlot           uint16
	// reply is the buffer forwarded replies are read into, reused.
	reply []byte
}

// groupCluster is Redis's group of the cluster commands.
const groupCluster = "cluster"

// clusterCommands returns CLUSTER and its subcommands, READONLY,
// READWRITE, ASKING and rlserver's RL.CLUSTER.
func clusterCommands() []*command {
	sub := func(name string, arity int, summary string, run func(*session, [][]byte) error) *command {
		return &command{name: name, arity: arity, flags: flagStale, since: "3.0.0", summary: summary, run: run}
	}
	conn := func(name string, flags cmdFlags, summary string) *command {
		return &command{name: name, arity: 1, flags: flags, group: groupCluster,
			since: "3.0.0", summary: summary, run: cmdClusterConnMode}
	}
	help := sub("cluster|help", 2, "Show the subcommands.", cmdClusterHelp)
	help.flags |= flagLoading
	return []*command{
		&command{name: "cluster", arity: -2, group: groupCluster, since: "3.0.0",
			summary: "Cluster topology: SLOTS, SHARDS, NODES, INFO, MYID, KEYSLOT, COUNTKEYSINSLOT, GETKEYSINSLOT, HELP.",
			subcommands: append(clusterSlotCommands(),
				sub("cluster|slots", 2, "Slot ranges and the node serving each.", cmdClusterSlots),
				sub("cluster|shards", 2, "Each node with its slots.", cmdClusterShards),
				sub("cluster|nodes", 2, "The nodes, in Redis's nodes.conf format.", cmdClusterNodes),
				sub("cluster|info", 2, "The cluster's state (cluster_state:ok with a map), slots, nodes, map and rules versions.", cmdClusterInfo),
				sub("cluster|myid", 2, "This node's id.", cmdClusterMyID),
				sub("cluster|keyslot", 3, "The hash slot of a key.", cmdClusterKeySlot),
				help,
			)},
		conn("readonly", flagLoading|flagStale|flagFast, "Accepted for cluster clients: there are no replicas to read from."),
		conn("readwrite", flagLoading|flagStale|flagFast, "Accepted for cluster clients: there are no replicas."),
		conn("asking", flagFast, "Accepted for cluster clients following an ASK: the node it names serves the slot until it hands it over."),
		&command{name: "rl.cluster", arity: -2, group: groupCluster, since: rlSince,
			summary: "Manage the node's slot map: SETCONFIG, GETCONFIG, PEER, HELP.",
			subcommands: []*command{
				{name: "rl.cluster|setconfig", arity: 3, flags: flagAdmin | flagNoScript | flagNoMulti, since: rlSince,
					summary: "Take a slot map (JSON) whose version is above the node's.", run: cmdRLClusterSetConfig},
				{name: "rl.cluster|getconfig", arity: 2, flags: flagAdmin, since: rlSince,
					summary: "The node's slot map as JSON, or null.", run: cmdRLClusterGetConfig},
				{name: "rl.cluster|import", arity: -5, flags: flagAdmin | flagNoScript | flagNoMulti, since: rlSince,
					summary: "Take the state of slots handed over by another node (sent by the nodes themselves).", run: cmdRLClusterImport},
				{name: "rl.cluster|peer", arity: 2, flags: flagFast, since: rlSince,
					summary: "Mark this connection as another node's: its commands are never forwarded again.", run: cmdRLClusterPeer},
				{name: "rl.cluster|help", arity: 2, since: rlSince,
					summary: "Show the subcommands.", run: cmdRLClusterHelp},
			}},
	}
}

// clusterView returns the node's cluster view, or ErrNotCluster's reply
// when cluster mode is off.
func (c *session) clusterView() (*cluster.View, error) {
	cl := c.h.cfg.Cluster
	if cl == nil {
		return nil, errf("%s", cluster.ErrNotCluster.Error())
	}
	return cl.State.View(), nil
}

// clusterConnInfo is what the CLUSTER replies need of the connection.
func (c *session) clusterConnInfo() cluster.Conn {
	la, _ := netip.ParseAddrPort(c.conn.LocalAddr()) // a Unix socket: the zero value
	return cluster.Conn{Proto: c.out.Proto(), TLS: c.h.cfg.Cluster.TLS, LocalAddr: la}
}

// clusterReply runs one of the View's reply builders and writes its reply.
func (c *session) clusterReply(build func(v *cluster.View, dst []byte, cc cluster.Conn) []byte) error {
	v, err := c.clusterView()
	if err != nil {
		return err
	}
	c.out.Raw(build(v, nil, c.clusterConnInfo()))
	return nil
}

func cmdClusterSlots(c *session, _ [][]byte) error {
	return c.clusterReply((*cluster.View).AppendSlots)
}

func cmdClusterShards(c *session, _ [][]byte) error {
	return c.clusterReply((*cluster.View).AppendShards)
}

func cmdClusterNodes(c *session, _ [][]byte) error {
	return c.clusterReply((*cluster.View).AppendNodes)
}

func cmdClusterMyID(c *session, _ [][]byte) error {
	return c.clusterReply((*cluster.View).AppendMyID)
}

func cmdClusterInfo(c *session, _ [][]byte) error {
	set := c.h.svc.Rules()
	info := cluster.RulesInfo{Version: set.Version, Digest: rulesDigest(set)}
	return c.clusterReply(func(v *cluster.View, dst []byte, cc cluster.Conn) []byte {
		return v.AppendInfo(dst, cc, info)
	})
}

func cmdClusterKeySlot(c *session, args [][]byte) error {
	if _, err := c.clusterView(); err != nil {
		return err
	}
	c.out.Integer(int64(cluster.KeySlot(args[2])))
	return nil
}

func cmdClusterHelp(c *session, _ [][]byte) error {
	writeHelp(c, "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"INFO", "    Return information about the cluster.",
		"COUNTKEYSINSLOT <slot>", "    Return the number of keys in <slot>.",
		"GETKEYSINSLOT <slot> <count>", "    Return key names stored by current node in a slot.",
		"KEYSLOT <key>", "    Return the hash slot for <key>.",
		"MYID", "    Return the node id.",
		"NODES", "    Return cluster configuration seen by node. Output format:",
		"    <id> <ip:port@bus-port[,hostname]> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
		"SHARDS", "    Return information about slot range mappings and the nodes associated with them.",
		"SLOTS", "    Return information about slots range mappings. Each range is made of:",
		"    start, end, master and replicas IP addresses, ports and ids",
		"HELP", "    Print this help.")
	return nil
}

// cmdClusterConnMode answers READONLY, READWRITE and ASKING: OK in cluster
// mode (there are no replicas, and no slot is ever migrating, so none of
// them changes what a command does), Redis's refusal otherwise.
func cmdClusterConnMode(c *session, _ [][]byte) error {
	if _, err := c.clusterView(); err != nil {
		return err
	}
	c.out.OK()
	return nil
}

// cmdRLClusterSetConfig handles RL.CLUSTER SETCONFIG json: the map is
// taken if its version is above the node's (the same map again changes
// nothing), refused with the rule it breaks otherwise.
func cmdRLClusterSetConfig(c *session, args [][]byte) error {
	if _, err := c.clusterView(); err != nil {
		return err
	}
	cl := c.h.cfg.Cluster
	c.flushAndLeaveGate() // a hand-over below waits for every holder of the gate
	changed, err := cl.State.SetConfig(args[2])
	if err != nil {
		return errf("%v", err)
	}
	if changed {
		m := cl.State.View().Map()
		c.h.log.Info("cluster map accepted", "version", m.Version(), "nodes", m.Len(), "from", c.conn.RemoteAddr())
		if cl.Accepted != nil {
			if err := cl.Accepted(m); err != nil {
				c.h.log.Error("cluster map accepted but not saved", "version", m.Version(), "err", err)
			}
		}
	}
	// Slots this node gives away are handed over before the reply. The
	// map is taken either way; a failure says which slots stay here, and
	// pushing the map again retries.
	if err := c.h.HandOver(); err != nil {
		return errf("cluster map taken, but not every slot it gives away was handed over: %v", err)
	}
	c.out.OK()
	return nil
}

func cmdRLClusterGetConfig(c *session, _ [][]byte) error {
	v, err := c.clusterView()
	if err != nil {
		return err
	}
	if js := v.ConfigJSON(); js != nil {
		c.out.Bulk(js)
	} else {
		c.out.Null()
	}
	return nil
}

func cmdRLClusterPeer(c *session, _ [][]byte) error {
	if _, err := c.clusterView(); err != nil {
		return err
	}
	c.cl.peer = true
	c.out.OK()
	return nil
}

func cmdRLClusterHelp(c *session, _ [][]byte) error {
	writeHelp(c, "RL.CLUSTER <subcommand> [<arg> ...]. Subcommands are:",
		"SETCONFIG <json>", "    Take a slot map whose version is above the node's (docs/cluster.md).",
		"GETCONFIG", "    Return the node's slot map as JSON, or null.",
		"PEER", "    Mark this connection as another node's: its commands are never forwarded.",
		"HELP", "    Print this help.")
	return nil
}

// redisMode is what HELLO's mode and INFO's redis_mode report.
func (h *Handler) redisMode() string {
	if h.cfg.Cluster == nil {
		return cluster.Off.RedisMode()
	}
	return h.cfg.Cluster.State.View().Mode().RedisMode()
}

// infoCluster writes INFO's cluster section: cluster_enabled, which
// redis-py's RedisCluster requires to be 1, and with forwarding on, the
// commands relayed to their owner and those that failed.
func (c *session) infoCluster(_ *service.Stats, b *strings.Builder) {
	cl := c.h.cfg.Cluster
	if cl == nil {
		cluster.WriteInfoSection(b, cluster.Off)
		return
	}
	cluster.WriteInfoSection(b, cl.State.View().Mode())
	if cl.Forward != nil {
		st := cl.Forward.Stats()
		field(b, "rl_cluster_forwarded_total", st.Requests)
		field(b, "rl_cluster_forward_failures_total", st.Failures)
	}
	if cl.Peers != nil {
		field(b, "rl_cluster_last_handover_pause_us", cl.lastPause.Load()/1000)
	}
}

// rulesDigest names a rule set's contents (rl_rules_digest in CLUSTER INFO
// and RL.INFO): 16 hex digits of xxHash64 over the rules in name order,
// each name, algorithm, limit, window (ns) and burst. Equal digests mean
// equal rules whatever the sets' versions, which count changes per node;
// `rlserver cluster check` compares them across nodes.
func rulesDigest(set *rules.Set) string {
	d := xxhash.New()
	var num [8]byte
	for _, r := range set.Rules() {
		d.WriteString(r.Name)
		d.Write([]byte{0, byte(r.Algorithm)})
		for _, n := range []int64{r.Limit, int64(r.Window), r.Burst} {
			binary.LittleEndian.PutUint64(num[:], uint64(n))
			d.Write(num[:])
		}
	}
	s := strconv.FormatUint(d.Sum64(), 16)
	return strings.Repeat("0", 16-len(s)) + s
}
