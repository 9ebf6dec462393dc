package secrets_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// observer names the test's own connection in CLIENT LIST.
const observer = "mlsysops-secrets-test"

// testRedisUsers checks, on the testbed's Redis while the agents and the
// API run, that every client logged in as its component's ACL user
// (state.ACLUserName): the continuum and cluster agents and the API, and
// nobody but the test itself as the default user, whose password opens
// every key.
func testRedisUsers(t *testing.T, env *testbed.Env) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: env.RedisAddr, Password: env.RedisPassword, PoolSize: 1, ClientName: observer})
	defer rdb.Close()
	want := map[string]bool{}
	for _, c := range state.Components() {
		want[state.ACLUserName(c)] = true
	}
	var last string
	for ctx.Err() == nil {
		list, err := rdb.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		users := map[string]int{}
		var strays []string
		for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
			f := map[string]string{}
			for _, kv := range strings.Fields(line) {
				k, v, _ := strings.Cut(kv, "=")
				f[k] = v
			}
			users[f["user"]]++
			if f["user"] == "default" && f["name"] != observer {
				strays = append(strays, fmt.Sprintf("%s (name %q, last command %s)", f["addr"], f["name"], f["cmd"]))
			}
		}
		var missing []string
		for u := range want {
			if users[u] == 0 {
				missing = append(missing, u)
			}
		}
		sort.Strings(missing)
		if len(missing) == 0 && len(strays) == 0 {
			t.Logf("Redis clients by user: %v", users)
			return
		}
		last = fmt.Sprintf("users %v; no client of %v; default-user clients: %v", users, missing, strays)
		time.Sleep(2 * time.Second)
	}
	t.Errorf("Redis clients are not each their component's user: %s", last)
}
