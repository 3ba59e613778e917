package snapshot

import (
	"encoding/binary"
)

// Lua scripts (EVAL, SCRIPT LOAD) are saved so that a client's EVALSHA
// still finds its script after a restart: libraries that load scripts once
// at start (rate-limit-redis, ulule/limiter) would otherwise get NOSCRIPT
// on every request until they reload.
//
//	SCRIPTS (kind 18, from version 3): count (uvarint), then per script its
//	         source (string), exactly as loaded: its SHA1 is the source's
//
// A script is saved as source, not compiled form, so a newer rlserver can
// compile it again; any number of SCRIPTS records may appear among the KEYS
// and PLAIN records, each under the record size limit. A script longer than
// a record is not saved (the script cache refuses such scripts long before:
// scripting.CacheLimits.MaxScriptBytes is 1 MiB).
const kindScripts = 18

// addScripts writes srcs as SCRIPTS records, starting a new record before
// one would pass the size limit.
func (e *encoder) addScripts(srcs []string) {
	var payload []byte
	n := 0
	emit := func() {
		if n > 0 {
			e.record(kindScripts, append(binary.AppendUvarint(nil, uint64(n)), payload...))
		}
		payload, n = payload[:0], 0
	}
	for _, src := range srcs {
		if len(src)+2*binary.MaxVarintLen64 > maxEntries {
			continue // cannot be saved in any record; see above
		}
		if len(payload)+len(src)+binary.MaxVarintLen64 > maxEntries {
			emit()
		}
		payload = appendString(payload, src)
		n++
	}
	emit()
}

// decodeScripts hands each script source of a SCRIPTS record to v.script.
func decodeScripts(r *reader, v visitor) error {
	n := r.count(1) // a script takes at least its length byte
	for range n {
		src := r.bytes()
		if r.err != nil {
			return nil
		}
		if v.script != nil {
			if err := v.script(src); err != nil {
				return err
			}
		}
	}
	return nil
}

// Scripts returns the script sources the snapshot holds, in the order
// saved. It reads the whole file again (checking it as Restore does).
func (f *File) Scripts() ([]string, error) {
	var out []string
	err := f.pass(visitor{script: func(src []byte) error {
		out = append(out, string(src))
		return nil
	}})
	return out, err
}
