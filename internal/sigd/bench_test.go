package sigd_test

// closeBenchEnvs stops what the benchmarks share across their runs.
func closeBenchEnvs() {}
