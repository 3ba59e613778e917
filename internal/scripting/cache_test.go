package scripting

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestCacheLoadAndGet(t *testing.T) {
	c := NewCache(CacheLimits{})
	src := []byte("return redis.call('get', KEYS[1])")
	s, err := c.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum(src)
	if s.SHA() != hex.EncodeToString(sum[:]) || s.Source() != string(src) {
		t.Fatalf("SHA %s source %q", s.SHA(), s.Source())
	}
	if again, _ := c.Load(src); again != s || c.Len() != 1 || c.Bytes() != len(src) {
		t.Fatal("loading the same source twice cached it twice")
	}
	for _, sha := range []string{s.SHA(), strings.ToUpper(s.SHA())} {
		if c.Get([]byte(sha)) != s {
			t.Errorf("Get(%s) missed", sha)
		}
	}
	for _, sha := range []string{"", "abc", s.SHA()[:39], s.SHA() + "0", strings.Repeat("g", 40), strings.Repeat("0", 40)} {
		if c.Get([]byte(sha)) != nil {
			t.Errorf("Get(%q) found a script", sha)
		}
	}
	if got := c.Exists([]byte(s.SHA()), []byte("nope"), []byte(strings.ToUpper(s.SHA()))); !slices.Equal(got, []bool{true, false, true}) {
		t.Errorf("Exists: %v", got)
	}
	c.Flush()
	if c.Get([]byte(s.SHA())) != nil || c.Len() != 0 || c.Bytes() != 0 {
		t.Fatal("Flush kept the script")
	}
}

func TestCacheCompileErrors(t *testing.T) {
	c := NewCache(CacheLimits{MaxScriptBytes: 100, MaxBytes: 1000})
	for src, want := range map[string]string{
		"return 1 +":                  "ERR Error compiling script (new function): user_script:1: ",
		"#!notlua\nreturn 1":          "ERR Unexpected engine in script shebang: #!notlua",
		strings.Repeat("-- x\n", 30):  "ERR Error compiling script (new function): user_script:1: the script is 150 bytes, more than the 100",
		"local x = 1\nlocal y = \n\n": "ERR Error compiling script (new function): user_script:4: ",
		"for i = 1 do end":            "ERR Error compiling script (new function): user_script:1: ",
	} {
		_, err := c.Load([]byte(src))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: %v, want prefix %q", src, err, want)
		}
	}
	if c.Len() != 0 {
		t.Error("a script that failed to compile was cached")
	}
}

// TestCacheEvictsLeastRecentlyUsed: at its bounds the cache forgets the
// script used longest ago; scripts in use survive.
func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := NewCache(CacheLimits{MaxScripts: 3, MaxBytes: 1 << 20})
	load := func(i int) *Script {
		s, err := c.Load(fmt.Appendf(nil, "return %d", i))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s0, s1, s2 := load(0), load(1), load(2)
	c.Get([]byte(s0.SHA())) // s1 is now the least recently used
	s3 := load(3)
	if c.Get([]byte(s1.SHA())) != nil {
		t.Error("the least recently used script was kept")
	}
	for _, s := range []*Script{s0, s2, s3} {
		if c.Get([]byte(s.SHA())) == nil {
			t.Errorf("%s was evicted", s.Source())
		}
	}
	if c.Len() != 3 {
		t.Errorf("Len %d", c.Len())
	}

	b := NewCache(CacheLimits{MaxScripts: 100, MaxBytes: 30, MaxScriptBytes: 30})
	x, _ := b.Load([]byte("return 'aaaaaaaaaa'")) // 19 bytes
	y, _ := b.Load([]byte("return 'bbbbbbbbbb'")) // 38 in all: x goes
	if b.Get([]byte(x.SHA())) != nil || b.Get([]byte(y.SHA())) == nil || b.Bytes() != 19 {
		t.Errorf("byte bound: %d bytes, x kept %v", b.Bytes(), b.Get([]byte(x.SHA())) != nil)
	}
}

func TestCacheAllSortedBySHA(t *testing.T) {
	c := NewCache(CacheLimits{})
	for i := 0; i < 20; i++ {
		if _, err := c.Load(fmt.Appendf(nil, "return %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	all := c.All()
	if len(all) != 20 || !slices.IsSortedFunc(all, func(a, b *Script) int { return strings.Compare(a.SHA(), b.SHA()) }) {
		t.Fatalf("All: %d scripts, sorted %v", len(all), slices.IsSortedFunc(all, func(a, b *Script) int { return strings.Compare(a.SHA(), b.SHA()) }))
	}
	restored := NewCache(CacheLimits{})
	for _, s := range all {
		if r, err := restored.Load([]byte(s.Source())); err != nil || r.SHA() != s.SHA() {
			t.Fatalf("reloading %s: %v", s.SHA(), err)
		}
	}
}

// TestCacheConcurrentLoad: scripts loaded and looked up from many
// goroutines stay consistent (run with -race).
func TestCacheConcurrentLoad(t *testing.T) {
	c := NewCache(CacheLimits{MaxScripts: 50})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				src := fmt.Appendf(nil, "return %d", i%80)
				s, err := c.Load(src)
				if err != nil || !bytes.Equal([]byte(s.Source()), src) {
					t.Errorf("Load: %v", err)
					return
				}
				c.Get([]byte(s.SHA()))
			}
		}()
	}
	wg.Wait()
	if c.Len() > 50 {
		t.Errorf("Len %d above the bound", c.Len())
	}
}

// TestShebang: flags are read as Redis 7.0 reads them and line numbers
// still count the shebang line.
func TestShebang(t *testing.T) {
	c := NewCache(CacheLimits{})
	s, err := c.Load([]byte("#!lua flags=no-writes,allow-oom\nreturn 1"))
	if err != nil || !s.ReadOnly() {
		t.Fatalf("%v, read-only %v", err, s != nil && s.ReadOnly())
	}
	if s, _ := c.Load([]byte("#!lua\nreturn 1")); s.ReadOnly() {
		t.Error("#!lua without flags is read-only")
	}
	if got := runScript(t, "#!lua\nreturn x"); !strings.Contains(got, "user_script:2: Script attempted to access nonexistent global variable 'x'") {
		t.Errorf("line numbers after a shebang: %q", got)
	}
}
