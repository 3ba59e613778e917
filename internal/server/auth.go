package server

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/netip"
	"slices"
	"sync"
)

// Errors of Authenticate; the protocol layer words them as Redis does.
var (
	// ErrWrongPass: the password (or user) is wrong.
	ErrWrongPass = errors.New("wrong password")
	// ErrNoPassword: AUTH was called, but no password is configured.
	ErrNoPassword = errors.New("no password is configured")
)

// passwordOK compares in constant time: both sides are hashed first, so
// neither the password's length nor its bytes leak through timing.
func (s *Server) passwordOK(user, pass []byte) bool {
	if user != nil && string(user) != "default" {
		// The only user is "default"; compare anyway so an unknown user
		// costs the same time as a wrong password.
		_ = subtle.ConstantTimeCompare(s.passHash[:], s.passHash[:])
		return false
	}
	h := sha256.Sum256(pass)
	return subtle.ConstantTimeCompare(h[:], s.passHash[:]) == 1
}

// PasswordRequired reports whether clients must authenticate.
func (c *Conn) PasswordRequired() bool { return c.srv.cfg.Password != "" }

// Authenticated reports whether the connection may run every command.
func (c *Conn) Authenticated() bool { return c.authed }

// Authenticate checks a password given to AUTH or HELLO ... AUTH (user is
// nil when none was given; the only user is "default"). On success the
// connection is authenticated; on failure it keeps whatever it had (as in
// Redis, a wrong password does not undo an earlier right one), the failure
// is counted, and after Limits.MaxAuthFailures on one connection with no
// success between them the connection closes once the reply is written, so
// guessing costs a new connection (a TCP handshake, and a slot under
// --maxclients) every few guesses instead of a round trip each.
func (c *Conn) Authenticate(user, pass []byte) error {
	s := c.srv
	if s.cfg.Password == "" {
		return ErrNoPassword
	}
	if s.passwordOK(user, pass) {
		c.setAuthed(true)
		return nil
	}
	s.authFailures.Add(1)
	s.authFailuresByAddr.add(c.addr)
	c.authFail++
	if limit := s.limits.MaxAuthFailures; limit > 0 && c.authFail >= limit {
		s.log.Warn("closing a connection after repeated failed AUTH attempts", "addr", c.addr, "failures", c.authFail)
		c.quit = true
	}
	return ErrWrongPass
}

// maxAuthFailureAddrs bounds how many client addresses authFailureCounts
// tracks, so that an attacker cycling through addresses cannot grow the
// table (or a metric labelled by it) without limit.
const maxAuthFailureAddrs = 100

// authFailureCounts counts failed AUTHs by client IP address (the port is
// dropped: each connection has its own). It tracks at most
// maxAuthFailureAddrs addresses; a new address arriving at a full table
// evicts the tracked address with the fewest failures, whose count moves to
// Other. So the addresses failing most stay visible, every failure is
// counted exactly once, and Other only grows. Safe for concurrent use.
type authFailureCounts struct {
	mu     sync.Mutex
	byAddr map[netip.Addr]uint64
	other  uint64
}

func (a *authFailureCounts) add(addrPort string) {
	ip := netip.Addr{} // unparseable addresses are counted as Other
	if ap, err := netip.ParseAddrPort(addrPort); err == nil {
		ip = ap.Addr().Unmap()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !ip.IsValid() {
		a.other++
		return
	}
	if a.byAddr == nil {
		a.byAddr = make(map[netip.Addr]uint64)
	}
	if _, ok := a.byAddr[ip]; !ok && len(a.byAddr) >= maxAuthFailureAddrs {
		// O(maxAuthFailureAddrs) per new address, only once the table is
		// full: at most 100 comparisons per failed guess.
		var victim netip.Addr
		least := ^uint64(0)
		for addr, n := range a.byAddr {
			if n < least || (n == least && addr.Less(victim)) {
				victim, least = addr, n
			}
		}
		delete(a.byAddr, victim)
		a.other += least
	}
	a.byAddr[ip]++
}

// AddrCount is a count for one client IP address.
type AddrCount struct {
	Addr  string
	Count uint64
}

func (a *authFailureCounts) snapshot() (top []AddrCount, other uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for addr, n := range a.byAddr {
		top = append(top, AddrCount{addr.String(), n})
	}
	slices.SortFunc(top, func(x, y AddrCount) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), cmp.Compare(x.Addr, y.Addr))
	})
	return top, a.other
}

// AuthFailures returns the failed AUTH (and HELLO ... AUTH) attempts since
// start.
func (s *Server) AuthFailures() uint64 { return s.authFailures.Load() }

// AuthFailuresByAddr returns the failed AUTH attempts by client IP address,
// most first, for at most 100 addresses (those that failed most; see
// authFailureCounts), and the failures of every other address together.
// The counts add up to AuthFailures. An address's count restarts from one
// if it is evicted and fails again.
func (s *Server) AuthFailuresByAddr() (top []AddrCount, other uint64) {
	return s.authFailuresByAddr.snapshot()
}
