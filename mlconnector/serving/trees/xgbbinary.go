package trees

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// XGBoost's binary model format before 1.0 (Booster.save_model to a file
// not ending in .json, XGBoost 0.x), read here rather than by leaves:
// leaves trusts the counts and node links the file gives, so a hostile
// file made it allocate what a header claims (tens of gigabytes: a fatal
// out of memory, not an error), follow a cycle of node links forever, or
// index past a row's features in a prediction goroutine (a crash of the
// model server). Every count here is checked against the bytes left
// before anything is allocated, and the trees go through the checks of
// the JSON reader (xgbNodes: children after their parent, split features
// within the model's). The layout is little-endian, as XGBoost wrote it:
//
//	LearnerModelParam  136 bytes: base_score f32, num_feature u32, num_class i32, 2 flags, 29 reserved i32
//	name_obj, name_gbm strings: u64 length, bytes
//	GBTreeModelParam   160 bytes: num_trees i32, num_roots i32, num_feature i32, pad i32, i64, num_output_group i32, size_leaf_vector i32, 32 reserved i32
//	per tree:          TreeParam 148 bytes (num_roots i32, num_nodes i32, num_deleted i32, max_depth i32, num_feature i32, size_leaf_vector i32, 31 reserved i32),
//	                   num_nodes nodes of 20 bytes (parent i32, cleft i32, cright i32, sindex u32, info f32),
//	                   num_nodes statistics of 16 bytes, a leaf vector (u64 count, f32s) when size_leaf_vector > 0
//	tree_info          num_trees i32
//	dart only:         weight_drop, u64 count and f32s
type xgbReader struct {
	data []byte
	off  int
}

var errShort = errors.New("the file ends early")

func (r *xgbReader) take(n uint64) ([]byte, error) {
	if n > uint64(len(r.data)-r.off) {
		return nil, fmt.Errorf("at byte %d, %d bytes wanted: %w", r.off, n, errShort)
	}
	b := r.data[r.off : r.off+int(n)]
	r.off += int(n)
	return b, nil
}

func (r *xgbReader) u32() (uint32, error) {
	b, err := r.take(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *xgbReader) i32() (int32, error) { v, err := r.u32(); return int32(v), err }

func (r *xgbReader) f32() (float32, error) { v, err := r.u32(); return math.Float32frombits(v), err }

func (r *xgbReader) u64() (uint64, error) {
	b, err := r.take(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// str reads a length-prefixed string of at most max bytes.
func (r *xgbReader) str(max uint64) (string, error) {
	n, err := r.u64()
	if err != nil {
		return "", err
	}
	if n > max {
		return "", fmt.Errorf("a string of %d bytes at byte %d: longer than %d", n, r.off, max)
	}
	b, err := r.take(n)
	return string(b), err
}

// f32s reads a length-prefixed vector of float32.
func (r *xgbReader) f32s() ([]float32, error) {
	n, err := r.u64()
	if err != nil {
		return nil, err
	}
	if n > uint64(len(r.data)-r.off)/4 {
		return nil, fmt.Errorf("a vector of %d floats at byte %d: %w", n, r.off, errShort)
	}
	out := make([]float32, n)
	for i := range out {
		out[i], _ = r.f32()
	}
	return out, nil
}

// Sizes of the fixed records.
const (
	xgbLearnerParamBytes = 136
	xgbGBTreeParamBytes  = 160
	xgbTreeParamBytes    = 148
	xgbNodeBytes         = 20
	xgbStatBytes         = 16
)

// parseXGBoostBinary reads an XGBoost binary model (before 1.0).
func parseXGBoostBinary(data []byte) (*xgbEnsemble, error) {
	r := &xgbReader{data: data}
	hdr, err := r.take(xgbLearnerParamBytes)
	if err != nil {
		return nil, fmt.Errorf("not an XGBoost binary model: %w", err)
	}
	base := float64(math.Float32frombits(binary.LittleEndian.Uint32(hdr[0:])))
	nf := binary.LittleEndian.Uint32(hdr[4:])
	nc := int32(binary.LittleEndian.Uint32(hdr[8:]))
	obj, err := r.str(256)
	if err != nil {
		return nil, fmt.Errorf("objective name: %w", err)
	}
	booster, err := r.str(256)
	if err != nil {
		return nil, fmt.Errorf("booster name: %w", err)
	}
	if booster != "gbtree" && booster != "dart" {
		return nil, fmt.Errorf("XGBoost booster %q: only tree boosters (gbtree, dart) are read", booster)
	}
	if nf == 0 || nf > math.MaxInt32 {
		return nil, fmt.Errorf("num_feature %d: want a positive 32-bit integer", nf)
	}
	if nc < 0 {
		return nil, fmt.Errorf("num_class %d", nc)
	}
	gbp, err := r.take(xgbGBTreeParamBytes)
	if err != nil {
		return nil, fmt.Errorf("tree booster parameters: %w", err)
	}
	nTrees := int32(binary.LittleEndian.Uint32(gbp[0:]))
	if roots := int32(binary.LittleEndian.Uint32(gbp[4:])); roots != 1 {
		return nil, fmt.Errorf("num_roots %d: trees with one root are read", roots)
	}
	groups := int32(binary.LittleEndian.Uint32(gbp[24:]))
	if max(nc, 1) != max(groups, 1) {
		return nil, fmt.Errorf("num_class %d with %d output groups", nc, groups)
	}
	// Each tree takes at least its parameters and one node with its
	// statistics, plus its tree_info entry.
	if nTrees <= 0 || uint64(nTrees) > uint64(len(data)-r.off)/(xgbTreeParamBytes+xgbNodeBytes+xgbStatBytes+4) {
		return nil, fmt.Errorf("num_trees %d in a file of %d bytes: %w", nTrees, len(data), errShort)
	}
	p := xgbParams{objective: obj, booster: booster, base: base, features: int(nf), classes: int(nc),
		trees: make([]xgbTree, nTrees), treeInfo: make([]int, nTrees)}
	for i := range p.trees {
		if p.trees[i], err = r.tree(); err != nil {
			return nil, fmt.Errorf("tree %d: %w", i, err)
		}
	}
	for i := range p.treeInfo {
		g, err := r.i32()
		if err != nil {
			return nil, fmt.Errorf("tree_info: %w", err)
		}
		p.treeInfo[i] = int(g)
	}
	if booster == "dart" {
		w, err := r.f32s()
		if err != nil {
			return nil, fmt.Errorf("weight_drop: %w", err)
		}
		if len(w) != int(nTrees) {
			return nil, fmt.Errorf("weight_drop has %d weights for %d trees", len(w), nTrees)
		}
		for _, v := range w {
			p.weightDrop = append(p.weightDrop, float64(v))
		}
	}
	return newXGBEnsemble(p)
}

// tree reads one tree into the JSON reader's arrays.
func (r *xgbReader) tree() (xgbTree, error) {
	var t xgbTree
	tp, err := r.take(xgbTreeParamBytes)
	if err != nil {
		return t, err
	}
	if roots := int32(binary.LittleEndian.Uint32(tp[0:])); roots != 1 {
		return t, fmt.Errorf("num_roots %d: trees with one root are read", roots)
	}
	n := int32(binary.LittleEndian.Uint32(tp[4:]))
	leafVector := int32(binary.LittleEndian.Uint32(tp[20:]))
	if n <= 0 || uint64(n) > uint64(len(r.data)-r.off)/(xgbNodeBytes+xgbStatBytes) {
		return t, fmt.Errorf("num_nodes %d with %d bytes left: %w", n, len(r.data)-r.off, errShort)
	}
	t.LeftChildren, t.RightChildren = make([]int32, n), make([]int32, n)
	t.SplitIndices, t.SplitConditions = make([]int32, n), make([]float32, n)
	t.DefaultLeft = make([]json.RawMessage, n)
	for i := range n {
		b, _ := r.take(xgbNodeBytes)
		t.LeftChildren[i] = int32(binary.LittleEndian.Uint32(b[4:]))
		t.RightChildren[i] = int32(binary.LittleEndian.Uint32(b[8:]))
		sindex := binary.LittleEndian.Uint32(b[12:])
		t.SplitIndices[i] = int32(sindex & (1<<31 - 1))
		t.DefaultLeft[i] = json.RawMessage("0")
		if sindex>>31 != 0 {
			t.DefaultLeft[i] = json.RawMessage("1")
		}
		t.SplitConditions[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[16:]))
		if t.LeftChildren[i] < 0 {
			// A leaf: -1 on both sides, whatever else is written.
			t.LeftChildren[i], t.RightChildren[i] = -1, -1
		}
	}
	if _, err := r.take(uint64(n) * xgbStatBytes); err != nil {
		return t, err
	}
	if leafVector > 0 {
		if _, err := r.f32s(); err != nil {
			return t, fmt.Errorf("leaf vector: %w", err)
		}
	}
	return t, nil
}
