package main

import (
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
)

// pprofHandler serves Go's profiler on its own mux (never on the metrics
// endpoint). /debug/pprof/cmdline shows the command line with secret
// settings masked.
func pprofHandler(set settings) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte(strings.Join(maskArgs(set, os.Args), "\x00")))
	})
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// maskArgs returns argv (program name first) with the value of every
// secret setting replaced by ***, in both forms: --requirepass=x and
// --requirepass x.
func maskArgs(set settings, argv []string) []string {
	out := make([]string, len(argv))
	copy(out, argv)
	for i := 1; i < len(out); i++ {
		name := strings.TrimLeft(out[i], "-")
		if name == out[i] || out[i] == "--" {
			continue
		}
		name, _, hasValue := strings.Cut(name, "=")
		s := set.lookup(name)
		if s == nil || !s.secret {
			continue
		}
		if hasValue {
			out[i] = out[i][:strings.Index(out[i], "=")+1] + "***"
		} else if i+1 < len(out) {
			i++
			out[i] = "***"
		}
	}
	return out
}
