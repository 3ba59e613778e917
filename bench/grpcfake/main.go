// Command grpcfake serves the Envoy rate limit service over the in-memory
// limiter of internal/envoy/envoytest (one mutex, no shards, no RESP): the
// front end's own cost, to compare with rlserver's --grpc-addr and with
// envoyproxy/ratelimit under bench/grpcload.
//
//	go run ./bench/grpcfake -addr 127.0.0.1:18090 -config bench/envoy.yaml
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rlserver/rlserver/internal/envoy"
	"github.com/rlserver/rlserver/internal/envoy/envoytest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18090", "gRPC listen address")
	path := flag.String("config", "bench/envoy.yaml", "Envoy configuration (a file or a directory)")
	server := flag.String("server", "fast", "the HTTP/2 server: fast or grpc-go (rlserver's --grpc-server)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc, err := envoy.NewService(envoy.Options{Limiter: envoytest.NewLimiter(nil), Logger: log})
	if err != nil {
		fail(err)
	}
	if err := envoy.NewLoader(*path, svc, envoy.LoaderOptions{}).Reload(); err != nil {
		fail(err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fail(err)
	}
	srv := envoy.Start(ln, svc, envoy.ServerOptions{Transport: envoy.Transport(*server)})
	fmt.Fprintln(os.Stderr, "grpcfake: serving on", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case <-ctx.Done():
	case <-srv.Done():
		fail(srv.Err())
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "grpcfake:", err)
	os.Exit(1)
}
