package commands

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rlserver/rlserver/internal/rules"
	"github.com/rlserver/rlserver/internal/scripting"
	"github.com/rlserver/rlserver/internal/server"
	"github.com/rlserver/rlserver/internal/service"
)

// A reply error: the full text of an error reply, code first ("ERR ...",
// "WRONGTYPE ...", "NOAUTH ..."), in Redis's words where Redis has them.
// Handlers return them for what they refuse themselves; errorText turns
// every other package's typed errors into replies.
type replyError string

// Error returns the reply's text.
func (e replyError) Error() string { return string(e) }

// errf formats an ERR reply.
func errf(format string, args ...any) error { return replyError("ERR " + fmt.Sprintf(format, args...)) }

// coded is an error reply with its own code instead of ERR.
func coded(code, msg string) error { return replyError(code + " " + msg) }

// The replies handlers return, in Redis's words.
var (
	errSyntax        = replyError("ERR syntax error")
	errNotInteger    = replyError("ERR value is not an integer or out of range")
	errOverflow      = replyError("ERR increment or decrement would overflow")
	errDecrOverRun   = replyError("ERR decrement would overflow")
	errWrongType     = replyError("WRONGTYPE Operation against a key holding the wrong kind of value")
	errDBIndex       = replyError("ERR DB index is out of range")
	errProtoNotInt   = replyError("ERR Protocol version is not an integer or out of range")
	errNoProto       = coded("NOPROTO", "unsupported protocol version")
	errBadClientName = replyError("ERR Client names cannot contain spaces, newlines or special characters.")
	errNoAuth        = coded("NOAUTH", "Authentication required.")
	errHelloAuth     = coded("NOAUTH", "HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
	errExpireNXXX    = replyError("ERR NX and XX, GT or LT options at the same time are not compatible")
	errExpireGTLT    = replyError("ERR GT and LT options at the same time are not compatible")
)

// errorText returns the reply for err: the one table from every typed error
// rlserver's packages return to the text a Redis client reads.
func errorText(err error) string {
	var (
		reply    replyError
		tooLarge *service.TooLargeError
		script   *scripting.Error
	)
	switch {
	case errors.As(err, &reply):
		return string(reply)
	case errors.As(err, &script): // Redis's words, code included (even a script's lower-case one)
		return script.Text
	case errors.Is(err, server.ErrWrongPass):
		return "WRONGPASS invalid username-password pair or user is disabled."
	case errors.Is(err, server.ErrNoPassword):
		return "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	case errors.Is(err, service.ErrOddPairs):
		return string(errSyntax)
	case errors.Is(err, service.ErrTooManyPairs):
		return fmt.Sprintf("ERR too many pairs: RL.ALLOWALL takes at most %d key rule pairs", service.MaxGroup)
	case errors.Is(err, service.ErrSaveInProgress):
		return "ERR Background save already in progress"
	case errors.As(err, &tooLarge), errors.Is(err, rules.ErrUnknownRule):
		return "ERR " + err.Error()
	}
	// Everything else — cost and pair errors, rule field errors, the key
	// limit, a failed shard — says what is wrong in its own words.
	return "ERR " + err.Error()
}

// errArity is Redis's reply to a wrong argument count; name is the command
// (and "|subcommand") in lower case.
func errArity(name string) error {
	return errf("wrong number of arguments for '%s' command", name)
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
	return errf("unknown command '%.128s', with args beginning with: %s", args[0], b.String())
}

// errUnknownSubcommand is Redis's reply to an unknown subcommand of a
// container command such as CLIENT.
func errUnknownSubcommand(command string, sub []byte) error {
	return errf("unknown subcommand '%.128s'. Try %s HELP.", sub, command)
}

// errCostNotPositive rejects a cost below 1; a cost that is not an integer
// gets Redis's errNotInteger instead.
func errCostNotPositive(cost int64) error { return &service.CostError{Cost: cost} }

func errHelloOption(opt []byte) error {
	return errf("Syntax error in HELLO option '%.128s'", opt)
}

func errUnrecognizedOption(opt []byte) error {
	return errf("Unrecognized option '%.128s'", opt)
}

func errSetInfoValue(attr []byte) error {
	return errf("%s cannot contain spaces, newlines or special characters.", strings.ToLower(string(attr)))
}

// errExecAbortBecause is Redis's reply to an EXEC refused before it ran
// (wrong arity, NOAUTH): the transaction is discarded, and the reason given.
func errExecAbortBecause(err error) error {
	text := errorText(err)
	if _, rest, ok := strings.Cut(text, " "); ok && strings.HasPrefix(text, "ERR ") {
		text = rest
	}
	return coded("EXECABORT", "Transaction discarded because of: "+text)
}

// COMMAND GETKEYS's errors, in Redis's words.
var (
	errGetKeysUnknown = replyError("ERR Invalid command specified")
	errGetKeysNone    = replyError("ERR The command has no key arguments")
	errGetKeysArity   = replyError("ERR Invalid number of arguments specified for command")
	errGetKeysInvalid = replyError("ERR Invalid arguments specified for command")
)

// errCell is an error in redis-cell's words. redis-cell replies with the
// text "Cell error: Store error: <msg>", with no ERR code of its own.
func errCell(msg string) error { return coded("Cell", "error: Store error: "+msg) }

var (
	errCellUsage = errCell("Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]")
	errZeroRates = errCell("Zero rates are not supported")
)
