// Command reader will run a stateless input reader (paper IV.B).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "reader: not built yet")
	os.Exit(2)
}
