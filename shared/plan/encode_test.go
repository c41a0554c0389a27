package plan

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// stdlibCanonical is the canonical form as encoding/json writes it: the definition the hand
// encoder must match byte for byte.
func stdlibCanonical(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func TestCanonicalEncoderMatchesEncodingJSON(t *testing.T) {
	tests := map[string]struct {
		values string
	}{
		"nested mappings and lists with numbers as written": {values: `{"b":{"z":1.50,"a":[1,-0.0,2e10,3E-2,{"k":null}]},"a":true,"c":false}`},
		"empty mapping and list":                            {values: `{"m":{},"l":[]}`},
		"HTML characters stay literal":                      {values: `{"<k>":"a<b>&c"}`},
		"quotes, backslashes and control characters":        {values: "{\"s\":\"q\\\" b\\\\ \\b\\f\\n\\r\\t \\u0000 \\u001f \\u007f\"}"},
		"line and paragraph separators are escaped":         {values: "{\"s\":\"a\u2028b\u2029c\"}"},
		"non-ASCII text stays literal":                      {values: `{"s":"grüße 日本 😀"}`},
		"keys sorted by bytes":                              {values: `{"b":1,"B":2,"a":3,"ä":4,"_":5,"aa":6}`},
		"many keys":                                         {values: `{"k01":1,"k02":2,"k03":3,"k04":4,"k05":5,"k06":6,"k07":7,"k08":8,"k09":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k18":18}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v, err := decodeObject([]byte(tc.values))
			if err != nil {
				t.Fatal(err)
			}
			p := &Plan{APIVersion: PlanAPIVersion, Bundle: BundleMeta{Name: "s<&>", Version: "1\n"}, Releases: []Release{
				{Name: "a", Namespace: "ns", Chart: ChartRef{Path: "charts/a", Digest: "sha256:00"}, Values: v},
				{Name: "b", Namespace: "ns", Chart: ChartRef{Path: "charts/b", Digest: "sha256:01"}, DependsOn: []string{"a"}, ReadinessGate: true, Values: map[string]any{}},
				{Name: "c", Namespace: "ns", Chart: ChartRef{Path: "charts/c", Digest: "sha256:02"}},
			}}
			got, spans, err := p.appendCanonical(nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(stdlibCanonical(t, p)), string(got)); diff != "" {
				t.Errorf("canonical form differs from encoding/json (-want +got):\n%s", diff)
			}
			for i, r := range p.Releases {
				if diff := cmp.Diff(string(stdlibCanonical(t, r.Values)), string(got[spans[i][0]:spans[i][1]])); diff != "" {
					t.Errorf("values span of %s (-want +got):\n%s", r.Name, diff)
				}
			}
		})
	}
}

func TestAppendStringInvalidUTF8(t *testing.T) {
	for _, s := range []string{"\xff", "a\xc3", "\xed\xa0\x80", "ok\x80ok"} {
		if diff := cmp.Diff(string(stdlibCanonical(t, s)), string(appendString(nil, s))); diff != "" {
			t.Errorf("%q (-want +got):\n%s", s, diff)
		}
	}
}

// FuzzCanonicalEncoder checks the hand encoder against encoding/json on arbitrary JSON values.
func FuzzCanonicalEncoder(f *testing.F) {
	f.Add([]byte(`{"a":[1,2.5,"x<y>"],"b":{"c":null,"d":true}}`))
	f.Add([]byte("\"\\u2028\\u0007\xff\""))
	f.Add([]byte(`[1e400, -0, 0.1e-7]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := decodeValue(data)
		if err != nil {
			return
		}
		got, err := appendValue(nil, v)
		if err != nil {
			t.Fatalf("appendValue: %v", err)
		}
		if diff := cmp.Diff(string(stdlibCanonical(t, v)), string(got)); diff != "" {
			t.Fatalf("differs from encoding/json (-want +got):\n%s", diff)
		}
	})
}

// stdlibDecode is decodeValue's definition: encoding/json with UseNumber, one value.
func stdlibDecode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errSlowPath
	}
	return v, nil
}

func TestFastDecodeMatchesEncodingJSON(t *testing.T) {
	tests := map[string]struct {
		doc string
	}{
		"nested values with numbers as written": {doc: ` {"b":{"z":1.50,"a":[1,-0.0,2e10,3E-2,{"k":null}]},"a":true,"c":false} `},
		"escapes":                               {doc: `{"s":"q\" b\\ \/ \b\f\n\r\t \u0041\u00e9\u2028 \ud83d\ude00"}`},
		"unpaired surrogates":                   {doc: `["\ud83d", "\ude00x", "\ud83d\u0041", "\ud83d\ud83d\ude00"]`},
		"invalid UTF-8 becomes U+FFFD":          {doc: "[\"a\xffb\", \"\xc3\", \"\\n\xff\"]"},
		"repeated key: the last wins":           {doc: `{"a":1,"a":2}`},
		"empty containers":                      {doc: `{"m":{},"l":[],"s":""}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			want, err := stdlibDecode([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			got, err := fastDecode([]byte(tc.doc))
			if err != nil {
				t.Fatalf("fast path refused a valid document: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzFastDecode checks that the fast decoder accepts only what encoding/json accepts and
// decodes it to the same value.
func FuzzFastDecode(f *testing.F) {
	f.Add([]byte(`{"a":[1,2.5,"x<y>"],"b":{"c":null,"d":true}}`))
	f.Add([]byte(`"\ud83d\ude00\ud800\u0041"`))
	f.Add([]byte("[\"\xff\", 1e400, -0, 0.1e-7, 01, 1.]"))
	f.Add([]byte(`{"a":1} ]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := fastDecode(data)
		if err != nil {
			return // the slow path decides
		}
		want, err := stdlibDecode(data)
		if err != nil {
			t.Fatalf("fast path accepted what encoding/json refuses (%v)", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("differs from encoding/json (-want +got):\n%s", diff)
		}
	})
}

// TestOrderedDecodeWritesTheCanonicalForm: Resolve's values (every mapping an *object, members
// put in key order as they are read) are written exactly as encoding/json writes the same
// document decoded into maps: keys in byte order, a repeated key's last value, nested mappings
// inside lists.
func TestOrderedDecodeWritesTheCanonicalForm(t *testing.T) {
	tests := map[string]struct {
		doc string
	}{
		"keys out of order at every depth":  {doc: `{"z":{"b":1,"a":[{"y":true,"x":null}]},"a":"s","m":{}}`},
		"keys already in order":             {doc: `{"a":1,"b":{"c":2,"d":3}}`},
		"repeated key: the last wins":       {doc: `{"b":1,"a":2,"b":3,"a":{"x":1},"c":0,"a":4}`},
		"repeated key inside a list's item": {doc: `[{"k":1,"k":{"z":1,"y":2}}]`},
		"keys sorted by bytes":              {doc: `{"b":1,"B":2,"a":3,"ä":4,"_":5,"aa":6,"a\u0000":7}`},
		"escaped keys":                      {doc: `{"\u0062":1,"a\n":2,"\ud83d\ude00":3}`},
		"many keys":                         {doc: `{"k18":18,"k02":2,"k11":11,"k04":4,"k15":15,"k06":6,"k17":17,"k08":8,"k09":9,"k10":10,"k03":3,"k12":12,"k13":13,"k14":14,"k05":5,"k16":16,"k07":7,"k01":1}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			want, err := stdlibDecode([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			v, err := fastDecodeOrdered([]byte(tc.doc))
			if err != nil {
				t.Fatalf("fast path refused a valid document: %v", err)
			}
			got, err := appendValue(nil, v)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(stdlibCanonical(t, want)), string(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestInsertingIntoADecodedMappingLeavesItsNeighboursAlone: the decoder hands out the members of
// consecutive mappings from one array; a key placed into one mapping must not overwrite the
// first member of the mapping read after it.
func TestInsertingIntoADecodedMappingLeavesItsNeighboursAlone(t *testing.T) {
	root, err := decodeOrderedObject(&fastDecoder{ordered: true}, []byte(`{"a":{"m":1},"b":{"n":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := setCreating(root, []Segment{{Key: "a"}, {Key: "z"}}, "placed"); err != nil {
		t.Fatal(err)
	}
	got, err := appendValue(nil, root)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":{"m":1,"z":"placed"},"b":{"n":2}}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// FuzzOrderedDecode checks Resolve's decoder (mappings as *object) against encoding/json: it
// accepts only what encoding/json accepts, exactly what the map decoder accepts, and what it
// decodes is written as encoding/json writes the map decoding.
func FuzzOrderedDecode(f *testing.F) {
	f.Add([]byte(`{"b":[1,2.5,"x<y>"],"a":{"d":null,"c":true}}`))
	f.Add([]byte(`{"a":1,"a":{"z":2,"y":3},"0":[]}`))
	f.Add([]byte(`[{"\u00e9":1,"e":2}, {}]`))
	f.Add([]byte(`{"a":1} ]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := fastDecodeOrdered(data)
		if _, errMap := fastDecode(data); (err == nil) != (errMap == nil) {
			t.Fatalf("the ordered decoder's verdict %v differs from the map decoder's %v", err, errMap)
		}
		if err != nil {
			return // the slow path decides
		}
		want, err := stdlibDecode(data)
		if err != nil {
			t.Fatalf("fast path accepted what encoding/json refuses (%v)", err)
		}
		gotJSON, err := appendValue(nil, got)
		if err != nil {
			t.Fatalf("appendValue: %v", err)
		}
		if diff := cmp.Diff(string(stdlibCanonical(t, want)), string(gotJSON)); diff != "" {
			t.Fatalf("differs from encoding/json (-want +got):\n%s", diff)
		}
	})
}
