package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/rlserver/rlserver/internal/cluster"
)

// clusterEnvoyConfig: a per-value counter (token buckets over a day, so the
// seconds a test takes refill nothing) and an all_or_nothing domain whose
// name is hash-tagged, as cluster mode requires.
const clusterEnvoyConfig = `
domain: cl
descriptors:
  - key: k
    rate_limit: {algorithm: token_bucket, requests_per_unit: 20, window: 24h}
`

const clusterEnvoyGroupConfig = `
domain: "{grp}"
all_or_nothing: true
descriptors:
  - key: a
    rate_limit: {algorithm: token_bucket, requests_per_unit: 5, window: 24h}
  - key: b
    rate_limit: {algorithm: token_bucket, requests_per_unit: 3, window: 24h}
`

// startEnvoyCluster starts three nodes serving the Envoy configuration
// above, and returns the cluster and each node's gRPC client.
func startEnvoyCluster(t *testing.T) (*testCluster, []rlsv3.RateLimitServiceClient) {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "cl.yaml"), []byte(clusterEnvoyConfig), 0o644)
	os.WriteFile(filepath.Join(dir, "grp.yaml"), []byte(clusterEnvoyGroupConfig), 0o644)
	tc := startTestCluster(t, 3, "--grpc-addr", "127.0.0.1:0", "--envoy-config", dir)
	var clients []rlsv3.RateLimitServiceClient
	for _, p := range tc.nodes {
		clients = append(clients, rlsv3.NewRateLimitServiceClient(dialGRPC(t, grpcAddrIn(t, p.out.String()))))
	}
	return tc, clients
}

// callEnvoyCluster runs callers goroutines, spread over the nodes' gRPC
// clients, each making each calls in domain cl on the descriptors mk makes
// of values (in turn), and returns how many calls each value had admitted.
// A failed call fails the test.
func callEnvoyCluster(t *testing.T, clients []rlsv3.RateLimitServiceClient, values []string, callers, each int, mk func(v string) *rlv3.RateLimitDescriptor) map[string]int {
	t.Helper()
	var (
		mu       sync.Mutex
		admitted = map[string]int{}
		failures []error
		wg       sync.WaitGroup
	)
	for g := range callers {
		wg.Go(func() {
			c := clients[g%len(clients)]
			for i := range each {
				v := values[(g+i)%len(values)]
				ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
				r, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "cl", Descriptors: []*rlv3.RateLimitDescriptor{mk(v)}})
				cancel()
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				} else if r.GetOverallCode() == rlsv3.RateLimitResponse_OK {
					admitted[v]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d calls failed, the first: %v", len(failures), failures[0])
	}
	return admitted
}

// TestClusterEnvoyLimitOverrides: a descriptor's own limit (a rule each
// node makes on demand, named after its numbers) is decided on the node
// owning the counter key too: the owner makes the same rule from its name.
// 64 callers over the three nodes admit exactly the override's limit per
// key; decided where the request came, each node would admit it once.
func TestClusterEnvoyLimitOverrides(t *testing.T) {
	tc, clients := startEnvoyCluster(t)
	const limit = 10
	values := make([]string, 9)
	owners := map[int]bool{}
	for i := range values {
		values[i] = fmt.Sprint("o", i)
		owners[tc.owner("cl|k="+values[i])] = true
	}
	if len(owners) != 3 {
		t.Fatalf("the keys are owned by %d nodes; want all 3", len(owners))
	}
	admitted := callEnvoyCluster(t, clients, values, 64, 6, func(v string) *rlv3.RateLimitDescriptor {
		d := desc("k", v)
		d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: limit, Unit: typev3.RateLimitUnit_DAY}
		return d
	})
	for _, v := range values {
		if admitted[v] != limit {
			t.Errorf("descriptor k=%s with its own limit %d: %d admitted, want exactly %d", v, limit, admitted[v], limit)
		}
	}
}

// TestClusterEnvoyForwards: in cluster mode, each node's gRPC front end
// decides a descriptor on the node owning its counter key's slot. 64
// callers spread over the three nodes' gRPC ports, on keys owned by all
// three, admit exactly the limit per key, and each counter is on its owner
// (RL.PEEK there), nowhere else.
func TestClusterEnvoyForwards(t *testing.T) {
	tc, clients := startEnvoyCluster(t)
	const (
		keys    = 9
		limit   = 20
		callers = 64
		each    = 8 // 512 calls for 9*20 = 180 admissions
	)
	values := make([]string, keys)
	owners := map[int]bool{}
	for i := range values {
		values[i] = fmt.Sprint("v", i)
		owners[tc.owner("cl|k="+values[i])] = true
	}
	if len(owners) != 3 {
		t.Fatalf("the keys are owned by %d nodes; want all 3", len(owners))
	}
	admitted := callEnvoyCluster(t, clients, values, callers, each, func(v string) *rlv3.RateLimitDescriptor { return desc("k", v) })
	for _, v := range values {
		if admitted[v] != limit {
			t.Errorf("descriptor k=%s: %d admitted, want exactly %d", v, admitted[v], limit)
		}
	}
	rule := managedRule(t, tc.nodes[0].client(t), "cl", "k")
	ctx := context.Background()
	for _, v := range values {
		key := "cl|k=" + v
		o := tc.owner(key)
		for i := range tc.nodes {
			got, err := tc.peer(t, i).Do(ctx, "RL.PEEK", key, rule).Slice()
			switch {
			case i == o && (err != nil || got[2].(int64) != 0):
				t.Errorf("%s: its owner, node %d, answers %v %v; want remaining 0", key, i, got, err)
			case i != o && (err == nil || !strings.HasPrefix(err.Error(), "MOVED ")):
				t.Errorf("%s: node %d (not its owner) answers %v %v; want MOVED", key, i, got, err)
			}
			// CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT see the counter
			// on its owner alone.
			slot := int(cluster.KeySlotString(key))
			n, err := tc.nodes[i].client(t).ClusterCountKeysInSlot(ctx, slot).Result()
			names, err2 := tc.nodes[i].client(t).ClusterGetKeysInSlot(ctx, slot, 100).Result()
			switch {
			case err != nil || err2 != nil:
				t.Errorf("node %d, slot %d: %v %v", i, slot, err, err2)
			case i == o && (n < 1 || !slices.Contains(names, key)):
				t.Errorf("%s: its owner, node %d, counts %d keys in slot %d: %q", key, i, n, slot, names)
			case i != o && (n != 0 || len(names) != 0):
				t.Errorf("%s: node %d (not its owner) counts %d keys in slot %d: %q", key, i, n, slot, names)
			}
		}
	}

	// An all_or_nothing group, sent to a node that does not own its
	// slot, is decided as one on the owner: b's limit (3) stops both.
	slotOwner := tc.owner("{grp}")
	other := (slotOwner + 1) % 3
	group := func() string {
		return statuses(ask(t, clients[other], "{grp}", desc("a", "x"), desc("b", "y")))
	}
	for range 3 {
		if got := group(); !strings.HasPrefix(got, "OK") || strings.Contains(got, "OVER") {
			t.Fatalf("group within the limits: %s", got)
		}
	}
	if got := group(); got != "OK 2, OVER" {
		t.Fatalf("group over b's limit: %s; want a uncharged (OK 2) and b OVER", got)
	}
	ruleA := managedRule(t, tc.nodes[0].client(t), "_grp_", "a") // braces read _ in rule names
	got, err := tc.peer(t, slotOwner).Do(ctx, "RL.PEEK", "{grp}|a=x", ruleA).Slice()
	if err != nil || got[2].(int64) != 2 {
		t.Fatalf("a's counter on the owner: %v %v; want remaining 2", got, err)
	}
}

// TestClusterEnvoyOwnerDown: a descriptor whose owner is down is answered
// UNAVAILABLE, naming the owner, within the forwarding timeouts (Envoy
// then applies its failure_mode_deny); descriptors owned elsewhere are
// still decided.
func TestClusterEnvoyOwnerDown(t *testing.T) {
	tc, clients := startEnvoyCluster(t)
	var dead, alive string
	for i := 0; dead == "" || alive == ""; i++ {
		v := fmt.Sprint("d", i)
		switch tc.owner("cl|k=" + v) {
		case 2:
			dead = v
		case 1:
			alive = v
		}
	}
	tc.nodes[2].cmd.Process.Kill()
	<-tc.nodes[2].exited
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	start := time.Now()
	_, err := clients[0].ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "cl", Descriptors: []*rlv3.RateLimitDescriptor{desc("k", dead)}})
	took := time.Since(start)
	if st, _ := grpcstatus.FromError(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "CLUSTERDOWN The owner of slot") {
		t.Fatalf("a descriptor whose owner is down: %v; want UNAVAILABLE naming the owner", err)
	}
	if took > 10*time.Second {
		t.Errorf("the refusal took %v", took)
	}
	if got := statuses(ask(t, clients[0], "cl", desc("k", alive))); got != "OK 19" {
		t.Fatalf("a descriptor owned by a live node: %s", got)
	}
}

// TestClusterEnvoyRefusesUntaggedGroups: an all_or_nothing domain whose
// name has no hash tag fails the start in cluster mode, saying why.
func TestClusterEnvoyRefusesUntaggedGroups(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "g.yaml")
	os.WriteFile(cfg, []byte("domain: grp\nall_or_nothing: true\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, requests_per_unit: 5}\n"), 0o644)
	var out bytes.Buffer
	// Bounded: a node that starts anyway serves until ctx ends, and exits 0.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	code := run(ctx, nil, []string{"--addr", "127.0.0.1:0", "--data-dir", "", "--cluster", "on",
		"--grpc-addr", "127.0.0.1:0", "--envoy-config", cfg}, nil, &out, &out)
	if code != exitFail || !strings.Contains(out.String(), "domain 'grp': all_or_nothing in cluster mode needs every counter of the domain in one slot") {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
}

// TestClusterEnvoySlotMove: gRPC callers on all three nodes keep deciding
// descriptors whose slots move from node 0 to node 1 meanwhile: every
// call is answered, each descriptor admits exactly its limit, and its
// counter ends on the new owner.
func TestClusterEnvoySlotMove(t *testing.T) {
	tc, clients := startEnvoyCluster(t)
	const (
		callers = 32
		nkeys   = 8
		limit   = 20
		each    = 12 // 32*12 = 384 calls for 8*20 = 160 admissions
	)
	var values []string
	for i := 0; len(values) < nkeys; i++ {
		if v := fmt.Sprint("m", i); cluster.KeySlotString("cl|k="+v) <= 2730 {
			values = append(values, v)
		}
	}
	var (
		mu       sync.Mutex
		admitted = map[string]int{}
		failures []error
		sent     int
		third    = make(chan struct{})
	)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := range each {
				v := values[(g+i)%nkeys]
				ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
				r, err := clients[(g+i)%3].ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "cl", Descriptors: []*rlv3.RateLimitDescriptor{desc("k", v)}})
				cancel()
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				} else if r.GetOverallCode() == rlsv3.RateLimitResponse_OK {
					admitted[v]++
				}
				if sent++; sent == callers*each/3 {
					close(third)
				}
				mu.Unlock()
			}
		})
	}
	// Node 0 gives slots 0-2730 to node 1, pushed new owner first.
	<-third
	n0, n1, n2 := *tc.m.Node(0), *tc.m.Node(1), *tc.m.Node(2)
	n0.Slots = []cluster.Range{{Start: 2731, End: 5460}}
	n1.Slots = []cluster.Range{{Start: 0, End: 2730}, {Start: 5461, End: 10922}}
	m2, err := cluster.NewMap(2, []cluster.Node{n0, n1, n2})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2, 0} {
		if err := pushMap(t, tc.nodes[i].client(t), m2); err != nil {
			t.Fatalf("push to node %d: %v", i, err)
		}
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d calls failed, the first: %v", len(failures), failures[0])
	}
	rule := managedRule(t, tc.nodes[0].client(t), "cl", "k")
	for _, v := range values {
		if admitted[v] != limit {
			t.Errorf("descriptor k=%s: %d admitted, want exactly %d", v, admitted[v], limit)
		}
		got, err := tc.peer(t, 1).Do(context.Background(), "RL.PEEK", "cl|k="+v, rule).Slice()
		if err != nil || got[2] != int64(0) {
			t.Errorf("cl|k=%s on its new owner: %v %v; want its spent budget", v, got, err)
		}
	}
}
