package deployments_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mlsysops-go/mlsysops/deployments/deployer"
	mlstate "github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// testRedisUsers: every installed component with Redis access logs in as
// its own ACL user, from the Secret the installer made (the cluster
// agents' in every member; the continuum agent's and the northbound's on
// the host), and Redis refuses each user a command and a key outside its
// rules (state.ACLRules). The members hold no other Redis credential.
func testRedisUsers(t *testing.T, env *testbed.Env, cl *deployer.Clusters) {
	ctx := context.Background()
	creds := map[mlstate.Component][2]string{}
	for _, c := range mlstate.Components() {
		name, where := deployer.RedisUserSecret(c)
		kc := cl.Host.Kube
		if where == "karmada" {
			// What the members received, not only what was written.
			kc = kubernetes.NewForConfigOrDie(env.RESTConfig(t, env.Clusters[0]))
		}
		s, err := kc.CoreV1().Secrets(deployer.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s's Redis user: %v", c, err)
		}
		user, pw := string(s.Data["username"]), string(s.Data["password"])
		if user != mlstate.ACLUserName(c) || len(pw) < 16 {
			t.Fatalf("Secret %s: user %q, password of %d bytes; want %s and a generated password", name, user, len(pw), mlstate.ACLUserName(c))
		}
		creds[c] = [2]string{user, pw}
	}

	// Each user is in use: the installed components connected with it.
	admin := redis.NewClient(&redis.Options{Addr: env.RedisAddr, Password: env.RedisPassword})
	defer admin.Close()
	testbed.Eventually(t, "the components connected to Redis as their own users", time.Minute, func() error {
		list, err := admin.ClientList(ctx).Result()
		if err != nil {
			return err
		}
		for _, c := range mlstate.Components() {
			if !strings.Contains(list, " user="+mlstate.ACLUserName(c)+" ") {
				return fmt.Errorf("no client logged in as %s", mlstate.ACLUserName(c))
			}
		}
		return nil
	})

	// Outside its rules, each user is refused: a command none needs, a
	// key of another component, and (the cluster agent) the submissions.
	outside := map[mlstate.Component][][]any{
		mlstate.ComponentContinuum:  {{"FLUSHALL"}, {"CONFIG", "GET", "requirepass"}, {"GET", "other:secret"}},
		mlstate.ComponentCluster:    {{"KEYS", "*"}, {"GET", "other:secret"}, {"XRANGE", mlstate.DefaultPrefix + ":{apps}:submissions", "-", "+"}},
		mlstate.ComponentNorthbound: {{"ACL", "LIST"}, {"SET", "other:secret", "x"}, {"XREADGROUP", "GROUP", "g", "c", "STREAMS", mlstate.DefaultPrefix + ":{apps}:submissions", ">"}},
	}
	inside := map[mlstate.Component][]any{
		mlstate.ComponentContinuum:  {"HGETALL", mlstate.DefaultPrefix + ":{apps}:status:none"},
		mlstate.ComponentCluster:    {"HGETALL", mlstate.DefaultPrefix + ":{agents}:agent:none"},
		mlstate.ComponentNorthbound: {"HGET", mlstate.DefaultPrefix + ":{apps}:status:none", "phase"},
	}
	for _, c := range mlstate.Components() {
		cr := creds[c]
		rc := redis.NewClient(&redis.Options{Addr: env.RedisAddr, Username: cr[0], Password: cr[1]})
		if err := rc.Ping(ctx).Err(); err != nil {
			t.Errorf("%s: PING as %s: %v", c, cr[0], err)
		}
		if err := rc.Do(ctx, inside[c]...).Err(); err != nil && err != redis.Nil {
			t.Errorf("%s: %v as %s, within its rules: %v", c, inside[c], cr[0], err)
		}
		for _, cmd := range outside[c] {
			err := rc.Do(ctx, cmd...).Err()
			if err == nil || !strings.Contains(err.Error(), "NOPERM") {
				t.Errorf("%s: %v as %s: %v, want NOPERM", c, cmd, cr[0], err)
			}
		}
		rc.Close()
		// A wrong password is no way in either.
		bad := redis.NewClient(&redis.Options{Addr: env.RedisAddr, Username: cr[0], Password: cr[1] + "x"})
		if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Errorf("%s: a wrong password: %v, want WRONGPASS", c, err)
		}
		bad.Close()
	}
}
