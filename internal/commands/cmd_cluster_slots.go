package commands

// CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT: the keys this node holds in a
// slot, counted by the keyspace per slot in cluster mode (keyspace
// Config.SlotOf). A slot the node does not own holds no key here: 0.

import "github.com/rlserver/rlserver/internal/cluster"

// clusterSlotCommands are the CLUSTER subcommands about a slot's keys.
func clusterSlotCommands() []*command {
	return []*command{
		{name: "cluster|countkeysinslot", arity: 3, flags: flagStale, since: "3.0.0",
			summary: "The number of keys this node holds in a slot (each limiter state and each plain key counts once).",
			run:     cmdClusterCountKeysInSlot},
		{name: "cluster|getkeysinslot", arity: 4, flags: flagStale, since: "3.0.0",
			summary: "The names of at most count keys this node holds in a slot (O(keys of the shards holding some)).",
			run:     cmdClusterGetKeysInSlot},
	}
}

func cmdClusterCountKeysInSlot(c *session, args [][]byte) error {
	if _, err := c.clusterView(); err != nil {
		return err
	}
	slot, err := cluster.ParseSlot(args[2])
	if err != nil {
		return errf("%v", err)
	}
	n, _ := c.handle().SlotKeys(slot, 0)
	c.out.Integer(int64(n))
	return nil
}

func cmdClusterGetKeysInSlot(c *session, args [][]byte) error {
	if _, err := c.clusterView(); err != nil {
		return err
	}
	slot, max, err := cluster.ParseGetKeysInSlot(args[2], args[3])
	if err != nil {
		return errf("%v", err)
	}
	_, keys := c.handle().SlotKeys(slot, max)
	c.out.Array(len(keys))
	for _, k := range keys {
		c.out.Bulk(k)
	}
	return nil
}
