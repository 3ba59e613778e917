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
// time: it pauses the slots (their commands wait), waits until every
// command already admitted for them has run, sends their keys' state to
// the new owner (RL.CLUSTER IMPORT), and on its +OK flips them, releasing
// the waiting commands to the new owner (forwarded, or MOVED). If the new
// owner refuses or cannot be reached, the slots are served here again and
// the error says so; pushing the map again retries.
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

func (h *Handler) handOverTo(node *cluster.Node, slots []uint16, version uint64) error {
	cl := h.cfg.Cluster
	start := time.Now()
	cl.State.Pause(slots)
	var in [cluster.Slots]bool
	for _, s := range slots {
		in[s] = true
	}
	data, n, err := h.svc.ExportKeys(func(key string) bool { return in[cluster.KeySlotString(key)] })
	if err == nil {
		args := [][]byte{[]byte("RL.CLUSTER"), []byte("IMPORT"), strconv.AppendUint(nil, version, 10), []byte(slotList(slots)), data}
		var reply []byte
		reply, err = cl.Peers.Do(context.Background(), node.PeerAddr(cl.TLS), 2, args, nil)
		if err == nil && reply[0] == '-' {
			err = errors.New(strings.TrimSpace(string(reply[1:])))
		}
	}
	if err != nil {
		cl.State.Resume(slots)
		h.log.Error("slot hand-over failed; the slots are served here", "to", node.ID, "slots", len(slots), "err", err)
		return err
	}
	cl.State.FinishOutgoing(slots)
	pause := time.Since(start)
	cl.lastPause.Store(int64(pause))
	h.log.Info("slots handed over", "to", node.ID, "slots", len(slots), "keys", n, "bytes", len(data), "pause", pause)
	return nil
}

// cmdRLClusterImport handles RL.CLUSTER IMPORT version slots state: a node
// handing slots over sends their keys' state (the snapshot format). The
// receiver must hold the same map version and be waiting for those slots;
// it stores the state and serves the slots from then on.
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
	for _, s := range slots {
		if !v.Incoming(s) {
			return errf("slot %d is not waiting for its state here", s)
		}
	}
	n, err := c.h.svc.ImportKeys(args[4])
	if err != nil {
		return errf("importing slots %s: %v", args[3], err)
	}
	if err := c.h.cfg.Cluster.State.FinishIncoming(slots); err != nil {
		return errf("%v", err)
	}
	c.h.log.Info("slots taken over", "slots", len(slots), "keys", n, "from", c.conn.RemoteAddr())
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
