package resp

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/rlserver/rlserver/internal/keyspace"
)

// Limits bound what one client can make the server hold. A client that
// breaches one gets an error reply and is disconnected; no other client
// notices. The zero Limits means DefaultLimits.
type Limits struct {
	// MaxBulkLen is the largest argument, in bytes. A declared length
	// above it is refused as soon as its header arrives, before a byte of
	// it is buffered.
	MaxBulkLen int64
	// MaxArgs is the most arguments one command may have. Each argument
	// costs the server up to argOverhead bytes of bookkeeping beyond its
	// own bytes, so MaxArgs × argOverhead bounds that part of a command's
	// memory (its bytes are bounded by QueryBufferLimit). The commands a
	// MULTI queues count together, as the one command EXEC is.
	MaxArgs int64
	// QueryBufferLimit is the most bytes of a command not yet complete,
	// and the most bytes of arguments a MULTI may queue.
	QueryBufferLimit int64
	// OutputLimit is the most reply bytes a connection may have waiting
	// to be written. It is enforced as replies are built: the reply that
	// would cross it is not appended, and the connection is closed.
	OutputLimit int64
	// OutputTimeout disconnects a client that leaves its replies unread
	// (a write blocked) this long; 0 never does.
	OutputTimeout time.Duration
	// HandshakeTimeout is how long a new connection may take to finish
	// its TLS handshake and, when a password is required, to
	// authenticate; it is closed otherwise. 0 never closes it. It is
	// independent of the idle timeout.
	HandshakeTimeout time.Duration
	// MaxAuthFailures closes a connection after this many failed AUTH
	// (or HELLO ... AUTH) attempts; 0 never does.
	MaxAuthFailures int
}

// DefaultLimits are Redis's defaults where Redis has them
// (proto-max-bulk-len, client-query-buffer-limit); MaxArgs is chosen so
// one command's bookkeeping stays under 64 MiB (see argOverhead).
var DefaultLimits = Limits{
	MaxBulkLen:       512 << 20,
	MaxArgs:          1 << 16,
	QueryBufferLimit: 1 << 30,
	OutputLimit:      64 << 20,
	OutputTimeout:    30 * time.Second,
	HandshakeTimeout: 10 * time.Second,
	MaxAuthFailures:  10,
}

// argOverhead is the most memory, in bytes, the server commits per argument
// of one command beyond the argument's own bytes: the reader's slice header
// for it, and, for a command that touches one key per argument (DEL,
// EXISTS, RL.ALLOWALL), the keyspace.Op built for it and the dispatcher's
// pointer to its shard. Each of those lives in a slice grown by append, so
// up to twice that is allocated at the moment a slice doubles.
const argOverhead = 2 * (sliceHeaderSize + opSize + unsafe.Sizeof(uintptr(0)))

// maxInline bounds a command sent as one text line (telnet style), as
// Redis's PROTO_INLINE_MAX_SIZE does: a longer line is a protocol error,
// whether or not its end has arrived.
const maxInline = 64 << 10

// Before a connection has authenticated (when a password is required), its
// commands must be small: at most preAuthMaxArgs arguments of at most
// preAuthMaxBulk bytes each, as Redis limits unauthenticated clients since
// CVE-2021-32675. AUTH and HELLO ... AUTH ... SETNAME fit. A larger header is
// refused as it arrives and the connection closed, so an unauthenticated
// client can make the server buffer at most about preAuthMaxArgs ×
// preAuthMaxBulk bytes.
const (
	preAuthMaxArgs = 10
	preAuthMaxBulk = 16 << 10
)

// keepBookkeeping is the most memory, in bytes, a connection keeps in each
// reusable buffer (replies, argument lists, key operations, the MULTI queue)
// once the command that grew it is done; a larger buffer is dropped, so one
// big command does not pin its memory for the life of the connection.
const keepBookkeeping = 1 << 20

// opSize is the size of a keyspace.Op, and sliceHeaderSize of a slice header
// ([]byte, [][]byte...), in bytes.
const (
	opSize          = unsafe.Sizeof(keyspace.Op{})
	sliceHeaderSize = unsafe.Sizeof([]byte(nil))
)

// reserveQueued counts a command MULTI is about to queue against the limits
// of one command, since EXEC runs the whole queue as one: at most MaxArgs
// arguments and QueryBufferLimit bytes of them in all. Over either, the
// command is refused and the transaction will abort.
func (c *client) reserveQueued(args [][]byte) error {
	if len(c.queue) == 0 {
		c.queuedArgs, c.queuedBytes = 0, 0
	}
	n := int64(0)
	for _, a := range args {
		n += int64(len(a))
	}
	lim := &c.srv.limits
	if c.queuedArgs+int64(len(args)) > lim.MaxArgs || c.queuedBytes+n > lim.QueryBufferLimit {
		return errQueueFull(lim)
	}
	c.queuedArgs += int64(len(args))
	c.queuedBytes += n
	return nil
}

func errQueueFull(lim *Limits) error {
	return fmt.Errorf("transaction too large: the commands queued since MULTI may hold at most --max-args %d arguments and --client-query-buffer-limit %d bytes", lim.MaxArgs, lim.QueryBufferLimit)
}
