package eviction

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPolicyData(t *testing.T) {
	data, err := os.ReadFile("testdata/policy.txt")
	if err != nil {
		t.Fatal(err)
	}
	sec := func(s string) time.Time {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("bad time %q", s)
		}
		return time.Unix(n, 0)
	}
	kv := func(fields []string) map[string]string {
		m := map[string]string{}
		for _, f := range fields {
			k, v, _ := strings.Cut(f, "=")
			m[k] = v
		}
		return m
	}
	cases := strings.Split(string(data), "=== ")[1:]
	if len(cases) < 8 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		lines := strings.Split(strings.TrimSpace(c), "\n")
		name := lines[0]
		t.Run(name, func(t *testing.T) {
			var p Policy
			var now time.Time
			var cands []Candidate
			var want []string
			inExpect := false
			for _, l := range lines[1:] {
				f := strings.Fields(l)
				switch {
				case len(f) == 0:
				case f[0] == "policy":
					m := kv(f[1:])
					ttl, _ := strconv.Atoi(m["ttl"])
					b, _ := strconv.ParseInt(m["budget"], 10, 64)
					p = Policy{TTL: time.Duration(ttl) * time.Second, BudgetBytes: b}
					now = sec(m["now"])
				case f[0] == "expect":
					inExpect = true
					if len(f) > 1 && f[1] == "none" {
						want = []string{}
					}
				case inExpect:
					want = append(want, l)
				default:
					m := kv(f[1:])
					bytes, _ := strconv.ParseInt(m["bytes"], 10, 64)
					blocks, _ := strconv.Atoi(m["blocks"])
					cands = append(cands, Candidate{Component: f[0], LastRequested: sec(m["last"]), Bytes: bytes, Blocks: blocks})
				}
			}
			if !inExpect {
				t.Fatal("the case has no expect line")
			}
			var got []string
			for _, d := range p.Decide(now, cands) {
				got = append(got, d.Component+" "+d.Reason)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}
