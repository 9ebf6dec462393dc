package testbed

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
)

// TestRedisACLUsers: the testbed's Redis defines every component's ACL
// user in its configuration, with passwords in 0600 files and only their
// digests in redis.conf; each user logs in and is confined to its rules,
// and the default user keeps the testbed's password. A second start reads
// the same passwords.
func TestRedisACLUsers(t *testing.T) {
	ctx := context.Background()
	dir, pki := t.TempDir(), t.TempDir()
	users, err := redisACLUsers(pki)
	if err != nil {
		t.Fatal(err)
	}
	r := services.NewRedis(dir, FreePorts(t, 1), services.RandomSecret())
	r.SetACLUsers(users)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(ctx) })

	conf, err := os.ReadFile(filepath.Join(dir, "redis.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range state.Components() {
		file := RedisUserPasswordFile(pki, c)
		fi, err := os.Stat(file)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("password file of %s: %v, %v", c, fi, err)
		}
		pw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(conf), string(pw)) {
			t.Errorf("redis.conf holds the password of %s in clear", c)
		}
		cl := redis.NewClient(&redis.Options{Addr: r.Addr(), Username: state.ACLUserName(c), Password: string(pw)})
		if err := cl.Ping(ctx).Err(); err != nil {
			t.Errorf("%s logs in: %v", c, err)
		}
		if err := cl.FlushAll(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%s FLUSHALL: %v, want NOPERM", c, err)
		}
		cl.Close()
	}
	def := redis.NewClient(&redis.Options{Addr: r.Addr(), Password: r.Password()})
	defer def.Close()
	if err := def.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Errorf("default user: %v", err)
	}
	again, err := redisACLUsers(pki)
	if err != nil || strings.Join(again, "\n") != strings.Join(users, "\n") {
		t.Errorf("second read of the users: %v (changed: %v)", err, strings.Join(again, "\n") != strings.Join(users, "\n"))
	}
}
