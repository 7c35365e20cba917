# bench/lib.sh: what the benchmark scripts that summarize `go test -bench`
# output share (ps.sh, reader.sh, transform.sh). Source it from the
# repository root (the scripts cd there first).

# raw holds the go test output; it is removed when the script exits.
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT

# bench_go_test ARGS...: runs `go test ARGS`, saying so on stderr, its output
# to stderr and to $raw; cmd is the command, for the report's header.
bench_go_test() {
	cmd=(go test "$@")
	echo "running: ${cmd[*]}" >&2
	"${cmd[@]}" | tee "$raw" >&2
}

# median NAME UNIT: the median of the metric UNIT of benchmark NAME (with any
# -GOMAXPROCS suffix) over the runs in $raw (the mean of the two middle ones
# for an even count); n/a when there is none.
median() {
	awk -v name="$1" -v unit="$2" '
		$1 ~ "^"name"(-[0-9]+)?$" { for (i = 3; i < NF; i += 2) if ($(i+1) == unit) print $i }
	' "$raw" | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2] + v[NR/2+1]) / 2 }'
}
