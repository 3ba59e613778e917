package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// ping is the health-check mode (--ping ADDR), for container HEALTHCHECKs
// that have no shell or client tools: it sends AUTH (when a password is
// configured) and PING, and exits 0 on PONG, 1 otherwise. With --tls-cert it
// connects over TLS (presenting that certificate, for servers that require
// client certificates) and trusts --tls-ca if given; it does not verify the
// server's name, since it runs beside the server it checks.
func ping(cfg config, stdout, stderr io.Writer) int {
	dialer := &net.Dialer{Timeout: 3 * time.Second}
	var conn net.Conn
	var err error
	if cfg.tlsCert != "" {
		tc := &tls.Config{InsecureSkipVerify: true} // a local liveness probe, not a trust decision
		if cert, cerr := tls.LoadX509KeyPair(cfg.tlsCert, cfg.tlsKey); cerr == nil {
			tc.Certificates = []tls.Certificate{cert}
		}
		conn, err = tls.DialWithDialer(dialer, "tcp", cfg.ping, tc)
	} else {
		conn, err = dialer.Dial("tcp", cfg.ping)
	}
	if err != nil {
		fmt.Fprintln(stderr, "rlserver --ping:", err)
		return 1
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	req := "*1\r\n$4\r\nPING\r\n"
	if cfg.password != "" {
		req = fmt.Sprintf("*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(cfg.password), cfg.password) + req
	}
	if _, err := io.WriteString(conn, req); err != nil {
		fmt.Fprintln(stderr, "rlserver --ping:", err)
		return 1
	}
	rd := bufio.NewReader(conn)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			fmt.Fprintln(stderr, "rlserver --ping:", err)
			return 1
		}
		line = strings.TrimSpace(line)
		switch {
		case line == "+PONG":
			fmt.Fprintln(stdout, "PONG")
			return 0
		case strings.HasPrefix(line, "-"):
			fmt.Fprintln(stderr, "rlserver --ping:", line[1:])
			return 1
		}
	}
}
