package resp

import (
	"errors"
	"time"

	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
)

// prepareDecision parses RL.ALLOW and RL.PEEK (named name): key rule [cost].
func prepareDecision(kind keyspace.OpKind, name string) func(c *client, args [][]byte) (keyspace.Op, error) {
	return func(c *client, args [][]byte) (keyspace.Op, error) {
		if len(args) > 4 {
			return keyspace.Op{}, errArity(name)
		}
		rule := c.srv.cfg.Rules.Load().Get(args[2])
		if rule == nil {
			return keyspace.Op{}, rules.UnknownRule(string(args[2]))
		}
		cost := int64(1)
		if len(args) == 4 {
			n, err := parseCost(args[3])
			if err != nil {
				return keyspace.Op{}, err
			}
			cost = n
		}
		if cost > rule.Params.Capacity {
			return keyspace.Op{}, errCostAboveCapacity(cost, rule.Params.Capacity, rule.Name)
		}
		return keyspace.Op{Kind: kind, Rule: rule, Key: args[1], Cost: cost}, nil
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
// map of decisionFields under RESP3. Durations are whole milliseconds,
// rounded up, so a client that waits retry_after_ms is never early.
func writeDecision(c *client, op *keyspace.Op) {
	d := &op.Decision
	allowed := int64(0)
	if d.Allowed {
		allowed = 1
	}
	values := [6]int64{allowed, d.Limit, d.Remaining, ceilMillis(d.RetryAfter), ceilMillis(d.ResetAfter), ceilMillis(d.Delay)}
	if c.out.proto == 3 {
		c.out.mapHeader(6)
		for i, v := range values {
			c.out.bulkString(decisionFields[i])
			c.out.integer(v)
		}
		return
	}
	c.out.array(6)
	for _, v := range values {
		c.out.integer(v)
	}
}

// ceilMillis converts nanoseconds to milliseconds, rounding up.
func ceilMillis(ns int64) int64 { return (ns + 999_999) / 1_000_000 }

func prepareReset(c *client, args [][]byte) (keyspace.Op, error) {
	rule := c.srv.cfg.Rules.Load().Get(args[2])
	if rule == nil {
		return keyspace.Op{}, rules.UnknownRule(string(args[2]))
	}
	return keyspace.Op{Kind: keyspace.Reset, Rule: rule, Key: args[1]}, nil
}

func writeReset(c *client, op *keyspace.Op) {
	if op.Existed {
		c.out.integer(1)
	} else {
		c.out.integer(0)
	}
}

// The RL.RULE subcommands. Dispatch has checked each one's arity.

// cmdRuleSet handles RL.RULE SET name algorithm limit window [BURST n].
func cmdRuleSet(c *client, args [][]byte) error {
	if len(args) != 6 && len(args) != 8 {
		return errArity("rl.rule|set")
	}
	burst := ""
	if len(args) == 8 {
		if !equalFold(args[6], "burst") {
			return errSyntax
		}
		burst = string(args[7])
	}
	def, err := rules.ParseDef(string(args[2]), string(args[3]), string(args[4]), string(args[5]), burst)
	if err != nil {
		return err
	}
	if _, err := c.srv.cfg.Rules.Put(def); err != nil {
		return err
	}
	c.reconcile()
	c.out.ok()
	return nil
}

// cmdRuleGet handles RL.RULE GET name.
func cmdRuleGet(c *client, args [][]byte) error {
	r := c.srv.cfg.Rules.Load().Get(args[2])
	if r == nil {
		return rules.UnknownRule(string(args[2]))
	}
	writeRule(c, r)
	return nil
}

// cmdRuleDel handles RL.RULE DEL name: 1 if the rule existed, else 0.
func cmdRuleDel(c *client, args [][]byte) error {
	if _, ok := c.srv.cfg.Rules.Delete(string(args[2])); !ok {
		c.out.integer(0)
		return nil
	}
	c.reconcile()
	c.out.integer(1)
	return nil
}

// cmdRuleList handles RL.RULE LIST: every rule, sorted by name.
func cmdRuleList(c *client, args [][]byte) error {
	list := c.srv.cfg.Rules.Load().Rules()
	c.out.array(len(list))
	for _, r := range list {
		writeRule(c, r)
	}
	return nil
}

// cmdRuleReload handles RL.RULE RELOAD. It has flagNoMulti: the reload
// reconciles every shard by message.
func cmdRuleReload(c *client, args [][]byte) error {
	if c.srv.cfg.ReloadRules == nil {
		return errNoRulesFile
	}
	if err := c.srv.cfg.ReloadRules(); err != nil {
		return err
	}
	c.out.ok()
	return nil
}

func cmdRuleHelp(c *client, args [][]byte) error {
	writeHelp(c, "RL.RULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"SET <name> <algorithm> <limit> <window> [BURST <n>]",
		"    Create or change a rule. Algorithms: token_bucket, leaky_bucket, fixed_window,",
		"    sliding_log, sliding_counter. Window is a duration such as 500ms, 1s, 1m, 24h.",
		"    Changing limit, window or burst keeps the budget keys have spent;",
		"    changing the algorithm starts its keys fresh.",
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

var errNoRulesFile = errors.New("no rules file to reload: the server was started without --rules")

// writeRule writes a rule as a map: name, algorithm, limit, window (a Go
// duration string, accepted back by RL.RULE SET) and burst (0 when unset).
func writeRule(c *client, r *rules.Rule) {
	c.out.mapHeader(5)
	c.out.bulkString("name")
	c.out.bulkString(r.Name)
	c.out.bulkString("algorithm")
	c.out.bulkString(r.Algorithm.String())
	c.out.bulkString("limit")
	c.out.integer(r.Limit)
	c.out.bulkString("window")
	c.out.bulkString(formatWindow(r.Window))
	c.out.bulkString("burst")
	c.out.integer(r.Burst)
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

func cmdRLInfo(c *client, args [][]byte) error {
	c.out.bulkString(c.ratelimitInfo())
	return nil
}
