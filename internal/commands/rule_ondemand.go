package commands

import (
	"errors"

	"github.com/rlserver/rlserver/internal/rules"
)

// SetRuleOnDemand gives the handler a source of rules made on demand: f
// publishes the rule named name if it can and reports whether it is there
// now. In cluster mode the Envoy front end's limit overrides are rules
// named after their numbers, made on the node whose front end received the
// request; the node owning the key is sent the decision by that name
// (internal/cluster/owner), and makes the same rule from it here. Safe to
// call while connections are served.
func (h *Handler) SetRuleOnDemand(f func(name string) bool) { h.ruleOnDemand.Store(&f) }

// ruleOnDemand reports whether err is an unknown rule and every rule in
// names is there now (made by the rule source, or by another connection
// meanwhile), so the caller prepares its decision again. Never with shards
// held (in EXEC, or a script): publishing a rule waits for every shard.
// Any connection may ask, as a peer's forwarded request does for its
// client: the source makes only its own reserved names (bounded in number
// by the front end), each the rule a request to the front end would make.
func (c *session) ruleOnDemand(err error, names ...[]byte) bool {
	f := c.h.ruleOnDemand.Load()
	if f == nil || c.inMulti || c.db != nil || !errors.Is(err, rules.ErrUnknownRule) {
		return false
	}
	set := c.h.svc.Rules()
	for _, name := range names {
		if set.Get(name) == nil && !(*f)(string(name)) {
			return false
		}
	}
	return true
}
