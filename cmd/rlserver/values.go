package main

import (
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A value parses one setting's text into its field of config. Every
// setting of a kind parses the same way, wherever its text comes from (the
// command line, the environment or the configuration file); errors say
// what a valid value looks like and never repeat the text (the caller
// names the setting and echoes the text as given).
type value interface {
	Set(text string) error
}

// boolFlag marks values that, on the command line, take no separate word:
// --protected-mode means true, --protected-mode=false false.
type boolFlag interface{ isBool() }

type stringValue struct{ p *string }

func (v stringValue) Set(s string) error { *v.p = s; return nil }

type boolValue struct{ p *bool }

func (v boolValue) isBool() {}
func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	*v.p = b
	return nil
}

// intValue is a decimal integer; ranges are checked by config.validate,
// which knows what each setting allows.
type intValue struct{ p *int }

func (v intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("want a whole number")
	}
	*v.p = n
	return nil
}

// countValue is a positive decimal integer.
type countValue struct{ p *int64 }

func (v countValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return errors.New("want a whole number of at least 1")
	}
	*v.p = n
	return nil
}

// durationValue is a non-negative duration: whole seconds, as Redis takes
// its timeouts (300), or a Go duration (5m, 1m30s, 500ms). One rule for
// every duration setting.
type durationValue struct{ p *time.Duration }

func (v durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*v.p = d
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > math.MaxInt64/int64(time.Second) {
			return 0, errors.New("want whole seconds from 0 (60) or a duration (1m, 90s, 500ms)")
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("want whole seconds (60) or a duration (1m, 90s, 500ms)")
	}
	if d < 0 {
		return 0, errors.New("must not be negative")
	}
	return d, nil
}

// sizeValue is a positive number of bytes, with Redis's optional units:
// k, m, g are powers of 1000 and kb, mb, gb powers of 1024 (any case).
type sizeValue struct{ p *int64 }

var sizeUnits = []struct {
	suffix string
	bytes  int64
}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"b", 1}}

func (v sizeValue) Set(s string) error {
	num, mult := strings.ToLower(s), int64(1)
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = n, u.bytes
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 || n > math.MaxInt64/mult {
		return errors.New("want a size in bytes of at least 1, optionally with a unit: 512mb, 1gb, 64kb")
	}
	*v.p = n * mult
	return nil
}

// choiceValue is one of a fixed list of words.
type choiceValue struct {
	p       *string
	choices []string
}

func (v choiceValue) Set(s string) error {
	if !slices.Contains(v.choices, s) {
		return fmt.Errorf("must be one of %s", strings.Join(v.choices, ", "))
	}
	*v.p = s
	return nil
}

// addrValue is a TCP address, HOST:PORT (an empty host listens on every
// interface); optional ones may be empty (off).
type addrValue struct {
	p        *string
	optional bool
}

func (v addrValue) Set(s string) error {
	if s == "" && v.optional {
		*v.p = ""
		return nil
	}
	if err := checkAddr(s); err != nil {
		return err
	}
	*v.p = s
	return nil
}

// checkAddr reports what is wrong with a HOST:PORT address, suggesting the
// loopback form when only a port was given.
func checkAddr(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		if _, nerr := strconv.ParseUint(s, 10, 16); nerr == nil {
			return fmt.Errorf("want HOST:PORT; a port alone has no host: 127.0.0.1:%s serves this host only, 0.0.0.0:%s every interface", s, s)
		}
		return errors.New("want HOST:PORT, for example 127.0.0.1:6380")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q: want a number from 0 to 65535", port)
	}
	return nil
}
