package commands

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/internal/service"
)

// infoSections are INFO's sections in the order INFO with no argument
// prints them.
var infoSections = []struct {
	name  string
	title string
	write func(c *session, st *service.Stats, b *strings.Builder)
}{
	{"server", "Server", (*session).infoServer},
	{"clients", "Clients", (*session).infoClients},
	{"memory", "Memory", (*session).infoMemory},
	{"persistence", "Persistence", (*session).infoPersistence},
	{"stats", "Stats", (*session).infoStats},
	{"cluster", "Cluster", (*session).infoCluster},
	{"keyspace", "Keyspace", (*session).infoKeyspace},
	{"ratelimit", "Ratelimit", (*session).infoRatelimit},
	{"grpc", "Grpc", (*session).infoGRPC},
}

// cmdInfo handles INFO [section ...]. Like Redis, "all", "everything" and
// "default" select every section and an unknown section adds nothing.
func cmdInfo(c *session, args [][]byte) error {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	every := len(want) == 0 || want["all"] || want["everything"] || want["default"]
	st := c.h.svc.Stats(c.handle())
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
	c.out.BulkString(b.String())
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

func (c *session) infoServer(_ *service.Stats, b *strings.Builder) {
	s := c.conn.Server()
	_, port, _ := strings.Cut(s.Addr().String(), "]:")
	if port == "" {
		_, port, _ = strings.Cut(s.Addr().String(), ":")
	}
	uptime := int64(time.Since(s.Started()) / time.Second)
	// redis_version is what clients that gate features on the server's
	// version read; rlserver answers the commands of Redis 7 it implements.
	field(b, "redis_version", "7.2.0")
	field(b, "rlserver_version", c.h.cfg.Version)
	field(b, "redis_mode", c.h.redisMode())
	field(b, "os", runtime.GOOS)
	field(b, "arch_bits", strconv.Itoa(strconv.IntSize))
	field(b, "go_version", runtime.Version())
	field(b, "process_id", os.Getpid())
	field(b, "tcp_port", port)
	field(b, "uptime_in_seconds", uptime)
	field(b, "uptime_in_days", uptime/86400)
	field(b, "rules_source", c.h.cfg.RulesSource)
}

func (c *session) infoClients(_ *service.Stats, b *strings.Builder) {
	field(b, "connected_clients", c.conn.Server().Connected())
}

// infoMemory reports the Go heap. used_memory is the bytes of live (and not
// yet swept) heap objects, the figure closest to what Redis's allocator
// counts; used_memory_heap_inuse adds the free space in spans in use.
// rl_plain_value_bytes is what the plain keys' values hold by their sizes
// (the bytes --max-value-size bounds per key), part of used_memory.
func (c *session) infoMemory(st *service.Stats, b *strings.Builder) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	field(b, "used_memory", ms.HeapAlloc)
	field(b, "used_memory_human", humanBytes(ms.HeapAlloc))
	field(b, "used_memory_heap_inuse", ms.HeapInuse)
	field(b, "used_memory_sys", ms.Sys)
	field(b, "gc_cycles", uint64(ms.NumGC))
	// The garbage collector's stop-the-world pauses since start, in all
	// (ns): what a latency benchmark subtracts around its runs.
	field(b, "gc_pause_total_ns", ms.PauseTotalNs)
	field(b, "rl_plain_value_bytes", st.PlainBytes)
	// As Redis 7.0 names them: the Lua scripts cached (EVAL, SCRIPT LOAD)
	// and their source bytes.
	field(b, "number_of_cached_scripts", uint64(c.h.scripts.cache.Len()))
	field(b, "used_memory_scripts_eval", uint64(c.h.scripts.cache.Bytes()))
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

func (c *session) infoStats(st *service.Stats, b *strings.Builder) {
	srv := c.conn.Server()
	field(b, "total_connections_received", srv.TotalConnections())
	field(b, "total_commands_processed", srv.TotalCommands())
	field(b, "rejected_connections", srv.Rejected())
	field(b, "rl_auth_failures_total", srv.AuthFailures())
	field(b, "rl_protocol_limit_disconnects_total", srv.LimitDisconnects())
	field(b, "rl_handler_panics_total", srv.HandlerPanics())
	field(b, "rl_handshake_timeouts_total", srv.HandshakeTimeouts())
	field(b, "expired_keys", st.ExpiredKeys)
	field(b, "evicted_keys", st.PressureEvictions)
}

// infoKeyspace reports db0, the only database: keys counts limiter keys
// (one per rule and key holding state) plus plain keys, as DBSIZE does;
// expires counts plain keys with a TTL.
func (c *session) infoKeyspace(st *service.Stats, b *strings.Builder) {
	if n := st.Keys + st.PlainKeys; n > 0 {
		field(b, "db0", "keys="+strconv.Itoa(n)+",expires="+strconv.Itoa(st.PlainExpiring)+",avg_ttl=0")
	}
}

func (c *session) infoRatelimit(st *service.Stats, b *strings.Builder) {
	set := c.h.svc.Rules()
	field(b, "rl_keys", st.Keys)
	field(b, "rl_plain_keys", st.PlainKeys)
	field(b, "rl_rules", set.Len())
	field(b, "rl_rules_version", set.Version)
	field(b, "rl_rules_digest", rulesDigest(set))
	field(b, "rl_rules_loaded_unix", set.LoadedAt.Unix())
	field(b, "rl_shards", c.h.svc.Shards())
	field(b, "rl_event_loops", c.conn.Server().EventLoops())
	field(b, "rl_allowed_total", st.Allowed)
	field(b, "rl_denied_total", st.Denied)
	field(b, "rl_idle_evictions_total", st.IdleEvictions)
	field(b, "rl_pressure_evictions_total", st.PressureEvictions)
	c.snapshotFields(b, *st)
	c.gatewayFields(b, st)
	for _, r := range set.Rules() {
		rs := st.Rules[r.ID]
		field(b, "rl_rule_"+r.Name, "keys="+strconv.Itoa(rs.Keys)+
			",allowed="+strconv.FormatUint(rs.Allowed, 10)+",denied="+strconv.FormatUint(rs.Denied, 10)+shadowInfo(r, rs))
	}
}

// ratelimitInfo is RL.INFO's reply: the ratelimit and grpc sections.
func (c *session) ratelimitInfo() string {
	var b strings.Builder
	st := c.h.svc.Stats(c.handle())
	b.WriteString("# Ratelimit\r\n")
	c.infoRatelimit(&st, &b)
	b.WriteString("\r\n# Grpc\r\n")
	c.infoGRPC(&st, &b)
	return b.String()
}

// infoPersistence reports snapshots under Redis's names (for tools that read
// them) and rlserver's own.
func (c *session) infoPersistence(st *service.Stats, b *strings.Builder) {
	ps := c.h.svc.SnapshotStatus()
	field(b, "loading", 0)
	field(b, "rdb_changes_since_last_save", st.Changes-ps.ChangesAtStart)
	field(b, "rdb_bgsave_in_progress", boolInt(ps.InProgress))
	field(b, "rdb_last_save_time", ps.LastOKUnix)
	field(b, "rdb_last_bgsave_status", okErr(ps))
	field(b, "rl_persistence_enabled", boolInt(c.h.svc.Persistent()))
	c.snapshotFields(b, *st)
}

// snapshotFields writes the rl_snapshot_* fields, shared by INFO
// persistence and RL.INFO.
func (c *session) snapshotFields(b *strings.Builder, st service.Stats) {
	ps := c.h.svc.SnapshotStatus()
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
func okErr(ps service.SaveStatus) string {
	if ps.LastErr != nil {
		return "err"
	}
	return "ok"
}
