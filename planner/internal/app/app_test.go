package app

import (
	"flag"
	"fmt"
	"testing"
)

func TestDefaultKubeRateLimits(t *testing.T) {
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	var o Options
	o.BindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%v %d %s %s", o.KubeQPS, o.KubeBurst, fs.Lookup("kube-qps").DefValue, fs.Lookup("kube-burst").DefValue)
	if want := "1000 2000 1000 2000"; got != want {
		t.Errorf("kube rate limits = %q, want %q", got, want)
	}
	if err := fs.Parse([]string{"--kube-qps=20", "--kube-burst=30"}); err != nil {
		t.Fatal(err)
	}
	if o.KubeQPS != 20 || o.KubeBurst != 30 {
		t.Errorf("flags did not override the defaults: %v %d", o.KubeQPS, o.KubeBurst)
	}
}
