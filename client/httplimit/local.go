package httplimit

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/rlserver/rlserver/client"
	"github.com/rlserver/rlserver/internal/algorithms"
)

// localLimiter is the FailLocal policy's in-process limiter: the rule's
// algorithm from internal/algorithms, per key, on this node alone. It is a
// coarse fallback, so it keeps memory bounded the simple way: a shard that
// reaches its share of MaxKeys starts over empty, which admits more, never
// fewer, than the limit says.
type localLimiter struct {
	p      algorithms.Params
	window time.Duration // the policy window headers report
	perMap int
	now    func() time.Time
	seed   maphash.Seed
	rule   string
	shards [localShards]localShard
}

const localShards = 16

type localShard struct {
	mu sync.Mutex
	m  map[string]algorithms.State
}

func newLocalLimiter(rule string, l *LocalLimit, now func() time.Time) *localLimiter {
	p, _ := l.params() // validated with the configuration
	keys := l.MaxKeys
	if keys <= 0 {
		keys = 10000
	}
	ll := &localLimiter{p: p, perMap: max(1, keys/localShards), now: now, seed: maphash.MakeSeed(), rule: rule}
	ll.window = time.Duration(p.Window)
	if p.Algorithm.IsBucket() && p.Capacity != p.Limit {
		ll.window = time.Duration(float64(p.Window) * float64(p.Capacity) / float64(p.Limit))
	}
	for i := range ll.shards {
		ll.shards[i].m = make(map[string]algorithms.State)
	}
	return ll
}

// decide spends cost for key if the local limit admits it. at is the
// instant of the spend, for refund.
func (l *localLimiter) decide(key string, cost int64) (d client.Decision, at int64) {
	sh := &l.shards[maphash.String(l.seed, key)%localShards]
	now := l.now().UnixNano()
	if cost > l.p.Capacity {
		// Could never pass; the local limiter denies it for a window.
		return client.Decision{Limit: l.p.Capacity, RetryAfter: time.Duration(l.p.Window), Rule: l.rule, Window: l.window}, now
	}
	sh.mu.Lock()
	s, found := sh.m[key]
	if !found && len(sh.m) >= l.perMap {
		clear(sh.m)
	}
	s, ad := algorithms.Decide(l.p, s, now, cost)
	sh.m[key] = s
	sh.mu.Unlock()
	return client.Decision{
		Allowed: ad.Allowed, Limit: ad.Limit, Remaining: ad.Remaining,
		RetryAfter: time.Duration(ad.RetryAfter), ResetAfter: time.Duration(ad.ResetAfter),
		Delay: time.Duration(ad.Delay), Rule: l.rule, Window: l.window,
	}, s.Stamp
}

// refund gives back cost units spent at at for key, when the request they
// were spent for was refused by another rule.
func (l *localLimiter) refund(key string, at, cost int64) {
	sh := &l.shards[maphash.String(l.seed, key)%localShards]
	sh.mu.Lock()
	if s, found := sh.m[key]; found {
		sh.m[key], _ = algorithms.Refund(l.p, s, l.now().UnixNano(), at, cost)
	}
	sh.mu.Unlock()
}
