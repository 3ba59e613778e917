package resp

import "errors"

// ShutdownMode is what SHUTDOWN asked for.
type ShutdownMode int

// SHUTDOWN's modes.
const (
	// ShutdownDefault saves a final snapshot when persistence is on.
	ShutdownDefault ShutdownMode = iota
	// ShutdownSave requires a final snapshot.
	ShutdownSave
	// ShutdownNoSave skips the final snapshot.
	ShutdownNoSave
)

var errNoPersistence = errors.New("persistence is disabled (--data-dir is empty)")

func cmdSave(c *client, args [][]byte) error {
	if c.srv.cfg.Snapshots == nil {
		return errNoPersistence
	}
	if err := c.srv.cfg.Snapshots.Save(); err != nil {
		return err
	}
	c.out.ok()
	return nil
}

func cmdBGSave(c *client, args [][]byte) error {
	if len(args) > 2 || (len(args) == 2 && !equalFold(args[1], "schedule")) {
		return errSyntax
	}
	if c.srv.cfg.Snapshots == nil {
		return errNoPersistence
	}
	if err := c.srv.cfg.Snapshots.BGSave(); err != nil {
		return err
	}
	c.out.simple("Background saving started")
	return nil
}

// cmdLastSave replies with the unix time of the last good snapshot, 0 if
// there is none (or persistence is off).
func cmdLastSave(c *client, args [][]byte) error {
	var unix int64
	if c.srv.cfg.Snapshots != nil {
		unix = c.srv.cfg.Snapshots.Status().LastOKUnix
	}
	c.out.integer(unix)
	return nil
}

// cmdShutdown handles SHUTDOWN [NOSAVE|SAVE]. As in Redis, an option may
// repeat, and NOSAVE with SAVE is a syntax error; Redis's NOW, FORCE and
// ABORT are not supported. On success nothing is replied: the server
// drains, writes its final snapshot (unless NOSAVE) and exits, closing the
// connection, as Redis does.
func cmdShutdown(c *client, args [][]byte) error {
	mode := ShutdownDefault
	for _, a := range args[1:] {
		var m ShutdownMode
		switch {
		case equalFold(a, "nosave"):
			m = ShutdownNoSave
		case equalFold(a, "save"):
			m = ShutdownSave
		default:
			return errSyntax
		}
		if mode != ShutdownDefault && mode != m {
			return errSyntax
		}
		mode = m
	}
	if mode == ShutdownSave && c.srv.cfg.Snapshots == nil {
		return errNoPersistence
	}
	if c.srv.cfg.RequestShutdown == nil {
		return errors.New("SHUTDOWN is not available in this server")
	}
	c.srv.cfg.RequestShutdown(mode)
	c.quit = true
	return nil
}
