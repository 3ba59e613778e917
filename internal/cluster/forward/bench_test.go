package forward

import (
	"bufio"
	"context"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

var benchArgs = [][]byte{[]byte("RL.ALLOW"), []byte("user:42"), []byte("per_user")}

// fixedServer answers every request of exactly reqLen bytes with reply,
// allocating nothing per request, so that a benchmark's allocation count
// is the client's alone.
func fixedServer(b *testing.B, reqLen int, reply []byte) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, reqLen)
				for {
					if _, err := io.ReadFull(c, buf); err != nil {
						return
					}
					if _, err := c.Write(reply); err != nil {
						return
					}
				}
			}()
		}
	}()
	b.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// latencies records round trips and reports their p50 and p99.
type latencies []time.Duration

func (l *latencies) add(d time.Duration) {
	if len(*l) < cap(*l) {
		*l = append(*l, d)
	}
}

func (l latencies) report(b *testing.B) {
	slices.Sort(l)
	if len(l) > 0 {
		b.ReportMetric(float64(l[len(l)/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(l[len(l)*99/100].Nanoseconds())/1e3, "p99-µs")
	}
}

// BenchmarkDo measures one forwarded request's round trip over loopback
// (Pool.Do), beside the same bytes on a plain connection (Baseline): the
// difference is what the pool adds to the hop itself.
func BenchmarkDo(b *testing.B) {
	req := appendCommand(nil, benchArgs)
	reply := []byte(":1\r\n")
	b.Run("Pool", func(b *testing.B) {
		addr := fixedServer(b, len(req), reply)
		p := New(Options{})
		defer p.Close()
		ctx := context.Background()
		dst := make([]byte, 0, 64)
		if _, err := p.Do(ctx, addr, 2, benchArgs, dst); err != nil { // dial outside the loop
			b.Fatal(err)
		}
		lat := make(latencies, 0, 1<<16)
		b.ReportAllocs()
		for b.Loop() {
			t0 := time.Now()
			var err error
			if dst, err = p.Do(ctx, addr, 2, benchArgs, dst[:0]); err != nil {
				b.Fatal(err)
			}
			lat.add(time.Since(t0))
		}
		lat.report(b)
	})
	b.Run("Baseline", func(b *testing.B) {
		addr := fixedServer(b, len(req), reply)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		r := bufio.NewReader(c)
		dst := make([]byte, 0, 64)
		lat := make(latencies, 0, 1<<16)
		b.ReportAllocs()
		for b.Loop() {
			t0 := time.Now()
			if _, err := c.Write(req); err != nil {
				b.Fatal(err)
			}
			if dst, err = ReadReply(r, dst[:0], 1<<20); err != nil {
				b.Fatal(err)
			}
			lat.add(time.Since(t0))
		}
		lat.report(b)
	})
}
