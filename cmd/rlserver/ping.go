package main

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// pingTimeout bounds each connection the health check makes.
const pingTimeout = 5 * time.Second

// ping is the health-check mode (--ping ADDR), for container HEALTHCHECKs
// that have no shell or client tools: it sends AUTH (when a password is
// configured, by any of the server's means: --requirepass[-file], their
// RLSERVER_ variables or the --config file) and PING, and exits 0 on PONG,
// 1 otherwise. With --tls-cert it connects over TLS (presenting that
// certificate, for servers that require client certificates); it does not
// verify the server's name, since it runs beside the server it checks.
func ping(cfg *config, stdout, stderr io.Writer) int {
	reply, err := pingOnce(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "rlserver --ping %s: %v\n", cfg.ping, err)
		return exitFail
	}
	fmt.Fprintln(stdout, reply)
	return exitOK
}

func pingOnce(cfg *config) (string, error) {
	dialer := &net.Dialer{Timeout: pingTimeout}
	conn, err := dialer.Dial("tcp", cfg.ping)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(pingTimeout))
	if cfg.tlsCert != "" {
		tc := &tls.Config{InsecureSkipVerify: true} // a local liveness probe, not a trust decision
		if cert, err := tls.LoadX509KeyPair(cfg.tlsCert, cfg.tlsKey); err == nil {
			tc.Certificates = []tls.Certificate{cert}
		}
		tconn := tls.Client(conn, tc)
		if err := tconn.Handshake(); err != nil {
			var rh tls.RecordHeaderError
			if errors.As(err, &rh) {
				return "", errors.New("the server does not speak TLS: ping it without --tls-cert/--tls-key")
			}
			return "", fmt.Errorf("TLS handshake: %w", err)
		}
		conn = tconn
	}
	req := "*1\r\n$4\r\nPING\r\n"
	if cfg.password != "" {
		req = fmt.Sprintf("*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(cfg.password), cfg.password) + req
	}
	if _, err := io.WriteString(conn, req); err != nil {
		return "", err
	}
	rd := bufio.NewReader(conn)
	for read := 0; ; read++ {
		line, err := rd.ReadString('\n')
		if err != nil {
			if read == 0 && cfg.tlsCert == "" && (errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET)) && speaksTLS(cfg.ping) {
				return "", errors.New("the server closed the connection without replying: it serves TLS; " +
					"ping it with the TLS settings the server uses (--tls-cert and --tls-key, or RLSERVER_TLS_CERT and RLSERVER_TLS_KEY)")
			}
			if read == 0 && errors.Is(err, io.EOF) {
				return "", errors.New("the server closed the connection without replying")
			}
			return "", err
		}
		line = strings.TrimSpace(line)
		switch {
		case line == "+PONG":
			return "PONG", nil
		case strings.HasPrefix(line, "-NOAUTH"):
			return "", fmt.Errorf("%s (give --ping the password the server uses: RLSERVER_REQUIREPASS, RLSERVER_REQUIREPASS_FILE, or the same flag)", line[1:])
		case strings.HasPrefix(line, "-"):
			return "", errors.New(line[1:])
		}
	}
}

// speaksTLS reports whether the server at addr completes (or answers with
// an alert) a TLS handshake: a plaintext PING to a TLS port gets only a
// closed connection, and this tells the operator why.
func speaksTLS(addr string) bool {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: pingTimeout}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		conn.Close()
		return true
	}
	var alert tls.AlertError
	return errors.As(err, &alert) || strings.Contains(err.Error(), "remote error: tls")
}
