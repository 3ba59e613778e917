package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// defaults returns a config holding every default, as loadConfig starts.
func defaults(t *testing.T) *config {
	t.Helper()
	c, err := loadConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fields returns c's settings as values, without the bookkeeping, to
// compare two configs.
func fields(c *config) config {
	v := *c
	v.set, v.warnings = nil, nil
	return v
}

// sample is a valid value for s that is not its default.
func sample(s *setting) string {
	switch v := s.value.(type) {
	case addrValue:
		return "127.0.0.1:7"
	case intValue:
		return "4" // a power of two, as --shards needs; 2 is a possible default
	case durationValue:
		return "7s"
	case sizeValue:
		return "3mb"
	case countValue:
		return "9"
	case boolValue:
		if s.def == "true" {
			return "false"
		}
		return "true"
	case choiceValue:
		return v.choices[len(v.choices)-1]
	case stringValue:
		return "/x/" + s.name
	}
	panic(fmt.Sprintf("no sample for %T", s.value))
}

// TestEverySettingHasOneNameEverywhere sets each setting, alone, by its
// flag, by RLSERVER_ plus its name, and by its name in a config file, and
// checks each form reaches the same field, except where a setting is
// documented as command-line only.
func TestEverySettingHasOneNameEverywhere(t *testing.T) {
	t.Parallel()
	base := fields(defaults(t))
	for _, s := range defaults(t).set {
		if s.name == "shards" && s.def == "4" {
			t.Fatal("the sample for --shards is its default here")
		}
		text := sample(s)
		byFlag := defaults(t)
		given, err := parseArgs(byFlag.set, []string{"--" + s.name + "=" + text})
		if err != nil || given[0].s.set(text, source{kind: fromFlag}) != nil {
			t.Fatalf("--%s=%s: %v", s.name, text, err)
		}
		want := fields(byFlag)
		if reflect.DeepEqual(want, base) {
			t.Fatalf("--%s=%s changed no field", s.name, text)
		}

		byEnv := defaults(t)
		if err := applyEnv(byEnv, []string{envName(s.name) + "=" + text}); err != nil {
			t.Fatal(err)
		}
		if got := fields(byEnv); s.from&fromEnv != 0 && !reflect.DeepEqual(got, want) {
			t.Errorf("%s=%s: %+v, want %+v", envName(s.name), text, got, want)
		} else if s.from&fromEnv == 0 && (!reflect.DeepEqual(got, base) || len(byEnv.warnings) != 1) {
			t.Errorf("%s (a command-line-only setting) was read from the environment", envName(s.name))
		}

		path := filepath.Join(t.TempDir(), "rlserver.yaml")
		os.WriteFile(path, []byte(s.name+": "+text+"\n"), 0o644)
		byFile := defaults(t)
		err = applyFile(byFile.set, path)
		switch {
		case s.from&fromFile == 0 && (err == nil || !strings.Contains(err.Error(), "cannot be set in the configuration file")):
			t.Errorf("%s in a config file: %v, want it refused", s.name, err)
		case s.from&fromFile != 0 && (err != nil || !reflect.DeepEqual(fields(byFile), want)):
			t.Errorf("%s: %s in a config file: %v", s.name, text, err)
		}
	}
}

func TestCommandLineWinsOverEnvironmentOverFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rlserver.yaml")
	os.WriteFile(path, []byte("# the file\nmaxclients: 1\ntimeout: 1\nmaxkeys: 1\n"), 0o644)
	env := []string{"RLSERVER_CONFIG=" + path, "RLSERVER_MAXCLIENTS=2", "RLSERVER_TIMEOUT=2"}
	c, err := loadConfig([]string{"--maxclients", "3"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if c.maxClients != 3 || c.idleTimeout != 2*time.Second || c.maxKeys != 1 || c.maxKeysPolicy != "evict" {
		t.Fatalf("maxclients %d (want the flag's 3), timeout %v (the environment's 2s), maxkeys %d (the file's 1), policy %s (the default)",
			c.maxClients, c.idleTimeout, c.maxKeys, c.maxKeysPolicy)
	}
	// --config on the command line wins over RLSERVER_CONFIG too.
	other := filepath.Join(t.TempDir(), "other.yaml")
	os.WriteFile(other, []byte("maxkeys: 5\n"), 0o644)
	if c, err := loadConfig([]string{"--config", other}, env); err != nil || c.maxKeys != 5 {
		t.Fatalf("--config over RLSERVER_CONFIG: maxkeys %v, %v", c, err)
	}
}

// TestEveryDurationTakesBareSeconds: one rule for every duration setting.
func TestEveryDurationTakesBareSeconds(t *testing.T) {
	t.Parallel()
	n := 0
	for _, s := range defaults(t).set {
		if _, ok := s.value.(durationValue); !ok {
			continue
		}
		n++
		for text, want := range map[string]time.Duration{"5": 5 * time.Second, "0": 0, "90s": 90 * time.Second, "1m30s": 90 * time.Second, "250ms": 250 * time.Millisecond} {
			c := defaults(t)
			if err := c.set.lookup(s.name).set(text, source{kind: fromFlag}); err != nil {
				t.Errorf("--%s %s: %v", s.name, text, err)
			}
			if got := *c.set.lookup(s.name).value.(durationValue).p; got != want {
				t.Errorf("--%s %s: %v, want %v", s.name, text, got, want)
			}
		}
		for _, bad := range []string{"soon", "-1", "-1s", "5 s"} {
			if err := defaults(t).set.lookup(s.name).set(bad, source{kind: fromFlag}); err == nil || !strings.Contains(err.Error(), "--"+s.name+" "+bad+":") {
				t.Errorf("--%s %s: error %v, want one naming the flag and the value", s.name, bad, err)
			}
		}
	}
	if n < 4 {
		t.Fatalf("%d duration settings; --timeout, --shutdown-timeout, --snapshot-interval and --client-output-timeout are", n)
	}
}

func TestSizesTakeRedisUnits(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]int64{"100": 100, "1k": 1000, "1kb": 1024, "2mb": 2 << 20, "1GB": 1 << 30, "3m": 3e6} {
		var got int64
		if err := (sizeValue{&got}).Set(text); err != nil || got != want {
			t.Errorf("%s: %d %v, want %d", text, got, err, want)
		}
	}
	for _, bad := range []string{"0", "-1", "1tb", "mb", "1.5mb", "99999999999gb"} {
		var got int64
		if err := (sizeValue{&got}).Set(bad); err == nil {
			t.Errorf("%s accepted as %d", bad, got)
		}
	}
}

func TestConfigFileErrorsNameTheLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct{ file, want string }{
		{"addr: 127.0.0.1:7\nadr: 1\n", "line 2: unknown setting 'adr' (did you mean 'addr'?)"},
		{"maxkeys: 1\nmaxkeys: 2\n", "line 2: 'maxkeys' given twice (first on line 1)"},
		{"rules: [a, b]\n", "line 1: 'rules' takes a single value"},
		{"ping: 127.0.0.1:6380\n", "line 1: 'ping' cannot be set in the configuration file"},
		{"config: other.yaml\n", "line 1: 'config' cannot be set in the configuration file"},
		{"timeout: 1\nsnapshot-interval: soon\n", "line 2: snapshot-interval: soon: want whole seconds"},
		{"- addr\n", "line 1: expected settings as name: value lines"},
		{"addr: 127.0.0.1:7\nmaxkeys: 1\n  timeout: 5\n", "line 3: "},
	}
	for i, tt := range tests {
		path := filepath.Join(dir, fmt.Sprintf("c%d.yaml", i))
		os.WriteFile(path, []byte(tt.file), 0o644)
		_, err := loadConfig([]string{"--config", path}, nil)
		if err == nil || !strings.Contains(err.Error(), "config file "+path+" "+tt.want) && !strings.Contains(err.Error(), "config file "+path+": "+tt.want) {
			t.Errorf("%q: error %v, want %q", tt.file, err, tt.want)
		}
	}
	empty := filepath.Join(dir, "empty.yaml")
	os.WriteFile(empty, []byte("# nothing set\n"), 0o644)
	if _, err := loadConfig([]string{"--config", empty}, nil); err != nil {
		t.Errorf("an empty config file: %v", err)
	}
}

func TestUnknownEnvironmentVariablesAreWarnedAbout(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(nil, []string{"RLSERVER_PASSWORD=x", "RLSERVER_SERVICE_HOST=10.0.0.1", "OTHER=1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"environment variable RLSERVER_PASSWORD is not a setting; ignored",
		"environment variable RLSERVER_SERVICE_HOST is not a setting; ignored",
	}
	if !reflect.DeepEqual(c.warnings, want) {
		t.Fatalf("warnings %q, want %q", c.warnings, want)
	}
	c, _ = loadConfig(nil, []string{"RLSERVER_PING=127.0.0.1:6380"})
	if len(c.warnings) != 1 || !strings.Contains(c.warnings[0], "--ping is taken from the command line only") {
		t.Fatalf("a command-line-only setting: %q", c.warnings)
	}
	c, _ = loadConfig(nil, []string{"RLSERVER_REQUIREPAS=x"})
	if len(c.warnings) != 1 || !strings.Contains(c.warnings[0], "did you mean RLSERVER_REQUIREPASS?") {
		t.Fatalf("a near miss: %q", c.warnings)
	}
}

// TestDocsListEverySettingWithItsDefault: docs/operations.md has a row for
// every setting, and it and README.md show each default as --help does.
func TestDocsListEverySettingWithItsDefault(t *testing.T) {
	t.Parallel()
	row := regexp.MustCompile("(?m)^\\| ((?:`--[a-z-]+[^`]*`(?:, )?)+) *\\| *([^|]*?) *\\|")
	flagName := regexp.MustCompile("`--([a-z-]+)")
	for _, doc := range []string{"../../docs/operations.md", "../../README.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		documented := map[string]string{}
		if n := len(row.FindAllString(string(b), -1)); n < 9 {
			t.Fatalf("%s: found %d setting rows; has the table format changed?", doc, n)
		}
		for _, m := range row.FindAllStringSubmatch(string(b), -1) {
			for _, f := range flagName.FindAllStringSubmatch(m[1], -1) {
				documented[f[1]] = strings.TrimSpace(m[2])
			}
		}
		for _, s := range defaults(t).set {
			col, ok := documented[s.name]
			switch {
			case !ok && doc == "../../docs/operations.md":
				t.Errorf("%s has no row for --%s", doc, s.name)
			case !ok:
			case s.defNote != "" && col != s.defNote:
				t.Errorf("%s: --%s default %q, want %q as --help says", doc, s.name, col, s.defNote)
			case s.defNote == "" && s.def != "" && s.def != "false" && !strings.HasPrefix(col, "`"+s.def+"`"):
				t.Errorf("%s: --%s default %q, want `%s` as --help says", doc, s.name, col, s.def)
			}
			delete(documented, s.name)
		}
		for name := range documented {
			t.Errorf("%s documents --%s, which is no setting", doc, name)
		}
	}
}

// TestHelpShowsEachDefaultOnce checks --help's defaults: once per flag, as
// written in the docs (60s, not 1m0s), and every flag under its group.
func TestHelpShowsEachDefaultOnce(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if code := run(t.Context(), nil, []string{"--help"}, nil, &out, &out); code != 0 {
		t.Fatalf("--help exit %d", code)
	}
	help := out.String()
	set := defaults(t).set
	entries := strings.Split(help, "\n  --")[1:]
	if len(entries) != len(set) {
		t.Fatalf("--help lists %d flags, there are %d settings", len(entries), len(set))
	}
	for i, s := range set {
		e := strings.Join(strings.Fields(entries[i]), " ")
		if !strings.HasPrefix(e, s.name+" ") && e != s.name {
			t.Errorf("flag %d is %q, want --%s", i, e, s.name)
		}
		if n := strings.Count(e, "(default"); n > 1 {
			t.Errorf("--%s shows %d defaults: %s", s.name, n, e)
		}
		if s.def != "" && s.def != "false" && s.defNote == "" && !strings.Contains(e, "(default "+s.def+")") {
			t.Errorf("--%s: %q lacks (default %s)", s.name, e, s.def)
		}
	}
	for _, g := range groups {
		if !strings.Contains(help, "\n"+g+":\n") {
			t.Errorf("--help lacks the group %s", g)
		}
	}
	if strings.Contains(help, "1m0s") || strings.Contains(help, "536870912") {
		t.Error("--help shows a default as Go formats it rather than as written")
	}
}

func TestMaskArgs(t *testing.T) {
	t.Parallel()
	set := defaults(t).set
	got := maskArgs(set, []string{"rlserver", "--requirepass", "p1", "--addr", "x", "-requirepass=p2", "--requirepass-file", "f", "--requirepass"})
	want := []string{"rlserver", "--requirepass", "***", "--addr", "x", "-requirepass=***", "--requirepass-file", "f", "--requirepass"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestPlanShutdown(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		budget, lastSave time.Duration
		saving           bool
		drain, reserve   time.Duration
	}{
		{8 * time.Second, 0, false, 8 * time.Second, 0},
		{8 * time.Second, 0, true, 7 * time.Second, time.Second},
		{8 * time.Second, 300 * time.Millisecond, true, 7 * time.Second, time.Second},
		{8 * time.Second, 2 * time.Second, true, 4 * time.Second, 4 * time.Second},
		{8 * time.Second, 6 * time.Second, true, 0, 8 * time.Second},
		{500 * time.Millisecond, 0, true, 0, 500 * time.Millisecond},
	} {
		drain, reserve := planShutdown(tt.budget, tt.saving, tt.lastSave)
		if drain != tt.drain || reserve != tt.reserve || drain+reserve != tt.budget {
			t.Errorf("%+v: drain %v, reserve %v", tt, drain, reserve)
		}
	}
}

func TestProtectedModeAllowsLoopbackAndPasswords(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--addr", "127.0.0.1:6380"}, {"--addr", "[::1]:6380"}, {"--addr", "localhost:6380"},
		{"--addr", "0.0.0.0:6380", "--requirepass", "secret"},
		{"--addr", "0.0.0.0:6380", "--protected-mode=false"},
		{"--metrics-addr", "0.0.0.0:9121", "--pprof-addr", ":6060", "--requirepass", "secret"},
		{"--metrics-addr", "127.0.0.1:9121", "--pprof-addr", "localhost:6060"},
	} {
		if _, err := loadConfig(args, nil); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}
