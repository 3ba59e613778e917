package resp

import (
	"bytes"
	"fmt"

	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
)

// cmdAllowAll handles RL.ALLOWALL key rule [key rule ...] [COST n]: several
// limits decided as one, all charged or none (see keyspace.Dispatcher.AllowAll).
//
// COST, when present, must be the last two words, so a final pair whose key
// is literally "COST" (any case) is read as the option; a client with such a
// key adds an explicit COST 1 after it.
func cmdAllowAll(c *client, args [][]byte) error {
	words, costWord := splitAllowAll(args)
	cost := int64(1)
	if costWord != nil {
		v, err := parseCost(costWord)
		if err != nil {
			return err
		}
		cost = v
	}
	if len(words)%2 != 0 {
		return errSyntax
	}
	if len(words)/2 > keyspace.MaxGroup {
		return fmt.Errorf("too many pairs: RL.ALLOWALL takes at most %d key rule pairs", keyspace.MaxGroup)
	}
	set := c.srv.cfg.Rules.Load()
	ops := c.groupOps[:0]
	for i := 0; i < len(words); i += 2 {
		key, name := words[i], words[i+1]
		rule := set.Get(name)
		if rule == nil {
			return rules.UnknownRule(string(name))
		}
		if cost > rule.Params.Capacity {
			return errCostAboveCapacity(cost, rule.Params.Capacity, rule.Name)
		}
		for j := 0; j < i; j += 2 {
			if bytes.Equal(words[j], key) && bytes.Equal(words[j+1], name) {
				return fmt.Errorf("pair '%s' '%s' is given twice; each key rule pair may appear once", key, name)
			}
		}
		ops = append(ops, keyspace.Op{Kind: keyspace.Allow, Rule: rule, Key: key, Cost: cost})
	}
	allowed, err := c.allowAll(ops)
	if err == nil {
		writeAllowAll(c, allowed, ops)
	}
	clear(ops)
	c.groupOps = ops[:0]
	return err
}

// splitAllowAll splits RL.ALLOWALL's words after the name into the key rule
// pairs and the word after a trailing COST (nil without one). It is the one
// reading of where COST is, for the command and for COMMAND GETKEYS.
func splitAllowAll(args [][]byte) (pairs [][]byte, cost []byte) {
	words := args[1:]
	if n := len(words); n >= 4 && n%2 == 0 && equalFold(words[n-2], "cost") {
		return words[:n-2], words[n-1]
	}
	return words, nil
}

// allowAllKeys returns the word indexes of RL.ALLOWALL's keys (COMMAND
// GETKEYS): the first word of each pair; none when the pairs are malformed.
func allowAllKeys(args [][]byte) []int {
	pairs, _ := splitAllowAll(args)
	if len(pairs) == 0 || len(pairs)%2 != 0 {
		return nil
	}
	keys := make([]int, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		keys = append(keys, 1+i)
	}
	return keys
}

// writeAllowAll writes the overall answer then each pair's decision: under
// RESP2 an array [allowed, decision...]; under RESP3 a map
// {allowed: n, decisions: [decision...]}.
func writeAllowAll(c *client, allowed bool, ops []keyspace.Op) {
	flag := int64(0)
	if allowed {
		flag = 1
	}
	if c.out.proto == 3 {
		c.out.mapHeader(2)
		c.out.bulkString("allowed")
		c.out.integer(flag)
		c.out.bulkString("decisions")
		c.out.array(len(ops))
	} else {
		c.out.array(1 + len(ops))
		c.out.integer(flag)
	}
	for i := range ops {
		writeDecision(c, &ops[i])
	}
}
