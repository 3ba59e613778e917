package keyspace

import (
	"testing"
	"unsafe"
)

// An entry is allocated once per key: 128 bytes is an allocation size
// class, and the next one up is 144, so one more field costs every key 16
// bytes (bench/run.sh's memory table measures it).
func TestEntryFitsSizeClass(t *testing.T) {
	if got := unsafe.Sizeof(entry{}); got > 128 {
		t.Fatalf("entry is %d bytes, want at most 128", got)
	}
}
