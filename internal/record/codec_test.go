package record

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// jsonDecode is what decode must agree with.
func jsonDecode(data []byte) (record, error) {
	var r record
	err := json.Unmarshal(data, &r)
	return r, err
}

// sameRecord compares decoded records; a nil and an empty Value are told
// apart, as encoding/json tells them apart.
func sameRecord(a, b record) bool {
	return reflect.DeepEqual(a, b) && (a.Value == nil) == (b.Value == nil)
}

var codecCases = []record{
	{V: 1, ID: "a"},
	{V: 1, ID: "node-1", Priority: 7, Value: []byte("10.0.0.1:80")},
	{V: 1, ID: "n", Priority: -3, Value: []byte{0, 1, 2, 0xff}, Key: "/svc/_c/7fffffffffffffff0000000000000001-0000000000000abc-0000002a"},
	{V: 1, ID: "n", Priority: math.MinInt64, Key: "k"},
	{V: 1, ID: "n", Priority: math.MaxInt64, Value: []byte{}},
	{V: 2, ID: "x<y>&z", Key: "/a<b"},
	{V: 1, ID: "quote\"back\\slash", Key: "tab\tnl\ncr\r"},
	{V: 1, ID: "ünïcødé", Key: "\u2028\u2029"},
	{V: 1, ID: "bad\xffutf8", Key: "\x00\x01\x7f"},
	{V: 0, ID: "", Key: ""},
	{V: 1, ID: "n", Priority: 2, Value: []byte("v"), Key: "/svc/_l/0000000000000009-0000000000000abc-0000002a", Head: true},
	{V: 1, ID: "n", Head: true},
}

func TestCodecMatchesJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := append([]record(nil), codecCases...)
	for range 2000 {
		cases = append(cases, randomRecord(rng))
	}
	for _, r := range cases {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got := encode(r)
		if string(got) != string(want) {
			t.Fatalf("encode(%+v) = %s, encoding/json writes %s", r, got, want)
		}
		dr, derr := decode(got)
		jr, jerr := jsonDecode(got)
		if derr != nil || jerr != nil || !sameRecord(dr, jr) {
			t.Fatalf("decode(%s) = %+v, %v; encoding/json reads %+v, %v", got, dr, derr, jr, jerr)
		}
	}
	// The direct path reads what encode writes with plain strings.
	if _, ok := decodePlain(encode(codecCases[2])); !ok {
		t.Error("decodePlain refused a record encode wrote")
	}
}

func randomRecord(rng *rand.Rand) record {
	const alphabet = "abcXYZ019-_./:<>&\"\\ \t\x00\x7fé\u2028"
	str := func() string {
		n := rng.IntN(12)
		b := make([]rune, 0, n)
		rs := []rune(alphabet)
		for range n {
			if rng.IntN(4) == 0 {
				b = append(b, rs[rng.IntN(len(rs))])
			} else {
				b = append(b, rune('a'+rng.IntN(26)))
			}
		}
		return string(b)
	}
	r := record{V: rng.IntN(3), ID: str(), Priority: rng.Int64() >> rng.IntN(64), Key: str(), Head: rng.IntN(2) == 0}
	if rng.IntN(2) == 0 {
		r.Priority = -r.Priority
	}
	if n := rng.IntN(6); n > 0 {
		r.Value = make([]byte, n-1)
		for i := range r.Value {
			r.Value[i] = byte(rng.IntN(256))
		}
	}
	return r
}

// FuzzDecode: decode reads any input as encoding/json does: the same
// record, or an error whenever it errs.
func FuzzDecode(f *testing.F) {
	for _, r := range codecCases {
		b, _ := json.Marshal(r)
		f.Add(b)
	}
	for _, s := range []string{
		`{"v":1,"id":"a","priority":01}`, `{"v":1,"id":"a","priority":-0}`, `{"v":1,"id":"a","priority":1e3}`,
		`{"v":1,"id":"a","priority":99999999999999999999}`, `{"v":1,"id":"a","priority":0,"value":"AA=="}`,
		`{"v":1,"id":"a","priority":0,"value":"A"}`, `{"v":1,"id":"a","priority":0,"value":""}`,
		`{"v":1,"id":"a","priority":0,"key":""}`, `{"v":1,"id":"a","priority":0} `, `{"v":1,"id":"a","priority":0}x`,
		`{"v":1,"id":"a","priority":0,"value":null}`, `{"V":1,"ID":"a","priority":0}`, `{"v":1,"id":"a\u0041","priority":0}`,
		`{"v":1,"id":"a","priority":0,"id":"b"}`, `{"v":1,"id":"a","priority":0,"value":"AA==","key":"k"}`,
		`{"v":1,"id":"a","priority":0,"key":"k","head":true}`, `{"v":1,"id":"a","priority":0,"head":false}`,
		`{"v":1,"id":"a","priority":0,"head":true,"key":"k"}`, `{"v":1,"id":"a","priority":0,"head":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dr, derr := decode(data)
		jr, jerr := jsonDecode(data)
		if (derr == nil) != (jerr == nil) || (derr == nil && !sameRecord(dr, jr)) {
			t.Fatalf("decode(%q) = %+v, %v; encoding/json reads %+v, %v", data, dr, derr, jr, jerr)
		}
		if r, ok := decodePlain(data); ok && !sameRecord(r, jr) {
			t.Fatalf("decodePlain(%q) = %+v; encoding/json reads %+v", data, r, jr)
		}
	})
}

// FuzzEncode: encode writes what encoding/json writes.
func FuzzEncode(f *testing.F) {
	for _, r := range codecCases {
		f.Add(r.V, r.ID, r.Priority, r.Value, r.Key)
	}
	f.Fuzz(func(t *testing.T, v int, id string, priority int64, value []byte, key string) {
		r := record{V: v, ID: id, Priority: priority, Value: value, Key: key}
		want, _ := json.Marshal(r)
		if got := encode(r); string(got) != string(want) {
			t.Fatalf("encode(%+v) = %s, encoding/json writes %s", r, got, want)
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	data := encode(codecCases[2])
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			_, _ = decode(data)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			_, _ = jsonDecode(data)
		}
	})
}

func BenchmarkEncode(b *testing.B) {
	r := codecCases[2]
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			_ = encode(r)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(r)
		}
	})
}
