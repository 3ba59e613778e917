package commands

import (
	"strconv"
	"strings"

	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/service"
)

// gatewayCommands returns the commands of the gateway side (docs/gateway.md):
// RL.ACQUIRE and RL.REFUND, the local budget's reservations.
func gatewayCommands() []*command {
	return []*command{
		&command{name: "rl.acquire", arity: 4, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysReadWrite,
			group: groupRatelimit, since: rlSince,
			summary: "Grant between 0 and n units of key under rule at once, and spend them: key rule n.",
			prepare: prepareAcquire, reply: writeGrant},
		&command{name: "rl.refund", arity: 5, flags: flagWrite | flagFast, keys: oneKey, keyFlags: keysUpdate,
			group: groupRatelimit, since: rlSince,
			summary: "Give back up to n unused units granted at granted_at_ns: key rule n granted_at_ns.",
			prepare: prepareRefund, reply: writeRefund},
	}
}

// prepareAcquire parses RL.ACQUIRE key rule n.
func prepareAcquire(c *session, args [][]byte) (service.Op, error) {
	n, ok := parseInt(args[3])
	if !ok {
		return service.Op{}, errNotInteger
	}
	return c.h.svc.Grant(args[1], args[2], n)
}

// grantFields names RL.ACQUIRE's reply, in order: RL.ALLOW's six numbers
// with the units granted in the first slot, then the grant's instant,
// which RL.REFUND takes back.
var grantFields = [7]string{"granted", "limit", "remaining", "retry_after_ms", "reset_after_ms", "delay_ms", "granted_at_ns"}

// writeGrant writes a grant as seven integers: an array under RESP2, a map
// of grantFields under RESP3. Durations are whole milliseconds, rounded up;
// retry_after_ms, when nothing was granted, is the wait for one more unit.
// granted_at_ns is 0 when nothing was granted (there is nothing to refund).
func writeGrant(c *session, op *service.Op) {
	d := &op.Decision
	at := op.At
	if op.Granted == 0 {
		at = 0
	}
	if op.ShadowDenied {
		at = 0 // granted in shadow mode, never spent: nothing to refund
	}
	values := [7]int64{op.Granted, d.Limit, d.Remaining, ceilMillis(d.RetryAfter), ceilMillis(d.ResetAfter), ceilMillis(d.Delay), at}
	if c.out.Proto() == 3 {
		c.out.Map(len(values) + shadowField(op))
		for i, v := range values {
			c.out.BulkString(grantFields[i])
			c.out.Integer(v)
		}
		writeShadowField(c, op)
		return
	}
	c.out.Array(len(values))
	for _, v := range values {
		c.out.Integer(v)
	}
}

// prepareRefund parses RL.REFUND key rule n granted_at_ns.
func prepareRefund(c *session, args [][]byte) (service.Op, error) {
	n, ok := parseInt(args[3])
	if !ok {
		return service.Op{}, errNotInteger
	}
	at, ok := parseInt(args[4])
	if !ok {
		return service.Op{}, errNotInteger
	}
	return c.h.svc.GiveBack(args[1], args[2], n, at)
}

// writeRefund replies with the units taken back.
func writeRefund(c *session, op *service.Op) { c.out.Integer(op.Granted) }

// shadowField is the number of fields a RESP3 decision map carries beyond
// its numbers: shadow_denied, for a rule in shadow mode. RESP2 arrays keep
// their fixed shape.
func shadowField(op *service.Op) int {
	if op.Shadow {
		return 1
	}
	return 0
}

// writeShadowField writes shadow_denied (1 if the rule, in shadow mode,
// would have denied) into a RESP3 decision map, for a rule in shadow mode.
func writeShadowField(c *session, op *service.Op) {
	if !op.Shadow {
		return
	}
	c.out.BulkString("shadow_denied")
	if op.ShadowDenied {
		c.out.Integer(1)
	} else {
		c.out.Integer(0)
	}
}

// shadowInfo is what RL.INFO adds to a rule's line for a rule in shadow
// mode (or one that was, and counted shadow denials): its mode and the
// denials it did not enforce.
func shadowInfo(r *rules.Rule, rs service.RuleStats) string {
	if !r.Shadow && rs.ShadowDenied == 0 {
		return ""
	}
	return ",mode=" + r.Mode() + ",shadow_denied=" + strconv.FormatUint(rs.ShadowDenied, 10)
}

// gatewayFields writes RL.INFO's totals for shadow mode and overrides.
func (c *session) gatewayFields(b *strings.Builder, st *service.Stats) {
	var shadow uint64
	overrides := 0
	for _, rs := range st.Rules {
		shadow += rs.ShadowDenied
		overrides += rs.Overrides
	}
	field(b, "rl_shadow_denied_total", shadow)
	field(b, "rl_overrides", overrides)
}
