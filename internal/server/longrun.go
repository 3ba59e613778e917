package server

// LongRunner is implemented by a Session some of whose commands may run
// long: a Lua script runs until it ends or SCRIPT KILL stops it, KEYS and
// SAVE take time in proportion to the keyspace. An event loop serves many
// connections from one goroutine, so it runs a pipeline holding such a
// command on a goroutine of its own, with a Batch of its own: the loop's
// other connections are served meanwhile (a connection's commands never
// wait for another's). The connection's later input is not read until that
// pipeline's replies are written, so replies keep their order. A connection
// served by a goroutine of its own needs none of this.
type LongRunner interface {
	// MayRunLong reports whether executing cmds may take long. The event
	// loop asks it of every pipeline: it must be cheap, and must not
	// allocate, for the commands that never run long.
	MayRunLong(cmds [][][]byte) bool
	// UseBatch makes the session's work gather in b from now on.
	UseBatch(b Batch)
}
