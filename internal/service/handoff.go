package service

import (
	"bytes"
	"time"

	"github.com/rlserver/rlserver/internal/snapshot"
)

// ExportKeys encodes the state of the keys for which match reports true,
// limiter state and plain keys, in the snapshot format: what a cluster
// node sends the node it hands slots over to (ImportKeys). It returns the
// encoding and the number of keys in it.
func (s *Service) ExportKeys(match func(key string) bool) ([]byte, int, error) {
	var b bytes.Buffer
	n, err := snapshot.EncodeKeys(&b, s.cfg.Rules, s.cfg.Keys, match, time.Now().UnixNano(), "rlserver")
	if err != nil {
		return nil, 0, err
	}
	return b.Bytes(), n, nil
}

// ImportKeys stores the keys ExportKeys encoded, replacing any state they
// had here. Limiter keys go under this node's rule of the same name and
// algorithm (rescaled if its numbers differ; dropped if it has none), as a
// snapshot is restored. It returns the number of keys stored.
func (s *Service) ImportKeys(data []byte) (int, error) {
	snap, err := snapshot.Decode(data)
	if err != nil {
		return 0, err
	}
	st, err := snapshot.Restore(snap, s.cfg.Rules, s.cfg.Keys, time.Now().UnixNano())
	return st.Loaded + st.Plain, err
}
