// Package kwoklet runs the containers of chosen pods on KWOK nodes as real
// processes, as a kubelet would run them on a real node: KWOK marks the
// pods Running, and the runner starts each container's program with
// exactly the pod's command, arguments and environment (downward API
// resolved), its ConfigMap, Secret, projected and downward API volumes at
// their mount paths (kept in sync when they change, in the kubelet's
// layout), a ServiceAccount token bound to the pod, its user, and the
// node's network; it restarts what exits and reports readiness from the
// pod's readiness probe in the pod's status. The pod spec is the only
// source.
//
// The testbed uses it for the MLSysOps agents' DaemonSet pods on KWOK
// nodes, where nothing else would run them.
package kwoklet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// KWOKNodeLabel marks the nodes KWOK simulates.
const KWOKNodeLabel = "kwok.x-k8s.io/node"

// Image says how a container image runs here: its program on this machine,
// bound at the image's entrypoint path, and the image's defaults.
type Image struct {
	// Repository is the image name without registry and tag
	// ("mlsysops/agent-node"); docker.io/ and a tag are ignored when
	// matching.
	Repository string
	// Entrypoint is the image's entrypoint (its program's path in the
	// image); Program is that program on this machine.
	Entrypoint, Program string
	// Args are the image's default arguments (its Cmd).
	Args []string
	// Env are the image's environment defaults (KEY=value).
	Env []string
	// UID and GID are the image's user.
	UID, GID int
}

// Options configure a Runner.
type Options struct {
	// Cluster names the cluster in logs.
	Cluster string
	// Config reaches the cluster's API with rights to read pods, nodes,
	// ConfigMaps and Secrets, update pod status and request tokens.
	Config *rest.Config
	// StateDir keeps the volumes, sandboxes, logs and pid files.
	StateDir string
	// Self is an executable whose main calls RunSandboxIfAsked (default
	// /proc/self/exe).
	Self string
	// Images are the images that can run; a pod of another image is
	// reported as not runnable.
	Images []Image
	// Selector chooses the pods to run (a label selector).
	Selector string
	// NodeRoot is the folder that stands for a KWOK node's file system
	// (hostPath volumes); default <StateDir>/nodes/<node>.
	NodeRoot func(node string) string
	// Network returns the network namespace a pod's containers join and
	// the address its probes reach; nil runs them in the host's, probed
	// on 127.0.0.1.
	Network func(pod *corev1.Pod) (netns, ip string, err error)
	// ServiceEnv is added to every container's environment first (the
	// kubelet's service variables, such as KUBERNETES_SERVICE_HOST).
	ServiceEnv map[string]string
	// Resync is how often volumes, processes and probes are checked
	// (default 1s).
	Resync time.Duration
	// Log receives the runner's events.
	Log *slog.Logger
}

// Runner runs the chosen pods of KWOK nodes of one cluster.
type Runner struct {
	opts Options
	cs   kubernetes.Interface

	pods    listerscorev1.PodLister
	nodes   listerscorev1.NodeLister
	cms     listerscorev1.ConfigMapLister
	secrets listerscorev1.SecretLister
	synced  []cache.InformerSynced

	mu     sync.Mutex
	ctrs   map[string]*container // by pod UID/container name
	tokens map[string]token      // by pod UID/audience
}

type token struct {
	value string
	renew time.Time
}

// container is one running (or backing off) container.
type container struct {
	key, podNS, podName, name, image string
	podUID                           types.UID
	hash                             string
	cmd                              *exec.Cmd
	exited                           chan struct{}
	exitCode                         int
	exitAt                           time.Time
	restarts                         int32
	backoff                          time.Duration
	nextStart                        time.Time
	waiting                          string // reason while not running
	message                          string
	ready                            bool
	startedAt                        time.Time
	reported                         string // last status patch, to send only changes
	sandbox                          *Sandbox
	probeURL                         string
}

// New builds a runner.
func New(opts Options) (*Runner, error) {
	if opts.Self == "" {
		opts.Self = "/proc/self/exe"
	}
	if opts.Resync == 0 {
		opts.Resync = time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if opts.NodeRoot == nil {
		dir := opts.StateDir
		opts.NodeRoot = func(node string) string { return filepath.Join(dir, "nodes", node) }
	}
	if _, err := labels.Parse(opts.Selector); err != nil {
		return nil, fmt.Errorf("pod selector %q: %w", opts.Selector, err)
	}
	cs, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, err
	}
	return &Runner{opts: opts, cs: cs, ctrs: map[string]*container{}, tokens: map[string]token{}}, nil
}

// Run runs the pods until ctx ends, then stops their processes.
func (r *Runner) Run(ctx context.Context) error {
	podsF := informers.NewSharedInformerFactoryWithOptions(r.cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = r.opts.Selector
	}))
	nodesF := informers.NewSharedInformerFactoryWithOptions(r.cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = KWOKNodeLabel
	}))
	all := informers.NewSharedInformerFactory(r.cs, 0)
	r.pods = podsF.Core().V1().Pods().Lister()
	r.nodes = nodesF.Core().V1().Nodes().Lister()
	r.cms = all.Core().V1().ConfigMaps().Lister()
	r.secrets = all.Core().V1().Secrets().Lister()
	r.synced = []cache.InformerSynced{
		podsF.Core().V1().Pods().Informer().HasSynced, nodesF.Core().V1().Nodes().Informer().HasSynced,
		all.Core().V1().ConfigMaps().Informer().HasSynced, all.Core().V1().Secrets().Informer().HasSynced,
	}
	for _, f := range []informers.SharedInformerFactory{podsF, nodesF, all} {
		f.Start(ctx.Done())
		defer f.Shutdown()
	}
	if !cache.WaitForCacheSync(ctx.Done(), r.synced...) {
		return ctx.Err()
	}
	r.killLeftovers()
	r.opts.Log.Info("kwoklet running", "cluster", r.opts.Cluster, "selector", r.opts.Selector)
	t := time.NewTicker(r.opts.Resync)
	defer t.Stop()
	for {
		r.sync(ctx)
		select {
		case <-ctx.Done():
			r.stopAll()
			return nil
		case <-t.C:
		}
	}
}

// sync brings the processes in line with the pods.
func (r *Runner) sync(ctx context.Context) {
	pods, err := r.pods.List(labels.Everything())
	if err != nil {
		r.opts.Log.Warn("list pods", "err", err)
		return
	}
	want := map[string]bool{}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning || pod.Spec.NodeName == "" {
			continue
		}
		if _, err := r.nodes.Get(pod.Spec.NodeName); err != nil {
			continue // not a KWOK node: a kubelet runs it
		}
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			key := string(pod.UID) + "/" + c.Name
			want[key] = true
			r.syncContainer(ctx, pod, c, key)
		}
	}
	r.mu.Lock()
	var gone []*container
	for key, c := range r.ctrs {
		if !want[key] {
			gone = append(gone, c)
			delete(r.ctrs, key)
		}
	}
	r.mu.Unlock()
	for _, c := range gone {
		r.stop(c, 10*time.Second)
		r.opts.Log.Info("container stopped: its pod is gone", "pod", c.podNS+"/"+c.podName, "container", c.name)
		_ = os.RemoveAll(r.podDir(c.podUID))
	}
}

// podDir is a pod's folder.
func (r *Runner) podDir(uid types.UID) string {
	return filepath.Join(r.opts.StateDir, "pods", string(uid))
}

// syncContainer materializes the pod's volumes, starts or restarts the
// container's process, probes it and reports its status.
func (r *Runner) syncContainer(ctx context.Context, pod *corev1.Pod, c *corev1.Container, key string) {
	r.mu.Lock()
	ctr := r.ctrs[key]
	if ctr == nil {
		ctr = &container{key: key, podNS: pod.Namespace, podName: pod.Name, podUID: pod.UID, name: c.Name, image: c.Image, backoff: time.Second}
		r.ctrs[key] = ctr
	}
	r.mu.Unlock()

	sb, probe, err := r.sandbox(ctx, pod, c)
	if err != nil {
		r.setWaiting(ctr, "CreateContainerConfigError", err.Error())
		r.report(ctx, pod, ctr)
		return
	}
	h := hashOf(sb)
	running := ctr.cmd != nil && !isClosed(ctr.exited)
	if running && h != ctr.hash {
		// The spec it runs with changed (it cannot for a pod; the image
		// program or a subPath target can): start again.
		r.stop(ctr, 10*time.Second)
		running = false
	}
	if ctr.cmd != nil && isClosed(ctr.exited) && ctr.waiting == "" {
		// It exited: restart after the back-off (restartPolicy Always,
		// the DaemonSets' only policy).
		ctr.restarts++
		ctr.nextStart = time.Now().Add(ctr.backoff)
		ctr.backoff = min(2*ctr.backoff, 30*time.Second)
		ctr.ready = false
		r.setWaiting(ctr, "CrashLoopBackOff", fmt.Sprintf("exited with %d; restarting in %s", ctr.exitCode, time.Until(ctr.nextStart).Round(time.Second)))
		r.opts.Log.Warn("container exited", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "exit", ctr.exitCode, "restarts", ctr.restarts)
	}
	if !running && time.Now().After(ctr.nextStart) {
		if err := r.start(ctr, sb); err != nil {
			r.setWaiting(ctr, "RunContainerError", err.Error())
		} else {
			ctr.hash, ctr.probeURL = h, probe
		}
	}
	if ctr.cmd != nil && !isClosed(ctr.exited) {
		ctr.ready = r.probe(ctx, ctr, c)
		if ctr.ready && time.Since(ctr.startedAt) > 10*time.Second {
			ctr.backoff = time.Second
		}
	}
	r.report(ctx, pod, ctr)
}

func (r *Runner) setWaiting(c *container, reason, msg string) {
	c.waiting, c.message, c.ready = reason, msg, false
}

func isClosed(ch chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func hashOf(s *Sandbox) string {
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// image finds how an image runs here.
func (r *Runner) image(ref string) (*Image, error) {
	repo := ref
	if i := strings.LastIndex(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	repo = strings.TrimPrefix(strings.TrimPrefix(repo, "docker.io/"), "library/")
	for i := range r.opts.Images {
		im := &r.opts.Images[i]
		if repo == im.Repository || strings.HasSuffix(repo, "/"+im.Repository) {
			return im, nil
		}
	}
	return nil, fmt.Errorf("image %s: no program for it on this machine", ref)
}

// sandbox works out how to run a container: its volumes written, its
// mounts, user, environment and command, and the URL of its readiness
// probe.
func (r *Runner) sandbox(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (*Sandbox, string, error) {
	im, err := r.image(c.Image)
	if err != nil {
		return nil, "", err
	}
	base := map[string]string{}
	for _, kv := range im.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			base[k] = v
		}
	}
	host := pod.Name
	if pod.Spec.HostNetwork {
		host = pod.Spec.NodeName
	}
	base["HOSTNAME"] = host
	for k, v := range r.opts.ServiceEnv {
		base[k] = v
	}
	env, err := Env(ctx, pod, c, base, r)
	if err != nil {
		return nil, "", err
	}
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	dir := r.podDir(pod.UID)
	vols := map[string]string{}
	uid, gid := im.UID, im.GID
	var groups []int
	if sc := pod.Spec.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = int(*sc.RunAsUser)
		}
		if sc.RunAsGroup != nil {
			gid = int(*sc.RunAsGroup)
		}
		if sc.FSGroup != nil {
			groups = append(groups, int(*sc.FSGroup))
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = int(*sc.RunAsUser)
		}
		if sc.RunAsGroup != nil {
			gid = int(*sc.RunAsGroup)
		}
	}
	fsGroup := -1
	if len(groups) > 0 {
		fsGroup = groups[0]
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		p := filepath.Join(dir, "volumes", v.Name)
		files, ok, err := volumeFiles(ctx, pod, v, r)
		switch {
		case err != nil:
			return nil, "", fmt.Errorf("volume %s: %w", v.Name, err)
		case ok:
			if _, err := WriteAtomic(p, files, 0, fsGroup); err != nil {
				return nil, "", fmt.Errorf("volume %s: %w", v.Name, err)
			}
		case v.EmptyDir != nil:
			if err := os.MkdirAll(p, 0o777); err != nil {
				return nil, "", err
			}
		case v.HostPath != nil:
			// The KWOK node's own file system, never the machine's.
			p = filepath.Join(r.opts.NodeRoot(pod.Spec.NodeName), filepath.Clean("/"+v.HostPath.Path))
			if err := os.MkdirAll(p, 0o755); err != nil {
				return nil, "", err
			}
		default:
			return nil, "", fmt.Errorf("volume %s: this kind of volume is not supported on KWOK nodes", v.Name)
		}
		vols[v.Name] = p
	}
	sb := &Sandbox{Dir: filepath.Join(dir, "sandbox", c.Name), UID: uid, GID: gid, Groups: groups, WorkDir: c.WorkingDir, Env: env}
	for _, m := range c.VolumeMounts {
		src, ok := vols[m.Name]
		if !ok {
			return nil, "", fmt.Errorf("volume mount %s: no volume %s", m.MountPath, m.Name)
		}
		sub := m.SubPath
		if m.SubPathExpr != "" {
			sub = Expand(m.SubPathExpr, vars)
		}
		if sub != "" {
			if err := validRel(sub); err != nil {
				return nil, "", fmt.Errorf("volume mount %s: %w", m.MountPath, err)
			}
			src = filepath.Join(src, sub)
			if _, err := os.Stat(src); err != nil {
				return nil, "", fmt.Errorf("volume mount %s: subPath %s: %w", m.MountPath, sub, err)
			}
		}
		sb.Mounts = append(sb.Mounts, Mount{Source: src, Target: m.MountPath, ReadOnly: m.ReadOnly})
	}
	sb.Mounts = append(sb.Mounts, Mount{Source: im.Program, Target: im.Entrypoint, ReadOnly: true})
	argv := []string{im.Entrypoint}
	args := im.Args
	if len(c.Command) > 0 {
		argv = nil
		for _, a := range c.Command {
			argv = append(argv, Expand(a, vars))
		}
	}
	if len(c.Args) > 0 {
		args = nil
		for _, a := range c.Args {
			args = append(args, Expand(a, vars))
		}
	}
	sb.Argv = append(argv, args...)
	ip := "127.0.0.1"
	if r.opts.Network != nil {
		if sb.NetNS, ip, err = r.opts.Network(pod); err != nil {
			return nil, "", fmt.Errorf("network: %w", err)
		}
	}
	probe := ""
	if p := c.ReadinessProbe; p != nil && p.HTTPGet != nil {
		port := p.HTTPGet.Port.String()
		if p.HTTPGet.Port.IntVal == 0 {
			port = ""
			for _, cp := range c.Ports {
				if cp.Name == p.HTTPGet.Port.StrVal {
					port = strconv.Itoa(int(cp.ContainerPort))
				}
			}
			if port == "" {
				return nil, "", fmt.Errorf("readiness probe: no port named %s", p.HTTPGet.Port.StrVal)
			}
		}
		probe = "http://" + net.JoinHostPort(ip, port) + p.HTTPGet.Path
	}
	return sb, probe, nil
}

// start starts a container's process in its sandbox.
func (r *Runner) start(c *container, sb *Sandbox) error {
	cmd, err := sb.Command(r.opts.Self)
	if err != nil {
		return err
	}
	logs := filepath.Join(r.opts.StateDir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(logs, c.podNS+"_"+c.podName+"_"+c.name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	f.Close()
	c.cmd, c.exited, c.sandbox = cmd, make(chan struct{}), sb
	c.startedAt, c.waiting, c.message = time.Now(), "", ""
	r.writePid(c)
	go func(cmd *exec.Cmd, done chan struct{}) {
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		r.mu.Lock()
		c.exitCode, c.exitAt = code, time.Now()
		r.mu.Unlock()
		_ = os.Remove(r.pidFile(c))
		close(done)
	}(cmd, c.exited)
	r.opts.Log.Info("container started", "cluster", r.opts.Cluster, "pod", c.podNS+"/"+c.podName, "container", c.name, "pid", cmd.Process.Pid, "argv", strings.Join(sb.Argv, " "))
	return nil
}

// stop sends SIGTERM to a container's process group, then SIGKILL after
// the grace period.
func (r *Runner) stop(c *container, grace time.Duration) {
	if c.cmd == nil || isClosed(c.exited) {
		return
	}
	pgid := c.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-c.exited
	}
}

func (r *Runner) stopAll() {
	r.mu.Lock()
	all := make([]*container, 0, len(r.ctrs))
	for _, c := range r.ctrs {
		all = append(all, c)
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Add(1)
		go func() { defer wg.Done(); r.stop(c, 10*time.Second) }()
	}
	wg.Wait()
}

func (r *Runner) pidFile(c *container) string {
	return filepath.Join(r.opts.StateDir, "pids", strings.ReplaceAll(c.key, "/", "_")+".pid")
}

func (r *Runner) writePid(c *container) {
	_ = os.MkdirAll(filepath.Join(r.opts.StateDir, "pids"), 0o755)
	_ = os.WriteFile(r.pidFile(c), []byte(strconv.Itoa(c.cmd.Process.Pid)), 0o644)
}

// killLeftovers kills the process groups a previous runner left (its pid
// files), so that every container starts from a known state.
func (r *Runner) killLeftovers() {
	files, _ := filepath.Glob(filepath.Join(r.opts.StateDir, "pids", "*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
		_ = os.Remove(f)
	}
}

// probe runs the readiness probe: an HTTP GET answered 2xx or 3xx; a
// container without a probe is ready once running.
func (r *Runner) probe(ctx context.Context, c *container, spec *corev1.Container) bool {
	if c.probeURL == "" {
		return true
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, c.probeURL, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

// report patches the pod's status when the container's changed: its state,
// restarts, readiness, and the pod's Ready and ContainersReady conditions
// (single-container pods).
func (r *Runner) report(ctx context.Context, pod *corev1.Pod, c *container) {
	state := map[string]any{"running": nil, "waiting": nil, "terminated": nil}
	if c.waiting != "" {
		state["waiting"] = map[string]any{"reason": c.waiting, "message": c.message}
	} else if c.cmd != nil {
		state["running"] = map[string]any{"startedAt": c.startedAt.UTC().Format(time.RFC3339)}
	}
	cs := map[string]any{"name": c.name, "image": c.image, "imageID": "", "ready": c.ready, "restartCount": c.restarts, "started": c.waiting == "" && c.cmd != nil, "state": state}
	if c.restarts > 0 && !c.exitAt.IsZero() {
		cs["lastState"] = map[string]any{"terminated": map[string]any{"exitCode": c.exitCode, "finishedAt": c.exitAt.UTC().Format(time.RFC3339), "reason": "Error"}}
	}
	status := corev1.ConditionFalse
	reason := "ContainersNotReady"
	if c.ready {
		status, reason = corev1.ConditionTrue, ""
	}
	key, _ := json.Marshal([]any{cs, status, reason})
	if string(key) == c.reported {
		return
	}
	now := time.Now().UTC().Format(time.RFC3339)
	var conds []map[string]any
	for _, t := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
		cond := map[string]any{"type": t, "status": status, "reason": reason}
		for _, old := range pod.Status.Conditions {
			if old.Type == t && old.Status != status {
				cond["lastTransitionTime"] = now
			}
		}
		conds = append(conds, cond)
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds, "containerStatuses": []any{cs}}})
	_, err := r.cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil && !apierrors.IsNotFound(err) {
		r.opts.Log.Warn("pod status not written", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		return
	}
	c.reported = string(key)
}

// ConfigMap implements Source from the informer's cache.
func (r *Runner) ConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return r.cms.ConfigMaps(ns).Get(name)
}

// Secret implements Source from the informer's cache.
func (r *Runner) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	return r.secrets.Secrets(ns).Get(name)
}

// Token implements Source: a token of the pod's ServiceAccount bound to
// the pod, renewed at 80% of its life, as the kubelet does.
func (r *Runner) Token(ctx context.Context, pod *corev1.Pod, audience string, expirationSeconds int64) (string, error) {
	key := string(pod.UID) + "/" + audience
	r.mu.Lock()
	t, ok := r.tokens[key]
	r.mu.Unlock()
	if ok && time.Now().Before(t.renew) {
		return t.value, nil
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &expirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	resp, err := r.cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of ServiceAccount %s/%s: %w", pod.Namespace, sa, err)
	}
	life := time.Until(resp.Status.ExpirationTimestamp.Time)
	r.mu.Lock()
	r.tokens[key] = token{value: resp.Status.Token, renew: time.Now().Add(life * 8 / 10)}
	r.mu.Unlock()
	return resp.Status.Token, nil
}

var _ Source = (*Runner)(nil)
