// Command golibs drives the Go rate-limiter libraries that keep their state
// in Redis — go-redis/redis_rate v10, ulule/limiter v3 (redis store),
// throttled v2 (GCRA, goredisstore.v9) — through the issue-14 sequence
// (limit 5 per 10 s, 7 hits, then each library's peek, penalty and reset
// calls) against the server at the address given, and prints every
// decision the library reports, one per line. Only what does not depend on
// the moment (allowed or not, remaining) is printed, so two servers can be
// compared line by line (cmd/rlserver's TestRateLimiterLibraries does).
//
// It is a module of its own so the libraries stay out of rlserver's
// dependencies.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/throttled/throttled/v2"
	goredisstore "github.com/throttled/throttled/v2/store/goredisstore.v9"
	"github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: golibs HOST:PORT PROTOCOL")
		os.Exit(2)
	}
	proto, _ := strconv.Atoi(os.Args[2])
	rdb := redis.NewClient(&redis.Options{Addr: os.Args[1], Protocol: proto})
	defer rdb.Close()
	ctx := context.Background()
	for _, lib := range []struct {
		name string
		run  func(context.Context, *redis.Client) error
	}{{"redis_rate", redisRate}, {"ulule", ulule}, {"throttled", throttledGCRA}} {
		if err := lib.run(ctx, rdb); err != nil {
			fmt.Printf("%s error: %v\n", lib.name, err)
			os.Exit(1)
		}
	}
}

// redisRate: GCRA, burst 5, 5 per 10 s.
func redisRate(ctx context.Context, rdb *redis.Client) error {
	rl := redis_rate.NewLimiter(rdb)
	lim := redis_rate.Limit{Rate: 5, Burst: 5, Period: 10 * time.Second}
	admitted := 0
	for i := range 7 {
		res, err := rl.Allow(ctx, "user1", lim)
		if err != nil {
			return err
		}
		admitted += res.Allowed
		fmt.Printf("redis_rate hit %d allowed=%d remaining=%d\n", i, res.Allowed, res.Remaining)
	}
	fmt.Println("redis_rate admitted", admitted)
	res, err := rl.AllowAtMost(ctx, "user1", lim, 3)
	if err != nil {
		return err
	}
	fmt.Println("redis_rate allow-at-most", res.Allowed, res.Remaining)
	if err := rl.Reset(ctx, "user1"); err != nil {
		return err
	}
	if res, err = rl.AllowN(ctx, "user1", lim, 2); err != nil {
		return err
	}
	fmt.Println("redis_rate after reset, cost 2:", res.Allowed, res.Remaining)
	return nil
}

// ulule: fixed window of 5 per 10 s.
func ulule(ctx context.Context, rdb *redis.Client) error {
	store, err := ulredis.NewStoreWithOptions(rdb, limiter.StoreOptions{Prefix: "ulule"})
	if err != nil {
		return err
	}
	l := limiter.New(store, limiter.Rate{Period: 10 * time.Second, Limit: 5})
	admitted := 0
	for i := range 7 {
		c, err := l.Get(ctx, "user1")
		if err != nil {
			return err
		}
		if !c.Reached {
			admitted++
		}
		fmt.Printf("ulule hit %d reached=%v remaining=%d\n", i, c.Reached, c.Remaining)
	}
	fmt.Println("ulule admitted", admitted)
	c, err := l.Peek(ctx, "user1")
	if err != nil {
		return err
	}
	fmt.Println("ulule peek", c.Reached, c.Remaining)
	if _, err := l.Reset(ctx, "user1"); err != nil {
		return err
	}
	if c, err = l.Increment(ctx, "user1", 3); err != nil { // a penalty of 3
		return err
	}
	fmt.Println("ulule after reset, penalty 3:", c.Reached, c.Remaining)
	if c, err = l.Peek(ctx, "user1"); err != nil {
		return err
	}
	fmt.Println("ulule peek", c.Reached, c.Remaining)
	return nil
}

// throttledGCRA: GCRA, 5 per 10 s with a burst of 5 (MaxBurst 4 + 1).
func throttledGCRA(ctx context.Context, rdb *redis.Client) error {
	st, err := goredisstore.NewCtx(rdb, "throttled:")
	if err != nil {
		return err
	}
	g, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerDuration(5, 10*time.Second), MaxBurst: 4})
	if err != nil {
		return err
	}
	admitted := 0
	for i := range 7 {
		limited, r, err := g.RateLimitCtx(ctx, "user1", 1)
		if err != nil {
			return err
		}
		if !limited {
			admitted++
		}
		fmt.Printf("throttled hit %d limited=%v remaining=%d\n", i, limited, r.Remaining)
	}
	fmt.Println("throttled admitted", admitted)
	if err := rdb.Del(ctx, "throttled:user1").Err(); err != nil { // its reset: no API, DEL of the key
		return err
	}
	limited, r, err := g.RateLimitCtx(ctx, "user1", 3) // a penalty of 3
	if err != nil {
		return err
	}
	fmt.Println("throttled after reset, quantity 3:", limited, r.Remaining)
	return nil
}
