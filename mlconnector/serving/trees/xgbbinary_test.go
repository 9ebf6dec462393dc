package trees

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/servingtest"
)

// xgbBinary writes an XGBoost JSON model in XGBoost's binary format (as
// XGBoost 0.x wrote it, the layout parseXGBoostBinary documents), so that
// both readers can be given the same trees. edit, when not nil, changes
// the binary nodes before they are written.
func xgbBinary(t testing.TB, jsonModel []byte, edit func(tree int, nodes [][5]uint32)) []byte {
	t.Helper()
	var m xgbModel
	if err := json.Unmarshal(jsonModel, &m); err != nil {
		t.Fatal(err)
	}
	l := m.Learner
	trees := l.GradientBooster.Model
	if l.GradientBooster.Name == "dart" {
		trees = l.GradientBooster.GBTree.Model
	}
	base, err := parseBaseScore(l.LearnerModelParam.BaseScore)
	if err != nil {
		t.Fatal(err)
	}
	nf, _ := strconv.Atoi(l.LearnerModelParam.NumFeature)
	nc, _ := strconv.Atoi(l.LearnerModelParam.NumClass)
	var b bytes.Buffer
	w := func(vs ...any) {
		for _, v := range vs {
			if err := binary.Write(&b, binary.LittleEndian, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	str := func(s string) { w(uint64(len(s))); b.WriteString(s) }
	w(float32(base), uint32(nf), int32(nc), int32(0), int32(0), [29]int32{})
	str(l.Objective.Name)
	str(l.GradientBooster.Name)
	w(int32(len(trees.Trees)), int32(1), int32(nf), int32(0), int64(0), int32(max(nc, 1)), int32(0), [32]int32{})
	for i, tr := range trees.Trees {
		n := len(tr.LeftChildren)
		w(int32(1), int32(n), int32(0), int32(0), int32(nf), int32(0), [31]int32{})
		nodes := make([][5]uint32, n)
		for j := range n {
			sindex := uint32(tr.SplitIndices[j])
			if dl := strings.TrimSpace(string(tr.DefaultLeft[j])); dl == "1" || dl == "true" {
				sindex |= 1 << 31
			}
			nodes[j] = [5]uint32{math.MaxUint32, uint32(tr.LeftChildren[j]), uint32(tr.RightChildren[j]), sindex, math.Float32bits(tr.SplitConditions[j])}
		}
		if edit != nil {
			edit(i, nodes)
		}
		for _, nd := range nodes {
			w(nd)
		}
		w(make([]byte, n*xgbStatBytes))
	}
	for _, g := range trees.TreeInfo {
		w(int32(g))
	}
	if l.GradientBooster.Name == "dart" {
		w(uint64(len(l.GradientBooster.WeightDrop)))
		for _, v := range l.GradientBooster.WeightDrop {
			w(float32(v))
		}
	}
	return b.Bytes()
}

// TestXGBoostBinaryMatchesJSON: the fixtures' trees written in XGBoost's
// binary format predict what XGBoost does (their references), as the JSON
// files do: a classifier of three classes, a binary one and a regressor.
func TestXGBoostBinaryMatchesJSON(t *testing.T) {
	for _, name := range []string{"iris_xgb", "cancer_xgb", "diabetes_xgb"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(servingtest.Path(name + ".json"))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), name+".bin")
			if err := os.WriteFile(path, xgbBinary(t, data, nil), 0o600); err != nil {
				t.Fatal(err)
			}
			m, err := Load(XGBoost, path, model.Options{})
			if err != nil {
				t.Fatal(err)
			}
			servingtest.Check(t, m, servingtest.LoadReference(t, name), 1e-5)
		})
	}
}

// TestBadXGBoostBinary: damaged and hostile binary models are refused at
// once, with what is wrong, before anything they claim is allocated or
// followed: counts larger than the file, node links in a cycle, a split
// on a feature the rows do not have.
func TestBadXGBoostBinary(t *testing.T) {
	iris, err := os.ReadFile(servingtest.Path("iris_xgb.json"))
	if err != nil {
		t.Fatal(err)
	}
	good := xgbBinary(t, iris, nil)
	set := func(off int, v uint32) []byte {
		b := bytes.Clone(good)
		binary.LittleEndian.PutUint32(b[off:], v)
		return b
	}
	objLen := int(binary.LittleEndian.Uint64(good[136:]))
	gbParam := 136 + 8 + objLen + 8 + len("gbtree")
	firstTree := gbParam + xgbGBTreeParamBytes
	firstNode := firstTree + xgbTreeParamBytes
	cases := map[string]struct {
		data []byte
		want string
	}{
		"truncated":          {good[:len(good)/2], "ends early"},
		"empty":              {nil, "ends early"},
		"huge objective":     {set(136, 0xfffffff0), "longer than 256"},
		"trees past the end": {set(gbParam, 1<<30), "num_trees 1073741824"},
		"nodes past the end": {set(firstTree+4, 1<<30), "num_nodes 1073741824"},
		"two roots":          {set(gbParam+4, 2), "num_roots 2"},
		"no features":        {set(4, 0), "num_feature 0"},
		"linear booster":     {bytes.Replace(good, []byte("gbtree"), []byte("gblin\x00"), 1), "only tree boosters"},
		"cycle": {xgbBinary(t, iris, func(tree int, nodes [][5]uint32) {
			if tree == 0 {
				nodes[0][1] = 0 // the root's left child is the root
			}
		}), "children"},
		"feature past the rows": {xgbBinary(t, iris, func(tree int, nodes [][5]uint32) {
			if tree == 3 {
				nodes[0][3] = 1000
			}
		}), "feature 1000"},
		"child past the nodes": {set(firstNode+8, 1<<20), "children"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.bin")
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err := Load(XGBoost, path, model.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("refused after %s", d)
			}
		})
	}
}
