package envoy

// SetOnLoad makes the loader's watcher send every load's outcome to ch.
// Call it before Watch.
func SetOnLoad(l *Loader, ch chan<- error) { l.onLoad = ch }
