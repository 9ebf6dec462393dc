package oip

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/tensor"
)

func TestDecodeRequest(t *testing.T) {
	cases := map[string]struct {
		body string
		want *Request
	}{
		"nested FP32": {
			`{"id":"r1","inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1.5,-2],[3e2,0.1]]}]}`,
			&Request{ID: "r1", Inputs: []*tensor.Tensor{{Name: "x", DataType: tensor.FP32, Shape: []int64{2, 2}, FP32: []float32{1.5, -2, 300, 0.1}}}},
		},
		"every datatype, flat": {
			`{"inputs":[
				{"name":"b","shape":[2],"datatype":"BOOL","data":[true,false]},
				{"name":"i","shape":[2],"datatype":"INT32","data":[-2147483648,7]},
				{"name":"l","shape":[1],"datatype":"INT64","data":[9223372036854775807]},
				{"name":"d","shape":[1],"datatype":"FP64","data":[1e-300]},
				{"name":"s","shape":[3],"datatype":"BYTES","data":["plain","\u00e9t\u00e9 \"q\"",""]}],
			 "outputs":[{"name":"y"}],"parameters":{"k":1}}`,
			&Request{Parameters: map[string]any{"k": 1.0}, Outputs: []string{"y"}, Inputs: []*tensor.Tensor{
				{Name: "b", DataType: tensor.BOOL, Shape: []int64{2}, Bool: []bool{true, false}},
				{Name: "i", DataType: tensor.INT32, Shape: []int64{2}, Int32: []int32{-2147483648, 7}},
				{Name: "l", DataType: tensor.INT64, Shape: []int64{1}, Int64: []int64{9223372036854775807}},
				{Name: "d", DataType: tensor.FP64, Shape: []int64{1}, FP64: []float64{1e-300}},
				{Name: "s", DataType: tensor.BYTES, Shape: []int64{3}, Bytes: [][]byte{[]byte("plain"), []byte(`été "q"`), {}}},
			}},
		},
		"scalar and empty": {
			`{"inputs":[{"name":"x","shape":[],"datatype":"FP64","data":4},{"name":"e","shape":[0,3],"datatype":"FP64","data":[]}]}`,
			&Request{Inputs: []*tensor.Tensor{
				{Name: "x", DataType: tensor.FP64, Shape: []int64{}, FP64: []float64{4}},
				{Name: "e", DataType: tensor.FP64, Shape: []int64{0, 3}, FP64: []float64{}}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, probs := DecodeRequest([]byte(tc.body))
			if probs != nil {
				t.Fatal(probs)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeReportsEveryProblem(t *testing.T) {
	body := `{"inputs":[
		{"name":"","shape":[1],"datatype":"FP8","data":[1]},
		{"name":"a","shape":[2],"datatype":"INT32","data":[1,3000000000]},
		{"name":"b","datatype":"BOOL","data":[1]},
		{"name":"c","shape":[1],"datatype":"BOOL"}],
		"outputs":[{"name":""},{"name":"y"},{"name":"y"}]}`
	_, probs := DecodeRequest([]byte(body))
	var fields []string
	for _, p := range probs {
		fields = append(fields, p.Field)
	}
	want := []string{"inputs[0].name", "inputs[0].datatype", "inputs[1].data", "inputs[2].shape", "inputs[3].data", "outputs[0].name", "outputs[2].name"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("fields (-want +got):\n%s\n%v", diff, probs)
	}
}

func TestValidate(t *testing.T) {
	specs := []tensor.Spec{
		{Name: "a", DataType: tensor.FP32, Shape: []int64{-1, 3}},
		{Name: "b", DataType: tensor.INT64, Shape: []int64{-1}},
		{Name: "c", DataType: tensor.FP64, Shape: []int64{2, 2}},
	}
	outputs := []tensor.Spec{{Name: "y"}}
	req := &Request{Inputs: []*tensor.Tensor{
		{Name: "a", DataType: tensor.FP32, Shape: []int64{2, 3}},
		{Name: "b", DataType: tensor.INT64, Shape: []int64{3}},
		{Name: "z", DataType: tensor.FP64, Shape: []int64{1}},
	}, Outputs: []string{"y", "w"}}
	var got []string
	for _, p := range Validate(req, specs, outputs) {
		got = append(got, p.Field+": "+p.Message)
	}
	want := []string{
		`inputs[1].shape: batch size 3 differs from input "a"'s 2`,
		`inputs[2].name: the model has no input "z"; its inputs are "a", "b", "c"`,
		`inputs: model input "c" (FP64 [2, 2]) is missing`,
		`outputs[1].name: the model has no output "w"; its outputs are "y"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestAppendResponse(t *testing.T) {
	r := &Response{ModelName: "m", ModelVersion: "2", ID: "x\"y", Outputs: []*tensor.Tensor{
		{Name: "p", DataType: tensor.FP32, Shape: []int64{1, 2}, FP32: []float32{0.1, 1e-7}},
		{Name: "l", DataType: tensor.INT64, Shape: []int64{1}, Int64: []int64{-3}},
		{Name: "s", DataType: tensor.BYTES, Shape: []int64{1}, Bytes: [][]byte{[]byte("a\nb")}},
		{Name: "b", DataType: tensor.BOOL, Shape: []int64{1}, Bool: []bool{true}},
	}}
	b, err := AppendResponse(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model_name":"m","model_version":"2","id":"x\"y","outputs":[` +
		`{"name":"p","datatype":"FP32","shape":[1,2],"data":[0.1,1e-07]},` +
		`{"name":"l","datatype":"INT64","shape":[1],"data":[-3]},` +
		`{"name":"s","datatype":"BYTES","shape":[1],"data":["a\nb"]},` +
		`{"name":"b","datatype":"BOOL","shape":[1],"data":[true]}]}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	if !json.Valid(b) {
		t.Error("invalid JSON")
	}
	r.Outputs[0].FP32[0] = float32(math.NaN())
	if _, err := AppendResponse(nil, r); !errors.Is(err, ErrNotFinite) {
		t.Errorf("NaN output: %v", err)
	}
}

// FuzzDecodeRequest: no input crashes the decoder or makes it accept a
// tensor whose element count differs from its shape, and whatever it
// accepts encodes back to JSON that decodes to the same tensors.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2],[3,4]]}]}`,
		`{"inputs":[{"name":"s","shape":[1],"datatype":"BYTES","data":["\u0000\"\\"]}]}`,
		`{"inputs":[{"name":"b","shape":[2],"datatype":"BOOL","data":[true,false]}],"outputs":[{"name":"o"}]}`,
		`{"inputs":[{"name":"i","shape":[3],"datatype":"INT64","data":[-1,0,9223372036854775807]}]}`,
		`{"inputs":[{"name":"i","shape":[1],"datatype":"INT32","data":[1e3]}]}`,
		`{"inputs":[{"name":"d","shape":[],"datatype":"FP64","data":-0.0}]}`,
		`{"inputs":[{"name":"d","shape":[1],"datatype":"FP64","data":[[[[1]]]]}]}`,
		`{"inputs":[{"name":"d","shape":[1],"datatype":"FP64","data":[{"a":[1]}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, probs := DecodeRequest(body)
		if (req == nil) == (probs == nil) {
			t.Fatalf("request %v and problems %v", req, probs)
		}
		if req == nil {
			for _, p := range probs {
				if p.Message == "" {
					t.Fatal("a problem without a message")
				}
			}
			return
		}
		for _, in := range req.Inputs {
			n, err := tensor.Elements(in.Shape)
			if err != nil || int64(in.Len()) != n {
				t.Fatalf("input %q: %d elements for shape %v", in.Name, in.Len(), in.Shape)
			}
		}
		// Round trip: encoded as a response and decoded as a request.
		enc, err := AppendResponse(nil, &Response{ModelName: "m", Outputs: req.Inputs})
		if err != nil {
			t.Fatal(err)
		}
		again, probs := DecodeRequest([]byte(strings.Replace(strings.Replace(string(enc), `"outputs":`, `"inputs":`, 1), `"model_name":"m",`, "", 1)))
		if probs != nil {
			t.Fatalf("re-decoding %s: %v", enc, probs)
		}
		if diff := cmp.Diff(req.Inputs, again.Inputs); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}

func TestInvalidUTF8BecomesReplacementCharacter(t *testing.T) {
	req, probs := DecodeRequest([]byte("{\"inputs\":[{\"name\":\"s\",\"shape\":[1],\"datatype\":\"BYTES\",\"data\":[\"a\xffb\"]}]}"))
	if probs != nil {
		t.Fatal(probs)
	}
	if got := string(req.Inputs[0].Bytes[0]); got != "a\ufffdb" {
		t.Errorf("%q", got)
	}
}
