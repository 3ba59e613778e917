package service

import "github.com/rlserver/rlserver/internal/snapshot"

// Persistent reports whether snapshots are on.
func (s *Service) Persistent() bool { return s.cfg.Snapshots != nil }

// Save writes a snapshot and returns once it is on disk. It messages every
// shard, chunk by chunk, so it must not be called while holding shards.
func (s *Service) Save() error {
	if s.cfg.Snapshots == nil {
		return ErrNoPersistence
	}
	return s.cfg.Snapshots.Save()
}

// BGSave starts a snapshot in the background.
func (s *Service) BGSave() error {
	if s.cfg.Snapshots == nil {
		return ErrNoPersistence
	}
	return s.cfg.Snapshots.BGSave()
}

// SaveStatus describes the last snapshot attempt.
type SaveStatus = snapshot.Status

// SnapshotStatus describes the last snapshot (the zero Status when
// persistence is off).
func (s *Service) SnapshotStatus() SaveStatus {
	if s.cfg.Snapshots == nil {
		return SaveStatus{}
	}
	return s.cfg.Snapshots.Status()
}

// ErrSaveInProgress is Save's and BGSave's error while a save runs.
var ErrSaveInProgress = snapshot.ErrInProgress
