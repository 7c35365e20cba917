package main

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

type side struct {
	rowsPerCPUSec float64
	rowsPerSec    float64
}

func (s *side) rate() float64 {
	if s.rowsPerCPUSec > 0 {
		return s.rowsPerCPUSec
	}
	return s.rowsPerSec
}

func main() {
	best := map[string]map[string]*side{} // case -> arrow|plain -> best
	var order []string
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 { // -cpu suffix
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			continue
		}
		cas, which := name[:i], name[i+1:]
		cas = strings.TrimPrefix(strings.TrimPrefix(cas, "BenchmarkOp/"), "Benchmark")
		var s side
		for k := 2; k+1 < len(f); k++ {
			v, err := strconv.ParseFloat(f[k], 64)
			if err != nil {
				continue
			}
			switch f[k+1] {
			case "rows/s":
				s.rowsPerSec = v
			case "rows/cpu-s":
				s.rowsPerCPUSec = v
			}
		}
		if s.rate() == 0 {
			continue
		}
		if best[cas] == nil {
			best[cas] = map[string]*side{}
			order = append(order, cas)
		}
		b := best[cas][which]
		if b == nil {
			b = &side{}
			best[cas][which] = b
		}
		b.rowsPerCPUSec = max(b.rowsPerCPUSec, s.rowsPerCPUSec)
		b.rowsPerSec = max(b.rowsPerSec, s.rowsPerSec)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%-38s %15s %15s %7s   %13s %13s %7s\n", "case", "arrow rows/cpu-s", "plain rows/cpu-s", "ratio", "arrow rows/s", "plain rows/s", "ratio")
	var below, chains []string
	var ratios []float64
	for _, cas := range order {
		a, p := best[cas]["arrow"], best[cas]["plain"]
		if a == nil || p == nil {
			continue
		}
		r := a.rate() / p.rate()
		mark := ""
		switch {
		case strings.HasPrefix(cas, "TruncateChain/"):
			// Not an op: truncate with what reads its result.
			chains = append(chains, fmt.Sprintf("%s %.2f", strings.TrimPrefix(cas, "TruncateChain/"), r))
		case r < 1:
			mark = "  < 1"
			below = append(below, cas)
			fallthrough
		default:
			ratios = append(ratios, r)
		}
		fmt.Printf("%-38s %15s %15s %7.2f   %13s %13s %7.2f%s\n", cas, human(a.rate()), human(p.rate()), r,
			human(a.rowsPerSec), human(p.rowsPerSec), a.rowsPerSec/p.rowsPerSec, mark)
	}
	sort.Float64s(ratios)
	if len(ratios) > 0 {
		fmt.Printf("\n%d op cases (TypicalComponent included); CPU-time ratio min %.2f, median %.2f, max %.2f", len(ratios), ratios[0], ratios[len(ratios)/2], ratios[len(ratios)-1])
		if len(below) > 0 {
			fmt.Printf("; below 1: %s", strings.Join(below, ", "))
		}
		fmt.Println()
	}
	if len(chains) > 0 {
		fmt.Printf("truncate chains (not ops; see notes): %s\n", strings.Join(chains, ", "))
	}
}

func human(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
