package dispatch

import (
	"strings"
	"testing"

	"github.com/aicr-run/aicr-operator/shared/bus"
)

// TestDecodeErrorsAreTerminal proves that a message that does not decode is dropped, not
// redelivered forever.
func TestDecodeErrorsAreTerminal(t *testing.T) {
	cases := map[string]string{
		"not JSON":              `{"type":`,
		"a field of wrong type": `{"type":"aicr.v1.ApplyCommand","id":"x","step":{"index":"three"}}`,
		"a list for an object":  `[]`,
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			m := &Message{Type: bus.TypeApplyCommand, Data: []byte(data)}
			err := m.Decode(&bus.ApplyCommand{})
			if err == nil || !IsTerminal(err) {
				t.Fatalf("Decode error = %v, want a Terminal error", err)
			}
			if !strings.HasPrefix(err.Error(), "decode aicr.v1.ApplyCommand: ") {
				t.Errorf("error %q does not name the message type", err)
			}
		})
	}
}
