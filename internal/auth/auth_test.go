package auth

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

const (
	opTok   = "operator-token-0123456789"
	viewTok = "viewer-token-0123456789ab"
)

func TestParse(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    []Entry
		wantErr []string
	}{
		"two roles, comments and blanks": {
			in:   "# tokens\n\n" + opTok + ",alice,operator\n  " + viewTok + " , bob , viewer \n",
			want: []Entry{{opTok, Identity{"alice", RoleOperator}}, {viewTok, Identity{"bob", RoleViewer}}},
		},
		"every bad line is reported": {
			in: "short,x,viewer\n" + opTok + ",alice,admin\n" + opTok + ",\n" + viewTok + ",,viewer\n" +
				viewTok + ",bob,viewer\n" + viewTok + ",carol,viewer\n",
			wantErr: []string{
				"line 1: token of x is 5 characters; use at least 16",
				`line 2: role "admin" of alice: want viewer or operator`,
				"line 3: want token,name,role, got 2 field(s)",
				"line 4: name is empty",
				"line 6: same token as line 5",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatal("no error")
				}
				if diff := cmp.Diff(strings.Join(tc.wantErr, "\n"), err.Error()); diff != "" {
					t.Errorf("error (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFormatParsesBack(t *testing.T) {
	tok, err := GenerateToken()
	if err != nil || len(tok) < MinTokenLength {
		t.Fatalf("GenerateToken() = %q, %v", tok, err)
	}
	in := []Entry{{tok, Identity{"make-up", RoleOperator}}, {viewTok, Identity{"viewer", RoleViewer}}}
	out, err := Parse(Format(in))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Error(diff)
	}
}

func TestAuthenticate(t *testing.T) {
	a := Static([]Entry{{opTok, Identity{"alice", RoleOperator}}, {viewTok, Identity{"bob", RoleViewer}}})
	for tok, want := range map[string]Identity{opTok: {"alice", RoleOperator}, viewTok: {"bob", RoleViewer}} {
		if got, ok := a.Authenticate(tok); !ok || got != want {
			t.Errorf("Authenticate(%q) = %v, %v", tok, got, ok)
		}
	}
	for _, bad := range []string{"", opTok + "x", opTok[:len(opTok)-1], strings.ToUpper(opTok)} {
		if got, ok := a.Authenticate(bad); ok {
			t.Errorf("Authenticate(%q) = %v, want refused", bad, got)
		}
	}
	if _, ok := Static(nil).Authenticate(""); ok {
		t.Error("an empty list accepted the empty token")
	}
}

func TestFileSourceReload(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(opTok + ",alice,operator\n")
	ctx := context.Background()
	a, err := New(ctx, FileSource{Path: file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := a.Reload(ctx); changed || err != nil {
		t.Errorf("reload of an unchanged file: changed %v, err %v", changed, err)
	}
	// Rotation: the old token stops working, the new one works.
	write(viewTok + ",bob,viewer\n")
	if changed, err := a.Reload(ctx); !changed || err != nil {
		t.Fatalf("reload: changed %v, err %v", changed, err)
	}
	if _, ok := a.Authenticate(opTok); ok {
		t.Error("rotated-out token still accepted")
	}
	if id, ok := a.Authenticate(viewTok); !ok || id.Role != RoleViewer {
		t.Error("new token refused")
	}
	// A broken file keeps the last good list.
	write("garbage\n")
	if _, err := a.Reload(ctx); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("reload of a bad file: %v", err)
	}
	if _, ok := a.Authenticate(viewTok); !ok {
		t.Error("a bad reload dropped the good list")
	}
	// An empty list is refused at start.
	write("# nothing\n")
	if _, err := New(ctx, FileSource{Path: file}, nil); err == nil || !strings.Contains(err.Error(), "holds no token") {
		t.Errorf("New on an empty list: %v", err)
	}
	if _, err := New(ctx, FileSource{Path: file + ".missing"}, nil); err == nil {
		t.Error("New on a missing file succeeded")
	}
}

func TestSecretSource(t *testing.T) {
	cs := fake.NewSimpleClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mlsysops-framework", Name: "northbound-tokens"},
		Data:       map[string][]byte{DefaultSecretKey: []byte(opTok + ",alice,operator\n")},
	})
	ctx := context.Background()
	a, err := New(ctx, SecretSource{Client: cs, Namespace: "mlsysops-framework", Name: "northbound-tokens"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Authenticate(opTok); !ok {
		t.Error("token from the Secret refused")
	}
	_, err = New(ctx, SecretSource{Client: cs, Namespace: "mlsysops-framework", Name: "northbound-tokens", Key: "other"}, nil)
	if err == nil || !strings.Contains(err.Error(), `has no key "other"`) {
		t.Errorf("missing key: %v", err)
	}
	_, err = New(ctx, SecretSource{Client: cs, Namespace: "x", Name: "y"}, nil)
	if err == nil || !strings.Contains(err.Error(), "secret x/y") {
		t.Errorf("missing secret: %v", err)
	}
}
