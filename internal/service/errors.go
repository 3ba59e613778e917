package service

import (
	"errors"
	"fmt"

	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
)

// Errors of the use cases. Each is a value or a type a front end tells
// apart with errors.Is and errors.As; its Error text is plain English for
// logs. Front ends word them for their clients (the Redis protocol layer
// has one table of replies).
var (
	// ErrUnknownRule: a request names a rule the current set does not
	// have (wrapped with the name).
	ErrUnknownRule = rules.ErrUnknownRule
	// ErrOddPairs: AllowAll was given a key without a rule.
	ErrOddPairs = errors.New("key rule pairs expected")
	// ErrTooManyPairs: AllowAll was given more than MaxGroup pairs.
	ErrTooManyPairs = fmt.Errorf("at most %d key rule pairs may be decided as one", MaxGroup)
	// ErrNoRulesFile: a reload was asked for, but the rules came from no
	// file.
	ErrNoRulesFile = errors.New("no rules file to reload: the server was started without --rules")
	// ErrPeekInGroup: a managed group (Managed.Decide) holds a peek.
	ErrPeekInGroup = errors.New("a peek cannot be decided in an all-or-nothing group")
	// ErrNoPersistence: a save was asked for, but persistence is off.
	ErrNoPersistence = errors.New("persistence is disabled (--data-dir is empty)")

	// Errors the keyspace reports.
	ErrKeyLimit    = keyspace.ErrKeyLimit
	ErrShardFailed = keyspace.ErrShardFailed
	ErrTooLarge    = keyspace.ErrTooLarge
)

// TooLargeError is the keyspace's refusal of a key or value larger than
// configured.
type TooLargeError = keyspace.TooLargeError

// CostError refuses a cost: below 1 (Capacity is 0), or above the
// capacity of Rule, so that the request could never be admitted.
type CostError struct {
	Cost     int64
	Capacity int64
	Rule     string
}

// Error describes the refusal.
func (e *CostError) Error() string {
	if e.Capacity == 0 {
		return fmt.Sprintf("invalid cost '%d': must be a positive integer", e.Cost)
	}
	return fmt.Sprintf("cost %d exceeds the capacity %d of rule '%s'; such a request could never be allowed", e.Cost, e.Capacity, e.Rule)
}

// DuplicatePairError refuses an AllowAll that names one key rule pair twice.
type DuplicatePairError struct{ Key, Rule string }

// Error names the pair.
func (e *DuplicatePairError) Error() string {
	return fmt.Sprintf("pair '%s' '%s' is given twice; each key rule pair may appear once", e.Key, e.Rule)
}

// ReservedRuleError refuses a rule change naming a managed rule (one whose
// name has a reserved prefix, Config.ReservedRulePrefixes): its front end's
// configuration owns it.
type ReservedRuleError struct{ Name, Prefix string }

// Error names the rule and its owner's prefix.
func (e *ReservedRuleError) Error() string {
	if e.Prefix == "" {
		return fmt.Sprintf("'%s' is not a reserved rule name prefix", e.Name)
	}
	return fmt.Sprintf("rule '%s': names starting with '%s' are reserved for the rules a front end's configuration defines (--envoy-config for 'envoy:'); change that configuration instead", e.Name, e.Prefix)
}

// CountError refuses a count or an instant that must be a positive
// integer: RL.ACQUIRE's and RL.REFUND's unit counts, RL.REFUND's grant
// instant.
type CountError struct {
	What  string
	Value int64
}

// Error names the argument.
func (e *CountError) Error() string {
	return fmt.Sprintf("invalid %s '%d': must be a positive integer", e.What, e.Value)
}
