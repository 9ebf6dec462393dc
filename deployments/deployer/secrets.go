package deployer

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mlsysops-go/mlsysops/deployments/charts"
	"github.com/mlsysops-go/mlsysops/internal/auth"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
	mlstate "github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed/pki"
	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// readSecret returns a Secret's data, or nil when it does not exist.
func readSecret(ctx context.Context, c *Cluster, name string) (map[string][]byte, error) {
	s, err := c.Kube.CoreV1().Secrets(Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Secret %s/%s in the %s API: %w", Namespace, name, c.Name, err)
	}
	return s.Data, nil
}

// keep returns the stored value, or a new one from gen.
func keep(stored map[string][]byte, key string, gen func() (string, error)) (string, error) {
	if v := bytes.TrimSpace(stored[key]); len(v) > 0 {
		return string(v), nil
	}
	return gen()
}

// LoadMaterial reads the secret material of an installation back from its
// Secrets and generates what is missing: passwords of the bundled
// services and of every XMPP account, the API's operator token, and for
// bundled services ejabberd's CA and certificate. External services'
// passwords come from the options. Nothing is written.
func LoadMaterial(ctx context.Context, cl *Clusters, o *Options, p *Plan) (*Material, error) {
	m := &Material{Passwords: map[string]string{}}
	host := func(name string) (map[string][]byte, error) { return readSecret(ctx, cl.Host, name) }
	var err error
	gen := provision.GeneratePassword
	if o.Services == ModeExternal {
		if m.RedisPassword, err = o.secret(o.RedisPasswordFile, "REDIS_PASSWORD"); err != nil {
			return nil, fmt.Errorf("Redis password: %w", err)
		}
		if m.PostgresPassword, err = o.secret(o.PostgresPasswordFile, "POSTGRES_PASSWORD"); err != nil {
			return nil, fmt.Errorf("PostgreSQL password: %w", err)
		}
		if m.EjabberdAdminPassword, err = o.secret(o.EjabberdAdminPasswordFile, "EJABBERD_ADMIN_PASSWORD"); err != nil {
			return nil, fmt.Errorf("ejabberd admin password: %w", err)
		}
		if o.EjabberdBootstrapPasswordFile != "" || o.hasEnv("EJABBERD_BOOTSTRAP_PASSWORD") {
			if m.EjabberdBootstrapPassword, err = o.secret(o.EjabberdBootstrapPasswordFile, "EJABBERD_BOOTSTRAP_PASSWORD"); err != nil {
				return nil, fmt.Errorf("ejabberd bootstrap password: %w", err)
			}
		}
	} else {
		for _, s := range []struct {
			secret string
			dst    *string
		}{{SecretRedis, &m.RedisPassword}, {SecretPostgres, &m.PostgresPassword}, {SecretEjabberdAdmin, &m.EjabberdAdminPassword}, {SecretEjabberdBootstrap, &m.EjabberdBootstrapPassword}} {
			stored, err := host(s.secret)
			if err != nil {
				return nil, err
			}
			if *s.dst, err = keep(stored, "password", gen); err != nil {
				return nil, err
			}
		}
	}

	// The components' Redis users: yours (external), else kept or made.
	m.RedisUsers = map[mlstate.Component]string{}
	for _, c := range mlstate.Components() {
		if o.Services == ModeExternal {
			if m.RedisUsers[c], err = o.secret(o.RedisUserPasswordFiles[string(c)], ""); err != nil {
				return nil, fmt.Errorf("password of the Redis user of the %s: %w", c, err)
			}
			continue
		}
		name, where := RedisUserSecret(c)
		from := cl.Host
		if where == "karmada" {
			from = cl.Karmada
		}
		stored, err := readSecret(ctx, from, name)
		if err != nil {
			return nil, err
		}
		if m.RedisUsers[c], err = keep(stored, "password", gen); err != nil {
			return nil, err
		}
	}

	if o.Services == ModeBundled {
		// The bundled Redis's users, as lines of its configuration: the
		// passwords' digests only.
		var lines []string
		for _, c := range mlstate.Components() {
			l, err := mlstate.ACLUserLine(mlstate.ACLUserName(c), c, "", m.RedisUsers[c])
			if err != nil {
				return nil, err
			}
			lines = append(lines, l)
		}
		m.RedisACL = []byte(strings.Join(lines, "\n") + "\n")
	}

	// The accounts made before, and the XMPP passwords, grouped by
	// Secret: kept, or new ones when rotating.
	recorded, err := host(SecretAccountsPasswords)
	if err != nil {
		return nil, err
	}
	for k := range recorded {
		if j, ok := JIDOfKey(k); ok {
			m.Recorded = append(m.Recorded, j)
		}
	}
	sort.Strings(m.Recorded)
	xmppPassword := keep
	if o.rotateXMPP {
		xmppPassword = func(map[string][]byte, string, func() (string, error)) (string, error) { return gen() }
	}
	stored := map[string]map[string][]byte{}
	for _, a := range p.Accounts {
		id := a.Cluster + "/" + a.Secret
		if _, ok := stored[id]; !ok {
			c := cl.Host
			if a.Cluster == "karmada" {
				c = cl.Karmada
			}
			if stored[id], err = readSecret(ctx, c, a.Secret); err != nil {
				return nil, err
			}
		}
		if m.Passwords[a.JID], err = xmppPassword(stored[id], a.Key, gen); err != nil {
			return nil, err
		}
	}

	cont, err := host(SecretContinuumXMPP)
	if err != nil {
		return nil, err
	}
	if m.AgentHTTPToken, err = keep(cont, AgentHTTPTokenKey, auth.GenerateToken); err != nil {
		return nil, err
	}

	if err := m.tokens(ctx, cl, o.NorthboundTokensFile); err != nil {
		return nil, err
	}
	if o.Services == ModeExternal {
		if o.S3Endpoint != "" {
			if m.S3AccessKey, err = o.secret(o.S3AccessKeyFile, "AWS_ACCESS_KEY_ID"); err != nil {
				return nil, fmt.Errorf("S3 access key: %w", err)
			}
			if m.S3SecretKey, err = o.secret(o.S3SecretKeyFile, "AWS_SECRET_ACCESS_KEY"); err != nil {
				return nil, fmt.Errorf("S3 secret key: %w", err)
			}
		}
	} else {
		stored, err := host(SecretS3)
		if err != nil {
			return nil, err
		}
		if m.S3AccessKey, err = keep(stored, "access-key", gen); err != nil {
			return nil, err
		}
		if m.S3SecretKey, err = keep(stored, "secret-key", gen); err != nil {
			return nil, err
		}
	}

	switch {
	case o.Services == ModeExternal && o.XMPPCAFile != "":
		if m.CABundle, err = os.ReadFile(o.XMPPCAFile); err != nil {
			return nil, fmt.Errorf("--xmpp-ca-file: %w", err)
		}
	case o.Services == ModeBundled:
		if err := m.bundledTLS(ctx, cl, o); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// MLConnectorIdentity names the ML connector's token in the northbound
// API's token list.
const MLConnectorIdentity = "mlsysops-mlconnector"

// tokens reads the northbound API's token list back (or, given file, the
// list in it), or makes one with an operator token, and makes sure it
// holds the ML connector's token (an installation from before the
// connector gets it added).
func (m *Material) tokens(ctx context.Context, cl *Clusters, file string) error {
	stored, err := readSecret(ctx, cl.Host, SecretNorthboundToken)
	if err != nil {
		return err
	}
	var entries []auth.Entry
	if b := stored["tokens"]; len(b) > 0 {
		if entries, err = auth.Parse(b); err != nil {
			return fmt.Errorf("Secret %s: %w", SecretNorthboundToken, err)
		}
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("--northbound-tokens-file: %w", err)
		}
		given, err := auth.Parse(b)
		if err != nil {
			return fmt.Errorf("--northbound-tokens-file %s: %w", file, err)
		}
		// The connector's token stays what it was.
		for _, e := range entries {
			if e.Name == MLConnectorIdentity {
				given = append(given, e)
				break
			}
		}
		entries = given
	}
	for _, e := range entries {
		switch {
		case e.Name == MLConnectorIdentity:
			m.MLConnectorToken = e.Token
		case e.Role == api.RoleOperator && m.OperatorToken == "":
			m.OperatorToken = e.Token
		}
	}
	if m.OperatorToken == "" {
		if m.OperatorToken, err = auth.GenerateToken(); err != nil {
			return err
		}
		entries = append(entries, auth.Entry{Token: m.OperatorToken, Identity: auth.Identity{Name: "mlsysops-operator", Role: api.RoleOperator}})
	}
	if m.MLConnectorToken == "" {
		if m.MLConnectorToken, err = auth.GenerateToken(); err != nil {
			return err
		}
		entries = append(entries, auth.Entry{Token: m.MLConnectorToken, Identity: auth.Identity{Name: MLConnectorIdentity, Role: api.RoleOperator}})
	}
	if b := stored["tokens"]; file == "" && len(b) > 0 && len(entries) == countEntries(b) {
		m.NorthboundTokens = b // unchanged: keep the user's formatting
	} else {
		m.NorthboundTokens = auth.Format(entries)
	}
	return nil
}

func countEntries(b []byte) int {
	entries, _ := auth.Parse(b)
	return len(entries)
}

// mlconnectorDSN is the ML connector's PostgreSQL URL: the bundled
// server's Service, over TLS, or the external address (libpq's default
// sslmode, prefer).
func mlconnectorDSN(o *Options, password string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(o.PostgresUser, password), Host: o.PostgresAddress, Path: "/" + o.PostgresDatabase}
	if o.Services == ModeBundled {
		u.Host, u.RawQuery = BundledPostgresHost+":5432", "sslmode=require"
	}
	return u.String()
}

// bundledTLS loads or creates the bundled services' CA and, signed by
// it, ejabberd's server certificate (the XMPP domain, the host IP and the
// in-cluster Service name), PostgreSQL's server certificate and the
// client certificate ejabberd logs in to PostgreSQL with (common name
// EjabberdSQLRole): a certificate kept in its Secret is reused while the
// CA signed it and it names what it must.
func (m *Material) bundledTLS(ctx context.Context, cl *Clusters, o *Options) error {
	dir, err := os.MkdirTemp("", "mlsysops-deployer-tls-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	stored := func(secret string, files map[string]string) error {
		data, err := readSecret(ctx, cl.Host, secret)
		if err != nil {
			return err
		}
		for key, file := range files {
			if b := data[key]; len(b) > 0 {
				if err := os.WriteFile(filepath.Join(dir, file), b, 0o600); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for secret, files := range map[string]map[string]string{
		SecretXMPPCA:      {"ca.crt": "ca.crt", "ca.key": "ca.key"},
		SecretEjabberdTLS: {"tls.crt": "server.crt", "tls.key": "server.key"},
		SecretPostgresTLS: {"tls.crt": "postgres.crt", "tls.key": "postgres.key"},
		SecretEjabberdSQL: {"tls.crt": "ejabberd-sql.crt", "tls.key": "ejabberd-sql.key"},
	} {
		if err := stored(secret, files); err != nil {
			return err
		}
	}
	ca, err := pki.LoadOrCreateCA(dir, "ca", "mlsysops-xmpp-ca")
	if err != nil {
		return fmt.Errorf("services CA: %w", err)
	}
	issue := func(name string, spec pki.CertSpec) (cert, key []byte, err error) {
		if !pki.Covers(filepath.Join(dir, name+".crt"), spec) {
			_ = os.Remove(filepath.Join(dir, name+".crt"))
		}
		certFile, keyFile, err := ca.Issue(dir, name, spec)
		if err != nil {
			return nil, nil, fmt.Errorf("certificate %s: %w", name, err)
		}
		cert, _ = os.ReadFile(certFile)
		key, _ = os.ReadFile(keyFile)
		if len(cert) == 0 || len(key) == 0 {
			return nil, nil, fmt.Errorf("certificate %s incomplete in %s", name, dir)
		}
		return cert, key, nil
	}
	svc := "mlsysops-ejabberd." + Namespace + ".svc"
	spec := pki.CertSpec{CommonName: o.XMPPDomain, DNSNames: []string{o.XMPPDomain, svc, "localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true}
	if ip := net.ParseIP(o.KarmadaHostIP); ip != nil {
		spec.IPs = append(spec.IPs, ip)
	}
	if m.ServerCert, m.ServerKey, err = issue("server", spec); err != nil {
		return fmt.Errorf("ejabberd: %w", err)
	}
	pg := BundledPostgresHost
	spec = pki.CertSpec{CommonName: pg, DNSNames: []string{pg, pg + ".cluster.local", "mlsysops-postgres"}, Server: true}
	if m.PostgresServerCert, m.PostgresServerKey, err = issue("postgres", spec); err != nil {
		return fmt.Errorf("PostgreSQL: %w", err)
	}
	// PostgreSQL's cert method takes the role from the common name.
	spec = pki.CertSpec{CommonName: EjabberdSQLRole, Client: true}
	if m.EjabberdSQLCert, m.EjabberdSQLKey, err = issue("ejabberd-sql", spec); err != nil {
		return fmt.Errorf("ejabberd's PostgreSQL login: %w", err)
	}
	m.CABundle, _ = os.ReadFile(ca.CertFile)
	m.CAKey, _ = os.ReadFile(filepath.Join(dir, "ca.key"))
	if len(m.CABundle) == 0 || len(m.CAKey) == 0 {
		return fmt.Errorf("services CA incomplete in %s", dir)
	}
	return nil
}

// secretObject builds a labelled Secret of the installation for a stage.
func secretObject(name, stage string, data map[string][]byte) *unstructured.Unstructured {
	s := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: Namespace,
			Labels:      map[string]string{charts.LabelPartOf: charts.PartOfValue, charts.LabelInstance: charts.Release},
			Annotations: map[string]string{charts.StageKey: stage},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		panic(err) // a Secret always converts
	}
	u := &unstructured.Unstructured{Object: obj}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u
}

// SecretObjects are the Secrets of the host cluster and of the Karmada API
// that hold the material (the kubeconfigs are added once their tokens
// exist, see kubeconfigSecrets).
func (p *Plan) SecretObjects(o *Options, m *Material) (host, karmada []*unstructured.Unstructured) {
	pw := func(v string) map[string][]byte { return map[string][]byte{"password": []byte(v)} }
	// The admin credential, and for external services where its API is,
	// so that uninstall can remove the accounts with nothing but the
	// kubeconfigs.
	admin := map[string][]byte{"jid": []byte(o.adminJID()), "password": []byte(m.EjabberdAdminPassword)}
	if o.Services == ModeExternal {
		admin["api"] = []byte(o.EjabberdAPI)
	}
	if o.Services == ModeBundled {
		host = append(host, secretObject(SecretRedis, "services", pw(m.RedisPassword)),
			secretObject(SecretEjabberdBootstrap, "services", pw(m.EjabberdBootstrapPassword)),
			secretObject(SecretRedisACL, "services", map[string][]byte{"users.acl": m.RedisACL}))
	}
	for _, c := range mlstate.Components() {
		name, where := RedisUserSecret(c)
		data := map[string][]byte{"username": []byte(mlstate.ACLUserName(c)), "password": []byte(m.RedisUsers[c])}
		if where == "karmada" {
			karmada = append(karmada, secretObject(name, "clusters", data))
		} else {
			host = append(host, secretObject(name, "continuum", data))
		}
	}
	host = append(host,
		secretObject(SecretPostgres, "services", map[string][]byte{"username": []byte(o.PostgresUser), "password": []byte(m.PostgresPassword)}),
		secretObject(SecretEjabberdAdmin, "services", admin),
		secretObject(SecretNorthboundToken, "continuum", map[string][]byte{"tokens": m.NorthboundTokens}),
		secretObject(SecretMLConnectorToken, "continuum", map[string][]byte{"token": []byte(m.MLConnectorToken)}),
		secretObject(SecretMLConnectorDB, "continuum", map[string][]byte{"url": []byte(mlconnectorDSN(o, m.PostgresPassword))}),
	)
	if m.S3AccessKey != "" {
		host = append(host, secretObject(SecretS3, "services", map[string][]byte{"access-key": []byte(m.S3AccessKey), "secret-key": []byte(m.S3SecretKey)}))
	}
	if o.Services == ModeBundled {
		host = append(host,
			secretObject(SecretXMPPCA, "services", map[string][]byte{"ca.crt": m.CABundle, "ca.key": m.CAKey}),
			secretObject(SecretEjabberdTLS, "services", map[string][]byte{"tls.crt": m.ServerCert, "tls.key": m.ServerKey}),
			secretObject(SecretPostgresTLS, "services", map[string][]byte{"tls.crt": m.PostgresServerCert, "tls.key": m.PostgresServerKey, "ca.crt": m.CABundle}),
			// ejabberd wants certificate and key in one file.
			secretObject(SecretEjabberdSQL, "services", map[string][]byte{"tls.crt": m.EjabberdSQLCert, "tls.key": m.EjabberdSQLKey,
				"client.pem": append(append([]byte{}, m.EjabberdSQLCert...), m.EjabberdSQLKey...), "ca.crt": m.CABundle}))
	}
	perSecret := map[string]map[string][]byte{}
	var order []string
	all := map[string][]byte{}
	for _, a := range p.Accounts {
		all[a.Key] = []byte(m.Passwords[a.JID])
	}
	host = append(host, secretObject(SecretAccountsPasswords, "continuum", all))
	for _, a := range p.Accounts {
		if a.Cluster == "host" {
			data := map[string][]byte{a.Key: []byte(m.Passwords[a.JID])}
			if a.Secret == SecretContinuumXMPP {
				data[AgentHTTPTokenKey] = []byte(m.AgentHTTPToken)
			}
			host = append(host, secretObject(a.Secret, "continuum", data))
			continue
		}
		if perSecret[a.Secret] == nil {
			perSecret[a.Secret] = map[string][]byte{AgentHTTPTokenKey: []byte(m.AgentHTTPToken)}
			order = append(order, a.Secret)
		}
		perSecret[a.Secret][a.Key] = []byte(m.Passwords[a.JID])
	}
	for _, name := range order {
		karmada = append(karmada, secretObject(name, "clusters", perSecret[name]))
	}
	return host, karmada
}
