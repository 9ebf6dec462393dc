package trees

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/servingtest"
)

// lgbJSONFromText writes a LightGBM text model (numerical splits) as
// LightGBM's JSON dump (Booster.dump_model), so that the JSON reader can
// be checked against the text fixtures' references.
func lgbJSONFromText(t testing.TB, text string) []byte {
	t.Helper()
	header, body, _ := strings.Cut(text, "\n\n")
	head := map[string]string{}
	for _, line := range strings.Split(header, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			head[k] = v
		}
	}
	atoi := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	missing := []string{"None", "Zero", "NaN"}
	var trees []any
	for _, block := range strings.Split(body, "Tree=")[1:] {
		kv := map[string][]string{}
		for _, line := range strings.Split(block, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				kv[k] = strings.Fields(v)
			}
		}
		leafValue := func(i int) map[string]any {
			v, _ := strconv.ParseFloat(kv["leaf_value"][i], 64)
			return map[string]any{"leaf_index": i, "leaf_value": v}
		}
		var node func(i int) map[string]any
		child := func(c int) map[string]any {
			if c < 0 {
				return leafValue(^c)
			}
			return node(c)
		}
		node = func(i int) map[string]any {
			dt := atoi(kv["decision_type"][i])
			th, _ := strconv.ParseFloat(kv["threshold"][i], 64)
			return map[string]any{"split_index": i, "split_feature": atoi(kv["split_feature"][i]), "threshold": th,
				"decision_type": "<=", "default_left": dt&2 != 0, "missing_type": missing[(dt>>2)&3],
				"left_child": child(atoi(kv["left_child"][i])), "right_child": child(atoi(kv["right_child"][i]))}
		}
		n := atoi(kv["num_leaves"][0])
		root := leafValue(0)
		if n > 1 {
			root = node(0)
		}
		trees = append(trees, map[string]any{"num_leaves": n, "num_cat": 0, "shrinkage": 1, "tree_structure": root})
	}
	out, err := json.Marshal(map[string]any{"name": "tree", "version": "v2", "num_class": atoi(head["num_class"]),
		"num_tree_per_iteration": atoi(head["num_tree_per_iteration"]), "max_feature_idx": atoi(head["max_feature_idx"]),
		"objective": head["objective"], "tree_info": trees})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLightGBMJSONMatchesText: the LightGBM fixtures written as JSON dumps
// predict what scikit-learn does (their references), as the text files
// do: a three-class and a binary classifier and a regressor. (leaves,
// asked to read a JSON model's objective, refuses every model; the
// objective is applied here.)
func TestLightGBMJSONMatchesText(t *testing.T) {
	for _, name := range []string{"iris_gbm", "cancer_gbm", "diabetes_gbm"} {
		t.Run(name, func(t *testing.T) {
			text, err := os.ReadFile(servingtest.Path(name + ".txt"))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), name+".json")
			if err := os.WriteFile(path, lgbJSONFromText(t, string(text)), 0o600); err != nil {
				t.Fatal(err)
			}
			m, err := Load(LightGBMJSON, path, model.Options{})
			if err != nil {
				t.Fatal(err)
			}
			servingtest.Check(t, m, servingtest.LoadReference(t, name), 1e-5)
		})
	}
}

// lgbJSONModel is a LightGBM JSON model of one tree, a numerical split
// then a categorical one, with fields of the second split replaced.
func lgbJSONModel(top, second string) string {
	s := `"split_index":1,"split_feature":1,"threshold":"1||3","decision_type":"==","default_left":false,"missing_type":"None",
	  "left_child":{"leaf_index":1,"leaf_value":2},"right_child":{"leaf_index":2,"leaf_value":3}`
	if second != "" {
		s = second
	}
	return `{"name":"tree","version":"v2","num_class":1,"num_tree_per_iteration":1,"max_feature_idx":1,"objective":"regression",` + top +
		`"tree_info":[{"num_leaves":3,"num_cat":1,"tree_structure":{"split_index":0,"split_feature":0,"threshold":0.5,"decision_type":"<=","default_left":true,"missing_type":"None",
	   "left_child":{"leaf_index":0,"leaf_value":-1},"right_child":{` + s + `}}}]}`
}

// TestBadLightGBMJSON: what leaves would trust is checked first: more
// splits than num_leaves-1 (leaves' node array reallocated under its own
// pointers), a split on a feature past max_feature_idx (a row indexed out
// of range in a prediction goroutine), a huge num_leaves, a category that
// makes a huge bitset, an objective it cannot apply.
func TestBadLightGBMJSON(t *testing.T) {
	cases := map[string]struct {
		data, want string
	}{
		"good": {lgbJSONModel("", ""), ""},
		"more splits than leaves": {lgbJSONModel("", `"split_feature":1,"threshold":0.1,"decision_type":"<=","missing_type":"None",
			"left_child":{"split_feature":0,"threshold":0.2,"decision_type":"<=","missing_type":"None","left_child":{"leaf_value":1},"right_child":{"leaf_value":2}},
			"right_child":{"leaf_value":3}`), "more than num_leaves-1 = 2 splits"},
		"feature past the rows": {lgbJSONModel("", `"split_feature":7,"threshold":0.1,"decision_type":"<=","missing_type":"None","left_child":{"leaf_value":1},"right_child":{"leaf_value":2}`), "feature"},
		"huge num_leaves":       {strings.Replace(lgbJSONModel("", ""), `"num_leaves":3`, `"num_leaves":2000000000`, 1), "num_leaves 2000000000"},
		"huge category":         {strings.Replace(lgbJSONModel("", ""), `"1||3"`, `"1||2147483647"`, 1), "category"},
		"negative category":     {strings.Replace(lgbJSONModel("", ""), `"1||3"`, `"-4"`, 1), "category"},
		"a node of nothing":     {lgbJSONModel("", `"split_feature":1,"threshold":0.1,"decision_type":"<=","missing_type":"None","left_child":{},"right_child":{"leaf_value":2}`), "neither a split"},
		"objective":             {strings.Replace(lgbJSONModel("", ""), `"regression"`, `"lambdarank"`, 1), "objective"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.json")
			if err := os.WriteFile(path, []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(LightGBMJSON, path, model.Options{})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("a good model refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
