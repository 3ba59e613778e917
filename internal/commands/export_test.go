package commands

// SetPauseKeys sets the most keys written during a hand-over's copy that
// the paused round takes (more are copied again first, without a pause)
// and returns a function that restores it. Not safe while a hand-over
// runs.
func SetPauseKeys(n int) (restore func()) {
	old := pauseKeys
	pauseKeys = n
	return func() { pauseKeys = old }
}
