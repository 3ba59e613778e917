package service

import (
	"fmt"

	"github.com/rlserver/rlserver/internal/rules"
)

// PutRule creates or changes a rule and brings the keyspace up to date
// through h: a changed limit, window or burst keeps the budget keys have
// spent (rescaled); a changed algorithm starts the rule's keys fresh.
func (s *Service) PutRule(h Handle, d rules.Def) error {
	if err := s.checkUnreserved(d.Name); err != nil {
		return err
	}
	if _, err := s.cfg.Rules.Put(d); err != nil {
		return err
	}
	h.Reconcile()
	return nil
}

// DeleteRule deletes the rule named name, and every key's state under it,
// and reports whether it existed. A managed rule (reserved name) is refused.
func (s *Service) DeleteRule(h Handle, name string) (bool, error) {
	if err := s.checkUnreserved(name); err != nil {
		return false, err
	}
	if _, ok := s.cfg.Rules.Delete(name); !ok {
		return false, nil
	}
	h.Reconcile()
	return true, nil
}

// Reload is what a rules reload did.
type Reload struct {
	Set     *rules.Set // the rules now published
	Deleted []string   // rules the reload deleted (RulesAuthoritative)
}

// ReloadRules re-reads the rules file and publishes it — applied over the
// current rules, or with RulesAuthoritative as all the rules — as one
// change, all or nothing: on any error the current rules stay. It messages
// every shard, so it must not be called while holding shards.
func (s *Service) ReloadRules() (Reload, error) {
	if s.cfg.RulesFile == "" {
		return Reload{}, ErrNoRulesFile
	}
	defs, err := rules.LoadFile(s.cfg.RulesFile)
	if err != nil {
		return Reload{}, err
	}
	for _, d := range defs {
		if err := s.checkUnreserved(d.Name); err != nil {
			return Reload{}, fmt.Errorf("%s: %w", s.cfg.RulesFile, err)
		}
	}
	before := s.cfg.Rules.Load()
	var after *rules.Set
	if s.cfg.RulesAuthoritative {
		// Every rule but the managed ones: those belong to front ends.
		after, err = s.cfg.Rules.ReplaceOwned(defs, s.unreserved)
	} else {
		after, err = s.cfg.Rules.Apply(defs)
	}
	if err != nil {
		return Reload{}, err
	}
	s.cfg.Keys.Reconcile()
	r := Reload{Set: after}
	for _, old := range before.Rules() {
		if after.Get([]byte(old.Name)) == nil {
			r.Deleted = append(r.Deleted, old.Name)
		}
	}
	return r, nil
}

// HasRulesFile reports whether ReloadRules has a file to read.
func (s *Service) HasRulesFile() bool { return s.cfg.RulesFile != "" }
