package cluster

// HashTagged reports whether key has a hash tag (Redis's rule: a '{',
// then a '}' after it with at least one byte between), so that only the
// tag decides its slot: every key starting with it shares its slot.
func HashTagged(key string) bool { return len(hashTag(key)) != len(key) }
