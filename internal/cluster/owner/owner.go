// Package owner decides rate-limit requests on the node that owns each
// key's slot, for front ends that have no client to redirect (the Envoy
// rate limit service): a key whose slot this node serves is decided here,
// any other is sent to its owner over the cluster's peer connections as
// the RESP command a client would send (RL.ALLOW, RL.PEEK, RL.ALLOWALL),
// so every node accepts any request and each key's budget is spent in one
// place.
package owner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/cluster"
	"github.com/rlserver/rlserver/internal/cluster/forward"
	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/service"
)

// Local decides requests on this node: the service's managed rules.
type Local interface {
	SetRules(defs []rules.Def) error
	Decide(ctx context.Context, checks []service.Check, allOrNothing bool) ([]algorithms.Decision, error)
}

// Limiter decides each request on the owner of its key's slot. It has
// Local's methods (the Envoy front end's Limiter), and is safe for
// concurrent use.
type Limiter struct {
	// Local decides the requests this node serves, and publishes rules
	// (every node publishes its own from its own configuration).
	Local Local
	// State is the node's cluster state (mode on).
	State *cluster.State
	// Peers reaches the other nodes.
	Peers *forward.Pool
	// TLS: peers are reached on their TLS ports.
	TLS bool
}

// Errors of Decide, beside the owner's own error replies and
// cluster.OwnerUnreachableError.
var (
	// ErrCrossNode: an all-or-nothing group whose keys are in several
	// slots not all served here cannot be decided as one.
	ErrCrossNode = errors.New("all_or_nothing: the descriptors' counters are in slots of different nodes, which cannot be decided as one; name the domain with a hash tag ({…}) to keep its counters in one slot")
	// ErrUnequalCosts: a group sent to another node must spend one cost
	// per key (RL.ALLOWALL's COST).
	ErrUnequalCosts = errors.New("all_or_nothing: a group decided on another node must have the same cost for every descriptor")
)

// maxReroutes bounds how often one call routes again after the map
// changed under it (an owner answered MOVED, or a hand-over finished).
const maxReroutes = 3

// SetRules publishes the rules on this node (Local.SetRules).
func (l *Limiter) SetRules(defs []rules.Def) error { return l.Local.SetRules(defs) }

// Decide decides reqs as Local.Decide does, each on its key's owner.
// Without allOrNothing the requests this node serves are decided here in
// one step, then the others one by one on their owners, in order (each
// request is independent of the others, so only the order per key
// matters, and a key's requests all go to one place). An allOrNothing
// group is decided as one: here if this node serves every key, else on
// the owner of the one slot every key is in (ErrCrossNode otherwise). An
// owner that cannot be reached, or does not answer within the pool's
// timeout, fails the call with cluster.OwnerUnreachableError; ctx ending
// first fails it with ctx's error.
func (l *Limiter) Decide(ctx context.Context, reqs []service.Check, allOrNothing bool) ([]algorithms.Decision, error) {
	if allOrNothing {
		return l.decideGroup(ctx, reqs)
	}
	out := make([]algorithms.Decision, len(reqs))
	for range maxReroutes {
		remote, done, err := l.decideLocal(ctx, reqs, out)
		if err != nil {
			return nil, err
		}
		if !done {
			continue
		}
		for _, i := range remote {
			if out[i], err = l.decideOne(ctx, reqs[i]); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, errRerouted
}

var errRerouted = errors.New("the cluster map kept changing while the request was routed; retry")

// routeOf routes one request in view v.
func (l *Limiter) routeOf(v *cluster.View, r *service.Check) cluster.Decision {
	return v.Route(cluster.KeySlotString(r.Key), true)
}

// decideLocal decides in one step the requests this node serves, and
// returns the indexes of the others. done false: a paused slot resumed or
// the view changed, and the caller routes again.
func (l *Limiter) decideLocal(ctx context.Context, reqs []service.Check, out []algorithms.Decision) (remote []int, done bool, err error) {
	v := l.State.View()
	var local []service.Check
	var at []int
	for i := range reqs {
		d := l.routeOf(v, &reqs[i])
		switch d.Action {
		case cluster.Serve, cluster.ServeMoving:
			local, at = append(local, reqs[i]), append(at, i)
		case cluster.Wait:
			return nil, false, waitResumed(ctx, v)
		case cluster.Forward:
			remote = append(remote, i)
		default: // Down
			return nil, false, d.Err
		}
	}
	if len(local) == 0 {
		return remote, true, nil
	}
	done, err = l.onLocal(v, func() error {
		dec, err := l.Local.Decide(ctx, local, false)
		for j, i := range at {
			if err == nil {
				out[i] = dec[j]
			}
		}
		return err
	})
	return remote, done, err
}

// decideOne decides one request on its owner, routing it again when the
// owner it was sent to no longer serves its slot.
func (l *Limiter) decideOne(ctx context.Context, r service.Check) (algorithms.Decision, error) {
	cmd := "RL.ALLOW"
	if r.Peek {
		cmd = "RL.PEEK"
	}
	args := [][]byte{[]byte(cmd), []byte(r.Key), []byte(r.Rule), strconv.AppendInt(nil, r.Cost, 10)}
	for range maxReroutes {
		v := l.State.View()
		d := l.routeOf(v, &r)
		switch d.Action {
		case cluster.Serve, cluster.ServeMoving:
			var dec []algorithms.Decision
			done, err := l.onLocal(v, func() (err error) {
				dec, err = l.Local.Decide(ctx, []service.Check{r}, false)
				return err
			})
			if done || err != nil {
				return first(dec), err
			}
		case cluster.Wait:
			if err := waitResumed(ctx, v); err != nil {
				return algorithms.Decision{}, err
			}
		case cluster.Forward:
			dec, redirected, err := l.remote(ctx, d, args, 1, false)
			if !redirected {
				return first(dec), err
			}
		default:
			return algorithms.Decision{}, d.Err
		}
	}
	return algorithms.Decision{}, errRerouted
}

// decideGroup decides an all-or-nothing group as one: here if every key
// is served here, else on the owner of the group's one slot.
func (l *Limiter) decideGroup(ctx context.Context, reqs []service.Check) ([]algorithms.Decision, error) {
	for range maxReroutes {
		v := l.State.View()
		allLocal := true
		var owner cluster.Decision
		for i := range reqs {
			d := l.routeOf(v, &reqs[i])
			switch d.Action {
			case cluster.Serve, cluster.ServeMoving:
				continue
			case cluster.Wait:
				if err := waitResumed(ctx, v); err != nil {
					return nil, err
				}
			case cluster.Forward:
				owner = d
			default:
				return nil, d.Err
			}
			allLocal = false
		}
		if allLocal {
			var dec []algorithms.Decision
			done, err := l.onLocal(v, func() (err error) {
				dec, err = l.Local.Decide(ctx, reqs, true)
				return err
			})
			if done || err != nil {
				return dec, err
			}
			continue
		}
		if owner.Owner == nil {
			continue // a paused slot resumed: route again
		}
		args, err := groupCommand(reqs)
		if err != nil {
			return nil, err
		}
		dec, redirected, err := l.remote(ctx, owner, args, len(reqs), true)
		if !redirected {
			return dec, err
		}
	}
	return nil, errRerouted
}

// groupCommand is the RL.ALLOWALL that decides reqs on another node: their
// keys must share a slot, and their costs be equal.
func groupCommand(reqs []service.Check) ([][]byte, error) {
	slot := cluster.KeySlotString(reqs[0].Key)
	args := [][]byte{[]byte("RL.ALLOWALL")}
	for _, r := range reqs {
		if cluster.KeySlotString(r.Key) != slot {
			return nil, ErrCrossNode
		}
		if r.Cost != reqs[0].Cost {
			return nil, ErrUnequalCosts
		}
		args = append(args, []byte(r.Key), []byte(r.Rule))
	}
	return append(args, []byte("COST"), strconv.AppendInt(nil, reqs[0].Cost, 10)), nil
}

// onLocal runs decide, which decides here requests routed in view v.
// When the node hands slots over with their state, it holds the gate a
// hand-over waits on, and runs decide only if the view is still v (done
// false otherwise: route again): a hand-over that started after v was
// taken may already have copied these keys' state, and one that starts
// now waits for this decision. The RESP path holds the gate the same way.
func (l *Limiter) onLocal(v *cluster.View, decide func() error) (done bool, err error) {
	if l.State.HandsOver() {
		l.State.Gate.Enter()
		defer l.State.Gate.Leave()
		if l.State.View() != v {
			return false, nil
		}
	}
	return true, decide()
}

// waitResumed waits until the slots paused in v are served again, or ctx
// ends.
func waitResumed(ctx context.Context, v *cluster.View) error {
	select {
	case <-v.Resumed():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func first(dec []algorithms.Decision) algorithms.Decision {
	if len(dec) == 0 {
		return algorithms.Decision{}
	}
	return dec[0]
}

// remote sends one command to the owner d names and reads its n
// decisions (group: RL.ALLOWALL's reply). redirected: the owner answered
// MOVED or ASK (its map differs from this node's), so the caller routes
// again.
func (l *Limiter) remote(ctx context.Context, d cluster.Decision, args [][]byte, n int, group bool) ([]algorithms.Decision, bool, error) {
	addr := d.Owner.PeerAddr(l.TLS)
	reply, err := l.Peers.Do(ctx, addr, 2, args, nil)
	if err != nil {
		if err := ended(ctx); err != nil {
			return nil, false, err
		}
		var fe *forward.Error
		return nil, false, &cluster.OwnerUnreachableError{Slot: d.Slot, Addr: addr, Sent: errors.As(err, &fe) && fe.Sent}
	}
	dec, err := parseDecisions(reply, n, group)
	var re *replyError
	if errors.As(err, &re) && re.redirect() {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("node %s: %w", addr, err)
	}
	return dec, false, nil
}

// ended returns ctx's error if ctx has ended or its deadline has passed:
// the pool's wait ends at the deadline, a moment before ctx's own timer
// may have fired.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// ms is a millisecond of the RESP replies, in ns.
const ms = int64(time.Millisecond)
