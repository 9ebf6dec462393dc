package trees

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// XGBoost's JSON model format (Booster.save_model("model.json"), XGBoost
// 1.0 and later), read here because leaves reads only the binary format of
// XGBoost before 1.0. Only the fields prediction needs are declared.
type xgbModel struct {
	Learner struct {
		FeatureNames      []string `json:"feature_names"`
		LearnerModelParam struct {
			BaseScore  string `json:"base_score"`
			NumClass   string `json:"num_class"`
			NumFeature string `json:"num_feature"`
			NumTarget  string `json:"num_target"`
		} `json:"learner_model_param"`
		Objective struct {
			Name string `json:"name"`
		} `json:"objective"`
		GradientBooster struct {
			Name       string      `json:"name"`
			Model      *xgbGBTree  `json:"model"`
			GBTree     *xgbBooster `json:"gbtree"`
			WeightDrop []float64   `json:"weight_drop"`
		} `json:"gradient_booster"`
	} `json:"learner"`
}

type xgbBooster struct {
	Model *xgbGBTree `json:"model"`
}

type xgbGBTree struct {
	TreeInfo []int     `json:"tree_info"`
	Trees    []xgbTree `json:"trees"`
}

type xgbTree struct {
	LeftChildren    []int32           `json:"left_children"`
	RightChildren   []int32           `json:"right_children"`
	SplitIndices    []int32           `json:"split_indices"`
	SplitConditions []float32         `json:"split_conditions"`
	DefaultLeft     []json.RawMessage `json:"default_left"`
	SplitType       []int             `json:"split_type"`
}

// xgbNode is one node: a leaf when left < 0.
type xgbNode struct {
	left, right int32
	feature     int32
	cond        float32 // split condition, or the leaf's value
	defaultLeft bool
}

// xgbEnsemble predicts with the trees of an XGBoost JSON model.
type xgbEnsemble struct {
	trees     [][]xgbNode
	group     []int
	weight    []float64
	groups    int
	features  int
	base      float64 // margin added to every group
	transform string  // "", "sigmoid", "softmax" or "exp"
	classes   int     // 0 for a regressor
	names     []string
}

// parseXGBoostJSON reads an XGBoost JSON model.
func parseXGBoostJSON(data []byte) (*xgbEnsemble, error) {
	var m xgbModel
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("not an XGBoost JSON model: %w", err)
	}
	l := m.Learner
	gb := l.GradientBooster
	var trees *xgbGBTree
	switch gb.Name {
	case "gbtree":
		trees = gb.Model
	case "dart":
		if gb.GBTree != nil {
			trees = gb.GBTree.Model
		}
	case "gblinear":
		return nil, errors.New("a gblinear XGBoost model: only tree boosters (gbtree, dart) are read")
	default:
		return nil, fmt.Errorf("XGBoost booster %q: want gbtree or dart", gb.Name)
	}
	if trees == nil || len(trees.Trees) == 0 {
		return nil, errors.New("the XGBoost model has no trees")
	}
	nf, err := strconv.Atoi(l.LearnerModelParam.NumFeature)
	if err != nil || nf <= 0 {
		return nil, fmt.Errorf("learner_model_param.num_feature %q: want a positive integer", l.LearnerModelParam.NumFeature)
	}
	nc, _ := strconv.Atoi(l.LearnerModelParam.NumClass)
	if nt, _ := strconv.Atoi(l.LearnerModelParam.NumTarget); nt > 1 {
		return nil, fmt.Errorf("a model with %d targets: one target is read", nt)
	}
	base, err := parseBaseScore(l.LearnerModelParam.BaseScore)
	if err != nil {
		return nil, err
	}
	return newXGBEnsemble(xgbParams{objective: l.Objective.Name, booster: gb.Name, base: base, features: nf, classes: nc,
		trees: trees.Trees, treeInfo: trees.TreeInfo, weightDrop: gb.WeightDrop, names: l.FeatureNames})
}

// xgbParams is what an XGBoost model file says, in either format.
type xgbParams struct {
	objective, booster string
	base               float64 // base_score as written (a probability for logistic objectives)
	features, classes  int
	trees              []xgbTree
	treeInfo           []int
	weightDrop         []float64
	names              []string
}

// newXGBEnsemble checks a model's parameters and trees and makes its
// predictor.
func newXGBEnsemble(p xgbParams) (*xgbEnsemble, error) {
	if len(p.trees) == 0 {
		return nil, errors.New("the XGBoost model has no trees")
	}
	if len(p.treeInfo) != len(p.trees) {
		return nil, fmt.Errorf("tree_info has %d entries for %d trees", len(p.treeInfo), len(p.trees))
	}
	e := &xgbEnsemble{features: p.features, groups: max(p.classes, 1), names: p.names}
	base := p.base
	switch obj := p.objective; obj {
	case "reg:squarederror", "reg:linear", "reg:squaredlogerror", "reg:pseudohubererror", "reg:absoluteerror", "reg:quantileerror", "binary:logitraw", "rank:pairwise", "rank:ndcg", "rank:map":
		e.base = base
	case "binary:logistic", "reg:logistic":
		if obj == "binary:logistic" {
			e.classes = 2
		}
		if base <= 0 || base >= 1 {
			return nil, fmt.Errorf("base_score %v of a logistic objective: want a probability", base)
		}
		e.base, e.transform = math.Log(base/(1-base)), "sigmoid"
	case "multi:softprob", "multi:softmax":
		e.base, e.transform, e.classes = base, "softmax", e.groups
	case "count:poisson", "reg:gamma", "reg:tweedie":
		if base <= 0 {
			return nil, fmt.Errorf("base_score %v of objective %s: want a positive value", base, obj)
		}
		e.base, e.transform = math.Log(base), "exp"
	default:
		return nil, fmt.Errorf("XGBoost objective %q is not supported", obj)
	}
	if e.transform == "sigmoid" && e.groups != 1 || e.transform == "softmax" && e.groups < 2 {
		return nil, fmt.Errorf("objective %s with num_class %d", p.objective, p.classes)
	}
	for i, t := range p.trees {
		nodes, err := xgbNodes(t, p.features)
		if err != nil {
			return nil, fmt.Errorf("tree %d: %w", i, err)
		}
		g := p.treeInfo[i]
		if g < 0 || g >= e.groups {
			return nil, fmt.Errorf("tree %d belongs to group %d of %d", i, g, e.groups)
		}
		w := 1.0
		if p.booster == "dart" && i < len(p.weightDrop) {
			w = p.weightDrop[i]
		}
		e.trees, e.group, e.weight = append(e.trees, nodes), append(e.group, g), append(e.weight, w)
	}
	return e, nil
}

// parseBaseScore reads base_score: "5E-1" (XGBoost 1.x) or "[5E-1]" (2.x).
func parseBaseScore(s string) (float64, error) {
	s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s), "["), "]")
	if s == "" {
		return 0.5, nil
	}
	if strings.Contains(s, ",") {
		return 0, fmt.Errorf("base_score %q: one value per model is read", s)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("base_score %q: %w", s, err)
	}
	return v, nil
}

func xgbNodes(t xgbTree, features int) ([]xgbNode, error) {
	n := len(t.LeftChildren)
	if n == 0 || len(t.RightChildren) != n || len(t.SplitIndices) != n || len(t.SplitConditions) != n || len(t.DefaultLeft) != n {
		return nil, errors.New("node arrays of different lengths")
	}
	nodes := make([]xgbNode, n)
	for i := range n {
		l, r := t.LeftChildren[i], t.RightChildren[i]
		nd := xgbNode{left: l, right: r, feature: t.SplitIndices[i], cond: t.SplitConditions[i]}
		dl := strings.TrimSpace(string(t.DefaultLeft[i]))
		nd.defaultLeft = dl == "1" || dl == "true"
		if l >= 0 {
			// Children come after their parent, which also rules out
			// cycles.
			if l <= int32(i) || r <= int32(i) || int(l) >= n || int(r) >= n {
				return nil, fmt.Errorf("node %d has children %d and %d", i, l, r)
			}
			if nd.feature < 0 || int(nd.feature) >= features {
				return nil, fmt.Errorf("node %d splits on feature %d of %d", i, nd.feature, features)
			}
			if i < len(t.SplitType) && t.SplitType[i] != 0 {
				return nil, fmt.Errorf("node %d is a categorical split: not supported", i)
			}
		}
		nodes[i] = nd
	}
	return nodes, nil
}

// predict writes rows*groups outputs (transformed) for a row-major matrix.
func (e *xgbEnsemble) predict(vals []float64, rows, cols int, out []float64) error {
	if cols != e.features {
		return fmt.Errorf("%d features, the model takes %d", cols, e.features)
	}
	for r := range rows {
		x := vals[r*cols : (r+1)*cols]
		margin := out[r*e.groups : (r+1)*e.groups]
		for g := range margin {
			margin[g] = e.base
		}
		for t, nodes := range e.trees {
			i := int32(0)
			for nodes[i].left >= 0 {
				nd := &nodes[i]
				v := x[nd.feature]
				switch {
				case math.IsNaN(v):
					if nd.defaultLeft {
						i = nd.left
					} else {
						i = nd.right
					}
				case float32(v) < nd.cond: // XGBoost compares in float32
					i = nd.left
				default:
					i = nd.right
				}
			}
			margin[e.group[t]] += e.weight[t] * float64(nodes[i].cond)
		}
		switch e.transform {
		case "sigmoid":
			margin[0] = 1 / (1 + math.Exp(-margin[0]))
		case "exp":
			for g := range margin {
				margin[g] = math.Exp(margin[g])
			}
		case "softmax":
			softmax(margin)
		}
	}
	return nil
}

// softmax turns a row of margins into probabilities in place (shifted by
// the largest, so that no exponential overflows).
func softmax(row []float64) {
	top := row[0]
	for _, v := range row {
		top = math.Max(top, v)
	}
	sum := 0.0
	for g, v := range row {
		row[g] = math.Exp(v - top)
		sum += row[g]
	}
	for g := range row {
		row[g] /= sum
	}
}
