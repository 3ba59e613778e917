package resp

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rlserver/rlserver/internal/keyspace"
)

// Errors a handler returns. The connection turns each into one error reply:
// a codedError keeps its code; anything else is prefixed with "ERR ", so the
// text matches Redis's wording where Redis has one.
var (
	errSyntax        = errors.New("syntax error")
	errNotInteger    = errors.New("value is not an integer or out of range")
	errDBIndex       = errors.New("DB index is out of range")
	errProtoNotInt   = errors.New("Protocol version is not an integer or out of range")
	errNoProto       = &codedError{"NOPROTO", "unsupported protocol version"}
	errBadClientName = errors.New("Client names cannot contain spaces, newlines or special characters.")
)

// codedError is an error whose reply starts with its own code instead of ERR
// (NOPROTO, WRONGTYPE, ...).
type codedError struct{ code, msg string }

// Error returns the reply text, code first.
func (e *codedError) Error() string { return e.code + " " + e.msg }

// errorText returns the reply text for err.
func errorText(err error) string {
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.Error()
	}
	if errors.Is(err, keyspace.ErrWrongKind) {
		return "WRONGTYPE Operation against a key holding the wrong kind of value"
	}
	return "ERR " + err.Error()
}

// errArity is Redis's reply to a wrong argument count; name is the command
// (and "|subcommand") in lower case.
func errArity(name string) error {
	return fmt.Errorf("wrong number of arguments for '%s' command", name)
}

// errUnknownCommand reproduces Redis's reply to an unknown command: the name
// and up to about 128 bytes of its arguments, each quoted.
func errUnknownCommand(args [][]byte) error {
	var b strings.Builder
	for _, a := range args[1:] {
		if b.Len() >= 128 {
			break
		}
		fmt.Fprintf(&b, "'%.*s' ", 128-b.Len(), a)
	}
	return fmt.Errorf("unknown command '%.128s', with args beginning with: %s", args[0], b.String())
}

// errUnknownSubcommand is Redis's reply to an unknown subcommand of a
// container command such as CLIENT.
func errUnknownSubcommand(command string, sub []byte) error {
	return fmt.Errorf("unknown subcommand '%.128s'. Try %s HELP.", sub, command)
}

// errCostAboveCapacity rejects a cost that could never be admitted, so the
// client gets an error it can fix rather than a denial it would retry forever.
func errCostAboveCapacity(cost, capacity int64, rule string) error {
	return fmt.Errorf("cost %d exceeds the capacity %d of rule '%s'; such a request could never be allowed", cost, capacity, rule)
}

// errCostNotPositive rejects a cost below 1; a cost that is not an integer
// gets Redis's errNotInteger instead.
func errCostNotPositive(cost int64) error {
	return fmt.Errorf("invalid cost '%d': must be a positive integer", cost)
}

func errHelloOption(opt []byte) error {
	return fmt.Errorf("Syntax error in HELLO option '%.128s'", opt)
}

func errUnrecognizedOption(opt []byte) error {
	return fmt.Errorf("Unrecognized option '%.128s'", opt)
}

func errSetInfoValue(attr []byte) error {
	return fmt.Errorf("%s cannot contain spaces, newlines or special characters.", strings.ToLower(string(attr)))
}

// errExecAbortBecause is Redis's reply to an EXEC refused before it ran
// (wrong arity, NOAUTH): the transaction is discarded, and the reason given.
func errExecAbortBecause(err error) error {
	return &codedError{"EXECABORT", "Transaction discarded because of: " + err.Error()}
}

// COMMAND GETKEYS's errors, in Redis's words.
var (
	errGetKeysUnknown = errors.New("Invalid command specified")
	errGetKeysNone    = errors.New("The command has no key arguments")
	errGetKeysArity   = errors.New("Invalid number of arguments specified for command")
	errGetKeysInvalid = errors.New("Invalid arguments specified for command")
)

// errCell is an error in redis-cell's words. redis-cell replies with the
// text "Cell error: Store error: <msg>", with no ERR code of its own.
func errCell(msg string) error { return &codedError{"Cell", "error: Store error: " + msg} }

var (
	errCellUsage = errCell("Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]")
	errZeroRates = errCell("Zero rates are not supported")
)
