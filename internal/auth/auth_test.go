package auth

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
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
		"hashed tokens": {
			in:   HashToken(opTok) + ",alice,operator\n" + upperDigest(viewTok) + ",bob,viewer\n",
			want: []Entry{{HashToken(opTok), Identity{"alice", RoleOperator}}, {upperDigest(viewTok), Identity{"bob", RoleViewer}}},
		},
		"bad digests and a token given twice, once hashed": {
			in: "sha256:abc,x,viewer\n" + "sha256:" + strings.Repeat("zz", 32) + ",y,viewer\n" +
				opTok + ",alice,operator\n" + HashToken(opTok) + ",alice2,viewer\n",
			wantErr: []string{
				"line 1: token of x: digest has 3 hex digits, want 64",
				"line 2: token of y: digest is not hex: encoding/hex: invalid byte: U+007A 'z'",
				"line 4: same token as line 3",
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

// upperDigest is HashToken(tok) with upper-case hex digits.
func upperDigest(tok string) string {
	return DigestPrefix + strings.ToUpper(strings.TrimPrefix(HashToken(tok), DigestPrefix))
}

func TestAuthenticateHashed(t *testing.T) {
	a := Static([]Entry{{HashToken(opTok), Identity{"alice", RoleOperator}}, {upperDigest(viewTok), Identity{"bob", RoleViewer}}})
	for tok, want := range map[string]Identity{opTok: {"alice", RoleOperator}, viewTok: {"bob", RoleViewer}} {
		if got, ok := a.Authenticate(tok); !ok || got != want {
			t.Errorf("Authenticate(%q) = %v, %v", tok, got, ok)
		}
	}
	// The digest is not a token: presenting it is refused.
	for _, bad := range []string{HashToken(opTok), HashToken(opTok)[len(DigestPrefix):], ""} {
		if got, ok := a.Authenticate(bad); ok {
			t.Errorf("Authenticate(%q) = %v, want refused", bad, got)
		}
	}
	// An entry built by hand with a digest that does not decode matches
	// nothing (Parse refuses it).
	if _, ok := Static([]Entry{{"sha256:00", Identity{"x", RoleViewer}}}).Authenticate("sha256:00"); ok {
		t.Error("an undecodable digest entry accepted a token")
	}
}

// TestNoTokenInMemory loads token lists with tokens in clear from a file
// and from a Secret and walks everything the authenticator keeps: no
// string, byte slice or byte array in it holds a token.
func TestNoTokenInMemory(t *testing.T) {
	list := opTok + ",alice,operator\n" + viewTok + ",bob,viewer\n"
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}
	cs := fake.NewSimpleClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tokens"},
		Data:       map[string][]byte{DefaultSecretKey: []byte(list)},
	})
	ctx := context.Background()
	for name, src := range map[string]Source{"file": FileSource{Path: file}, "secret": SecretSource{Client: cs, Namespace: "ns", Name: "tokens"}} {
		t.Run(name, func(t *testing.T) {
			a, err := New(ctx, src, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Reload(ctx); err != nil {
				t.Fatal(err)
			}
			if _, ok := a.Authenticate(opTok); !ok {
				t.Fatal("token refused")
			}
			// The source is the caller's (the Secret's client holds the
			// Secret); what the authenticator adds must not.
			a.src = nil
			a.log = nil
			for _, tok := range []string{opTok, viewTok} {
				if path, found := holds(reflect.ValueOf(a), []byte(tok), "a", map[uintptr]bool{}); found {
					t.Errorf("the authenticator keeps token %q in clear at %s", tok, path)
				}
			}
			// The walk finds what it looks for.
			if _, found := holds(reflect.ValueOf(&Entry{Token: opTok}), []byte(opTok), "e", map[uintptr]bool{}); !found {
				t.Fatal("holds does not find a token in an Entry")
			}
		})
	}
}

// holds reports whether v, followed through pointers, structs, slices,
// arrays, maps and interfaces, holds secret in a string or in bytes, and
// where.
func holds(v reflect.Value, secret []byte, path string, seen map[uintptr]bool) (string, bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return "", false
		}
		seen[v.Pointer()] = true
		return holds(v.Elem(), secret, path, seen)
	case reflect.Interface:
		if v.IsNil() {
			return "", false
		}
		return holds(v.Elem(), secret, path, seen)
	case reflect.String:
		return path, bytes.Contains([]byte(v.String()), secret)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if p, ok := holds(v.Field(i), secret, path+"."+v.Type().Field(i).Name, seen); ok {
				return p, true
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, v.Len())
			for i := range b {
				b[i] = byte(v.Index(i).Uint())
			}
			return path, bytes.Contains(b, secret)
		}
		for i := 0; i < v.Len(); i++ {
			if p, ok := holds(v.Index(i), secret, fmt.Sprintf("%s[%d]", path, i), seen); ok {
				return p, true
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if p, ok := holds(it.Key(), secret, path+"{key}", seen); ok {
				return p, true
			}
			if p, ok := holds(it.Value(), secret, path+"{value}", seen); ok {
				return p, true
			}
		}
	}
	return "", false
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
