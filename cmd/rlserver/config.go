package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/rlserver/rlserver/internal/shards"
)

// config is every setting rlserver takes. Flags are parsed here and nowhere
// else.
type config struct {
	addr             string
	rulesPath        string
	shards           int
	logLevel         string
	version          bool
	dataDir          string        // "" disables persistence
	snapshotInterval time.Duration // 0: only on SAVE, BGSAVE and shutdown
	maxKeys          int           // 0: unbounded
	maxKeysPolicy    string        // "evict" or "reject"
}

func parseConfig(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("rlserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:6380", "TCP address to serve RESP on")
	fs.StringVar(&c.rulesPath, "rules", "", "YAML rules file (default: the built-in rules listed in README.md)")
	fs.IntVar(&c.shards, "shards", shards.DefaultShards(), "number of shards, a power of two (default: GOMAXPROCS rounded up to a power of two)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	fs.StringVar(&c.dataDir, "data-dir", "./data", "directory for the snapshot file (empty: no persistence)")
	fs.DurationVar(&c.snapshotInterval, "snapshot-interval", 60*time.Second, "how often to snapshot (0: only on SAVE, BGSAVE and shutdown)")
	fs.IntVar(&c.maxKeys, "maxkeys", 0, "most keys to hold (0: unbounded)")
	fs.StringVar(&c.maxKeysPolicy, "maxkeys-policy", "evict", "when --maxkeys is reached: evict (drop the key whose natural eviction is soonest) or reject (refuse new keys)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	if c.shards < 1 || c.shards > 1<<16 || c.shards&(c.shards-1) != 0 {
		return c, fmt.Errorf("--shards %d: must be a power of two from 1 to 65536", c.shards)
	}
	if c.snapshotInterval < 0 {
		return c, fmt.Errorf("--snapshot-interval %v: must not be negative", c.snapshotInterval)
	}
	if c.maxKeys < 0 {
		return c, fmt.Errorf("--maxkeys %d: must not be negative", c.maxKeys)
	}
	if c.maxKeysPolicy != "evict" && c.maxKeysPolicy != "reject" {
		return c, fmt.Errorf("--maxkeys-policy %q: must be evict or reject", c.maxKeysPolicy)
	}
	return c, nil
}
