package deployments_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mlsysops-go/mlsysops/deployments/deployer"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	mlclient "github.com/mlsysops-go/mlsysops/mlconnector/client"
	nbclient "github.com/mlsysops-go/mlsysops/northbound/client"
)

// testMLConnector: the installed ML connector (its Deployment on the host
// cluster's real node) is ready and serves its NodePort, where the tokens
// of the list given to the deployer work: the operator registers a model
// (PostgreSQL) and uploads its training data (S3), which reads back; a
// viewer may read but not register; an unknown token is refused. No
// credential is in its arguments or environment.
func testMLConnector(t *testing.T, env *testbed.Env, cl *deployer.Clusters) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dep, err := cl.Host.Kube.AppsV1().Deployments(deployer.Namespace).Get(ctx, "mlsysops-mlconnector", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dep.Spec.Replicas == nil || dep.Status.ReadyReplicas != *dep.Spec.Replicas {
		t.Fatalf("mlsysops-mlconnector: %d of %v replicas ready", dep.Status.ReadyReplicas, dep.Spec.Replicas)
	}
	pod := dep.Spec.Template.Spec
	for _, file := range []string{env.Agents.PostgresPasswordFile, env.Agents.S3SecretKeyFile} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		secret := strings.TrimSpace(string(b))
		for _, c := range pod.Containers {
			all := strings.Join(append(append([]string{}, c.Command...), c.Args...), " ")
			for _, e := range c.Env {
				all += " " + e.Value
			}
			if strings.Contains(all, secret) {
				t.Errorf("a credential (%s) is in the container %s's arguments or environment", file, c.Name)
			}
		}
	}

	url := "http://" + net.JoinHostPort(env.Agents.ContinuumNodeIP, strconv.Itoa(testbed.MLConnectorNodePort))
	client := func(token string) *mlclient.Client {
		c, err := mlclient.New(mlclient.Config{URL: url, Token: token, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	op, viewer := client(env.NorthboundToken), client(env.NorthboundViewerToken)
	spec := api.ModelSpec{ModelName: fmt.Sprintf("install-test-%d", time.Now().UnixNano()), ModelKind: "regression",
		FeatureList: []api.Feature{{FeatureName: "x", Type: api.FeatureContinuous}, {FeatureName: "y", Type: api.FeatureContinuous, Kind: api.FeatureTarget}},
		ModelTags:   []string{"install-test"}}
	m, err := op.CreateModel(ctx, spec)
	if err != nil {
		t.Fatalf("register a model through %s: %v", url, err)
	}
	defer func() {
		if err := op.DeleteModel(context.Background(), m.ModelID); err != nil {
			t.Errorf("delete model %s: %v", m.ModelID, err)
		}
	}()
	data := "x,y\n1,2\n2,4\n3,6\n"
	if _, err := op.Upload(ctx, m.ModelID, api.FileData, "train.csv", strings.NewReader(data), ""); err != nil {
		t.Fatalf("upload to the connector's S3 bucket: %v", err)
	}
	files, err := viewer.Files(ctx, m.ModelID)
	if err != nil || len(files) != 1 {
		t.Fatalf("the viewer lists the model's files: %v (%d files)", err, len(files))
	}
	got, err := viewer.Download(ctx, m.ModelID, files[0].ID)
	if err != nil || string(got) != data {
		t.Errorf("download: %v, %q, want %q", err, got, data)
	}
	spec.ModelName += "-viewer"
	if _, err := viewer.CreateModel(ctx, spec); nbclient.StatusCode(err) != http.StatusForbidden {
		t.Errorf("the viewer registers a model: %v, want 403", err)
	}
	if _, err := client("not-a-token-of-the-list").Model(ctx, m.ModelID); nbclient.StatusCode(err) != http.StatusUnauthorized {
		t.Errorf("an unknown token reads a model: %v, want 401", err)
	}
	if _, err := client("").Models(ctx, mlclient.ModelFilter{}); nbclient.StatusCode(err) != http.StatusUnauthorized {
		t.Errorf("no token lists the models: %v, want 401", err)
	}
}

// leaveKarmada takes a member out of Karmada (its Cluster object deleted,
// as `karmadactl unjoin` does) and waits until it is gone; the function
// it returns joins it again with the same spec (the testbed's join), once.
// The cluster joins again at the end of the test whatever happens, so
// that the shared testbed keeps its members.
func leaveKarmada(t *testing.T, cl *deployer.Clusters, member string) (join func() error) {
	t.Helper()
	ctx := context.Background()
	clusters := cl.KarmadaClient.ClusterV1alpha1().Clusters()
	saved, err := clusters.Get(ctx, member, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := clusters.Delete(ctx, member, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	joined := false
	join = func() error {
		if joined {
			return nil
		}
		joined = true
		_, err := clusters.Create(context.Background(), &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: member}, Spec: saved.Spec}, metav1.CreateOptions{})
		return err
	}
	t.Cleanup(func() {
		if err := join(); err != nil {
			t.Errorf("join %s again: %v", member, err)
		}
	})
	testbed.Eventually(t, member+" out of Karmada", 4*time.Minute, func() error {
		if _, err := clusters.Get(ctx, member, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Cluster %s still there (%v)", member, err)
		}
		return nil
	})
	return join
}

// testJoinLater joins a member that was out of Karmada during the install:
// with nothing run again, Karmada gives it the namespace, roles,
// configuration, its agents' Secret and the DaemonSets, and its agents
// come up ready (that they register and receive applications, the next
// subtests check in every member).
func testJoinLater(t *testing.T, o *deployer.Options, env *testbed.Env, member string, join func() error) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	start := time.Now()
	if err := join(); err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, member))
	testbed.Eventually(t, "the agents of "+member+" after it joined", 5*time.Minute, func() error {
		for _, ds := range []string{"mlsysops-cluster-agent", "mlsysops-node-agent"} {
			d, err := cs.AppsV1().DaemonSets(deployer.Namespace).Get(ctx, ds, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("%s: %w", ds, err)
			}
			if d.Status.DesiredNumberScheduled == 0 || d.Status.NumberReady != d.Status.DesiredNumberScheduled {
				return fmt.Errorf("%s: %d of %d ready", ds, d.Status.NumberReady, d.Status.DesiredNumberScheduled)
			}
		}
		_, err := cs.CoreV1().Secrets(deployer.Namespace).Get(ctx, deployer.SecretAgentsPrefix+member, metav1.GetOptions{})
		return err
	})
	// The deployer sees them too, through Karmada's aggregated status.
	var out strings.Builder
	w := *o
	w.Timeout = 2 * time.Minute
	if err := deployer.New(&w, &out).WaitInstalled(ctx, "karmada"); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), member+" ") {
		t.Errorf("the deployer's wait does not show %s:\n%s", member, out.String())
	}
	t.Logf("%s joined after the install: its agents ready %s later, nothing re-run:\n%s", member, time.Since(start).Round(time.Second), out.String())
}
