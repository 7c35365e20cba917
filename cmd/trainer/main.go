// Command trainer will run one emulated TPU training job with its controller.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "trainer: not built yet")
	os.Exit(2)
}
