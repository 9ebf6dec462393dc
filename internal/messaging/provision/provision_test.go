package provision

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeAPI imitates mod_http_api's answers closely enough to test the
// client's handling of them.
type fakeAPI struct {
	mu       sync.Mutex
	users    map[string]string
	calls    []string
	v2Groups bool
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u, p, ok := r.BasicAuth(); !ok || u != "admin@d" || p != "secret" {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"status":"error","code":10,"message":"You are not authorized to call this command."}`))
		return
	}
	var args map[string]any
	_ = json.NewDecoder(r.Body).Decode(&args)
	cmd := strings.TrimPrefix(r.URL.Path, "/api/")
	f.calls = append(f.calls, cmd)
	switch cmd {
	case "register":
		key := args["user"].(string) + "@" + args["host"].(string)
		if _, ok := f.users[key]; ok {
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"status":"error","code":10090,"message":"User already registered"}`))
			return
		}
		f.users[key] = args["password"].(string)
		_, _ = w.Write([]byte(`"User registered"`))
	case "change_password":
		f.users[args["user"].(string)+"@"+args["host"].(string)] = args["newpass"].(string)
		_, _ = w.Write([]byte(`0`))
	case "add_rosteritem":
		if _, ok := args["group"]; ok && f.v2Groups {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"status":"error","code":31,"message":"Missing argument: groups"}`))
			return
		}
		if args["subs"] != "both" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(`0`))
	case "delete_rosteritem", "unregister":
		_, _ = w.Write([]byte(`0`))
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func TestHTTPAPI(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		f := &fakeAPI{users: map[string]string{}, v2Groups: v2}
		srv := httptest.NewServer(f)
		defer srv.Close()
		api := NewHTTPAPI(srv.URL+"/api/", "admin@d", "secret", nil)
		ctx := context.Background()
		pw, err := Agent(ctx, api, "node-1@d")
		if err != nil {
			t.Fatal(err)
		}
		if len(pw) != 32 || f.users["node-1@d"] != pw {
			t.Fatalf("password %q stored as %q", pw, f.users["node-1@d"])
		}
		pw2, err := Agent(ctx, api, "node-1@d")
		if err != nil || pw2 == pw || f.users["node-1@d"] != pw2 {
			t.Fatalf("re-provisioning: %v; the password must change to the new one", err)
		}
		if err := api.Link(ctx, "cluster-1@d", "node-1@d"); err != nil {
			t.Fatalf("Link (v2 groups %v): %v", v2, err)
		}
		if err := api.Unlink(ctx, "cluster-1@d", "node-1@d"); err != nil {
			t.Fatal(err)
		}
		if err := api.DeleteAccount(ctx, "node-1@d"); err != nil {
			t.Fatal(err)
		}
		want := []string{"register", "register", "change_password", "add_rosteritem", "add_rosteritem", "delete_rosteritem", "delete_rosteritem", "unregister"}
		if v2 {
			want = []string{"register", "register", "change_password", "add_rosteritem", "add_rosteritem", "add_rosteritem", "add_rosteritem", "delete_rosteritem", "delete_rosteritem", "unregister"}
		}
		if diff := cmp.Diff(want, f.calls); diff != "" {
			t.Errorf("calls (v2 %v) (-want +got):\n%s", v2, diff)
		}
		bad := NewHTTPAPI(srv.URL+"/api", "admin@d", "wrong", nil)
		var apiErr *APIError
		if err := bad.EnsureAccount(ctx, "x@d", "pw"); !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized || !strings.Contains(err.Error(), "api_permissions") {
			t.Errorf("wrong admin password: %v", err)
		}
		for _, acct := range []string{"", "d", "a@d/res", "@@"} {
			if err := api.EnsureAccount(ctx, acct, "pw"); err == nil {
				t.Errorf("account %q accepted", acct)
			}
		}
		if err := api.EnsureAccount(ctx, "y@d", ""); err == nil {
			t.Error("empty password accepted")
		}
	}
}

// TestHTTPAPIMovesToAnotherNode: with the admin APIs of a cluster's
// nodes, a call goes to the next node when one cannot be reached, and
// stays there; an answer (even a refusal) is not a reason to move.
func TestHTTPAPIMovesToAnotherNode(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	f := &fakeAPI{users: map[string]string{}}
	live := httptest.NewServer(f)
	defer live.Close()
	api := NewHTTPAPI(dead.URL+"/api", "admin@d", "secret", nil).AlsoAt(live.URL + "/api/")
	ctx := context.Background()
	if err := api.EnsureAccount(ctx, "node-1@d", "pw1"); err != nil {
		t.Fatalf("first node down: %v", err)
	}
	if err := api.EnsureAccount(ctx, "node-2@d", "pw2"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"node-1@d": "pw1", "node-2@d": "pw2"}, f.users); diff != "" {
		t.Errorf("accounts (-want +got):\n%s", diff)
	}
	if api.cur != 1 {
		t.Errorf("calls go to node %d, want the one that answered (1)", api.cur)
	}
	bad := NewHTTPAPI(live.URL+"/api", "admin@d", "wrong", nil).AlsoAt(dead.URL + "/api")
	var apiErr *APIError
	if err := bad.EnsureAccount(ctx, "x@d", "pw"); !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized {
		t.Errorf("a refusal moved on or got lost: %v", err)
	}
	allDead := NewHTTPAPI(dead.URL+"/api", "admin@d", "secret", nil).AlsoAt(dead.URL + "/api")
	if err := allDead.EnsureAccount(ctx, "x@d", "pw"); err == nil || !strings.Contains(err.Error(), "ejabberd API register") {
		t.Errorf("every node down: %v", err)
	}
}

func TestCtl(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	script := filepath.Join(dir, "ejabberdctl")
	// A stand-in for ejabberdctl: logs its arguments and refuses the first
	// registration of "node-1" as already done.
	err := os.WriteFile(script, []byte(`#!/bin/sh
echo "$@" >> `+log+`
case "$*" in
  *"register node-1 d"*) case "$*" in *unregister*) exit 0;; esac; echo "Error: conflict: User node-1@d already registered"; exit 1;;
esac
exit 0
`), 0o755)
	if err != nil {
		t.Fatal(err)
	}
	c := &Ctl{Path: script, Args: []string{"--node", "n@localhost"}}
	ctx := context.Background()
	if err := c.EnsureAccount(ctx, "node-1@d", "pw1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Link(ctx, "cluster-1@d", "node-1@d"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(log)
	want := "--node n@localhost register node-1 d pw1\n" +
		"--node n@localhost change_password node-1 d pw1\n" +
		"--node n@localhost add_rosteritem cluster-1 d node-1 d node-1 mlsysops both\n" +
		"--node n@localhost add_rosteritem node-1 d cluster-1 d cluster-1 mlsysops both\n"
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("ejabberdctl calls (-want +got):\n%s", diff)
	}
	failing := &Ctl{Path: "/bin/false"}
	if err := failing.EnsureAccount(ctx, "a@d", "pw"); err == nil {
		t.Error("a failing ejabberdctl reported success")
	}
}
