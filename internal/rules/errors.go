package rules

import (
	"errors"
	"fmt"
)

// ErrUnknownRule is returned (wrapped with the rule's name) when a command
// names a rule the current set does not have.
var ErrUnknownRule = errors.New("unknown rule")

// UnknownRule returns ErrUnknownRule naming the rule, as the RESP layer
// shows it: "unknown rule 'name'".
func UnknownRule(name string) error {
	return fmt.Errorf("%w '%s'", ErrUnknownRule, name)
}

// FieldError says which field of a rule is invalid and why.
type FieldError struct {
	Field  string // "name", "algorithm", "limit", "window" or "burst"
	Value  string // as given
	Reason string // what a valid value looks like
}

// Error names the field, the value given and what a valid one looks like.
func (e *FieldError) Error() string {
	return fmt.Sprintf("invalid %s '%s': %s", e.Field, e.Value, e.Reason)
}

func fieldError(field, value, reason string) error {
	return &FieldError{Field: field, Value: value, Reason: reason}
}
