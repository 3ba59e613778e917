// Command httpapi is a small HTTP API protected by rlserver, the program
// docs/gateway.md walks through: order submissions limited per user, item
// reads per API key (from a local budget), everything else per client
// address, health checks unlimited.
//
//	rlserver --rules examples/httpapi/rules.yaml &
//	go run ./examples/httpapi -limits examples/httpapi/limits.yaml
//	curl -i -X POST -H 'X-User: alice' localhost:8080/orders
//
// SIGHUP reloads the limits file. The X-User header stands in for real
// authentication.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"

	"github.com/rlserver/rlserver/client/httplimit"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to serve the API on")
	server := flag.String("rlserver", "127.0.0.1:6380", "rlserver's address")
	limits := flag.String("limits", "limits.yaml", "the limits file")
	flag.Parse()

	rdb := redis.NewClient(&redis.Options{Addr: *server, ContextTimeoutEnabled: true})
	defer rdb.Close()
	handler, lim, err := protect(api(), rdb, *limits, prometheus.DefaultRegisterer)
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close(context.Background())
	go reloadOnHUP(lim, *limits)
	http.Handle("/", handler)
	http.Handle("GET /metrics", promhttp.Handler())
	log.Printf("serving on %s, limited by rlserver at %s", *addr, *server)
	log.Fatal(http.ListenAndServe(*addr, nil))
}

// protect puts the limiter in front of the API, and the stand-in
// authentication in front of both: the part docs/gateway.md shows.
func protect(api http.Handler, rdb redis.UniversalClient, limits string, reg prometheus.Registerer) (http.Handler, *httplimit.Limiter, error) {
	cfg, err := httplimit.Load(limits)
	if err != nil {
		return nil, nil, err
	}
	lim, err := httplimit.New(rdb, cfg, httplimit.WithRegistry(reg))
	if err != nil {
		return nil, nil, err
	}
	return authenticate(lim.Wrap(api)), lim, nil
}

// api is the application: three endpoints.
func api() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order accepted for %s\n", httplimit.User(r.Context()))
	})
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "item %s\n", r.PathValue("id"))
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	return mux
}

// authenticate stands in for an authentication stage: it takes the user
// from X-User (a real one checks credentials) and hands it on to the
// limiter's user scope.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user := r.Header.Get("X-User"); user != "" {
			r = r.WithContext(httplimit.WithUser(r.Context(), user))
		}
		next.ServeHTTP(w, r)
	})
}

// reloadOnHUP re-reads the limits file on SIGHUP; a bad file is logged and
// the running limits stay.
func reloadOnHUP(lim *httplimit.Limiter, path string) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, unix.SIGHUP)
	for range hup {
		cfg, err := httplimit.Load(path)
		if err == nil {
			err = lim.Reload(cfg)
		}
		if err != nil {
			log.Printf("limits not reloaded: %v", err)
			continue
		}
		log.Printf("limits reloaded from %s", path)
	}
}
