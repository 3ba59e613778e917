package commands

import (
	"math"

	"github.com/rlserver/rlserver/internal/service"
)

// overrideCommands returns RL.OVERRIDE: per-key numbers under a rule, with
// a mandatory expiry (docs/commands.md#rloverride).
func overrideCommands() []*command {
	return []*command{
		&command{name: "rl.override", arity: -2, group: groupRatelimit, since: rlSince,
			summary: "Manage per-key overrides of a rule's numbers: SET, GET, DEL, LIST, HELP.",
			subcommands: []*command{
				{name: "rl.override|set", arity: -8, flags: flagAdmin | flagWrite, since: rlSince,
					summary: "Give key its own limit, window and burst under rule until an expiry: rule key limit window [BURST n] EX seconds|EXAT unix.",
					run:     cmdOverrideSet},
				{name: "rl.override|get", arity: 4, since: rlSince,
					summary: "Show key's override under rule, or nil.", run: cmdOverrideGet},
				{name: "rl.override|del", arity: 4, flags: flagAdmin | flagWrite, since: rlSince,
					summary: "End key's override under rule now. Returns 1 if it had one.", run: cmdOverrideDel},
				// LIST asks every shard by message, which a transaction
				// holding every shard cannot wait for.
				{name: "rl.override|list", arity: -2, flags: flagNoMulti, since: rlSince,
					summary: "Show the live overrides, of one rule or all.", run: cmdOverrideList},
				{name: "rl.override|help", arity: 2, since: rlSince,
					summary: "Show the subcommands.", run: cmdOverrideHelp},
			}},
	}
}

// cmdOverrideSet handles RL.OVERRIDE SET rule key limit window [BURST n]
// EX seconds|EXAT unix-seconds. The expiry is mandatory: an override is a
// temporary exception, and one forgotten must not outlive its purpose.
func cmdOverrideSet(c *session, args [][]byte) error {
	const name = "rl.override|set"
	burst := ""
	expireAt := int64(0)
	for i := 6; i < len(args); i++ {
		switch {
		case equalFold(args[i], "burst") && i+1 < len(args) && burst == "":
			i++
			burst = string(args[i])
		case (equalFold(args[i], "ex") || equalFold(args[i], "exat")) && i+1 < len(args) && expireAt == 0:
			n, ok := parseInt(args[i+1])
			if !ok {
				return errNotInteger
			}
			at, err := overrideExpiry(name, equalFold(args[i], "ex"), n, c.h.cfg.Clock())
			if err != nil {
				return err
			}
			expireAt = at
			i++
		default:
			return errSyntax
		}
	}
	if expireAt == 0 {
		return errf("an override needs an expiry: add EX seconds or EXAT unix-time")
	}
	if _, err := c.h.svc.PutOverride(c.handle(), args[2], args[3], string(args[4]), string(args[5]), burst, expireAt); err != nil {
		return err
	}
	c.out.OK()
	return nil
}

// overrideExpiry turns EX seconds (relative, when ex) or EXAT unix seconds
// into an instant in ns, refusing, in Redis's words, one not positive, not
// after now, or beyond what an int64 of ns holds.
func overrideExpiry(name string, ex bool, n, now int64) (int64, error) {
	if n <= 0 || n > math.MaxInt64/1_000_000_000 {
		return 0, errInvalidExpire(name)
	}
	at := n * 1_000_000_000
	if ex {
		if at > math.MaxInt64-now {
			return 0, errInvalidExpire(name)
		}
		at += now
	}
	if at <= now {
		return 0, errInvalidExpire(name)
	}
	return at, nil
}

// cmdOverrideGet handles RL.OVERRIDE GET rule key: the override's map, or
// nil when the key has none.
func cmdOverrideGet(c *session, args [][]byte) error {
	o, err := c.h.svc.OverrideOf(c.handle(), args[2], args[3])
	if err != nil {
		return err
	}
	if o == nil {
		c.out.Null()
		return nil
	}
	writeOverride(c, o)
	return nil
}

// cmdOverrideDel handles RL.OVERRIDE DEL rule key.
func cmdOverrideDel(c *session, args [][]byte) error {
	existed, err := c.h.svc.DeleteOverride(c.handle(), args[2], args[3])
	if err != nil {
		return err
	}
	if existed {
		c.out.Integer(1)
	} else {
		c.out.Integer(0)
	}
	return nil
}

// cmdOverrideList handles RL.OVERRIDE LIST [rule].
func cmdOverrideList(c *session, args [][]byte) error {
	if len(args) > 3 {
		return errArity("rl.override|list")
	}
	var rule []byte
	if len(args) == 3 {
		rule = args[2]
	}
	list, err := c.h.svc.Overrides(rule)
	if err != nil {
		return err
	}
	c.out.Array(len(list))
	for i := range list {
		writeOverride(c, &list[i])
	}
	return nil
}

// writeOverride writes an override as a map: rule, key, limit, window (as
// RL.RULE GET writes it), burst (0 when unset), expire_at_ms (Unix
// milliseconds) and ttl_ms (milliseconds left, rounded up).
func writeOverride(c *session, o *service.Override) {
	now := c.h.cfg.Clock()
	c.out.Map(7)
	c.out.BulkString("rule")
	c.out.BulkString(o.Def.Name)
	c.out.BulkString("key")
	c.out.BulkString(o.Key)
	c.out.BulkString("limit")
	c.out.Integer(o.Def.Limit)
	c.out.BulkString("window")
	c.out.BulkString(formatWindow(o.Def.Window))
	c.out.BulkString("burst")
	c.out.Integer(o.Def.Burst)
	c.out.BulkString("expire_at_ms")
	c.out.Integer(o.ExpireAt / 1_000_000)
	c.out.BulkString("ttl_ms")
	c.out.Integer(ceilMillis(max(0, o.ExpireAt-now)))
}

func cmdOverrideHelp(c *session, args [][]byte) error {
	writeHelp(c, "RL.OVERRIDE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"SET <rule> <key> <limit> <window> [BURST <n>] EX <seconds>|EXAT <unix-time>",
		"    Give key its own limit, window and burst under rule (same algorithm) until the expiry,",
		"    which is required. The budget the key has spent carries over, and back when it ends.",
		"GET <rule> <key>",
		"    Show key's override under rule, or nil.",
		"DEL <rule> <key>",
		"    End key's override now. Returns 1 if it had one.",
		"LIST [<rule>]",
		"    Show the live overrides, of one rule or of all, sorted by rule and key.",
		"HELP",
		"    Print this help.")
	return nil
}
