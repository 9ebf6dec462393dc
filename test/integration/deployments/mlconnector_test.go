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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
