package admin

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/rlserver/rlserver/internal/cluster"
)

// CheckUsage is `rlserver cluster check`'s synopsis.
const CheckUsage = "rlserver cluster check HOST:PORT [HOST:PORT ...]"

// report is what one node answered.
type report struct {
	addr     string
	id       string
	m        *cluster.Map
	rulesVer string
	digest   string
	err      error
}

// Check is `rlserver cluster check host:port ...`: from the map the given
// nodes hold, it finds every node of the cluster and prints, per node, its
// id, its map's version and its slots, and its rule set's version and
// digest (rl_rules_version and rl_rules_digest of RL.INFO). Then it
// reports, each on a line starting [OK] or [ERR]: nodes it could not
// reach, nodes whose map differs, a node whose id is not the one the map
// gives its address, and nodes whose rules differ. It returns ErrFailed if
// any [ERR] line was printed.
func Check(ctx context.Context, args []string, out io.Writer, opt Options) error {
	seeds, err := parseAddrs(args)
	if err != nil {
		return fmt.Errorf("%v\nusage: %s", err, CheckUsage)
	}
	tls := opt.TLS != nil
	var addrs []string
	for _, s := range seeds {
		addrs = append(addrs, s.ClientAddr(false))
	}
	reports := map[string]*report{}
	// Ask the seeds first, then every node their maps name (and the nodes
	// those maps name, so a node no seed knows of is still found).
	for i := 0; i < len(addrs); i++ {
		r := ask(ctx, addrs[i], opt)
		reports[addrs[i]] = r
		if r.m == nil {
			continue
		}
		for j := range r.m.Len() {
			if a := r.m.Node(j).ClientAddr(tls); !slices.Contains(addrs, a) {
				addrs = append(addrs, a)
			}
		}
	}
	for _, a := range addrs {
		r := reports[a]
		if r.err != nil {
			fmt.Fprintf(out, "%s: unreachable: %v\n", a, r.err)
			continue
		}
		fmt.Fprintf(out, "%s %s map v%d rules v%s digest %s\n", a, r.id, mapVersion(r.m), r.rulesVer, orNone(r.digest))
	}
	unreachable := checkReach(out, addrs, reports)
	mapsDiffer := checkMaps(out, addrs, reports, tls)
	rulesDiffer := checkRules(out, addrs, reports)
	if unreachable || mapsDiffer || rulesDiffer {
		return ErrFailed
	}
	return nil
}

func ask(ctx context.Context, addr string, opt Options) *report {
	c := dial(addr, opt)
	defer c.close()
	r := &report{addr: addr}
	if r.id, r.err = c.myID(ctx); r.err != nil {
		return r
	}
	if r.m, r.err = c.config(ctx); r.err != nil {
		return r
	}
	r.rulesVer, r.digest, r.err = c.rules(ctx)
	return r
}

func checkReach(out io.Writer, addrs []string, reports map[string]*report) (failed bool) {
	var down []string
	for _, a := range addrs {
		if reports[a].err != nil {
			down = append(down, a)
		}
	}
	if len(down) > 0 {
		fmt.Fprintf(out, "[ERR] %d of %d nodes did not answer: %s\n", len(down), len(addrs), strings.Join(down, ", "))
		return true
	}
	fmt.Fprintf(out, "[OK] All %d nodes answered.\n", len(addrs))
	return false
}

// checkMaps groups the nodes by the map they hold, prints the newest map,
// and checks that each node is where that map puts it.
func checkMaps(out io.Writer, addrs []string, reports map[string]*report, tls bool) (failed bool) {
	type group struct {
		m     *cluster.Map
		addrs []string
	}
	var groups []*group
	for _, a := range addrs {
		r := reports[a]
		if r.err != nil {
			continue
		}
		i := slices.IndexFunc(groups, func(g *group) bool { return g.m.Equal(r.m) })
		if i < 0 {
			groups = append(groups, &group{m: r.m})
			i = len(groups) - 1
		}
		groups[i].addrs = append(groups[i].addrs, a)
	}
	if len(groups) == 0 {
		return false
	}
	slices.SortStableFunc(groups, func(a, b *group) int { return cmp.Compare(mapVersion(b.m), mapVersion(a.m)) })
	newest := groups[0].m
	if newest == nil {
		fmt.Fprintf(out, "[ERR] No node holds a map: run rlserver cluster create, or push one (RL.CLUSTER SETCONFIG).\n")
		return true
	}
	fmt.Fprintf(out, "Map version %d:\n", newest.Version())
	for i := range newest.Len() {
		printNode(out, newest.Node(i), tls)
	}
	if len(groups) > 1 {
		var parts []string
		for _, g := range groups {
			parts = append(parts, fmt.Sprintf("version %d on %s", mapVersion(g.m), strings.Join(g.addrs, ", ")))
		}
		fmt.Fprintf(out, "[ERR] Nodes hold different maps: %s. Push the newest to every node.\n", strings.Join(parts, "; "))
		failed = true
	} else {
		fmt.Fprintf(out, "[OK] Every node that answered holds map version %d; all %d slots covered.\n", newest.Version(), cluster.Slots)
	}
	for i := range newest.Len() {
		n := newest.Node(i)
		r := reports[n.ClientAddr(tls)]
		if r != nil && r.err == nil && r.id != n.ID {
			fmt.Fprintf(out, "[ERR] %s is node %s, but the map puts node %s there.\n", r.addr, r.id, n.ID)
			failed = true
		}
	}
	return failed
}

// checkRules compares the nodes' rule sets by digest, or by version when a
// node reports no digest.
func checkRules(out io.Writer, addrs []string, reports map[string]*report) (failed bool) {
	byDigest := map[string][]string{}
	byVersion := map[string][]string{}
	noDigest := false
	for _, a := range addrs {
		r := reports[a]
		if r.err != nil {
			continue
		}
		byDigest[r.digest] = append(byDigest[r.digest], a)
		byVersion[r.rulesVer] = append(byVersion[r.rulesVer], a)
		noDigest = noDigest || r.digest == ""
	}
	groups, what := byDigest, "digest"
	if noDigest {
		fmt.Fprintf(out, "[WARN] Some nodes report no rl_rules_digest; comparing rl_rules_version only.\n")
		groups, what = byVersion, "version"
	}
	if len(groups) <= 1 {
		for k := range groups {
			fmt.Fprintf(out, "[OK] Every node that answered applies the same rules (%s %s).\n", what, orNone(k))
		}
		return false
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(groups)) {
		parts = append(parts, fmt.Sprintf("%s %s on %s", what, orNone(k), strings.Join(groups[k], ", ")))
	}
	fmt.Fprintf(out, "[ERR] Rules differ: %s.\n", strings.Join(parts, "; "))
	return true
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
