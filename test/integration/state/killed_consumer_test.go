package state_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/internal/state"
)

// envConsumerRedis is the Redis configuration (JSON) of the consumer
// child process started by TestKilledConsumerProcess.
const envConsumerRedis = "STATE_TEST_CONSUMER_REDIS"

// TestMain turns the test binary into the consumer process of
// TestKilledConsumerProcess when started as such.
func TestMain(m *testing.M) {
	if cfg := os.Getenv(envConsumerRedis); cfg != "" {
		consumerChild(cfg)
		return
	}
	os.Exit(m.Run())
}

// consumerChild reads submissions, prints their entry ids and then hangs
// without acknowledging them, until it is killed.
func consumerChild(cfgJSON string) {
	var cfg state.Config
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	rdb, err := state.NewClient(cfg)
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	ctx := context.Background()
	q, err := state.New(rdb, state.Options{}).Applications().Queue(ctx, "", "continuum-victim", state.QueueOptions{Block: time.Second})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	for {
		es, err := q.Read(ctx)
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		for _, e := range es {
			fmt.Println("READ", e.ID)
		}
	}
}

// TestKilledConsumerProcess: a consumer process reads submissions and is
// killed (SIGKILL) before acknowledging; another consumer gets every one of
// them once they are idle, and handles each once.
func TestKilledConsumerProcess(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	apps := e.store.Applications()
	const n = 5
	for i := 0; i < n; i++ {
		if _, err := apps.Submit(ctx, state.Submission{ID: fmt.Sprintf("app-%03d", i), Kind: state.KindDeploy, Spec: appSpec(i)}); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := json.Marshal(e.redis.Config())
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), envConsumerRedis+"="+string(cfg))
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	var read []string
	sc := bufio.NewScanner(out)
	for len(read) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "READ "):
			read = append(read, strings.TrimPrefix(line, "READ "))
		case strings.HasPrefix(line, "ERROR"):
			t.Fatalf("consumer child: %s", line)
		}
	}
	if len(read) != n {
		t.Fatalf("the child consumer read %d of %d entries", len(read), n)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	if p, _ := mustQueue(t, apps, "continuum-observer").Pending(ctx); p != n {
		t.Fatalf("%d entries pending after the kill, want the %d the child read", p, n)
	}

	survivor := mustQueue(t, apps, "continuum-survivor")
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		es, err := survivor.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range es {
			got = append(got, en.ID)
			if err := survivor.Ack(ctx, en.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	sort.Strings(got)
	sort.Strings(read)
	if diff := cmp.Diff(read, got); diff != "" {
		t.Fatalf("entries taken over (-killed consumer read +survivor got):\n%s", diff)
	}
	if p, _ := survivor.Pending(ctx); p != 0 {
		t.Errorf("%d entries still pending", p)
	}
	if b, _ := apps.Backlog(ctx); b != 0 {
		t.Errorf("%d entries left in the stream after acknowledgement", b)
	}
}

func mustQueue(t *testing.T, c *state.Collection, consumer string) *state.Queue {
	t.Helper()
	q, err := c.Queue(context.Background(), "", consumer, state.QueueOptions{ClaimIdle: 300 * time.Millisecond, Block: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return q
}
