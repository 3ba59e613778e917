// Package rules defines rate-limit rules, validates them, loads them from a
// YAML file, and publishes the current set atomically.
//
// A published Set is immutable. Readers (every connection, on every
// decision) take the current one with a single atomic load; writers build a
// new Set and swap it in, so no request ever sees half of a change.
package rules

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/internal/algorithms"
)

// Bounds on a rule's fields, defined beside the arithmetic that relies on
// them (see algorithms.Params).
const (
	MaxLimit  = algorithms.MaxLimit
	MinWindow = time.Duration(algorithms.MinWindow)
	MaxWindow = time.Duration(algorithms.MaxWindow)
	// MaxDrain bounds how long a bucket takes to go from full to empty
	// (burst × window / limit), about 100 years, so every duration a
	// bucket reports fits in an int64 of nanoseconds with room to spare.
	MaxDrain = time.Duration(algorithms.MaxDrain)
)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// Def is a rule as an operator writes it.
type Def struct {
	Name      string
	Algorithm algorithms.Algorithm
	Limit     int64         // units per Window, 1..MaxLimit
	Window    time.Duration // MinWindow..MaxWindow
	Burst     int64         // buckets only; 0 means "not set" (capacity = Limit)
	// Shadow puts the rule in shadow mode: decisions are computed and
	// spent as usual, but every reply admits; a denial that would have
	// happened is only counted. It changes no numbers, so switching it
	// keeps every key's state.
	Shadow bool
}

// The modes a rule is in, as the rules file and RL.RULE GET write them.
const (
	ModeEnforce = "enforce"
	ModeShadow  = "shadow"
)

// Mode returns the rule's mode: ModeShadow or ModeEnforce.
func (d Def) Mode() string {
	if d.Shadow {
		return ModeShadow
	}
	return ModeEnforce
}

// ParseMode reads a mode as written in the rules file: "enforce" (the
// default) or "shadow"; it reports whether the mode is shadow.
func ParseMode(mode string) (shadow bool, err error) {
	switch mode {
	case ModeEnforce:
		return false, nil
	case ModeShadow:
		return true, nil
	}
	return false, fieldError("mode", mode, "must be enforce or shadow")
}

// Validate checks every field and returns a *FieldError naming the first bad one.
func (d Def) Validate() error {
	if !namePattern.MatchString(d.Name) {
		return fieldError("name", d.Name, "must be 1 to 64 characters from A-Z a-z 0-9 _ . : -")
	}
	if d.Algorithm == 0 {
		return fieldError("algorithm", "", "must be one of token_bucket, leaky_bucket, fixed_window, sliding_log, sliding_counter")
	}
	if d.Limit < 1 || d.Limit > MaxLimit {
		return fieldError("limit", strconv.FormatInt(d.Limit, 10), "must be an integer from 1 to 1000000000")
	}
	if d.Algorithm == algorithms.SlidingLog && d.Limit > algorithms.MaxSlidingLogLimit {
		return fieldError("limit", strconv.FormatInt(d.Limit, 10),
			"sliding_log keeps one entry per admitted unit, so its limit must be at most 100000 (use sliding_counter for larger limits)")
	}
	if d.Window < MinWindow || d.Window > MaxWindow {
		return fieldError("window", d.Window.String(), "must be a duration from 1ms to 366 days (8784h)")
	}
	if d.Burst != 0 {
		if !d.Algorithm.IsBucket() {
			return fieldError("burst", strconv.FormatInt(d.Burst, 10), "only token_bucket and leaky_bucket take a burst")
		}
		if d.Burst < 1 || d.Burst > MaxLimit {
			return fieldError("burst", strconv.FormatInt(d.Burst, 10), "must be an integer from 1 to 1000000000")
		}
		drain := float64(d.Burst) / float64(d.Limit) * float64(d.Window)
		if drain > float64(MaxDrain) {
			return fieldError("burst", strconv.FormatInt(d.Burst, 10),
				fmt.Sprintf("burst × window / limit (the time to refill the bucket) must be at most %dh (about 100 years)", MaxDrain/time.Hour))
		}
	}
	return nil
}

// Params returns the numbers the algorithms work with.
func (d Def) Params() algorithms.Params {
	c := d.Limit
	if d.Burst != 0 {
		c = d.Burst
	}
	return algorithms.Params{Algorithm: d.Algorithm, Limit: d.Limit, Window: int64(d.Window), Capacity: c}
}

// ParseDef builds a Def from the words of a command or a file's values and
// validates it. burst is "" when not given.
func ParseDef(name, algorithm, limit, window, burst string) (Def, error) {
	d := Def{Name: name}
	a, ok := algorithms.ParseAlgorithm(algorithm)
	if !ok {
		return d, fieldError("algorithm", algorithm, "must be one of token_bucket, leaky_bucket, fixed_window, sliding_log, sliding_counter")
	}
	d.Algorithm = a
	n, err := strconv.ParseInt(limit, 10, 64)
	if err != nil || n < 1 || n > MaxLimit {
		return d, fieldError("limit", limit, "must be an integer from 1 to 1000000000")
	}
	d.Limit = n
	w, err := time.ParseDuration(window)
	if err != nil {
		return d, fieldError("window", window, "must be a Go duration such as 500ms, 1s, 1m or 24h, from 1ms to 366 days (8784h)")
	}
	d.Window = w
	if burst != "" {
		b, err := strconv.ParseInt(burst, 10, 64)
		if err != nil || b < 1 || b > MaxLimit {
			return d, fieldError("burst", burst, "must be an integer from 1 to 1000000000")
		}
		d.Burst = b
	}
	err = d.Validate()
	var fe *FieldError
	if errors.As(err, &fe) {
		// Validate formats the parsed value (9000h0m0s, 500µs); echo what
		// the operator wrote (9000h, 500us).
		fe.Value = map[string]string{"name": name, "algorithm": algorithm, "limit": limit, "window": window, "burst": burst}[fe.Field]
	}
	return d, err
}

// MustParseDef is ParseDef for tests and examples: it panics on an invalid
// definition.
func MustParseDef(name, algorithm, limit, window, burst string) Def {
	d, err := ParseDef(name, algorithm, limit, window, burst)
	if err != nil {
		panic(err)
	}
	return d
}

// Rule is a published rule: its definition plus the identities the shards
// key state by.
type Rule struct {
	Def
	Params algorithms.Params
	// ID names the rule's state. It stays the same while only limit,
	// window or burst change (the budget already spent carries over), and
	// is new when the rule is created or its algorithm changes (its keys
	// start fresh). IDs are never reused, so a deleted rule's state can
	// never be picked up by a later rule of the same name.
	ID uint64
	// Rev increases every time the rule's numbers change; a shard holding
	// state from an older Rev rescales it before use.
	Rev uint64
}

// Set is one immutable version of the rules.
type Set struct {
	// Version increases by one with every change published.
	Version uint64
	// LoadedAt is when this set was published, for operators.
	LoadedAt time.Time
	byName   map[string]*Rule
	byID     map[uint64]*Rule
	sorted   []*Rule
}

// Get returns the rule with the given name, or nil. It does not allocate.
func (s *Set) Get(name []byte) *Rule { return s.byName[string(name)] }

// ByID returns the live rule with the given ID, or nil if it was deleted or
// its algorithm changed.
func (s *Set) ByID(id uint64) *Rule { return s.byID[id] }

// Rules returns the rules sorted by name. The slice must not be modified.
func (s *Set) Rules() []*Rule { return s.sorted }

// Len returns the number of rules.
func (s *Set) Len() int { return len(s.sorted) }

// Store publishes rule sets. It is safe for concurrent use: Load is one
// atomic read; writers are serialised by a mutex and never block readers.
type Store struct {
	mu      sync.Mutex // held by writers while they build and swap a Set
	current atomic.Pointer[Set]
	nextID  uint64 // guarded by mu
	nextRev uint64 // guarded by mu
}

// NewStore returns a Store publishing defs as version 1.
func NewStore(defs []Def) (*Store, error) {
	st := &Store{}
	empty := &Set{byName: map[string]*Rule{}, byID: map[uint64]*Rule{}}
	st.current.Store(empty)
	if _, err := st.Replace(defs); err != nil {
		return nil, err
	}
	return st, nil
}

// Load returns the current set.
func (st *Store) Load() *Set { return st.current.Load() }

// Put creates or changes one rule and publishes the result.
func (st *Store) Put(d Def) (*Set, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	next := st.edit(func(m map[string]Def) { m[d.Name] = d })
	return next, nil
}

// Delete removes a rule and publishes the result; it reports whether the
// rule existed. Its keys' state becomes unreachable at once.
func (st *Store) Delete(name string) (*Set, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	cur := st.current.Load()
	if cur.byName[name] == nil {
		return cur, false
	}
	return st.edit(func(m map[string]Def) { delete(m, name) }), true
}

// Replace publishes exactly defs as the new rule set (rules kept by name
// keep their state as Put would). It validates everything first and
// publishes nothing on error.
func (st *Store) Replace(defs []Def) (*Set, error) {
	if err := validateAll(defs); err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.edit(func(m map[string]Def) {
		clear(m)
		for _, d := range defs {
			m[d.Name] = d
		}
	}), nil
}

// Apply creates or changes every rule in defs as one publication: rules
// not in defs are kept. It validates everything first and publishes nothing
// on error. A rule whose definition is unchanged keeps its identity and
// revision, so its keys are untouched.
func (st *Store) Apply(defs []Def) (*Set, error) {
	if err := validateAll(defs); err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.edit(func(m map[string]Def) {
		for _, d := range defs {
			m[d.Name] = d
		}
	}), nil
}

// ReplaceOwned publishes defs as every rule owns selects, as one
// publication: a rule owns selects that defs lacks is deleted, and the rules
// it does not select are kept untouched (rules kept by name keep their state
// as Put would). It lets one owner of a part of the rules — a front end's
// configuration under a reserved name prefix, or an authoritative rules
// file beside it — replace its part without a read-modify-write race with
// the other. Every def must be owned; everything is validated first and
// nothing is published on error.
func (st *Store) ReplaceOwned(defs []Def, owns func(name string) bool) (*Set, error) {
	if err := validateAll(defs); err != nil {
		return nil, err
	}
	for _, d := range defs {
		if !owns(d.Name) {
			return nil, fmt.Errorf("rule '%s': not among the rules being replaced", d.Name)
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.edit(func(m map[string]Def) {
		for name := range m {
			if owns(name) {
				delete(m, name)
			}
		}
		for _, d := range defs {
			m[d.Name] = d
		}
	}), nil
}

func validateAll(defs []Def) error {
	seen := make(map[string]bool, len(defs))
	for _, d := range defs {
		if err := d.Validate(); err != nil {
			return fmt.Errorf("rule '%s': %w", d.Name, err)
		}
		if seen[d.Name] {
			return fmt.Errorf("rule '%s': defined twice", d.Name)
		}
		seen[d.Name] = true
	}
	return nil
}

// edit applies change to the current definitions and publishes the result.
// The caller holds st.mu.
func (st *Store) edit(change func(map[string]Def)) *Set {
	cur := st.current.Load()
	defs := make(map[string]Def, len(cur.sorted)+1)
	for _, r := range cur.sorted {
		defs[r.Name] = r.Def
	}
	change(defs)
	next := &Set{
		Version:  cur.Version + 1,
		LoadedAt: time.Now(),
		byName:   make(map[string]*Rule, len(defs)),
		byID:     make(map[uint64]*Rule, len(defs)),
	}
	for name, d := range defs {
		r := &Rule{Def: d, Params: d.Params()}
		switch old := cur.byName[name]; {
		case old != nil && old.Def == d:
			r = old // unchanged: same identity and revision
		case old != nil && old.Algorithm == d.Algorithm:
			r.ID = old.ID
			st.nextRev++
			r.Rev = st.nextRev
		default:
			st.nextID++
			st.nextRev++
			r.ID, r.Rev = st.nextID, st.nextRev
		}
		next.byName[name] = r
		next.byID[r.ID] = r
		next.sorted = append(next.sorted, r)
	}
	slices.SortFunc(next.sorted, func(a, b *Rule) int { return strings.Compare(a.Name, b.Name) })
	st.current.Store(next)
	return next
}
