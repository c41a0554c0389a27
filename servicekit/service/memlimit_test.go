package service

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

func TestMemoryLimitFollowsTheContainer(t *testing.T) {
	const v2, v1 = "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"
	tests := map[string]struct {
		env     string
		files   map[string]string
		want    MemoryLimit
		wantErr string
	}{
		"a cgroup v2 limit gives nine tenths of it": {
			files: map[string]string{v2: "536870912\n"}, want: MemoryLimit{Bytes: 483183820, Source: v2},
		},
		"cgroup v2 without a limit sets none": {files: map[string]string{v2: "max\n"}},
		"a cgroup v1 limit, where v2 is absent": {
			files: map[string]string{v1: "268435456\n"}, want: MemoryLimit{Bytes: 241591910, Source: v1},
		},
		"cgroup v1's unlimited value sets none":          {files: map[string]string{v1: "9223372036854771712\n"}},
		"no cgroup files (not in a container) sets none": {},
		"GOMEMLIMIT in the environment wins":             {env: "400MiB", files: map[string]string{v2: "536870912"}, want: MemoryLimit{Source: "GOMEMLIMIT"}},
		"an unparsable limit is an error naming the file": {
			files: map[string]string{v2: "lots"}, wantErr: v2 + `: "lots" is not a number of bytes`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "GOMEMLIMIT" {
					return tc.env
				}
				return ""
			}
			readFile := func(path string) ([]byte, error) {
				if s, ok := tc.files[path]; ok {
					return []byte(s), nil
				}
				return nil, fs.ErrNotExist
			}
			got, err := memoryLimit(getenv, readFile)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("memoryLimit = %+v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("memoryLimit = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestMemoryLimitReportsAnUnreadableFile(t *testing.T) {
	denied := errors.New("permission denied")
	_, err := memoryLimit(func(string) string { return "" }, func(string) ([]byte, error) { return nil, denied })
	if !errors.Is(err, denied) || !strings.Contains(err.Error(), "/sys/fs/cgroup/memory.max") {
		t.Fatalf("err = %v; want the read error, naming the file", err)
	}
}
