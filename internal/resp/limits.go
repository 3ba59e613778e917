package resp

import "time"

// Limits bound what one client can make the server hold. A client that
// breaches one gets an error reply and is disconnected; no other client
// notices.
type Limits struct {
	// MaxBulkLen is the largest argument, in bytes. A declared length
	// above it is refused as soon as its header arrives, before a byte of
	// it is buffered.
	MaxBulkLen int64
	// MaxArgs is the most arguments one command may have.
	MaxArgs int64
	// QueryBufferLimit is the most bytes of a command not yet complete.
	QueryBufferLimit int64
	// OutputLimit is the most reply bytes one pipeline may produce.
	OutputLimit int64
	// OutputTimeout disconnects a client that leaves its replies unread
	// (a write blocked) this long; 0 never does.
	OutputTimeout time.Duration
}

// DefaultLimits are Redis's defaults, where Redis has them.
var DefaultLimits = Limits{
	MaxBulkLen:       512 << 20,
	MaxArgs:          1 << 20,
	QueryBufferLimit: 1 << 30,
	OutputLimit:      64 << 20,
	OutputTimeout:    30 * time.Second,
}

// maxInline bounds a command sent as one text line (telnet style), as
// Redis's PROTO_INLINE_MAX_SIZE does.
const maxInline = 64 << 10
