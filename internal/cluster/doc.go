// Package cluster is the part of rlserver's Redis Cluster mode that needs
// no server: key → slot hashing, the slot map (its JSON form, validation,
// versions, the O(1) slot → owner table), a node's view of it (who it is,
// whether it serves, redirects or forwards a slot), and the replies to the
// CLUSTER commands and the cluster errors, as RESP bytes in the shapes
// stock cluster clients parse.
//
// There is no gossip: a node learns the cluster's shape from a map given
// to it (a file, or RL.CLUSTER SETCONFIG), and every node of a cluster is
// given the same map. docs/cluster.md is the operator's side.
//
// Ownership: a State belongs to the node; its View is replaced whole on
// each accepted map and read without locks, so a command sees one map from
// start to end. Maps and Views are immutable.
//
// Subpackages: forward relays a command to another node over pooled
// connections; admin is `rlserver cluster create` and `check`.
package cluster
