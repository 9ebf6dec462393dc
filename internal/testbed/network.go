package testbed

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// netPlan is the testbed's address plan. Every testbed owns one
// 10.X.0.0/16, X derived from its port base, so that testbeds running side
// by side (each with its own port base) never share an address, a route,
// a bridge or a network namespace:
//
//	10.X.0.1/32        the host's address on the testbed bridge mls<base>:
//	                   the apiservers real pods call listen here
//	10.X.0.(10+i)/32   real node i, in its network namespace mls<base>-<i>
//	10.X.1.(1+c)       KWOK's node address in member cluster c (unserved)
//	10.X.(16+i).0/24   pod subnet of real node i (CNI bridge in its namespace)
//	10.X.(64+4c).0/22  KWOK's pod addresses in member cluster c (unserved)
//	10.X.128.0/17      Service ClusterIPs of every apiserver
//
// The whole /16 is blackholed on the host, so a packet for any address of
// it that no interface serves fails at once instead of leaving through the
// default route. Real nodes' namespaces have no default route at all:
// their only routes are to the host and to each other, so nothing running
// on a real node (a pod, an image pull) can send a packet off the machine.
type netPlan struct {
	base int
	x    int
}

// maxRealNodes and maxNetClusters bound the plan (pod subnets 16..63,
// KWOK ranges 64..127).
const (
	maxRealNodes   = 48
	maxNetClusters = 16
)

func newNetPlan(base int) netPlan { return netPlan{base: base, x: 100 + base/500} }

func (n netPlan) ip(c, d int) string { return fmt.Sprintf("10.%d.%d.%d", n.x, c, d) }

// Range is the testbed's whole range.
func (n netPlan) Range() string { return fmt.Sprintf("10.%d.0.0/16", n.x) }

// HostIP is the host's address on the testbed bridge.
func (n netPlan) HostIP() string { return n.ip(0, 1) }

// NodeIP is real node i's address.
func (n netPlan) NodeIP(i int) string { return n.ip(0, 10+i) }

// PodSubnet is real node i's pod subnet and PodGateway its CNI bridge's
// address.
func (n netPlan) PodSubnet(i int) string  { return n.ip(16+i, 0) + "/24" }
func (n netPlan) PodGateway(i int) string { return n.ip(16+i, 1) }

// ServiceCIDR is every apiserver's Service range; KubernetesServiceIP is
// the `kubernetes` Service's ClusterIP in it.
func (n netPlan) ServiceCIDR() string         { return n.ip(128, 0) + "/17" }
func (n netPlan) KubernetesServiceIP() string { return n.ip(128, 1) }

// KWOKNodeIP and KWOKCIDR are what member cluster c's KWOK gives its nodes
// and pods.
func (n netPlan) KWOKNodeIP(c int) string { return n.ip(1, 1+c) }
func (n netPlan) KWOKCIDR(c int) string   { return n.ip(64+4*c, 0) + "/22" }

// KwokletIP and KwokletNetNS are the address and network namespace of
// the k-th KWOK node, where the kwoklet runs that node's agent pods.
func (n netPlan) KwokletIP(k int) string        { return n.ip(2, 1+k) }
func (n netPlan) KwokletNetNS(k int) string     { return n.Bridge() + "-k" + strconv.Itoa(k) }
func (n netPlan) KwokletNetNSFile(k int) string { return "/run/netns/" + n.KwokletNetNS(k) }
func (n netPlan) kwokletVeth(k int) string      { return n.Bridge() + "k" + strconv.Itoa(k) }

// Bridge is the host bridge the real nodes hang on; NetNS and Veth name
// real node i's namespace and the host end of its link.
func (n netPlan) Bridge() string         { return "mls" + strconv.Itoa(n.base) }
func (n netPlan) NetNS(i int) string     { return n.Bridge() + "-" + strconv.Itoa(i) }
func (n netPlan) Veth(i int) string      { return n.Bridge() + "v" + strconv.Itoa(i) }
func (n netPlan) NetNSFile(i int) string { return "/run/netns/" + n.NetNS(i) }

// Ranges are the ranges the testbed uses, by what uses them, for the
// hygiene test.
func (n netPlan) Ranges(clusters int) map[string]string {
	out := map[string]string{
		"testbed": n.Range(), "services": n.ServiceCIDR(), "node addresses": n.ip(0, 0) + "/24",
		"pod subnets": n.ip(16, 0) + "/18", "kwok nodes": n.ip(1, 0) + "/24",
	}
	for c := 0; c < clusters; c++ {
		out["kwok pods "+strconv.Itoa(c)] = n.KWOKCIDR(c)
	}
	return out
}

// ipCmd runs ip(8); tolerated errors (such as "File exists" for an add
// that is already done) are ignored.
func ipCmd(tolerate []string, args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		for _, t := range tolerate {
			if bytes.Contains(out, []byte(t)) {
				return nil
			}
		}
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func linkExists(name string) bool {
	return exec.Command("ip", "link", "show", "dev", name).Run() == nil
}

// setupHost creates the bridge with the host's address and the blackhole
// for the testbed's range. Idempotent.
func (n netPlan) setupHost() error {
	br := n.Bridge()
	if !linkExists(br) {
		if err := ipCmd([]string{"File exists"}, "link", "add", br, "type", "bridge"); err != nil {
			return err
		}
	}
	steps := [][]string{
		// IPv6 would give the bridge link-local addresses and router
		// solicitations: nothing here uses it.
		{"link", "set", br, "up"},
		{"addr", "replace", n.HostIP() + "/32", "dev", br},
		{"route", "replace", "blackhole", n.Range()},
	}
	for _, s := range steps {
		if err := ipCmd(nil, s...); err != nil {
			return fmt.Errorf("testbed network: %w", err)
		}
	}
	return writeSysctl("/proc/sys/net/ipv6/conf/"+br+"/disable_ipv6", "1")
}

// setupNode creates real node i's namespace and link, its address, and
// the routes on both sides; peers are the indexes of every real node.
// Idempotent.
func (n netPlan) setupNode(i int, peers []int) error {
	ns, veth := n.NetNS(i), n.Veth(i)
	if _, err := os.Stat(n.NetNSFile(i)); err != nil {
		if err := ipCmd([]string{"File exists"}, "netns", "add", ns); err != nil {
			return err
		}
	}
	if !linkExists(veth) {
		if err := ipCmd(nil, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns); err != nil {
			return err
		}
	}
	in := func(args ...string) []string { return append([]string{"-n", ns}, args...) }
	steps := [][]string{
		{"link", "set", veth, "master", n.Bridge(), "up"},
		{"route", "replace", n.NodeIP(i) + "/32", "dev", n.Bridge()},
		{"route", "replace", n.PodSubnet(i), "via", n.NodeIP(i), "dev", n.Bridge()},
		in("link", "set", "lo", "up"),
		in("link", "set", "eth0", "up"),
		in("addr", "replace", n.NodeIP(i)+"/32", "dev", "eth0"),
		in("route", "replace", n.HostIP()+"/32", "dev", "eth0"),
		in("route", "replace", "blackhole", n.Range()),
		// Service IPs: kube-proxy's DNAT makes them local, but the
		// route lookup of a local socket comes before it.
		in("route", "replace", n.ServiceCIDR(), "via", n.HostIP(), "dev", "eth0"),
	}
	for _, p := range peers {
		if p == i {
			continue
		}
		steps = append(steps,
			in("route", "replace", n.NodeIP(p)+"/32", "dev", "eth0"),
			in("route", "replace", n.PodSubnet(p), "via", n.NodeIP(p), "dev", "eth0"))
	}
	for _, s := range steps {
		if err := ipCmd(nil, s...); err != nil {
			return fmt.Errorf("real node network %s: %w", ns, err)
		}
	}
	// Pods are routed through the node; the CNI bridge plugin would turn
	// this on too, in the namespace only.
	for _, kv := range [][2]string{{"net.ipv4.ip_forward", "1"}, {"net.ipv6.conf.all.disable_ipv6", "1"}} {
		if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", kv[0]+"="+kv[1]).CombinedOutput(); err != nil {
			return fmt.Errorf("real node network %s: sysctl %s: %w: %s", ns, kv[0], err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// setupKwokletNode creates the namespace of the k-th KWOK node: an
// address on the bridge, routes to the host only (ejabberd, Redis and
// the apiservers listen there). Idempotent.
func (n netPlan) setupKwokletNode(k int) error {
	ns, veth, ip := n.KwokletNetNS(k), n.kwokletVeth(k), n.KwokletIP(k)
	if _, err := os.Stat(n.KwokletNetNSFile(k)); err != nil {
		if err := ipCmd([]string{"File exists"}, "netns", "add", ns); err != nil {
			return err
		}
	}
	// A host end whose peer is not in the namespace (the namespace was
	// removed while processes kept the old one) is replaced.
	if linkExists(veth) && exec.Command("ip", "-n", ns, "link", "show", "dev", "eth0").Run() != nil {
		if err := ipCmd([]string{"Cannot find device"}, "link", "del", veth); err != nil {
			return err
		}
	}
	if !linkExists(veth) {
		if err := ipCmd(nil, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns); err != nil {
			return err
		}
	}
	in := func(args ...string) []string { return append([]string{"-n", ns}, args...) }
	for _, s := range [][]string{
		{"link", "set", veth, "master", n.Bridge(), "up"},
		{"route", "replace", ip + "/32", "dev", n.Bridge()},
		in("link", "set", "lo", "up"),
		in("link", "set", "eth0", "up"),
		in("addr", "replace", ip+"/32", "dev", "eth0"),
		in("route", "replace", n.HostIP()+"/32", "dev", "eth0"),
		in("route", "replace", "blackhole", n.Range()),
	} {
		if err := ipCmd(nil, s...); err != nil {
			return fmt.Errorf("KWOK node network %s: %w", ns, err)
		}
	}
	return nil
}

// netnsList returns the names of the testbed's network namespaces.
func (n netPlan) netnsList() []string {
	entries, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), n.Bridge()+"-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// nodeLinks returns the host ends of the testbed's veth pairs: the links
// named after the bridge with a suffix.
func (n netPlan) nodeLinks() []string {
	out, _ := exec.Command("ip", "-o", "link", "show").Output()
	var links []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		rest, ok := strings.CutPrefix(name, n.Bridge())
		if ok && len(rest) > 1 && (rest[0] == 'v' || rest[0] == 'k') {
			if _, err := strconv.Atoi(rest[1:]); err == nil {
				links = append(links, name)
			}
		}
	}
	return links
}

// removeNode deletes real node i's namespace (its link goes with it) and
// host routes.
func (n netPlan) removeNode(name string) error {
	var errs []error
	if err := ipCmd([]string{"No such file", "Invalid argument"}, "netns", "del", name); err != nil {
		errs = append(errs, err)
	}
	_ = os.Remove("/run/netns/" + name)
	return errors.Join(errs...)
}

// teardown removes every namespace, link and route of the testbed. The
// processes in the namespaces must be gone.
func (n netPlan) teardown() error {
	var errs []error
	// The host ends of the nodes' links first: deleting a namespace frees
	// its end of a veth pair, and so the host end, only later, in the
	// kernel's own time; deleting the host end takes both at once.
	for _, l := range n.nodeLinks() {
		if err := ipCmd([]string{"Cannot find device"}, "link", "del", l); err != nil {
			errs = append(errs, err)
		}
	}
	for _, ns := range n.netnsList() {
		if err := n.removeNode(ns); err != nil {
			errs = append(errs, err)
		}
	}
	if linkExists(n.Bridge()) {
		if err := ipCmd([]string{"Cannot find device"}, "link", "del", n.Bridge()); err != nil {
			errs = append(errs, err)
		}
	}
	// Whatever route is left in the range (the blackhole, a route of a
	// node whose link is gone).
	out, _ := exec.Command("ip", "route", "show", "root", n.Range()).Output()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			if err := ipCmd([]string{"No such process"}, append([]string{"route", "del"}, f...)...); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func writeSysctl(file, value string) error {
	if err := os.WriteFile(file, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s: %w", file, err)
	}
	return nil
}
