// Package resp is the Redis serialization protocol, and nothing else: a
// Reader that parses requests (multibulk, and inline commands as telnet and
// redis-cli send them) into slices of its read buffer, checking the
// protocol's limits as headers arrive, and a Writer that encodes replies in
// RESP2 or RESP3 into a reused buffer bounded by an output limit. Neither
// allocates once its buffers have grown, so a pipeline of decisions is
// served without allocating. Connections live in internal/server, commands
// in internal/commands.
package resp
