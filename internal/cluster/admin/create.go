package admin

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/rlserver/rlserver/internal/cluster"
)

// CreateUsage is `rlserver cluster create`'s synopsis.
const CreateUsage = "rlserver cluster create [--force] HOST:PORT HOST:PORT ..."

// Create is `rlserver cluster create [--force] host:port ...`: it asks each
// node its id (CLUSTER MYID), computes an even slot map of the nodes in the
// order given, announcing each at the address given, pushes it to every
// node (RL.CLUSTER SETCONFIG) and reads it back from every node.
//
// Nodes must be running with --cluster on. If any already holds a map,
// Create refuses (the new map would reassign slots, and their limiter
// state would start over) unless --force is given; the new map's version
// is then above every version found, so every node takes it. Nothing is
// pushed unless every node answered first. Progress goes to out; an error
// is returned when the cluster was not created (ErrFailed after a push
// that some node refused: out says which).
func Create(ctx context.Context, args []string, out io.Writer, opt Options) error {
	force := false
	if len(args) > 0 && args[0] == "--force" {
		force, args = true, args[1:]
	}
	nodes, err := parseAddrs(args)
	if err != nil {
		return fmt.Errorf("%v\nusage: %s", err, CreateUsage)
	}
	conns := make([]*node, len(nodes))
	for i := range nodes {
		conns[i] = dial(nodes[i].ClientAddr(false), opt)
		defer conns[i].close()
	}
	version, existing, err := survey(ctx, conns, nodes, force)
	if err != nil {
		return err
	}
	if existing != nil {
		fmt.Fprintf(out, "[OK] The nodes already form this cluster (map version %d); nothing pushed.\n", existing.Version())
		return nil
	}
	m, err := cluster.EvenMap(version, nodes)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, ">>> Assigning %d slots to %d nodes, map version %d:\n", cluster.Slots, m.Len(), version)
	for i := range m.Len() {
		printNode(out, m.Node(i), opt.TLS != nil)
	}
	js, _ := m.MarshalJSON()
	failed := false
	for _, c := range conns {
		if _, err := c.do(ctx, "RL.CLUSTER", "SETCONFIG", string(js)); err != nil {
			fmt.Fprintf(out, "[ERR] %s refused the map: %v\n", c.addr, err)
			failed = true
		} else {
			fmt.Fprintf(out, "[OK] %s took map version %d\n", c.addr, version)
		}
	}
	for _, c := range conns {
		got, err := c.config(ctx)
		switch {
		case err != nil:
			fmt.Fprintf(out, "[ERR] %s: %v\n", c.addr, err)
			failed = true
		case !got.Equal(m):
			fmt.Fprintf(out, "[ERR] %s holds another map (version %d)\n", c.addr, mapVersion(got))
			failed = true
		}
	}
	if failed {
		return fmt.Errorf("%w: the nodes do not all hold map version %d (see above; rlserver cluster check shows them)", ErrFailed, version)
	}
	fmt.Fprintf(out, "[OK] All %d slots covered; %d nodes hold map version %d.\n", cluster.Slots, m.Len(), version)
	return nil
}

// survey fills in the nodes' ids and returns the version the new map
// takes: one above the highest any node holds. If every node already holds
// one map of exactly these nodes at these addresses, it returns that map
// instead (so an init job that runs create again succeeds).
func survey(ctx context.Context, conns []*node, nodes []cluster.Node, force bool) (uint64, *cluster.Map, error) {
	var errs []error
	var highest uint64
	maps := make([]*cluster.Map, len(conns))
	for i, c := range conns {
		id, err := c.myID(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.addr, err))
			continue
		}
		nodes[i].ID = id
		m, err := c.config(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.addr, err))
			continue
		}
		if m == nil {
			continue
		}
		maps[i] = m
		highest = max(highest, m.Version())
		if !force {
			errs = append(errs, fmt.Errorf("%s already holds map version %d of %d nodes; create makes a new cluster "+
				"(every slot's limiter state starts over): to change a running cluster push a new map "+
				"(docs/cluster.md), or give --force", c.addr, m.Version(), m.Len()))
		}
	}
	if !force && sameCluster(maps, nodes) {
		return 0, maps[0], nil
	}
	if len(errs) > 0 {
		return 0, nil, fmt.Errorf("nothing was pushed:\n%w", errors.Join(errs...))
	}
	return highest + 1, nil, nil
}

// sameCluster reports whether every node holds the same map, and that map
// lists exactly nodes, each at the address given.
func sameCluster(maps []*cluster.Map, nodes []cluster.Node) bool {
	if maps[0] == nil || maps[0].Len() != len(nodes) {
		return false
	}
	for i, m := range maps {
		j := maps[0].Index(nodes[i].ID)
		if !m.Equal(maps[0]) || j < 0 || maps[0].Node(j).ClientAddr(false) != nodes[i].ClientAddr(false) {
			return false
		}
	}
	return true
}

func mapVersion(m *cluster.Map) uint64 {
	if m == nil {
		return 0
	}
	return m.Version()
}
