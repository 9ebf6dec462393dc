package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/explain"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/oip"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/servingtest"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/tensor"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/trees"
)

// serve starts a server for a fixture model, loaded through the same
// registry as the command, with its training CSV as background.
func serve(t testing.TB, registry *model.Registry, file, name string, cfg Config) (*httptest.Server, *Server) {
	t.Helper()
	m, err := registry.Load("", servingtest.Path(file), model.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	l, err := explain.NewLayout(m.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	bg, err := explain.LoadBackground(servingtest.TrainingCSV(t, name), l, []string{"target"}, 50, 1)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name == "" {
		cfg.Name = name
	}
	s := New(cfg)
	s.SetModel(m, bg)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts, s
}

// treeFixtures are the tree models of testdata.
var treeFixtures = []string{"iris_gbm.txt", "cancer_gbm.txt", "diabetes_gbm.txt", "iris_xgb.json", "cancer_xgb.json", "diabetes_xgb.json"}

func treeRegistry() *model.Registry {
	r := model.NewRegistry()
	trees.Register(r)
	return r
}

func post(t testing.TB, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func get(t testing.TB, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// inferBody is an OIP request for the reference's inputs.
func inferBody(t testing.TB, ref servingtest.Reference, specs []tensor.Spec) string {
	var in []map[string]any
	for _, s := range specs {
		rows := ref.Inputs[s.Name]
		in = append(in, map[string]any{"name": s.Name, "datatype": s.DataType, "shape": []int{len(rows), len(rows[0])}, "data": rows})
	}
	b, err := json.Marshal(map[string]any{"id": "ref", "inputs": in})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type response struct {
	ModelName string `json:"model_name"`
	ID        string `json:"id"`
	Outputs   []struct {
		Name     string    `json:"name"`
		Datatype string    `json:"datatype"`
		Shape    []int64   `json:"shape"`
		Data     []float64 `json:"data"`
	} `json:"outputs"`
}

// checkReference posts the reference inputs and compares every output.
func checkReference(t *testing.T, url, name string, specs []tensor.Spec) {
	ref := servingtest.LoadReference(t, name)
	code, body := post(t, url+"/v2/models/"+name+"/infer", inferBody(t, ref, specs))
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if r.ModelName != name || r.ID != "ref" {
		t.Errorf("model_name %q id %q", r.ModelName, r.ID)
	}
	for _, o := range r.Outputs {
		want := ref.Expected(t, o.Name)
		if len(o.Data) != len(want) {
			t.Fatalf("%s: %d values, want %d", o.Name, len(o.Data), len(want))
		}
		for i := range want {
			if !servingtest.Close(o.Data[i], want[i], 1e-5) {
				t.Errorf("%s[%d] = %v, want %v", o.Name, i, o.Data[i], want[i])
			}
		}
	}
	if len(r.Outputs) != len(ref.Outputs) {
		t.Errorf("%d outputs, want %d", len(r.Outputs), len(ref.Outputs))
	}
}

func TestTreeModelsOverHTTP(t *testing.T) {
	for _, file := range treeFixtures {
		name := strings.TrimSuffix(file, filepath.Ext(file))
		t.Run(name, func(t *testing.T) {
			ts, _ := serve(t, treeRegistry(), file, name, Config{})
			checkReference(t, ts.URL, name, []tensor.Spec{{Name: "input", DataType: tensor.FP64}})
			checkExplain(t, ts.URL, name, servingtest.LoadReference(t, name).Inputs["input"][0])
		})
	}
}

// checkExplain asks for an explanation of x (the model's only input) and
// checks that the values sum to the prediction minus the base value.
func checkExplain(t *testing.T, url, name string, x []float64) {
	body := fmt.Sprintf(`{"inputs":[{"name":"input","shape":[1,%d],"datatype":"FP64","data":%s}],"seed":3,"permutations":24,"background_size":20}`, len(x), mustJSON(x))
	code, b := post(t, url+"/v2/models/"+name+"/explain", body)
	if code != http.StatusOK {
		t.Fatalf("explain: %d %s", code, b)
	}
	var r struct {
		Method        string      `json:"method"`
		Features      []string    `json:"features"`
		BaseValue     []float64   `json:"base_value"`
		Prediction    []float64   `json:"prediction"`
		ShapleyValues [][]float64 `json:"shapley_values"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.ShapleyValues) != len(x) || len(r.Features) != len(x) {
		t.Fatalf("%d values for %d features (%v)", len(r.ShapleyValues), len(x), r.Features)
	}
	if want := servingtest.LoadReference(t, name).Features; fmt.Sprint(want) != fmt.Sprint(r.Features) {
		t.Errorf("features %v, want %v", r.Features, want)
	}
	for k := range r.BaseValue {
		sum := 0.0
		for i := range x {
			sum += r.ShapleyValues[i][k]
		}
		if d := r.Prediction[k] - r.BaseValue[k]; math.Abs(sum-d) > 1e-9*math.Max(1, math.Abs(d)) {
			t.Errorf("output %d: values sum to %v, prediction - base = %v", k, sum, d)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestHealthMetadataAndRoutes(t *testing.T) {
	s := New(Config{Name: "iris", Version: "3"})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	for path, want := range map[string]int{
		"/v2/health/live": 200, "/healthz": 200, "/v2/health/ready": 503, "/readyz": 503,
		"/v2/models/iris": 503, "/v2/models/iris/ready": 503,
	} {
		if code, b := get(t, ts.URL+path); code != want {
			t.Errorf("before the model: GET %s = %d %s, want %d", path, code, b, want)
		}
	}
	m, err := trees.Load(trees.LightGBM, servingtest.Path("iris_gbm.txt"), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.SetModel(m, nil)
	for path, want := range map[string]int{
		"/v2/health/ready": 200, "/readyz": 200, "/v2": 200,
		"/v2/models/iris": 200, "/v2/models/iris/ready": 200,
		"/v2/models/iris/versions/3": 200, "/v2/models/iris/versions/3/ready": 200,
		"/v2/models/iris/versions/4": 404, "/v2/models/other": 404, "/v2/models/other/ready": 404,
		"/v2/models/iris/infer": 405, "/nowhere": 404, "/metrics": 200,
	} {
		if code, b := get(t, ts.URL+path); code != want {
			t.Errorf("GET %s = %d %s, want %d", path, code, b, want)
		}
	}
	_, b := get(t, ts.URL+"/v2/models/iris")
	var md oip.ModelMetadata
	if err := json.Unmarshal(b, &md); err != nil {
		t.Fatal(err)
	}
	if md.Platform != "lightgbm" || len(md.Inputs) != 1 || md.Inputs[0].Shape[1] != 4 || md.Parameters["kind"] != "classifier" {
		t.Errorf("metadata %s", b)
	}
	// Explanations need a background.
	if code, b := post(t, ts.URL+"/v2/models/iris/explain", `{"inputs":[]}`); code != 422 || !strings.Contains(string(b), "--background") {
		t.Errorf("explain without background: %d %s", code, b)
	}
	if s.Unready() == nil {
		t.Error("Unready returned no model")
	}
	if code, _ := get(t, ts.URL+"/v2/health/ready"); code != 503 {
		t.Errorf("ready after Unready: %d", code)
	}
}

// TestHostileInputs: every bad request is a 4xx naming the field, never a
// 5xx, and the server goes on serving.
func TestHostileInputs(t *testing.T) {
	ts, _ := serve(t, treeRegistry(), "iris_gbm.txt", "iris_gbm", Config{MaxBodyBytes: 64 << 10})
	url := ts.URL + "/v2/models/iris_gbm/infer"
	in := func(fields string) string { return `{"inputs":[{` + fields + `}]}` }
	ok := `"name":"input","shape":[1,4],"datatype":"FP64"`
	cases := map[string]struct {
		body  string
		code  int
		field string // a problem's field, or text of the error
	}{
		"empty body":            {"", 400, "empty body"},
		"malformed JSON":        {`{"inputs": [`, 400, "malformed JSON"},
		"not an object":         {`[1,2,3]`, 400, "(body)"},
		"trailing data":         {`{"inputs":[]} {}`, 400, "after the top-level value"},
		"unknown field":         {`{"inputz": []}`, 400, "inputz"},
		"no inputs":             {`{"inputs": []}`, 400, "inputs"},
		"inputs not a list":     {`{"inputs": {"a": 1}}`, 400, "inputs"},
		"id a number":           {`{"id": 5, "inputs": []}`, 400, "id"},
		"shape of strings":      {in(`"name":"input","shape":["1"],"datatype":"FP64","data":[1]`), 400, "inputs.shape"},
		"missing name":          {in(`"shape":[1,4],"datatype":"FP64","data":[1,2,3,4]`), 400, "inputs[0].name"},
		"missing datatype":      {in(`"name":"input","shape":[1,4],"data":[1,2,3,4]`), 400, "inputs[0].datatype"},
		"unsupported datatype":  {in(`"name":"input","shape":[1,4],"datatype":"FP16","data":[1,2,3,4]`), 400, "inputs[0].datatype"},
		"missing shape":         {in(`"name":"input","datatype":"FP64","data":[1,2,3,4]`), 400, "inputs[0].shape"},
		"negative dimension":    {in(`"name":"input","shape":[-1,4],"datatype":"FP64","data":[1,2,3,4]`), 400, "inputs[0].shape"},
		"huge shape":            {in(`"name":"input","shape":[1000000000000,4],"datatype":"FP64","data":[1,2,3,4]`), 400, "inputs[0].shape"},
		"overflowing shape":     {in(`"name":"input","shape":[9223372036854775807,9223372036854775807],"datatype":"FP64","data":[1]`), 400, "inputs[0].shape"},
		"missing data":          {in(ok), 400, "inputs[0].data"},
		"null data":             {in(ok + `,"data":null`), 400, "inputs[0].data"},
		"too few elements":      {in(ok + `,"data":[1,2,3]`), 400, "inputs[0].data"},
		"too many elements":     {in(ok + `,"data":[1,2,3,4,5]`), 400, "inputs[0].data"},
		"string element":        {in(ok + `,"data":[1,"2",3,4]`), 400, "inputs[0].data"},
		"bool element":          {in(ok + `,"data":[1,true,3,4]`), 400, "inputs[0].data"},
		"null element":          {in(ok + `,"data":[1,null,3,4]`), 400, "inputs[0].data"},
		"object element":        {in(ok + `,"data":[1,{"a":1},3,4]`), 400, "inputs[0].data"},
		"FP64 out of range":     {in(ok + `,"data":[1,2,3,1e999]`), 400, "inputs[0].data"},
		"wrong datatype":        {in(`"name":"input","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]`), 400, "inputs[0].datatype"},
		"INT64 with a fraction": {in(`"name":"input","shape":[1,4],"datatype":"INT64","data":[1,2,3,4.5]`), 400, "inputs[0].data"},
		"INT64 out of range":    {in(`"name":"input","shape":[1,4],"datatype":"INT64","data":[1,2,3,99999999999999999999]`), 400, "inputs[0].data"},
		"wrong rank":            {in(`"name":"input","shape":[4],"datatype":"FP64","data":[1,2,3,4]`), 400, "inputs[0].shape"},
		"wrong width":           {in(`"name":"input","shape":[1,5],"datatype":"FP64","data":[1,2,3,4,5]`), 400, "inputs[0].shape"},
		"unknown input":         {`{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP64","data":[1,2,3,4]}]}`, 400, "inputs[0].name"},
		"duplicate input":       {`{"inputs":[{` + ok + `,"data":[1,2,3,4]},{` + ok + `,"data":[1,2,3,4]}]}`, 400, "inputs[1].name"},
		"unknown output":        {`{"inputs":[{` + ok + `,"data":[1,2,3,4]}],"outputs":[{"name":"logits"}]}`, 400, "outputs[0].name"},
		"binary output":         {`{"inputs":[{` + ok + `,"data":[1,2,3,4]}],"outputs":[{"name":"label","parameters":{"binary_data":true}}]}`, 400, "outputs[0].parameters.binary_data"},
		"deep nesting":          {in(ok + `,"data":` + strings.Repeat("[", 5000) + "1" + strings.Repeat("]", 5000)), 400, "inputs[0].data"},
		"huge body":             {in(ok + `,"data":[` + strings.Repeat("1,", 40000) + `1]`), 413, "larger than"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, b := post(t, url, tc.body)
			if code != tc.code {
				t.Fatalf("%d %s, want %d", code, b, tc.code)
			}
			var e struct {
				Error    string       `json:"error"`
				Problems oip.Problems `json:"problems"`
			}
			if err := json.Unmarshal(b, &e); err != nil || e.Error == "" {
				t.Fatalf("error body %s: %v", b, err)
			}
			found := strings.Contains(e.Error, tc.field)
			for _, p := range e.Problems {
				found = found || p.Field == tc.field
			}
			if !found {
				t.Errorf("%s does not name %q", b, tc.field)
			}
		})
	}
	// Still serving.
	if code, b := post(t, url, in(ok+`,"data":[[5.1,3.5,1.4,0.2]]`)); code != 200 {
		t.Fatalf("after the battery: %d %s", code, b)
	}
}

func TestExplainRequestProblems(t *testing.T) {
	ts, _ := serve(t, treeRegistry(), "cancer_gbm.txt", "cancer_gbm", Config{})
	url := ts.URL + "/v2/models/cancer_gbm/explain"
	x := mustJSON(servingtest.LoadReference(t, "cancer_gbm").Inputs["input"][0])
	in := `"inputs":[{"name":"input","shape":[1,30],"datatype":"FP64","data":` + x + `}]`
	cases := map[string]struct {
		body   string
		code   int
		fields []string
	}{
		"unknown method and more": {`{` + in + `,"method":"magic","permutations":-1,"background_size":1000}`, 400, []string{"method", "permutations", "background_size"}},
		"exact with 30 features":  {`{` + in + `,"method":"exact"}`, 400, []string{"method"}},
		"unknown output":          {`{` + in + `,"output":"logits"}`, 400, []string{"output"}},
		"the label output":        {`{` + in + `,"output":"label","method":"sampling","permutations":2}`, 200, nil},
		"no inputs":               {`{}`, 400, []string{"inputs"}},
		"two rows":                {`{"inputs":[{"name":"input","shape":[2,30],"datatype":"FP64","data":` + x[:len(x)-1] + "," + x[1:] + `}]}`, 400, []string{"inputs"}},
		"wrong type":              {`{` + in + `,"seed":"x"}`, 400, []string{"seed"}},
		"unknown field":           {`{` + in + `,"samples":3}`, 400, []string{"samples"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, b := post(t, url, tc.body)
			if code != tc.code {
				t.Fatalf("%d %s, want %d", code, b, tc.code)
			}
			for _, f := range tc.fields {
				if !strings.Contains(string(b), `"field":"`+f+`"`) {
					t.Errorf("%s does not name %q", b, f)
				}
			}
		})
	}
}

func TestMetricsCountRequests(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts, _ := serve(t, treeRegistry(), "iris_gbm.txt", "iris_gbm", Config{Registerer: reg, Gatherer: reg})
	url := ts.URL + "/v2/models/iris_gbm/infer"
	post(t, url, `{"inputs":[{"name":"input","shape":[2,4],"datatype":"FP64","data":[1,2,3,4,5,6,7,8]}]}`)
	post(t, url, `{"inputs":[]}`)
	_, b := get(t, ts.URL+"/metrics")
	for _, want := range []string{
		`modelserver_requests_total{code="200",endpoint="infer",model="iris_gbm"} 1`,
		`modelserver_requests_total{code="400",endpoint="infer",model="iris_gbm"} 1`,
		`modelserver_inference_rows_total{model="iris_gbm"} 2`,
		`modelserver_model_ready{model="iris_gbm"} 1`,
		`modelserver_request_duration_seconds_count{endpoint="infer",model="iris_gbm"} 2`,
	} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
