package cluster

import (
	"errors"
	"fmt"
	"strconv"
)

// Errors a keyed command meets in cluster mode. Each one's Error text is
// the exact reply Redis Cluster sends (code first, no "ERR "), because
// clients act on it: go-redis, redis-py and ioredis retry CLUSTERDOWN and
// TRYAGAIN, follow MOVED and ASK, and fail on CROSSSLOT. The protocol layer
// must write these texts unchanged (ReplyText tells them apart).
var (
	// ErrCrossSlot: the keys of one command, transaction or script hash to
	// different slots.
	ErrCrossSlot = &CodedError{Code: "CROSSSLOT", Msg: "Keys in request don't hash to the same slot"}
	// ErrClusterDown: the node has no slot map (cluster on, nothing pushed
	// yet), so no slot is served anywhere it knows of.
	ErrClusterDown = &CodedError{Code: "CLUSTERDOWN", Msg: "The cluster is down"}
	// ErrSlotNotServed: the map assigns the slot to no node. Maps this
	// package accepts cover every slot; kept for Redis's full set.
	ErrSlotNotServed = &CodedError{Code: "CLUSTERDOWN", Msg: "Hash slot not served"}
	// ErrTryAgain: a multi-key command's slot is being moved and not all
	// its keys are on one side yet; the client retries shortly.
	ErrTryAgain = &CodedError{Code: "TRYAGAIN", Msg: "Multiple keys request during rehashing of slot"}
)

// Errors of slot maps, wrapped with details by ParseMap, Validate and
// State.Apply; tell them apart with errors.Is.
var (
	// ErrInvalidMap: the map breaks a rule of ParseMap's.
	ErrInvalidMap = errors.New("invalid cluster map")
	// ErrOlderMap: the map's version is below the one the node holds.
	ErrOlderMap = errors.New("cluster map is older than the node's")
	// ErrMapConflict: the map has the node's version but different
	// contents; versions must change with every change of the map.
	ErrMapConflict = errors.New("cluster map differs from the node's map of the same version")
	// ErrNotCluster: a cluster command was given to a node with cluster
	// mode off. Its text is Redis's reply in that case.
	ErrNotCluster = redisWords("This instance has cluster support disabled")
)

// redisWords is an error whose text is Redis's wording of a reply (after
// the ERR the protocol layer adds), capitals and all.
type redisWords string

// Error returns Redis's wording.
func (e redisWords) Error() string { return string(e) }

// CodedError is an error whose reply starts with its own code (CROSSSLOT,
// CLUSTERDOWN, TRYAGAIN) instead of ERR.
type CodedError struct {
	Code string // upper case, no spaces
	Msg  string
}

// Error returns the reply text, code first.
func (e *CodedError) Error() string { return e.Code + " " + e.Msg }

// RedirectError tells a client that another node serves the slot: MOVED
// (the slot lives there; update the slot table) or ASK (only this request,
// during a migration; send ASKING first).
type RedirectError struct {
	Ask  bool
	Slot uint16
	// Addr is host:port as Redis writes it (an IPv6 host bare): the
	// node's announced host, never empty (redis-cli 7.0 cannot follow an
	// empty host), and its TLS port for a client on TLS when it has one.
	Addr string
}

// Error returns the reply text: "MOVED 12182 127.0.0.1:17003" or
// "ASK 12182 127.0.0.1:17003".
func (e *RedirectError) Error() string {
	return string(appendRedirect(nil, e.Ask, e.Slot, e.Addr))
}

// appendRedirect appends the text of a MOVED or ASK error, without the
// leading '-' and the line end.
func appendRedirect(dst []byte, ask bool, slot uint16, addr string) []byte {
	if ask {
		dst = append(dst, "ASK "...)
	} else {
		dst = append(dst, "MOVED "...)
	}
	dst = strconv.AppendUint(dst, uint64(slot), 10)
	dst = append(dst, ' ')
	return append(dst, addr...)
}

// OwnerUnreachableError answers a command this node tried to forward to
// the slot's owner and could not: a CLUSTERDOWN, which go-redis and ioredis
// retry with a back-off and redis-py answers by re-reading the map.
type OwnerUnreachableError struct {
	Slot uint16
	Addr string // the owner's address, as dialled
	// Sent: the request reached the owner, which may have run it (no reply
	// came back); the client should not assume it did not.
	Sent bool
}

// Error returns the reply text.
func (e *OwnerUnreachableError) Error() string {
	if e.Sent {
		return fmt.Sprintf("CLUSTERDOWN The owner of slot %d (%s) did not answer; the request may have run", e.Slot, e.Addr)
	}
	return fmt.Sprintf("CLUSTERDOWN The owner of slot %d (%s) is unreachable", e.Slot, e.Addr)
}

// ReplyText returns the reply text for err if err is (or wraps) one of this
// package's protocol errors, whose texts carry their own code; ok is false
// for any other error, which the protocol layer words as usual.
func ReplyText(err error) (text string, ok bool) {
	var ce *CodedError
	if errors.As(err, &ce) {
		return ce.Error(), true
	}
	var re *RedirectError
	if errors.As(err, &re) {
		return re.Error(), true
	}
	var ue *OwnerUnreachableError
	if errors.As(err, &ue) {
		return ue.Error(), true
	}
	return "", false
}
