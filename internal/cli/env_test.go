package cli

import (
	"flag"
	"testing"
)

func TestApplyEnvFillsOnlyUnsetFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	a := fs.String("s3-endpoint", "", "")
	b := fs.Int("workers-max", 4, "")
	var l List
	fs.Var(&l, "kafka-brokers", "")
	t.Setenv("SIG_S3_ENDPOINT", "from-env:9000")
	t.Setenv("SIG_WORKERS_MAX", "9")
	t.Setenv("SIG_KAFKA_BROKERS", "a:1, b:2")
	if err := fs.Parse([]string{"--workers-max", "7"}); err != nil {
		t.Fatal(err)
	}
	if err := ApplyEnv(fs); err != nil {
		t.Fatal(err)
	}
	if *a != "from-env:9000" || *b != 7 || len(l) != 2 || l[1] != "b:2" {
		t.Fatalf("got %q %d %v", *a, *b, l)
	}
	t.Setenv("SIG_WORKERS_MAX", "many")
	fs2 := flag.NewFlagSet("y", flag.ContinueOnError)
	fs2.Int("workers-max", 4, "")
	_ = fs2.Parse(nil)
	if err := ApplyEnv(fs2); err == nil {
		t.Fatal("bad env value accepted")
	}
}
