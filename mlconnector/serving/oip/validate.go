package oip

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/tensor"
)

// Validate checks a decoded request against a model's input and output
// specs: every model input present once with its datatype and a shape that
// fits (a -1 in the spec takes any size), no unknown input, one batch size
// across inputs whose first dimension is free, and only known outputs asked
// for. Every problem is returned.
func Validate(req *Request, inputs, outputs []tensor.Spec) Problems {
	var probs Problems
	byName := map[string]int{}
	for i, s := range inputs {
		byName[s.Name] = i
	}
	present := make([]bool, len(inputs))
	batch, batchFrom := int64(-1), ""
	for i, t := range req.Inputs {
		path := fmt.Sprintf("inputs[%d]", i)
		k, ok := byName[t.Name]
		if !ok {
			probs.add(path+".name", "the model has no input %q; its inputs are %s", t.Name, names(inputs))
			continue
		}
		present[k] = true
		spec := inputs[k]
		if t.DataType != spec.DataType {
			probs.add(path+".datatype", "model input %q takes %s, got %s", spec.Name, spec.DataType, t.DataType)
		}
		if !fits(t.Shape, spec.Shape) {
			probs.add(path+".shape", "model input %q takes shape %s (-1: any size), got %s", spec.Name, FormatShape(spec.Shape), FormatShape(t.Shape))
			continue
		}
		if len(spec.Shape) > 0 && spec.Shape[0] == -1 {
			if batch < 0 {
				batch, batchFrom = t.Shape[0], t.Name
			} else if t.Shape[0] != batch {
				probs.add(path+".shape", "batch size %d differs from input %q's %d", t.Shape[0], batchFrom, batch)
			}
		}
	}
	for k, ok := range present {
		if !ok {
			probs.add("inputs", "model input %q (%s %s) is missing", inputs[k].Name, inputs[k].DataType, FormatShape(inputs[k].Shape))
		}
	}
	for i, o := range req.Outputs {
		if !slices.ContainsFunc(outputs, func(s tensor.Spec) bool { return s.Name == o }) {
			probs.add(fmt.Sprintf("outputs[%d].name", i), "the model has no output %q; its outputs are %s", o, names(outputs))
		}
	}
	return probs
}

func fits(shape, spec []int64) bool {
	if len(shape) != len(spec) {
		return false
	}
	for i, d := range spec {
		if d >= 0 && shape[i] != d {
			return false
		}
	}
	return true
}

func names(specs []tensor.Spec) string {
	s := make([]string, len(specs))
	for i, sp := range specs {
		s[i] = fmt.Sprintf("%q", sp.Name)
	}
	return strings.Join(s, ", ")
}

// FormatShape writes a shape as [d0 d1 ...].
func FormatShape(shape []int64) string {
	return strings.ReplaceAll(fmt.Sprint(shape), " ", ", ")
}
