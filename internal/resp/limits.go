package resp

import (
	"time"
	"unsafe"
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
	// costs the server some hundreds of bytes of bookkeeping beyond its
	// own bytes (the reader's slice header, and for a command with a key
	// per argument an operation for it), so MaxArgs bounds that part of a
	// command's memory (its bytes are bounded by QueryBufferLimit). The
	// commands a MULTI queues count together, as the one command EXEC is.
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
// one command's bookkeeping stays under about 40 MiB.
var DefaultLimits = Limits{
	MaxBulkLen:       512 << 20,
	MaxArgs:          1 << 16,
	QueryBufferLimit: 1 << 30,
	OutputLimit:      64 << 20,
	OutputTimeout:    30 * time.Second,
	HandshakeTimeout: 10 * time.Second,
	MaxAuthFailures:  10,
}

// maxInline bounds a command sent as one text line (telnet style), as
// Redis's PROTO_INLINE_MAX_SIZE does: a longer line is a protocol error,
// whether or not its end has arrived.
const maxInline = 64 << 10

// Before a connection has authenticated (when a password is required), its
// commands must be small: at most PreAuthMaxArgs arguments of at most
// PreAuthMaxBulk bytes each, as Redis limits unauthenticated clients since
// CVE-2021-32675. AUTH and HELLO ... AUTH ... SETNAME fit. A larger header is
// refused as it arrives and the connection closed, so an unauthenticated
// client can make the server buffer at most about PreAuthMaxArgs ×
// PreAuthMaxBulk bytes.
const (
	PreAuthMaxArgs = 10
	PreAuthMaxBulk = 16 << 10
)

// KeepBuffer is the most memory, in bytes, a connection keeps in each
// reusable buffer (replies, argument lists, key operations, the MULTI queue)
// once the command that grew it is done; a larger buffer is dropped, so one
// big command does not pin its memory for the life of the connection.
const KeepBuffer = 1 << 20

// SliceHeaderSize is the size of a slice header ([]byte, [][]byte...), in
// bytes: what the reader spends per argument beyond its bytes.
const SliceHeaderSize = unsafe.Sizeof([]byte(nil))
