package main

import "testing"

// A redis-benchmark 7.0 report (INCR, 2000 requests), progress line included.
const sampleReport = "INCR x: rps=0.0 (overall: -nan) avg_msec=-nan (overall: -nan)\r                    \r" + `====== INCR x ======
  2000 requests completed in 0.06 seconds
  5 parallel clients

Latency by percentile distribution:
0.000% <= 0.039 milliseconds (cumulative count 7)
50.000% <= 0.087 milliseconds (cumulative count 1012)
99.805% <= 0.375 milliseconds (cumulative count 1997)
99.902% <= 0.423 milliseconds (cumulative count 1999)
100.000% <= 2.671 milliseconds (cumulative count 2000)

Cumulative distribution of latencies:
99.900% <= 0.407 milliseconds (cumulative count 1998)
100.000% <= 3.103 milliseconds (cumulative count 2000)

Summary:
  throughput summary: 33333.34 requests per second
  latency summary (msec):
          avg       min       p50       p95       p99       max
        0.094     0.032     0.087     0.159     0.207     2.671
`

func TestParseLatencies(t *testing.T) {
	r, err := parseLatencies(sampleReport)
	if err != nil {
		t.Fatal(err)
	}
	want := tailResult{rps: 33333.34, p50: 0.087, p99: 0.207, p999: 0.423}
	if r != want {
		t.Fatalf("got %+v, want %+v", r, want)
	}
	if _, err := parseLatencies("garbage"); err == nil {
		t.Fatal("garbage parsed")
	}
}
