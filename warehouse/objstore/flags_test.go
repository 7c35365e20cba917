package objstore_test

import (
	"flag"
	"testing"

	"github.com/sigdata/sig/internal/cli"
	"github.com/sigdata/sig/warehouse/objstore"
)

// TestFlags: the flags fill the config, the bucket defaults to
// the warehouse's, and SIG_S3_* fill what the command line left unset.
func TestFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c := objstore.Flags(fs, "endpoint")
	t.Setenv("SIG_S3_SECRET_KEY", "from-env")
	t.Setenv("SIG_S3_ENDPOINT", "ignored:1")
	if err := fs.Parse([]string{"--s3-endpoint", "h:9000", "--s3-access-key", "ak", "--s3-secure"}); err != nil {
		t.Fatal(err)
	}
	if err := cli.ApplyEnv(fs); err != nil {
		t.Fatal(err)
	}
	if c.Endpoint != "h:9000" || c.AccessKey != "ak" || c.SecretKey != "from-env" || c.Bucket != "sig" || !c.Secure {
		t.Fatalf("config %+v", *c)
	}
}
