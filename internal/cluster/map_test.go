package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testID is a valid node id made from n.
func testID(n int) string { return fmt.Sprintf("%040x", n) }

// threeNodes is the map docs/cluster.md starts from.
const threeNodes = `{
  "version": 3,
  "nodes": [
    {"id": "0000000000000000000000000000000000000001", "host": "10.0.0.1", "port": 6380, "slots": [[0, 5460]]},
    {"id": "0000000000000000000000000000000000000002", "host": "10.0.0.2", "port": 6380, "tls_port": 6390,
     "hostname": "rl-1.example", "slots": [[5461, 10922]]},
    {"id": "0000000000000000000000000000000000000003", "host": "rl-2.rl.default.svc", "port": 6380,
     "forward_addr": "10.1.0.3:6380", "slots": [[10923, 16000], [16001, 16383]]}
  ]
}`

func TestParseMap(t *testing.T) {
	m, err := ParseMap([]byte(threeNodes))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.checkConsistency(); err != nil {
		t.Fatal(err)
	}
	if m.Version() != 3 || m.Len() != 3 {
		t.Fatalf("version %d, %d nodes", m.Version(), m.Len())
	}
	for _, tt := range []struct {
		slot  uint16
		owner int
	}{{0, 0}, {5460, 0}, {5461, 1}, {10922, 1}, {10923, 2}, {16000, 2}, {16001, 2}, {16383, 2}} {
		if got := m.Owner(tt.slot); got != tt.owner {
			t.Errorf("Owner(%d) = %d, want %d", tt.slot, got, tt.owner)
		}
	}
	// Adjacent ranges of one node are merged.
	if got := m.Node(2).Slots; len(got) != 1 || got[0] != (Range{10923, 16383}) {
		t.Errorf("node 2's slots %v, want one range 10923-16383", got)
	}
	n1 := m.Node(1)
	if n1.ClientAddr(false) != "10.0.0.2:6380" || n1.ClientAddr(true) != "10.0.0.2:6390" || n1.PeerAddr(false) != "10.0.0.2:6380" {
		t.Errorf("node 1 addresses %s %s %s", n1.ClientAddr(false), n1.ClientAddr(true), n1.PeerAddr(false))
	}
	if got := m.Node(2).PeerAddr(false); got != "10.1.0.3:6380" {
		t.Errorf("node 2 forwards to %s, want its forward_addr", got)
	}
	if m.Index(testID(3)) != 2 || m.Index(testID(9)) != -1 {
		t.Error("Index")
	}
}

func TestMapJSONRoundTrip(t *testing.T) {
	m, err := ParseMap([]byte(threeNodes))
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":3,"nodes":[` +
		`{"id":"0000000000000000000000000000000000000001","host":"10.0.0.1","port":6380,"slots":[[0,5460]]},` +
		`{"id":"0000000000000000000000000000000000000002","host":"10.0.0.2","port":6380,"tls_port":6390,"hostname":"rl-1.example","slots":[[5461,10922]]},` +
		`{"id":"0000000000000000000000000000000000000003","host":"rl-2.rl.default.svc","port":6380,"forward_addr":"10.1.0.3:6380","slots":[[10923,16383]]}]}`
	if string(b) != want {
		t.Fatalf("canonical JSON\n got %s\nwant %s", b, want)
	}
	back, err := ParseMap(b)
	if err != nil || !back.Equal(m) {
		t.Fatalf("re-parsed map differs: %v", err)
	}
}

// mapWith returns threeNodes' JSON with old replaced by new.
func mapWith(old, new string) string {
	if !strings.Contains(threeNodes, old) {
		panic("mapWith: " + old + " not in the map")
	}
	return strings.Replace(threeNodes, old, new, 1)
}

func TestParseMapRefuses(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"not JSON", `{"version": 3,`, "unexpected EOF"},
		{"text after the map", threeNodes + ` {}`, "text after the map's closing brace"},
		{"unknown field", mapWith(`"version": 3`, `"version": 3, "epoch": 1`), `unknown field "epoch"`},
		{"misspelt node field", mapWith(`"port": 6380, "slots": [[0`, `"prot": 6380, "slots": [[0`), `unknown field "prot"`},
		{"version 0", mapWith(`"version": 3`, `"version": 0`), "version must be at least 1"},
		{"negative version", mapWith(`"version": 3`, `"version": -1`), "cannot unmarshal number -1"},
		{"no nodes", `{"version": 1, "nodes": []}`, "0 nodes; a map lists 1 to 1000"},
		{"short id", mapWith(`"0000000000000000000000000000000000000001"`, `"abc"`), `node 0: id "abc" is not 40 lower-case hex digits`},
		{"upper-case id", mapWith(`"0000000000000000000000000000000000000001"`, `"000000000000000000000000000000000000000A"`), "is not 40 lower-case hex digits"},
		{"duplicate id", mapWith(`"0000000000000000000000000000000000000003"`, `"0000000000000000000000000000000000000001"`), "nodes 0 and 2 have the same id"},
		{"empty host", mapWith(`"host": "10.0.0.1"`, `"host": ""`), "node 0: host: empty; clients must be told a host to dial"},
		{"unspecified host", mapWith(`"host": "10.0.0.1"`, `"host": "0.0.0.0"`), "0.0.0.0 is unspecified"},
		{"unspecified IPv6 host", mapWith(`"host": "10.0.0.1"`, `"host": "::"`), ":: is unspecified"},
		{"host with a zone", mapWith(`"host": "10.0.0.1"`, `"host": "fe80::1%eth0"`), "has a zone"},
		{"host with a space", mapWith(`"host": "10.0.0.1"`, `"host": "a b"`), "neither an IP address nor a DNS name"},
		{"host with a port", mapWith(`"host": "10.0.0.1"`, `"host": "10.0.0.1:6380"`), "neither an IP address nor a DNS name"},
		{"port 0", mapWith(`"host": "10.0.0.1", "port": 6380`, `"host": "10.0.0.1", "port": 0`), "node 0: port 0 is out of range 1-65535"},
		{"port 65536", mapWith(`"host": "10.0.0.1", "port": 6380`, `"host": "10.0.0.1", "port": 65536`), "port 65536 is out of range"},
		{"tls_port equals port", mapWith(`"tls_port": 6390`, `"tls_port": 6380`), "tls_port 6380 is out of range 1-65535 or equals port"},
		{"bad hostname", mapWith(`"hostname": "rl-1.example"`, `"hostname": "rl_1"`), `hostname "rl_1"`},
		{"bad forward_addr", mapWith(`"forward_addr": "10.1.0.3:6380"`, `"forward_addr": "10.1.0.3"`), `forward_addr: "10.1.0.3" is not host:port`},
		{"forward_addr port", mapWith(`"forward_addr": "10.1.0.3:6380"`, `"forward_addr": "10.1.0.3:0"`), `port "0" is out of range`},
		{"two nodes at one address", mapWith(`"host": "10.0.0.2"`, `"host": "10.0.0.1"`), "nodes 0 and 1 are both at 10.0.0.1:6380"},
		{"a TLS port on another's port", mapWith(`"host": "10.0.0.2", "port": 6380, "tls_port": 6390`, `"host": "10.0.0.1", "port": 6381, "tls_port": 6380`), "nodes 0 and 1 are both at 10.0.0.1:6380"},
		{"slot owned twice", mapWith(`[[5461, 10922]]`, `[[5460, 10922]]`), "slot 5460 is owned by both node 0"},
		{"slots owned by no one", mapWith(`[[5461, 10922]]`, `[[5461, 10000]]`), "slots 10001-10922 are owned by no node"},
		{"one slot owned by no one", mapWith(`[[0, 5460]]`, `[[1, 5460]]`), "slot 0 is owned by no node"},
		{"range past the end", mapWith(`[16001, 16383]`, `[16001, 16384]`), "want 0 <= start <= end <= 16383"},
		{"range backwards", mapWith(`[[0, 5460]]`, `[[5460, 0]]`), "slot range [5460, 0]"},
		{"range of three", mapWith(`[[0, 5460]]`, `[[0, 5460, 1]]`), "want [start, end], two integers"},
		{"range of strings", mapWith(`[[0, 5460]]`, `[["0", "5460"]]`), "want [start, end], two integers"},
		{"fractional slot", mapWith(`[[0, 5460]]`, `[[0, 5460.5]]`), "want [start, end], two integers"},
	}
	for _, tt := range tests {
		_, err := ParseMap([]byte(tt.json))
		if err == nil {
			t.Errorf("%s: accepted", tt.name)
			continue
		}
		if !errors.Is(err, ErrInvalidMap) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %q, want ErrInvalidMap containing %q", tt.name, err, tt.want)
		}
	}
	huge := make([]byte, MaxMapBytes+1)
	if _, err := ParseMap(huge); err == nil || !strings.Contains(err.Error(), "more than the 4194304 allowed") {
		t.Errorf("huge map: %v", err)
	}
}

func TestEvenMap(t *testing.T) {
	nodes := func(n int) []Node {
		out := make([]Node, n)
		for i := range out {
			out[i] = Node{ID: testID(i + 1), Host: "127.0.0.1", Port: 7000 + i}
		}
		return out
	}
	m, err := EvenMap(1, nodes(3))
	if err != nil {
		t.Fatal(err)
	}
	// redis-cli --cluster create's split of three masters.
	want := []Range{{0, 5460}, {5461, 10922}, {10923, 16383}}
	for i, r := range want {
		if got := m.Node(i).Slots; len(got) != 1 || got[0] != r {
			t.Errorf("node %d owns %v, want %v", i, got, r)
		}
	}
	for n := 1; n <= 64; n++ {
		m, err := EvenMap(7, nodes(n))
		if err != nil {
			t.Fatalf("%d nodes: %v", n, err)
		}
		if err := m.checkConsistency(); err != nil {
			t.Fatalf("%d nodes: %v", n, err)
		}
		lo, hi := Slots, 0
		for i := range n {
			c := m.Node(i).SlotCount()
			lo, hi = min(lo, c), max(hi, c)
		}
		if hi-lo > 1 {
			t.Errorf("%d nodes: shares from %d to %d slots, want within 1", n, lo, hi)
		}
	}
	if _, err := EvenMap(1, nil); !errors.Is(err, ErrInvalidMap) {
		t.Errorf("no nodes: %v", err)
	}
}

func TestEqual(t *testing.T) {
	a, _ := ParseMap([]byte(threeNodes))
	b, _ := ParseMap([]byte(threeNodes))
	if !a.Equal(b) {
		t.Fatal("equal maps differ")
	}
	// Node order does not matter.
	reordered := fmt.Sprintf(`{"version": 3, "nodes": [%s, %s, %s]}`,
		`{"id": "0000000000000000000000000000000000000003", "host": "rl-2.rl.default.svc", "port": 6380, "forward_addr": "10.1.0.3:6380", "slots": [[10923, 16383]]}`,
		`{"id": "0000000000000000000000000000000000000001", "host": "10.0.0.1", "port": 6380, "slots": [[0, 5460]]}`,
		`{"id": "0000000000000000000000000000000000000002", "host": "10.0.0.2", "port": 6380, "tls_port": 6390, "hostname": "rl-1.example", "slots": [[5461, 10922]]}`)
	if c, err := ParseMap([]byte(reordered)); err != nil || !a.Equal(c) {
		t.Errorf("reordered map differs (%v)", err)
	}
	for _, other := range []string{
		mapWith(`"version": 3`, `"version": 4`),
		mapWith(`"hostname": "rl-1.example"`, `"hostname": "rl-9.example"`),
		mapWith(`"forward_addr": "10.1.0.3:6380"`, `"forward_addr": "10.1.0.4:6380"`),
	} {
		c, err := ParseMap([]byte(other))
		if err != nil {
			t.Fatal(err)
		}
		if a.Equal(c) {
			t.Errorf("maps differing in one field are Equal:\n%s", other)
		}
	}
	moved := mapWith(`[[0, 5460]]`, `[[0, 5459]]`)
	moved = strings.Replace(moved, `[[5461, 10922]]`, `[[5460, 10922]]`, 1)
	if c, err := ParseMap([]byte(moved)); err != nil || a.Equal(c) {
		t.Errorf("a map moving slot 5460 is Equal (%v)", err)
	}
	var nilMap *Map
	if a.Equal(nilMap) || !nilMap.Equal(nil) {
		t.Error("nil maps")
	}
}

func TestMapFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.json")
	m, _ := ParseMap([]byte(threeNodes))
	if err := WriteMapFile(path, m); err != nil {
		t.Fatal(err)
	}
	back, err := ReadMapFile(path)
	if err != nil || !back.Equal(m) {
		t.Fatalf("read back: %v", err)
	}
	if err := os.WriteFile(path, []byte(mapWith(`"port": 6380, "slots": [[0`, `"port": 0, "slots": [[0`)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadMapFile(path); err == nil || !strings.Contains(err.Error(), path+": invalid cluster map: node 0: port 0") {
		t.Errorf("bad file: %v", err)
	}
	if _, err := ReadMapFile(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestNewestMapFile(t *testing.T) {
	dir := t.TempDir()
	pushed, config, missing := filepath.Join(dir, "cluster-map.json"), filepath.Join(dir, "cluster.json"), filepath.Join(dir, "none.json")
	if m, err := NewestMapFile(pushed, config); m != nil || err != nil {
		t.Fatalf("no files: %v %v", m, err)
	}
	v3, _ := ParseMap([]byte(threeNodes))
	v5, _ := ParseMap([]byte(mapWith(`"version": 3`, `"version": 5`)))
	WriteMapFile(config, v3)
	WriteMapFile(pushed, v5)
	if m, err := NewestMapFile(config, pushed, missing); err != nil || m.Version() != 5 {
		t.Errorf("newest: %v %v", m, err)
	}
	os.WriteFile(pushed, []byte("{"), 0o600)
	if _, err := NewestMapFile(config, pushed); !errors.Is(err, ErrInvalidMap) {
		t.Errorf("a corrupt saved map: %v", err)
	}
}

func TestLoadOrCreateNodeID(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "node-id")
	id, err := LoadOrCreateNodeID(path)
	if err != nil || !ValidNodeID(id) {
		t.Fatalf("created %q, %v", id, err)
	}
	again, err := LoadOrCreateNodeID(path)
	if err != nil || again != id {
		t.Fatalf("second start got %q, %v; want the stored %q", again, err, id)
	}
	if other := NewNodeID(); other == id {
		t.Error("two random ids are equal")
	}
	os.WriteFile(path, []byte("not an id\n"), 0o600)
	if _, err := LoadOrCreateNodeID(path); err == nil || !strings.Contains(err.Error(), "is not a node id") {
		t.Errorf("corrupt id file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "not an id\n" {
		t.Error("a corrupt id file was replaced")
	}
}

// FuzzParseMap: any input is refused or gives a map whose invariants hold
// and whose canonical JSON parses back to an equal map.
func FuzzParseMap(f *testing.F) {
	f.Add([]byte(threeNodes))
	f.Add([]byte(`{"version":1,"nodes":[{"id":"` + testID(1) + `","host":"a","port":1,"slots":[[0,16383]]}]}`))
	f.Add([]byte(`{"version":2,"nodes":[{"id":"` + testID(1) + `","host":"::1","port":1,"slots":[[0,1],[2,8191],[8192,8192]]},` +
		`{"id":"` + testID(2) + `","host":"::2","port":1,"slots":[[8193,16383]]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMap(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidMap) {
				t.Fatalf("error %v does not wrap ErrInvalidMap", err)
			}
			return
		}
		if err := m.checkConsistency(); err != nil {
			t.Fatal(err)
		}
		b, err := m.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseMap(b)
		if err != nil {
			t.Fatalf("canonical form refused: %v\n%s", err, b)
		}
		if !back.Equal(m) {
			t.Fatalf("canonical form differs:\n%s", b)
		}
	})
}
