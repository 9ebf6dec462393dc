package trees

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Bounds of a LightGBM JSON model that leaves may read.
const (
	// maxCategory bounds a categorical split's category values: leaves
	// makes a bitset up to the largest one for every such split.
	maxCategory = 1 << 20
	// maxBitsetBytes bounds those bitsets over the whole model.
	maxBitsetBytes = 256 << 20
)

// lgbJSONNode is a node of a LightGBM JSON model (dump_model): a split, or
// a leaf when missing_type is absent (as leaves tells them apart).
type lgbJSONNode struct {
	SplitFeature *int64          `json:"split_feature"`
	Threshold    json.RawMessage `json:"threshold"`
	DecisionType string          `json:"decision_type"`
	MissingType  string          `json:"missing_type"`
	Left         json.RawMessage `json:"left_child"`
	Right        json.RawMessage `json:"right_child"`
	LeafValue    *float64        `json:"leaf_value"`
}

// checkLightGBMJSON checks a LightGBM JSON model before leaves reads it.
// leaves sizes its node arrays from num_leaves and keeps pointers into
// them, so a tree with more splits than num_leaves-1 left links pointing
// back to the root (predictions looping forever), and a huge num_leaves
// an allocation that kills the process; it indexes a row with each
// split's feature in its prediction goroutines (a feature past
// max_feature_idx crashed the model server); and it makes a bitset as
// large as a categorical split's largest category.
//
// It returns the model's objective.
func checkLightGBMJSON(data []byte) (string, error) {
	var m struct {
		Objective     string `json:"objective"`
		MaxFeatureIdx int    `json:"max_feature_idx"`
		Trees         []struct {
			NumLeaves int             `json:"num_leaves"`
			Root      json.RawMessage `json:"tree_structure"`
		} `json:"tree_info"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return "", fmt.Errorf("not a LightGBM JSON model: %w", err)
	}
	if m.MaxFeatureIdx < 0 || m.MaxFeatureIdx >= 1<<24 {
		return "", fmt.Errorf("max_feature_idx %d", m.MaxFeatureIdx)
	}
	bitsets := 0
	for i, t := range m.Trees {
		// Every node takes more than one byte of the file.
		if t.NumLeaves < 1 || t.NumLeaves > len(data) {
			return "", fmt.Errorf("tree %d: num_leaves %d in a file of %d bytes", i, t.NumLeaves, len(data))
		}
		splits := 0
		stack := []json.RawMessage{t.Root}
		for len(stack) > 0 {
			raw := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			var n lgbJSONNode
			if err := json.Unmarshal(raw, &n); err != nil {
				return "", fmt.Errorf("tree %d: a node: %w", i, err)
			}
			if n.MissingType == "" {
				if n.LeafValue == nil {
					return "", fmt.Errorf("tree %d: a node that is neither a split (missing_type) nor a leaf (leaf_value)", i)
				}
				continue
			}
			if splits++; splits > t.NumLeaves-1 {
				return "", fmt.Errorf("tree %d: more than num_leaves-1 = %d splits", i, t.NumLeaves-1)
			}
			if n.SplitFeature == nil || *n.SplitFeature < 0 || *n.SplitFeature > int64(m.MaxFeatureIdx) {
				return "", fmt.Errorf("tree %d: a split on feature %v of %d", i, n.SplitFeature, m.MaxFeatureIdx+1)
			}
			switch n.DecisionType {
			case "<=":
				var v float64
				if err := json.Unmarshal(n.Threshold, &v); err != nil {
					return "", fmt.Errorf("tree %d: threshold %.40q of a numerical split: %w", i, n.Threshold, err)
				}
			case "==":
				var s string
				if err := json.Unmarshal(n.Threshold, &s); err != nil {
					return "", fmt.Errorf("tree %d: threshold %.40q of a categorical split: %w", i, n.Threshold, err)
				}
				top := 0
				for _, tok := range strings.Split(s, "||") {
					c, err := strconv.Atoi(tok)
					if err != nil || c < 0 || c >= maxCategory {
						return "", fmt.Errorf("tree %d: category %q: want an integer from 0 to %d", i, tok, maxCategory-1)
					}
					top = max(top, c)
				}
				if bitsets += top/8 + 4; bitsets > maxBitsetBytes {
					return "", errors.New("the categorical splits' bitsets take more than 256 MiB")
				}
			default:
				return "", fmt.Errorf("tree %d: decision_type %q", i, n.DecisionType)
			}
			if len(n.Left) == 0 || len(n.Right) == 0 {
				return "", fmt.Errorf("tree %d: a split without two children", i)
			}
			stack = append(stack, n.Left, n.Right)
		}
		if splits != t.NumLeaves-1 {
			return "", fmt.Errorf("tree %d: %d splits, num_leaves %d", i, splits, t.NumLeaves)
		}
	}
	return m.Objective, nil
}

// lightGBMTransform turns the raw scores leaves computes for a LightGBM
// JSON model (leaves reads no objective from JSON) into what LightGBM
// predicts, from the model's objective: a sigmoid for a binary classifier
// (classes 2), a softmax over the groups for a multiclass one (classes =
// groups), nothing for a regression (classes 0).
func lightGBMTransform(objective string, groups int) (func(out []float64), int, error) {
	fields := strings.Fields(objective)
	name, param := "", ""
	if len(fields) > 0 {
		name = fields[0]
	}
	if len(fields) > 1 {
		param = fields[1]
	}
	switch {
	case name == "" || strings.HasPrefix(name, "regression"):
		return nil, 0, nil
	case name == "binary" && param == "sigmoid:1" && groups == 1:
		return func(out []float64) {
			for i, v := range out {
				out[i] = 1 / (1 + math.Exp(-v))
			}
		}, 2, nil
	case name == "multiclass" && param == "num_class:"+strconv.Itoa(groups) && groups > 1:
		return func(out []float64) {
			for r := 0; r+groups <= len(out); r += groups {
				softmax(out[r : r+groups])
			}
		}, groups, nil
	}
	return nil, 0, fmt.Errorf("LightGBM objective %q with %d output groups is not supported", objective, groups)
}
