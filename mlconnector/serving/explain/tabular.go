package explain

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/tensor"
)

// Column places one feature in a model input.
type Column struct {
	Input int // index in the model's inputs
	Index int // column in that input
}

// Layout maps a feature vector to a model's inputs: the inputs' columns,
// concatenated in input order. It works for models whose inputs are all
// numeric with shape [-1, k] (or [-1], one column).
type Layout struct {
	Inputs  []tensor.Spec
	Columns []Column
	// Names are the features' names: the model's, or input[j].
	Names []string
}

// NewLayout reads a layout from a model's metadata.
func NewLayout(meta model.Metadata) (*Layout, error) {
	l := &Layout{Inputs: meta.Inputs}
	for i, in := range meta.Inputs {
		if !in.DataType.Numeric() {
			return nil, fmt.Errorf("input %q is %s: explanations need numeric inputs", in.Name, in.DataType)
		}
		k := int64(1)
		switch {
		case len(in.Shape) == 1 && in.Shape[0] == -1:
		case len(in.Shape) == 2 && in.Shape[0] == -1 && in.Shape[1] > 0:
			k = in.Shape[1]
		default:
			return nil, fmt.Errorf("input %q has shape %v: explanations need [-1, k] or [-1]", in.Name, in.Shape)
		}
		for j := range int(k) {
			l.Columns = append(l.Columns, Column{Input: i, Index: j})
			l.Names = append(l.Names, fmt.Sprintf("%s[%d]", in.Name, j))
		}
	}
	if len(l.Columns) == 0 {
		return nil, errors.New("the model has no inputs")
	}
	if len(meta.Features) == len(l.Columns) {
		l.Names = slices.Clone(meta.Features)
	}
	return l, nil
}

// Tensors builds the model's inputs from rows of features.
func (l *Layout) Tensors(rows [][]float64) []*tensor.Tensor {
	ts := make([]*tensor.Tensor, len(l.Inputs))
	for i, in := range l.Inputs {
		shape := []int64{int64(len(rows))}
		if len(in.Shape) == 2 {
			shape = append(shape, in.Shape[1])
		}
		ts[i] = tensor.New(in.Name, in.DataType, shape)
	}
	for r, row := range rows {
		for f, c := range l.Columns {
			t := ts[c.Input]
			width := 1
			if len(t.Shape) == 2 {
				width = int(t.Shape[1])
			}
			t.SetFloat64(r*width+c.Index, row[f])
		}
	}
	return ts
}

// Features reads one row of features back from inputs of batch size 1.
func (l *Layout) Features(inputs []*tensor.Tensor) ([]float64, error) {
	byName := map[string]*tensor.Tensor{}
	for _, t := range inputs {
		byName[t.Name] = t
	}
	x := make([]float64, len(l.Columns))
	for f, c := range l.Columns {
		t := byName[l.Inputs[c.Input].Name]
		if t == nil || len(t.Shape) == 0 || t.Shape[0] != 1 {
			return nil, fmt.Errorf("input %q: explanations take a batch of one row", l.Inputs[c.Input].Name)
		}
		x[f] = t.Float64(c.Index)
	}
	return x, nil
}

// Function evaluates m on rows through the layout and returns output's
// values; width is their number per row.
func (l *Layout) Function(m model.Model, output string) (Function, int, error) {
	var spec *tensor.Spec
	for _, o := range m.Metadata().Outputs {
		if o.Name == output {
			spec = &o
		}
	}
	if spec == nil {
		return nil, 0, fmt.Errorf("the model has no output %q", output)
	}
	if !spec.DataType.Numeric() {
		return nil, 0, fmt.Errorf("output %q is %s: explanations need a numeric output", output, spec.DataType)
	}
	width := 1
	switch {
	case len(spec.Shape) == 1:
	case len(spec.Shape) == 2 && spec.Shape[1] > 0:
		width = int(spec.Shape[1])
	default:
		return nil, 0, fmt.Errorf("output %q has shape %v: explanations need [-1, k] or [-1]", output, spec.Shape)
	}
	f := func(ctx context.Context, rows [][]float64) ([]float64, error) {
		outs, err := m.Infer(ctx, l.Tensors(rows), []string{output})
		if err != nil {
			return nil, err
		}
		if len(outs) != 1 || outs[0].Len() != len(rows)*width {
			return nil, fmt.Errorf("output %q: unexpected size", output)
		}
		v := make([]float64, outs[0].Len())
		for i := range v {
			v[i] = outs[0].Float64(i)
		}
		return v, nil
	}
	return f, width, nil
}

// Background is a sample of training rows, with the model's features in
// the layout's order.
type Background struct {
	Names []string
	Rows  [][]float64
	// Total is the number of rows of the file the sample was drawn from.
	Total int
}

// LoadBackground reads a training-data CSV with a header. Its feature
// columns are, in order: the layout's names when the header has them all;
// otherwise every column but those in exclude (the target). At most size
// rows are kept, drawn with a seeded shuffle so that the sample is the
// same at every start.
func LoadBackground(path string, l *Layout, exclude []string, size int, seed uint64) (*Background, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("background: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("background %s: header: %w", path, err)
	}
	cols, names, err := pickColumns(header, l, exclude)
	if err != nil {
		return nil, fmt.Errorf("background %s: %w", path, err)
	}
	b := &Background{Names: names}
	for line := 2; ; line++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("background %s: %w", path, err)
		}
		row := make([]float64, len(cols))
		for i, c := range cols {
			if row[i], err = strconv.ParseFloat(strings.TrimSpace(rec[c]), 64); err != nil {
				return nil, fmt.Errorf("background %s line %d column %q: %w", path, line, header[c], err)
			}
		}
		b.Rows = append(b.Rows, row)
	}
	if len(b.Rows) == 0 {
		return nil, fmt.Errorf("background %s: no rows", path)
	}
	b.Total = len(b.Rows)
	if size > 0 && len(b.Rows) > size {
		rng := rand.New(rand.NewPCG(seed, seed))
		rng.Shuffle(len(b.Rows), func(i, j int) { b.Rows[i], b.Rows[j] = b.Rows[j], b.Rows[i] })
		b.Rows = b.Rows[:size]
	}
	return b, nil
}

func pickColumns(header []string, l *Layout, exclude []string) ([]int, []string, error) {
	index := map[string]int{}
	for i, h := range header {
		index[strings.TrimSpace(h)] = i
	}
	var cols []int
	for _, n := range l.Names {
		if i, ok := index[n]; ok {
			cols = append(cols, i)
		}
	}
	if len(cols) == len(l.Names) {
		return cols, slices.Clone(l.Names), nil
	}
	cols = cols[:0]
	var names []string
	for i, h := range header {
		h = strings.TrimSpace(h)
		if slices.ContainsFunc(exclude, func(e string) bool { return strings.EqualFold(e, h) }) {
			continue
		}
		cols = append(cols, i)
		names = append(names, h)
	}
	if len(cols) != len(l.Columns) {
		return nil, nil, fmt.Errorf("%d feature columns (%s) but the model takes %d features: name the target column(s) to leave out", len(cols), strings.Join(names, ", "), len(l.Columns))
	}
	return cols, names, nil
}
