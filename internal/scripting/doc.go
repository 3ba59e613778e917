// Package scripting runs Redis-compatible Lua scripts (EVAL, EVALSHA,
// EVAL_RO, EVALSHA_RO, SCRIPT) on github.com/yuin/gopher-lua, as Redis 7.0
// runs them: the same Lua environment, the same conversions between Lua
// values and replies, the same error texts, the same time limit and SCRIPT
// KILL rules. It knows neither the keyspace nor the command table: a script's
// redis.call goes to a Caller the server supplies, and both sides are RESP
// bytes, so any execution context (a shard's owner, a held set of shards,
// MULTI) can run scripts.
//
// # Wiring
//
//   - One Cache holds the scripts by SHA1 (SCRIPT LOAD, SCRIPT EXISTS,
//     SCRIPT FLUSH, EVALSHA's lookup; EVAL loads what it runs, as Redis 7.0
//     does). It is bounded (CacheLimits): at a bound the least recently used
//     script is forgotten, and its next EVALSHA gets ErrNoScript, which every
//     client library answers with EVAL or SCRIPT LOAD.
//   - An Engine runs scripts: Run(ctx, script, keys, argv, proto, call,
//     readOnly, dst) appends the reply or returns an *Error whose Text is the
//     whole reply line, to be written verbatim. SplitKeys parses numkeys with
//     Redis's errors. An Engine is safe for concurrent use; each run takes a
//     pooled Lua state. Busy and Kill see the runs of their engine: one engine
//     per shard gives per-shard BUSY; one for the server, Redis's global BUSY.
//   - The Caller runs one command and appends its reply in the protocol the
//     script chose (redis.setresp). It refuses, without running them,
//     unknown commands, wrong arities, commands scripts may not run, and
//     writes when readOnly (the sentinel errors in errors.go carry Redis's
//     texts), and reports whether it ran a write. It may instead ask for
//     the script to be run again from the start (a *Rerun: the server does
//     so for a script reaching keys it did not declare), which the engine
//     grants only while the script has not written; Script.MarkWholeKeyspace
//     remembers such a script for its later runs.
//
// # Time limit and SCRIPT KILL
//
// A script running longer than the time limit (Options.TimeLimit, Redis's
// lua-time-limit, 5 s by default; SetTimeLimit changes it at run time) is
// busy: Busy reports it, the server answers other clients ErrBusy, and Kill
// (SCRIPT KILL) stops it at its next Lua instruction, or inside a pattern
// match, unless it has run a write command: then Kill answers ErrUnkillable
// and the script runs on, as in Redis, where only SHUTDOWN NOSAVE ends it;
// here cancelling Run's context does. A kill never races a write: it waits
// for a command in progress, then either finds the script has written or
// stops it before its next command.
//
// # Environment (as Redis 7.0.15's)
//
// Globals: the Lua 5.1 base functions Redis keeps (no dofile, loadfile,
// print, require, module, getfenv, setfenv, newproxy; loadstring compiles
// source only), KEYS, ARGV, and the string, table, math, coroutine, bit,
// cjson and redis libraries. redis has call, pcall, error_reply,
// status_reply, sha1hex, log (to Options.Logger), setresp, set_repl,
// replicate_commands, breakpoint, debug, the LOG_* and REPL_* constants and
// REDIS_VERSION (7.0.15). Every table reachable from the globals is
// read-only: writing a global raises "Attempt to modify a readonly table",
// reading a missing one "Script attempted to access nonexistent global
// variable". Numbers passed to redis.call are formatted %.17g; tostring and
// table.concat format %.14g; math.random is Redis's rand48.
//
// Replacements for gopher-lua's functions, where its behaviour differs from
// Lua 5.1 or could not be interrupted: the pattern functions (find, match,
// gmatch, gsub: interruptible, linear gsub), string.format (C's formats,
// widths of at most two digits), string.rep, table.concat, tonumber, error,
// pcall (Redis's: an error table caught becomes its text), collectgarbage
// (a no-op: gopher-lua's runs a full Go collection). table.foreach,
// foreachi, setn and gcinfo are added.
//
// # Memory
//
// Bounded: the value stack (Limits.StackSlots) and call depth
// (Limits.CallDepth); the strings string.rep, format, gsub, table.concat and
// cjson.encode build (Limits.MaxStringBytes); the reply (MaxReplyBytes);
// coroutines per run (MaxCoroutines); script size and syntax depth (the
// cache); buffers kept by idle states. Unbounded: tables a script builds and
// strings it concatenates with "..": gopher-lua has no allocator hook, so a
// script growing them forever is stopped only by SCRIPT KILL (Redis 7.0 has
// the same exposure).
//
// # Deliberate omissions and known differences
//
//   - cmsgpack and struct are not provided (no library served by the module
//     proxy; no rate-limiter library uses them); redis.acl_check_cmd is absent
//     (rlserver has no ACL). cjson is github.com/alicebob/gopher-json: encode
//     and decode only, no cjson.null, no encode_*/decode_* settings, an empty
//     table encodes as [], numbers in Go's shortest form.
//   - The ".." operator, and gopher-lua's builtins converting numbers to
//     strings, print numbers in Go's format (1e15 as 1000000000000000), where
//     Lua prints %.14g; tostring, string.format and table.concat are right.
//   - gopher-lua's own messages differ from C Lua's for runtime errors
//     ("attempt to call a non-function object", not "attempt to call a nil
//     value") and syntax errors ("syntax error near", not "unexpected
//     symbol near"); every error Redis itself words is Redis's.
//   - gopher-lua accepts goto (a Lua 5.2 keyword) and refuses syntax nested
//     more than 1000 levels deep.
//   - Library tables (string, redis, ...) are read-only views: pairs, next,
//     ipairs and rawget see their contents as in Redis, but other functions
//     handed one (table.foreach, table.sort, the # operator) see an empty
//     table; getmetatable of a library returns false, not nil.
//   - Redis keeps one math.random sequence for the server; each pooled state
//     keeps its own (the same after math.randomseed).
//   - An error table without an err field reports "ERR unknown error";
//     Redis 7.0.15 crashes on it.
package scripting
