//go:build !linux

package server

// Event loops use epoll; elsewhere every connection gets a goroutine.

type eventLoop struct{}

type loopConn struct {
	written int
	blocked bool
}

func (s *Server) startLoops(int) (bool, error) { return false, nil }
func (s *Server) acceptToLoops()               {}
func (l *eventLoop) wake()                     {}
func (l *eventLoop) release()                  {}
func (l *eventLoop) requestClose(*Conn)        {}
