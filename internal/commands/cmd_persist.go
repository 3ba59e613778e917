package commands

import "github.com/rlserver/rlserver/internal/service"

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

func cmdSave(c *session, args [][]byte) error {
	if err := c.h.svc.Save(); err != nil {
		return err
	}
	c.out.OK()
	return nil
}

func cmdBGSave(c *session, args [][]byte) error {
	if len(args) > 2 || (len(args) == 2 && !equalFold(args[1], "schedule")) {
		return errSyntax
	}
	if err := c.h.svc.BGSave(); err != nil {
		return err
	}
	c.out.Simple("Background saving started")
	return nil
}

// cmdLastSave replies with the unix time of the last good snapshot, 0 if
// there is none (or persistence is off).
func cmdLastSave(c *session, args [][]byte) error {
	c.out.Integer(c.h.svc.SnapshotStatus().LastOKUnix)
	return nil
}

// cmdShutdown handles SHUTDOWN [NOSAVE|SAVE]. As in Redis, an option may
// repeat, and NOSAVE with SAVE is a syntax error; Redis's NOW, FORCE and
// ABORT are not supported. On success nothing is replied: the server
// drains, writes its final snapshot (unless NOSAVE) and exits, closing the
// connection, as Redis does.
func cmdShutdown(c *session, args [][]byte) error {
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
	if mode == ShutdownSave && !c.h.svc.Persistent() {
		return service.ErrNoPersistence
	}
	if c.h.cfg.RequestShutdown == nil {
		return replyError("ERR SHUTDOWN is not available in this server")
	}
	c.h.cfg.RequestShutdown(mode)
	c.conn.Quit()
	return nil
}
