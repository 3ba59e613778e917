package client

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
)

// A denial is not an error: a call that reached the server and was
// answered returns a Decision with Allowed false. Errors say why there is
// no decision, in four classes a caller tells apart with errors.Is:
//
//	ErrUnavailable   the server could not be reached or did not answer in
//	                 time (connection refused or lost, deadline, circuit
//	                 breaker open): retrying later may succeed
//	ErrMisconfigured the request can never succeed as written: an unknown
//	                 rule (*UnknownRuleError), a cost above the rule's
//	                 capacity or below 1 (*CostError), a command the server
//	                 does not know (an older server), wrong arguments
//	ErrAuth          the server wants a password (NOAUTH) or refused the
//	                 one given (WRONGPASS)
//	*ServerError     any other refusal by a server that is up (a full key
//	                 table under --maxkeys-policy reject, a key too large)
var (
	// ErrUnavailable: no answer from the server.
	ErrUnavailable = errors.New("rlserver unavailable")
	// ErrMisconfigured: the server answered that the request is wrong.
	ErrMisconfigured = errors.New("rlserver request misconfigured")
	// ErrAuth: the server refused the connection's credentials.
	ErrAuth = errors.New("rlserver authentication failed")
	// ErrClosed: the Budget was closed.
	ErrClosed = errors.New("rlserver client: budget closed")
)

// UnknownRuleError is the server's "ERR unknown rule 'name'": no rule of
// that name exists (yet, or any more). It matches ErrMisconfigured.
type UnknownRuleError struct{ Rule string }

// Error names the rule, as the server does.
func (e *UnknownRuleError) Error() string { return fmt.Sprintf("unknown rule '%s'", e.Rule) }

// Is makes errors.Is(err, ErrMisconfigured) hold.
func (e *UnknownRuleError) Is(target error) bool { return target == ErrMisconfigured }

// CostError is the server's refusal of a cost that could never be
// admitted: above the rule's capacity (Capacity > 0), or below 1 (Capacity
// 0). It matches ErrMisconfigured: waiting does not help.
type CostError struct {
	Cost     int64
	Capacity int64  // 0 when the cost was below 1
	Rule     string // "" when the cost was below 1
}

// Error describes the refusal in the server's words.
func (e *CostError) Error() string {
	if e.Capacity == 0 {
		return fmt.Sprintf("invalid cost '%d': must be a positive integer", e.Cost)
	}
	return fmt.Sprintf("cost %d exceeds the capacity %d of rule '%s'; such a request could never be allowed", e.Cost, e.Capacity, e.Rule)
}

// Is makes errors.Is(err, ErrMisconfigured) hold.
func (e *CostError) Is(target error) bool { return target == ErrMisconfigured }

// ServerError is an error reply the other classes do not cover, with its
// text as the server sent it. Misconfigured is set for replies that mean
// the request itself is wrong (unknown command, wrong number of arguments,
// syntax), which then match ErrMisconfigured.
type ServerError struct {
	Msg           string
	Misconfigured bool
}

// Error returns the server's text.
func (e *ServerError) Error() string { return "rlserver: " + e.Msg }

// Is makes errors.Is(err, ErrMisconfigured) hold for a request error.
func (e *ServerError) Is(target error) bool { return e.Misconfigured && target == ErrMisconfigured }

var (
	unknownRuleText = regexp.MustCompile(`^ERR unknown rule '(.*)'$`)
	costAboveText   = regexp.MustCompile(`^ERR cost (\d+) exceeds the capacity (\d+) of rule '(.*)'; `)
	costBelowText   = regexp.MustCompile(`^ERR invalid (?:cost|count) '(-?\d+)': must be a positive integer`)
)

// requestErrors are the prefixes of replies that say the request is wrong.
var requestErrors = []string{
	"ERR unknown command", "ERR wrong number of arguments", "ERR syntax error",
	"ERR value is not an integer", "ERR unknown subcommand", "ERR pair ", "ERR too many pairs",
}

// unavailableReplies are error replies of a server (or cluster) that cannot
// serve right now; retrying later may succeed.
var unavailableReplies = []string{"LOADING ", "CLUSTERDOWN ", "TRYAGAIN ", "MASTERDOWN ", "BUSY "}

// classify turns an error from go-redis into one of this package's classes.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return fmt.Errorf("%w: circuit breaker open: %w", ErrUnavailable, err)
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		// Network errors, timeouts, a closed client, the caller's
		// context: no answer.
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	msg := rerr.Error()
	if redis.IsAuthError(err) {
		return fmt.Errorf("%w: %s", ErrAuth, msg)
	}
	if m := unknownRuleText.FindStringSubmatch(msg); m != nil {
		return &UnknownRuleError{Rule: m[1]}
	}
	if m := costAboveText.FindStringSubmatch(msg); m != nil {
		cost, _ := strconv.ParseInt(m[1], 10, 64)
		capacity, _ := strconv.ParseInt(m[2], 10, 64)
		return &CostError{Cost: cost, Capacity: capacity, Rule: m[3]}
	}
	if m := costBelowText.FindStringSubmatch(msg); m != nil {
		cost, _ := strconv.ParseInt(m[1], 10, 64)
		return &CostError{Cost: cost}
	}
	for _, p := range unavailableReplies {
		if strings.HasPrefix(msg, p) {
			return fmt.Errorf("%w: %s", ErrUnavailable, msg)
		}
	}
	for _, p := range requestErrors {
		if strings.HasPrefix(msg, p) {
			return &ServerError{Msg: msg, Misconfigured: true}
		}
	}
	return &ServerError{Msg: msg}
}

// countsAgainstServer reports whether err says the server is unwell (the
// circuit breaker counts it as a failure): no answer in time, or no
// connection. A caller's own cancellation is not the server's fault.
func countsAgainstServer(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		for _, p := range unavailableReplies {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	return true
}

// answered returns err unless it is an error reply, which means the server
// is up and answered.
func answered(err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return nil
	}
	return err
}
