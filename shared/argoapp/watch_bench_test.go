package argoapp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	restclientwatch "k8s.io/client-go/rest/watch"
)

// gpuStackValues is a Helm values object of about 13 KiB, the size of the larger GPU-stack
// charts' values (the benchmarks of e2e/bench generate them from the real charts' shapes; this
// package cannot import them): components with images, resources, probes, environment and
// arguments.
func gpuStackValues() json.RawMessage {
	values := map[string]any{}
	for c := 0; c < 12; c++ {
		env := []any{}
		for k := 0; k < 6; k++ {
			env = append(env, map[string]any{"name": fmt.Sprintf("COMPONENT_%d_SETTING_%d", c, k), "value": fmt.Sprintf("value-%d-%d", c, k)})
		}
		values[fmt.Sprintf("component%d", c)] = map[string]any{
			"enabled": c%3 != 0,
			"image":   map[string]any{"repository": "nvcr.io/nvidia/cloud-native/component", "tag": fmt.Sprintf("v25.%d.0", c), "pullPolicy": "IfNotPresent"},
			"resources": map[string]any{
				"requests": map[string]any{"cpu": "100m", "memory": "128Mi"},
				"limits":   map[string]any{"cpu": "500m", "memory": "512Mi"},
			},
			"livenessProbe": map[string]any{"httpGet": map[string]any{"path": "/healthz", "port": 8080 + c}, "initialDelaySeconds": 10, "periodSeconds": 15},
			"env":           env,
			"args":          []any{"--metrics-bind-address=:8080", fmt.Sprintf("--leader-elect=%t", c%2 == 0), "--zap-log-level=info"},
			"nodeSelector":  map[string]any{"nvidia.com/gpu.present": "true"},
			"tolerations":   []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}},
		}
	}
	raw, err := json.Marshal(values)
	if err != nil {
		panic(err)
	}
	return raw
}

// benchStream is a watch stream of n MODIFIED events of an Application carrying values in its
// spec and in Argo CD's two copies of them (comparedTo and the last sync's source).
func benchStream(b *testing.B, n int, values json.RawMessage) []byte {
	b.Helper()
	var app map[string]any
	if err := json.Unmarshal([]byte(strings.ReplaceAll(eventApp, "\n", "")), &app); err != nil {
		b.Fatal(err)
	}
	v := json.RawMessage(values)
	app["spec"].(map[string]any)["source"].(map[string]any)["helm"].(map[string]any)["valuesObject"] = v
	status := app["status"].(map[string]any)
	status["sync"].(map[string]any)["comparedTo"].(map[string]any)["source"].(map[string]any)["helm"].(map[string]any)["valuesObject"] = v
	status["operationState"].(map[string]any)["operation"].(map[string]any)["sync"].(map[string]any)["source"] =
		app["spec"].(map[string]any)["source"]
	var buf bytes.Buffer
	for i := 0; i < n; i++ {
		app["metadata"].(map[string]any)["resourceVersion"] = fmt.Sprint(5000 + i)
		event, err := json.Marshal(map[string]any{"type": "MODIFIED", "object": app})
		if err != nil {
			b.Fatal(err)
		}
		buf.Write(event)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// clientGoDecoder is the decoder client-go's Request.Watch builds for a JSON watch of this
// package's client.
func clientGoDecoder(b *testing.B, body io.ReadCloser) watch.Decoder {
	b.Helper()
	info, ok := runtime.SerializerInfoForMediaType(Codecs.WithoutConversion().SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok || info.StreamSerializer == nil {
		b.Fatal("no JSON stream serializer")
	}
	objects := Codecs.WithoutConversion().DecoderToVersion(info.Serializer, SchemeGroupVersion)
	frames := info.StreamSerializer.Framer.NewFrameReader(body)
	return restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), objects)
}

// BenchmarkWatchDecode decodes a stream of 40 watch events of an Application with small values
// and with GPU-stack-sized ones, by this package's decoder and by client-go's: an op is the
// whole stream.
func BenchmarkWatchDecode(b *testing.B) {
	const events = 40
	for _, size := range []struct {
		name   string
		values json.RawMessage
	}{
		{"small-values", json.RawMessage(`{"replicas":2,"message":"v1"}`)},
		{"gpu-stack-values", gpuStackValues()},
	} {
		stream := benchStream(b, events, size.values)
		for _, dec := range []struct {
			name string
			new  func(io.ReadCloser) watch.Decoder
		}{
			{"one-pass", func(r io.ReadCloser) watch.Decoder { return newEventDecoder(r) }},
			{"client-go", func(r io.ReadCloser) watch.Decoder { return clientGoDecoder(b, r) }},
		} {
			b.Run(size.name+"/"+dec.name, func(b *testing.B) {
				b.SetBytes(int64(len(stream)))
				b.ReportAllocs()
				for b.Loop() {
					d := dec.new(io.NopCloser(bytes.NewReader(stream)))
					got := 0
					for {
						_, _, err := d.Decode()
						if err == io.EOF {
							break
						}
						if err != nil {
							b.Fatal(err)
						}
						got++
					}
					if got != events {
						b.Fatalf("%d events, want %d", got, events)
					}
				}
			})
		}
	}
}
