package snapshot

import (
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/algorithms"
	"github.com/rlserver/rlserver/internal/keyspace"
	"github.com/rlserver/rlserver/internal/rules"
)

// BenchmarkSnapshot1M loads a million token-bucket keys, then takes
// snapshots while one caller keeps deciding on random keys, and reports how
// long a snapshot takes to write and how long decisions waited meanwhile:
//
//	go test -run XXX -bench Snapshot1M -benchtime 3x ./internal/snapshot
//
// Targets: write <= 1 s; no decision delayed more than 10 ms.
func BenchmarkSnapshot1M(b *testing.B) {
	const n = 1_000_000
	st, _ := rules.NewStore([]rules.Def{def(b, "tb", "token_bucket", "1000", "1h", "")})
	clk := &fakeClock{}
	clk.ns.Store(t0)
	keys := keyspace.New(keyspace.Config{Shards: keyspace.DefaultShards(), Clock: clk.now, Rules: st})
	defer keys.Stop()
	rule := st.Load().Get([]byte("tb"))
	items := make([]keyspace.Item, n)
	for i := range items {
		items[i] = keyspace.Item{Rule: rule, Key: fmt.Appendf(nil, "tb:%012d", i), State: algorithms.State{Stamp: t0, Count: 5}}
	}
	if err := keys.Import(items); err != nil {
		b.Fatal(err)
	}
	items = nil
	w := &world{st, keys, clk}
	m := w.manager(b, b.TempDir())

	var stop atomic.Bool
	latencies := make(chan []time.Duration)
	startLoad := func() {
		go func() {
			d := keys.NewDispatcher()
			var lat []time.Duration
			key := make([]byte, 0, 32)
			for i := 0; !stop.Load(); i++ {
				key = fmt.Appendf(key[:0], "tb:%012d", (i*7919)%n)
				start := time.Now()
				d.Add(keyspace.Op{Kind: keyspace.Allow, Rule: rule, Key: key, Cost: 1})
				d.Run()
				d.Reset()
				lat = append(lat, time.Since(start))
			}
			latencies <- lat
		}()
	}
	// The same load with no snapshot running, for comparison: the machine's
	// own scheduling and GC noise.
	idleMax := func() time.Duration {
		d := keys.NewDispatcher()
		var worst time.Duration
		key := make([]byte, 0, 32)
		for i, until := 0, time.Now().Add(600*time.Millisecond); time.Now().Before(until); i++ {
			key = fmt.Appendf(key[:0], "tb:%012d", (i*104729)%n)
			start := time.Now()
			d.Add(keyspace.Op{Kind: keyspace.Allow, Rule: rule, Key: key, Cost: 1})
			d.Run()
			d.Reset()
			worst = max(worst, time.Since(start))
		}
		return worst
	}
	baseline := idleMax()
	startLoad()
	var saves []time.Duration
	var bytes int64
	for b.Loop() {
		start := time.Now()
		if err := m.Save(); err != nil {
			b.Fatal(err)
		}
		saves = append(saves, time.Since(start))
		bytes = m.Status().LastBytes
	}
	stop.Store(true)
	lat := <-latencies
	slices.Sort(lat)
	slices.Sort(saves)
	b.ReportMetric(float64(saves[len(saves)/2].Milliseconds()), "save-ms(median)")
	b.ReportMetric(float64(bytes)/n, "bytes/key")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-decision-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-decision-µs")
	b.ReportMetric(float64(len(lat)), "decisions")
	b.ReportMetric(float64(baseline.Microseconds()), "max-decision-µs(no-snapshot)")
}

// BenchmarkLoad1M writes a snapshot of a million token-bucket keys, then
// loads it into a new keyspace as the server does at start (Open, which
// checks the whole file, then Restore), and reports the load time beside
// the time the same snapshot took to save (with the collector off during
// the load, as cmd/rlserver loads):
//
//	go test -run XXX -bench Load1M -benchtime 3x ./internal/snapshot
//
// Target: load <= 2 × save.
func BenchmarkLoad1M(b *testing.B) {
	const n = 1_000_000
	st, _ := rules.NewStore([]rules.Def{def(b, "tb", "token_bucket", "1000", "1h", "")})
	clk := &fakeClock{}
	clk.ns.Store(t0)
	keys := keyspace.New(keyspace.Config{Shards: keyspace.DefaultShards(), Clock: clk.now, Rules: st})
	rule := st.Load().Get([]byte("tb"))
	items := make([]keyspace.Item, n)
	for i := range items {
		items[i] = keyspace.Item{Rule: rule, Key: fmt.Appendf(nil, "tb:%012d", i), State: algorithms.State{Stamp: t0, Count: 5}}
	}
	if err := keys.Import(items); err != nil {
		b.Fatal(err)
	}
	items = nil
	dir := b.TempDir()
	m := (&world{st, keys, clk}).manager(b, dir)
	start := time.Now()
	if err := m.Save(); err != nil {
		b.Fatal(err)
	}
	save := time.Since(start)
	keys.Stop()
	runtime.GC()

	var loads []time.Duration
	for b.Loop() {
		b.StopTimer()
		dst := keyspace.New(keyspace.Config{Shards: keyspace.DefaultShards(), Clock: clk.now, Rules: st})
		runtime.GC()
		b.StartTimer()
		start := time.Now()
		f, err := Open(filepath.Join(dir, FileName))
		if err != nil {
			b.Fatal(err)
		}
		gc := debug.SetGCPercent(-1) // as cmd/rlserver loads
		rs, err := f.Restore(st, dst, clk.now())
		debug.SetGCPercent(gc)
		f.Close()
		if err != nil || rs.Loaded != n {
			b.Fatalf("loaded %d: %v", rs.Loaded, err)
		}
		loads = append(loads, time.Since(start))
		b.StopTimer()
		dst.Stop()
		b.StartTimer()
	}
	slices.Sort(loads)
	b.ReportMetric(float64(save.Milliseconds()), "save-ms")
	b.ReportMetric(float64(loads[len(loads)/2].Milliseconds()), "load-ms(median)")
}
