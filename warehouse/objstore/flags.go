package objstore

import "flag"

// Flags registers the object-store flags every command that reaches the
// warehouse takes (--s3-endpoint, --s3-access-key, --s3-secret-key,
// --s3-bucket, --s3-secure; SIG_S3_* in the environment through
// internal/cli's ApplyEnv) and returns the config they fill. endpointHelp
// says what the endpoint is for in this command. The caller sets the rest
// (RetryFor, Logger) and checks that an endpoint was given where one is
// required.
func Flags(fs *flag.FlagSet, endpointHelp string) *Config {
	c := &Config{}
	fs.StringVar(&c.Endpoint, "s3-endpoint", "", endpointHelp)
	fs.StringVar(&c.AccessKey, "s3-access-key", "", "S3 access key")
	fs.StringVar(&c.SecretKey, "s3-secret-key", "", "S3 secret key")
	fs.StringVar(&c.Bucket, "s3-bucket", "sig", "bucket of the warehouse")
	fs.BoolVar(&c.Secure, "s3-secure", false, "use HTTPS for S3")
	return c
}
