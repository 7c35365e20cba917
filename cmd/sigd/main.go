// Command sigd will run the SIG daemon: the matching frontend, queues,
// in-process workers, ingestion, the web UI and metrics.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "sigd: not built yet")
	os.Exit(2)
}
