package commands

import (
	"github.com/rlserver/rlserver/internal/scripting"
)

// Lua scripting: EVAL, EVALSHA, their read-only forms and SCRIPT, as Redis
// 7.0 has them, on internal/scripting's engine. A script runs atomically
// where its declared keys live (see script_run.go): on their shard's
// goroutine when one shard owns them all, holding their shards (in
// ascending order, as EXEC and RL.ALLOWALL) when several do, holding every
// shard when it declares none, and on the transaction's held keyspace
// inside EXEC. docs/scripting.md is the user's view.

// groupScripting is Redis's group for EVAL and SCRIPT.
const groupScripting = "scripting"

// evalKeys finds the keys of EVAL, EVALSHA, EVAL_RO and EVALSHA_RO: numkeys
// (word 2) words from word 3 on. A bad numkeys names no keys; the command
// itself then answers the error.
func evalKeys(args [][]byte) []int {
	keys, _, err := scripting.SplitKeys(args[2:])
	if err != nil {
		return nil
	}
	out := make([]int, len(keys))
	for i := range keys {
		out[i] = 3 + i
	}
	return out
}

// scriptCommands returns EVAL and its kin, and SCRIPT.
func scriptCommands() []*command {
	// As Redis 7.0 flags them: no "write" (a script's own commands are
	// checked one by one), not allowed from scripts, keys by numkeys.
	eval := func(name, summary string, bySHA, readOnly bool, extra cmdFlags) *command {
		return &command{name: name, arity: -3, flags: flagNoScript | flagStale | flagMovableKeys | flagLong | extra,
			movableKeys: evalKeys, group: groupScripting, since: "2.6.0", summary: summary,
			run:   func(c *session, args [][]byte) error { return c.eval(args, bySHA, readOnly) },
			queue: func(c *session, cmd *command, args [][]byte) bool { return c.queueScript(cmd, args, bySHA, readOnly) }}
	}
	evalRO := eval("eval_ro", "EVAL, refusing writes.", false, true, flagReadonly)
	evalRO.since = "7.0.0"
	evalSHARO := eval("evalsha_ro", "EVALSHA, refusing writes.", true, true, flagReadonly)
	evalSHARO.since = "7.0.0"
	return []*command{
		eval("eval", "Run a Lua script: EVAL script numkeys [key ...] [arg ...].", false, false, 0),
		eval("evalsha", "Run a cached Lua script by its SHA1: EVALSHA sha1 numkeys [key ...] [arg ...].", true, false, 0),
		evalRO, evalSHARO,
		&command{name: "script", arity: -2, group: groupScripting, since: "2.6.0",
			summary: "Manage the script cache: LOAD, EXISTS, FLUSH, KILL, HELP.",
			subcommands: []*command{
				{name: "script|load", arity: 3, flags: flagNoScript | flagStale, since: "2.6.0",
					summary: "Compile and cache a script; reply its SHA1.", run: cmdScriptLoad},
				{name: "script|exists", arity: -3, flags: flagNoScript, since: "2.6.0",
					summary: "For each SHA1, 1 if its script is cached, else 0.", run: cmdScriptExists},
				{name: "script|flush", arity: -2, flags: flagNoScript, since: "2.6.0",
					summary: "Forget every cached script [ASYNC|SYNC].", run: cmdScriptFlush},
				{name: "script|kill", arity: 2, flags: flagNoScript, since: "2.6.0",
					summary: "Stop the scripts running past --lua-time-limit that have not written.", run: cmdScriptKill},
				{name: "script|help", arity: 2, flags: flagLoading | flagStale, since: "5.0.0",
					summary: "Show the subcommands.", run: cmdScriptHelp},
			}},
	}
}

func cmdScriptLoad(c *session, args [][]byte) error {
	s, err := c.h.scripts.cache.Load(args[2])
	if err != nil {
		return err
	}
	c.out.BulkString(s.SHA())
	return nil
}

func cmdScriptExists(c *session, args [][]byte) error {
	found := c.h.scripts.cache.Exists(args[2:]...)
	c.out.Array(len(found))
	for _, ok := range found {
		if ok {
			c.out.Integer(1)
		} else {
			c.out.Integer(0)
		}
	}
	return nil
}

var errScriptFlushMode = replyError("ERR SCRIPT FLUSH only support SYNC|ASYNC option")

// cmdScriptFlush forgets every script. ASYNC and SYNC are the same here:
// forgetting is a map swap, and running scripts keep what they hold.
func cmdScriptFlush(c *session, args [][]byte) error {
	if len(args) > 3 || (len(args) == 3 && !equalFold(args[2], "sync") && !equalFold(args[2], "async")) {
		return errScriptFlushMode
	}
	c.h.scripts.cache.Flush()
	c.out.OK()
	return nil
}

func cmdScriptKill(c *session, args [][]byte) error {
	if err := c.h.scripts.engine.Kill(); err != nil {
		return err
	}
	c.out.OK()
	return nil
}

func cmdScriptHelp(c *session, args [][]byte) error {
	writeHelp(c, "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"EXISTS <sha1> [<sha1> ...]",
		"    Return information about the existence of the scripts in the script cache.",
		"FLUSH [ASYNC|SYNC]",
		"    Flush the Lua scripts cache. ASYNC and SYNC are the same here.",
		"KILL",
		"    Kill the currently executing Lua script (one past --lua-time-limit that has not written).",
		"LOAD <script>",
		"    Load a script into the scripts cache without executing it.",
		"HELP",
		"    Print this help.")
	return nil
}
