package resp

import "github.com/rlserver/rlserver/internal/shards"

// commands is the command table, built once. Flags follow COMMAND INFO's
// vocabulary so tools that read them understand them.
var commands *commandTable

func init() {
	// Built in init, not a var initialiser, because COMMAND's handler
	// reads the table.
	commands = newCommandTable(
		&command{name: "rl.allow", arity: -3, maxArgs: 4, flags: []string{"write", "fast"},
			summary: "Decide whether a request of cost units (default 1) under rule is allowed for key, and spend it if so.",
			prepare: prepareDecision(shards.Allow), reply: writeDecision},
		&command{name: "rl.peek", arity: -3, maxArgs: 4, flags: []string{"readonly", "fast"},
			summary: "Report what RL.ALLOW would decide, without spending anything or creating state.",
			prepare: prepareDecision(shards.Peek), reply: writeDecision},
		&command{name: "rl.reset", arity: 3, flags: []string{"write", "fast"},
			summary: "Forget key's state under rule. Returns 1 if it existed.",
			prepare: prepareReset, reply: writeReset},
		&command{name: "rl.allowall", arity: -3, flags: []string{"write"},
			summary: "Decide several key rule pairs as one request: all are charged, or none.",
			run:     cmdAllowAll},
		&command{name: "rl.rule", arity: -2, flags: []string{"admin"},
			summary: "Manage rules: SET, GET, DEL, LIST, HELP.", run: cmdRule},
		&command{name: "rl.info", arity: 1, flags: []string{"readonly"},
			summary: "Rate limiter statistics as field:value lines.", run: cmdRLInfo},
		&command{name: "ping", arity: -1, maxArgs: 2, flags: []string{"fast"},
			summary: "Reply PONG, or the message given.", run: cmdPing},
		&command{name: "echo", arity: 2, flags: []string{"fast"},
			summary: "Reply the message given.", run: cmdEcho},
		&command{name: "hello", arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth"},
			summary: "Handshake: choose RESP2 or RESP3 and optionally name the connection.", run: cmdHello},
		&command{name: "select", arity: 2, flags: []string{"loading", "stale", "fast"},
			summary: "Select database 0, the only one.", run: cmdSelect},
		&command{name: "quit", arity: -1, flags: []string{"fast", "no_auth"},
			summary: "Close the connection after replying OK.", run: cmdQuit},
		&command{name: "client", arity: -2, flags: []string{"loading", "stale"},
			summary: "Connection commands: SETNAME, GETNAME, ID, SETINFO, INFO, HELP.", run: cmdClient},
		&command{name: "command", arity: -1, flags: []string{"loading", "stale"},
			summary: "Describe the commands this server implements.", run: cmdCommand},
		&command{name: "info", arity: -1, flags: []string{"loading", "stale"},
			summary: "Server information and statistics.", run: cmdInfo},
		&command{name: "dbsize", arity: 1, flags: []string{"readonly", "fast"},
			summary: "The number of limiter keys holding state.", run: cmdDBSize},
		&command{name: "config", arity: -2, flags: []string{"admin", "loading", "stale"},
			summary: "CONFIG GET answers no parameters: configuration is by flags and RL.RULE.", run: cmdConfig},
		&command{name: "save", arity: 1, flags: []string{"admin", "noscript"},
			summary: "Write a snapshot now; reply when it is on disk.", run: cmdSave},
		&command{name: "bgsave", arity: -1, maxArgs: 2, flags: []string{"admin", "noscript"},
			summary: "Write a snapshot in the background.", run: cmdBGSave},
		&command{name: "lastsave", arity: 1, flags: []string{"loading", "stale", "fast"},
			summary: "Unix time of the last good snapshot.", run: cmdLastSave},
		&command{name: "shutdown", arity: -1, maxArgs: 2, flags: []string{"admin", "noscript", "loading", "stale"},
			summary: "Drain, write a final snapshot (unless NOSAVE) and exit.", run: cmdShutdown},
		&command{name: "time", arity: 1, flags: []string{"loading", "stale", "fast"},
			summary: "The server's clock: unix seconds and microseconds.", run: cmdTime},
	)
}
