package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/rlserver/rlserver/internal/shards"
)

// config is every setting rlserver takes. Flags are parsed here and nowhere
// else.
type config struct {
	addr      string
	rulesPath string
	shards    int
	logLevel  string
	version   bool
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
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	if c.shards < 1 || c.shards > 1<<16 || c.shards&(c.shards-1) != 0 {
		return c, fmt.Errorf("--shards %d: must be a power of two from 1 to 65536", c.shards)
	}
	return c, nil
}
