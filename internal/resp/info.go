package resp

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/snapshot"
)

// infoSections are INFO's sections in the order INFO with no argument
// prints them.
var infoSections = []struct {
	name  string
	title string
	write func(c *client, st *keyspace.Stats, b *strings.Builder)
}{
	{"server", "Server", (*client).infoServer},
	{"clients", "Clients", (*client).infoClients},
	{"memory", "Memory", (*client).infoMemory},
	{"persistence", "Persistence", (*client).infoPersistence},
	{"stats", "Stats", (*client).infoStats},
	{"keyspace", "Keyspace", (*client).infoKeyspace},
	{"ratelimit", "Ratelimit", (*client).infoRatelimit},
}

// cmdInfo handles INFO [section ...]. Like Redis, "all", "everything" and
// "default" select every section and an unknown section adds nothing.
func cmdInfo(c *client, args [][]byte) error {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	every := len(want) == 0 || want["all"] || want["everything"] || want["default"]
	st := c.stats()
	var b strings.Builder
	for _, sec := range infoSections {
		if !every && !want[sec.name] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + sec.title + "\r\n")
		sec.write(c, &st, &b)
	}
	c.out.bulkString(b.String())
	return nil
}

func field(b *strings.Builder, name string, value any) {
	b.WriteString(name)
	b.WriteByte(':')
	switch v := value.(type) {
	case string:
		b.WriteString(v)
	case int:
		b.WriteString(strconv.Itoa(v))
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case uint64:
		b.WriteString(strconv.FormatUint(v, 10))
	}
	b.WriteString("\r\n")
}

func (c *client) infoServer(_ *keyspace.Stats, b *strings.Builder) {
	s := c.srv
	_, port, _ := strings.Cut(s.Addr().String(), "]:")
	if port == "" {
		_, port, _ = strings.Cut(s.Addr().String(), ":")
	}
	uptime := int64(time.Since(s.started) / time.Second)
	// redis_version is what clients that gate features on the server's
	// version read; rlserver answers the commands of Redis 7 it implements.
	field(b, "redis_version", "7.2.0")
	field(b, "rlserver_version", s.cfg.Version)
	field(b, "redis_mode", "standalone")
	field(b, "os", runtime.GOOS)
	field(b, "arch_bits", strconv.Itoa(strconv.IntSize))
	field(b, "go_version", runtime.Version())
	field(b, "process_id", os.Getpid())
	field(b, "tcp_port", port)
	field(b, "uptime_in_seconds", uptime)
	field(b, "uptime_in_days", uptime/86400)
	field(b, "rules_source", s.cfg.RulesSource)
}

func (c *client) infoClients(_ *keyspace.Stats, b *strings.Builder) {
	field(b, "connected_clients", c.srv.connected.Load())
}

// infoMemory reports the Go heap. used_memory is the bytes of live (and not
// yet swept) heap objects, the figure closest to what Redis's allocator
// counts; used_memory_heap_inuse adds the free space in spans in use.
func (c *client) infoMemory(_ *keyspace.Stats, b *strings.Builder) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	field(b, "used_memory", ms.HeapAlloc)
	field(b, "used_memory_human", humanBytes(ms.HeapAlloc))
	field(b, "used_memory_heap_inuse", ms.HeapInuse)
	field(b, "used_memory_sys", ms.Sys)
	field(b, "gc_cycles", uint64(ms.NumGC))
}

func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatUint(n, 10) + "B"
	}
	f, i := float64(n), -1
	for f >= unit && i < 3 {
		f /= unit
		i++
	}
	return strconv.FormatFloat(f, 'f', 2, 64) + string("KMGT"[i])
}

func (c *client) infoStats(st *keyspace.Stats, b *strings.Builder) {
	field(b, "total_connections_received", c.srv.totalConns.Load())
	field(b, "total_commands_processed", c.srv.totalCommands.Load())
	field(b, "rejected_connections", c.srv.rejectedConns.Load())
	field(b, "rl_auth_failures_total", c.srv.authFailures.Load())
	field(b, "rl_protocol_limit_disconnects_total", c.srv.limitHits.Load())
	field(b, "expired_keys", st.ExpiredKeys)
	field(b, "evicted_keys", st.PressureEvictions)
}

// infoKeyspace reports db0, the only database: keys counts limiter keys
// (one per rule and key holding state) plus plain keys, as DBSIZE does;
// expires counts plain keys with a TTL.
func (c *client) infoKeyspace(st *keyspace.Stats, b *strings.Builder) {
	if n := st.Keys + st.PlainKeys; n > 0 {
		field(b, "db0", "keys="+strconv.Itoa(n)+",expires="+strconv.Itoa(st.PlainExpiring)+",avg_ttl=0")
	}
}

func (c *client) infoRatelimit(st *keyspace.Stats, b *strings.Builder) {
	s := c.srv
	set := s.cfg.Rules.Load()
	field(b, "rl_keys", st.Keys)
	field(b, "rl_plain_keys", st.PlainKeys)
	field(b, "rl_rules", set.Len())
	field(b, "rl_rules_version", set.Version)
	field(b, "rl_rules_loaded_unix", set.LoadedAt.Unix())
	field(b, "rl_shards", s.cfg.Shards.Len())
	field(b, "rl_event_loops", s.EventLoops())
	field(b, "rl_allowed_total", st.Allowed)
	field(b, "rl_denied_total", st.Denied)
	field(b, "rl_idle_evictions_total", st.IdleEvictions)
	field(b, "rl_pressure_evictions_total", st.PressureEvictions)
	s.snapshotFields(b, *st)
	for _, r := range set.Rules() {
		rs := st.Rules[r.ID]
		field(b, "rl_rule_"+r.Name, "keys="+strconv.Itoa(rs.Keys)+
			",allowed="+strconv.FormatUint(rs.Allowed, 10)+",denied="+strconv.FormatUint(rs.Denied, 10))
	}
}

// ratelimitInfo is RL.INFO's reply: the ratelimit section alone.
func (c *client) ratelimitInfo() string {
	var b strings.Builder
	st := c.stats()
	b.WriteString("# Ratelimit\r\n")
	c.infoRatelimit(&st, &b)
	return b.String()
}

// infoPersistence reports snapshots under Redis's names (for tools that read
// them) and rlserver's own.
func (c *client) infoPersistence(st *keyspace.Stats, b *strings.Builder) {
	s := c.srv
	var ps snapshot.Status
	if s.cfg.Snapshots != nil {
		ps = s.cfg.Snapshots.Status()
	}
	field(b, "loading", 0)
	field(b, "rdb_changes_since_last_save", st.Changes-ps.ChangesAtStart)
	field(b, "rdb_bgsave_in_progress", boolInt(ps.InProgress))
	field(b, "rdb_last_save_time", ps.LastOKUnix)
	field(b, "rdb_last_bgsave_status", okErr(ps))
	field(b, "rl_persistence_enabled", boolInt(s.cfg.Snapshots != nil))
	s.snapshotFields(b, *st)
}

// snapshotFields writes the rl_snapshot_* fields, shared by INFO
// persistence and RL.INFO.
func (s *Server) snapshotFields(b *strings.Builder, st keyspace.Stats) {
	var ps snapshot.Status
	if s.cfg.Snapshots != nil {
		ps = s.cfg.Snapshots.Status()
	}
	field(b, "rl_snapshot_last_unix", ps.LastOKUnix)
	field(b, "rl_snapshot_last_duration_ms", ps.LastDuration.Milliseconds())
	field(b, "rl_snapshot_last_status", okErr(ps))
	field(b, "rl_snapshot_last_bytes", ps.LastBytes)
	field(b, "rl_snapshot_keys", ps.LastKeys)
	field(b, "rl_changes_since_last_save", st.Changes-ps.ChangesAtStart)
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

// okErr is "ok" unless the last attempt failed ("ok" too before the first).
func okErr(ps snapshot.Status) string {
	if ps.LastErr != nil {
		return "err"
	}
	return "ok"
}
