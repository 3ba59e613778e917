//lint:file-ignore ST1005 error texts here are Redis's, capitals and full stops included: scripts and clients match on them

package scripting

import (
	"errors"
	"strings"
)

// Error is an error reply in Redis's exact wording. Its Text is the whole
// reply line without the leading '-' and the CRLF, code included ("ERR
// user_script:1: ...", "NOSCRIPT No matching script. Please use EVAL.").
// A script can raise an error whose text starts with any word, even a lower
// case one (redis.error_reply("key does not exist")), so the protocol layer
// must write Text as it is, never adding "ERR ".
type Error struct{ Text string }

// Error returns the reply text.
func (e *Error) Error() string { return e.Text }

// Replies Redis gives around scripts, for the command layer to return.
var (
	// ErrNoScript answers EVALSHA of a script that is not cached; clients
	// match this exact text to fall back to EVAL or SCRIPT LOAD.
	ErrNoScript = &Error{"NOSCRIPT No matching script. Please use EVAL."}
	// ErrBusy answers other clients while a script runs past the time limit.
	ErrBusy = &Error{"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."}
	// ErrNotBusy answers SCRIPT KILL when no script is past the time limit.
	ErrNotBusy = &Error{"NOTBUSY No scripts in execution right now."}
	// ErrUnkillable answers SCRIPT KILL for a script that has written:
	// stopping it would leave half its writes applied.
	ErrUnkillable = &Error{"UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command."}
	// ErrWriteScriptReadOnly answers EVAL_RO/EVALSHA_RO of a script whose
	// shebang does not declare no-writes.
	ErrWriteScriptReadOnly = &Error{"ERR Can not execute a script with write flag using *_ro command."}
	errKeysNotInteger      = &Error{"ERR value is not an integer or out of range"}
	errKeysNegative        = &Error{"ERR Number of keys can't be negative"}
	errKeysTooMany         = &Error{"ERR Number of keys can't be greater than number of args"}
)

// Errors a Caller returns instead of running a command; a script sees each
// as the error Redis raises in that case ("ERR " and this text). They are
// failures of the call, not replies: the command did not run. Their text
// is Redis's, capitals and full stop included, because scripts and clients
// match on it.
var (
	// ErrUnknownCommand: no such command.
	ErrUnknownCommand = errors.New("Unknown Redis command called from script")
	// ErrWrongArity: the command exists but not with this many arguments.
	ErrWrongArity = errors.New("Wrong number of args calling Redis command from script")
	// ErrNotAllowed: a command scripts may not run (EVAL, MULTI, blocking
	// commands, SCRIPT, ...).
	ErrNotAllowed = errors.New("This Redis command is not allowed from script")
	// ErrWriteFromReadOnly: a write command inside EVAL_RO, EVALSHA_RO or a
	// script whose shebang declares no-writes. A Caller must refuse it
	// before running it whenever the readOnly it is given is true.
	ErrWriteFromReadOnly = errors.New("Write commands are not allowed from read-only scripts.")
)

// Rerun is what a Caller returns, instead of running a command, to have the
// script stopped and run again from the start by Run's caller, typically
// with more of the keyspace in reach (a script touching a key it did not
// declare). Run honours it only while the script has not run a write
// command: it then stops the script at once, whatever the script does to
// catch errors (pcall, redis.pcall), and returns the *Rerun; no reply is
// appended, and nothing the script did is visible but its reads and
// redis.log. Once the script has written, a rerun would apply its writes
// twice, so the script sees Err instead, as any failure of a call.
type Rerun struct{ Err error }

// Error returns Err's text: what a client sees if the caller of Run does
// not run the script again.
func (r *Rerun) Error() string { return r.Err.Error() }

// Unwrap returns Err.
func (r *Rerun) Unwrap() error { return r.Err }

// Texts of errors the script itself raises, in Redis's words.
const (
	msgNoArgs       = "Please specify at least one argument for this redis lib call"
	msgBadArgType   = "Lua redis lib command arguments must be strings or integers"
	msgReadOnly     = "Attempt to modify a readonly table"
	msgKilled       = "ERR Script killed by user with SCRIPT KILL..."
	msgWrongArgs    = "wrong number of arguments"
	msgWrongArgType = "wrong number or type of arguments"
)

// errorTableText turns an error text into what Redis stores in an error
// table's err field (luaPushErrorBuff): a text that starts with '-' carries
// its own code up to the first space; any other text gets the code ERR. Line
// breaks at either end are dropped.
func errorTableText(text string) string {
	code, msg := "ERR", text
	if strings.HasPrefix(text, "-") {
		if sp := strings.IndexByte(text, ' '); sp >= 0 {
			code, msg = text[1:sp], text[sp+1:]
		} else {
			msg = text[1:]
		}
	}
	return code + " " + strings.Trim(msg, "\r\n")
}

// replyLine makes text safe as one RESP error or status line: Redis replaces
// each CR and LF inside it by a space.
func replyLine(text string) string {
	if !strings.ContainsAny(text, "\r\n") {
		return text
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, text)
}
