package state

// Every Redis key MLSysOps uses is built here, and only here.
//
// Layout (prefix "mlsysops" by default; <id> is an application or model id,
// <jid> a bare JID, <node> a node name):
//
//	Application submissions, in the hash slot of the tag {apps}:
//	  mlsysops:{apps}:submissions        stream   submissions (deploy, update, remove),
//	                                              consumer group "continuum"
//	  mlsysops:{apps}:submissions:dead   stream   entries given up after MaxDeliveries
//	  mlsysops:{apps}:status:<id>        hash     phase, message, placement (JSON),
//	                                              submitted_at, updated_at, request_id,
//	                                              stream_id, generation, kind
//	  mlsysops:{apps}:spec:<id>          string   the latest submitted description (JSON)
//	  mlsysops:{apps}:ids                zset     ids with a status, all with score 0, so
//	                                              ordered by id (ZRANGEBYLEX pages them)
//	  mlsysops:{apps}:phases             zset     "<phase>:<id>" for every id, score 0: the
//	                                              ids of one phase are a lexical range
//
//	ML deployments: the same keys with the tag {ml}:
//	  mlsysops:{ml}:submissions, mlsysops:{ml}:submissions:dead,
//	  mlsysops:{ml}:status:<id>, mlsysops:{ml}:spec:<id>, mlsysops:{ml}:ids,
//	  mlsysops:{ml}:phases
//
//	Agent registry, in the slot of {agents}:
//	  mlsysops:{agents}:agent:<jid>      hash     jid, layer, cluster, node, version,
//	                                              registered_at, last_seen, online
//	  mlsysops:{agents}:index            set      registered JIDs
//
//	Telemetry, one key per node (no multi-key operation, so no tag):
//	  mlsysops:telemetry:<node>          string   latest sample (JSON), with a TTL
//
// Redis Cluster runs a MULTI/EXEC or a Lua script only when all its keys hash
// to one slot; only the part of a key inside the first {...} is hashed. The
// keys that change together (a submission's stream entry, its status, its
// spec and the indexes) therefore share a hash tag per collection. The price is
// that a collection lives on one shard, which is fine at the scale of
// applications and agents; telemetry, the hot data, is spread over the
// cluster.

import "strings"

// DefaultPrefix starts every key.
const DefaultPrefix = "mlsysops"

// Hash tags of the collections.
const (
	tagApps   = "{apps}"
	tagML     = "{ml}"
	tagAgents = "{agents}"
)

// keys builds key names under one prefix.
type keys struct {
	prefix string
}

func newKeys(prefix string) keys {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return keys{prefix: prefix}
}

func (k keys) join(parts ...string) string {
	return k.prefix + ":" + strings.Join(parts, ":")
}

// collectionKeys are the keys of one submission collection (applications
// or ML deployments), all in the slot of the collection's tag.
type collectionKeys struct {
	k   keys
	tag string
}

func (k keys) apps() collectionKeys { return collectionKeys{k: k, tag: tagApps} }
func (k keys) ml() collectionKeys   { return collectionKeys{k: k, tag: tagML} }

// stream is the submissions stream.
func (c collectionKeys) stream() string { return c.k.join(c.tag, "submissions") }

// dead is the dead-letter stream.
func (c collectionKeys) dead() string { return c.k.join(c.tag, "submissions", "dead") }

// status is the status hash of one id.
func (c collectionKeys) status(id string) string { return c.k.join(c.tag, "status", id) }

// spec holds the latest submitted description of one id.
func (c collectionKeys) spec(id string) string { return c.k.join(c.tag, "spec", id) }

// ids is the sorted set of ids with a status.
func (c collectionKeys) ids() string { return c.k.join(c.tag, "ids") }

// phases is the sorted set of "<phase>:<id>" members.
func (c collectionKeys) phases() string { return c.k.join(c.tag, "phases") }

// agent is the registry hash of one agent.
func (k keys) agent(jid string) string { return k.join(tagAgents, "agent", jid) }

// agentIndex is the set of registered agents.
func (k keys) agentIndex() string { return k.join(tagAgents, "index") }

// telemetry holds the latest sample of one node.
func (k keys) telemetry(node string) string { return k.join("telemetry", node) }

// Status hash fields.
const (
	fieldPhase       = "phase"
	fieldMessage     = "message"
	fieldPlacement   = "placement"
	fieldSubmittedAt = "submitted_at"
	fieldUpdatedAt   = "updated_at"
	fieldRequestID   = "request_id"
	fieldStreamID    = "stream_id"
	fieldGeneration  = "generation"
	fieldKind        = "kind"
	fieldWritten     = "written"
)

// Stream entry field carrying the submission (JSON).
const streamField = "submission"
