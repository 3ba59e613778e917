package resp

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/netip"
	"slices"
	"sync"
)

var (
	errNoAuth    = &codedError{"NOAUTH", "Authentication required."}
	errWrongPass = &codedError{"WRONGPASS", "invalid username-password pair or user is disabled."}
	errNoPass    = errors.New("AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	errHelloAuth = &codedError{"NOAUTH", "HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"}
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

// cmdAuth handles AUTH password and AUTH username password.
func cmdAuth(c *client, args [][]byte) error {
	if len(args) > 3 {
		return errSyntax // as Redis, when AUTH runs
	}
	if c.srv.cfg.Password == "" {
		return errNoPass
	}
	var user, pass []byte
	if len(args) == 2 {
		pass = args[1]
	} else {
		user, pass = args[1], args[2]
	}
	if !c.srv.passwordOK(user, pass) {
		// As in Redis, a connection already authenticated stays so.
		return c.authFailed()
	}
	c.setAuthed(true)
	c.out.ok()
	return nil
}

// authFailed counts a wrong password given to AUTH or HELLO ... AUTH, and
// returns the reply. After Limits.MaxAuthFailures on one connection with no
// success between them it closes the connection once the reply is written,
// so guessing costs a new connection (a TCP handshake, and a slot under
// --maxclients) every few guesses instead of a round trip each.
func (c *client) authFailed() error {
	s := c.srv
	s.authFailures.Add(1)
	s.authFailuresByAddr.add(c.addr)
	c.authFail++
	if limit := s.limits.MaxAuthFailures; limit > 0 && c.authFail >= limit {
		s.log.Warn("closing a connection after repeated failed AUTH attempts", "addr", c.addr, "failures", c.authFail)
		c.quit = true
	}
	return errWrongPass
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
