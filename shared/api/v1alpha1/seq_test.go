package v1alpha1

import "testing"

func TestCompareSeq(t *testing.T) {
	tests := []struct {
		a, b string
		cmp  int
		ok   bool
	}{
		{"9", "10", -1, true}, // a shorter number is smaller: never compared as text alone
		{"10", "9", 1, true},
		{"12345", "12346", -1, true},
		{"12346", "12345", 1, true},
		{"777", "777", 0, true},
		{"", "5", 0, false},
		{"5", "", 0, false},
		{"0", "5", 0, false},
		{"05", "5", 0, false},
		{"5a", "5", 0, false},
		{"-5", "5", 0, false},
	}
	for _, tc := range tests {
		cmp, ok := CompareSeq(tc.a, tc.b)
		if cmp != tc.cmp || ok != tc.ok {
			t.Errorf("CompareSeq(%q, %q) = %d, %v; want %d, %v", tc.a, tc.b, cmp, ok, tc.cmp, tc.ok)
		}
	}
}
