package commands

import (
	"slices"

	"github.com/rlserver/rlserver/internal/service"
)

// commands is the command table, built once. Flags, key positions and
// groups follow Redis 7's for the commands Redis has, so tools that read
// COMMAND understand them; docs/commands.md lists where rlserver differs.
var commands *commandTable

// Groups, as COMMAND DOCS reports them (Redis's, plus ratelimit).
const (
	groupRatelimit    = "ratelimit"
	groupString       = "string"
	groupHash         = "hash"
	groupList         = "list"
	groupSortedSet    = "sorted-set"
	groupGeneric      = "generic"
	groupTransactions = "transactions"
	groupConnection   = "connection"
	groupServer       = "server"
	groupModule       = "module" // Redis's group for a module's commands
)

// rlSince is the rlserver version that introduced the RL.* commands.
const rlSince = "0.1.0"

// Key specification flags, in Redis's vocabulary: RW reads and writes the
// key, RO only reads it, OW overwrites it, RM removes it; access returns
// its data, update changes it, delete deletes it; incomplete means the
// positions given do not find every key (COMMAND GETKEYS does).
var (
	keysRead          = []string{"RO", "access"}
	keysReadNoData    = []string{"RO"}
	keysReadWrite     = []string{"RW", "access", "update"}
	keysUpdate        = []string{"RW", "update"}
	keysOverwrite     = []string{"OW", "update"}
	keysRemove        = []string{"RM", "delete"}
	keysAllowAllFirst = []string{"RW", "access", "update", "incomplete"}
)

var (
	oneKey   = keyRange{1, 1, 1}
	everyKey = keyRange{1, -1, 1}
)

func init() {
	// Built in init, not a var initialiser, because COMMAND's handlers
	// read the table.
	commands = newCommandTable(slices.Concat(rateLimitCommands(), stringCommands(), stringMoreCommands(), hashCommands(), listCommands(),
		zsetCommands(), keysCommands(), scanCommands(), transactionCommands(), connectionCommands(), serverCommands(), scriptCommands(), clusterCommands(),
		gatewayCommands(), overrideCommands())...)
}

// rateLimitCommands returns the RL.* commands and redis-cell's CL.THROTTLE.
func rateLimitCommands() []*command {
	return []*command{
		&command{name: "rl.allow", arity: -3, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadWrite,
			group: groupRatelimit, since: rlSince,
			summary: "Decide whether a request of cost units (default 1) under rule is allowed for key, and spend it if so.",
			prepare: prepareDecision(service.Allow, "rl.allow"), reply: writeDecision},
		&command{name: "rl.peek", arity: -3, flags: flagReadonly | flagFast, keys: oneKey, keyFlags: keysRead,
			group: groupRatelimit, since: rlSince,
			summary: "Report what RL.ALLOW would decide, without spending anything or creating state.",
			prepare: prepareDecision(service.Peek, "rl.peek"), reply: writeDecision},
		&command{name: "rl.reset", arity: 3, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysRemove,
			group: groupRatelimit, since: rlSince,
			summary: "Forget key's state under rule. Returns 1 if it existed.",
			prepare: prepareReset, reply: writeReset},
		// Its keys are every other word up to an optional trailing COST n,
		// so only the first is certain from its position.
		&command{name: "rl.allowall", arity: -3, flags: flagWrite | flagMovableKeys,
			keys: oneKey, keyFlags: keysAllowAllFirst, movableKeys: allowAllKeys,
			group: groupRatelimit, since: rlSince,
			summary: "Decide several key rule pairs as one request: all are charged, or none.",
			run:     cmdAllowAll},
		&command{name: "rl.rule", arity: -2, group: groupRatelimit, since: rlSince,
			summary: "Manage rules: SET, GET, DEL, LIST, RELOAD, HELP.",
			subcommands: []*command{
				{name: "rl.rule|set", arity: -6, flags: flagAdmin, since: rlSince,
					summary: "Create or change a rule: name algorithm limit window [BURST n].", run: cmdRuleSet},
				{name: "rl.rule|get", arity: 3, since: rlSince,
					summary: "Show a rule.", run: cmdRuleGet},
				{name: "rl.rule|del", arity: 3, flags: flagAdmin, since: rlSince,
					summary: "Delete a rule and every key's state under it.", run: cmdRuleDel},
				{name: "rl.rule|list", arity: 2, since: rlSince,
					summary: "Show every rule.", run: cmdRuleList},
				// RELOAD reconciles every shard by message, which a
				// transaction holding every shard cannot wait for.
				{name: "rl.rule|reload", arity: 2, flags: flagAdmin | flagNoMulti, since: rlSince,
					summary: "Re-read the --rules file and apply it over the current rules, all or nothing.", run: cmdRuleReload},
				{name: "rl.rule|help", arity: 2, since: rlSince,
					summary: "Show the subcommands.", run: cmdRuleHelp},
			}},
		&command{name: "rl.info", arity: 1, flags: flagReadonly, group: groupRatelimit, since: rlSince,
			summary: "Rate limiter statistics as field:value lines.", run: cmdRLInfo},
		// As Redis reports a module's command: no arity (redis-cell checks
		// the words itself), the flags and key positions it registers.
		&command{name: "cl.throttle", arity: -1, flags: flagWrite, keys: oneKey, keyFlags: keysReadWrite,
			group: groupModule, module: "redis-cell",
			summary: "redis-cell's GCRA limiter: key max_burst count_per_period period [quantity].",
			exec:    execThrottle},
	}
}

// stringCommands returns the string commands and key expiry, on plain keys.
func stringCommands() []*command {
	return []*command{
		&command{name: "get", arity: 2, flags: flagReadonly | flagFast, keys: oneKey, keyFlags: keysRead,
			group: groupString, since: "1.0.0",
			summary: "Get a plain key's value.", exec: execGet, valueReply: always},
		&command{name: "set", arity: -3, flags: flagWrite, keys: oneKey, keyFlags: keysReadWrite,
			group: groupString, since: "1.0.0",
			summary: "Set a plain key: SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL].",
			exec:    execSet, valueReply: setWithGet},
		&command{name: "setex", arity: 4, flags: flagWrite, keys: oneKey, keyFlags: keysOverwrite,
			group: groupString, since: "2.0.0",
			summary: "SET with a TTL in seconds.", exec: execSetEx(false, "setex")},
		&command{name: "psetex", arity: 4, flags: flagWrite, keys: oneKey, keyFlags: keysOverwrite,
			group: groupString, since: "2.6.0",
			summary: "SET with a TTL in milliseconds.", exec: execSetEx(true, "psetex")},
		&command{name: "incr", arity: 2, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadWrite,
			group: groupString, since: "1.0.0",
			summary: "Add 1 to a plain key's integer.", exec: execIncr(1, 1)},
		&command{name: "decr", arity: 2, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadWrite,
			group: groupString, since: "1.0.0",
			summary: "Subtract 1 from a plain key's integer.", exec: execIncr(-1, 1)},
		&command{name: "incrby", arity: 3, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadWrite,
			group: groupString, since: "1.0.0",
			summary: "Add to a plain key's integer.", exec: execIncr(1, 0)},
		&command{name: "decrby", arity: 3, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadWrite,
			group: groupString, since: "1.0.0",
			summary: "Subtract from a plain key's integer.", exec: execIncr(-1, 0)},
		&command{name: "expire", arity: -3, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysUpdate,
			group: groupGeneric, since: "1.0.0",
			summary: "Set a TTL in seconds [NX|XX|GT|LT].", exec: execExpire(false, false, "expire")},
		&command{name: "pexpire", arity: -3, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysUpdate,
			group: groupGeneric, since: "2.6.0",
			summary: "Set a TTL in milliseconds [NX|XX|GT|LT].", exec: execExpire(true, false, "pexpire")},
		&command{name: "expireat", arity: -3, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysUpdate,
			group: groupGeneric, since: "1.2.0",
			summary: "Expire at a unix time in seconds [NX|XX|GT|LT].", exec: execExpire(false, true, "expireat")},
		&command{name: "pexpireat", arity: -3, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysUpdate,
			group: groupGeneric, since: "2.6.0",
			summary: "Expire at a unix time in milliseconds [NX|XX|GT|LT].", exec: execExpire(true, true, "pexpireat")},
		&command{name: "ttl", arity: 2, flags: flagReadonly | flagFast, keys: oneKey, keyFlags: keysRead,
			group: groupGeneric, since: "1.0.0",
			summary: "Remaining TTL in seconds (-2 missing, -1 none).", exec: execTTL(false)},
		&command{name: "pttl", arity: 2, flags: flagReadonly | flagFast, keys: oneKey, keyFlags: keysRead,
			group: groupGeneric, since: "2.6.0",
			summary: "Remaining TTL in milliseconds (-2 missing, -1 none).", exec: execTTL(true)},
		&command{name: "persist", arity: 2, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysUpdate,
			group: groupGeneric, since: "2.2.0",
			summary: "Remove a plain key's TTL.", exec: execPersist},
		&command{name: "type", arity: 2, flags: flagReadonly | flagFast, keys: oneKey, keyFlags: keysReadNoData,
			group: groupGeneric, since: "1.0.0",
			summary: "string, or none.", exec: execType},
		&command{name: "del", arity: -2, flags: flagWrite, keys: everyKey, keyFlags: keysRemove,
			group: groupGeneric, since: "1.0.0",
			summary: "Delete plain keys; returns how many existed.", exec: execDel},
		&command{name: "unlink", arity: -2, flags: flagWrite | flagFast, keys: everyKey, keyFlags: keysRemove,
			group: groupGeneric, since: "4.0.0",
			summary: "DEL.", exec: execDel},
		&command{name: "exists", arity: -2, flags: flagReadonly | flagFast, keys: everyKey, keyFlags: keysReadNoData,
			group: groupGeneric, since: "1.0.0",
			summary: "Count the plain keys given that exist.", exec: execExists},
		&command{name: "flushall", arity: -1, flags: flagWrite | flagLong, group: groupServer, since: "1.0.0",
			summary: "Drop every plain key and all limiter state (rules stay).", run: cmdFlushAll},
		&command{name: "flushdb", arity: -1, flags: flagWrite | flagLong, group: groupServer, since: "1.0.0",
			summary: "FLUSHALL: there is one database.", run: cmdFlushAll},
	}
}

// transactionCommands returns MULTI, EXEC and their kin.
func transactionCommands() []*command {
	return []*command{
		&command{name: "multi", arity: 1, flags: flagNoScript | flagLoading | flagStale | flagFast | flagTxControl,
			group: groupTransactions, since: "1.2.0",
			summary: "Start a transaction.", run: cmdMulti},
		&command{name: "exec", arity: 1, flags: flagNoScript | flagLoading | flagStale | flagTxControl,
			group: groupTransactions, since: "1.2.0",
			summary: "Run the queued commands as one atomic step.", run: cmdExec},
		&command{name: "discard", arity: 1, flags: flagNoScript | flagLoading | flagStale | flagFast | flagTxControl,
			group: groupTransactions, since: "2.0.0",
			summary: "Forget the queued commands.", run: cmdDiscard},
		&command{name: "watch", arity: -2, flags: flagNoScript | flagLoading | flagStale | flagFast | flagTxControl,
			keys: everyKey, keyFlags: keysReadNoData, group: groupTransactions, since: "2.2.0",
			summary: "Not supported: transactions here are always atomic.", run: cmdWatch},
		&command{name: "unwatch", arity: 1, flags: flagNoScript | flagLoading | flagStale | flagFast,
			group: groupTransactions, since: "2.2.0",
			summary: "Does nothing (there is no WATCH).", run: cmdUnwatch},
	}
}

// connectionCommands returns the connection's own commands.
func connectionCommands() []*command {
	return []*command{
		&command{name: "auth", arity: -2, flags: flagNoScript | flagLoading | flagStale | flagFast | flagNoAuth,
			group: groupConnection, since: "1.0.0",
			summary: "Authenticate: AUTH password, or AUTH default password.", run: cmdAuth},
		&command{name: "ping", arity: -1, flags: flagFast, group: groupConnection, since: "1.0.0",
			summary: "Reply PONG, or the message given.", run: cmdPing},
		&command{name: "echo", arity: 2, flags: flagLoading | flagStale | flagFast, group: groupConnection, since: "1.0.0",
			summary: "Reply the message given.", run: cmdEcho},
		&command{name: "hello", arity: -1, flags: flagNoScript | flagLoading | flagStale | flagFast | flagNoAuth,
			group: groupConnection, since: "6.0.0",
			summary: "Handshake: choose RESP2 or RESP3 and optionally name the connection.", run: cmdHello},
		&command{name: "select", arity: 2, flags: flagLoading | flagStale | flagFast, group: groupConnection, since: "1.0.0",
			summary: "Select database 0, the only one.", run: cmdSelect},
		&command{name: "quit", arity: -1, flags: flagNoScript | flagLoading | flagStale | flagFast | flagNoAuth | flagTxControl,
			group: groupConnection, since: "1.0.0",
			summary: "Close the connection after replying OK.", run: cmdQuit},
		&command{name: "client", arity: -2, group: groupConnection, since: "2.4.0",
			summary: "Connection commands: SETNAME, GETNAME, ID, SETINFO, INFO, LIST, KILL, HELP.",
			subcommands: []*command{
				{name: "client|setname", arity: 3, flags: flagNoScript | flagLoading | flagStale, since: "2.6.9",
					summary: "Name the connection.", run: cmdClient},
				{name: "client|getname", arity: 2, flags: flagNoScript | flagLoading | flagStale, since: "2.6.9",
					summary: "The connection's name.", run: cmdClient},
				{name: "client|id", arity: 2, flags: flagNoScript | flagLoading | flagStale, since: "5.0.0",
					summary: "The connection's ID.", run: cmdClient},
				{name: "client|setinfo", arity: 4, flags: flagNoScript | flagLoading | flagStale, since: "7.2.0",
					summary: "Record the client library's name (LIB-NAME) or version (LIB-VER).", run: cmdClient},
				{name: "client|info", arity: 2, flags: flagNoScript | flagLoading | flagStale, since: "6.2.0",
					summary: "Describe the connection.", run: cmdClient},
				{name: "client|list", arity: -2, flags: flagAdmin | flagNoScript | flagLoading | flagStale, since: "2.4.0",
					summary: "Describe every connection, or those of a TYPE or given IDs.", run: cmdClient},
				{name: "client|kill", arity: -3, flags: flagAdmin | flagNoScript | flagLoading | flagStale, since: "2.4.0",
					summary: "Close connections by address, or by ID, ADDR, LADDR, USER, TYPE, SKIPME filters.", run: cmdClient},
				{name: "client|help", arity: 2, flags: flagLoading | flagStale, since: "5.0.0",
					summary: "Show the subcommands.", run: cmdClient},
			}},
	}
}

// serverCommands returns server commands: introspection, persistence, shutdown.
func serverCommands() []*command {
	return []*command{
		&command{name: "command", arity: -1, flags: flagLoading | flagStale, group: groupServer, since: "2.8.13",
			summary: "Describe the commands this server implements.", run: cmdCommandAll,
			subcommands: []*command{
				{name: "command|count", arity: 2, flags: flagLoading | flagStale, since: "2.8.13",
					summary: "The number of commands.", run: cmdCommandCount},
				{name: "command|list", arity: -2, flags: flagLoading | flagStale, since: "7.0.0",
					summary: "Every command's name, subcommands included.", run: cmdCommandList},
				{name: "command|info", arity: -2, flags: flagLoading | flagStale, since: "2.8.13",
					summary: "Details of the commands named, or of all.", run: cmdCommandInfo},
				{name: "command|docs", arity: -2, flags: flagLoading | flagStale, since: "7.0.0",
					summary: "Documentation of the commands named, or of all.", run: cmdCommandDocs},
				{name: "command|getkeys", arity: -4, flags: flagLoading | flagStale, since: "2.8.13",
					summary: "The keys of the command given.", run: cmdCommandGetKeys},
				{name: "command|help", arity: 2, flags: flagLoading | flagStale, since: "5.0.0",
					summary: "Show the subcommands.", run: cmdCommandHelp},
			}},
		&command{name: "info", arity: -1, flags: flagLoading | flagStale, group: groupServer, since: "1.0.0",
			summary: "Server information and statistics.", run: cmdInfo},
		&command{name: "dbsize", arity: 1, flags: flagReadonly | flagFast, group: groupServer, since: "1.0.0",
			summary: "The number of keys: limiter keys ((rule, key) pairs holding state) plus plain keys.", run: cmdDBSize},
		&command{name: "config", arity: -2, group: groupServer, since: "2.0.0",
			summary: "CONFIG GET answers no parameters: configuration is by flags and RL.RULE.",
			subcommands: []*command{
				{name: "config|get", arity: -3, flags: flagAdmin | flagNoScript | flagLoading | flagStale, since: "2.0.0",
					summary: "An empty map: rlserver has no runtime parameters.", run: cmdConfig},
				{name: "config|help", arity: 2, flags: flagLoading | flagStale, since: "5.0.0",
					summary: "Show the subcommands.", run: cmdConfig},
			}},
		// SAVE, BGSAVE and SHUTDOWN message every shard, which a
		// transaction holding every shard cannot wait for (Redis allows
		// BGSAVE inside MULTI).
		&command{name: "save", arity: 1, flags: flagAdmin | flagNoScript | flagNoMulti | flagLong, group: groupServer, since: "1.0.0",
			summary: "Write a snapshot now; reply when it is on disk.", run: cmdSave},
		&command{name: "bgsave", arity: -1, flags: flagAdmin | flagNoScript | flagNoMulti, group: groupServer, since: "1.0.0",
			summary: "Write a snapshot in the background.", run: cmdBGSave},
		&command{name: "lastsave", arity: 1, flags: flagLoading | flagStale | flagFast, group: groupServer, since: "1.0.0",
			summary: "Unix time of the last good snapshot.", run: cmdLastSave},
		&command{name: "shutdown", arity: -1, flags: flagAdmin | flagNoScript | flagLoading | flagStale | flagNoMulti,
			group: groupServer, since: "1.0.0",
			summary: "Drain, write a final snapshot (unless NOSAVE) and exit.", run: cmdShutdown},
		&command{name: "memory", arity: -2, group: groupServer, since: "4.0.0",
			summary: "MEMORY PURGE: collect garbage so INFO memory shows the live heap.",
			subcommands: []*command{
				{name: "memory|purge", arity: 2, since: "4.0.0",
					summary: "Collect garbage and return free memory to the OS.", run: cmdMemory},
				{name: "memory|help", arity: 2, flags: flagLoading | flagStale, since: "4.0.0",
					summary: "Show the subcommands.", run: cmdMemory},
			}},
		&command{name: "time", arity: 1, flags: flagLoading | flagStale | flagFast, group: groupServer, since: "2.6.0",
			summary: "The server's clock: unix seconds and microseconds.", run: cmdTime},
	}
}
