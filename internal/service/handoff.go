package service

import (
	"bytes"
	"time"

	"github.com/rlserver/rlserver/internal/snapshot"
)

// A cluster slot move, from the keyspace's side (docs/cluster.md, "Moving
// slots"): the old owner tracks the writes to the moving keys
// (TrackWrites), sends their state while it keeps serving them
// (ExportKeys), then the state of the keys written since
// (WrittenKeys, ExportNamed), the last time with the slots paused; the
// new owner stores each transfer in order (ImportKeys), later state
// replacing earlier.

// TrackWrites starts recording the keys for which match reports true
// that are written from now on (match runs on the shards' goroutines,
// concurrently, and must not keep key), until UntrackWrites.
func (s *Service) TrackWrites(match func(key []byte) bool) { s.cfg.Keys.Track(match) }

// WrittenKeys returns the keys written since TrackWrites or the previous
// WrittenKeys; all reports that a FLUSHALL dropped every key meanwhile.
func (s *Service) WrittenKeys() (keys []string, all bool) { return s.cfg.Keys.Dirty() }

// UntrackWrites stops recording writes.
func (s *Service) UntrackWrites() { s.cfg.Keys.Untrack() }

// ExportKeys encodes the state of the keys for which match reports true,
// limiter state, plain keys of every type and overrides, in the snapshot
// format, reading each shard's keys between its other work: the bulk a
// cluster node sends the node it hands slots over to (ImportKeys). It
// returns the encoding and the number of keys in it.
func (s *Service) ExportKeys(match func(key string) bool) ([]byte, int, error) {
	var b bytes.Buffer
	n, err := snapshot.EncodeKeys(&b, s.cfg.Rules, s.cfg.Keys, match, time.Now().UnixNano(), "rlserver")
	if err != nil {
		return nil, 0, err
	}
	return b.Bytes(), n, nil
}

// ExportNamed encodes, in the snapshot format, an order to forget each of
// names and then what the keyspace holds for each now: the keys written
// since a bulk ExportKeys. It returns the encoding and the number of keys
// in it.
func (s *Service) ExportNamed(names []string) ([]byte, int, error) {
	var b bytes.Buffer
	n, err := snapshot.EncodeNamed(&b, s.cfg.Rules, s.cfg.Keys, names, time.Now().UnixNano(), "rlserver")
	if err != nil {
		return nil, 0, err
	}
	return b.Bytes(), n, nil
}

// ImportKeys stores the keys ExportKeys or ExportNamed encoded, replacing
// any state they had here; with drop not nil, it first forgets every key
// for which drop reports true (a bulk transfer's slots start empty here).
// Limiter keys go under this node's rule of the same name and algorithm
// (rescaled if its numbers differ; dropped if it has none), as a snapshot
// is restored. It returns the number of keys stored.
func (s *Service) ImportKeys(data []byte, drop func(key string) bool) (int, error) {
	snap, err := snapshot.Decode(data)
	if err != nil {
		return 0, err
	}
	if drop != nil {
		s.cfg.Keys.ForgetMatching(drop)
	}
	st, err := snapshot.Restore(snap, s.cfg.Rules, s.cfg.Keys, time.Now().UnixNano())
	return st.Loaded + st.Plain, err
}

// DropKeys forgets every key for which match reports true, a chunk at a
// time: a node that handed slots over drops its copy of their keys.
func (s *Service) DropKeys(match func(key string) bool) { s.cfg.Keys.ForgetMatching(match) }
