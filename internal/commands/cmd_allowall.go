package commands

import (
	"github.com/rlserver/rlserver/internal/service"
)

// cmdAllowAll handles RL.ALLOWALL key rule [key rule ...] [COST n]: several
// limits decided as one, all charged or none (see service.Service.AllowAll).
//
// COST, when present, must be the last two words, so a final pair whose key
// is literally "COST" (any case) is read as the option; a client with such a
// key adds an explicit COST 1 after it.
func cmdAllowAll(c *session, args [][]byte) error {
	words, costWord := splitAllowAll(args)
	cost := int64(1)
	if costWord != nil {
		v, err := parseCost(costWord)
		if err != nil {
			return err
		}
		cost = v
	}
	ops, err := c.h.svc.Group(c.groupOps[:0], words, cost)
	if err != nil && c.ruleOnDemand(err, pairRules(words)...) {
		ops, err = c.h.svc.Group(ops[:0], words, cost)
	}
	if err == nil {
		var allowed bool
		if allowed, err = c.h.svc.AllowAll(c.handle(), ops); err == nil {
			writeAllowAll(c, allowed, ops)
		}
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
func writeAllowAll(c *session, allowed bool, ops []service.Op) {
	flag := int64(0)
	if allowed {
		flag = 1
	}
	if c.out.Proto() == 3 {
		c.out.Map(2)
		c.out.BulkString("allowed")
		c.out.Integer(flag)
		c.out.BulkString("decisions")
		c.out.Array(len(ops))
	} else {
		c.out.Array(1 + len(ops))
		c.out.Integer(flag)
	}
	for i := range ops {
		writeDecision(c, &ops[i])
	}
}

// pairRules returns the rule names of RL.ALLOWALL's key rule pairs.
func pairRules(pairs [][]byte) [][]byte {
	var names [][]byte
	for i := 1; i < len(pairs); i += 2 {
		names = append(names, pairs[i])
	}
	return names
}
