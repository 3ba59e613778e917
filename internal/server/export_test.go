package server

import "io"

// StreamResult is what ServeStream saw.
type StreamResult struct {
	Replies  []byte
	Commands int
	// Retained is what the connection kept once done: the reader's
	// bookkeeping and buffer, and the reply buffer's capacity, in bytes.
	ReaderRetained, ReplyBuffer int
}

// ServeStream serves one connection whose requests are in, synchronously
// on the calling goroutine, with the steps both connection models take
// (read, execute, run the batch, write, wrote), until the input ends or
// the connection would close. For fuzzing the whole command path, and for
// tests of what a connection keeps.
func (s *Server) ServeStream(in io.Reader) StreamResult {
	c := s.newConn("stream", "stream", in, s.cfg.Handler.NewBatch())
	var r StreamResult
	for {
		cmds, err := c.rd.Next()
		if err != nil {
			break // end of input, or a protocol error that closes the connection
		}
		r.Commands += len(cmds)
		c.session.Execute(cmds)
		c.batch.Flush()
		if !c.sendable() {
			break
		}
		r.Replies = append(r.Replies, c.out.Bytes()...)
		if c.wrote() == closeConn {
			break
		}
	}
	r.ReaderRetained, r.ReplyBuffer = c.rd.Retained(), c.out.Cap()
	return r
}
