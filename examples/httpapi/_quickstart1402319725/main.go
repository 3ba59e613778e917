package main

import (
	"log"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/client/httplimit"
)

func main() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6380", ContextTimeoutEnabled: true})
	cfg, err := httplimit.Load("limits.yaml")
	if err != nil {
		log.Fatal(err)
	}
	lim, err := httplimit.New(rdb, cfg)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) })
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("item")) })
	log.Fatal(http.ListenAndServe(":8080", lim.Wrap(mux)))
}
