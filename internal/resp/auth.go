package resp

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
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
		c.authed = false
		c.srv.authFailures.Add(1)
		return errWrongPass
	}
	c.authed = true
	c.out.ok()
	return nil
}
