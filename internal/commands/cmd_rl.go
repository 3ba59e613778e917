package commands

import (
	"time"

	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/service"
)

// prepareDecision parses RL.ALLOW and RL.PEEK (named name): key rule [cost].
func prepareDecision(kind service.OpKind, name string) func(c *session, args [][]byte) (service.Op, error) {
	return func(c *session, args [][]byte) (service.Op, error) {
		if len(args) > 4 {
			return service.Op{}, errArity(name)
		}
		cost := int64(1)
		if len(args) == 4 {
			n, err := parseCost(args[3])
			if err != nil {
				return service.Op{}, err
			}
			cost = n
		}
		op, err := c.h.svc.Decision(kind, args[1], args[2], cost)
		if err != nil && c.ruleOnDemand(err, args[2]) {
			return c.h.svc.Decision(kind, args[1], args[2], cost)
		}
		return op, err
	}
}

// parseCost parses the cost of RL.ALLOW, RL.PEEK and RL.ALLOWALL: a
// non-integer gets Redis's wording, an integer below 1 is named as such.
func parseCost(b []byte) (int64, error) {
	n, ok := parseInt(b)
	switch {
	case !ok:
		return 0, errNotInteger
	case n < 1:
		return 0, errCostNotPositive(n)
	}
	return n, nil
}

// decisionFields names the six numbers of a decision, in reply order.
var decisionFields = [6]string{"allowed", "limit", "remaining", "retry_after_ms", "reset_after_ms", "delay_ms"}

// writeDecision writes a decision as six integers: an array under RESP2, a
// map of decisionFields under RESP3, with shadow_denied after them when the
// rule is in shadow mode. Durations are whole milliseconds, rounded up, so
// a client that waits retry_after_ms is never early.
func writeDecision(c *session, op *service.Op) {
	d := &op.Decision
	allowed := int64(0)
	if d.Allowed {
		allowed = 1
	}
	values := [6]int64{allowed, d.Limit, d.Remaining, ceilMillis(d.RetryAfter), ceilMillis(d.ResetAfter), ceilMillis(d.Delay)}
	if c.out.Proto() == 3 {
		c.out.Map(6 + shadowField(op))
		for i, v := range values {
			c.out.BulkString(decisionFields[i])
			c.out.Integer(v)
		}
		writeShadowField(c, op)
		return
	}
	c.out.Array(6)
	for _, v := range values {
		c.out.Integer(v)
	}
}

// ceilMillis converts nanoseconds to milliseconds, rounding up.
func ceilMillis(ns int64) int64 { return (ns + 999_999) / 1_000_000 }

func prepareReset(c *session, args [][]byte) (service.Op, error) {
	return c.h.svc.Decision(service.Reset, args[1], args[2], 0)
}

func writeReset(c *session, op *service.Op) {
	if op.Existed {
		c.out.Integer(1)
	} else {
		c.out.Integer(0)
	}
}

// The RL.RULE subcommands. Dispatch has checked each one's arity.

// cmdRuleSet handles RL.RULE SET name algorithm limit window [BURST n]
// [SHADOW].
func cmdRuleSet(c *session, args [][]byte) error {
	burst, shadow := "", false
	for i := 6; i < len(args); i++ {
		switch {
		case equalFold(args[i], "burst") && i+1 < len(args) && burst == "":
			i++
			burst = string(args[i])
		case equalFold(args[i], "shadow") && !shadow:
			shadow = true
		default:
			return errSyntax
		}
	}
	def, err := rules.ParseDef(string(args[2]), string(args[3]), string(args[4]), string(args[5]), burst)
	if err != nil {
		return err
	}
	def.Shadow = shadow
	if err := c.h.svc.PutRule(c.handle(), def); err != nil {
		return err
	}
	c.out.OK()
	return nil
}

// cmdRuleGet handles RL.RULE GET name.
func cmdRuleGet(c *session, args [][]byte) error {
	r := c.h.svc.Rules().Get(args[2])
	if r == nil {
		return rules.UnknownRule(string(args[2]))
	}
	writeRule(c, r)
	return nil
}

// cmdRuleDel handles RL.RULE DEL name: 1 if the rule existed, else 0.
func cmdRuleDel(c *session, args [][]byte) error {
	existed, err := c.h.svc.DeleteRule(c.handle(), string(args[2]))
	if err != nil {
		return err
	}
	if !existed {
		c.out.Integer(0)
		return nil
	}
	c.out.Integer(1)
	return nil
}

// cmdRuleList handles RL.RULE LIST: every rule, sorted by name.
func cmdRuleList(c *session, args [][]byte) error {
	list := c.h.svc.Rules().Rules()
	c.out.Array(len(list))
	for _, r := range list {
		writeRule(c, r)
	}
	return nil
}

// cmdRuleReload handles RL.RULE RELOAD. It has flagNoMulti: the reload
// reconciles every shard by message.
func cmdRuleReload(c *session, args [][]byte) error {
	if c.h.cfg.ReloadRules == nil {
		return service.ErrNoRulesFile
	}
	if err := c.h.cfg.ReloadRules(); err != nil {
		return err
	}
	c.out.OK()
	return nil
}

func cmdRuleHelp(c *session, args [][]byte) error {
	writeHelp(c, "RL.RULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"SET <name> <algorithm> <limit> <window> [BURST <n>] [SHADOW]",
		"    Create or change a rule. Algorithms: token_bucket, leaky_bucket, fixed_window,",
		"    sliding_log, sliding_counter. Window is a duration such as 500ms, 1s, 1m, 24h.",
		"    Changing limit, window or burst keeps the budget keys have spent;",
		"    changing the algorithm starts its keys fresh. SHADOW puts the rule in shadow mode:",
		"    decisions are computed and spent, every reply admits, would-be denials are counted.",
		"GET <name>",
		"    Show a rule.",
		"DEL <name>",
		"    Delete a rule and every key's state under it. Returns 1 if it existed.",
		"LIST",
		"    Show every rule.",
		"RELOAD",
		"    Re-read the --rules file and apply it over the current rules, all or nothing.",
		"HELP",
		"    Print this help.")
	return nil
}

// writeRule writes a rule as a map: name, algorithm, limit, window (a Go
// duration string, accepted back by RL.RULE SET), burst (0 when unset) and
// mode (enforce or shadow).
func writeRule(c *session, r *rules.Rule) {
	c.out.Map(6)
	c.out.BulkString("name")
	c.out.BulkString(r.Name)
	c.out.BulkString("algorithm")
	c.out.BulkString(r.Algorithm.String())
	c.out.BulkString("limit")
	c.out.Integer(r.Limit)
	c.out.BulkString("window")
	c.out.BulkString(formatWindow(r.Window))
	c.out.BulkString("burst")
	c.out.Integer(r.Burst)
	c.out.BulkString("mode")
	c.out.BulkString(r.Mode())
}

// formatWindow writes a window the way people write them: "1m" rather than
// Go's "1m0s". Either parses back to the same duration.
func formatWindow(w time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		unit string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if w%u.d == 0 {
			return itoa(int64(w/u.d)) + u.unit
		}
	}
	return w.String()
}

func cmdRLInfo(c *session, args [][]byte) error {
	c.out.BulkString(c.ratelimitInfo())
	return nil
}
