package oip

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/tensor"
)

// Request is a decoded inference request.
type Request struct {
	// ID is echoed in the response.
	ID string
	// Parameters are the request's parameters, passed through.
	Parameters map[string]any
	// Inputs are the input tensors, in request order.
	Inputs []*tensor.Tensor
	// Outputs names the outputs to return; empty means every output.
	Outputs []string
}

type rawRequest struct {
	ID         string         `json:"id"`
	Parameters map[string]any `json:"parameters"`
	Inputs     []rawInput     `json:"inputs"`
	Outputs    []rawOutput    `json:"outputs"`
}

type rawInput struct {
	Name       string          `json:"name"`
	Shape      []int64         `json:"shape"`
	Datatype   string          `json:"datatype"`
	Parameters map[string]any  `json:"parameters"`
	Data       json.RawMessage `json:"data"`
}

type rawOutput struct {
	Name       string         `json:"name"`
	Parameters map[string]any `json:"parameters"`
}

// DecodeRequest parses an inference request body. Every problem is
// returned, with its field path; the request is nil when there is any.
func DecodeRequest(body []byte) (*Request, Problems) {
	var raw rawRequest
	var probs Problems
	if p := DecodeStrict(body, &raw); p != nil {
		return nil, p
	}
	if len(raw.Inputs) == 0 {
		probs.add("inputs", "required: at least one input tensor")
	}
	req := &Request{ID: raw.ID, Parameters: raw.Parameters}
	seen := map[string]bool{}
	for i, in := range raw.Inputs {
		path := fmt.Sprintf("inputs[%d]", i)
		t, p := decodeInput(path, in)
		probs = append(probs, p...)
		if t == nil {
			continue
		}
		if seen[t.Name] {
			probs.add(path+".name", "input %q appears twice", t.Name)
			continue
		}
		seen[t.Name] = true
		req.Inputs = append(req.Inputs, t)
	}
	seenOut := map[string]bool{}
	for i, out := range raw.Outputs {
		path := fmt.Sprintf("outputs[%d]", i)
		switch {
		case out.Name == "":
			probs.add(path+".name", "required")
		case seenOut[out.Name]:
			probs.add(path+".name", "output %q appears twice", out.Name)
		default:
			seenOut[out.Name] = true
			req.Outputs = append(req.Outputs, out.Name)
		}
		if b, ok := out.Parameters["binary_data"].(bool); ok && b {
			probs.add(path+".parameters.binary_data", "binary tensor data is not supported: ask for JSON data")
		}
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return req, nil
}

// DecodeStrict unmarshals one JSON value into v, refusing unknown fields
// and trailing data, and turns encoding/json's errors into a Problem with
// the field's path.
func DecodeStrict(body []byte, v any) Problems {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Problems{*jsonProblem(err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return Problems{{Message: "malformed JSON: data after the top-level value"}}
	}
	return nil
}

func jsonProblem(err error) *Problem {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return &Problem{Message: fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, syn)}
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(body)"
		}
		return &Problem{Field: field, Message: fmt.Sprintf("want %s, got JSON %s", typ.Type, typ.Value)}
	case errors.Is(err, io.EOF):
		return &Problem{Message: "empty body: want a JSON object"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &Problem{Message: "malformed JSON: the body ends early"}
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return &Problem{Field: strings.Trim(f, `"`), Message: "unknown field"}
	}
	return &Problem{Message: "malformed JSON: " + strings.TrimPrefix(msg, "json: ")}
}

func decodeInput(path string, in rawInput) (*tensor.Tensor, Problems) {
	var probs Problems
	if in.Name == "" {
		probs.add(path+".name", "required")
	}
	dt := tensor.DataType(in.Datatype)
	switch {
	case in.Datatype == "":
		probs.add(path+".datatype", "required: one of %s", tensor.SupportedList())
	case !dt.Supported():
		probs.add(path+".datatype", "%q is not supported: use one of %s", in.Datatype, tensor.SupportedList())
	}
	var n int64 = -1
	if in.Shape == nil {
		probs.add(path+".shape", "required: the tensor's dimensions, e.g. [1, 4]")
	} else if e, err := tensor.Elements(in.Shape); err != nil {
		probs.add(path+".shape", "%v", err)
	} else {
		n = e
	}
	if b, ok := in.Parameters["binary_data_size"]; ok && b != nil {
		probs.add(path+".parameters.binary_data_size", "binary tensor data is not supported: send data as JSON")
	}
	if len(in.Data) == 0 || string(in.Data) == "null" {
		probs.add(path+".data", "required: the tensor's elements, row-major")
		return nil, probs
	}
	if len(probs) > 0 {
		return nil, probs
	}
	t := &tensor.Tensor{Name: in.Name, DataType: dt, Shape: in.Shape}
	if err := fill(t, in.Data, n); err != nil {
		probs.add(path+".data", "%v", err)
		return nil, probs
	}
	return t, nil
}

// fill parses data (a JSON value already known to be well formed: an
// array, nested arrays or a scalar) into t's typed slice, in row-major
// order, and checks that it holds exactly n elements.
func fill(t *tensor.Tensor, data []byte, n int64) error {
	// Every element takes at least one byte plus a separator, so this
	// bounds the allocation by the body's size whatever the shape says.
	capHint := min(n, int64(len(data)/2+1))
	switch t.DataType {
	case tensor.BOOL:
		t.Bool = make([]bool, 0, capHint)
	case tensor.INT32:
		t.Int32 = make([]int32, 0, capHint)
	case tensor.INT64:
		t.Int64 = make([]int64, 0, capHint)
	case tensor.FP32:
		t.FP32 = make([]float32, 0, capHint)
	case tensor.FP64:
		t.FP64 = make([]float64, 0, capHint)
	case tensor.BYTES:
		t.Bytes = make([][]byte, 0, capHint)
	}
	var count int64
	err := scan(data, func(tok []byte, kind byte) error {
		if count == n {
			return fmt.Errorf("more elements than the shape's %d", n)
		}
		if err := appendElement(t, tok, kind, count); err != nil {
			return err
		}
		count++
		return nil
	})
	if err != nil {
		return err
	}
	if count != n {
		return fmt.Errorf("%d elements, but the shape %v needs %d", count, t.Shape, n)
	}
	return nil
}

func appendElement(t *tensor.Tensor, tok []byte, kind byte, i int64) error {
	want := func(what string) error {
		return fmt.Errorf("element %d is %s, want %s for %s", i, describe(tok, kind), what, t.DataType)
	}
	switch t.DataType {
	case tensor.BOOL:
		if kind != 'b' {
			return want("true or false")
		}
		t.Bool = append(t.Bool, tok[0] == 't')
	case tensor.INT32, tensor.INT64:
		if kind != 'n' {
			return want("an integer")
		}
		bits := 64
		if t.DataType == tensor.INT32 {
			bits = 32
		}
		v, err := strconv.ParseInt(string(tok), 10, bits)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return fmt.Errorf("element %d (%s) is out of the range of %s", i, tok, t.DataType)
			}
			return want("an integer")
		}
		if bits == 32 {
			t.Int32 = append(t.Int32, int32(v))
		} else {
			t.Int64 = append(t.Int64, v)
		}
	case tensor.FP32, tensor.FP64:
		if kind != 'n' {
			return want("a number")
		}
		bits := 64
		if t.DataType == tensor.FP32 {
			bits = 32
		}
		v, err := strconv.ParseFloat(string(tok), bits)
		if err != nil || math.IsInf(v, 0) {
			return fmt.Errorf("element %d (%s) is out of the range of %s", i, tok, t.DataType)
		}
		if bits == 32 {
			t.FP32 = append(t.FP32, float32(v))
		} else {
			t.FP64 = append(t.FP64, v)
		}
	case tensor.BYTES:
		if kind != 's' {
			return want("a string")
		}
		var s string
		if bytes.IndexByte(tok, '\\') < 0 && utf8.Valid(tok) {
			s = string(tok[1 : len(tok)-1])
		} else if err := json.Unmarshal(tok, &s); err != nil {
			return want("a string")
		}
		t.Bytes = append(t.Bytes, []byte(s))
	}
	return nil
}

func describe(tok []byte, kind byte) string {
	switch kind {
	case 's':
		if len(tok) > 24 {
			return "a string"
		}
		return "the string " + string(tok)
	case 'b':
		return string(tok)
	case 'z':
		return "null"
	case 'o':
		return "an object"
	}
	if len(tok) > 24 {
		tok = append(tok[:21:21], "..."...)
	}
	return string(tok)
}

// scan calls visit for every scalar of a well-formed JSON value, in order,
// flattening arrays. kind is 'n' (number), 's' (string, quotes included),
// 'b' (true/false), 'z' (null) or 'o' (an object, which is not visited
// inside).
func scan(data []byte, visit func(tok []byte, kind byte) error) error {
	for i := 0; i < len(data); {
		switch c := data[i]; {
		case c == '[' || c == ']' || c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"':
			j := i + 1
			for j < len(data) && data[j] != '"' {
				if data[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(data) {
				return errors.New("unterminated string")
			}
			if err := visit(data[i:j+1], 's'); err != nil {
				return err
			}
			i = j + 1
		case c == '{':
			return visit(data[i:i+1], 'o')
		case c == 't' || c == 'f' || c == 'n':
			j := i
			for j < len(data) && data[j] >= 'a' && data[j] <= 'z' {
				j++
			}
			kind := byte('b')
			if c == 'n' {
				kind = 'z'
			}
			if err := visit(data[i:j], kind); err != nil {
				return err
			}
			i = j
		default:
			j := i
			for j < len(data) && !isDelim(data[j]) {
				j++
			}
			if j == i {
				return fmt.Errorf("unexpected character %q", c)
			}
			if err := visit(data[i:j], 'n'); err != nil {
				return err
			}
			i = j
		}
	}
	return nil
}

func isDelim(c byte) bool {
	return c == ',' || c == ']' || c == '[' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '"' || c == '{'
}
