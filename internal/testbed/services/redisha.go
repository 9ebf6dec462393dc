package services

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis deployments without a single point of failure, from Debian's
// redis-server: a Redis Cluster (masters that share the hash slots, each
// with replicas that take over when it fails) and a Sentinel group (a
// master, its replicas and three sentinels that promote a replica when the
// master fails). Both keep every server's data in its append-only file, as
// the single Redis does, and use one password for clients, replication
// and the sentinels.

// DefaultFailureDetection is how long a Cluster node or a sentinel waits
// for an unanswering master before it starts a failover (cluster-node-timeout,
// down-after-milliseconds). Redis's defaults are 15 s and 30 s; the
// testbed's is short so that tests see failovers quickly, yet long enough
// that a busy machine does not fail masters over by mistake.
const DefaultFailureDetection = 2 * time.Second

// RedisCluster is a Redis Cluster on loopback: Masters masters with
// ReplicasPerMaster replicas each, every node with its own folder, data
// port and cluster bus port.
type RedisCluster struct {
	dir      string
	password string
	masters  int
	nodes    []*Redis
}

// NewRedisCluster describes a cluster of masters×(1+replicas) nodes whose
// folders are dir/node-<i> and which listen on portBase+i (clients) and
// portBase+n+i (cluster bus), n being the number of nodes: it takes 2n
// ports. Nodes 0 to masters-1 start as masters.
func NewRedisCluster(dir string, portBase int, password string, masters, replicasPerMaster int, detection time.Duration) *RedisCluster {
	if detection <= 0 {
		detection = DefaultFailureDetection
	}
	n := masters * (1 + replicasPerMaster)
	c := &RedisCluster{dir: dir, password: password, masters: masters}
	for i := 0; i < n; i++ {
		r := newRedis(fmt.Sprintf("redis-cluster-%d", i), filepath.Join(dir, fmt.Sprintf("node-%d", i)), portBase+i, password)
		r.replicated = true
		r.extra = []string{
			"cluster-enabled yes",
			"cluster-config-file nodes.conf",
			"cluster-port " + strconv.Itoa(portBase+n+i),
			"cluster-node-timeout " + strconv.FormatInt(detection.Milliseconds(), 10),
			// Slots whose master is failing do not stop the others.
			"cluster-require-full-coverage no",
			// Failover on any replica, however long its link was down: the
			// testbed kills masters on purpose and always wants a new one.
			"cluster-replica-validity-factor 0",
		}
		c.nodes = append(c.nodes, r)
	}
	return c
}

// Addrs are every node's address; clients use them as seeds.
func (c *RedisCluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Addr()
	}
	return out
}

// Password is the password of every node.
func (c *RedisCluster) Password() string { return c.password }

// Nodes are the cluster's servers.
func (c *RedisCluster) Nodes() []*Redis { return c.nodes }

// Start starts every node that is not running, forms the cluster the first
// time (slots spread evenly over the masters, replicas assigned round
// robin), and waits until every slot is served and every node agrees.
func (c *RedisCluster) Start(ctx context.Context) error {
	if err := startAll(ctx, c.nodes); err != nil {
		return err
	}
	first := c.client(c.nodes[0])
	defer first.Close()
	info, err := clusterInfo(ctx, first)
	if err != nil {
		return fmt.Errorf("redis cluster: %w", err)
	}
	if info["cluster_slots_assigned"] == "0" {
		if err := c.form(ctx); err != nil {
			return fmt.Errorf("redis cluster: %w", err)
		}
	}
	return c.WaitHealthy(ctx)
}

// form introduces the nodes to each other, gives the masters their slots
// and makes the others replicas.
func (c *RedisCluster) form(ctx context.Context) error {
	// Each master gets its own config epoch before it meets the others, as
	// redis-cli --cluster create does: otherwise the masters all start at
	// epoch 0 and the collision handling bumps them afterwards, and a
	// replica that has not heard of its master's new epoch when the master
	// dies asks for the failover with the old one and is refused for good
	// ("Failover auth denied ... epoch (2) > reqEpoch (0)").
	for i := 0; i < c.masters; i++ {
		cl := c.client(c.nodes[i])
		err := cl.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err()
		cl.Close()
		if err != nil {
			return fmt.Errorf("config epoch of %s: %w", c.nodes[i].Addr(), err)
		}
	}
	first := c.client(c.nodes[0])
	defer first.Close()
	for i, n := range c.nodes[1:] {
		bus := c.nodes[0].port + len(c.nodes) + 1 + i
		if err := first.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", n.port, bus).Err(); err != nil {
			return fmt.Errorf("meet %s: %w", n.Addr(), err)
		}
	}
	const slots = 16384
	ids := make([]string, c.masters)
	for i := 0; i < c.masters; i++ {
		cl := c.client(c.nodes[i])
		lo, hi := i*slots/c.masters, (i+1)*slots/c.masters-1
		err := cl.ClusterAddSlotsRange(ctx, lo, hi).Err()
		if err == nil {
			ids[i], err = cl.Do(ctx, "CLUSTER", "MYID").Text()
		}
		cl.Close()
		if err != nil {
			return fmt.Errorf("slots %d-%d to %s: %w", lo, hi, c.nodes[i].Addr(), err)
		}
	}
	for i, n := range c.nodes[c.masters:] {
		master := ids[i%c.masters]
		cl := c.client(n)
		// A replica must know its master through the gossip first.
		err := poll(ctx, 100*time.Millisecond, func() error { return cl.ClusterReplicate(ctx, master).Err() })
		cl.Close()
		if err != nil {
			return fmt.Errorf("make %s a replica of %s: %w", n.Addr(), master, err)
		}
	}
	return nil
}

// WaitHealthy waits until every running node says the cluster is ok and
// serves all 16384 slots, and every master that has replicas assigned
// has them connected.
func (c *RedisCluster) WaitHealthy(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := poll(wctx, 100*time.Millisecond, func() error {
		for _, n := range c.nodes {
			if !n.Running() {
				continue
			}
			cl := c.client(n)
			info, err := clusterInfo(wctx, cl)
			cl.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", n.Addr(), err)
			}
			if info["cluster_state"] != "ok" || info["cluster_slots_ok"] != "16384" {
				return fmt.Errorf("%s: cluster_state %s, %s slots ok", n.Addr(), info["cluster_state"], info["cluster_slots_ok"])
			}
		}
		if err := epochsAgree(wctx, c); err != nil {
			return err
		}
		return replicasLinked(wctx, c.nodes, c.password)
	})
	if err != nil {
		return fmt.Errorf("redis cluster not healthy: %w", err)
	}
	return nil
}

// epochsAgree checks that every running node knows every master's
// config epoch as that master has it: a replica with an older one could
// not take over from its master.
func epochsAgree(ctx context.Context, c *RedisCluster) error {
	var views []map[string]string // per node: master id -> config epoch
	own := map[string]string{}
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		cl := c.client(n)
		out, err := cl.ClusterNodes(ctx).Result()
		cl.Close()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER NODES: %w", n.Addr(), err)
		}
		view := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 7 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
				continue
			}
			view[f[0]] = f[6]
			if strings.Contains(f[2], "myself") {
				own[f[0]] = f[6]
			}
		}
		views = append(views, view)
	}
	for _, view := range views {
		for id, epoch := range own {
			if e, ok := view[id]; ok && e != epoch {
				return fmt.Errorf("master %s has config epoch %s, a node still knows it as %s", id, epoch, e)
			}
		}
	}
	return nil
}

// replicasLinked checks that every running replica's link to its master
// is up: it has its first copy and follows the master.
func replicasLinked(ctx context.Context, servers []*Redis, password string) error {
	for _, n := range servers {
		if !n.Running() {
			continue
		}
		cl := redis.NewClient(&redis.Options{Addr: n.Addr(), Password: password, MaxRetries: -1, DialTimeout: time.Second})
		info, err := cl.Info(ctx, "replication").Result()
		cl.Close()
		if err != nil {
			return err
		}
		f := infoFields(info)
		if f["role"] == "slave" && f["master_link_status"] != "up" {
			return fmt.Errorf("replica %s: link to its master %s", n.Addr(), f["master_link_status"])
		}
	}
	return nil
}

// MasterFor returns the node that serves key's hash slot as master, as the
// running nodes see it.
func (c *RedisCluster) MasterFor(ctx context.Context, key string) (*Redis, error) {
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		cl := c.client(n)
		slot, err := cl.ClusterKeySlot(ctx, key).Result()
		var slots []redis.ClusterSlot
		if err == nil {
			slots, err = cl.ClusterSlots(ctx).Result()
		}
		cl.Close()
		if err != nil {
			continue
		}
		for _, s := range slots {
			if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
				if r := c.byAddr(s.Nodes[0].Addr); r != nil && r.Running() {
					return r, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("no running master serves %q", key)
}

func (c *RedisCluster) byAddr(addr string) *Redis {
	for _, n := range c.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// Stop stops every node gracefully (each flushes its append-only file).
func (c *RedisCluster) Stop(ctx context.Context) error { return stopAll(ctx, c.nodes) }

// Kill kills every node with SIGKILL.
func (c *RedisCluster) Kill() error { return killAll(c.nodes) }

func (c *RedisCluster) client(n *Redis) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: n.Addr(), Password: c.password, MaxRetries: -1, DialTimeout: time.Second})
}

// SentinelMaster is the name of the master group the testbed's sentinels
// watch.
const SentinelMaster = "mlsysops"

// RedisSentinel is a Sentinel group on loopback: a master, its replicas
// and three sentinels with a quorum of two.
type RedisSentinel struct {
	password  string
	servers   []*Redis // servers[0] starts as the master
	sentinels []*Redis
}

// NewRedisSentinel describes a group whose folders are dir/server-<i> and
// dir/sentinel-<i>: 1+replicas servers on portBase, portBase+1, ... and
// three sentinels on the ports after them (replicas+4 ports in all).
func NewRedisSentinel(dir string, portBase int, password string, replicas int, detection time.Duration) *RedisSentinel {
	if detection <= 0 {
		detection = DefaultFailureDetection
	}
	g := &RedisSentinel{password: password}
	for i := 0; i <= replicas; i++ {
		r := newRedis(fmt.Sprintf("redis-server-%d", i), filepath.Join(dir, fmt.Sprintf("server-%d", i)), portBase+i, password)
		r.keepConf, r.replicated = true, true
		if i > 0 {
			r.extra = []string{fmt.Sprintf("replicaof 127.0.0.1 %d", portBase)}
		}
		g.servers = append(g.servers, r)
	}
	for i := 0; i < 3; i++ {
		port := portBase + replicas + 1 + i
		s := newRedis(fmt.Sprintf("redis-sentinel-%d", i), filepath.Join(dir, fmt.Sprintf("sentinel-%d", i)), port, password)
		s.keepConf, s.sentinel = true, true
		s.proc.Args = append(s.proc.Args, "--sentinel")
		s.extra = []string{
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2", SentinelMaster, portBase),
			fmt.Sprintf("sentinel auth-pass %s %q", SentinelMaster, password),
			// Sentinels have a password too; they use it with each other.
			fmt.Sprintf("sentinel sentinel-pass %q", password),
			fmt.Sprintf("sentinel down-after-milliseconds %s %d", SentinelMaster, detection.Milliseconds()),
			fmt.Sprintf("sentinel failover-timeout %s %d", SentinelMaster, 10*detection.Milliseconds()),
			fmt.Sprintf("sentinel parallel-syncs %s 1", SentinelMaster),
		}
		g.sentinels = append(g.sentinels, s)
	}
	return g
}

// SentinelAddrs are the sentinels' addresses, which clients start from.
func (g *RedisSentinel) SentinelAddrs() []string {
	out := make([]string, len(g.sentinels))
	for i, s := range g.sentinels {
		out[i] = s.Addr()
	}
	return out
}

// MasterName is the master group's name.
func (g *RedisSentinel) MasterName() string { return SentinelMaster }

// Password is the password of the servers and of the sentinels.
func (g *RedisSentinel) Password() string { return g.password }

// Servers are the data servers; Sentinels the sentinels.
func (g *RedisSentinel) Servers() []*Redis   { return g.servers }
func (g *RedisSentinel) Sentinels() []*Redis { return g.sentinels }

// Start starts the servers, then the sentinels, and waits until every
// sentinel knows the master, its replicas and the other sentinels.
func (g *RedisSentinel) Start(ctx context.Context) error {
	if err := startAll(ctx, g.servers); err != nil {
		return err
	}
	if err := startAll(ctx, g.sentinels); err != nil {
		return err
	}
	return g.WaitHealthy(ctx)
}

// WaitHealthy waits until every running sentinel sees the master up with
// all its running replicas and the other running sentinels, and the
// master's replicas are linked.
func (g *RedisSentinel) WaitHealthy(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	running := func(rs []*Redis) int {
		n := 0
		for _, r := range rs {
			if r.Running() {
				n++
			}
		}
		return n
	}
	err := poll(wctx, 100*time.Millisecond, func() error {
		master, err := g.Master(wctx)
		if err != nil {
			return err
		}
		for _, s := range g.sentinels {
			if !s.Running() {
				continue
			}
			sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), Password: g.password, MaxRetries: -1, DialTimeout: time.Second})
			m, err := sc.Master(wctx, SentinelMaster).Result()
			sc.Close()
			if err != nil {
				return fmt.Errorf("sentinel %s: %w", s.Addr(), err)
			}
			if addr := m["ip"] + ":" + m["port"]; addr != master.Addr() {
				return fmt.Errorf("sentinel %s says the master is %s, not %s", s.Addr(), addr, master.Addr())
			}
			if strings.Contains(m["flags"], "down") {
				return fmt.Errorf("sentinel %s: master flags %s", s.Addr(), m["flags"])
			}
			if want := strconv.Itoa(running(g.sentinels) - 1); m["num-other-sentinels"] != want {
				return fmt.Errorf("sentinel %s knows %s other sentinels, want %s", s.Addr(), m["num-other-sentinels"], want)
			}
			// Sentinels remember replicas that are down, too.
			if n, _ := strconv.Atoi(m["num-slaves"]); n < running(g.servers)-1 {
				return fmt.Errorf("sentinel %s knows %d replicas, want %d", s.Addr(), n, running(g.servers)-1)
			}
		}
		cl := redis.NewClient(&redis.Options{Addr: master.Addr(), Password: g.password, MaxRetries: -1, DialTimeout: time.Second})
		info, err := cl.Info(wctx, "replication").Result()
		cl.Close()
		if err != nil {
			return err
		}
		if f := infoFields(info); f["role"] != "master" || f["connected_slaves"] != strconv.Itoa(running(g.servers)-1) {
			return fmt.Errorf("master %s: role %s, %s replicas connected", master.Addr(), f["role"], f["connected_slaves"])
		}
		return replicasLinked(wctx, g.servers, g.password)
	})
	if err != nil {
		return fmt.Errorf("redis sentinel group not healthy: %w", err)
	}
	return nil
}

// Master returns the server the running sentinels' majority name as
// master.
func (g *RedisSentinel) Master(ctx context.Context) (*Redis, error) {
	votes := map[string]int{}
	for _, s := range g.sentinels {
		if !s.Running() {
			continue
		}
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), Password: g.password, MaxRetries: -1, DialTimeout: time.Second})
		addr, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
		sc.Close()
		if err == nil && len(addr) == 2 {
			votes[addr[0]+":"+addr[1]]++
		}
	}
	for addr, n := range votes {
		if n >= 2 {
			for _, r := range g.servers {
				if r.Addr() == addr {
					return r, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("no master named by two sentinels (%v)", votes)
}

// Stop stops the sentinels, then the servers.
func (g *RedisSentinel) Stop(ctx context.Context) error {
	return errors.Join(stopAll(ctx, g.sentinels), stopAll(ctx, g.servers))
}

// Kill kills every server and sentinel with SIGKILL.
func (g *RedisSentinel) Kill() error {
	return errors.Join(killAll(g.sentinels), killAll(g.servers))
}

// startAll starts the servers that do not run, in parallel.
func startAll(ctx context.Context, rs []*Redis) error {
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.Start(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func stopAll(ctx context.Context, rs []*Redis) error {
	var errs []error
	for _, r := range rs {
		errs = append(errs, r.Stop(ctx))
	}
	return errors.Join(errs...)
}

func killAll(rs []*Redis) error {
	var errs []error
	for _, r := range rs {
		if r.Running() {
			errs = append(errs, r.Kill())
		}
	}
	return errors.Join(errs...)
}

func clusterInfo(ctx context.Context, c *redis.Client) (map[string]string, error) {
	s, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return nil, err
	}
	return infoFields(s), nil
}

// infoFields parses the "key:value" lines of INFO and CLUSTER INFO.
func infoFields(s string) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
			out[k] = v
		}
	}
	return out
}

// poll calls fn until it succeeds or ctx ends, and returns its last error.
func poll(ctx context.Context, every time.Duration, fn func() error) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(every):
		}
	}
}
