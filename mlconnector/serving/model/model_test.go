package model_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/servingtest"
)

func TestDetect(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := map[string]struct {
		path, want, err string
	}{
		"onnx":          {servingtest.Path("iris_mlp.onnx"), "onnx", ""},
		"lightgbm":      {servingtest.Path("iris_gbm.txt"), "lightgbm", ""},
		"xgboost json":  {servingtest.Path("iris_xgb.json"), "xgboost-json", ""},
		"lightgbm json": {write("lg.model", `{"name": "tree", "tree_info": []}`), "lightgbm-json", ""},
		"old xgboost":   {write("xg.model", "\x00\x00\x00\x3f binary"), "xgboost", ""},
		"ubjson":        {write("m.ubj", "{"), "", "UBJSON"},
		"other json":    {write("m.json", `{"weights": []}`), "", "--format"},
		"missing":       {filepath.Join(dir, "absent"), "", "no such file"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := model.Detect(tc.path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("%q %v, want %q", got, err, tc.want)
			}
		})
	}
}

func TestRegistryNamesTheFormats(t *testing.T) {
	r := model.NewRegistry()
	r.Register("b", nil)
	r.Register("a", nil)
	_, err := r.Load("pmml", "x.pmml", model.Options{})
	if err == nil || !strings.Contains(err.Error(), `model format "pmml" is not known: want one of a, b`) {
		t.Fatalf("error %v", err)
	}
}
