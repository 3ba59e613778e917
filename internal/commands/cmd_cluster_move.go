package commands

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/internal/cluster"
)

// HandOver hands over the slots this node's map gives away (see
// handOver): run after the map is changed by other means than RL.CLUSTER
// SETCONFIG (a reload of --cluster-config). Nothing to do is no error.
func (h *Handler) HandOver() error {
	cl := h.cfg.Cluster
	if cl == nil || cl.Peers == nil || cl.State.View().Outgoing() == nil {
		return nil
	}
	return h.handOver()
}

// handOver hands the slots this node gives away in its current map over to
// their new owners (see internal/cluster/move.go), one new owner at a
// time (handOverTo). If a new owner refuses or cannot be reached, its
// slots are served here again and the error says so; pushing the map again
// retries.
func (h *Handler) handOver() error {
	cl := h.cfg.Cluster
	cl.handingOver.Lock()
	defer cl.handingOver.Unlock()
	v := cl.State.View()
	var errs []error
	for dst, slots := range v.Outgoing() {
		node := v.Map().Node(dst)
		if err := h.handOverTo(node, slots, v.Version()); err != nil {
			errs = append(errs, fmt.Errorf("slots %s to %s: %w", slotList(slots), node.PeerAddr(cl.TLS), err))
		}
	}
	return errors.Join(errs...)
}

// The hand-over's copies made while the slots are still served: the bulk,
// then rounds of the keys written during the previous copy, until a round
// would send at most pauseKeys keys (the paused round's work, which the
// pause lasts for) or liveRounds copies were made.
const liveRounds = 3

var pauseKeys = 256 // a variable for tests only

// handOverTo hands slots over to node in two phases. While the slots are
// still served here, it records every key of theirs written from now on,
// and sends node every key of theirs (RL.CLUSTER IMPORT … FIRST MORE; the
// receiver drops what it held in them first); then, as long as many keys
// were written meanwhile, those keys again (… MORE). Then it pauses the
// slots (their commands wait), waits until every command already admitted
// for them has run (the gate), sends the keys written since the last copy
// (their current state, a deleted key as a deletion), and on node's +OK
// flips the slots, releasing the waiting commands to node (forwarded, or
// MOVED), and drops its own copy of their keys. A FLUSHALL during the
// copy makes the paused round copy every key of the slots again.
func (h *Handler) handOverTo(node *cluster.Node, slots []uint16, version uint64) error {
	cl := h.cfg.Cluster
	var in [cluster.Slots]bool
	for _, s := range slots {
		in[s] = true
	}
	h.svc.TrackWrites(func(key []byte) bool { return in[cluster.KeySlot(key)] })
	defer h.svc.UntrackWrites()
	mv := &handOff{h: h, node: node, slots: slots, version: version, in: func(key string) bool { return in[cluster.KeySlotString(key)] }}
	var written []string
	flushed := true // the first copy is of every key
	var err error
	for round := 0; err == nil && round < liveRounds && (flushed || len(written) > pauseKeys); round++ {
		err = mv.send(written, flushed, true)
		written, flushed = h.svc.WrittenKeys()
	}
	if err != nil {
		h.log.Error("slot hand-over failed; the slots are served here", "to", node.ID, "slots", len(slots), "err", err)
		return err
	}
	start := time.Now()
	cl.State.Pause(slots)
	more, flushedMore := h.svc.WrittenKeys()
	err = mv.send(append(written, more...), flushed || flushedMore, false)
	if err != nil {
		cl.State.Resume(slots)
		h.log.Error("slot hand-over failed; the slots are served here", "to", node.ID, "slots", len(slots), "err", err)
		return err
	}
	cl.State.FinishOutgoing(slots)
	pause := time.Since(start)
	cl.lastPause.Store(int64(pause))
	h.log.Info("slots handed over", "to", node.ID, "slots", len(slots), "keys", mv.keys, "bytes", mv.bytes,
		"copies", mv.copies, "paused_keys", mv.lastKeys, "pause", pause)
	// No command reaches them here any more: free their memory (and their
	// share of --maxkeys), unless a newer map came meanwhile (it may give
	// them back).
	if cl.State.View().Version() == version {
		h.svc.DropKeys(mv.in)
	}
	return nil
}

// handOff is one hand-over's transfers to the new owner.
type handOff struct {
	h       *Handler
	node    *cluster.Node
	slots   []uint16
	version uint64
	in      func(key string) bool // reports whether a key is in slots
	// Totals, for the log.
	keys, bytes, copies, lastKeys int
}

// send sends node the state of the keys written (all = every key of the
// slots, the receiver dropping what it held in them first), saying
// whether more follows.
func (mv *handOff) send(written []string, all, more bool) error {
	var data []byte
	var n int
	var err error
	args := [][]byte{[]byte("RL.CLUSTER"), []byte("IMPORT"), strconv.AppendUint(nil, mv.version, 10), []byte(slotList(mv.slots)), nil}
	if all {
		data, n, err = mv.h.svc.ExportKeys(mv.in)
		args = append(args, []byte("FIRST"))
	} else {
		data, n, err = mv.h.svc.ExportNamed(written)
	}
	if err != nil {
		return err
	}
	if more {
		args = append(args, []byte("MORE"))
	}
	args[4] = data
	cl := mv.h.cfg.Cluster
	reply, err := cl.Peers.Do(context.Background(), mv.node.PeerAddr(cl.TLS), 2, args, nil)
	if err == nil && reply[0] == '-' {
		err = errors.New(strings.TrimSpace(string(reply[1:])))
	}
	mv.keys, mv.bytes, mv.copies, mv.lastKeys = mv.keys+n, mv.bytes+len(data), mv.copies+1, n
	return err
}

// cmdRLClusterImport handles RL.CLUSTER IMPORT version slots state [FIRST]
// [MORE]: a node handing slots over sends their keys' state (the snapshot
// format; see handOverTo). The receiver must hold the same map version and
// be waiting for those slots. With FIRST it drops every key it holds in
// the slots first; it then stores the state, later state replacing
// earlier; without MORE it serves the slots from then on.
func cmdRLClusterImport(c *session, args [][]byte) error {
	v, err := c.clusterView()
	if err != nil {
		return err
	}
	version, err := strconv.ParseUint(string(args[2]), 10, 64)
	if err != nil {
		return errNotInteger
	}
	if version != v.Version() {
		return errf("this node holds cluster map version %d, the sender %d: push the same map to every node", v.Version(), version)
	}
	slots, err := parseSlotList(string(args[3]))
	if err != nil {
		return errf("%v", err)
	}
	first, more := false, false
	for _, a := range args[5:] {
		switch strings.ToUpper(string(a)) {
		case "FIRST":
			first = true
		case "MORE":
			more = true
		default:
			return errSyntax
		}
	}
	var in [cluster.Slots]bool
	for _, s := range slots {
		if !v.Incoming(s) {
			return errf("slot %d is not waiting for its state here", s)
		}
		in[s] = true
	}
	var drop func(key string) bool
	if first {
		drop = func(key string) bool { return in[cluster.KeySlotString(key)] }
	}
	n, err := c.h.svc.ImportKeys(args[4], drop)
	if err != nil {
		return errf("importing slots %s: %v", args[3], err)
	}
	if !more {
		if err := c.h.cfg.Cluster.State.FinishIncoming(slots); err != nil {
			return errf("%v", err)
		}
		c.h.log.Info("slots taken over", "slots", len(slots), "keys", n, "from", c.conn.RemoteAddr())
	}
	c.out.OK()
	return nil
}

// slotList writes sorted slots as runs: "0-100,200".
func slotList(slots []uint16) string {
	s := append([]uint16(nil), slots...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(s[i])))
		if j > i {
			b.WriteString("-" + strconv.Itoa(int(s[j])))
		}
		i = j + 1
	}
	return b.String()
}

// parseSlotList reads slotList's form.
func parseSlotList(text string) ([]uint16, error) {
	var out []uint16
	for _, run := range strings.Split(text, ",") {
		a, b, isRun := strings.Cut(run, "-")
		if !isRun {
			b = a
		}
		start, err1 := cluster.ParseSlot([]byte(a))
		end, err2 := cluster.ParseSlot([]byte(b))
		if err1 != nil || err2 != nil || end < start {
			return nil, fmt.Errorf("slot list %.64q: want runs such as 0-100,200", text)
		}
		for s := int(start); s <= int(end); s++ {
			out = append(out, uint16(s))
		}
	}
	return out, nil
}
