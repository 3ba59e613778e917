package cluster

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

func newState(t *testing.T, mode Mode, self int) *State {
	t.Helper()
	s, err := NewState(Config{Mode: mode, SelfID: testID(self)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestApplyVersions(t *testing.T) {
	s := newState(t, On, 1)
	if v := s.View(); v.OK() || v.Version() != 0 || v.Map() != nil || v.ConfigJSON() != nil {
		t.Fatal("a new node in On mode holds a map")
	}
	v3 := []byte(threeNodes)
	steps := []struct {
		name    string
		json    string
		changed bool
		err     error
		version uint64
	}{
		{"first map", string(v3), true, nil, 3},
		{"same map again", string(v3), false, nil, 3},
		{"same version, other contents", mapWith(`"hostname": "rl-1.example"`, `"hostname": "rl-9.example"`), false, ErrMapConflict, 3},
		{"older version", mapWith(`"version": 3`, `"version": 2`), false, ErrOlderMap, 3},
		{"invalid map", mapWith(`"version": 3`, `"version": 9, "x": 1`), false, ErrInvalidMap, 3},
		{"newer version", mapWith(`"version": 3`, `"version": 4`), true, nil, 4},
		{"the old one again", string(v3), false, ErrOlderMap, 4},
	}
	for _, st := range steps {
		changed, err := s.SetConfig([]byte(st.json))
		if changed != st.changed || !errors.Is(err, st.err) || (st.err == nil && err != nil) {
			t.Errorf("%s: changed %v err %v; want %v %v", st.name, changed, err, st.changed, st.err)
		}
		if got := s.View().Version(); got != st.version {
			t.Errorf("%s: node holds version %d, want %d", st.name, got, st.version)
		}
	}
	if err := s.View().Map().checkConsistency(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetConfig([]byte(mapWith(`"version": 3`, `"version": 2`))); err == nil ||
		err.Error() != "cluster map is older than the node's: version 2, the node holds version 4" {
		t.Errorf("older map's error text: %v", err)
	}
	// GETCONFIG's JSON is accepted back as the same map.
	if changed, err := s.SetConfig(s.View().ConfigJSON()); changed || err != nil {
		t.Errorf("re-pushing GETCONFIG's map: %v %v", changed, err)
	}
}

func TestApplyOnlyInOnMode(t *testing.T) {
	for _, mode := range []Mode{Off, Emulated} {
		s := newState(t, mode, 1)
		if _, err := s.SetConfig([]byte(threeNodes)); err == nil || !strings.Contains(err.Error(), "only taken with --cluster on") {
			t.Errorf("%s: %v", mode, err)
		}
	}
}

func TestNewStateRefuses(t *testing.T) {
	for _, cfg := range []Config{
		{Mode: On, SelfID: "abc"},
		{Mode: Emulated},
		{Mode: On, SelfID: testID(1), Announce: "0.0.0.0:6380"},
		{Mode: On, SelfID: testID(1), Announce: ":6380"},
		{Mode: On, SelfID: testID(1), Announce: "10.0.0.1"},
	} {
		if _, err := NewState(cfg); err == nil {
			t.Errorf("NewState(%+v) accepted", cfg)
		}
	}
	if _, err := NewState(Config{Mode: Off}); err != nil {
		t.Errorf("Off mode needs no id: %v", err)
	}
	for _, s := range []string{"off", "on", "emulated"} {
		if m, err := ParseMode(s); err != nil || m.String() != s {
			t.Errorf("ParseMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParseMode("yes"); err == nil {
		t.Error("ParseMode(yes) accepted")
	}
}

func TestRoute(t *testing.T) {
	s := newState(t, On, 2) // owns 5461-10922
	down := s.View().Route(KeySlotString("foo"), true)
	if down.Action != Down || down.Err != ErrClusterDown {
		t.Fatalf("no map: %+v", down)
	}
	if text, _ := ReplyText(down.Err); text != "CLUSTERDOWN The cluster is down" {
		t.Errorf("text %q", text)
	}
	if _, err := s.SetConfig([]byte(threeNodes)); err != nil {
		t.Fatal(err)
	}
	v := s.View()
	bar, foo := KeySlotString("bar"), KeySlotString("foo") // 5061 on node 1, 12182 on node 3
	if r := v.Route(KeySlotString("{user1000}"), false); r.Action != Moved {
		t.Errorf("slot 3443: %+v", r)
	}
	if r := v.Route(KeySlotString("tenant:7"), false); r.Action != Moved || r.Owner.ID != testID(1) {
		t.Errorf("slot 2624: %+v", r)
	}
	if r := v.Route(7000, false); r.Action != Serve {
		t.Errorf("own slot 7000: %+v", r)
	}
	if r := v.Route(bar, true); r.Action != Forward || r.Owner.ID != testID(1) {
		t.Errorf("forwarding slot %d: %+v", bar, r)
	}
	r := v.Route(foo, false)
	if got := r.Redirect(false).Error(); got != "MOVED 12182 rl-2.rl.default.svc:6380" {
		t.Errorf("MOVED text %q", got)
	}
	if got := string(r.AppendMoved(nil, false)); got != "-MOVED 12182 rl-2.rl.default.svc:6380\r\n" {
		t.Errorf("MOVED wire %q", got)
	}
	r = v.Route(7000, false)
	r.Owner, r.Slot = v.Map().Node(1), 7000
	if got := string(r.AppendMoved(nil, true)); got != "-MOVED 7000 10.0.0.2:6390\r\n" {
		t.Errorf("MOVED to a TLS client %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { v.Route(foo, false); v.Route(7000, true) }); n != 0 {
		t.Errorf("Route allocates %v times", n)
	}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = v.Route(foo, false).AppendMoved(buf[:0], false) }); n != 0 {
		t.Errorf("AppendMoved allocates %v times", n)
	}

	// A node absent from the map serves nothing and redirects everything.
	absent := newState(t, On, 9)
	absent.SetConfig([]byte(threeNodes))
	for _, slot := range []uint16{0, 7000, 16383} {
		if r := absent.View().Route(slot, false); r.Action != Moved {
			t.Errorf("absent node, slot %d: %+v", slot, r)
		}
	}
	for _, mode := range []Mode{Off, Emulated} {
		if r := newState(t, mode, 1).View().Route(foo, true); r.Action != Serve {
			t.Errorf("%s: %+v", mode, r)
		}
	}
}

// TestMovedIPv6 writes the host bare, as Redis does ("MOVED 3999 ::1:6381"):
// clients split at the last colon.
func TestMovedIPv6(t *testing.T) {
	m, err := NewMap(1, []Node{
		{ID: testID(1), Host: "::1", Port: 6381, Slots: []Range{{0, 8191}}},
		{ID: testID(2), Host: "::1", Port: 6382, Slots: []Range{{8192, 16383}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := newState(t, On, 2)
	s.Apply(m)
	r := s.View().Route(3999, false)
	if got := string(r.AppendMoved(nil, false)); got != "-MOVED 3999 ::1:6381\r\n" {
		t.Errorf("%q", got)
	}
	if got := r.Owner.ClientAddr(false); got != "[::1]:6381" {
		t.Errorf("dial address %q", got)
	}
}

// TestViewsUnderConcurrentApply: readers see whole maps while maps change
// (run with -race).
func TestViewsUnderConcurrentApply(t *testing.T) {
	s := newState(t, On, 1)
	maps := make([]*Map, 20)
	for i := range maps {
		nodes := []Node{{ID: testID(1), Host: "10.0.0.1", Port: 6380}, {ID: testID(2), Host: "10.0.0.2", Port: 6380}}
		m, err := EvenMap(uint64(i+1), nodes[:1+i%2])
		if err != nil {
			t.Fatal(err)
		}
		maps[i] = m
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				v := s.View()
				if m := v.Map(); m != nil && v.Route(16383, false).Action == Serve && m.Len() != 1 {
					t.Error("node 1 serves slot 16383 in a two-node map")
					return
				}
			}
		}()
	}
	for _, m := range maps {
		if _, err := s.Apply(m); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
	if s.View().Version() != 20 {
		t.Errorf("version %d", s.View().Version())
	}
}

func TestEmulatedAnnounce(t *testing.T) {
	s, err := NewState(Config{Mode: Emulated, SelfID: testID(1), Announce: "rl.example:7000"})
	if err != nil {
		t.Fatal(err)
	}
	c := Conn{Proto: 2, LocalAddr: netip.MustParseAddrPort("127.0.0.1:6380")}
	got := string(s.View().AppendSlots(nil, c))
	want := "*1\r\n*3\r\n:0\r\n:16383\r\n*4\r\n$10\r\nrl.example\r\n:7000\r\n$40\r\n" + testID(1) + "\r\n*0\r\n"
	if got != want {
		t.Errorf("emulated with --cluster-announce-addr:\n got %q\nwant %q", got, want)
	}
}

func TestMayForward(t *testing.T) {
	for _, tt := range []struct {
		enabled, clientRoutes, fromPeer, inTx, want bool
	}{
		{true, false, false, false, true},   // RL.ALLOW from ioredis, or a gRPC request
		{false, false, false, false, false}, // --cluster-forward=false
		{true, true, false, false, false},   // GET: every client routes it; MOVED
		{true, false, true, false, false},   // came from a peer: never again
		{true, false, false, true, false},   // queued in MULTI
	} {
		if got := MayForward(tt.enabled, tt.clientRoutes, tt.fromPeer, tt.inTx); got != tt.want {
			t.Errorf("MayForward(%v, %v, %v, %v) = %v", tt.enabled, tt.clientRoutes, tt.fromPeer, tt.inTx, got)
		}
	}
}

// TestErrorTexts: the cluster errors in Redis's exact words (redis/redis
// src/cluster.c clusterRedirectClient; MOVED and CROSSSLOT are also
// checked against captures in replies_test.go).
func TestErrorTexts(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{ErrCrossSlot, "CROSSSLOT Keys in request don't hash to the same slot"},
		{ErrClusterDown, "CLUSTERDOWN The cluster is down"},
		{ErrSlotNotServed, "CLUSTERDOWN Hash slot not served"},
		{ErrTryAgain, "TRYAGAIN Multiple keys request during rehashing of slot"},
		{&RedirectError{Slot: 12182, Addr: "127.0.0.1:17003"}, "MOVED 12182 127.0.0.1:17003"},
		{&RedirectError{Ask: true, Slot: 12182, Addr: "127.0.0.1:17001"}, "ASK 12182 127.0.0.1:17001"},
		{fmt.Errorf("wrapped: %w", ErrCrossSlot), "CROSSSLOT Keys in request don't hash to the same slot"},
		{&OwnerUnreachableError{Slot: 12182, Addr: "10.0.0.3:6380"}, "CLUSTERDOWN The owner of slot 12182 (10.0.0.3:6380) is unreachable"},
		{&OwnerUnreachableError{Slot: 1, Addr: "a:1", Sent: true}, "CLUSTERDOWN The owner of slot 1 (a:1) did not answer; the request may have run"},
	} {
		if got, ok := ReplyText(tt.err); !ok || got != tt.want {
			t.Errorf("ReplyText(%v) = %q, %v; want %q", tt.err, got, ok, tt.want)
		}
	}
	if _, ok := ReplyText(ErrInvalidSlot); ok {
		t.Error("a plain error has its own reply text")
	}
}
