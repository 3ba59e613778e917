package resp

import (
	"net"
	"testing"
	"time"
)

// dialRaw opens a plain TCP connection for byte-level protocol tests.
func dialRaw(t testing.TB, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	t.Cleanup(func() { conn.Close() })
	return conn
}
