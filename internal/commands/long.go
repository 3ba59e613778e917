package commands

import (
	"github.com/rlserver/rlserver/internal/server"
)

var _ server.LongRunner = (*session)(nil)

// MayRunLong implements server.LongRunner: it reports whether cmds hold a
// command that may run long (flagLong: a script, KEYS, SAVE, FLUSHALL...),
// an EXEC of a transaction that queued one, or in cluster mode a command
// that may wait for another node (clusterMayWait). The event loop asks it of
// every pipeline, so a name whose first byte and length fit no such command
// costs one table load, and nothing allocates.
func (c *session) MayRunLong(cmds [][][]byte) bool {
	if c.clusterMayWait(cmds) {
		return true
	}
	for _, args := range cmds {
		if len(args) == 0 || len(args[0]) == 0 || len(args[0]) >= 32 ||
			commands.longNames[args[0][0]]&(1<<len(args[0])) == 0 {
			continue
		}
		cmd := commands.lookup(args[0])
		switch {
		case cmd == nil:
		case cmd.flags&flagLong != 0:
			return true
		case cmd.name == "exec" && c.queuedLong():
			return true
		}
	}
	return false
}

// queuedLong reports whether the transaction queued a command that may run
// long.
func (c *session) queuedLong() bool {
	for _, args := range c.queue {
		if cmd := commands.lookup(args[0]); cmd != nil && cmd.flags&flagLong != 0 {
			return true
		}
	}
	return false
}

// UseBatch implements server.LongRunner: the connection's work gathers in b
// from now on.
func (c *session) UseBatch(b server.Batch) { c.batch = b.(*batch) }
